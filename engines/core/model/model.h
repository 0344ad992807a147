/* One in-memory description of a Llama-family model, whatever file it came from.
 *
 * A model is its hyperparameters, its vocabulary, and a list of tensors, each
 * naming a file and a byte range in it. Parsing reads only headers: the tensor
 * bytes are brought in later by a loader module (see engines/abi/loader.h).
 *
 * Tensor names are GGUF's (llama.cpp's) names:
 *   token_embd.weight            (vocab, dim)        ne = {dim, vocab}
 *   output_norm.weight           (dim)
 *   output.weight                (vocab, dim)        absent when the classifier is tied to token_embd
 *   blk.N.attn_norm.weight       (dim)
 *   blk.N.attn_q.weight          (n_heads*hd, dim)
 *   blk.N.attn_k.weight          (n_kv_heads*hd, dim)
 *   blk.N.attn_v.weight          (n_kv_heads*hd, dim)
 *   blk.N.attn_output.weight     (dim, n_heads*hd)
 *   blk.N.ffn_norm.weight        (dim)
 *   blk.N.ffn_gate.weight        (hidden, dim)       w1
 *   blk.N.ffn_down.weight        (dim, hidden)       w2
 *   blk.N.ffn_up.weight          (hidden, dim)       w3
 * A matrix (rows, cols) is stored row-major; its GGUF dims are ne[0] = cols, ne[1] = rows.
 */
#ifndef BENCH_MODEL_H
#define BENCH_MODEL_H

#include <stdint.h>
#include <stddef.h>
#include "engines/abi/dtype.h"

typedef enum model_format {
    MODEL_FORMAT_LLAMA2C = 0,
    MODEL_FORMAT_GGUF,
    MODEL_FORMAT_SAFETENSORS,
} model_format;

const char *model_format_name(model_format f);

typedef enum rope_style {
    ROPE_INTERLEAVED = 0,   /* rotates pairs (2i, 2i+1) of each head: llama2.c, GGUF */
    ROPE_HALF,              /* rotates pairs (i, i + hd/2): HF's q/k row layout (rotate_half) */
} rope_style;

typedef struct model_config {
    int dim;            /* embedding width */
    int hidden_dim;     /* SwiGLU inner width */
    int n_layers;
    int n_heads;        /* query heads */
    int n_kv_heads;     /* key/value heads (GQA when < n_heads) */
    int vocab_size;
    int seq_len;        /* context length the engine allows (see model_open's note) */
    int seq_len_header; /* context length the file declares */
    float rope_theta;   /* RoPE frequency base */
    float rope_linear;  /* linear RoPE scaling: positions divided by this factor; 0: none */
    float norm_eps;     /* RMSNorm epsilon */
    rope_style rope;
} model_config;

#define MODEL_MAX_DIMS 4

typedef struct model_tensor {
    char *name;
    bench_dtype dtype;
    int n_dims;
    int64_t ne[MODEL_MAX_DIMS]; /* ne[0] is the innermost (contiguous) dimension */
    int file;                   /* index into model.files */
    uint64_t offset;            /* absolute byte offset in that file */
    uint64_t nbytes;
} model_tensor;

/* Token types, as GGUF's tokenizer.ggml.token_type */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER = 4, TOKEN_UNUSED = 5, TOKEN_BYTE = 6 };

/* Layers a model may have: the largest released have ~130 (Llama 3.1 405B: 126); a
 * larger count is a corrupt or hostile header, refused before a tensor per layer is made. */
#define MODEL_MAX_LAYERS 1024

/* The Unicode normalization a tokenizer.json's normalizer asks for (NFC, NFD, NFKC, NFKD, or
 * a Sequence of them), applied to the text before it is split (tokenizer/tokenizer.c). */
typedef enum model_norm { MODEL_NORM_NONE = 0, MODEL_NORM_NFC, MODEL_NORM_NFD, MODEL_NORM_NFKC, MODEL_NORM_NFKD } model_norm;
const char *model_norm_name(model_norm n);     /* "none", "NFC", ... */

/* A file as the kernel knows it: what a path named when it was read. A path can be swapped
 * for another file between two opens; the pair cannot, so whoever opens a model file again
 * (a loader, the worker's check) compares it with this. */
typedef struct model_file_id {
    unsigned long long dev, ino;
} model_file_id;

typedef struct model_vocab {
    int n;                  /* 0: no vocabulary in the model file */
    char **tokens;          /* (n) NUL-terminated UTF-8 pieces, as stored (▁ or ' ' for spaces) */
    float *scores;          /* (n) merge priority: higher merges first */
    int32_t *types;         /* (n) TOKEN_* (NORMAL when the format has none) */
    int bos, eos, unk;      /* -1 when unknown */
    int add_space_prefix;   /* SentencePiece adds a leading space to the text */
    /* Which tokenizer (engines/core/tokenizer/tokenizer.c dispatches on it): */
    char *model;            /* tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level
                             * BPE), ...; NULL when the source does not say */
    char *pre;              /* tokenizer.ggml.pre: the BPE pre-tokenizer family; NULL when absent */
    int n_merges;
    char **merges;          /* (n_merges) "left right", rank = index (byte-level BPE) */
    int n_pre_patterns;     /* > 0: the pre-tokenizer's split patterns, from a tokenizer.json */
    char **pre_patterns;    /* (n_pre_patterns) */
    int ignore_merges;      /* with pre_patterns: a word that is a token is not merged */
    char *pre_source;       /* with pre_patterns: the file they came from, for messages */
    char *unsupported;      /* what the source asks of the tokenizer that it does not do, or NULL */
    model_norm normalize;   /* tokenizer.json's Unicode normalizer; MODEL_NORM_NONE elsewhere */
    model_file_id source_id;    /* a tokenizer.bin's: the file read ({0, 0} for the others) */
    char *chat_template;    /* tokenizer.chat_template (Jinja text, never run: bench serve matches
                             * it to a built-in template, harness/net/chat_tmpl.h); NULL when absent */
} model_vocab;

