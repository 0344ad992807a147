/* The Llama forward pass on the CPU: RMSNorm, RoPE, grouped-query attention
 * (through the KV module), SwiGLU, tied or untied classifier. Activations are
 * f32; weights are read in their stored dtype by the kernels. */
#ifndef BENCH_TRANSFORMER_H
#define BENCH_TRANSFORMER_H

#include "engines/core/model/model.h"
#include "threadpool.h"
#include "engines/abi/kv.h"
#include "engines/abi/alloc.h"
#include "engines/abi/device.h"

/* A weight matrix (data, dtype, rows, cols) and a layer's weights (its norms and seven
 * matrices) are the device ABI's types (engines/abi/device.h): the CPU's forward pass and a
 * device module read one description of the model, and devhost hands tf_bind's layers to a
 * device as they are. */
typedef bench_dev_matrix tf_matrix;
typedef bench_dev_layer tf_layer;

/* A layer's weight matrices, named once: the file's tensor (blk.<layer>.<name>.weight) and
 * the tf_layer field it binds to. tf_bind binds them from it, and whatever walks every
 * matrix (repack.c) reads it: a new matrix is a row here and a field in bench_dev_layer. */
typedef struct tf_matrix_slot {
    const char *name;   /* GGUF's: "attn_q", ... "ffn_up" */
    size_t offset;      /* offsetof(tf_layer, the field) */
} tf_matrix_slot;
enum { TF_LAYER_MATRICES = 7 };
extern const tf_matrix_slot tf_layer_matrices[TF_LAYER_MATRICES];

/* Matrix i (a row of tf_layer_matrices) of layer L. */
static inline tf_matrix *tf_layer_matrix(tf_layer *L, int i) {
    return (tf_matrix *)((char *)L + tf_layer_matrices[i].offset);
}

typedef struct tf_weights {
    tf_matrix tok_embd;         /* (vocab, dim) */
    const float *out_norm;      /* (dim) */
    tf_matrix output;           /* (vocab, dim); tok_embd when tied */
    tf_layer *layers;           /* (n_layers) */
    const float *rope_freqs;    /* (head_dim / 2) rope_freqs.weight, divides each pair's frequency; NULL: none */
} tf_weights;

/* Points the weights at the loaded tensor bytes (data[i] is tensor i of m). */
int tf_bind(const model *m, const void *const *data, tf_weights *w, char *err, size_t errlen);
void tf_unbind(tf_weights *w);

typedef struct tf_ctx {
    const model_config *cfg;
    const tf_weights *w;
    tp_pool *pool;
    const bench_kv *kv;             /* the engine's KV instance (engine.c holds the handle) */
    const bench_allocator *alloc;   /* the activations' scratch comes from it */
    uint64_t scratch_allocs;        /* allocations made for scratch, all calls */
    /* 0 (the default): one block kept between calls, grown when a call needs more and given
     * back by tf_release, as production engines reserve their compute buffers once; 1: taken
     * and given back every call, so that an allocator study times the allocator on it
     * (engine_spec.scratch). */
    int scratch_per_pass;
    void *scratch;                  /* the kept block; NULL until the first call */
    size_t scratch_bytes;           /* its size, as given to the allocator */
    int llama_numerics;             /* llama.cpp's rounding (engine_spec.llama_numerics) */
} tf_ctx;

/* Makes the kept scratch block room for a pass of n tokens and writes every page of it, so
 * that the first pass finds it faulted in (a load's work, not a prefill's); nothing under
 * scratch_per_pass. 0, or -1 when out of memory. */
int tf_reserve(tf_ctx *t, int n);

/* Gives the kept scratch block back to the allocator (t->alloc must still be live). */
void tf_release(tf_ctx *t);

/* Runs n tokens at positions pos0.. of sequence seq. logits: (n_out, vocab) for the
 * last n_out positions (1 for generation, n for tests). The KV room must be reserved. */
int tf_forward(tf_ctx *t, int seq, const int *tokens, int n, int pos0, float *logits, int n_out,
               char *err, size_t errlen);

/* A run of consecutive positions pos0 .. pos0+n-1 of one sequence inside a forward pass. */
typedef struct tf_span {
    int seq, pos0, n;
} tf_span;

/* One forward pass over the tokens of several spans, laid out in span order
 * (sum of span n tokens): the matrix work runs over all of them at once (the
 * weights are read once per pass), RoPE rotates each row at its own position,
 * and attention runs per span through the KV module. A batched decode is one
 * span of one token per sequence; tf_forward is the case of one span.
 * logits: (n_out, vocab) for the last n_out tokens. Every span's room must be
 * reserved, and no sequence may appear in two spans. */
int tf_forward_spans(tf_ctx *t, const tf_span *spans, int n_spans, const int *tokens, float *logits, int n_out,
                     char *err, size_t errlen);

#endif
