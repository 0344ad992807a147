/* AVX-512 instantiation of the matmul kernels (16 floats per vector).
 * The target pragma, not -march, enables the instructions, so the rest of the
 * binary stays portable; kn_init only selects this table on CPUs that have
 * AVX-512 F/BW/VL/DQ. */
#include "kernels_impl.h"

#if KN_HAVE_X86
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")
#include <assert.h>
#include <float.h>
#include <immintrin.h>
#include <math.h>

typedef __m512 vf;
#define VL 16
/* prefill tile: 4 row vectors (64 rows) x 6 tokens = 24 accumulators + 4
 * weight vectors + 1 broadcast x of the 32 zmm registers */
#define KN_MV 4
#define KN_NR 6
#define KN_FN(name) name##_avx512
#define KN_INLINE static inline __attribute__((always_inline))

KN_INLINE vf v_zero(void) { return _mm512_setzero_ps(); }
KN_INLINE vf v_set1(float a) { return _mm512_set1_ps(a); }
KN_INLINE vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
KN_INLINE vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
KN_INLINE vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
KN_INLINE float v_hsum(vf a) { return _mm512_reduce_add_ps(a); }
KN_INLINE void v_store(float *p, vf a) { _mm512_storeu_ps(p, a); }
KN_INLINE vf v_load_f32(const float *p) { return _mm512_loadu_ps(p); }
KN_INLINE vf v_load_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
KN_INLINE vf v_load_bf16(const uint16_t *p) {
    /* bf16 is the high half of an f32: widen and shift, exact for every value */
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
/* VL bf16 column pairs (bf16r16.h): the even columns (the low halves), the odd (the high) */
KN_INLINE vf v_load_bf16_even(const uint32_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512((const void *)p), 16));
}
KN_INLINE vf v_load_bf16_odd(const uint32_t *p) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_loadu_si512((const void *)p), _mm512_set1_epi32((int)0xffff0000u)));
}
KN_INLINE vf v_load_q8(const int8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
KN_INLINE float kn_half_to_float(uint16_t h) { return _cvtsh_ss(h); }
/* 16 x 16 transpose of r (v_tr in kernels_simd.inc loads it): dst[c * ds + i] = lane c of r[i]. Three rounds of
 * in-lane unpacks and shuffles, then two of 128-bit lane shuffles (64 ops for
 * 256 floats). Bitwise on 32-bit lanes, so it moves bf16 pairs as well. */
KN_INLINE void v_tr_regs(const __m512 *r, float *dst, size_t ds) {
    __m512 t[16], u[16];
    /* t[2i], t[2i+1], lane L: rows 2i, 2i+1 interleaved, columns 4L, 4L+1 and 4L+2, 4L+3 */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4g + c], lane L: column 4L + c, rows 4g .. 4g + 3 */
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        u[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    /* column 4L + c gathers lane L of u[c], u[4 + c], u[8 + c], u[12 + c] */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
        _mm512_storeu_ps(dst + (size_t)c * ds, _mm512_shuffle_f32x4(v0, v2, 0x88));
        _mm512_storeu_ps(dst + (size_t)(4 + c) * ds, _mm512_shuffle_f32x4(v1, v3, 0x88));
        _mm512_storeu_ps(dst + (size_t)(8 + c) * ds, _mm512_shuffle_f32x4(v0, v2, 0xdd));
        _mm512_storeu_ps(dst + (size_t)(12 + c) * ds, _mm512_shuffle_f32x4(v1, v3, 0xdd));
    }
}

/* ---- block-quantised weights (kernels_quant.inc) ----
 * A 16-element run's map as a table of the weight of every quant pattern,
 * computed with the reference's operations; vpermps (4 bits) / vpermt2ps
 * (5 bits) then look all 16 up at once, and their index is the low 4 / 5 bits
 * of a lane, so a 4-bit quant needs no masking. */
