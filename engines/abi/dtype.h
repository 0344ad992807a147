/* Tensor element types shared by the core, the formats and the modules.
 *
 * Byte layouts:
 *   F32   4 bytes per element, IEEE-754 binary32, little endian
 *   F16   2 bytes per element, IEEE-754 binary16
 *   BF16  2 bytes per element, the high half of a binary32
 *   Q8_0  blocks of 32 elements: f16 scale d, then 32 x int8 q; value = d * q  (34 bytes per block)
 *
 * The other block-quantised types are ggml's (ggml-common.h, gguf-py quants.py),
 * stored exactly as GGUF stores them; every f16 field is 2-byte aligned within
 * its block and every block size is even, so a row needs 2-byte alignment only:
 *   Q4_0  32 elements, 18 bytes: f16 d; u8 qs[16]. Element j < 16 is the low nibble of
 *         qs[j], element j + 16 the high nibble; value = d * (nibble - 8)
 *   Q4_1  32 elements, 20 bytes: f16 d, f16 m; u8 qs[16] (nibbles as Q4_0); value = d * nibble + m
 *   Q5_0  32 elements, 22 bytes: f16 d; u8 qh[4]; u8 qs[16]. qh is a little-endian u32 whose
 *         bit j is the fifth bit of element j; value = d * ((nibble | bit << 4) - 16)
 *   Q5_1  32 elements, 24 bytes: f16 d, f16 m; u8 qh[4]; u8 qs[16]; value = d * q5 + m
 *   Q2_K  256 elements (16 groups of 16), 84 bytes: u8 scales[16] (low nibble scale, high
 *         nibble min); u8 qs[64] (2-bit); f16 d, f16 dmin; value = d*sc * q - dmin*mn
 *   Q3_K  256 elements (16 groups of 16), 110 bytes: u8 hmask[32] (third bit, inverted);
 *         u8 qs[64] (low 2 bits); u8 scales[12] (16 x 6-bit, offset 32); f16 d
 *   Q4_K  256 elements (8 groups of 32), 144 bytes: f16 d, f16 dmin; u8 scales[12]
 *         (8 x 6-bit scale and 8 x 6-bit min); u8 qs[128] (nibbles); value = d*sc*q - dmin*mn
 *   Q5_K  256 elements, 176 bytes: f16 d, f16 dmin; u8 scales[12]; u8 qh[32] (fifth bits);
 *         u8 qs[128] (low nibbles)
 *   Q6_K  256 elements (16 groups of 16), 210 bytes: u8 ql[128] (low nibbles); u8 qh[64]
 *         (high 2 bits); i8 scales[16]; f16 d; value = d * sc * (q6 - 32)
 * engines/core/compute/quant.c holds the exact dequantisers and their bit-level detail.
 */
#ifndef BENCH_DTYPE_H
#define BENCH_DTYPE_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

/* The sizes and element conversions below (BENCH_HOSTDEV), and the block quantisers of
 * blockquant.h, are compiled for the GPU too (nvcc, engines/cuda/attn.cu), so that a CUDA
 * KV cache of a type stores exactly the bits the CPU's stores. */
#if defined(__CUDACC__)
#define BENCH_HOSTDEV __host__ __device__
#else
#define BENCH_HOSTDEV
#endif

typedef enum bench_dtype {
    BENCH_F32 = 0,
    BENCH_F16,
    BENCH_BF16,
    BENCH_Q8_0,
    BENCH_Q4_0,
    BENCH_Q4_1,
    BENCH_Q5_0,
    BENCH_Q5_1,
    BENCH_Q2_K,
    BENCH_Q3_K,
    BENCH_Q4_K,
    BENCH_Q5_K,
    BENCH_Q6_K,
    BENCH_DTYPE_COUNT
} bench_dtype;

#define BENCH_Q8_0_BLOCK 32 /* elements per Q8_0 block */

typedef struct {
    uint16_t d;                 /* f16 scale */
    int8_t qs[BENCH_Q8_0_BLOCK];
} bench_block_q8_0;             /* 34 bytes, no padding */

#define BENCH_QK 32     /* elements per Q4_0/Q4_1/Q5_0/Q5_1 block */
#define BENCH_QK_K 256  /* elements per K-quant super-block */

typedef struct { uint16_t d; uint8_t qs[BENCH_QK / 2]; } bench_block_q4_0;                   /* 18 bytes */
typedef struct { uint16_t d, m; uint8_t qs[BENCH_QK / 2]; } bench_block_q4_1;                /* 20 bytes */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[BENCH_QK / 2]; } bench_block_q5_0;    /* 22 bytes */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[BENCH_QK / 2]; } bench_block_q5_1; /* 24 bytes */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } bench_block_q2_k;   /* 84 bytes */
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } bench_block_q3_k; /* 110 */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } bench_block_q4_k;  /* 144 bytes */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } bench_block_q5_k; /* 176 */
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } bench_block_q6_k; /* 210 */

