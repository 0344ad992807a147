/* The Llama forward pass on the CPU: RMSNorm, RoPE, grouped-query attention
 * (through the KV module), SwiGLU, tied or untied classifier. Activations are
 * f32; weights are read in their stored dtype by the kernels. */
#ifndef BENCH_TRANSFORMER_H
#define BENCH_TRANSFORMER_H

#include "model.h"
#include "threadpool.h"
#include "../abi/kv.h"
#include "../abi/alloc.h"

typedef struct tf_matrix {
    const void *data;
    bench_dtype dtype;
    int rows, cols;
} tf_matrix;

typedef struct tf_layer {
    const float *attn_norm;     /* (dim) */
    const float *ffn_norm;      /* (dim) */
    tf_matrix wq;               /* (n_heads*hd, dim) */
    tf_matrix wk, wv;           /* (kv_dim, dim) */
    tf_matrix wo;               /* (dim, n_heads*hd) */
    tf_matrix w1, w3;           /* (hidden, dim) gate, up */
    tf_matrix w2;               /* (dim, hidden) down */
} tf_layer;

typedef struct tf_weights {
    tf_matrix tok_embd;         /* (vocab, dim) */
    const float *out_norm;      /* (dim) */
    tf_matrix output;           /* (vocab, dim); tok_embd when tied */
    tf_layer *layers;           /* (n_layers) */
} tf_weights;

/* Points the weights at the loaded tensor bytes (data[i] is tensor i of m). */
int tf_bind(const model *m, const void *const *data, tf_weights *w, char *err, size_t errlen);
void tf_unbind(tf_weights *w);

typedef struct tf_ctx {
    const model_config *cfg;
    const tf_weights *w;
    tp_pool *pool;
    const struct bench_kv_iface *kv;
    void *kv_ctx;
    const bench_allocator *alloc;   /* scratch and activations, taken and given back per call */
    uint64_t scratch_allocs;        /* allocations made for scratch, all calls */
} tf_ctx;

/* Runs n tokens at positions pos0.. of sequence seq. logits: (n_out, vocab) for the
 * last n_out positions (1 for generation, n for tests). The KV room must be reserved. */
int tf_forward(tf_ctx *t, int seq, const int *tokens, int n, int pos0, float *logits, int n_out,
               char *err, size_t errlen);

#endif
