/* expf with glibc's own bits, 16 floats at a time on AVX-512 F+DQ: shared by the core's SwiGLU
 * (engines/core/compute/kernels.c) and the KV modules' softmax (engines/modules/common/kv_attn.h),
 * which must give the reference's bits (the oracle's greedy ids hold to them) and were spending
 * a scalar libm call per attention score (5.6M a token for a 1B GQA model at 8000 positions).
 *
 * glibc (2.27 on) computes expf with ARM's optimized-routines algorithm in double precision:
 * x * 32 / ln 2 = k + r, 2^(k/32) from a 32-entry table, a cubic in r, one rounding to float at
 * the end. bench_expf8 does those steps over 8 doubles with the operations, fusions and
 * constants of the x86_64 build's __expf_fma (read from its disassembly and data); it returns
 * expf's bits for every float below the special-case threshold (checked against libm's expf on
 * all of them once; tests/test_kernels.c checks a sample). |x| >= 88 (0x42a in bits 20..30),
 * infinities and NaNs go to libm's scalar expf, as does every libm but glibc's.
 * Header-only and static, as blockquant.h: modules link nothing of the core's. */
#ifndef BENCH_VEXPF_H
#define BENCH_VEXPF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 27))
#include <immintrin.h>
#define BENCH_VEXPF 1

/* 2^(i/32) as bits, minus i << 47 (so that adding k << 47 scales by 2^(k/32) for any k) */
static const uint64_t bench_exp2f_tab[32] __attribute__((aligned(64))) = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

/* expf of 8 floats (as doubles), glibc's steps in order */
__attribute__((target("avx2,fma,avx512f,avx512dq"), unused)) static inline __m256 bench_expf8(__m512d xd) {
    const __m512d invln2n = _mm512_set1_pd(0x1.71547652b82fep+5), shift = _mm512_set1_pd(0x1.8p+52);
    const __m512d kds = _mm512_fmadd_pd(invln2n, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kds);
    const __m512d kd = _mm512_sub_pd(kds, shift);
    const __m512d r = _mm512_fmsub_pd(invln2n, xd, kd);
    const __m512d t0 = _mm512_load_pd((const double *)(const void *)bench_exp2f_tab);
    const __m512d t1 = _mm512_load_pd((const double *)(const void *)(bench_exp2f_tab + 8));
    const __m512d t2 = _mm512_load_pd((const double *)(const void *)(bench_exp2f_tab + 16));
    const __m512d t3 = _mm512_load_pd((const double *)(const void *)(bench_exp2f_tab + 24));
    /* tab[ki % 32]: bits 0..3 pick within a pair of registers, bit 4 the pair */
    const __m512d lo = _mm512_permutex2var_pd(t0, ki, t1), hi = _mm512_permutex2var_pd(t2, ki, t3);
    const __m512d t = _mm512_mask_blend_pd(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(t), _mm512_slli_epi64(ki, 47)));
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.c6af84b912394p-20), _mm512_set1_pd(0x1.ebfce50fac4f3p-13));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.62e42ff0c52d6p-6), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

/* y[i] = expf(x[i]) for i < n (y may be x), libm's bits. */
__attribute__((target("avx2,fma,avx512f,avx512dq"), unused)) static void bench_expf_avx512(float *y, const float *x, size_t n) {
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 v = _mm512_loadu_ps(x + j);
        const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20), _mm512_set1_epi32(0x7ff));
        if (_mm512_cmpgt_epi32_mask(top, _mm512_set1_epi32(0x42a))) {
            for (size_t k = j; k < j + 16; k++) y[k] = expf(x[k]);   /* a lane on libm's special path */
            continue;
        }
        const __m256 e0 = bench_expf8(_mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        const __m256 e1 = bench_expf8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
        _mm512_storeu_ps(y + j, _mm512_insertf32x8(_mm512_castps256_ps512(e0), e1, 1));
    }
    if (j < n) {
        /* the last n - j (1..15) through the same steps, the lanes past the end zeros whose
         * results are not stored: a scalar libm call each cost a softmax of a causal prefill
         * (whose rows end anywhere) as much as its vector part */
        const __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
        const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20), _mm512_set1_epi32(0x7ff));
        if (_mm512_cmpgt_epi32_mask(top, _mm512_set1_epi32(0x42a))) {
            for (; j < n; j++) y[j] = expf(x[j]);
            return;
        }
        const __m256 e0 = bench_expf8(_mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        const __m256 e1 = bench_expf8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
        _mm512_mask_storeu_ps(y + j, m, _mm512_insertf32x8(_mm512_castps256_ps512(e0), e1, 1));
    }
}
#else
#define BENCH_VEXPF 0
#endif

/* y[i] = expf(x[i]) for i < n (y may be x): the vector path where the CPU has AVX-512 F+DQ and
 * $BENCH_SCALAR_EXPF is not set (a test's way to compare both on one machine), libm's otherwise. */
static inline void bench_expf_n(float *y, const float *x, size_t n) {
#if BENCH_VEXPF
    static int vec = -1;    /* a benign race: every thread computes the same answer */
    if (vec < 0) {
        __builtin_cpu_init();
        const char *off = getenv("BENCH_SCALAR_EXPF");
        vec = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && !(off && *off && off[0] != '0');
    }
    if (vec) {
        bench_expf_avx512(y, x, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

#endif