#ifdef __cplusplus
#define BENCH_STATIC_ASSERT static_assert /* nvcc reads this header as C++ */
#else
#define BENCH_STATIC_ASSERT _Static_assert
#endif
BENCH_STATIC_ASSERT(sizeof(bench_block_q8_0) == 34 && sizeof(bench_block_q4_0) == 18 && sizeof(bench_block_q4_1) == 20 &&
               sizeof(bench_block_q5_0) == 22 && sizeof(bench_block_q5_1) == 24 && sizeof(bench_block_q2_k) == 84 &&
               sizeof(bench_block_q3_k) == 110 && sizeof(bench_block_q4_k) == 144 && sizeof(bench_block_q5_k) == 176 &&
               sizeof(bench_block_q6_k) == 210, "block layouts must match ggml's byte for byte");

static inline const char *bench_dtype_name(bench_dtype t) {
    static const char *names[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0",
                                  "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};
    return (unsigned)t < BENCH_DTYPE_COUNT ? names[t] : "?";
}

/* Block-quantised (Q8_0 and every type after it): no per-element access. */
BENCH_HOSTDEV static inline int bench_dtype_is_quant(bench_dtype t) { return t >= BENCH_Q8_0 && t < BENCH_DTYPE_COUNT; }

/* Whether bench writes dt (model convert, model synth): f32, f16, bf16, q8_0, q4_0.
 * The other block-quantised types are read only. */
static inline int bench_dtype_writable(bench_dtype t) { return (unsigned)t <= BENCH_Q4_0; }

/* Parses a name of bench_dtype_name ("f32", "q4_k"...); returns -1 for anything else. */
static inline int bench_dtype_parse(const char *s) {
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++)
        if (strcmp(s, bench_dtype_name((bench_dtype)t)) == 0) return t;
    return -1;
}

/* Elements per storage block (1 except for block-quantised types). */
BENCH_HOSTDEV static inline size_t bench_dtype_block_elems(bench_dtype t) {
    if (t >= BENCH_Q2_K && t <= BENCH_Q6_K) return BENCH_QK_K;
    return bench_dtype_is_quant(t) ? BENCH_QK : 1;
}

/* Bytes per storage block. */
BENCH_HOSTDEV static inline size_t bench_dtype_block_bytes(bench_dtype t) {
    switch (t) {
    case BENCH_F32: return 4;
    case BENCH_F16: case BENCH_BF16: return 2;
    case BENCH_Q8_0: return sizeof(bench_block_q8_0);
    case BENCH_Q4_0: return sizeof(bench_block_q4_0);
    case BENCH_Q4_1: return sizeof(bench_block_q4_1);
    case BENCH_Q5_0: return sizeof(bench_block_q5_0);
    case BENCH_Q5_1: return sizeof(bench_block_q5_1);
    case BENCH_Q2_K: return sizeof(bench_block_q2_k);
    case BENCH_Q3_K: return sizeof(bench_block_q3_k);
    case BENCH_Q4_K: return sizeof(bench_block_q4_k);
    case BENCH_Q5_K: return sizeof(bench_block_q5_k);
    case BENCH_Q6_K: return sizeof(bench_block_q6_k);
    default: return 0;
    }
}

/* Alignment a pointer to this type needs so the compute kernels may read it in place. */
static inline size_t bench_dtype_align(bench_dtype t) { return t == BENCH_F32 ? 4 : 2; }

/* Bytes of a row of n elements; 0 if n is not a whole number of blocks. */
BENCH_HOSTDEV static inline size_t bench_dtype_row_bytes(bench_dtype t, int64_t n) {
    size_t be = bench_dtype_block_elems(t);
    if (n < 0 || (size_t)n % be) return 0;
    return (size_t)n / be * bench_dtype_block_bytes(t);
}

/* ---- scalar conversions (the kernels have vector versions) ---- */

BENCH_HOSTDEV static inline float bench_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) bits = sign;
        else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) { mant <<= 1; exp--; }
            mant &= 0x3ff;
            bits = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    float f; memcpy(&f, &bits, 4); return f;
}

/* Round to nearest even, with overflow to inf and NaN kept NaN. */
BENCH_HOSTDEV static inline uint16_t bench_f32_to_f16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) { /* result is subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* bits to drop so that one unit is 2^-24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 13) - ((127 - 15) << 10));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

BENCH_HOSTDEV static inline float bench_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16; float f; memcpy(&f, &bits, 4); return f;
}

BENCH_HOSTDEV static inline uint16_t bench_f32_to_bf16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

#endif