#define KN_QUANT 1
typedef struct { __m512 lo, hi; } kq_tab;
static const float kq_iota[64] = {-32, -31, -30, -29, -28, -27, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17,
                                  -16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1,
                                  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                  16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
/* entry i: D * (i + off) (+ A); off in [-32, 0] */
KN_INLINE kq_tab kq_tab_make(vf d, vf a, int has_a, int off, int bits) {
    __m512 lo = _mm512_mul_ps(d, _mm512_loadu_ps(kq_iota + 32 + off)), hi = lo;
    if (bits > 4) hi = _mm512_mul_ps(d, _mm512_loadu_ps(kq_iota + 48 + off));
    if (has_a) {
        lo = _mm512_add_ps(lo, a);
        if (bits > 4) hi = _mm512_add_ps(hi, a);
    }
    return (kq_tab){lo, hi};
}
KN_INLINE void kq_w16(const kq_tab *t, int bits, __m128i q, vf *w) {
    const __m512i i = _mm512_cvtepu8_epi32(q);
    w[0] = bits > 4 ? _mm512_permutex2var_ps(t->lo, i, t->hi) : _mm512_permutexvar_ps(i, t->lo);
}
KN_INLINE void kq_w16_s8(float D, __m128i q, vf *w) {
    w[0] = _mm512_mul_ps(_mm512_set1_ps(D), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
}
KN_INLINE vf kq_set1_half(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
}
KN_INLINE __m128i kq_bits16(unsigned bits) { return _mm_maskz_set1_epi8((__mmask16)bits, 0x10); }

/* ---- exact decode of Q8_0 and Q4_0, 8 blocks a step ----
 * The generic loops (kernels_simd.inc, kernels_quant.inc) convert each block's
 * f16 scale on its own (a word insert, a conversion and a broadcast: three of the
 * ~11 vector operations a block costs, on the two ports 512-bit work shares) and
 * Q4_0 builds a 16-entry table of d * (i - 8) per block. Here a step's 8 scales
 * are converted at once (two word permutes of the step's bytes) and stored, and
 * each block's FMA takes its scale as a broadcast load, which costs no vector
 * port; Q4_0 looks its nibbles up in one constant table of i - 8. Still exact:
 * every weight is an exact f32 (q, or q - 8), each block's products are summed
 * unscaled and the scale applied once, which differs from summing (d q) x only
 * in f32 rounding, as in mv_q8_0. */
/* The 8 f16 scales of the 8 blocks at c, converted: Q8_0's (q4 0) or Q4_0's. Also the vnni
 * decode's (kernels_int8.inc mv_q8_0_zmm, mv_q4_0_zmm). */
KN_INLINE __m256 kx_scales8(const void *c, int q4) {
    /* block k's d: word 17k (Q8_0, 34-byte blocks) or 9k (Q4_0, 18) of the step */
    const __m512i sel8a = _mm512_setr_epi64(0x0033002200110000LL, 0, 0, 0, 0, 0, 0, 0);
    const __m512i sel8b = _mm512_setr_epi64(0x0037002600150004LL, 0, 0, 0, 0, 0, 0, 0);
    const __m512i sel4 = _mm512_setr_epi64(0x001b001200090000LL, 0x003f0036002d0024LL, 0, 0, 0, 0, 0, 0);
    const char *b = c;
    __m128i h;
    if (q4) h = _mm512_castsi512_si128(_mm512_permutex2var_epi16(_mm512_loadu_si512(b), sel4, _mm512_loadu_si512(b + 64)));
    else {
        const __m512i d0 = _mm512_permutex2var_epi16(_mm512_loadu_si512(b), sel8a, _mm512_loadu_si512(b + 64));
        const __m512i d1 = _mm512_permutex2var_epi16(_mm512_loadu_si512(b + 128), sel8b, _mm512_loadu_si512(b + 192));
        h = _mm_unpacklo_epi64(_mm512_castsi512_si128(d0), _mm512_castsi512_si128(d1));
    }
    return _mm256_cvtph_ps(h);
}

/* Rearranged Q4_0 (KN_Q4_0_R8), pair m of the group at c: vpdpbusd's unsigned bytes in one
 * 32-byte broadcast and one AND, [a 0..15, a 16..31, b 0..15 as 16 v, b 16..31 as 16 v], the
 * order of x's two blocks as stored; and the lanes of its scales in s16 = [8 block scales,
 * the same / 16]: [a x8, b / 16 x8]. Both the split and the vnni decode take it. */
KN_INLINE __m512i kx_r8_pair(const char *c, int m) {
    const __m512i lo_hi = _mm512_setr_epi64(0x0f0f0f0f0f0f0f0fLL, 0x0f0f0f0f0f0f0f0fLL, 0x0f0f0f0f0f0f0f0fLL,
                                            0x0f0f0f0f0f0f0f0fLL, (long long)0xf0f0f0f0f0f0f0f0ULL, (long long)0xf0f0f0f0f0f0f0f0ULL,
                                            (long long)0xf0f0f0f0f0f0f0f0ULL, (long long)0xf0f0f0f0f0f0f0f0ULL);
    return _mm512_and_si512(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(c + 16 + 32 * m))), lo_hi);
}
KN_INLINE __m512i kx_r8_idx(int m) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * m)), _mm256_set1_epi32(2 * m + 9), 1);
}

