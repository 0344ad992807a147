/* The KV cache's element types, one row each of kvq_types below (bench_kv_shape.k_type,
 * v_type): rows of K or V written from the f32 rows the forward pass gives, and read back a
 * chunk of rows at a time for attention. Static: each module compiles its own copy (modules
 * link nothing of the core's); the engine reads the same table for the names it takes.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/blockquant.h"
#include "engines/abi/dtype.h"
#include "engines/abi/kv.h"

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

/* F16C's conversion rounds to nearest even, as bench_f32_to_f16 does, subnormals included */
__attribute__((target("avx2,f16c"), unused))
static void kvq_store_f16_f16c(const float *src, uint16_t *h, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = bench_f32_to_f16(src[i]);
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

/* ---- each type's conversions, f32 -> the type (store) and back (load), n values ---- */

static inline void kvq_store_f32(const float *src, void *dst, size_t n) { memcpy(dst, src, n * sizeof(float)); }
static inline void kvq_load_f32(const void *src, float *dst, size_t n) { memcpy(dst, src, n * sizeof(float)); }

static inline void kvq_store_f16(const float *src, void *dst, size_t n) {
    uint16_t *h = dst;
#if defined(__x86_64__)
    if (kvq_avx2()) {
        kvq_store_f16_f16c(src, h, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) h[i] = bench_f32_to_f16(src[i]);
}
static inline void kvq_load_f16_row(const void *src, float *dst, size_t n) { kvq_load_f16(src, dst, n); }

static inline void kvq_store_bf16(const float *src, void *dst, size_t n) {
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i++) h[i] = bench_f32_to_bf16(src[i]);
}
static inline void kvq_load_bf16(const void *src, float *dst, size_t n) {
#if defined(__x86_64__)
    if (kvq_avx2()) {
        kvq_load_bf16_avx2(src, dst, n);
        return;
    }
#endif
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)h[i] << 16;
        memcpy(&dst[i], &bits, sizeof(float));
    }
}

static inline void kvq_store_q8_0(const float *src, void *dst, size_t n) {
    for (size_t i = 0; i < n / BENCH_Q8_0_BLOCK; i++) bench_quant_block_q8_0(src + i * BENCH_Q8_0_BLOCK, (bench_block_q8_0 *)dst + i);
}
static inline void kvq_load_q8_0(const void *src, float *dst, size_t n) {
#if defined(__x86_64__)
    if (kvq_avx2()) {
        kvq_load_q8_0_avx2(src, dst, n / BENCH_Q8_0_BLOCK);
        return;
    }
#endif
    for (size_t i = 0; i < n / BENCH_Q8_0_BLOCK; i++)
        bench_dequant_block_q8_0((const bench_block_q8_0 *)src + i, dst + i * BENCH_Q8_0_BLOCK);
}

static inline void kvq_store_q4_0(const float *src, void *dst, size_t n) {
    for (size_t i = 0; i < n / BENCH_QK; i++) bench_quant_block_q4_0(src + i * BENCH_QK, (bench_block_q4_0 *)dst + i);
}
static inline void kvq_load_q4_0(const void *src, float *dst, size_t n) {
#if defined(__x86_64__)
    if (kvq_avx2()) {
        kvq_load_q4_0_avx2(src, dst, n / BENCH_QK);
        return;
    }
#endif
    for (size_t i = 0; i < n / BENCH_QK; i++) bench_dequant_block_q4_0((const bench_block_q4_0 *)src + i, dst + i * BENCH_QK);
}

/* ---- the table ---- */

/* Which attention reads a type (kvq_type.readers), and so which KV modules store it. */
#define KVQ_READ_CPU 1u     /* kv_attn.h: f32 in place, any other type through its row's load */
#define KVQ_READ_CUDA 2u    /* engines/cuda/attn.cu, whose element switches read it (KVC_CUDA_TYPES) */