typedef struct model {
    model_format format;
    model_config cfg;
    char *name;                 /* general.name or the file's base name */
    int n_files;
    char **files;               /* paths of the files holding tensor bytes */
    model_file_id *file_ids;    /* (n_files) the file each path named when it was parsed */
    int n_tensors;
    model_tensor *tensors;      /* (n_tensors, capacity cap_tensors) */
    int cap_tensors;
    /* name -> index into tensors, open addressing (model_add_tensor, model_reindex);
     * model_find scans when it does not cover every tensor (a model built by hand) */
    int32_t *tindex;            /* (tindex_mask + 1) index or -1 */
    uint32_t tindex_mask;
    int n_indexed;              /* tensors the index holds; == n_tensors when it is whole */
    model_vocab vocab;
} model;

/* Opens a model by content: a llama2.c checkpoint, a .gguf file, a .safetensors
 * file, a model.safetensors.index.json, or a directory holding one of those
 * (with config.json). tokenizer_path (optional) names a llama2.c tokenizer.bin;
 * it replaces any vocabulary found in the model, and must match its vocab size.
 * Every count and size is checked against the file; errors name the file. */
int model_open(const char *path, const char *tokenizer_path, model **out, char *err, size_t errlen);
/* Opens the vocabulary alone, no weights needed: a .gguf (llama.cpp's vocabulary-only
 * files too), a tokenizer.json or a directory holding one, or a llama2.c tokenizer.bin.
 * The model has no tensors and is not validated. */
int model_open_vocab(const char *path, model **out, char *err, size_t errlen);
void model_free(model *m);              /* m may be NULL or half-built */

const model_tensor *model_find(const model *m, const char *name);
uint64_t model_weight_bytes(const model *m);
uint64_t model_param_count(const model *m);

/* Checks that every tensor the forward pass needs is present with the right shape. */
int model_validate(const model *m, char *err, size_t errlen);

/* ---- helpers the format parsers share (model.c) ---- */
int model_add_tensor(model *m, const char *name, bench_dtype dt, int n_dims, const int64_t *ne,
                     int file, uint64_t offset, char *err, size_t errlen);
/* Adds path to the model's files (once), with the file it named when the parser read it (id);
 * the index, or -1 (out of memory, or the same path named two files: swapped during the parse). */
int model_add_file(model *m, const char *path, model_file_id id);
/* The file an open descriptor reads ({0, 0} where fstat fails, which no file is). */
model_file_id model_fd_id(int fd);
/* The file index of path among m->files, or -1. */
int model_find_file(const model *m, const char *path);
/* Opens path, one of m's files, to read its bytes again: flags as for open(2) (O_CLOEXEC
 * added); the descriptor, or -1 with err saying why, also when path names another file now
 * than the one parsed ("was replaced since"). */
int model_reopen_file(const model *m, const char *path, int flags, char *err, size_t errlen);
/* Rebuilds the name index after m->tensors was reordered (a sort). -1: out of memory. */
int model_reindex(model *m);
/* Opens a file to read, refusing what is not a regular file (a FIFO, a device, a
 * directory) before anything can block on it: a descriptor, or -1 with err naming the
 * path and what it is. */
int model_open_regular(const char *path, char *err, size_t errlen);
/* Number of elements, with overflow check; -1 on overflow. */
int64_t model_tensor_nelems(int n_dims, const int64_t *ne);
/* The dtype most of the bytes of the n tensors' matrices (2 dims or more) are in: what a GGUF's
 * general.file_type names, and the arithmetic bench generate's --bandwidth names for prefill.
 * BENCH_F32 where none. */
bench_dtype model_main_dtype(const model_tensor *tensors, int n);
void model_vocab_free(model_vocab *v);  /* model.c */
/* Reads a llama2.c tokenizer.bin (vocab.c) into v (expected_n > 0: must hold exactly that many tokens). */
int model_vocab_load_llama2c(const char *path, int expected_n, model_vocab *v, char *err, size_t errlen);

/* ---- format parsers (each fills a zeroed model; on error the caller frees it), which
 * model_open.c chooses among ---- */
int llama2c_open(const char *path, model *m, char *err, size_t errlen);
/* GGUF's llama mapping (gguf.c) over the container reader (gguf_read.h) */
int gguf_open(const char *path, model *m, char *err, size_t errlen);
int safetensors_open(const char *path, model *m, char *err, size_t errlen);
/* A tokenizer.json alone into m->vocab (no config.json: ids come from the file). */
int safetensors_read_tokenizer(const char *path, model *m, char *err, size_t errlen);

#endif
