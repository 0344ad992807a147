/* AVX2 + FMA + F16C instantiation of the matmul kernels (8 floats per vector).
 * Enabled by a target pragma rather than -march; kn_init selects this table
 * only on CPUs that report all three extensions. */
#include "kernels_impl.h"

#if KN_HAVE_X86
#pragma GCC target("avx2,fma,f16c")
#include <assert.h>
#include <immintrin.h>

typedef __m256 vf;
#define VL 8
/* prefill tile: 2 row vectors (16 rows) x 6 tokens = 12 accumulators + 2
 * weight vectors + 1 broadcast x of the 16 ymm registers */
#define KN_MV 2
#define KN_NR 6
#define KN_FN(name) name##_avx2
#define KN_INLINE static inline __attribute__((always_inline))

KN_INLINE vf v_zero(void) { return _mm256_setzero_ps(); }
KN_INLINE vf v_set1(float a) { return _mm256_set1_ps(a); }
KN_INLINE vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
KN_INLINE vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
KN_INLINE vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
KN_INLINE float v_hsum(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
KN_INLINE void v_store(float *p, vf a) { _mm256_storeu_ps(p, a); }
KN_INLINE vf v_load_f32(const float *p) { return _mm256_loadu_ps(p); }
KN_INLINE vf v_load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
KN_INLINE vf v_load_bf16(const uint16_t *p) {
    /* bf16 is the high half of an f32: widen and shift, exact for every value */
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
/* VL bf16 column pairs (bf16r16.h): the even columns (the low halves), the odd (the high) */
KN_INLINE vf v_load_bf16_even(const uint32_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p), 16));
}
KN_INLINE vf v_load_bf16_odd(const uint32_t *p) {
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)p),
                                                _mm256_set1_epi32((int)0xffff0000u)));
}
KN_INLINE vf v_load_q8(const int8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
KN_INLINE float kn_half_to_float(uint16_t h) { return _cvtsh_ss(h); }
/* 8 x 8 transpose of r (v_tr in kernels_simd.inc loads it): dst[c * ds + i] = lane c of r[i]; in-lane unpacks and
 * shuffles, then one round of 128-bit lane permutes. */
KN_INLINE void v_tr_regs(const __m256 *r, float *dst, size_t ds) {
    __m256 t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4g + c], lane L: column 4L + c, rows 4g .. 4g + 3 */
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++) {
        u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(dst + (size_t)c * ds, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
        _mm256_storeu_ps(dst + (size_t)(4 + c) * ds, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
    }
}

/* ---- block-quantised weights (kernels_quant.inc) ----
 * A 16-element run's map as its scale and offset: each quant is widened,
 * converted and mapped with the reference's operations (8 entries of vpermps
 * would not hold a 16-pattern table). */
#define KN_QUANT 1
typedef struct { vf d, a; int has_a, off; } kq_tab;
KN_INLINE kq_tab kq_tab_make(vf d, vf a, int has_a, int off, int bits) {
    (void)bits;
    return (kq_tab){d, a, has_a, off};
}
KN_INLINE vf kq_set1_half(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}
KN_INLINE vf kq_map8(const kq_tab *t, __m128i q8) {
    vf w = _mm256_mul_ps(t->d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
    return t->has_a ? _mm256_add_ps(w, t->a) : w;
}
KN_INLINE void kq_w16(const kq_tab *t, int bits, __m128i q, vf *w) {
    if (bits == 4) q = _mm_and_si128(q, _mm_set1_epi8(15));
    if (t->off) q = _mm_add_epi8(q, _mm_set1_epi8((char)t->off));
    w[0] = kq_map8(t, q);
    w[1] = kq_map8(t, _mm_unpackhi_epi64(q, q));
}
KN_INLINE void kq_w16_s8(float D, __m128i q, vf *w) {
    const kq_tab t = kq_tab_make(_mm256_set1_ps(D), v_zero(), 0, 0, 8);
    kq_w16(&t, 8, q, w);
}
/* byte j of the result: 0x10 where bit j of bits is set */
KN_INLINE __m128i kq_bits16(unsigned bits) {
    const __m128i sel = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    __m128i b = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)bits), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b, sel), sel), _mm_set1_epi8(0x10));
}

#include "kernels_quant.inc"
#include "kernels_simd.inc"

const kn_ops kn_ops_avx2 = KN_TABLE();

/* ---- avx2-int8: Q8_0 on maddubs ----
 * maddubs multiplies unsigned by signed bytes and saturates pairs to int16, so
 * the weight goes in as |w| and x takes w's sign (sign_epi8): each pair is at
 * most 2 x 127 x 127 = 32258, no saturation. madd with ones widens to int32. */
typedef struct { __m256i abs, sgn; } ki_w;
KN_INLINE ki_w ki_prep(__m256i w) { return (ki_w){_mm256_sign_epi8(w, w), w}; }
KN_INLINE __m256i ki_dot(ki_w w, __m256i q, const int32_t *nsum) {
    (void)nsum;
    __m256i p16 = _mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(q, w.sgn));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}
/* u unsigned: pairs are at most 2 x 127 x 128 = 32512, no saturation */
KN_INLINE __m256i ki_udot(__m256i u, __m256i q) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), _mm256_set1_epi16(1));
}
#define KI_FN(name) name##_avx2_int8
/* 2 x 4 = 8 accumulators + 2 x 2 weight registers + scales of the 16 ymm */
#define KI_RB 2
#define KI_TB 4
#define KI_NSUM 0
#include "kernels_int8.inc"

/* Interleaved Q4_0 (KN_Q4_0_G16): decode on its 8-row halves; prefill declines, and kernels.c
 * puts a panel of rows back at a time for mm_q4_0 */
static int mm_q4_0_g16_avx2_int8(float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1,
                                 const kn_xq8 *xq) {
    (void)x;
    return n == 1 ? KI_FN(mv_q4_0_g16)(y, w, rows, cols, r0, r1, xq) : -1;
}

const kn_ops kn_ops_avx2_int8 = KN_TABLE_INT8(KI_FN, quant_x_avx2_int8, 0, peak_int8_avx2_int8, NULL, NULL,
                                              mm_q4_0_g16_avx2_int8);
#endif
