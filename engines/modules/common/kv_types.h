/* The cache types of the CPU KV modules: rows of K or V stored as f32, f16, bf16, q8_0 or
 * q4_0 (bench_kv_shape.k_type, v_type), written from the f32 rows the forward pass gives,
 * and read back a chunk of rows at a time for attention. Static: each module compiles its
 * own copy (modules link nothing of the core's).
 *
 * The conversions are the core's own (engines/abi/blockquant.h, dtype.h; tests/test_kv_types.c
 * checks the result), so a cache of type T stores what an f32 file converted to T would: f16
 * and bf16 round to nearest even, q8_0 and q4_0 as blockquant.h says.
 *
 * Why a chunk of rows and not the whole cache: attention converts at most KVQ_CHUNK_FLOATS
 * values of one head at a time into a buffer on the stack, so the cache is read in its own
 * type (a q8_0 cache moves 34 bytes per 32 values) and no f32 copy of it is ever made. */
#ifndef BENCH_KV_TYPES_H
#define BENCH_KV_TYPES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/blockquant.h"
#include "engines/abi/dtype.h"
#include "engines/abi/kv.h"

/* The types every CPU KV module stores (kv.h cache_types). */
#define KVQ_CPU_TYPES ((1u << BENCH_F32) | (1u << BENCH_F16) | (1u << BENCH_BF16) | (1u << BENCH_Q8_0) | (1u << BENCH_Q4_0))

/* Values converted per chunk of attention (16 KiB of stack). */
#define KVQ_CHUNK_FLOATS 4096

/* Query x KV-head pairs a unit of typed attention takes at once (kv_attn.h kva_typed_unit):
 * up to 4 queries on one KV head, or a decode's query on up to 4 KV heads. */
#define KVQ_QBLOCK 4

/* Attention scores each task keeps: one row of max_pos per (query, head) pair of a unit in a
 * typed cache, one row in an f32 cache. At 8192 positions with 8 query heads a KV head,
 * 4 x 8 x 8192 x 4 B = 1 MiB a task. */
static inline size_t kvq_scores_per_task(const bench_kv_shape *s) {
    int typed = s->k_type != BENCH_F32 || s->v_type != BENCH_F32;
    return (size_t)(typed ? KVQ_QBLOCK * (s->n_heads / s->n_kv_heads) : 1) * (size_t)s->max_pos;
}

/* Bytes of n values of type t (n a whole number of its blocks). */
static inline size_t kvq_bytes(bench_dtype t, size_t n) {
    return n / bench_dtype_block_elems(t) * bench_dtype_block_bytes(t);
}

/* Refuses a shape the module's types cannot hold: a block-quantised K or V needs each
 * head's row a whole number of blocks, so that attention reads one head without its
 * neighbours. Returns 0, or -BENCH_ERR_REFUSED with err naming the module. */
static inline int kvq_check_shape(const bench_kv_shape *s, uint32_t types, const char *mod, char *err, size_t errlen) {
    const bench_dtype t[2] = {s->k_type, s->v_type};
    for (int i = 0; i < 2; i++) {
        if ((unsigned)t[i] >= 32 || !(types >> t[i] & 1u))
            return bench_errc(err, errlen, BENCH_ERR_REFUSED, "%s: cannot store %s as %s", mod, i ? "V" : "K",
                              bench_dtype_name(t[i]));
        size_t be = bench_dtype_block_elems(t[i]);
        if (s->head_dim % (int)be)
            return bench_errc(err, errlen, BENCH_ERR_REFUSED, "%s: a %s %s cache needs head_dim a multiple of %zu; "
                              "this model's is %d (use f32, f16 or bf16)", mod, bench_dtype_name(t[i]), i ? "V" : "K", be,
                              s->head_dim);
    }
    return 0;
}

/* dst (n values of type t) from src (n floats). */
static inline void kvq_store_row(bench_dtype t, const float *src, void *dst, size_t n) {
    switch (t) {
    case BENCH_F16: {
        uint16_t *h = dst;
        for (size_t i = 0; i < n; i++) h[i] = bench_f32_to_f16(src[i]);
        break;
    }
    case BENCH_BF16: {
        uint16_t *h = dst;
        for (size_t i = 0; i < n; i++) h[i] = bench_f32_to_bf16(src[i]);
        break;
    }
    case BENCH_Q8_0:
        for (size_t i = 0; i < n / BENCH_Q8_0_BLOCK; i++) bench_quant_block_q8_0(src + i * BENCH_Q8_0_BLOCK, (bench_block_q8_0 *)dst + i);
        break;
    case BENCH_Q4_0:
        for (size_t i = 0; i < n / BENCH_QK; i++) bench_quant_block_q4_0(src + i * BENCH_QK, (bench_block_q4_0 *)dst + i);
        break;
    default:
        memcpy(dst, src, n * sizeof(float));
        break;
    }
}

