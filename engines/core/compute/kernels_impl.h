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

/* Not kernels.h: the ISA files need only the element types, and kernels.c, which includes
 * this header and kernels.h, is the one that chooses among their tables (no include cycle). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "q4r8.h"

#include "engines/abi/dtype.h"

/* The one platform switch: x86-64 builds carry the AVX2 and AVX-512 tables
 * (compiled with per-file target pragmas, so the binary stays portable);
 * other targets build only the portable one. */
#if defined(__x86_64__) && defined(__GNUC__)
#define KN_HAVE_X86 1
#else
#define KN_HAVE_X86 0
#endif

/* Software prefetch distance, bytes ahead on each row stream. Without it
 * decode is latency-bound for the denser formats: their loops do more work
 * per cache line, so fewer misses are in flight (measured on this EPYC VM,
 * 1 thread: f16 18 -> 29 GB/s, q8_0 6 -> 23 GB/s; f32 unchanged). That f16
 * figure was a loop of 4 rows at once; the dense one-row loop that replaced it
 * runs without (kernels_simd.inc KN_PF_ROW). The int8 loops keep theirs (Zen 4,
 * family 25 model 17, 6 paired rounds of llama-110m decode without it: q4_0 on
 * vnni 0.94x, q8_0 on avx2-int8 0.99x, q4_k_m 1.01x). */
#ifndef KN_PF_DENSE
#define KN_PF_DENSE 4096
#endif
#ifndef KN_PF_Q8
#define KN_PF_Q8 8192
#endif
/* x (n, cols) quantised to Q8 blocks of 32 for the integer-dot tables
 * (kernels_int8.inc): q = round(x / d), d = max|x| / 127 per block, d kept
 * in f32 (not f16 as in a Q8_0 weight), so the only error is q's rounding. */
typedef struct kn_xq8 {
    int8_t *qs;         /* (n, cols) */
    float *d;           /* (n, cols / 32) */
    /* (n, cols / 32): d * (the block's sum of q), x's block sums as quantised;
     * the K-quants' min terms take it (a min multiplies a whole block) */
    float *xs;
    /* (n, cols / 32, 8): -128 x the sum of the 4 q each 32-bit lane of a
     * vpdpbusd adds; the VNNI form multiplies (w + 128) by q and adds this.
     * NULL for tables that do not use it. */
    int32_t *nsum;
    /* The exact tables' decode of Q8_0 and Q4_0 (kernels_avx512.c, kx_mv_split): x split into
     * int8 parts (kn_xsplit_pair), made by the table's split_x; NULL elsewhere, and where x
     * could not be split (the kernel then widens the weights to f32). */
    const struct kn_xsplit_pair *sp; /* (cols / 64) */
    const float *se;                 /* (cols / 32): block b's 2^(e - 14), the unit of X below */
} kn_xq8;

/* Two 32-blocks a, b of x, each x = 2^e (p0 + 2^-7 p1 + 2^-14 p2) + r with e its block's
 * exponent (127 2^e >= max |x|, so |p0| <= 127, |p1|, |p2| <= 64) and |r| <= 2^(e-15):
 * X = p0 2^14 + p1 2^7 + p2 is an integer, and the weights' integer dot with X is exact in
 * int32. Bytes in vpdpbusd's lane order, [a 0..31, b 0..31]; c8 and c4 are what the Q8_0
 * (w + 128: 128 x) and Q4_0 (a low nibble: 8 x, a high nibble taken as 16 v: 128 x) forms
 * subtract per lane, times the sum of the lane's 4 X; c4r the same for rearranged Q4_0. */
typedef struct __attribute__((aligned(64))) kn_xsplit_pair {
    int8_t p[3][64];
    int32_t c8[16];
    int32_t c4[16];
    int32_t c4r[16];  /* Q4_0 rearranged (KN_Q4_0_R8): a's lanes 8 x, b's (16 v) 128 x */
} kn_xsplit_pair;

/* Rows per prefill panel of the tallest table (kernels_gemm.inc: KN_MV x VL,
 * 64 on AVX-512): kernels.c splits a prefill's rows among threads in whole
 * multiples of it, so only the last panel of a matrix can be partial. */
#define KN_PANEL_ROWS 64

/* y[t*rows + r] = sum_k x[t*cols + k] * W[r][k] for t in [0, n), r in [r0, r1).
 * y (n, rows), x (n, cols), w (rows, cols) in the table slot's dtype.
 * xq: x quantised by the table's quant_x when the slot's bit is set in the
 * table's xq_dts, else NULL. */
typedef void (*kn_mm_fn)(float *y, const float *x, int n, const void *w,
                         int rows, int cols, int r0, int r1, const kn_xq8 *xq);
/* As kn_mm_fn, for a path that may decline: 0 done, or -1 having written nothing */
typedef int (*kn_mm_try_fn)(float *y, const float *x, int n, const void *w,
                            int rows, int cols, int r0, int r1, const kn_xq8 *xq);

/* Quantises x (n, cols) into xq (cols a multiple of 32). */
typedef void (*kn_quant_x_fn)(const float *x, int n, int cols, const kn_xq8 *xq);

/* Splits x (one row of cols, a multiple of 64) into cols / 64 pairs and cols / 32 units;
 * -1 where a block cannot be held (a value not finite, or an exponent outside +-100). */
typedef int (*kn_split_x_fn)(const float *x, int cols, kn_xsplit_pair *sp, float *se);

/* Sum of n floats, read once: the read-only stream of kn_read_bandwidth. */
typedef float (*kn_read_fn)(const float *p, size_t n);