/* Block k's 32 products with x, unscaled: two vectors of 16 lanes summed. */
KN_INLINE __m512 kx_dot_q8(const bench_block_q8_0 *b, const float *x) {
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)b->qs)));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(b->qs + 16))));
    return _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + 16), _mm512_mul_ps(lo, _mm512_loadu_ps(x)));
}
KN_INLINE __m512 kx_dot_q4(const bench_block_q4_0 *b, const float *x, __m512 tab) {
    const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)b->qs));
    const __m512 lo = _mm512_permutexvar_ps(u, tab), hi = _mm512_permutexvar_ps(_mm512_srli_epi32(u, 4), tab);
    return _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + 16), _mm512_mul_ps(lo, _mm512_loadu_ps(x)));
}

/* Blocks [i, nb) of a row (the ones past the last whole step of 8) added into acc, one at a
 * time, each block's scale applied once. */
KN_INLINE __m512 kx_tail(int q4, const char *row, const float *x, int i, int nb, __m512 acc) {
    const size_t bb = q4 ? sizeof(bench_block_q4_0) : sizeof(bench_block_q8_0);
    const __m512 tab = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    for (; i < nb; i++) {
        const char *c = row + (size_t)i * bb;
        const float *xb = x + (size_t)i * BENCH_QK;
        uint16_t h;
        memcpy(&h, c, 2);
        const __m512 t = q4 ? kx_dot_q4((const bench_block_q4_0 *)(const void *)c, xb, tab)
                            : kx_dot_q8((const bench_block_q8_0 *)(const void *)c, xb);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(h)), t, acc);
    }
    return acc;
}

KN_INLINE void kx_mv_q(int q4, float *y, const float *x, const void *w, int cols, int r0, int r1) {
    const int nb = cols / BENCH_QK;
    const size_t bb = q4 ? sizeof(bench_block_q4_0) : sizeof(bench_block_q8_0);
    const __m512 tab = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    _Static_assert(sizeof(bench_block_q8_0) == 34 && sizeof(bench_block_q4_0) == 18, "kx_scales8's word offsets");
    for (int r = r0; r < r1; r++) {
        const char *row = (const char *)w + (size_t)r * nb * bb;
        __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        int i = 0;
        for (; i + 8 <= nb; i += 8) {
            const char *c = row + (size_t)i * bb;
            for (size_t o = 0; o < 8 * bb; o += 64) __builtin_prefetch(c + KN_PF_Q8 + o);
            float s[8] __attribute__((aligned(32)));
            _mm256_store_ps(s, kx_scales8(c, q4));
            /* read back from memory, so each FMA takes its scale as a broadcast load
             * (the compiler would otherwise shuffle the register: vector-port work) */
            __asm__ volatile("" : : "m"(s) : "memory");
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const float *xb = x + (size_t)(i + k) * BENCH_QK;
                const __m512 t = q4 ? kx_dot_q4((const bench_block_q4_0 *)(const void *)(c + k * bb), xb, tab)
                                    : kx_dot_q8((const bench_block_q8_0 *)(const void *)(c + k * bb), xb);
                a[k % 4] = _mm512_fmadd_ps(_mm512_set1_ps(s[k]), t, a[k % 4]);
            }
        }
        a[0] = kx_tail(q4, row, x, i, nb, a[0]);
        y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
    }
}

