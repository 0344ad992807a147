/* ggml's block-quantised types (engines/core/compute/quant.c) on hand-built blocks.
 *
 * Each test chooses the logical content of a block (the integer quant of every
 * element, the scale and min of every group), packs it into bytes following
 * the layout written in engines/abi/dtype.h, and checks that dequantisation
 * gives exactly the value the layout defines, bit for bit. Packing here and
 * unpacking in quant.c are independent routes through the same layout: a bit
 * in the wrong place shows up as a wrong element. The exact matmul is checked
 * against a double-precision product of the dequantised rows, and the Q4_0
 * quantiser against its stated error bound. (Agreement with llama.cpp's own
 * files and gguf-py's dequantiser is test_k256.c's.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/compute/kernels.h"
#include "engines/core/compute/quant.h"

static const float D = 0.5f, DMIN = 0.25f, M = -1.25f; /* exact in f16 */

/* Dequantises one block of dt and checks every element against want. */
static void expect_block(bench_dtype dt, const void *block, const float *want) {
    int n = (int)bench_dtype_block_elems(dt);
    float got[BENCH_QK_K];
    qn_dequant_row(dt, block, got, n);
    for (int e = 0; e < n; e++)
        if (memcmp(&got[e], &want[e], sizeof(float)) != 0)
            fail_msg("%s element %d: got %.9g, the layout defines %.9g", bench_dtype_name(dt), e, got[e], want[e]);
    /* kn_dequant_row (the embedding lookup, convert) goes the same way */
    kn_dequant_row(dt, block, got, n);
    for (int e = 0; e < n; e++) assert_memory_equal(&got[e], &want[e], sizeof(float));
}

/* ---- 32-element types ---- */

static void test_q4_0(void **state) {
    (void)state;
    bench_block_q4_0 b = {.d = bench_f32_to_f16(D)};
    float want[32];
    for (int e = 0; e < 32; e++) {
        int q = (e * 7 + 3) % 16;
        b.qs[e % 16] |= (uint8_t)(e < 16 ? q : q << 4);
        want[e] = D * (float)(q - 8);
    }
    expect_block(BENCH_Q4_0, &b, want);
}

static void test_q4_1(void **state) {
    (void)state;
    bench_block_q4_1 b = {.d = bench_f32_to_f16(D), .m = bench_f32_to_f16(M)};
    float want[32];
    for (int e = 0; e < 32; e++) {
        int q = (e * 5 + 1) % 16;
        b.qs[e % 16] |= (uint8_t)(e < 16 ? q : q << 4);
        want[e] = D * (float)q + M;
    }
    expect_block(BENCH_Q4_1, &b, want);
}

/* Q5: the fifth bit of element e is bit e of qh read as a little-endian u32. */
static void pack_q5(uint8_t qs[16], uint8_t qh[4], const int *q) {
    for (int e = 0; e < 32; e++) {
        qs[e % 16] |= (uint8_t)(e < 16 ? (q[e] & 15) : (q[e] & 15) << 4);
        if (q[e] & 16) qh[e / 8] |= (uint8_t)(1u << (e % 8));
    }
}

static void test_q5_0(void **state) {
    (void)state;
    bench_block_q5_0 b = {.d = bench_f32_to_f16(D)};
    int q[32];
    float want[32];
    for (int e = 0; e < 32; e++) {
        q[e] = (e * 11 + 5) % 32;
        want[e] = D * (float)(q[e] - 16);
    }
    pack_q5(b.qs, b.qh, q);
    expect_block(BENCH_Q5_0, &b, want);
}

static void test_q5_1(void **state) {
    (void)state;
    bench_block_q5_1 b = {.d = bench_f32_to_f16(D), .m = bench_f32_to_f16(M)};
    int q[32];
    float want[32];
    for (int e = 0; e < 32; e++) {
        q[e] = (e * 13 + 2) % 32;
        want[e] = D * (float)q[e] + M;
    }
    pack_q5(b.qs, b.qh, q);
    expect_block(BENCH_Q5_1, &b, want);
}

/* ---- K-quants (256 elements) ---- */

/* Q2_K/Q3_K low bits: element e = 128 h + 32 j + i (i < 32) is bits 2j..2j+1 of qs[32 h + i]. */
static void pack_2bit(uint8_t qs[64], int e, int v) {
    int h = e / 128, j = (e % 128) / 32, i = e % 32;
    qs[32 * h + i] |= (uint8_t)((v & 3) << (2 * j));
}

static void test_q2_k(void **state) {
    (void)state;
    bench_block_q2_k b = {.d = bench_f32_to_f16(D), .dmin = bench_f32_to_f16(DMIN)};
    float want[256];
    for (int g = 0; g < 16; g++) b.scales[g] = (uint8_t)(((g * 5 + 1) % 16) | ((g * 3 + 2) % 16) << 4);
    for (int e = 0; e < 256; e++) {
        int q = (e * 7 + e / 64) % 4, g = e / 16;
        pack_2bit(b.qs, e, q);
        want[e] = (D * (float)((g * 5 + 1) % 16)) * (float)q - DMIN * (float)((g * 3 + 2) % 16);
    }
    expect_block(BENCH_Q2_K, &b, want);
}