/* A KV element type. How to add one: docs/extending.md, "A KV element type". */
typedef struct kvq_type {
    bench_dtype id;         /* what bench_kv_shape, kv.h cache_types and engine_spec call it */
    const char *name;       /* what --cache-type and a scenario's kv_cache take; NULL: bench_dtype_name(id) */
    unsigned readers;       /* KVQ_READ_*: the attention kernels that read it */
    size_t block_elems;     /* values a block (1: no blocks); a head's row is a whole number of them */
    size_t block_bytes;     /* bytes a block, scales included */
    void (*store)(const float *src, void *dst, size_t n);   /* n values (whole blocks) from f32 */
    void (*load)(const void *src, float *dst, size_t n);    /* and back to f32 */
} kvq_type;

/* The rows, in the order every list of them takes: ROW(id, readers, the other fields). A
 * test may add rows of its own by defining KVQ_TEST_ROWS(ROW) before including this header
 * (tests/test_kv_types.c); ids are bench_dtype values below 32 (cache_types is a 32-bit mask). */
#ifndef KVQ_TEST_ROWS
#define KVQ_TEST_ROWS(ROW)
#endif
#define KVQ_ROWS(ROW)                                                                                        \
    ROW(BENCH_F32, KVQ_READ_CPU | KVQ_READ_CUDA, .block_elems = 1, .block_bytes = sizeof(float),             \
        .store = kvq_store_f32, .load = kvq_load_f32)                                                        \
    ROW(BENCH_F16, KVQ_READ_CPU | KVQ_READ_CUDA, .block_elems = 1, .block_bytes = sizeof(uint16_t),          \
        .store = kvq_store_f16, .load = kvq_load_f16_row)                                                    \
    ROW(BENCH_BF16, KVQ_READ_CPU | KVQ_READ_CUDA, .block_elems = 1, .block_bytes = sizeof(uint16_t),         \
        .store = kvq_store_bf16, .load = kvq_load_bf16)                                                      \
    ROW(BENCH_Q8_0, KVQ_READ_CPU | KVQ_READ_CUDA, .block_elems = BENCH_Q8_0_BLOCK,                           \
        .block_bytes = sizeof(bench_block_q8_0), .store = kvq_store_q8_0, .load = kvq_load_q8_0)             \
    ROW(BENCH_Q4_0, KVQ_READ_CPU | KVQ_READ_CUDA, .block_elems = BENCH_QK,                                   \
        .block_bytes = sizeof(bench_block_q4_0), .store = kvq_store_q4_0, .load = kvq_load_q4_0)             \
    KVQ_TEST_ROWS(ROW)

#define KVQ_ROW(ID, READERS, ...) [ID] = {.id = ID, .readers = READERS, __VA_ARGS__},
/* Indexed by id; the ids no row names are zero (no store). */
static const kvq_type kvq_types[] = {KVQ_ROWS(KVQ_ROW)};
#define KVQ_N_IDS (sizeof kvq_types / sizeof kvq_types[0])

/* The types the attention of `readers` reads, as a kv.h cache_types mask (a constant, for a
 * module's iface). */
#define KVQ_BIT_CPU(ID, READERS, ...) | ((READERS) & KVQ_READ_CPU ? 1u << (ID) : 0u)
#define KVQ_BIT_CUDA(ID, READERS, ...) | ((READERS) & KVQ_READ_CUDA ? 1u << (ID) : 0u)
#define KVQ_CPU_TYPES (0u KVQ_ROWS(KVQ_BIT_CPU))   /* what every CPU KV module stores */
#define KVQ_CUDA_TYPES (0u KVQ_ROWS(KVQ_BIT_CUDA))

/* t's row; NULL where no row names t. */
static inline const kvq_type *kvq_type_of(bench_dtype t) {
    return (unsigned)t < KVQ_N_IDS && kvq_types[t].store ? &kvq_types[t] : NULL;
}

static inline const char *kvq_type_name(const kvq_type *r) { return r->name ? r->name : bench_dtype_name(r->id); }