/* ---- the same decode on x split into int8 parts (kn_xsplit_pair), still exact ----
 * Widening a weight to f32 costs the exact kernel above about 7 vector operations a block;
 * vpdpbusd multiplies 64 int8 weights by 64 bytes of x in one. x is split once a matmul into
 * three int8 parts per 32-block, x = 2^e (p0 + 2^-7 p1 + 2^-14 p2) + r, |r| <= 2^(e-15): a
 * pair of blocks' integer products with X = p0 2^14 + p1 2^7 + p2 are summed exactly in
 * int32 by three vpdpbusd and two shifts (|w X| summed over a lane's 4 bytes stays below
 * 2^31; the sums wrap harmlessly on the way), the lane's correction is subtracted, and the
 * exact integer is converted once and scaled by d 2^(e-14). The error against the f32 sum
 * is r's, below 2^-21 of the block's largest |x| a term (test_kernels holds every exact family
 * to 2e-5 of sum |w x|), plus one f32 rounding per 4 products. Q4_0's nibbles go in
 * unshifted: a low one as v, a high one as 16 v (one AND with a mask gives both), the 16
 * taken out of the high lanes' scale. About 11 operations per pair of blocks instead of 14
 * (a hot-cache A/B is in docs/PERFORMANCE.md). Only where the CPU has AVX512-VNNI
 * (kernels.c prepares the split only there); these functions alone carry its target. */
#pragma GCC push_options
#pragma GCC target("avx512vnni")
KN_INLINE __m512i kx_split_chain(__m512i u, const kn_xsplit_pair *sp) {
    __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_load_si512(sp->p[0]));
    t = _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 7), u, _mm512_load_si512(sp->p[1]));
    return _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 7), u, _mm512_load_si512(sp->p[2]));
}

static int kx_split_x(const float *x, int cols, kn_xsplit_pair *sp, float *se) {
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i c4sh = _mm512_setr_epi32(3, 3, 3, 3, 7, 7, 7, 7, 3, 3, 3, 3, 7, 7, 7, 7);
    const __m512i c4rsh = _mm512_setr_epi32(3, 3, 3, 3, 3, 3, 3, 3, 7, 7, 7, 7, 7, 7, 7, 7);
    const __m512 k128 = _mm512_set1_ps(128.0f);
    for (int pr = 0; pr < cols / 64; pr++) {
        kn_xsplit_pair *o = &sp[pr];
        for (int h = 0; h < 2; h++) {
            const int b = 2 * pr + h;
            const __m512 lo = _mm512_loadu_ps(x + 32 * b), hi = _mm512_loadu_ps(x + 32 * b + 16);
            const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
            if (!(m <= FLT_MAX)) return -1; /* inf or NaN: the f32 kernel carries it */
            int e = 0;
            if (m > 0) {
                (void)frexpf(m / 127.0f, &e); /* 127 2^e >= m, and usually the least such e */
                if (ldexpf(127.0f, e - 1) >= m) e--;
            }
            if (e < -100 || e > 100) return -1;
            se[b] = ldexpf(1.0f, e - 14);
            const __m512 s = _mm512_set1_ps(ldexpf(1.0f, -e));
            for (int g = 0; g < 2; g++) {
                /* t - rint(t) is exact at each step (|t| <= 127, then <= 64), as is the * 128 */
                __m512 t = _mm512_mul_ps(g ? hi : lo, s);
                for (int k = 0; k < 3; k++) {
                    const __m512 q = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                    _mm_store_si128((__m128i *)(void *)(o->p[k] + 32 * h + 16 * g), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q)));
                    t = _mm512_mul_ps(_mm512_sub_ps(t, q), k128);
                }
            }
        }
        const __m512i sx = kx_split_chain(ones, o); /* each lane's sum of 4 X */
        _mm512_store_si512(o->c8, _mm512_slli_epi32(sx, 7));
        _mm512_store_si512(o->c4, _mm512_sllv_epi32(sx, c4sh));
        _mm512_store_si512(o->c4r, _mm512_sllv_epi32(sx, c4rsh));
    }
    return 0;
}

