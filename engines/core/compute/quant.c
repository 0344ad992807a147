/* Exact dequantisation and matmul for ggml's block-quantised types.
 *
 * Written from the public block layouts (ggml-common.h's structs, gguf-py's
 * quants.py): one function per type turns one block into f32, in the order of
 * operations gguf-py uses (e.g. Q4_K: (d * sc) * q - (dmin * m)), so each weight
 * is bit-identical to that reference. The build is ISO C17, which keeps gcc from
 * contracting a * b + c into an FMA that would round once instead of twice.
 *
 * Bit layouts, per type (element index e within the block):
 *   Q4_0/Q4_1  e < 16: qs[e] & 15;  e >= 16: qs[e-16] >> 4
 *   Q5_0/Q5_1  as Q4, plus bit e of the little-endian u32 qh as bit 4
 *   Q2_K       8 groups of 32 bytes' worth: half h (e / 128) uses qs[32h .. 32h+31]; within
 *              it, shift pair j (0..3) takes bits 2j..2j+1 of 32 bytes, 16 elements per scale
 *   Q3_K       as Q2_K for the low two bits; hmask bit (2 bits per pass over the halves)
 *              set means +0, clear means -4; 16 6-bit scales packed in 12 bytes, offset 32
 *   Q4_K/Q5_K  4 passes of 64 elements over 32 bytes of qs: low nibbles then high nibbles,
 *              each 32 with its own 6-bit scale and min (get_scale_min below); Q5_K's qh
 *              gives bit 4, two bits of each qh byte per pass
 *   Q6_K       2 halves of 128 elements; within a half, l < 32 gives four elements
 *              l, l+32, l+64, l+96 from ql[l] / ql[l+32] nibbles and qh[l]'s four 2-bit
 *              fields; 16 int8 scales, one per 16 elements
 */
#include "quant.h"
#include "engines/abi/blockquant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static inline float h2f(uint16_t h) { return bench_f16_to_f32(h); }

/* ======================= one block -> f32 ======================= */

static void dq_q4_0(const void *p, float *y) { bench_dequant_block_q4_0(p, y); }