static void test_q3_k(void **state) {
    (void)state;
    bench_block_q3_k b = {.d = bench_f32_to_f16(D)};
    float want[256];
    int s[16];
    for (int g = 0; g < 16; g++) {
        s[g] = (g * 23 + 7) % 64; /* 6-bit scale, value s - 32 */
        if (g < 8) b.scales[g] |= (uint8_t)(s[g] & 15);
        else b.scales[g - 8] |= (uint8_t)((s[g] & 15) << 4);
        b.scales[8 + g % 4] |= (uint8_t)((s[g] >> 4) << (2 * (g / 4)));
    }
    for (int e = 0; e < 256; e++) {
        int q = (e * 5 + 1) % 8 - 4; /* -4..3: low bits q + 4 with the high bit clear, or q with it set */
        pack_2bit(b.qs, e, q < 0 ? q + 4 : q);
        int h = e / 128, j = (e % 128) / 32, i = e % 32;
        if (q >= 0) b.hmask[i] |= (uint8_t)(1u << (4 * h + j));
        want[e] = (D * (float)(s[e / 16] - 32)) * (float)q;
    }
    expect_block(BENCH_Q3_K, &b, want);
}

/* Q4_K/Q5_K: 8 six-bit scales and mins in 12 bytes. */
static void pack_scale_min(uint8_t p[12], const int *sc, const int *mn) {
    memset(p, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            p[j] |= (uint8_t)(sc[j] & 63);
            p[j + 4] |= (uint8_t)(mn[j] & 63);
        } else {
            p[j + 4] |= (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
            p[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            p[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

static void test_q4_k(void **state) {
    (void)state;
    bench_block_q4_k b = {.d = bench_f32_to_f16(D), .dmin = bench_f32_to_f16(DMIN)};
    int sc[8], mn[8];
    float want[256];
    for (int g = 0; g < 8; g++) sc[g] = (g * 29 + 11) % 64, mn[g] = (g * 17 + 40) % 64;
    pack_scale_min(b.scales, sc, mn);
    for (int e = 0; e < 256; e++) {
        int q = (e * 9 + e / 32) % 16, g = e / 32, pass = e / 64, l = e % 32;
        b.qs[32 * pass + l] |= (uint8_t)(g % 2 ? q << 4 : q);
        want[e] = (D * (float)sc[g]) * (float)q - DMIN * (float)mn[g];
    }
    expect_block(BENCH_Q4_K, &b, want);
}

static void test_q5_k(void **state) {
    (void)state;
    bench_block_q5_k b = {.d = bench_f32_to_f16(D), .dmin = bench_f32_to_f16(DMIN)};
    int sc[8], mn[8];
    float want[256];
    for (int g = 0; g < 8; g++) sc[g] = (g * 37 + 3) % 64, mn[g] = (g * 13 + 50) % 64;
    pack_scale_min(b.scales, sc, mn);
    for (int e = 0; e < 256; e++) {
        int q = (e * 19 + e / 16) % 32, g = e / 32, l = e % 32;
        b.qs[32 * (e / 64) + l] |= (uint8_t)(g % 2 ? (q & 15) << 4 : (q & 15));
        if (q & 16) b.qh[l] |= (uint8_t)(1u << g); /* bit g of qh[l]: pass g/2, low/high nibble g%2 */
        want[e] = (D * (float)sc[g]) * (float)q - DMIN * (float)mn[g];
    }
    expect_block(BENCH_Q5_K, &b, want);
}

static void test_q6_k(void **state) {
    (void)state;
    bench_block_q6_k b = {.d = bench_f32_to_f16(D)};
    float want[256];
    for (int g = 0; g < 16; g++) b.scales[g] = (int8_t)(g * 9 - 70);
    for (int e = 0; e < 256; e++) {
        int q = (e * 23 + e / 128) % 64, h = e / 128, k = (e % 128) / 32, l = e % 32;
        /* quarter k: ql[64h + l] (k 0, 2) or ql[64h + 32 + l] (k 1, 3), low nibble for k < 2;
         * the top two bits in bits 2k..2k+1 of qh[32h + l] */
        b.ql[64 * h + l + (k % 2) * 32] |= (uint8_t)(k < 2 ? (q & 15) : (q & 15) << 4);
        b.qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
        want[e] = (D * (float)b.scales[e / 16]) * (float)(q - 32);
    }
    expect_block(BENCH_Q6_K, &b, want);
}

/* ---- the exact matmul against double precision ---- */

static uint64_t rng = 88172645463325252ull;
static uint8_t rnd8(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

static void test_exact_matmul(void **state) {
    (void)state;
    const bench_dtype dts[] = {BENCH_Q4_0, BENCH_Q4_1, BENCH_Q5_0, BENCH_Q5_1, BENCH_Q2_K,
                               BENCH_Q3_K, BENCH_Q4_K, BENCH_Q5_K, BENCH_Q6_K, BENCH_Q8_0};
    enum { ROWS = 13, COLS = 768, N = 3 };
    /* the exact path: auto may pick an int8 family, which rounds x for Q8_0 (tests/test_kernels.c bounds that) */
    const char *exact[] = {"avx512", "avx2", "portable"};
    for (size_t i = 0; i < 3 && kn_set_isa(exact[i]) != 0; i++) {}
    assert_int_equal(kn_q8_int8(), 0);
    float *x = malloc(sizeof(float) * N * COLS), *y = malloc(sizeof(float) * N * ROWS), *wf = malloc(sizeof(float) * COLS);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(wf);
    for (int i = 0; i < N * COLS; i++) x[i] = (float)rnd8() / 128.0f - 1.0f;
    for (size_t t = 0; t < sizeof(dts) / sizeof(dts[0]); t++) {
        bench_dtype dt = dts[t];
        size_t rb = bench_dtype_row_bytes(dt, COLS);
        uint8_t *w = malloc(rb * ROWS);
        assert_non_null(w);
        for (size_t i = 0; i < rb * ROWS; i++) w[i] = rnd8();
        /* sane scales: every f16 field a small normal number, whatever the random bytes were */
        size_t bb = bench_dtype_block_bytes(dt);
        for (size_t blk = 0; blk < rb * ROWS / bb; blk++) {
            uint8_t *p = w + blk * bb;
            uint16_t h = bench_f32_to_f16(0.01f + (float)rnd8() / 4096.0f);
            size_t at[2] = {0, 2}, nat = 2;
            if (dt == BENCH_Q4_0 || dt == BENCH_Q5_0 || dt == BENCH_Q8_0) nat = 1;
            if (dt == BENCH_Q2_K) at[0] = 80, at[1] = 82;
            if (dt == BENCH_Q3_K) at[0] = 108, nat = 1;
            if (dt == BENCH_Q6_K) at[0] = 208, nat = 1;
            for (size_t k = 0; k < nat; k++) memcpy(p + at[k], &h, 2);
        }
        for (int n = 1; n <= N; n += N - 1) {
            kn_matmul(NULL, y, x, n, w, dt, ROWS, COLS);
            for (int r = 0; r < ROWS; r++) {
                kn_dequant_row(dt, w + (size_t)r * rb, wf, COLS);
                for (int tk = 0; tk < n; tk++) {
                    double ref = 0, mag = 0;
                    for (int k = 0; k < COLS; k++) {
                        ref += (double)wf[k] * x[tk * COLS + k];
                        mag += fabs((double)wf[k] * x[tk * COLS + k]);
                    }
                    double got = y[(size_t)tk * ROWS + r];
                    if (fabs(got - ref) > 1e-6 * mag + 1e-30)
                        fail_msg("%s n=%d row %d token %d: %.9g, double gives %.9g", bench_dtype_name(dt), n, r, tk, got, ref);
                }
            }
        }
        free(w);
    }
    free(x);
    free(y);
    free(wf);
    kn_set_isa("auto");
}

/* ---- Q4_0 quantiser ---- */

static void test_q4_0_round_trip(void **state) {
    (void)state;
    enum { COLS = 256 };
    float in[COLS], out[COLS];
    bench_block_q4_0 q[COLS / 32];
    for (int i = 0; i < COLS; i++) in[i] = (float)rnd8() / 16.0f - 8.0f + (float)(i % 7) * 0.01f;
    in[5] = 9.5f;   /* block 0: the largest magnitude is positive */
    in[40] = -11.0f; /* block 1: negative */
    kn_quant_row(BENCH_Q4_0, in, q, COLS);
    kn_dequant_row(BENCH_Q4_0, q, out, COLS);
    for (int b = 0; b < COLS / 32; b++) {
        float d = fabsf(bench_f16_to_f32(q[b].d)), amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(in[b * 32 + j]));
        assert_true(fabsf(d - amax / 8.0f) <= amax / 8.0f * 1e-3f); /* d = amax / 8, f16-rounded */
        for (int j = 0; j < 32; j++) {
            float e = fabsf(out[b * 32 + j] - in[b * 32 + j]);
            if (e > d * 1.001f) fail_msg("q4_0 block %d elem %d: in %g out %g d %g", b, j, in[b * 32 + j], out[b * 32 + j], d);
        }
    }
    /* the extreme element is exact up to the f16 rounding of d */
    assert_true(fabsf(out[5] - 9.5f) <= 9.5f * 1e-3f);
    assert_true(fabsf(out[40] + 11.0f) <= 11.0f * 1e-3f);
    /* zeros stay zeros */
    float zeros[32] = {0};
    kn_quant_row(BENCH_Q4_0, zeros, q, 32);
    kn_dequant_row(BENCH_Q4_0, q, out, 32);
    for (int j = 0; j < 32; j++) assert_true(out[j] == 0.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_0),        cmocka_unit_test(test_q4_1),  cmocka_unit_test(test_q5_0),
        cmocka_unit_test(test_q5_1),        cmocka_unit_test(test_q2_k),  cmocka_unit_test(test_q3_k),
        cmocka_unit_test(test_q4_k),        cmocka_unit_test(test_q5_k),  cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_exact_matmul), cmocka_unit_test(test_q4_0_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