/* Peak probe: iters rounds of independent multiply-adds held in registers (12
 * chains, more than latency x issue width), no memory traffic. Returns the
 * operations done (a multiply-add counts 2) and leaves a checksum in *sink so
 * the work cannot be dropped. */
typedef double (*kn_peak_fn)(long iters, float *sink);

/* a[i] = b[i] + s * c[i] for i in [0, n): the STREAM triad, with the same
 * vector width as the matmuls so the bandwidth bound is measured fairly. */
typedef void (*kn_triad_fn)(float *restrict a, const float *restrict b, const float *restrict c,
                            float s, size_t n);

#include "scratch.h"   /* kn_scratch: prefill's buffers, kept per thread */

/* An ISA file's entry points; kernels.c's family table (kn_family) names them. */
typedef struct kn_ops {
    kn_mm_fn mm[BENCH_DTYPE_COUNT];         /* indexed by bench_dtype */
    kn_triad_fn triad;
    kn_read_fn read;
    kn_read_fn read_pf;                     /* the same with the decode kernels' software prefetch */
    kn_peak_fn peak_f32;                    /* f32 FMA in the table's vector width */
    kn_peak_fn peak_int8;                   /* (optional) the int8 dot of the Q8_0 path; NULL: none */
    kn_peak_fn peak_bf16;                   /* (optional) the bf16 dot of bf16_dot's prefill; NULL: none */
    /* 1: mm[BENCH_Q8_0] takes x quantised by quant_x (integer dot products);
     * 0: it dequantises the weights and multiplies in f32 (exact) */
    int q8_int8;
    kn_quant_x_fn quant_x;                  /* (optional) NULL where q8_int8 is 0 */
    int x_nsum;                             /* 1: quant_x fills xq->nsum */
    /* 1: mm[BENCH_BF16]'s prefill rounds x to bf16 for bf16 dot products
     * (kernels_bf16.inc); 0: exact */
    int bf16_dot;
    /* bit dt set: mm[dt] takes x quantised by quant_x (Q8_0, Q4_0, Q4_K and
     * Q6_K on the int8 tables); 0 on the exact tables */
    unsigned xq_dts;
    /* bit dt set: mm[dt]'s decode (n == 1) takes x split by split_x (exact: kn_xsplit_pair),
     * where the CPU has AVX512-VNNI; the kernel widens the weights to f32 without it */
    unsigned split_dts;
    kn_split_x_fn split_x;
    /* (optional) decode (n == 1) of Q4_0 rows rearranged by kn_repack_rows (KN_Q4_0_R8), with
     * x prepared as for mm[BENCH_Q4_0], and prefill (n > 1), its GEMM reading the groups as it
     * packs them. Either may decline (-1: x could not be split, or no buffers); where it does,
     * or is NULL, kernels.c puts the rows back in the file's layout for mm[BENCH_Q4_0]
     * (correct, and slower) */
    kn_mm_try_fn mv_q4_0_r8;
    kn_mm_try_fn mm_r8_prefill;
    /* bf16 rows grouped by kn_bf16_r16_pack (KN_BF16_R16), any n; r0 a group's first row, r1
     * one too or rows. May decline (-1: no buffers); kernels.c then puts the rows back for
     * mm[BENCH_BF16]. NULL: none */
    kn_mm_try_fn mm_bf16_r16;
    /* (optional) Q4_0 rows interleaved by kn_q4_0_g16_pack (KN_Q4_0_G16), any n, x prepared as
     * for mm[BENCH_Q4_0]; r0 a group's first row, r1 one too or rows. May decline (-1: no
     * buffers); kernels.c then puts the rows back for mm[BENCH_Q4_0]. NULL: none */
    kn_mm_try_fn mm_q4_0_g16;
} kn_ops;

/* A kernel family: one row of kernels.c's kn_families (docs/extending.md, "A CPU kernel
 * family"), from which every name list, help text and message about families is made. It is
 * exact where its ops round no x (q8_int8 and bf16_dot 0): every dtype then computes as the
 * portable reference does, within f32 summation. */
typedef struct kn_family {
    const char *name;           /* what --kernels, BENCH_ISA, a scenario and bench list call it */
    const char *about;          /* one line for --kernels' help: what it runs on, what it rounds */
    const kn_ops *ops;          /* its entry points */
    /* Whether this CPU (and OS) has the features it needs; NULL: every CPU. Asked each time a
     * family is chosen or listed, so it must be cheap (cache what the OS is asked). */
    int (*runs_here)(void);
    /* auto's preference among the exact families this CPU runs: the highest wins, by default,
     * and every one above 0 is a candidate auto measures (kernels_tune.h); 0: run only when
     * named (an inexact family, or amx: docs/PERFORMANCE.md says why) */
    int auto_score;
} kn_family;

/* Adds a family after kernels.c's own rows, for tests (tests/test_kernels.c's wrapper of
 * portable): from then on it is listed, named and checked like any other. f must outlive the
 * process's use of the kernels. 0, or -1 where the name is taken or KN_MAX_ADDED are in. */
#define KN_MAX_ADDED 4
int kn_family_add(const kn_family *f);

extern const kn_ops kn_ops_portable;
#if KN_HAVE_X86
extern const kn_ops kn_ops_avx2;
extern const kn_ops kn_ops_avx2_int8;
extern const kn_ops kn_ops_avx512;
extern const kn_ops kn_ops_avx512_wide;
extern const kn_ops kn_ops_vnni;
extern const kn_ops kn_ops_avx512_bf16;
extern const kn_ops kn_ops_amx;
/* Whether the CPU has AMX-TILE, AMX-BF16 and AVX512_BF16 and the OS lets this process use
 * the tiles (asked once; kernels_amx.inc). */
int kn_amx_usable(void);
#endif

#endif