static void dq_q4_1(const void *p, float *y) {
    const bench_block_q4_1 *b = p;
    const float d = h2f(b->d), m = h2f(b->m);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(b->qs[j] & 15) + m;
        y[j + 16] = d * (float)(b->qs[j] >> 4) + m;
    }
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void dq_q5_0(const void *p, float *y) {
    const bench_block_q5_0 *b = p;
    const float d = h2f(b->d);
    const uint32_t qh = le32(b->qh);
    for (int j = 0; j < 16; j++) {
        int lo = (b->qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

static void dq_q5_1(const void *p, float *y) {
    const bench_block_q5_1 *b = p;
    const float d = h2f(b->d), m = h2f(b->m);
    const uint32_t qh = le32(b->qh);
    for (int j = 0; j < 16; j++) {
        int lo = (b->qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

static void dq_q2_k(const void *p, float *y) {
    const bench_block_q2_k *b = p;
    const float d = h2f(b->d), dmin = h2f(b->dmin);
    int is = 0;
    for (int half = 0; half < 2; half++) {
        const uint8_t *q = b->qs + 32 * half;
        for (int shift = 0; shift < 8; shift += 2) {
            for (int g = 0; g < 2; g++, is++) {
                const float dl = d * (float)(b->scales[is] & 15), ml = dmin * (float)(b->scales[is] >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[16 * g + l] >> shift) & 3) - ml;
            }
        }
    }
}

/* Q3_K's 16 scales: 6 bits each, low 4 bits in bytes 0..7 (two per byte: scales 0..7
 * low nibbles, 8..15 high nibbles), high 2 bits in bytes 8..11 (four per byte). */
static void q3_k_scales(const uint8_t s[12], int out[16]) {
    for (int i = 0; i < 16; i++) {
        int low = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
        int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (low | high << 4) - 32;
    }
}

static void dq_q3_k(const void *p, float *y) {
    const bench_block_q3_k *b = p;
    const float d = h2f(b->d);
    int sc[16], is = 0;
    q3_k_scales(b->scales, sc);
    uint8_t m = 1;
    for (int half = 0; half < 2; half++) {
        const uint8_t *q = b->qs + 32 * half;
        for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
            for (int g = 0; g < 2; g++, is++) {
                const float dl = d * (float)sc[is];
                for (int l = 0; l < 16; l++) {
                    int v = ((q[16 * g + l] >> shift) & 3) - (b->hmask[16 * g + l] & m ? 0 : 4);
                    *y++ = dl * (float)v;
                }
            }
        }
    }
}

/* Q4_K/Q5_K's 8 scales and 8 mins, 6 bits each in 12 bytes: j < 4 in the low 6
 * bits of bytes j (scale) and j+4 (min); j >= 4 has its low 4 bits in byte j+4
 * (scale: low nibble, min: high nibble) and its top 2 bits in the top bits of
 * bytes j-4 (scale) and j (min). */
static void get_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
        *mn = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

static void dq_q4_k(const void *p, float *y) {
    const bench_block_q4_k *b = p;
    const float d = h2f(b->d), dmin = h2f(b->dmin);
    const uint8_t *q = b->qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
        int sc, mn;
        get_scale_min(is, b->scales, &sc, &mn);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        get_scale_min(is + 1, b->scales, &sc, &mn);
        const float d2 = d * (float)sc, m2 = dmin * (float)mn;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 15) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
}

static void dq_q5_k(const void *p, float *y) {
    const bench_block_q5_k *b = p;
    const float d = h2f(b->d), dmin = h2f(b->dmin);
    const uint8_t *q = b->qs;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, q += 32, u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2)) {
        int sc, mn;
        get_scale_min(is, b->scales, &sc, &mn);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        get_scale_min(is + 1, b->scales, &sc, &mn);
        const float d2 = d * (float)sc, m2 = dmin * (float)mn;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)((q[l] & 15) + (b->qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)((q[l] >> 4) + (b->qh[l] & u2 ? 16 : 0)) - m2;
    }
}

static void dq_q6_k(const void *p, float *y) {
    const bench_block_q6_k *b = p;
    const float d = h2f(b->d);
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
        const int8_t *sc = b->scales + 8 * half;
        float *yh = y + 128 * half;
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
            int q2 = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
            int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            yh[l] = d * (float)sc[is] * (float)q1;
            yh[l + 32] = d * (float)sc[is + 2] * (float)q2;
            yh[l + 64] = d * (float)sc[is + 4] * (float)q3;
            yh[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
    }
}

static void dq_q8_0(const void *p, float *y) { bench_dequant_block_q8_0(p, y); }

typedef void (*dq_block_fn)(const void *block, float *out);

static dq_block_fn dq_fn(bench_dtype dt) {
    switch (dt) {
    case BENCH_Q8_0: return dq_q8_0;
    case BENCH_Q4_0: return dq_q4_0;
    case BENCH_Q4_1: return dq_q4_1;
    case BENCH_Q5_0: return dq_q5_0;
    case BENCH_Q5_1: return dq_q5_1;
    case BENCH_Q2_K: return dq_q2_k;
    case BENCH_Q3_K: return dq_q3_k;
    case BENCH_Q4_K: return dq_q4_k;
    case BENCH_Q5_K: return dq_q5_k;
    case BENCH_Q6_K: return dq_q6_k;
    default: return NULL;
    }
}

void qn_dequant_row(bench_dtype dt, const void *row, float *out, int n) {
    dq_block_fn fn = dq_fn(dt);
    const size_t be = bench_dtype_block_elems(dt), bb = bench_dtype_block_bytes(dt);
    assert(fn && n % (int)be == 0);
    const uint8_t *p = row;
    for (int i = 0; i < n / (int)be; i++) fn(p + (size_t)i * bb, out + (size_t)i * be);
}

/* ======================= exact matmul ======================= */

/* Columns dequantised at a time: a whole number of blocks of every type (32, 256),
 * 1 KiB of f32 on the stack, reused for every token of a prefill batch. */
#define QN_CHUNK 256

/* Dot product of n (a multiple of 32) floats with eight partial sums, so the
 * compiler may keep them in vector lanes without reordering anything itself. */
static float qn_dot(const float *a, const float *b, int n) {
    float s[8] = {0};
    for (int k = 0; k < n; k += 8)
        for (int j = 0; j < 8; j++) s[j] += a[k + j] * b[k + j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void qn_mm(bench_dtype dt, float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1) {
    dq_block_fn fn = dq_fn(dt);
    const size_t be = bench_dtype_block_elems(dt), bb = bench_dtype_block_bytes(dt);
    const size_t rb = (size_t)cols / be * bb;
    float buf[QN_CHUNK];
    assert(fn && cols % (int)be == 0);
    for (int r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * rb;
        for (int t = 0; t < n; t++) y[(size_t)t * rows + r] = 0.0f;
        for (int k = 0; k < cols; k += QN_CHUNK) {
            int m = cols - k < QN_CHUNK ? cols - k : QN_CHUNK;
            for (int i = 0; i < m / (int)be; i++) fn(row + ((size_t)k / be + (size_t)i) * bb, buf + (size_t)i * be);
            for (int t = 0; t < n; t++) y[(size_t)t * rows + r] += qn_dot(buf, x + (size_t)t * cols + k, m);
        }
    }
}

#define QN_ENTRY(DT, NAME) \
    static void qn_mm_##NAME(float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1) { \
        qn_mm(DT, y, x, n, w, rows, cols, r0, r1); \
    }
QN_ENTRY(BENCH_Q8_0, q8_0)
QN_ENTRY(BENCH_Q4_0, q4_0)
QN_ENTRY(BENCH_Q4_1, q4_1)
QN_ENTRY(BENCH_Q5_0, q5_0)
QN_ENTRY(BENCH_Q5_1, q5_1)
QN_ENTRY(BENCH_Q2_K, q2_k)
QN_ENTRY(BENCH_Q3_K, q3_k)
QN_ENTRY(BENCH_Q4_K, q4_k)
QN_ENTRY(BENCH_Q5_K, q5_k)
QN_ENTRY(BENCH_Q6_K, q6_k)
#undef QN_ENTRY

qn_mm_fn qn_exact_mm(bench_dtype dt) {
    switch (dt) {
    case BENCH_Q8_0: return qn_mm_q8_0;
    case BENCH_Q4_0: return qn_mm_q4_0;
    case BENCH_Q4_1: return qn_mm_q4_1;
    case BENCH_Q5_0: return qn_mm_q5_0;
    case BENCH_Q5_1: return qn_mm_q5_1;
    case BENCH_Q2_K: return qn_mm_q2_k;
    case BENCH_Q3_K: return qn_mm_q3_k;
    case BENCH_Q4_K: return qn_mm_q4_k;
    case BENCH_Q5_K: return qn_mm_q5_k;
    case BENCH_Q6_K: return qn_mm_q6_k;
    default: return NULL;
    }
}

/* ======================= Q4_0 quantiser ======================= */

void qn_quant_row_q4_0(const float *in, void *out, int n) {
    assert(n % BENCH_QK == 0);
    bench_block_q4_0 *b = out;
    for (int i = 0; i < n / BENCH_QK; i++) bench_quant_block_q4_0(in + (size_t)i * BENCH_QK, b + i);
}
