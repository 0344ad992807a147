/* Compute kernels of the forward pass, for weights in every bench_dtype,
 * with AVX-512 / AVX2 / portable paths chosen once at run time. */
#ifndef BENCH_KERNELS_H
#define BENCH_KERNELS_H

#include "engines/abi/dtype.h"
#include "threadpool.h"

/* Picks the best instruction set this CPU has; BENCH_ISA=portable|avx2|avx512 forces one. */
void kn_init(void);
const char *kn_isa(void);               /* "avx512", "avx2" or "portable" */
int kn_set_isa(const char *isa);        /* 0 on success; -1 if the CPU lacks it */

/* y (n, rows) = x (n, cols) . W^T, W (rows, cols) row-major in dtype dt.
 * n == 1 is decode (matrix-vector); n > 1 is batched prefill (matrix-matrix).
 * cols is a whole number of dt's blocks. Parallel over rows on the pool.
 * Block-quantised types other than Q8_0 run quant.c's exact kernel. */
void kn_matmul(tp_pool *pool, float *y, const float *x, int n,
               const void *w, bench_dtype dt, int rows, int cols);

/* Several products of the same x (n, cols), e.g. q, k and v, in one hand-off to
 * the pool: each thread takes its share of every matrix's rows, so the threads
 * meet once instead of once per matrix (decode makes ~85 products a token). */
typedef struct kn_mm_out {
    float *y;           /* (n, rows) */
    const void *w;      /* (rows, cols) in dt */
    bench_dtype dt;
    int rows;
} kn_mm_out;
void kn_matmul_multi(tp_pool *pool, const float *x, int n, int cols, const kn_mm_out *outs, int count);

/* One row of W as f32 (the embedding lookup). */
void kn_dequant_row(bench_dtype dt, const void *row, float *out, int cols);
/* f32 -> dt, for the writers (Q8_0, Q4_0: cols a multiple of 32); dt one of bench_dtype_writable. */
void kn_quant_row(bench_dtype dt, const float *in, void *out, int cols);

/* Bytes per second of a STREAM-style triad a[i] = b[i] + s*c[i] over arrays of
 * `bytes_per_array`, on the pool's threads; best of `reps`. Counts 3 arrays of traffic. */
double kn_triad_bandwidth(tp_pool *pool, size_t bytes_per_array, int reps);

#endif