/* The type of a name len bytes long, or -1. */
static inline int kvq_type_parse(const char *s, size_t len) {
    for (size_t t = 0; t < KVQ_N_IDS; t++) {
        const kvq_type *r = kvq_type_of((bench_dtype)t);
        if (r && strlen(kvq_type_name(r)) == len && !strncmp(kvq_type_name(r), s, len)) return (int)t;
    }
    return -1;
}

/* Whether a row has blocks of at most max_block values. */
static inline int kvq_type_within(bench_dtype t, size_t max_block) {
    const kvq_type *r = kvq_type_of(t);
    return r && r->block_elems <= max_block;
}

/* "f32, f16, bf16, q8_0 or q4_0" into buf (truncated to len), for help and messages: the types
 * whose blocks hold at most max_block values (SIZE_MAX: every type; 1: those without blocks),
 * last between the last two (" or "). */
static inline void kvq_type_names(char *buf, size_t len, size_t max_block, const char *last) {
    size_t used = 0, n = 0, total = 0;
    for (size_t t = 0; t < KVQ_N_IDS; t++) total += (size_t)kvq_type_within((bench_dtype)t, max_block);
    if (len) buf[0] = 0;
    for (size_t t = 0; t < KVQ_N_IDS; t++) {
        const kvq_type *r = kvq_type_of((bench_dtype)t);
        if (!kvq_type_within((bench_dtype)t, max_block)) continue;
        const char *sep = !n ? "" : n + 1 == total ? last : ", ";
        int w = snprintf(buf + used, used < len ? len - used : 0, "%s%s", sep, kvq_type_name(r));
        if (w > 0) used += (size_t)w;
        n++;
    }
}

/* Bytes of n values of type t (n a whole number of its blocks); 0 for a type no row names. */
static inline size_t kvq_bytes(bench_dtype t, size_t n) {
    const kvq_type *r = kvq_type_of(t);
    return r ? n / r->block_elems * r->block_bytes : 0;
}

/* Refuses a shape the module's types cannot hold: a block type needs each head's row a whole
 * number of blocks, so that attention reads one head without its neighbours. Returns 0, or
 * -BENCH_ERR_REFUSED with err naming the module. */
static inline int kvq_check_shape(const bench_kv_shape *s, uint32_t types, const char *mod, char *err, size_t errlen) {
    const bench_dtype t[2] = {s->k_type, s->v_type};
    for (int i = 0; i < 2; i++) {
        const kvq_type *r = kvq_type_of(t[i]);
        if (!r || (unsigned)t[i] >= 32 || !(types >> t[i] & 1u))
            return bench_errc(err, errlen, BENCH_ERR_REFUSED, "%s: cannot store %s as %s", mod, i ? "V" : "K",
                              r ? kvq_type_name(r) : bench_dtype_name(t[i]));
        if (s->head_dim % (int)r->block_elems) {
            char whole[128];
            kvq_type_names(whole, sizeof whole, 1, " or ");
            return bench_errc(err, errlen, BENCH_ERR_REFUSED, "%s: a %s %s cache needs head_dim a multiple of %zu; "
                              "this model's is %d (use %s)", mod, kvq_type_name(r), i ? "V" : "K", r->block_elems,
                              s->head_dim, whole);
        }
    }
    return 0;
}

/* dst (n values of type t) from src (n floats), and back; a type no row names is taken as f32. */
static inline void kvq_store_row(bench_dtype t, const float *src, void *dst, size_t n) {
    const kvq_type *r = kvq_type_of(t);
    (r ? r : &kvq_types[BENCH_F32])->store(src, dst, n);
}

static inline void kvq_load_row(bench_dtype t, const void *src, float *dst, size_t n) {
    const kvq_type *r = kvq_type_of(t);
    (r ? r : &kvq_types[BENCH_F32])->load(src, dst, n);
}

#endif