/* dst (n floats) from n f16 values. The conversion is F16C's vcvtph2ps where the CPU has it,
 * eight at a time (a first version through _Float16 casts compiled to libgcc calls on CPUs
 * without AVX512-FP16 and made an f16 cache's prefill three times slower than f32's); every
 * f16 is exact in f32, so both paths give the same bits. */
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx,f16c"), unused))
static void kvq_load_f16_f16c(const uint16_t *h, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + i))));
    for (; i < n; i++) dst[i] = bench_f16_to_f32(h[i]);
}
#endif

static inline void kvq_load_f16(const uint16_t *h, float *dst, size_t n) {
#if defined(__x86_64__)
    static int f16c = -1;   /* a benign race: every thread computes the same answer */
    if (f16c < 0) {
        __builtin_cpu_init();
        f16c = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
    }
    if (f16c) {
        kvq_load_f16_f16c(h, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = bench_f16_to_f32(h[i]);
}

/* The block types and bf16 a row at a time with AVX2: 8 values per instruction where the
 * scalar loops (the modules are built for baseline x86-64) made a q8_0 cache's decode at 8000
 * positions slower than an f16 cache's, though it reads half the bytes. The same operations
 * as blockquant.h (d * (float)q, one rounding), so the same bits. */
#if defined(__x86_64__)
__attribute__((target("avx2,f16c"), unused))
static void kvq_load_q8_0_avx2(const bench_block_q8_0 *b, float *dst, size_t n_blocks) {
    for (size_t i = 0; i < n_blocks; i++, dst += BENCH_Q8_0_BLOCK) {
        const __m256 d = _mm256_set1_ps(bench_f16_to_f32(b[i].d));
        const int8_t *q = b[i].qs;
        for (int j = 0; j < BENCH_Q8_0_BLOCK; j += 8) {
            __m128i q8 = _mm_loadl_epi64((const __m128i *)(const void *)(q + j));
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8))));
        }
    }
}

__attribute__((target("avx2,f16c"), unused))
static void kvq_load_q4_0_avx2(const bench_block_q4_0 *b, float *dst, size_t n_blocks) {
    const __m128i low = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    for (size_t i = 0; i < n_blocks; i++, dst += BENCH_QK) {
        const __m256 d = _mm256_set1_ps(bench_f16_to_f32(b[i].d));
        __m128i qs = _mm_loadu_si128((const __m128i *)(const void *)b[i].qs);
        __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, low), eight);                      /* y[0..15] */
        __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), low), eight);   /* y[16..31] */
        _mm256_storeu_ps(dst, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
        _mm256_storeu_ps(dst + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
        _mm256_storeu_ps(dst + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
        _mm256_storeu_ps(dst + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
    }
}

__attribute__((target("avx2"), unused))
static void kvq_load_bf16_avx2(const uint16_t *h, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(h + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) {
        uint32_t bits = (uint32_t)h[i] << 16;
        memcpy(&dst[i], &bits, sizeof(float));
    }
}
#endif

/* Whether the AVX2 loaders run: the CPU has them, and $BENCH_KV_SCALAR is not set (the test's
 * way to compare both paths on one machine). */
static inline int kvq_avx2(void) {
#if defined(__x86_64__)
    static int avx2 = -1;   /* a benign race: every thread computes the same answer */
    if (avx2 < 0) {
        __builtin_cpu_init();
        const char *off = getenv("BENCH_KV_SCALAR");
        avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && !(off && *off && strcmp(off, "0"));
    }
    return avx2;
#else
    return 0;
#endif
}

static inline void kvq_load_row(bench_dtype t, const void *src, float *dst, size_t n) {
#if defined(__x86_64__)
    if (kvq_avx2()) {
        switch (t) {
        case BENCH_Q8_0: kvq_load_q8_0_avx2(src, dst, n / BENCH_Q8_0_BLOCK); return;
        case BENCH_Q4_0: kvq_load_q4_0_avx2(src, dst, n / BENCH_QK); return;
        case BENCH_BF16: kvq_load_bf16_avx2(src, dst, n); return;
        default: break;
        }
    }
#endif
    switch (t) {
    case BENCH_F16: kvq_load_f16(src, dst, n); break;
    case BENCH_BF16: {
        const uint16_t *h = src;
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)h[i] << 16;
            memcpy(&dst[i], &bits, sizeof(float));
        }
        break;
    }
    case BENCH_Q8_0:
        for (size_t i = 0; i < n / BENCH_Q8_0_BLOCK; i++)
            bench_dequant_block_q8_0((const bench_block_q8_0 *)src + i, dst + i * BENCH_Q8_0_BLOCK);
        break;
    case BENCH_Q4_0:
        for (size_t i = 0; i < n / BENCH_QK; i++) bench_dequant_block_q4_0((const bench_block_q4_0 *)src + i, dst + i * BENCH_QK);
        break;
    default:
        memcpy(dst, src, n * sizeof(float));
        break;
    }
}

#endif
