/* llama.cpp's rounding of x, emulated in f32 (llama_x.h says why). Plain C: it runs once per
 * matmul of a numerics check, never in a timed pass. The rules follow ggml-cpu (llama.cpp
 * v0.5.0): quantize_row_q8_0's AVX path (rounding to nearest even, the scale stored as f16)
 * and quantize_row_q8_K_ref. */
#include "llama_x.h"

#include <math.h>

lx_rule lx_rule_for(bench_dtype dt) {
    switch (dt) {
    case BENCH_F16: return LX_F16;
    case BENCH_BF16: return LX_BF16;
    case BENCH_Q8_0: case BENCH_Q4_0: case BENCH_Q4_1: case BENCH_Q5_0: case BENCH_Q5_1: return LX_Q8_0;
    case BENCH_Q2_K: case BENCH_Q3_K: case BENCH_Q4_K: case BENCH_Q5_K: case BENCH_Q6_K: return LX_Q8_K;
    default: return LX_NONE;
    }
}

/* One Q8_0 block: q = nearest(x * 127 / max|x|), then q times the scale as its f16. */
static void lx_block_q8_0(const float *x, float *out) {
    float amax = 0.0f;
    for (int j = 0; j < BENCH_Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = bench_f16_to_f32(bench_f32_to_f16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < BENCH_Q8_0_BLOCK; j++) out[j] = rintf(x[j] * id) * d;
}

/* One Q8_K block: the scale from the element of largest magnitude, with its sign, so that it
 * maps to -127; the others clamped at 127. */
static void lx_block_q8_k(const float *x, float *out) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < BENCH_QK_K; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    if (amax == 0.0f) {
        for (int j = 0; j < BENCH_QK_K; j++) out[j] = 0.0f;
        return;
    }
    const float iscale = -127.0f / max, d = 1.0f / iscale;
    for (int j = 0; j < BENCH_QK_K; j++) out[j] = fminf(127.0f, rintf(iscale * x[j])) * d;
}

void lx_round(lx_rule r, const float *x, float *out, int n, int cols) {
    const size_t total = (size_t)n * (size_t)cols;
    switch (r) {
    case LX_F16:
        for (size_t i = 0; i < total; i++) out[i] = bench_f16_to_f32(bench_f32_to_f16(x[i]));
        return;
    case LX_BF16:
        for (size_t i = 0; i < total; i++) out[i] = bench_bf16_to_f32(bench_f32_to_bf16(x[i]));
        return;
    case LX_Q8_0:
        for (size_t i = 0; i < total; i += BENCH_Q8_0_BLOCK) lx_block_q8_0(x + i, out + i);
        return;
    case LX_Q8_K:
        for (size_t i = 0; i < total; i += BENCH_QK_K) lx_block_q8_k(x + i, out + i);
        return;
    case LX_NONE:
    default:
        for (size_t i = 0; i < total && out != x; i++) out[i] = x[i];
        return;
    }
}
