/* Tensor element types shared by the core, the formats and the modules.
 *
 * Byte layouts:
 *   F32   4 bytes per element, IEEE-754 binary32, little endian
 *   F16   2 bytes per element, IEEE-754 binary16
 *   BF16  2 bytes per element, the high half of a binary32
 *   Q8_0  blocks of 32 elements: f16 scale d, then 32 x int8 q; value = d * q  (34 bytes per block)
 */
#ifndef BENCH_DTYPE_H
#define BENCH_DTYPE_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

typedef enum bench_dtype {
    BENCH_F32 = 0,
    BENCH_F16,
    BENCH_BF16,
    BENCH_Q8_0,
    BENCH_DTYPE_COUNT
} bench_dtype;

#define BENCH_Q8_0_BLOCK 32 /* elements per Q8_0 block */

typedef struct {
    uint16_t d;                 /* f16 scale */
    int8_t qs[BENCH_Q8_0_BLOCK];
} bench_block_q8_0;             /* 34 bytes, no padding */

static inline const char *bench_dtype_name(bench_dtype t) {
    static const char *names[] = {"f32", "f16", "bf16", "q8_0"};
    return (unsigned)t < BENCH_DTYPE_COUNT ? names[t] : "?";
}

/* Parses "f32"/"f16"/"bf16"/"q8_0"; returns -1 for anything else. */
static inline int bench_dtype_parse(const char *s) {
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++)
        if (strcmp(s, bench_dtype_name((bench_dtype)t)) == 0) return t;
    return -1;
}

/* Elements per storage block (1 except for block-quantised types). */
static inline size_t bench_dtype_block_elems(bench_dtype t) { return t == BENCH_Q8_0 ? BENCH_Q8_0_BLOCK : 1; }

/* Bytes per storage block. */
static inline size_t bench_dtype_block_bytes(bench_dtype t) {
    switch (t) {
    case BENCH_F32: return 4;
    case BENCH_F16: case BENCH_BF16: return 2;
    case BENCH_Q8_0: return sizeof(bench_block_q8_0);
    default: return 0;
    }
}

/* Alignment a pointer to this type needs so the compute kernels may read it in place. */
static inline size_t bench_dtype_align(bench_dtype t) { return t == BENCH_F32 ? 4 : 2; }

/* Bytes of a row of n elements; 0 if n is not a whole number of blocks. */
static inline size_t bench_dtype_row_bytes(bench_dtype t, int64_t n) {
    size_t be = bench_dtype_block_elems(t);
    if (n < 0 || (size_t)n % be) return 0;
    return (size_t)n / be * bench_dtype_block_bytes(t);
}

/* ---- scalar conversions (the kernels have vector versions) ---- */

static inline float bench_f16_to_f32(uint16_t h) {
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
static inline uint16_t bench_f32_to_f16(float f) {
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

static inline float bench_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16; float f; memcpy(&f, &bits, 4); return f;
}

static inline uint16_t bench_f32_to_bf16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

#endif
