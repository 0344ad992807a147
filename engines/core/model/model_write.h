/* Writers: any model description -> a GGUF v3 file, a safetensors folder, or a llama2.c
 * checkpoint; and the table of these formats (model_writers), which everything that
 * names a format bench writes reads. */
#ifndef BENCH_MODEL_WRITE_H
#define BENCH_MODEL_WRITE_H

#include <fcntl.h>

#include "model.h"

/* Writes the bytes of tensor i (in tensors[i].dtype, tensors[i].nbytes long) into dst. */
typedef int (*model_fill_fn)(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen);

typedef struct model_write_src {
    const char *name;               /* general.name; may be NULL */
    const model_config *cfg;        /* cfg->rope says the q/k row layout the filled bytes have */
    const model_vocab *vocab;       /* written as tokenizer.ggml.* / tokenizer.json; n == 0: none */
    int n_tensors;
    const model_tensor *tensors;    /* name, dtype, n_dims, ne, nbytes (file and offset ignored) */
    model_fill_fn fill;             /* called once per tensor, in order */
    void *user;
} model_write_src;

/* GGUF v3, llama architecture, 32-byte alignment, q/k rows in the interleaved layout. */
int gguf_write(const char *path, const model_write_src *src, char *err, size_t errlen);

/* dir/config.json, dir/tokenizer.json, and dir/model.safetensors, or, when the
 * tensors exceed shard_bytes (0: never shard), dir/model-0000i-of-0000n.safetensors
 * with dir/model.safetensors.index.json. HF names and HF's q/k row layout.
 * F32/F16/BF16 only. */
int safetensors_write(const char *dir, const model_write_src *src, uint64_t shard_bytes,
                      char *err, size_t errlen);

/* A llama2.c v0 checkpoint (see model.c for the layout): f32 only, q/k rows in
 * the interleaved layout (rows filled as ROPE_HALF are permuted back), the
 * classifier shared when output.weight is absent (else vocab_size < 0 in the
 * header), and the freq_cis_real/imag tables (seq_len x head_dim/2 each) computed
 * from cfg->rope_theta. cfg->seq_len is the context written in the header.
 * Every tensor of the llama architecture must be present, and no other.
 * fill is called once per tensor in the file's order, not the array's.
 * Written to a temporary file and renamed: a failed write leaves no file. */
int llama2c_write(const char *path, const model_write_src *src, char *err, size_t errlen);

/* Called by each writer on a file it has written and synced, before closing it: drops the
 * file's pages from the page cache. The pages a write leaves cached are the write's folios,
 * small ones on ext4, and a later mmap maps them with 4 KiB entries; read in again, they come
 * as large folios (2 MiB where the mapping asks for MADV_HUGEPAGE, as loader mmap's does) and
 * are mapped by one entry each. Decode walks the page tables once per entry it reads through:
 * f32 llama-110m decoded at 88 tokens/s from a just-written file and at 118 once it had been
 * read in again (llama.cpp's mmap: 85 and 114), 2-vCPU AMD EPYC family 26 KVM guest, six
 * interleaved pairs (docs/PERFORMANCE.md). The first load after a write then reads the file
 * from the disk, as after a reboot. */
static inline void model_write_drop_cache(int fd) {
    /* advice only: where the kernel keeps the pages, the file is as written, only slower to map */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* llama2.c's tokenizer.bin of vocab v (pieces' U+2581 written as ' ', as llama2.c's
 * exporter does). The format fixes <unk>=0, <s>=1, </s>=2: another layout is an error. */
int llama2c_write_tokenizer(const char *path, const model_vocab *v, char *err, size_t errlen);

/* What a llama2.c checkpoint of src cannot keep, into buf ("" when nothing): it has no rope
 * theta field, and readers assume 10000. Returns buf. */
const char *llama2c_lost(const model_write_src *src, char *buf, size_t len);

/* Where the tokenizer of a llama2.c checkpoint written by bench goes:
 * "dir/x.bin" -> "dir/x.tokenizer.bin" (any other name: name + ".tokenizer.bin").
 * Returns 0, or -1 when buf is too small. */
int llama2c_tokenizer_path(const char *model_path, char *buf, size_t len);

/* ======================= the formats bench writes ======================= */

/* Writes src as path in the row's format. shard_bytes: the most bytes a file holds (0: one
 * file), read by a format that can shard and ignored by the others. */
typedef int (*model_write_fn)(const char *path, const model_write_src *src, uint64_t shard_bytes, char *err,
                              size_t errlen);

/* One format bench writes (bench model convert and synth, a scenario's model.synth). Its name
 * is model_format_name(format): the name model_open reports for what it reads back. */
typedef struct model_writer {
    model_format format;        /* what model_open says the written model is */
    const char *suffix;         /* the ending of a path that takes this format by default (".gguf");
                                 * NULL: a folder, the format of a path with no row's ending (one row) */
    uint32_t dtypes;            /* bit (1u << t) for each bench_dtype t its tensors may be in; f32 in
                                 * every row (norms are f32) */
    int can_shard;              /* 1: splits into files of at most shard_bytes (convert --shard) */
    const char *about;          /* one line for the help: what is written */
    model_write_fn write;
    /* (optional) where the vocabulary goes when the format keeps it in a file beside the
     * model (llama2c: x.bin -> x.tokenizer.bin); NULL: it is inside the model. Returns 0, or
     * -1 when buf is too small. */
    int (*vocab_path)(const char *model_path, char *buf, size_t len);
    /* (with vocab_path) writes vocabulary v at path */
    int (*vocab_write)(const char *path, const model_vocab *v, char *err, size_t errlen);
    /* (optional) what the format cannot keep of src, for a note to the user, into buf; ""
     * when it keeps everything. Returns buf. NULL: it keeps everything. */
    const char *(*lost)(const model_write_src *src, char *buf, size_t len);
} model_writer;

/* The rows (gguf, safetensors, llama2c), ended by one whose write is NULL. The first row is
 * the format a scenario's model.synth takes when it names none. */
extern const model_writer model_writers[];

const char *model_writer_name(const model_writer *w);           /* model_format_name(w->format) */
const model_writer *model_writer_find(const char *name);        /* by name; NULL: none */
/* The row a path's ending picks: the row whose suffix it ends with, else the row with none
 * (the table has one: test_model_writers checks it). */
const model_writer *model_writer_for_path(const char *path);
/* Whether the row's tensors may be in dtype dt. */
int model_writer_holds(const model_writer *w, bench_dtype dt);

/* Texts for messages and help, into buf (truncated to len); each returns buf. */
/* The rows' names, sep between them: "gguf, safetensors, llama2c" */
const char *model_writer_names(char *buf, size_t len, const char *sep);
/* How a path picks its format: ".gguf -> gguf, .bin -> llama2c, else safetensors" */
const char *model_writer_suffix_rule(char *buf, size_t len);
/* The dtypes a row holds: "f32 only", "f32, f16 and bf16", or "every dtype bench reads" */
const char *model_writer_dtype_text(const model_writer *w, char *buf, size_t len);
/* Why dt is refused: "format safetensors holds f32, f16 and bf16, not q8_0" */
const char *model_writer_refusal(const model_writer *w, bench_dtype dt, char *buf, size_t len);

#endif
