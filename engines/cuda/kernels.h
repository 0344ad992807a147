/* The forward pass's own kernels (engines/cuda/kernels.cu), called from C by
 * device_cuda.c. Every launcher queues on `stream` (a cudaStream_t) and returns
 * cudaGetLastError() as an int (0: launched). Arithmetic is f32; weights and the
 * 16-bit copies of activations are read and written in their bench_dtype.
 *
 * Shapes: rows are contiguous, row-major; n is the number of tokens.
 */
#ifndef BENCH_CUDA_KERNELS_H
#define BENCH_CUDA_KERNELS_H

#include <stddef.h>

#include "engines/abi/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x (n, dim) f32 = rows tokens[i] of table (vocab, dim) in dt. tokens: device int32. */
int cuk_embed(void *stream, const void *table, bench_dtype dt, const int *tokens, int n, int dim, float *x);

/* out (n, dim) = w * x / rms(x), as transformer.c's rmsnorm; out16 (optional, NULL: none)
 * receives the same rows in dt16 (F16 or BF16), the next GEMM's input. */
int cuk_rmsnorm(void *stream, const float *x, const float *w, int n, int dim, float eps, float *out,
                void *out16, bench_dtype dt16);

/* RoPE in place on q (n, n_heads*hd) and k (n, n_kv_heads*hd) at positions pos0..pos0+n-1;
 * half: pairs (i, i+hd/2) (HF), else (2i, 2i+1). */
int cuk_rope(void *stream, float *q, float *k, int n, int n_heads, int n_kv_heads, int hd, int pos0,
             float theta, int half);

/* out[j] = silu(g[j]) * u[j] for j < count (out may be g); out16 as for cuk_rmsnorm. */
int cuk_swiglu(void *stream, const float *g, const float *u, size_t count, float *out, void *out16, bench_dtype dt16);

/* out16 (count) in dt16 = x (count). */
int cuk_to16(void *stream, const float *x, size_t count, void *out16, bench_dtype dt16);

/* Matrix-vector products of one x (cols) f32, one warp per output row, up to 3 matrices in
 * one launch (q, k, v). Block-quantised dt (Q8_0, Q4_0 .. Q6_K) are dequantised on the fly
 * to the same f32 weights as the CPU's exact path (engines/core/compute/quant.c). Each job: y (rows) = W (rows, cols) . x, or y += with accumulate.
 * swiglu: two jobs of equal rows (gate, up): jobs[0].y = silu(gate . x) * (up . x).
 * Every W is in dt; rows start 16-byte aligned when (cols * size of dt) % 16 == 0 and
 * the base is, which the launcher checks before reading 16 bytes at a time. */
typedef struct cuk_gemv_job {
    const void *w;
    float *y;
    int rows;
    int accumulate;
} cuk_gemv_job;
int cuk_gemv(void *stream, const cuk_gemv_job *jobs, int n_jobs, int swiglu, bench_dtype dt, int cols, const float *x);

/* *out (device int) = the first index of the maximum of x (n). */
int cuk_argmax(void *stream, const float *x, int n, int *out);

/* *out = the token sampler.c draws from logits (n) with temperature > 0, topp in (0, 1] and
 * coin in [0, 1) (engines/cuda/host/topp.h). probs: device scratch of n floats. */
int cuk_sample(void *stream, const float *logits, int n, float temperature, float topp, float coin,
               float *probs, int *out);

/* a[i] = b[i] + s * c[i] for i < n (STREAM triad). */
int cuk_triad(void *stream, float *a, const float *b, const float *c, float s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
