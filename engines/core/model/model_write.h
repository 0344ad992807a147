/* Writers: any model description -> GGUF v3 file, or a safetensors directory. */
#ifndef BENCH_MODEL_WRITE_H
#define BENCH_MODEL_WRITE_H

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

/* llama2.c's tokenizer.bin of vocab v (pieces' U+2581 written as ' ', as llama2.c's
 * exporter does). The format fixes <unk>=0, <s>=1, </s>=2: another layout is an error. */
int llama2c_write_tokenizer(const char *path, const model_vocab *v, char *err, size_t errlen);

/* Where the tokenizer of a llama2.c checkpoint written by bench goes:
 * "dir/x.bin" -> "dir/x.tokenizer.bin" (any other name: name + ".tokenizer.bin").
 * Returns 0, or -1 when buf is too small. */
int llama2c_tokenizer_path(const char *model_path, char *buf, size_t len);

#endif
