/* Internal interface between kernels.c (dispatch, threading, conversions) and
 * the per-ISA kernel files. Not for use outside engines/core/kernels*.c.
 *
 * Each ISA file (kernels_portable.c, kernels_avx2.c, kernels_avx512.c) defines
 * its vector primitives and includes kernels_simd.inc, which holds the one copy
 * of the algorithms; the result is a kn_ops table. kn_init in kernels.c is the
 * only place that chooses between them.
 */
#ifndef BENCH_KERNELS_IMPL_H
#define BENCH_KERNELS_IMPL_H

#include "kernels.h"

/* The one platform switch: x86-64 builds carry the AVX2 and AVX-512 tables
 * (compiled with per-file target pragmas, so the binary stays portable);
 * other targets build only the portable one. */
#if defined(__x86_64__) && defined(__GNUC__)
#define KN_HAVE_X86 1
#else
#define KN_HAVE_X86 0
#endif

/* y[t*rows + r] = sum_k x[t*cols + k] * W[r][k] for t in [0, n), r in [r0, r1).
 * y (n, rows), x (n, cols), w (rows, cols) in the table slot's dtype. */
typedef void (*kn_mm_fn)(float *y, const float *x, int n, const void *w,
                         int rows, int cols, int r0, int r1);

/* a[i] = b[i] + s * c[i] for i in [0, n): the STREAM triad, with the same
 * vector width as the matmuls so the bandwidth bound is measured fairly. */
typedef void (*kn_triad_fn)(float *restrict a, const float *restrict b, const float *restrict c,
                            float s, size_t n);

typedef struct kn_ops {
    const char *name;                       /* "portable", "avx2", "avx512" */
    kn_mm_fn mm[BENCH_DTYPE_COUNT];         /* indexed by bench_dtype */
    kn_triad_fn triad;
} kn_ops;

extern const kn_ops kn_ops_portable;
#if KN_HAVE_X86
extern const kn_ops kn_ops_avx2;
extern const kn_ops kn_ops_avx512;
#endif

#endif