/* kx_mv_q with xq's split x; the blocks past the last whole step of 8 as kx_mv_q takes them.
 * form: KX_Q8, KX_Q4, or KX_Q4R (Q4_0 rearranged, KN_Q4_0_R8: a step's scales are its first 16
 * bytes and a pair's nibbles one 32-byte load, the high lanes b's as 16 v). */
enum { KX_Q8, KX_Q4, KX_Q4R };
static void kx_mv_split(int form, float *y, const float *x, const void *w, int cols, int r0, int r1, const kn_xq8 *xq) {
    const int q4 = form != KX_Q8;
    const int nb = cols / BENCH_QK;
    const size_t bb = q4 ? sizeof(bench_block_q4_0) : sizeof(bench_block_q8_0);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i nib = _mm512_setr_epi64(0x0f0f0f0f0f0f0f0fLL, 0x0f0f0f0f0f0f0f0fLL, (long long)0xf0f0f0f0f0f0f0f0ULL,
                                          (long long)0xf0f0f0f0f0f0f0f0ULL, 0x0f0f0f0f0f0f0f0fLL, 0x0f0f0f0f0f0f0f0fLL,
                                          (long long)0xf0f0f0f0f0f0f0f0ULL, (long long)0xf0f0f0f0f0f0f0f0ULL);
    /* pair m's scale lanes in s16 = [8 block scales, the same / 16]: Q8_0 [a x8, b x8];
     * Q4_0 [a, a / 16, b, b / 16] x4, its lanes' order [a low, a high, b low, b high];
     * rearranged as kx_r8_idx */
    __m512i idx[4];
    for (int m = 0; m < 4; m++) {
        const int a = 2 * m, b = 2 * m + 1;
        idx[m] = form == KX_Q4    ? _mm512_setr_epi32(a, a, a, a, a + 8, a + 8, a + 8, a + 8, b, b, b, b, b + 8, b + 8, b + 8, b + 8)
                 : form == KX_Q4R ? kx_r8_idx(m)
                                  : _mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
    }
    for (int r = r0; r < r1; r++) {
        const char *row = (const char *)w + (size_t)r * nb * bb;
        __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        int i = 0;
        for (; i + 8 <= nb; i += 8) {
            const char *c = row + (size_t)i * bb;
            for (size_t o = 0; o < 8 * bb; o += 64) __builtin_prefetch(c + KN_PF_Q8 + o);
            const __m256 d8 = form == KX_Q4R ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)c)) : kx_scales8(c, q4);
            const __m256 s8 = _mm256_mul_ps(d8, _mm256_loadu_ps(xq->se + i));
            const __m512 s16 = _mm512_insertf32x8(_mm512_castps256_ps512(s8), _mm256_mul_ps(s8, _mm256_set1_ps(1.0f / 16)), 1);
            const kn_xsplit_pair *sp = xq->sp + i / 2;
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                __m512i u;
                if (form == KX_Q4R) u = kx_r8_pair(c, m);
                else if (q4) {
                    const bench_block_q4_0 *ba = (const bench_block_q4_0 *)(const void *)(c + 2 * m * bb);
                    const __m128i qa = _mm_loadu_si128((const __m128i *)(const void *)ba[0].qs);
                    const __m128i qb = _mm_loadu_si128((const __m128i *)(const void *)ba[1].qs);
                    u = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(qa)),
                                                            _mm256_broadcastsi128_si256(qb), 1), nib);
                } else {
                    const bench_block_q8_0 *ba = (const bench_block_q8_0 *)(const void *)(c + 2 * m * bb);
                    u = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)ba[0].qs)),
                                                            _mm256_loadu_si256((const __m256i *)(const void *)ba[1].qs), 1), flip);
                }
                const int32_t *corr = form == KX_Q4R ? sp[m].c4r : q4 ? sp[m].c4 : sp[m].c8;
                const __m512i t = _mm512_sub_epi32(kx_split_chain(u, &sp[m]), _mm512_load_si512(corr));
                a[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_permutexvar_ps(idx[m], s16), a[m]);
            }
        }
        a[0] = kx_tail(q4, row, x, i, nb, a[0]);
        y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
    }
}
#pragma GCC pop_options

