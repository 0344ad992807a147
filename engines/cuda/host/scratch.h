/* The device scratch of one forward pass (engines/cuda/device_cuda.c): the offset of
 * every activation buffer in one block, so that the pass takes one allocation from the
 * scratch policy (a stream-ordered pool, an arena region, or cudaMalloc) whatever its
 * length. Plain C, tested on the CPU (tests/test_cuda_host.c).
 *
 * Buffers, for n tokens and n_out logits rows (f32 unless said):
 *   x (n, dim)  residual stream         xb (n, dim)  normed input, attention output
 *   q (n, dim)  k, v (n, kv_dim)        hb (n, hidden) gate, then SwiGLU's output
 *   hb2 (n, hidden) up                  xh (n, max(dim, hidden)) 16-bit copy of a GEMM input
 *   tokens (n) int32
 * (The logits stay in a buffer of their own: the sampler reads them after the pass.)
 * Every offset is a multiple of DSL_ALIGN; no two buffers overlap.
 */
#ifndef BENCH_CUDA_SCRATCH_H
#define BENCH_CUDA_SCRATCH_H

#include <stddef.h>

#define DSL_ALIGN 256   /* B: cudaMalloc's alignment, and 16-byte vector loads on every row start */

typedef struct dsl_shape {
    int dim, hidden, kv_dim, vocab;
} dsl_shape;

typedef struct dsl_layout {
    size_t x, xb, q, k, v, hb, hb2, xh, tokens;            /* B, offsets */
    size_t total;                                          /* B */
} dsl_layout;

/* Fills out for n >= 1 tokens; returns the total bytes, 0 when the sizes overflow or are
 * out of range. */
size_t dsl_make(const dsl_shape *s, int n, dsl_layout *out);

#endif
