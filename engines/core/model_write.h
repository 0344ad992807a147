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

#endif