static void kx_mv_q8_0(float *y, const float *x, const void *w, int cols, int r0, int r1, const kn_xq8 *xq) {
    if (xq && xq->sp) kx_mv_split(KX_Q8, y, x, w, cols, r0, r1, xq);
    else kx_mv_q(0, y, x, w, cols, r0, r1);
}
static void kx_mv_q4_0(float *y, const float *x, const void *w, int cols, int r0, int r1, const kn_xq8 *xq) {
    if (xq && xq->sp) kx_mv_split(KX_Q4, y, x, w, cols, r0, r1, xq);
    else kx_mv_q(1, y, x, w, cols, r0, r1);
}
/* Rearranged Q4_0 (KN_Q4_0_R8): the split decode; declined where x could not be split
 * (kernels.c then puts the rows back for the widening kernel). */
static int kx_mv_q4_0_r8(float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1,
                         const kn_xq8 *xq) {
    (void)n;
    (void)rows;
    if (!xq || !xq->sp) return -1;
    kx_mv_split(KX_Q4R, y, x, w, cols, r0, r1, xq);
    return 0;
}
#define KN_MV_Q8_0 kx_mv_q8_0
#define KN_MV_Q4_0 kx_mv_q4_0
#define KN_SPLIT_X kx_split_x
#define KN_SPLIT_DTS (1u << BENCH_Q8_0 | 1u << BENCH_Q4_0)
#define KN_MV_R8 kx_mv_q4_0_r8

#include "kernels_quant.inc"
#include "kernels_simd.inc"

const kn_ops kn_ops_avx512 = KN_TABLE();

/* avx512-wide: avx512 with Q8_0 and Q4_0 decoded by widening the weights to f32, as before the
 * split x (and so no Q4_0 rearranged for it). Exact, and a family auto measures: where
 * vpdpbusd is slow (a core that double-pumps 512-bit integer work, say) widening may decode
 * faster, and the flags cannot say so. */
const kn_ops kn_ops_avx512_wide = KN_TABLE_DECODE(NULL, 0u, NULL);

/* ---- vnni: the avx512 table with Q8_0 on vpdpbusd ----
 * vpdpbusd multiplies unsigned by signed bytes into int32 without saturation.
 * The weight goes in as w + 128 (w ^ 0x80, one op per weight block), so each
 * lane gets w . q + 128 (q0+q1+q2+q3); quant_x stored -128 (q0+..+q3) per lane
 * (nsum), which seeds the accumulator and cancels it. 256-bit vectors: one Q8_0
 * block each, and Zen 4 runs 512-bit integer ops as two halves anyway. These
 * functions alone carry the VNNI target, so the avx512 table cannot pick up a
 * VNNI instruction from the compiler. */
#pragma GCC push_options
#pragma GCC target("avx512vnni")
typedef __m256i ki_w;
KN_INLINE ki_w ki_prep(__m256i w) { return _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)); }
KN_INLINE __m256i ki_dot(ki_w w, __m256i q, const int32_t *nsum) {
    return _mm256_dpbusd_epi32(_mm256_loadu_si256((const __m256i *)(const void *)nsum), w, q);
}
KN_INLINE __m256i ki_udot(__m256i u, __m256i q) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, q); }
#define KI_FN(name) name##_vnni
/* 4 x 4 = 16 accumulators + 4 weights + 4 scales of the 32 ymm */
#define KI_RB 4
#define KI_TB 4
#define KI_NSUM 1
#define KI_ZMM 1 /* decode on 512-bit vpdpbusd (kernels_int8.inc) */
#include "kernels_int8_gemm.inc"
#define KI_GEMM KI_FN(gemm)
#include "kernels_int8.inc"

