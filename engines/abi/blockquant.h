/* The Q8_0 and Q4_0 block conversions, in one place for the core (kernels.c, quant.c: weights,
 * model convert, synth) and the modules (engines/modules/common/kv_types.h: the KV cache
 * types), which link nothing of each other's: a cache of type T stores exactly what a file
 * converted to T holds. Header-only. Installed with the SDK (docs/modules.md).
 *
 * Q8_0: d = max|x| / 127 rounded to f16, q = round(x / d) clamped to [-127, 127]. Dividing
 *   by the rounded d (rather than the exact one) keeps every element's error within d/2,
 *   except where rounding d down pushes the largest |x| past 127 d, where the clamp costs at
 *   most 127 * 2^-11 d.
 * Q4_0: d = (the element of largest magnitude, signed) / -8 rounded to f16, q = round(x / d)
 *   + 8 clamped to 0..15. That element lands exactly on q = 0; the error of every other is at
 *   most d/2, or d where one of the opposite sign and equal size is clamped to +7.
 * A NaN element quantises to 0; non-finite blocks have no representation (an unspecified,
 * memory-safe encoding). */
#ifndef BENCH_BLOCKQUANT_H
#define BENCH_BLOCKQUANT_H

#include <math.h>

#include "dtype.h"

BENCH_HOSTDEV static inline void bench_quant_block_q8_0(const float *in, bench_block_q8_0 *b) {
    float amax = 0.0f;
    for (int j = 0; j < BENCH_Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(in[j]));
    uint16_t dh = bench_f32_to_f16(amax / 127.0f);
    float d = bench_f16_to_f32(dh);
    b->d = dh;
    float id = d > 0.0f && isfinite(d) ? 1.0f / d : 0.0f;
    for (int j = 0; j < BENCH_Q8_0_BLOCK; j++) {
        float q = roundf(in[j] * id);
        if (!(q >= -127.0f)) q = q != q ? 0.0f : -127.0f; /* NaN -> 0 */
        if (q > 127.0f) q = 127.0f;
        b->qs[j] = (int8_t)q;
    }
}

BENCH_HOSTDEV static inline void bench_quant_block_q4_0(const float *in, bench_block_q4_0 *b) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < BENCH_QK; j++)
        if (fabsf(in[j]) > amax) { amax = fabsf(in[j]); max = in[j]; }
    uint16_t dh = bench_f32_to_f16(max / -8.0f);
    float d = bench_f16_to_f32(dh);
    float id = d != 0.0f && isfinite(d) ? 1.0f / d : 0.0f;
    b->d = dh;
    for (int j = 0; j < 16; j++) {
        int q[2];
        for (int h = 0; h < 2; h++) {
            float v = roundf(in[j + 16 * h] * id) + 8.0f;
            if (!(v >= 0.0f)) v = v != v ? 8.0f : 0.0f; /* NaN -> 0 */
            if (v > 15.0f) v = 15.0f;
            q[h] = (int)v;
        }
        b->qs[j] = (uint8_t)(q[0] | q[1] << 4);
    }
}

/* y (32) = the block's values: d * q (Q8_0), d * (q - 8) (Q4_0, low nibbles first) */
static inline void bench_dequant_block_q8_0(const bench_block_q8_0 *b, float *y) {
    const float d = bench_f16_to_f32(b->d);
    for (int j = 0; j < BENCH_Q8_0_BLOCK; j++) y[j] = d * (float)b->qs[j];
}

static inline void bench_dequant_block_q4_0(const bench_block_q4_0 *b, float *y) {
    const float d = bench_f16_to_f32(b->d);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b->qs[j] & 15) - 8);
        y[j + 16] = d * (float)((b->qs[j] >> 4) - 8);
    }
}

#endif