/* Rearranged Q4_0 (KN_Q4_0_R8) on vpdpbusd: mv_q4_0_zmm's loop, a pair one load and one AND */
static int mv_q4_0_r8_vnni(float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1,
                           const kn_xq8 *xq) {
    (void)x;
    (void)n;
    (void)rows;
    KI_FN(mv_q4_0_zmm_any)(1, y, w, cols, r0, r1, xq);
    return 0;
}
/* Its prefill: the int8 GEMM, which reads the groups as it packs them (g_block) */
static int mm_q4_0_r8_vnni(float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1,
                           const kn_xq8 *xq) {
    (void)x;
    return KI_GEMM(KN_Q4_0_R8, y, n, w, rows, cols, r0, r1, xq);
}
/* Interleaved Q4_0 (KN_Q4_0_G16): decode on its 16-row loop, prefill on the int8 GEMM, which
 * packs its panels straight from the groups (g_group_g16) */
static int mm_q4_0_g16_vnni(float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1,
                            const kn_xq8 *xq) {
    (void)x;
    if (n == 1) return KI_FN(mv_q4_0_g16_zmm)(y, w, rows, cols, r0, r1, xq);
    return KI_GEMM(KN_Q4_0_G16, y, n, w, rows, cols, r0, r1, xq);
}
#pragma GCC pop_options

const kn_ops kn_ops_vnni = KN_TABLE_INT8(KI_FN, quant_x_vnni, 1, peak_int8_vnni, mv_q4_0_r8_vnni, mm_q4_0_r8_vnni,
                                         mm_q4_0_g16_vnni);

/* ---- avx512-bf16: the avx512 table with bf16 prefill on vdpbf16ps ----
 * These functions alone carry the AVX512_BF16 target, as the VNNI ones do. */
#pragma GCC push_options
#pragma GCC target("avx512bf16")
#include "kernels_bf16.inc"
#pragma GCC pop_options

const kn_ops kn_ops_avx512_bf16 = KN_TABLE_BF16(mm_bf16_dot_avx512, mm_bf16_r16_dot_avx512, peak_bf16_avx512);

/* ---- amx: the avx512 table with prefill on AMX tiles, exact (kernels_amx.inc) ----
 * These functions alone carry the AMX and AVX512_BF16 targets. */
#pragma GCC push_options
#pragma GCC target("avx512bf16,amx-tile,amx-bf16")
#include "kernels_amx.inc"
#pragma GCC pop_options

const kn_ops kn_ops_amx = {
    .mm = {[BENCH_F32] = mm_amx_f32, [BENCH_F16] = mm_amx_f16, [BENCH_BF16] = mm_amx_bf16, [BENCH_Q8_0] = mm_amx_q8_0,
           [BENCH_Q4_0] = mm_amx_q4_0, [BENCH_Q4_1] = mm_amx_q4_1, [BENCH_Q5_0] = mm_amx_q5_0, [BENCH_Q5_1] = mm_amx_q5_1,
           [BENCH_Q2_K] = mm_amx_q2_k, [BENCH_Q3_K] = mm_amx_q3_k, [BENCH_Q4_K] = mm_amx_q4_k, [BENCH_Q5_K] = mm_amx_q5_k,
           [BENCH_Q6_K] = mm_amx_q6_k},
    .triad = KN_FN(triad), .read = KN_FN(read), .read_pf = KN_FN(read_pf), .peak_f32 = KN_FN(peak_f32),
    .split_dts = KN_SPLIT_DTS, .split_x = KN_SPLIT_X, .mv_q4_0_r8 = KN_MV_R8, /* decode is avx512's */
    .mm_r8_prefill = mm_amx_q4_0_r8,
};
#endif
