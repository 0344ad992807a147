/* Tests of the compute kernels: every dtype on every instruction set this CPU
 * has, decode and prefill shapes, odd sizes, against a double-precision
 * reference; the row conversions and their edge cases; the triad.
 *
 * Tolerance. Every kernel path dequantises each weight exactly to f32 and sums
 * w*x in f32, so the error is f32 summation alone. It is bounded per output
 * element relative to sum_k |w_k x_k| (not |y|, which cancellation can make
 * arbitrarily small):  |y - ref| <= KN_TEST_RTOL * sum_k |w_k x_k|.
 * The same bound holds for all four dtypes because the reference is computed
 * from the dequantised weights, not from the original f32 ones.
 *
 * The int8 families (avx2-int8, vnni) also round x to int8 for Q8_0 and Q4_0, so there
 * the bound adds x's rounding: per 32-column block b, at most d_b / 2 per
 * element with d_b = max|x_b| / 127, i.e. sum_b (d_b / 2) * sum_{k in b} |w_k|.
 * Where x is already an int8 grid (max|x_b| = 127, integer values) that term is
 * zero, and test_q8_int8_integer_x holds them to the exact bound.
 *
 * avx512-bf16 rounds x to bf16 for bf16 weights in prefill (n > 1): at most
 * 2^-8 |x| per element, so the bound adds 2^-8 * sum_k |w_k x_k|; x already on
 * the bf16 grid rounds with no error (test_bf16_dot_grid_x). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/compute/kernels.h"
#include "engines/core/compute/kernels_impl.h"
#include "engines/core/compute/kernels_tune.h"
#include "engines/abi/vexpf.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KN_TEST_RTOL 2e-5

/* A family that only wraps portable's entry points, added in main: what adding a family takes
 * is one row like this and its code (here none). Every check below walks the families through
 * kn_isa_count and kn_isa_name, so it runs this one too, with no list edited (docs/extending.md). */
static const kn_family test_family = {.name = "test-portable", .ops = &kn_ops_portable,
                                      .about = "portable's kernels under another name (tests/test_kernels.c)"};

/* The families, best first, as kernels.c's table (and kn_family_add) has them. */
#define N_ISAS ((size_t)kn_isa_count())
static const char *isa(size_t i) { return kn_isa_name((int)i, NULL); }

/* Selects family i for a test; says so once when this CPU cannot run it. */
static int use_isa(size_t i) {
    static int told[64];
    if (kn_set_isa(isa(i)) == 0) return 1;
    if (i < 64 && !told[i]) print_message("[ SKIP     ] kernels %s: this CPU cannot run it\n", isa(i));
    if (i < 64) told[i] = 1;
    return 0;
}

/* xorshift64*: deterministic, so a failure reproduces */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float rnd_unit(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 2685821657736338717ull;
    return (float)((double)(r >> 40) / (double)(1ull << 23) - 1.0);
}

/* Dequantises with the scalar converters of dtype.h, independently of kernels.c. */
static double ref_weight(bench_dtype dt, const void *w, int cols, int r, int k) {
    size_t rb = bench_dtype_row_bytes(dt, cols);
    const char *row = (const char *)w + (size_t)r * rb;
    switch (dt) {
    case BENCH_F32: return ((const float *)row)[k];
    case BENCH_F16: return bench_f16_to_f32(((const uint16_t *)row)[k]);
    case BENCH_BF16: return bench_bf16_to_f32(((const uint16_t *)row)[k]);
    case BENCH_Q8_0: {
        const bench_block_q8_0 *b = (const bench_block_q8_0 *)row + k / BENCH_Q8_0_BLOCK;
        return (double)bench_f16_to_f32(b->d) * b->qs[k % BENCH_Q8_0_BLOCK];
    }
    case BENCH_Q4_0: {
        const bench_block_q4_0 *b = (const bench_block_q4_0 *)row + k / BENCH_QK;
        int j = k % BENCH_QK, q = j < 16 ? b->qs[j] & 15 : b->qs[j - 16] >> 4;
        return (double)bench_f16_to_f32(b->d) * (q - 8);
    }
    default: return NAN;
    }
}

/* One matmul case: random weights quantised to dt, then every ISA on every pool. */
static void check_matmul(bench_dtype dt, int n, int rows, int cols, tp_pool *const *pools, int npools) {
    size_t rb = bench_dtype_row_bytes(dt, cols);
    float *wf = malloc((size_t)cols * sizeof(float));                 /* (cols) one f32 row */
    unsigned char *w = malloc((size_t)rows * rb);                     /* (rows, cols) in dt */
    float *x = malloc((size_t)n * cols * sizeof(float));              /* (n, cols) */
    float *y = malloc((size_t)n * rows * sizeof(float));              /* (n, rows) */
    double *ref = malloc((size_t)n * rows * sizeof(double));          /* (n, rows) */
    double *mag = malloc((size_t)n * rows * sizeof(double));          /* (n, rows) sum |w x| */
    double *xb = malloc((size_t)n * rows * sizeof(double));           /* (n, rows) x-rounding bound */
    assert_non_null(wf); assert_non_null(w); assert_non_null(x);
    assert_non_null(y); assert_non_null(ref); assert_non_null(mag); assert_non_null(xb);
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) wf[k] = rnd_unit();
        kn_quant_row(dt, wf, w + (size_t)r * rb, cols);
    }
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = rnd_unit();
    for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r++) {
            double s = 0, m = 0, e = 0, amax = 0, wsum = 0;
            for (int k = 0; k < cols; k++) {
                double p = ref_weight(dt, w, cols, r, k) * x[(size_t)t * cols + k];
                s += p;
                m += fabs(p);
                amax = fmax(amax, fabs(x[(size_t)t * cols + k]));
                wsum += fabs(ref_weight(dt, w, cols, r, k));
                if (k % 32 == 31 || k == cols - 1) { e += amax / 254 * wsum; amax = wsum = 0; }
            }
            ref[(size_t)t * rows + r] = s;
            mag[(size_t)t * rows + r] = m;
            xb[(size_t)t * rows + r] = e;
        }
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        const int xround = kn_x_int8(dt);
        const int bround = dt == BENCH_BF16 && kn_bf16_dot() && n > 1;
        for (int p = 0; p < npools; p++) {
            for (size_t i = 0; i < (size_t)n * rows; i++) y[i] = NAN; /* every output must be written */
            kn_matmul(pools[p], y, x, n, w, dt, rows, cols);
            for (size_t i = 0; i < (size_t)n * rows; i++) {
                double err = fabs((double)y[i] - ref[i]);
                double bound = KN_TEST_RTOL * mag[i] + (xround ? xb[i] * (1 + KN_TEST_RTOL) : 0) +
                               (bround ? ldexp(mag[i], -8) * (1 + KN_TEST_RTOL) : 0) + 1e-30;
                if (!(err <= bound)) {
                    fail_msg("%s %s n=%d rows=%d cols=%d threads=%d: y[%zu]=%.9g ref=%.9g err=%.3g bound=%.3g",
                             isa(ii), bench_dtype_name(dt), n, rows, cols, tp_threads(pools[p]), i,
                             (double)y[i], ref[i], err, bound);
                }
            }
        }
    }
    free(wf); free(w); free(x); free(y); free(ref); free(mag); free(xb);
}

/* ---- matmul sweeps ---- */

static const int test_ns[] = {1, 3, 6, 17, 128}; /* 3 and 6: the few-rows path (kernels_simd.inc mvn), 6 in two groups */
static const int test_rows[] = {1, 5, 67, 301};
/* 544 > the 512-column prefill chunk, so chunked accumulation is exercised */
static const int test_cols_q8[] = {32, 96, 288, 544};
static const int test_cols_odd[] = {1, 7, 37, 531};

static void sweep(bench_dtype dt, int odd_cols) {
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    tp_pool *const pools[] = {pool};
    const int *cols = odd_cols ? test_cols_odd : test_cols_q8;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++) check_matmul(dt, test_ns[a], test_rows[b], cols[c], pools, 1);
    tp_destroy(pool);
}

static void test_matmul_f32(void **state) { (void)state; sweep(BENCH_F32, 0); sweep(BENCH_F32, 1); }

/* kn_scratch_x keeps a buffer under (job, kind, x, n, cols) and says so only when all match
 * and the buffer is the one keyed: never outside a job (0), never across jobs, kinds or inputs,
 * never once the buffer has grown. */
static void test_scratch_x_key(void **state) {
    (void)state;
    float a[8], b[8];
    int kept = -1;
    kn_scratch_job(0);
    void *p = kn_scratch_x(1, a, 2, 4, 256, &kept);
    assert_non_null(p);
    assert_int_equal(kept, 0);
    assert_ptr_equal(kn_scratch_x(1, a, 2, 4, 256, &kept), p);
    assert_int_equal(kept, 0);                  /* no job: nothing kept */
    kn_scratch_job(7);
    kn_scratch_x(1, a, 2, 4, 256, &kept);
    assert_int_equal(kept, 0);                  /* first in the job */
    assert_ptr_equal(kn_scratch_x(1, a, 2, 4, 256, &kept), p);
    assert_int_equal(kept, 1);
    kn_scratch_x(1, a, 2, 4, 128, &kept);       /* a smaller need: the same buffer */
    assert_int_equal(kept, 1);
    kn_scratch_x(2, a, 2, 4, 256, &kept);       /* another kind takes the slot */
    assert_int_equal(kept, 0);
    kn_scratch_x(1, a, 2, 4, 256, &kept);
    assert_int_equal(kept, 0);
    kn_scratch_x(1, b, 2, 4, 256, &kept);       /* another x */
    assert_int_equal(kept, 0);
    kn_scratch_x(1, b, 3, 4, 256, &kept);       /* another n */
    assert_int_equal(kept, 0);
    kn_scratch_x(1, b, 3, 5, 256, &kept);       /* another cols */
    assert_int_equal(kept, 0);
    kn_scratch_x(1, b, 3, 5, 256, &kept);
    assert_int_equal(kept, 1);
    kn_scratch_job(8);                          /* the next job: x may have changed in place */
    kn_scratch_x(1, b, 3, 5, 256, &kept);
    assert_int_equal(kept, 0);
    void *q = kn_scratch_x(1, b, 3, 5, 1 << 20, &kept);   /* grown: a new buffer, not kept */
    assert_non_null(q);
    assert_ptr_not_equal(q, p);
    assert_int_equal(kept, 0);
    kn_scratch_job(0);
}

/* f32 prefill from 32 tokens on (kernels_gemmt.inc) goes through x in blocks of 64 tokens and
 * W in 96-row blocks, 128-column sub-chunks of 512-column chunks and passes of 256 tokens: 45
 * tokens leave a block part empty, 300 take two passes (the second of 44); 200 rows end in a
 * part block and a part register tile (200 = 2 x 96 + 8); 1100 columns are two whole chunks
 * and a tail of 76, which is no whole sub-chunk. On 1, 2 and 3 threads. */
static void test_matmul_f32_token_blocks(void **state) {
    (void)state;
    tp_pool *p1 = tp_create(1), *p2 = tp_create(2), *p3 = tp_create(3);
    assert_non_null(p1); assert_non_null(p2); assert_non_null(p3);
    tp_pool *const pools[] = {p1, p2, p3};
    check_matmul(BENCH_F32, 45, 200, 1100, pools, 3);
    check_matmul(BENCH_F32, 300, 37, 131, pools, 3);
    check_matmul(BENCH_F32, 32, 97, 64, pools, 3);
    tp_destroy(p1); tp_destroy(p2); tp_destroy(p3);
}
static void test_matmul_f16(void **state) { (void)state; sweep(BENCH_F16, 0); sweep(BENCH_F16, 1); }
static void test_matmul_bf16(void **state) { (void)state; sweep(BENCH_BF16, 0); sweep(BENCH_BF16, 1); }
static void test_matmul_q8_0(void **state) { (void)state; sweep(BENCH_Q8_0, 0); }
static void test_matmul_q4_0(void **state) { (void)state; sweep(BENCH_Q4_0, 0); }

/* The exact decode of Q8_0 and Q4_0 on x split into int8 parts (kernels_avx512.c): x the
 * split must hold exactly enough (a block whose values span 2^40, blocks of zeros, values
 * near the ends of f32's range) stays within the exact bound, and x it cannot hold (inf,
 * NaN, a block too small for its exponents) goes to the widening kernel: the outputs are
 * non-finite exactly where the portable family's are, and finite ones within the bound. 352
 * columns: one step of 8 blocks through the split and 3 blocks after it. */
static void check_split_x(bench_dtype dt, const float *x, int cols, const char *what) {
    enum { ROWS = 29 };
    const size_t rb = bench_dtype_row_bytes(dt, cols);
    unsigned char *w = malloc(ROWS * rb);
    float *wf = malloc((size_t)cols * sizeof(float)), y[ROWS], yp[ROWS];
    assert_non_null(w);
    assert_non_null(wf);
    for (int r = 0; r < ROWS; r++) {
        for (int k = 0; k < cols; k++) wf[k] = rnd_unit();
        kn_quant_row(dt, wf, w + (size_t)r * rb, cols);
    }
    assert_int_equal(kn_set_isa("portable"), 0);
    kn_matmul(NULL, yp, x, 1, w, dt, ROWS, cols);
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii) || !kn_isa_exact(isa(ii))) continue;
        kn_matmul(NULL, y, x, 1, w, dt, ROWS, cols);
        for (int r = 0; r < ROWS; r++) {
            if (!isfinite(yp[r]) || !isfinite(y[r])) {
                if (isfinite(yp[r]) != isfinite(y[r]) || isnan(yp[r]) != isnan(y[r]))
                    fail_msg("%s %s %s: row %d is %g, the portable family's %g", isa(ii), bench_dtype_name(dt), what, r,
                             (double)y[r], (double)yp[r]);
                continue;
            }
            double s = 0, m = 0;
            for (int k = 0; k < cols; k++) {
                const double p = ref_weight(dt, w, cols, r, k) * x[k];
                s += p;
                m += fabs(p);
            }
            if (!(fabs(y[r] - s) <= KN_TEST_RTOL * m + 1e-38))
                fail_msg("%s %s %s: row %d y=%.9g ref=%.9g err=%.3g bound=%.3g", isa(ii), bench_dtype_name(dt), what, r,
                         (double)y[r], s, fabs(y[r] - s), KN_TEST_RTOL * m);
        }
    }
    free(w);
    free(wf);
}

static void test_split_x(void **state) {
    (void)state;
    enum { COLS = 352 };
    float x[COLS];
    /* where the CPU has VNNI, avx512 must split, so that the cases below reach the split path */
    if (kn_set_isa("vnni") == 0 && kn_set_isa("avx512") == 0 && !getenv("BENCH_EXACT_SPLIT")) {
        assert_int_equal(kn_x_split(BENCH_Q8_0), 1);
        assert_int_equal(kn_x_split(BENCH_Q4_0), 1);
        assert_int_equal(kn_x_split(BENCH_F32), 0);
        assert_int_equal(kn_x_split(BENCH_Q4_K), 0);
    } else print_message("[ SKIP     ] the split decode: this CPU has no AVX512-VNNI (or BENCH_EXACT_SPLIT is set)\n");
    for (int d = 0; d < 2; d++) {
        const bench_dtype dt = d ? BENCH_Q4_0 : BENCH_Q8_0;
        for (int k = 0; k < COLS; k++) x[k] = rnd_unit();
        check_split_x(dt, x, COLS, "random");
        /* a block spanning 2^40: the small values get few of the parts' bits, the bound holds */
        for (int k = 0; k < COLS; k++) x[k] = k % 32 == 5 ? 1e6f * rnd_unit() : 1e-6f * rnd_unit();
        check_split_x(dt, x, COLS, "wide blocks");
        for (int k = 0; k < COLS; k++) x[k] = (k / 32) % 3 == 1 ? 0.0f : rnd_unit() * 3e30f;
        check_split_x(dt, x, COLS, "zero blocks and 3e30");
        for (int k = 0; k < COLS; k++) x[k] = rnd_unit() * 1e-33f; /* exponents below the split's range */
        check_split_x(dt, x, COLS, "tiny");
        for (int k = 0; k < COLS; k++) x[k] = rnd_unit();
        x[40] = INFINITY;
        check_split_x(dt, x, COLS, "inf");
        x[40] = rnd_unit();
        x[300] = NAN; /* in the blocks after the split's steps */
        check_split_x(dt, x, COLS, "nan");
    }
    kn_set_isa("auto");
}

/* y = x (n, cols) . W^T in double from ref_weight, and sum_k |w_k x_k| per output (the bound's scale) */
static void ref_matmul(bench_dtype dt, const void *w, const float *x, int n, int rows, int cols, double *ref, double *mag) {
    for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r++) {
            double sum = 0, m = 0;
            for (int k = 0; k < cols; k++) {
                const double p = ref_weight(dt, w, cols, r, k) * x[(size_t)t * cols + k];
                sum += p;
                m += fabs(p);
            }
            ref[(size_t)t * rows + r] = sum;
            mag[(size_t)t * rows + r] = m;
        }
}

/* Q4_0 rearranged for the decode kernels (KN_Q4_0_R8): the rows go there and back unchanged,
 * and every family gives the same bits from the rearranged rows as from the file's, in decode
 * (its own kernel: the split x on avx512, vpdpbusd on vnni; or the rows put back) and prefill,
 * on 1 and 2 threads, alone and beside another output in kn_matmul_multi. 288 columns: one
 * group and a block after it; 224: no whole group. */
static void check_repack(int n, int rows, int cols, tp_pool *pool) {
    const size_t rb = bench_dtype_row_bytes(BENCH_Q4_0, cols);
    unsigned char *w = malloc((size_t)rows * rb), *wr = malloc((size_t)rows * rb), *back = malloc((size_t)rows * rb);
    float *wf = malloc((size_t)cols * sizeof(float)), *x = malloc((size_t)n * cols * sizeof(float));
    float *y = malloc((size_t)n * rows * sizeof(float)), *yr = malloc((size_t)n * rows * sizeof(float));
    float *y2 = malloc((size_t)n * rows * sizeof(float));
    assert_true(w && wr && back && wf && x && y && yr && y2);
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) wf[k] = rnd_unit();
        kn_quant_row(BENCH_Q4_0, wf, w + (size_t)r * rb, cols);
    }
    for (int i = 0; i < n * cols; i++) x[i] = rnd_unit();
    memcpy(wr, w, (size_t)rows * rb);
    kn_repack_rows(wr, rows, cols);
    if (cols >= 256) assert_memory_not_equal(wr, w, (size_t)rows * rb);
    else assert_memory_equal(wr, w, (size_t)rows * rb);
    kn_unrepack_rows(wr, back, rows, cols);
    assert_memory_equal(back, w, (size_t)rows * rb);
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        kn_matmul(pool, y, x, n, w, BENCH_Q4_0, rows, cols);
        kn_matmul(pool, yr, x, n, wr, KN_Q4_0_R8, rows, cols);
        if (memcmp(y, yr, (size_t)n * rows * sizeof(float)))
            fail_msg("%s n=%d rows=%d cols=%d threads=%d: rearranged Q4_0 gives other bits than Q4_0", isa(ii), n, rows,
                     cols, tp_threads(pool));
        kn_mm_out outs[2] = {{yr, wr, KN_Q4_0_R8, rows}, {y2, w, BENCH_Q4_0, rows}};
        kn_matmul_multi(pool, x, n, cols, outs, 2);
        assert_memory_equal(yr, y, (size_t)n * rows * sizeof(float));
        assert_memory_equal(y2, y, (size_t)n * rows * sizeof(float));
    }
    kn_set_isa("auto");
    free(w); free(wr); free(back); free(wf); free(x); free(y); free(yr); free(y2);
}

static void test_repack_q4_0(void **state) {
    (void)state;
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    static const int ns[] = {1, 3, 17}, rows[] = {1, 13, 67}, cols[] = {224, 288, 544, 2048};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 4; c++) {
                check_repack(ns[a], rows[b], cols[c], pool);
                if (a == 0 && b == 2) check_repack(ns[a], rows[b], cols[c], NULL);
            }
    tp_destroy(pool);
    /* which families rearranging pays for: those with a decode of their own */
    if (kn_set_isa("vnni") == 0) {
        assert_int_equal(kn_repacks(BENCH_Q4_0), 1);
        assert_int_equal(kn_repacks(BENCH_Q8_0), 0);
        assert_int_equal(kn_set_isa("avx512"), 0);
        assert_int_equal(kn_repacks(BENCH_Q4_0), kn_x_split(BENCH_Q4_0));
    }
    if (kn_set_isa("avx2") == 0) assert_int_equal(kn_repacks(BENCH_Q4_0), 0);
    assert_int_equal(kn_set_isa("portable"), 0);
    assert_int_equal(kn_repacks(BENCH_Q4_0), 0);
    kn_set_isa("auto");
}

/* Q4_0 with 16 rows interleaved (q4g16.h, KN_Q4_0_G16). The layout: groups rearranged in place
 * and put back give the file's rows, a range of rows too, and rows past the last group stay as
 * they were. The kernels, every family, on 1 and 2 threads, alone and beside the file's layout in
 * kn_matmul_multi: vnni's decode (its 16-row loop) sums a block's whole integer dot before its
 * scale, so it is held to the file's layout within the f32 bound of the double reference, with
 * x on the int8 grid (the rounding of x then exact); with any x, within twice that of vnni's
 * one-row decode, which rounds x the same way. Every other path gives the file's bits: vnni's
 * GEMM packs its panels from the groups as from the rows, and the families without a kernel of
 * their own get the rows put back. 37 rows: two groups and 5 rows past them. */
static void check_q4_0_g16(int n, int rows, int cols, int int_x, tp_pool *pool) {
    const size_t rb = bench_dtype_row_bytes(BENCH_Q4_0, cols), wb = (size_t)rows * rb, ny = (size_t)n * rows;
    const int grouped = kn_q4_0_g16_grouped(rows);
    unsigned char *w = malloc(wb), *wr = malloc(wb), *back = malloc(wb), *tmp = malloc(KN_Q4_0_G16_ROWS * rb);
    float *wf = malloc((size_t)cols * sizeof(float)), *x = malloc((size_t)n * cols * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *yr = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float)),
          *yr2 = malloc(ny * sizeof(float));
    double *ref = malloc(ny * sizeof(double)), *mag = malloc(ny * sizeof(double));
    assert_true(w && wr && back && tmp && wf && x && y && yr && y2 && yr2 && ref && mag);
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) wf[k] = rnd_unit();
        kn_quant_row(BENCH_Q4_0, wf, w + (size_t)r * rb, cols);
    }
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = int_x ? (float)(int)(rnd_unit() * 127.0f) : rnd_unit();
    if (int_x)
        for (size_t i = 0; i < (size_t)n * cols; i += 32) x[i + (i / 32) % 32] = (i / 32) % 2 ? 127.0f : -127.0f;
    memcpy(wr, w, wb);
    kn_q4_0_g16_pack(wr, cols, 0, grouped / KN_Q4_0_G16_ROWS, tmp);
    if (grouped) assert_memory_not_equal(wr, w, (size_t)grouped * rb);
    if (rows > grouped) assert_memory_equal(wr + (size_t)grouped * rb, w + (size_t)grouped * rb, (size_t)(rows - grouped) * rb);
    kn_q4_0_g16_unpack(wr, rows, cols, 0, rows, back);
    assert_memory_equal(back, w, wb);
    if (rows > 8) {
        kn_q4_0_g16_unpack(wr, rows, cols, 5, rows - 3, back);
        assert_memory_equal(back, w + 5 * rb, (size_t)(rows - 8) * rb);
    }
    ref_matmul(BENCH_Q4_0, w, x, n, rows, cols, ref, mag);
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        const int own = kn_repack_dt(BENCH_Q4_0) == KN_Q4_0_G16 && n == 1 && grouped; /* vnni's 16-row decode */
        kn_matmul(pool, y, x, n, w, BENCH_Q4_0, rows, cols);
        for (size_t i = 0; i < ny; i++) yr[i] = NAN; /* every output must be written */
        kn_matmul(pool, yr, x, n, wr, KN_Q4_0_G16, rows, cols);
        for (size_t i = 0; i < ny; i++) {
            const double err = fabs((double)yr[i] - (own && !int_x ? (double)y[i] : ref[i]));
            const double bound = (own && !int_x ? 2 : 1) * KN_TEST_RTOL * mag[i] + 1e-30;
            if (own ? !(err <= bound) : int_x && kn_x_int8(BENCH_Q4_0) && !(err <= bound))
                fail_msg("%s n=%d rows=%d cols=%d threads=%d int_x=%d: interleaved Q4_0 y[%zu]=%.9g against %.9g: err %.3g, bound %.3g",
                         isa(ii), n, rows, cols, tp_threads(pool), int_x, i, (double)yr[i], own && !int_x ? (double)y[i] : ref[i],
                         err, bound);
        }
        if (!own && memcmp(y, yr, ny * sizeof(float)))
            fail_msg("%s n=%d rows=%d cols=%d threads=%d: interleaved Q4_0 gives other bits than the file's rows", isa(ii), n,
                     rows, cols, tp_threads(pool));
        kn_mm_out outs[2] = {{yr2, wr, KN_Q4_0_G16, rows}, {y2, w, BENCH_Q4_0, rows}};
        kn_matmul_multi(pool, x, n, cols, outs, 2);
        assert_memory_equal(yr2, yr, ny * sizeof(float));
        assert_memory_equal(y2, y, ny * sizeof(float));
    }
    kn_set_isa("auto");
    free(w); free(wr); free(back); free(tmp); free(wf); free(x); free(y); free(yr); free(y2); free(yr2); free(ref); free(mag);
}

static void test_q4_0_g16(void **state) {
    (void)state;
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    static const int ns[] = {1, 3, 17}, rows[] = {13, 16, 37, 96}, cols[] = {32, 224, 2048};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 3; c++)
                for (int int_x = 0; int_x < 2; int_x++) {
                    check_q4_0_g16(ns[a], rows[b], cols[c], int_x, pool);
                    if (a == 0 && b == 2) check_q4_0_g16(ns[a], rows[b], cols[c], int_x, NULL);
                }
    tp_destroy(pool);
    /* the layout each family's own kernels read: interleaved where vnni runs both phases */
    if (kn_set_isa("vnni") == 0) {
        assert_int_equal(kn_repack_dt(BENCH_Q4_0), KN_Q4_0_G16);
        assert_int_equal(kn_repack_dt(BENCH_Q8_0), BENCH_Q8_0);
        assert_int_equal(kn_set_isa("avx512"), 0);
        assert_int_equal(kn_repack_dt(BENCH_Q4_0), kn_x_split(BENCH_Q4_0) ? KN_Q4_0_R8 : BENCH_Q4_0);
    }
    if (kn_set_isa("avx2-int8") == 0) assert_int_equal(kn_repack_dt(BENCH_Q4_0), KN_Q4_0_G16);
    if (kn_set_isa("avx2") == 0) assert_int_equal(kn_repack_dt(BENCH_Q4_0), BENCH_Q4_0);
    assert_int_equal(kn_set_isa("portable"), 0);
    assert_int_equal(kn_repack_dt(BENCH_Q4_0), BENCH_Q4_0);
    kn_set_isa("auto");
}

/* bf16 grouped 16 rows at a time (bf16r16.h, KN_BF16_R16). The layout: groups rearranged in
 * place and put back give the file's rows, a range of rows too, and rows past the last group are
 * left as they were. The kernels, every family, on 1, 2 and 3 threads, alone and beside the
 * file's layout in kn_matmul_multi: a GEMM reads the groups into the same panels it packs from
 * the rows, so 17 rows of x (and any n > 1 on bf16 dot products) give the file's bits; decode
 * and the few-rows path sum in another order, within the exact bound of the double reference.
 * test-no-r16, portable without a grouped kernel, gets the rows put back: the file's bits. 37
 * rows: two groups and 5 rows past them; 1062 columns: 9 chunks of the GEMM, the last partial. */
static kn_ops no_r16_ops;
static const kn_family no_r16 = {.name = "test-no-r16", .ops = &no_r16_ops,
                                 .about = "portable without a grouped-bf16 kernel (tests/test_kernels.c)"};

static void check_bf16_groups(int n, int rows, int cols, tp_pool *pool) {
    const size_t rb = bench_dtype_row_bytes(BENCH_BF16, cols), wb = (size_t)rows * rb;
    const int grouped = kn_bf16_r16_grouped(rows);
    unsigned char *w = malloc(wb), *wr = malloc(wb), *tmp = malloc(KN_BF16_R16_ROWS * rb);
    uint16_t *back = malloc(wb);
    float *wf = malloc((size_t)cols * sizeof(float)), *x = malloc((size_t)n * cols * sizeof(float));
    const size_t ny = (size_t)n * rows;
    float *y = malloc(ny * sizeof(float)), *yr = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float)),
          *yr2 = malloc(ny * sizeof(float));
    double *ref = malloc(ny * sizeof(double)), *mag = malloc(ny * sizeof(double));
    assert_true(w && wr && tmp && back && wf && x && y && yr && y2 && yr2 && ref && mag);
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) wf[k] = rnd_unit();
        kn_quant_row(BENCH_BF16, wf, w + (size_t)r * rb, cols);
    }
    for (int i = 0; i < n * cols; i++) x[i] = rnd_unit();
    memcpy(wr, w, wb);
    kn_bf16_r16_pack(wr, cols, 0, grouped / KN_BF16_R16_ROWS, tmp);
    assert_memory_not_equal(wr, w, (size_t)grouped * rb);
    assert_memory_equal(wr + (size_t)grouped * rb, w + (size_t)grouped * rb, (size_t)(rows - grouped) * rb);
    kn_bf16_r16_unpack(wr, rows, cols, 0, rows, back);
    assert_memory_equal(back, w, wb);
    kn_bf16_r16_unpack(wr, rows, cols, 5, rows - 3, back);
    assert_memory_equal(back, w + 5 * rb, (size_t)(rows - 8) * rb);
    ref_matmul(BENCH_BF16, w, x, n, rows, cols, ref, mag);
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        const int dot = kn_bf16_dot() && n > 1, same = n == 17 || dot || !strcmp(isa(ii), no_r16.name);
        kn_matmul(pool, y, x, n, w, BENCH_BF16, rows, cols);
        for (size_t i = 0; i < ny; i++) yr[i] = NAN; /* every output must be written */
        kn_matmul(pool, yr, x, n, wr, KN_BF16_R16, rows, cols);
        for (size_t i = 0; i < ny; i++) {
            const double err = fabs((double)yr[i] - ref[i]);
            const double bound = KN_TEST_RTOL * mag[i] + (dot ? ldexp(mag[i], -8) * (1 + KN_TEST_RTOL) : 0) + 1e-30;
            if (!(err <= bound))
                fail_msg("%s n=%d rows=%d cols=%d threads=%d: grouped bf16 y[%zu]=%.9g ref=%.9g err=%.3g bound=%.3g", isa(ii),
                         n, rows, cols, tp_threads(pool), i, (double)yr[i], ref[i], err, bound);
        }
        if (same && memcmp(y, yr, ny * sizeof(float)))
            fail_msg("%s n=%d rows=%d cols=%d threads=%d: grouped bf16 gives other bits than the file's rows", isa(ii), n,
                     rows, cols, tp_threads(pool));
        kn_mm_out outs[2] = {{yr2, wr, KN_BF16_R16, rows}, {y2, w, BENCH_BF16, rows}};
        kn_matmul_multi(pool, x, n, cols, outs, 2);
        assert_memory_equal(yr2, yr, ny * sizeof(float));
        assert_memory_equal(y2, y, ny * sizeof(float));
    }
    kn_set_isa("auto");
    free(w); free(wr); free(tmp); free(back); free(wf); free(x);
    free(y); free(yr); free(y2); free(yr2); free(ref); free(mag);
}

static void test_repack_bf16(void **state) {
    (void)state;
    no_r16_ops = kn_ops_portable;
    no_r16_ops.mm_bf16_r16 = NULL;
    assert_int_equal(kn_family_add(&no_r16), 0);
    tp_pool *p2 = tp_create(2), *p3 = tp_create(3);
    assert_true(p2 && p3);
    static const int ns[] = {1, 3, 17}, rows[] = {16, 37, 80, 301}, cols[] = {4, 70, 288, 1062};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++) {
                check_bf16_groups(ns[a], rows[b], cols[c], p2);
                if (c == 2) {
                    check_bf16_groups(ns[a], rows[b], cols[c], p3);
                    check_bf16_groups(ns[a], rows[b], cols[c], NULL);
                }
            }
    tp_destroy(p2);
    tp_destroy(p3);
    /* grouped where prefill runs on bf16 dot products, whose GEMM the groups were made for */
    if (kn_set_isa("avx512-bf16") == 0) {
        assert_int_equal(kn_repacks(BENCH_BF16), 1);
        assert_int_equal(kn_set_isa("avx512"), 0);
        assert_int_equal(kn_repacks(BENCH_BF16), 0);
    }
    assert_int_equal(kn_set_isa("portable"), 0);
    assert_int_equal(kn_repacks(BENCH_BF16), 0);
    kn_set_isa("auto");
}

/* x already on the int8 grid (integers, each block's max |x| = 127) quantises
 * with no error, so the int8 families must meet the exact bound: a wrong sign
 * trick, a missing nsum correction, a wrong nibble order or a swapped block
 * scale all fail here. Q8_0 and Q4_0, the types the int8 families take. */
static void check_int8_integer_x(bench_dtype dt) {
    enum { N = 5, ROWS = 37, COLS = 160 };
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    size_t rb = bench_dtype_row_bytes(dt, COLS);
    unsigned char *w = malloc(ROWS * rb);
    float x[N * COLS], y[N * ROWS], wf[COLS];
    assert_non_null(w);
    for (int r = 0; r < ROWS; r++) {
        for (int k = 0; k < COLS; k++) wf[k] = rnd_unit() * (float)(r + 1);
        kn_quant_row(dt, wf, w + (size_t)r * rb, COLS);
    }
    for (int i = 0; i < N * COLS; i++) x[i] = (float)((int)(rnd_unit() * 127.0f));
    for (int i = 0; i < N * COLS; i += 32) x[i + (i / 32) % 32] = (i / 32) % 2 ? 127.0f : -127.0f;
    int ran = 0;
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        for (int n = 1; n <= N; n += N - 1) {
            kn_matmul(pool, y, x, n, w, dt, ROWS, COLS);
            for (int t = 0; t < n; t++)
                for (int r = 0; r < ROWS; r++) {
                    double s = 0, m = 0;
                    for (int k = 0; k < COLS; k++) {
                        double p = ref_weight(dt, w, COLS, r, k) * x[t * COLS + k];
                        s += p;
                        m += fabs(p);
                    }
                    double err = fabs(y[t * ROWS + r] - s);
                    if (!(err <= KN_TEST_RTOL * m + 1e-30))
                        fail_msg("%s %s n=%d t=%d r=%d: y=%.9g ref=%.9g err=%.3g", isa(ii), bench_dtype_name(dt), n, t, r,
                                 (double)y[t * ROWS + r], s, err);
                }
        }
        ran += kn_x_int8(dt);
    }
    print_message("kernels: %d int8 famil%s checked on integer x for %s\n", ran, ran == 1 ? "y" : "ies", bench_dtype_name(dt));
    free(w);
    tp_destroy(pool);
}

/* A block of x whose max |x| is below ~3.7e-37 made 127 / amax overflow to inf in the
 * int8 families: every element became -128 whatever its sign, so x and -x gave the
 * same y. Such a block is now a zero block: y(x) == -y(-x), finite, and 0 for a row of
 * them; a tiny block beside normal ones leaves the others' result as it was. */
static void test_int8_tiny_block(void **state) {
    (void)state;
    enum { ROWS = 8, COLS = 64 };
    const bench_dtype dts[] = {BENCH_Q8_0, BENCH_Q4_0};
    int ran = 0;
    for (size_t di = 0; di < 2; di++) {
        bench_dtype dt = dts[di];
        size_t rb = bench_dtype_row_bytes(dt, COLS);
        unsigned char *w = malloc(ROWS * rb);
        float x[COLS], xn[COLS], y[ROWS], yn[ROWS], wf[COLS];
        assert_non_null(w);
        for (int r = 0; r < ROWS; r++) {
            for (int k = 0; k < COLS; k++) wf[k] = rnd_unit() + 0.5f;
            kn_quant_row(dt, wf, w + (size_t)r * rb, COLS);
        }
        for (int k = 0; k < COLS; k++) {
            x[k] = (k % 3 ? 1e-37f : -1.5e-37f) * (1.0f + (float)k / (2 * COLS));
            xn[k] = -x[k];
        }
        for (size_t ii = 0; ii < N_ISAS; ii++) {
            if (!use_isa(ii) || !kn_x_int8(dt)) continue;
            kn_matmul(NULL, y, x, 1, w, dt, ROWS, COLS);
            kn_matmul(NULL, yn, xn, 1, w, dt, ROWS, COLS);
            for (int r = 0; r < ROWS; r++) {
                if (!isfinite(y[r]) || y[r] != -yn[r])
                    fail_msg("%s %s row %d: y(x) = %g, y(-x) = %g: the sign of a tiny block was lost", isa(ii), bench_dtype_name(dt),
                             r, (double)y[r], (double)yn[r]);
                if (y[r] != 0.0f) fail_msg("%s %s row %d: y = %g for a row of tiny blocks, expected 0", isa(ii), bench_dtype_name(dt), r, (double)y[r]);
            }
            /* the first block normal, the second tiny: as if the second were zero */
            for (int k = 0; k < 32; k++) x[k] = rnd_unit() * 4.0f;
            float xz[COLS], yz[ROWS];
            memcpy(xz, x, sizeof(x));
            for (int k = 32; k < COLS; k++) xz[k] = 0.0f;
            kn_matmul(NULL, y, x, 1, w, dt, ROWS, COLS);
            kn_matmul(NULL, yz, xz, 1, w, dt, ROWS, COLS);
            for (int r = 0; r < ROWS; r++) assert_true(y[r] == yz[r]);
            for (int k = 0; k < 32; k++) x[k] = (k % 3 ? 1e-37f : -1.5e-37f) * (1.0f + (float)k / (2 * COLS));
            ran++;
        }
        free(w);
    }
    kn_set_isa("auto");
    print_message("kernels: tiny blocks checked on %d int8 family/type pairs\n", ran);
    if (!ran) skip();
}

/* bf16 weights with x on the bf16 grid (8 significant bits) lose nothing to
 * avx512-bf16's rounding of x, so it must meet the exact bound there: a pair
 * read in the wrong order, a row off by one in the transpose or a lost odd
 * column all fail. Off the grid it must differ from the exact kernels (x
 * really was rounded) and stay within its 2^-8 bound (check_matmul). */
static void test_bf16_dot_grid_x(void **state) {
    (void)state;
    if (kn_set_isa("avx512-bf16") != 0) {
        print_message("[ SKIP     ] kernels avx512-bf16: this CPU cannot run it\n");
        return;
    }
    enum { N = 13, ROWS = 77, COLS = 1061 }; /* odd columns: the last is half a pair; 3 chunks */
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    size_t rb = bench_dtype_row_bytes(BENCH_BF16, COLS);
    unsigned char *w = malloc(ROWS * rb);
    float *x = malloc(sizeof(float) * N * COLS), *y = malloc(sizeof(float) * N * ROWS);
    float *ye = malloc(sizeof(float) * N * ROWS), wf[COLS];
    assert_true(w && x && y && ye);
    for (int r = 0; r < ROWS; r++) {
        for (int k = 0; k < COLS; k++) wf[k] = rnd_unit();
        kn_quant_row(BENCH_BF16, wf, w + (size_t)r * rb, COLS);
    }
    for (int grid = 1; grid >= 0; grid--) {
        /* on the grid: multiples of 2^-7 in (-1, 1), 8 significant bits at most */
        for (int i = 0; i < N * COLS; i++) x[i] = grid ? ldexpf(roundf(rnd_unit() * 128.0f), -7) : rnd_unit();
        assert_int_equal(kn_set_isa("avx512-bf16"), 0);
        kn_matmul(pool, y, x, N, w, BENCH_BF16, ROWS, COLS);
        assert_int_equal(kn_set_isa("avx512"), 0);
        kn_matmul(pool, ye, x, N, w, BENCH_BF16, ROWS, COLS);
        double worst = 0;
        for (int t = 0; t < N; t++)
            for (int r = 0; r < ROWS; r++) {
                double s = 0, m = 0;
                for (int k = 0; k < COLS; k++) {
                    double p = ref_weight(BENCH_BF16, w, COLS, r, k) * x[t * COLS + k];
                    s += p;
                    m += fabs(p);
                }
                double err = fabs(y[t * ROWS + r] - s);
                worst = fmax(worst, fabs((double)y[t * ROWS + r] - ye[t * ROWS + r]));
                if (grid && !(err <= KN_TEST_RTOL * m + 1e-30))
                    fail_msg("grid x, t=%d r=%d: y=%.9g ref=%.9g err=%.3g", t, r, (double)y[t * ROWS + r], s, err);
            }
        if (!grid) assert_true(worst > 0); /* x off the grid was rounded: the families differ */
    }
    kn_set_isa("auto");
    free(w); free(x); free(y); free(ye);
    tp_destroy(pool);
}

static void test_q8_int8_integer_x(void **state) {
    (void)state;
    check_int8_integer_x(BENCH_Q8_0);
    check_int8_integer_x(BENCH_Q4_0);
}

/* The same result on no pool and on pools of 1, 3 and 4 threads (more threads
 * than cores, and row counts that split unevenly). */
static void test_matmul_threads(void **state) {
    (void)state;
    tp_pool *p1 = tp_create(1), *p3 = tp_create(3), *p4 = tp_create(4);
    assert_non_null(p1); assert_non_null(p3); assert_non_null(p4);
    tp_pool *const pools[] = {NULL, p1, p3, p4};
    /* the types kn_quant_row writes; the K-quants' kernel is test_quant.c's */
    for (int dt = 0; dt < BENCH_DTYPE_COUNT; dt++) {
        if (!bench_dtype_writable((bench_dtype)dt)) continue;
        check_matmul((bench_dtype)dt, 1, 301, 288, pools, 4);
        check_matmul((bench_dtype)dt, 17, 67, 96, pools, 4);
        check_matmul((bench_dtype)dt, 3, 1001, 64, pools, 4);
        /* prefill's ranges are whole 64-row panels: 200 rows are 128 + 72 on 3 threads and
         * 64 + 64 + 64 + 8 on 4, the last range ending in a partial panel; 1088 columns are
         * three packed chunks (512, 512, 64), the later two added into y */
        check_matmul((bench_dtype)dt, 13, 200, 1088, pools, 4);
    }
    tp_destroy(p1); tp_destroy(p3); tp_destroy(p4);
}

/* kn_matmul_multi gives each matrix the bytes kn_matmul gives it alone: the
 * same kernels over the same rows, only dispatched together. Mixed dtypes and
 * row counts that do not divide among the threads. 40 tokens take f32's gemmt and bf16's
 * vdpbf16ps GEMM, which keep what they made of x for the job's next output of their kind
 * (scratch.h kn_scratch_x): two of each in a row (kept), then one after another kind's (made
 * again); and the job run a second time on x changed in place, as the transformer reuses its
 * buffers, so that an x kept across jobs would show. One token (decode) splits the outputs' rows
 * laid end to end: 637 rows in 12 shares that start and end inside matrices. */
static void test_matmul_multi(void **state) {
    (void)state;
    enum { N = 40, COLS = 96, K = 8 };
    const int rows[K] = {301, 64, 17, 29, 100, 33, 64, 29};
    /* Q8_0 and Q4_0 share one quantised x in the int8 families */
    const bench_dtype dts[K] = {BENCH_F32, BENCH_F32, BENCH_BF16, BENCH_BF16, BENCH_F32, BENCH_F16, BENCH_Q8_0, BENCH_Q4_0};
    tp_pool *p3 = tp_create(3);
    assert_non_null(p3);
    static float x[N * COLS];
    for (int i = 0; i < N * COLS; i++) x[i] = sinf((float)i * 0.37f);
    void *w[K];
    float *want[K], *got[K];
    kn_mm_out outs[K];
    for (int k = 0; k < K; k++) {
        float *wf = malloc((size_t)rows[k] * COLS * sizeof(float));
        w[k] = malloc(bench_dtype_row_bytes(dts[k], COLS) * (size_t)rows[k]);
        want[k] = malloc((size_t)N * rows[k] * sizeof(float));
        got[k] = malloc((size_t)N * rows[k] * sizeof(float));
        assert_true(wf && w[k] && want[k] && got[k]);
        for (int i = 0; i < rows[k] * COLS; i++) wf[i] = cosf((float)(i + 7 * k) * 0.11f);
        for (int r = 0; r < rows[k]; r++)
            kn_quant_row(dts[k], wf + (size_t)r * COLS, (uint8_t *)w[k] + bench_dtype_row_bytes(dts[k], COLS) * (size_t)r, COLS);
        free(wf);
        outs[k] = (kn_mm_out){got[k], w[k], dts[k], rows[k]};
    }
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        for (int n = 1; n <= N; n += N - 1)
            for (int pass = 0; pass < 2; pass++) {
                if (pass)   /* the same buffer, new values */
                    for (int i = 0; i < N * COLS; i++) x[i] = 0.5f * x[i] + 0.25f;
                for (int k = 0; k < K; k++) {
                    kn_matmul(p3, want[k], x, n, w[k], dts[k], rows[k], COLS);
                    for (int i = 0; i < n * rows[k]; i++) got[k][i] = NAN; /* a row no task computed shows */
                }
                kn_matmul_multi(p3, x, n, COLS, outs, K);
                for (int k = 0; k < K; k++)
                    if (memcmp(want[k], got[k], (size_t)n * rows[k] * sizeof(float)))
                        fail_msg("%s n=%d pass %d matrix %d (%s, %d rows): kn_matmul_multi differs from kn_matmul", isa(ii),
                                 n, pass, k, bench_dtype_name(dts[k]), rows[k]);
            }
    }
    for (int k = 0; k < K; k++) {
        free(w[k]); free(want[k]); free(got[k]);
    }
    tp_destroy(p3);
}

/* ---- exact conversions inside the kernels: every 16-bit pattern ----
 * With cols = 1 and x = 1, y[r] is exactly the kernel's conversion of W[r][0]. */
static void check_all_halves(bench_dtype dt) {
    enum { N = 65536 };
    uint16_t *w = malloc(N * sizeof *w);
    float *y = malloc(N * sizeof *y);
    assert_non_null(w); assert_non_null(y);
    for (int i = 0; i < N; i++) w[i] = (uint16_t)i;
    const float one = 1.0f;
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        kn_matmul(NULL, y, &one, 1, w, dt, N, 1);
        for (int i = 0; i < N; i++) {
            float want = dt == BENCH_F16 ? bench_f16_to_f32((uint16_t)i) : bench_bf16_to_f32((uint16_t)i);
            if (isnan(want)) {
                if (!isnan(y[i])) fail_msg("%s %s 0x%04x: want NaN, got %g", isa(ii), bench_dtype_name(dt), i, (double)y[i]);
            } else if (y[i] != want) {
                fail_msg("%s %s 0x%04x: want %a, got %a", isa(ii), bench_dtype_name(dt), i, (double)want, (double)y[i]);
            }
        }
    }
    free(w); free(y);
}

static void test_kernel_f16_all_patterns(void **state) { (void)state; check_all_halves(BENCH_F16); }
static void test_kernel_bf16_all_patterns(void **state) { (void)state; check_all_halves(BENCH_BF16); }

/* ---- row conversions ---- */

static uint16_t q_f16(float f) { uint16_t h; kn_quant_row(BENCH_F16, &f, &h, 1); return h; }
static uint16_t q_bf16(float f) { uint16_t h; kn_quant_row(BENCH_BF16, &f, &h, 1); return h; }

static void test_f16_round_trip(void **state) {
    (void)state;
    /* every non-NaN pattern survives f16 -> f32 -> f16 through the row functions */
    for (int i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i, back;
        float f;
        kn_dequant_row(BENCH_F16, &h, &f, 1);
        kn_quant_row(BENCH_F16, &f, &back, 1);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            assert_true(isnan(f));
            assert_true((back & 0x7c00) == 0x7c00 && (back & 0x3ff)); /* still NaN */
        } else if (back != h) fail_msg("f16 0x%04x -> %a -> 0x%04x", h, (double)f, back);
    }
    /* edge cases of f32 -> f16 */
    assert_int_equal(q_f16(INFINITY), 0x7c00);
    assert_int_equal(q_f16(-INFINITY), 0xfc00);
    assert_int_equal(q_f16(65504.0f), 0x7bff);                  /* largest finite */
    assert_int_equal(q_f16(65519.0f), 0x7bff);                  /* still rounds down */
    assert_int_equal(q_f16(65520.0f), 0x7c00);                  /* rounds to inf */
    assert_int_equal(q_f16(1e9f), 0x7c00);
    assert_int_equal(q_f16(ldexpf(1, -14)), 0x0400);            /* smallest normal */
    assert_int_equal(q_f16(ldexpf(1, -24)), 0x0001);            /* smallest subnormal */
    assert_int_equal(q_f16(ldexpf(1023, -24)), 0x03ff);         /* largest subnormal */
    assert_int_equal(q_f16(ldexpf(1, -25)), 0x0000);            /* half of it: tie to even (0) */
    assert_int_equal(q_f16(ldexpf(3, -25)), 0x0002);            /* 1.5 units: tie to even (2) */
    assert_int_equal(q_f16(ldexpf(1, -26)), 0x0000);            /* underflow */
    assert_int_equal(q_f16(-ldexpf(1, -24)), 0x8001);
    assert_int_equal(q_f16(-0.0f), 0x8000);
    assert_int_equal(q_f16(1.0f + ldexpf(1, -11)), 0x3c00);     /* tie to even, down */
    assert_int_equal(q_f16(1.0f + ldexpf(3, -11)), 0x3c02);     /* tie to even, up */
    uint16_t h = q_f16(NAN);
    assert_true((h & 0x7c00) == 0x7c00 && (h & 0x3ff));
    float f;
    uint16_t sub = 0x0001;
    kn_dequant_row(BENCH_F16, &sub, &f, 1);
    assert_true(f == ldexpf(1, -24));
}

static void test_bf16_round_trip(void **state) {
    (void)state;
    for (int i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i, back;
        float f;
        kn_dequant_row(BENCH_BF16, &h, &f, 1);
        kn_quant_row(BENCH_BF16, &f, &back, 1);
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) assert_true(isnan(f) && (back & 0x7f80) == 0x7f80 && (back & 0x7f));
        else if (back != h) fail_msg("bf16 0x%04x -> %a -> 0x%04x", h, (double)f, back);
    }
    assert_int_equal(q_bf16(1.0f + ldexpf(1, -8)), 0x3f80);     /* tie to even, down */
    assert_int_equal(q_bf16(1.0f + ldexpf(3, -8)), 0x3f82);     /* tie to even, up */
    assert_int_equal(q_bf16(INFINITY), 0x7f80);
    assert_int_equal(q_bf16(-INFINITY), 0xff80);
    assert_int_equal(q_bf16(FLT_MAX), 0x7f80);                  /* rounds up to inf */
    uint16_t h = q_bf16(NAN);
    assert_true((h & 0x7f80) == 0x7f80 && (h & 0x7f));
}

static void test_f32_round_trip(void **state) {
    (void)state;
    float in[5] = {1.5f, -0.0f, INFINITY, FLT_MIN / 4, 3e38f}, mid[5], out[5];
    kn_quant_row(BENCH_F32, in, mid, 5);
    kn_dequant_row(BENCH_F32, mid, out, 5);
    assert_memory_equal(in, out, sizeof in);
}

static void test_q8_0_round_trip(void **state) {
    (void)state;
    enum { COLS = 32 * 64 };
    float in[COLS], out[COLS];
    bench_block_q8_0 q[COLS / 32];
    assert_int_equal(sizeof(bench_block_q8_0), 34);
    for (int scale = -20; scale <= 15; scale += 5) {
        for (int i = 0; i < COLS; i++) in[i] = ldexpf(rnd_unit(), scale);
        kn_quant_row(BENCH_Q8_0, in, q, COLS);
        kn_dequant_row(BENCH_Q8_0, q, out, COLS);
        for (int b = 0; b < COLS / 32; b++) {
            float amax = 0, d = bench_f16_to_f32(q[b].d);
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(in[b * 32 + j]));
            /* d is amax/127 to f16 precision, unless that is below the f16 range */
            if (amax / 127 >= ldexpf(1, -14)) assert_true(fabsf(d - amax / 127) <= ldexpf(amax / 127, -11));
            for (int j = 0; j < 32; j++) {
                assert_true(q[b].qs[j] >= -127);
                float err = fabsf(out[b * 32 + j] - in[b * 32 + j]);
                /* half a step, plus the clamp's share and the f16 subnormal step of d */
                if (!(err <= 0.5f * d * (1 + ldexpf(1, -9)) + 32 * ldexpf(1, -24) * 127 || err <= amax * 1e-7f))
                    fail_msg("q8_0 scale 2^%d block %d elem %d: in %g out %g d %g", scale, b, j,
                             (double)in[b * 32 + j], (double)out[b * 32 + j], (double)d);
            }
        }
    }
    /* a zero block encodes as d = 0, q = 0 */
    float zeros[32] = {0}, back[32];
    kn_quant_row(BENCH_Q8_0, zeros, q, 32);
    assert_int_equal(q[0].d, 0);
    for (int j = 0; j < 32; j++) assert_int_equal(q[0].qs[j], 0);
    kn_dequant_row(BENCH_Q8_0, q, back, 32);
    assert_memory_equal(zeros, back, sizeof zeros);
    /* the largest magnitude maps to +-127 and small integers round-trip exactly */
    float ints[32];
    for (int j = 0; j < 32; j++) ints[j] = (float)(j - 16) * 8.0f;
    ints[0] = -127.0f * 8.0f;
    kn_quant_row(BENCH_Q8_0, ints, q, 32);
    assert_int_equal(q[0].qs[0], -127);
    kn_dequant_row(BENCH_Q8_0, q, back, 32);
    assert_memory_equal(ints, back, sizeof ints);
    /* values below the f16 range of d quantise to zero instead of dividing by zero */
    float tiny[32];
    for (int j = 0; j < 32; j++) tiny[j] = 1e-12f;
    kn_quant_row(BENCH_Q8_0, tiny, q, 32);
    for (int j = 0; j < 32; j++) assert_int_equal(q[0].qs[j], 0);
}

/* ---- the other block-quantised types (kernels_quant.inc) ----
 * kn_quant_row writes none of them but Q4_0, so rows are random bytes with
 * every f16 field (d, m, dmin) replaced by a random normal number of either
 * sign: every quant pattern and every scale byte occurs. The reference weights
 * are quant.c's scalar dequantisation (test_quant.c holds it to gguf-py's
 * formulas); the kernels must produce those weights bit for bit. */

static const bench_dtype block_types[] = {BENCH_Q4_0, BENCH_Q4_1, BENCH_Q5_0, BENCH_Q5_1, BENCH_Q2_K,
                                          BENCH_Q3_K, BENCH_Q4_K, BENCH_Q5_K, BENCH_Q6_K};
#define N_BLOCK_TYPES (sizeof block_types / sizeof block_types[0])

/* rows x cols of dt, random; *wd (rows, cols) gets the reference weights. */
static unsigned char *random_blocks(bench_dtype dt, int rows, int cols, float **wd) {
    const size_t rb = bench_dtype_row_bytes(dt, cols), bb = bench_dtype_block_bytes(dt);
    unsigned char *w = malloc(rb * (size_t)rows);
    *wd = malloc((size_t)rows * cols * sizeof(float));
    assert_non_null(w);
    assert_non_null(*wd);
    for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = (unsigned char)(rnd_unit() * 128.0f + 128.0f);
    /* byte offsets of the f16 fields in each block (dtype.h's layouts) */
    size_t at[2] = {0, 2}, nat = 1;
    if (dt == BENCH_Q4_1 || dt == BENCH_Q5_1 || dt == BENCH_Q4_K || dt == BENCH_Q5_K) nat = 2;
    if (dt == BENCH_Q2_K) at[0] = 80, at[1] = 82, nat = 2;
    if (dt == BENCH_Q3_K) at[0] = 108;
    if (dt == BENCH_Q6_K) at[0] = 208;
    for (size_t blk = 0; blk < rb * (size_t)rows / bb; blk++)
        for (size_t k = 0; k < nat; k++) {
            float f = rnd_unit();
            uint16_t h = bench_f32_to_f16((f < 0 ? -1.0f : 1.0f) * (0.002f + 0.05f * fabsf(f)));
            memcpy(w + blk * bb + at[k], &h, 2);
        }
    for (int r = 0; r < rows; r++) kn_dequant_row(dt, w + rb * (size_t)r, *wd + (size_t)r * cols, cols);
    return w;
}

/* Every family, n tokens, against double precision over the reference weights:
 * the f32 summation bound, plus x's rounding where the family takes int8 x.
 * int_x: x on the int8 grid (integers, each 32-block's max |x| = 127), which
 * the int8 families quantise without error, so every family gets the exact
 * bound: a wrong scale lane, nibble or min term in an int8 kernel fails. */
static void check_blocks_x(bench_dtype dt, int n, int rows, int cols, tp_pool *pool, int int_x) {
    float *wd;
    unsigned char *w = random_blocks(dt, rows, cols, &wd);
    float *x = malloc((size_t)n * cols * sizeof(float)), *y = malloc((size_t)n * rows * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = int_x ? (float)(int)(rnd_unit() * 127.0f) : rnd_unit();
    if (int_x)
        for (size_t i = 0; i < (size_t)n * cols; i += 32) x[i + (i / 32) % 32] = (i / 32) % 2 ? 127.0f : -127.0f;
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        for (size_t i = 0; i < (size_t)n * rows; i++) y[i] = NAN;
        kn_matmul(pool, y, x, n, w, dt, rows, cols);
        const int xround = kn_x_int8(dt) && !int_x;
        for (int t = 0; t < n; t++)
            for (int r = 0; r < rows; r++) {
                double s = 0, m = 0, e = 0, amax = 0, wsum = 0;
                for (int k = 0; k < cols; k++) {
                    const double wk = wd[(size_t)r * cols + k], xk = x[(size_t)t * cols + k];
                    s += wk * xk;
                    m += fabs(wk * xk);
                    amax = fmax(amax, fabs(xk));
                    wsum += fabs(wk);
                    if (k % 32 == 31) { e += amax / 254 * wsum; amax = wsum = 0; }
                }
                const double got = y[(size_t)t * rows + r];
                const double bound = KN_TEST_RTOL * m + (xround ? e * (1 + KN_TEST_RTOL) : 0) + 1e-30;
                if (!(fabs(got - s) <= bound))
                    fail_msg("%s %s n=%d rows=%d cols=%d threads=%d: y[%d][%d]=%.9g ref=%.9g bound=%.3g", isa(ii),
                             bench_dtype_name(dt), n, rows, cols, tp_threads(pool), t, r, got, s, bound);
            }
    }
    free(w); free(wd); free(x); free(y);
}

static void check_blocks(bench_dtype dt, int n, int rows, int cols, tp_pool *pool) {
    check_blocks_x(dt, n, rows, cols, pool, 0);
}

/* Decode and prefill shapes, odd row counts, and threads: no pool, 1, 2 and 3
 * (more than the cores; 67 rows split unevenly). cols 768 = 3 K-blocks:
 * prefill's 512-column chunk plus a 256 tail. */
static void test_matmul_block_types(void **state) {
    (void)state;
    tp_pool *p1 = tp_create(1), *p2 = tp_create(2), *p3 = tp_create(3);
    assert_non_null(p1); assert_non_null(p2); assert_non_null(p3);
    tp_pool *const pools[] = {NULL, p1, p2, p3};
    for (size_t d = 0; d < N_BLOCK_TYPES; d++) {
        const bench_dtype dt = block_types[d];
        const int be = (int)bench_dtype_block_elems(dt);
        check_blocks(dt, 1, 5, be, pools[0]);
        check_blocks(dt, 1, 67, 3 * 256, pools[2]);
        check_blocks(dt, 1, 301, 2 * 256, pools[3]);
        check_blocks(dt, 3, 67, 3 * 256, pools[1]);
        check_blocks(dt, 17, 13, 3 * 256, pools[3]);
        check_blocks(dt, 5, 7, be == 32 ? 544 : 256, pools[2]);
        if (be == 32) check_blocks(dt, 1, 9, 96, pools[1]);
        check_blocks_x(dt, 1, 37, 3 * 256, pools[2], 1);
        check_blocks_x(dt, 4, 5, 2 * 256, pools[1], 1);
        /* 32-element types: 11 blocks, so decode's 8-block step, then a tail of 3 */
        if (be == 32) check_blocks_x(dt, 1, 9, 352, pools[0], 1);
    }
    tp_destroy(p1); tp_destroy(p2); tp_destroy(p3);
}

/* With x one-hot, y is a single weight times 1 plus zeros: exactly the weight.
 * Decode with x = e_k, and prefill with token t = e_t (one matmul covers every
 * weight through dequant_chunk), must give quant.c's weights bit for bit in
 * every exact slot. The int8 slots round x and are held by the bound instead. */
static void test_block_types_bit_exact(void **state) {
    (void)state;
    enum { ROWS = 7, COLS = 768 };
    float *x = calloc((size_t)COLS * COLS, sizeof(float)), *y = malloc((size_t)COLS * ROWS * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    for (int t = 0; t < COLS; t++) x[(size_t)t * COLS + t] = 1.0f;
    for (size_t d = 0; d < N_BLOCK_TYPES; d++) {
        const bench_dtype dt = block_types[d];
        float *wd;
        unsigned char *w = random_blocks(dt, ROWS, COLS, &wd);
        for (size_t ii = 0; ii < N_ISAS; ii++) {
            if (!use_isa(ii) || kn_x_int8(dt)) continue;
            kn_matmul(NULL, y, x, COLS, w, dt, ROWS, COLS);
            for (int t = 0; t < COLS; t++)
                for (int r = 0; r < ROWS; r++)
                    if (y[(size_t)t * ROWS + r] != wd[(size_t)r * COLS + t])
                        fail_msg("%s %s prefill: W[%d][%d] = %.9g, want %.9g", isa(ii), bench_dtype_name(dt), r, t,
                                 (double)y[(size_t)t * ROWS + r], (double)wd[(size_t)r * COLS + t]);
            for (int k = 0; k < COLS; k += 1 + k % 5) {
                kn_matmul(NULL, y, x + (size_t)k * COLS, 1, w, dt, ROWS, COLS);
                for (int r = 0; r < ROWS; r++)
                    if (y[r] != wd[(size_t)r * COLS + k])
                        fail_msg("%s %s decode: W[%d][%d] = %.9g, want %.9g", isa(ii), bench_dtype_name(dt), r, k,
                                 (double)y[r], (double)wd[(size_t)r * COLS + k]);
            }
        }
        free(w);
        free(wd);
    }
    free(x);
    free(y);
}

/* ---- dispatch ---- */

static void test_isa_selection(void **state) {
    (void)state;
    kn_init();
    print_message("kernels: ISA chosen by kn_init (BENCH_ISA or the best): %s\n", kn_isa());
    assert_int_equal(kn_set_isa("portable"), 0);
    assert_string_equal(kn_isa(), "portable");
    assert_int_equal(kn_set_isa("no-such-isa"), -1);
    assert_string_equal(kn_isa(), "portable");
    assert_int_equal(kn_set_isa(NULL), -1);
    for (size_t i = 0; i < N_ISAS; i++)
        if (kn_set_isa(isa(i)) == 0) assert_string_equal(kn_isa(), isa(i));
    /* the list names every family once, best first, and "auto" is the first exact one this CPU runs */
    char all[1024];
    assert_int_equal(kn_isa_list(all, sizeof all, KN_LIST_ALL), kn_isa_count());
    for (int i = 0; i < kn_isa_count(); i++)
        for (int j = 0; j < i; j++) assert_string_not_equal(kn_isa_name(i, NULL), kn_isa_name(j, NULL));
    const char *first = NULL;
    for (int i = 0; i < kn_isa_count(); i++) {
        int here = -1;
        const char *name = kn_isa_name(i, &here);
        assert_non_null(name);
        assert_true(kn_isa_known(name));
        assert_int_equal(here, kn_set_isa(name) == 0);
        if (here && !first && kn_isa_auto_candidate(name)) first = name;
    }
    assert_null(kn_isa_name(kn_isa_count(), NULL));
    assert_int_equal(kn_set_isa("auto"), 0);
    assert_string_equal(kn_isa(), first);
    assert_true(kn_isa_known("auto") && !kn_isa_known("avx9"));
    assert_int_equal(kn_set_isa("portable"), 0);
    assert_int_equal(kn_q8_int8(), 0);
    assert_int_equal(kn_bf16_dot(), 0);
    if (kn_set_isa("avx512-bf16") == 0) {
        assert_int_equal(kn_bf16_dot(), 1);
        assert_int_equal(kn_q8_int8(), 0);
    }
    assert_int_equal(kn_set_isa("portable"), 0);
}

/* The family main added is a family like the table's: named, listed, exact, run here, but not
 * auto's (its auto_score is 0), with portable's bits; a name taken, or "auto", is refused. */
static void test_family_added(void **state) {
    (void)state;
    char list[1024];
    const kn_list kinds[] = {KN_LIST_ALL, KN_LIST_RUNNABLE, KN_LIST_NAMED_ONLY};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        kn_isa_list(list, sizeof list, kinds[k]);
        assert_non_null(strstr(list, test_family.name));
    }
    kn_isa_list(list, sizeof list, KN_LIST_X_INT8);
    assert_null(strstr(list, test_family.name));
    assert_true(kn_isa_known(test_family.name) && kn_isa_exact(test_family.name));
    assert_false(kn_isa_auto_candidate(test_family.name));
    assert_string_equal(kn_isa_about(test_family.name), test_family.about);
    assert_null(kn_isa_about("auto"));
    assert_string_equal(kn_isa_name(kn_isa_count() - 1, NULL), test_family.name);
    assert_int_equal(kn_family_add(&test_family), -1);
    const kn_family named_auto = {.name = "auto", .ops = &kn_ops_portable};
    assert_int_equal(kn_family_add(&named_auto), -1);
    assert_int_equal(kn_set_isa(test_family.name), 0);
    assert_string_equal(kn_isa(), test_family.name);
    assert_int_equal(kn_set_tuned(BENCH_F32, 0, test_family.name), -1); /* not auto's to choose */
    assert_int_equal(kn_set_isa("portable"), 0);
}

/* ---- auto by measurement (kernels_tune.h) ---- */

/* A choice made for a dtype is what kn_matmul runs: the output has the bits of that family
 * asked by name, in decode and in prefill; a family asked by name ignores the choice; an
 * inexact or unknown family is refused. Then a measurement on real matrices gives an entry per
 * dtype and phase whose choice is an exact family this CPU runs, and the cache file keeps it,
 * other keys included, and names a damaged line. */
static void test_auto_tuned(void **state) {
    (void)state;
    enum { ROWS = 96, COLS = 256, N = 5 };
    float *w = malloc(sizeof(float) * ROWS * COLS), *x = malloc(sizeof(float) * N * COLS);
    float *y = malloc(sizeof(float) * N * ROWS), *want = malloc(sizeof(float) * N * ROWS);
    assert_non_null(w);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(want);
    for (int i = 0; i < ROWS * COLS; i++) w[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < N * COLS; i++) x[i] = (float)((i * 53) % 89) / 89.0f - 0.5f;
    assert_int_equal(kn_set_tuned(BENCH_F32, 0, "vnni"), -1);
    assert_int_equal(kn_set_tuned(BENCH_F32, 0, "avx9"), -1);
    assert_int_equal(kn_set_tuned(BENCH_F32, 0, "auto"), -1);
    for (int i = 0; i < kn_isa_count(); i++) {
        int here;
        const char *fam = kn_isa_name(i, &here);
        if (!here || !kn_isa_exact(fam)) continue;
        if (!kn_isa_auto_candidate(fam)) {
            /* exact but named only (amx): auto never runs it */
            assert_int_equal(kn_set_tuned(BENCH_F32, 1, fam), -1);
            continue;
        }
        for (int n = 1; n <= N; n += N - 1) {
            assert_int_equal(kn_set_isa(fam), 0);
            kn_matmul(NULL, want, x, n, w, BENCH_F32, ROWS, COLS);
            assert_int_equal(kn_set_isa("auto"), 0);
            assert_int_equal(kn_set_tuned(BENCH_F32, n > 1, fam), 0);
            assert_string_equal(kn_auto_family(BENCH_F32, n > 1), fam);
            kn_matmul(NULL, y, x, n, w, BENCH_F32, ROWS, COLS);
            if (memcmp(y, want, sizeof(float) * (size_t)n * ROWS)) fail_msg("auto tuned to %s (n %d) is not %s's output", fam, n, fam);
            assert_int_equal(kn_set_tuned(BENCH_F32, n > 1, NULL), 0);
        }
    }
    /* a family named wins over the choice: portable's bits, with avx2 (or whatever runs) chosen */
    assert_int_equal(kn_set_isa("portable"), 0);
    kn_matmul(NULL, want, x, 1, w, BENCH_F32, ROWS, COLS);
    assert_int_equal(kn_set_isa("auto"), 0);
    const char *other = kn_isa_resolve("auto");
    assert_int_equal(kn_set_tuned(BENCH_F32, 0, other), 0);
    assert_int_equal(kn_set_isa("portable"), 0);
    assert_int_equal(kn_auto_active(), 0);
    kn_matmul(NULL, y, x, 1, w, BENCH_F32, ROWS, COLS);
    assert_memory_equal(y, want, sizeof(float) * ROWS);
    assert_int_equal(kn_set_isa("auto"), 0);
    assert_int_equal(kn_set_tuned(BENCH_F32, 0, NULL), 0);

    /* a measurement: two dtypes, both phases */
    uint8_t *q8 = malloc(bench_dtype_row_bytes(BENCH_Q8_0, COLS) * ROWS);
    assert_non_null(q8);
    for (int r = 0; r < ROWS; r++) kn_quant_row(BENCH_Q8_0, w + (size_t)r * COLS, q8 + bench_dtype_row_bytes(BENCH_Q8_0, COLS) * r, COLS);
    const kt_mat mats[] = {{w, BENCH_F32, ROWS, COLS}, {q8, BENCH_Q8_0, ROWS, COLS}};
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    kt_table *t = calloc(1, sizeof(*t)), *back = calloc(1, sizeof(*back));
    assert_non_null(t);
    assert_non_null(back);
    char err[512], key[320], path[256], desc[1024];
    kt_key(2, key, sizeof(key));
    assert_non_null(strstr(key, ";build="));
    assert_null(strstr(key, ";build=unknown"));   /* gcc on Debian links a build-id */
    snprintf(t->key, sizeof(t->key), "%s", key);
    if (kt_measure(pool, mats, 2, t, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(t->n, 4);
    for (int i = 0; i < t->n; i++) {
        assert_true(t->e[i].dt == BENCH_F32 || t->e[i].dt == BENCH_Q8_0);
        assert_true(kn_isa_exact(t->e[i].chosen));
        assert_non_null(kn_isa_resolve(t->e[i].chosen));
        for (int f = 0; f < t->e[i].n_families; f++) assert_true(t->e[i].rate[f] > 0);
    }
    assert_int_equal(kt_apply(t), 0);
    for (int i = 0; i < t->n; i++) assert_string_equal(kn_auto_family(t->e[i].dt, t->e[i].prefill), t->e[i].chosen);
    kt_describe(t, desc, sizeof(desc));
    print_message("kernels auto measured: %s\n", desc);

    /* the cache: another key's line is kept, ours replaced, a damaged line named */
    snprintf(path, sizeof(path), "/tmp/bench-kt-%d.tsv", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "cpu=other;threads=9\tf32\tdecode\tavx2\t100\tavx2=1.000\n");
    fclose(f);
    assert_int_equal(kt_cache_store(path, t, err, sizeof(err)), 0);
    assert_int_equal(kt_cache_store(path, t, err, sizeof(err)), 0);   /* again: replaced, not doubled */
    unsigned dts = 1u << BENCH_F32 | 1u << BENCH_Q8_0;
    assert_int_equal(kt_cache_load(path, key, dts, back, err, sizeof(err)), 0);
    assert_int_equal(back->n, 4);
    assert_int_equal(back->from_cache, 1);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(back->e[i].chosen, t->e[i].chosen);
        assert_int_equal(back->e[i].dt, t->e[i].dt);
    }
    assert_int_equal(kt_cache_load(path, "cpu=other;threads=9", 1u << BENCH_F32, back, err, sizeof(err)), 1);  /* no prefill line */
    assert_int_equal(back->n, 1);
    assert_int_equal(kt_cache_load(path, key, dts | 1u << BENCH_F16, back, err, sizeof(err)), 1);   /* f16 not measured */
    f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "a line with no tabs\n");
    fclose(f);
    assert_int_equal(kt_cache_load(path, key, dts, back, err, sizeof(err)), -1);
    if (!strstr(err, path) || !strstr(err, "line 6")) fail_msg("unclear error: %s", err);
    unlink(path);
    for (int i = 0; i < t->n; i++) kn_set_tuned(t->e[i].dt, t->e[i].prefill, NULL);
    tp_destroy(pool);
    free(t);
    free(back);
    free(q8);
    free(w);
    free(x);
    free(y);
    free(want);
}

/* A cache file holding, for key, f32 decode and prefill entries that chose `chosen` over
 * `runner` (recorded twice as fast), as version 2 lines measured at Unix time `when` and never
 * re-checked. */
static void kt_write_doctored(const char *path, const char *key, const char *chosen, const char *runner, int rows, int cols,
                              double when) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    double bytes = 4.0 * rows * cols, flops = 2.0 * rows * cols * KT_PREFILL_N;
    for (int prefill = 0; prefill < 2; prefill++)
        fprintf(f, "%s\tf32\t%s\t%s\t%.0f\t%s=10.000,%s=5.000\tv2\t%dx%d\t%.0f\t0.50\t0.010\t0\n", key,
                prefill ? "prefill" : "decode", chosen, prefill ? flops : bytes, chosen, runner, rows, cols, when);
    fclose(f);
}

/* One f32 matrix (rows, cols) of small values: the tuner's working set in the tests below. */
static float *kt_f32_matrix(int rows, int cols) {
    float *w = malloc(sizeof(float) * (size_t)rows * cols);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)rows * cols; i++) w[i] = (float)((i * 2654435761u) % 1000u) * 1e-3f - 0.5f;
    return w;
}

/* The choice from the rates alone (kt_pick): a family beats the flags' own only by more than the
 * phase's margin, 3% in prefill and 8% in decode, where exact families stream the same bytes and
 * a few per cent of one pass do not rank them; a family that rounds x beats the exact choice by
 * the same margin or is not named, and is never the exact choice; and among those, the first
 * listed gives way only to one faster by the margin. */
static void test_auto_margin(void **state) {
    (void)state;
    const int exact[3] = {0, 0, 0}, int8[3] = {0, 0, 1};
    int r;
    const double close[3] = {100, 105, 90}, clear[3] = {100, 109, 90}, slight[3] = {100, 102, 90};
    assert_int_equal(kt_pick(close, exact, 3, 0, 0, &r), 0);  /* decode: 5% is inside the margin */
    assert_int_equal(r, -1);
    assert_int_equal(kt_pick(clear, exact, 3, 0, 0, &r), 1);  /* decode: 9% is not */
    assert_int_equal(kt_pick(close, exact, 3, 0, 1, &r), 1);  /* prefill: 5% is not */
    assert_int_equal(kt_pick(slight, exact, 3, 0, 1, &r), 0); /* prefill: 2% is */
    assert_int_equal(kt_pick(close, exact, 3, -1, 0, &r), 1); /* no flags' choice: the fastest */
    const double fast_int8[3] = {100, 101, 120}, near_int8[3] = {100, 101, 106};
    assert_int_equal(kt_pick(fast_int8, int8, 3, 0, 0, &r), 0);
    assert_int_equal(r, 2);
    assert_int_equal(kt_pick(near_int8, int8, 3, 0, 0, &r), 0); /* decode: 6% does not pay for rounding */
    assert_int_equal(r, -1);
    assert_int_equal(kt_pick(near_int8, int8, 3, 0, 1, &r), 0);
    assert_int_equal(r, 2);
    /* two families that round x: the first listed stays unless the other beats it by the margin */
    const int two8[3] = {0, 1, 1};
    const double both_near[3] = {100, 130, 134}, second_clear[3] = {100, 130, 150}, first_slow[3] = {100, 104, 134};
    assert_int_equal(kt_pick(both_near, two8, 3, 0, 0, &r), 0);
    assert_int_equal(r, 1);     /* decode: 3% between them is inside the margin */
    kt_pick(second_clear, two8, 3, 0, 0, &r);
    assert_int_equal(r, 2);     /* 15% is not */
    kt_pick(first_slow, two8, 3, 0, 0, &r);
    assert_int_equal(r, 2);     /* the first does not beat the exact choice: the second alone does */
    kt_pick(both_near, two8, 3, 0, 1, &r);
    assert_int_equal(r, 2);     /* prefill's 3% margin: 3.1% is past it */
}

/* The cache file's version 2 columns, and a version 1 file read as it is (issue 37). */
static void test_auto_cache_versions(void **state) {
    (void)state;
    char path[256], err[512], key[320], when[160];
    snprintf(path, sizeof(path), "/tmp/bench-ktv-%d.tsv", (int)getpid());
    kt_key(2, key, sizeof(key));
    kt_table *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\tf32\tdecode\tavx2\t100\tavx2=1.000,portable=0.500\n", key);                 /* version 1 */
    fprintf(f, "%s\tf32\tprefill\tavx2\t200\tavx2=2.000\tv2\t64x256\t1700000000\t1.25\t0.031\t1700000100\tv3-more\n", key);
    fclose(f);
    assert_int_equal(kt_cache_load(path, key, 1u << BENCH_F32, t, err, sizeof(err)), 0);
    assert_int_equal(t->n, 2);
    const kt_entry *dec = t->e[0].prefill ? &t->e[1] : &t->e[0], *pre = t->e[0].prefill ? &t->e[0] : &t->e[1];
    assert_int_equal(dec->n_families, 2);
    assert_true(dec->when == 0 && isnan(dec->load1) && isnan(dec->others) && dec->rows == 0);
    kt_describe_when(dec, when, sizeof(when));
    assert_non_null(strstr(when, "not recorded"));
    assert_int_equal(pre->n_families, 1);
    assert_true(pre->rows == 64 && pre->cols == 256 && pre->when == 1700000000.0 && pre->checked == 1700000100.0);  /* a later column ignored */
    assert_true(fabs(pre->load1 - 1.25) < 1e-9 && fabs(pre->others - 0.031) < 1e-9);
    kt_describe_when(pre, when, sizeof(when));
    if (!strstr(when, "2023-11-14 22:13 UTC") || !strstr(when, "load average 1.25") || !strstr(when, "3%") ||
        !strstr(when, "confirmed by a quiet re-check 2023-11-14 22:15 UTC"))
        fail_msg("when: %s", when);
    /* written back as version 2, read again the same */
    assert_int_equal(kt_cache_store(path, t, err, sizeof(err)), 0);
    kt_table *back = calloc(1, sizeof(*back));
    assert_non_null(back);
    assert_int_equal(kt_cache_load(path, key, 1u << BENCH_F32, back, err, sizeof(err)), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(back->e[i].rows, t->e[i].rows);
        assert_true(back->e[i].when == t->e[i].when && back->e[i].checked == t->e[i].checked);
        assert_true(isnan(t->e[i].others) ? isnan(back->e[i].others) : fabs(back->e[i].others - t->e[i].others) < 1e-9);
    }
    /* a version column that is not one, or a version 2 line cut short, is damaged */
    f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "%s\tf16\tdecode\tavx2\t100\tavx2=1.000\tv2\t64x256\n", key);
    fclose(f);
    assert_int_equal(kt_cache_load(path, key, 1u << BENCH_F32, back, err, sizeof(err)), -1);
    unlink(path);
    free(t);
    free(back);
}

/* A tuner run beside a busy loop on every CPU keeps nothing: its choice is the process's own. */
static void test_auto_busy_not_kept(void **state) {
    (void)state;
    const int rows = 1024, cols = 1024;     /* a second or so under ASan: many of /proc/stat's ticks */
    float *w = kt_f32_matrix(rows, cols);
    const kt_mat mats[] = {{w, BENCH_F32, rows, cols}};
    char path[256], note[2048], err[512];
    snprintf(path, sizeof(path), "/tmp/bench-ktb-%d.tsv", (int)getpid());
    unlink(path);
    setenv("BENCH_KERNELS_CACHE", path, 1);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t kids[64];
    int nk = 0;
    for (; nk < cpus && nk < 64; nk++) {
        kids[nk] = fork();
        assert_true(kids[nk] >= 0);
        if (kids[nk] == 0) {
            alarm(60);      /* never outlives a test that failed before it killed it */
            for (volatile unsigned long spin = 0;; spin++) {}
        }
    }
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    int rc = kt_auto(pool, mats, 1, KT_TUNE, note, sizeof(note), err, sizeof(err));
    for (int i = 0; i < nk; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    if (rc) fail_msg("%s", err);
    print_message("beside %d spinning processes: %s\n", nk, note);
    assert_int_equal(access(path, F_OK), -1);
    assert_non_null(strstr(note, "measured now"));
    assert_non_null(strstr(note, "not kept: other processes used"));
    /* the choice still holds for this process */
    assert_true(kn_isa_exact(kn_auto_family(BENCH_F32, 0)));
    kn_set_tuned(BENCH_F32, 0, NULL);
    kn_set_tuned(BENCH_F32, 1, NULL);
    unsetenv("BENCH_KERNELS_CACHE");
    tp_destroy(pool);
    free(w);
}

/* A kept choice is re-checked at start: one made stale (its family timed 20 times slower, the
 * test hook) is measured again; one whose runner-up is made slow stands. */
static void test_auto_recheck(void **state) {
    (void)state;
    char fam[2][16];
    int n_fam = 0;
    for (int i = 0; i < kn_isa_count() && n_fam < 2; i++) {
        int here;
        const char *name = kn_isa_name(i, &here);
        if (here && kn_isa_auto_candidate(name) && strcmp(name, "portable")) snprintf(fam[n_fam++], 16, "%s", name);
    }
    if (n_fam < 2) {
        print_message("one exact family runs on this CPU: nothing to re-check against\n");
        skip();
    }
    const int rows = 256, cols = 512;
    float *w = kt_f32_matrix(rows, cols);
    const kt_mat mats[] = {{w, BENCH_F32, rows, cols}};
    char path[256], key[320], note[2048], why[256], err[512];
    snprintf(path, sizeof(path), "/tmp/bench-ktr-%d.tsv", (int)getpid());
    setenv("BENCH_KERNELS_CACHE", path, 1);
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    kt_key(2, key, sizeof(key));
    kt_table *t = calloc(1, sizeof(*t));
    assert_non_null(t);

    /* the runner-up made slow: the kept choice stands (measured in 2023: due for a re-check) */
    kt_write_doctored(path, key, fam[0], fam[1], rows, cols, 1700000000);
    assert_int_equal(kt_cache_load(path, key, 1u << BENCH_F32, t, err, sizeof(err)), 0);
    kt_test_scale(fam[1], 20);
    assert_int_equal(kt_recheck(pool, mats, 1, t, why, sizeof(why)), 0);
    assert_string_equal(why, "");
    assert_int_equal(kt_auto(pool, mats, 1, KT_TUNE, note, sizeof(note), err, sizeof(err)), 0);
    assert_non_null(strstr(note, "measured earlier, re-checked now"));
    assert_string_equal(kn_auto_family(BENCH_F32, 0), fam[0]);
    /* where the machine was quiet the confirmation is kept, and not checked again today */
    assert_int_equal(kt_cache_load(path, key, 1u << BENCH_F32, t, err, sizeof(err)), 0);
    for (int i = 0; i < t->n; i++) assert_true(t->e[i].checked == 0 || fabs(t->e[i].checked - (double)time(NULL)) < 600);

    /* measured an hour ago: not due, so even a kept family now slow stands until tomorrow */
    kt_test_scale(fam[0], 20);
    kt_write_doctored(path, key, fam[0], fam[1], rows, cols, (double)time(NULL) - 3600);
    assert_int_equal(kt_auto(pool, mats, 1, KT_TUNE, note, sizeof(note), err, sizeof(err)), 0);
    assert_null(strstr(note, "re-checked"));
    assert_string_equal(kn_auto_family(BENCH_F32, 0), fam[0]);
    kt_write_doctored(path, key, fam[0], fam[1], rows, cols, 1700000000);
    assert_int_equal(kt_cache_load(path, key, 1u << BENCH_F32, t, err, sizeof(err)), 0);

    /* the kept choice made slow: stale, measured again, and the slow family not chosen */
    assert_int_equal(kt_recheck(pool, mats, 1, t, why, sizeof(why)), 1);
    if (!strstr(why, fam[1]) || !strstr(why, fam[0])) fail_msg("why: %s", why);
    assert_int_equal(kt_auto(pool, mats, 1, KT_TUNE, note, sizeof(note), err, sizeof(err)), 0);
    print_message("stale: %s\n", note);
    assert_non_null(strstr(note, "the kept choice was stale"));
    assert_string_not_equal(kn_auto_family(BENCH_F32, 0), fam[0]);
    assert_string_not_equal(kn_auto_family(BENCH_F32, 1), fam[0]);
    /* kept only on a quiet machine; where kept, the file has the new choice */
    assert_int_equal(kt_cache_load(path, key, 1u << BENCH_F32, t, err, sizeof(err)), 0);
    for (int i = 0; i < t->n; i++)
        assert_true(strstr(note, "not kept") ? !strcmp(t->e[i].chosen, fam[0]) : strcmp(t->e[i].chosen, fam[0]) != 0);

    /* read only: no re-check, the kept choice as it is */
    kt_test_scale(NULL, 1);
    kt_write_doctored(path, key, fam[0], fam[1], rows, cols, 1700000000);
    assert_int_equal(kt_auto(pool, mats, 1, KT_READ, note, sizeof(note), err, sizeof(err)), 0);
    assert_null(strstr(note, "re-checked"));
    assert_string_equal(kn_auto_family(BENCH_F32, 0), fam[0]);

    /* --retune: the key's entries measured again on matrices of their shape; another key's: nothing */
    assert_int_equal(kt_retune(pool, path, key, note, sizeof(note), err, sizeof(err)), 0);
    print_message("retune: %s\n", note);
    assert_non_null(strstr(note, "f32 decode"));
    assert_non_null(strstr(note, "f32 prefill"));
    assert_int_equal(kt_retune(pool, path, "cpu=none;threads=1", note, sizeof(note), err, sizeof(err)), 1);

    kn_set_tuned(BENCH_F32, 0, NULL);
    kn_set_tuned(BENCH_F32, 1, NULL);
    unlink(path);
    unsetenv("BENCH_KERNELS_CACHE");
    free(t);
    tp_destroy(pool);
    free(w);
}

/* ---- expf, vectorised (engines/abi/vexpf.h: the KV modules' softmax) ---- */

/* bench_expf_n gives libm's expf bits: every float pattern at a stride of 4099 (both signs,
 * subnormals, the |x| >= 88 special lanes, infinities, NaNs), every softmax input in
 * [-20, 0] at 2^-14 steps, in lengths that leave a tail. */
static void test_vexpf_bitwise(void **state) {
    (void)state;
    enum { CHUNK = 4096 + 13 };
    float *x = malloc(sizeof(float) * CHUNK), *y = malloc(sizeof(float) * CHUNK);
    assert_non_null(x);
    assert_non_null(y);
    uint64_t bits = 0, checked = 0;
    while (bits <= 0xffffffffull) {
        int n = 0;
        for (; n < CHUNK && bits <= 0xffffffffull; n++, bits += 4099) {
            uint32_t b = (uint32_t)bits;
            memcpy(&x[n], &b, 4);
        }
        bench_expf_n(y, x, (size_t)n);
        for (int i = 0; i < n; i++) {
            float want = expf(x[i]);
            if (memcmp(&y[i], &want, 4) && !(isnan(want) && isnan(y[i]))) fail_msg("expf(%a): %a, libm %a", x[i], y[i], want);
        }
        checked += (uint64_t)n;
    }
    for (float v = -20.0f; v <= 0.0f;) {
        int n = 0;
        for (; n < CHUNK && v <= 0.0f; n++, v += 0x1p-14f) x[n] = v;
        memcpy(y, x, sizeof(float) * (size_t)n);
        bench_expf_n(y, y, (size_t)n);   /* in place, as the softmax calls it */
        for (int i = 0; i < n; i++) {
            float want = expf(x[i]);
            if (memcmp(&y[i], &want, 4)) fail_msg("expf(%a) in place: %a, libm %a", x[i], y[i], want);
        }
        checked += (uint64_t)n;
    }
    print_message("vexpf: %llu values checked (vector path: %s)\n", (unsigned long long)checked, BENCH_VEXPF ? "built" : "not built");
    free(x);
    free(y);
}

/* ---- SwiGLU ---- */

/* kn_swiglu must give the scalar expression's bits (transformer.c's greedy ids rely on
 * it): over a strided sweep of every float pattern (about a million, both signs,
 * subnormals, |x| >= 88, infinities and NaNs), random g, and lengths that leave a tail.
 * kernels.c's vector expf was checked against libm's expf on all 2^32 patterns once;
 * this keeps a sample of that check. */
static void test_swiglu_bitwise(void **state) {
    (void)state;
    enum { C = 4099 };
    float *h = malloc(sizeof(float) * C), *g = malloc(sizeof(float) * C), *h0 = malloc(sizeof(float) * C);
    assert_true(h && g && h0);
    size_t checked = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += (uint64_t)C * 1021) {
        const size_t len = C - (size_t)(base >> 20) % 17; /* not always a multiple of 16 */
        for (size_t i = 0; i < len; i++) {
            uint32_t b = (uint32_t)(base + i * 1021);
            memcpy(&h[i], &b, sizeof b);
            g[i] = rnd_unit() * 4.0f;
            float v = h[i];
            v *= 1.0f / (1.0f + expf(-v));
            h0[i] = v * g[i];
        }
        kn_swiglu(h, g, len);
        for (size_t i = 0; i < len; i++) {
            uint32_t a, b;
            memcpy(&a, &h[i], sizeof a);
            memcpy(&b, &h0[i], sizeof b);
            if (a != b && !(isnan(h[i]) && isnan(h0[i])))
                fail_msg("swiglu x=%08x g=%.9g: %08x, the scalar form gives %08x", (uint32_t)(base + i * 1021), (double)g[i], a, b);
        }
        checked += len;
    }
    /* values where SiLU's are: small and moderate activations */
    for (int rep = 0; rep < 64; rep++) {
        for (int i = 0; i < C; i++) {
            h[i] = rnd_unit() * (float)(1 + rep);
            g[i] = rnd_unit();
            float v = h[i];
            v *= 1.0f / (1.0f + expf(-v));
            h0[i] = v * g[i];
        }
        kn_swiglu(h, g, C);
        assert_memory_equal(h, h0, sizeof(float) * C);
        checked += C;
    }
    print_message("kernels: swiglu bitwise on %zu values\n", checked);
    free(h); free(g); free(h0);
}

/* ---- triad ---- */

static void test_triad(void **state) {
    (void)state;
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        double a = kn_triad_bandwidth(NULL, 1 << 16, 3);
        double b = kn_triad_bandwidth(pool, (1 << 16) + 12, 2); /* not a multiple of the vector */
        double c = kn_triad_bandwidth(pool, 4, 0);              /* one element, reps clamped to 1 */
        assert_true(isfinite(a) && a > 0);
        assert_true(isfinite(b) && b > 0);
        assert_true(isfinite(c) && c > 0);
    }
    assert_true(kn_triad_bandwidth(pool, 0, 3) == 0.0);
    tp_destroy(pool);
}

static void test_read_bandwidth(void **state) {
    (void)state;
    tp_pool *pool = tp_create(3);
    assert_non_null(pool);
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        double a = kn_read_bandwidth(NULL, 1 << 16, 3);
        double b = kn_read_bandwidth(pool, (1 << 16) + 12, 2); /* uneven split, a scalar tail */
        double c = kn_read_bandwidth(pool, 4, 0);              /* one element, reps clamped to 1 */
        assert_true(isfinite(a) && a > 0);
        assert_true(isfinite(b) && b > 0);
        assert_true(isfinite(c) && c > 0);
    }
    assert_true(kn_read_bandwidth(pool, 0, 3) == 0.0);
    assert_true(kn_read_bandwidth(pool, 3, 3) == 0.0);          /* less than one float */
    tp_destroy(pool);
}

/* The peak probes run and give a positive figure; the int8 one exactly where the family has an
 * int8 Q8_0 path. The peak of prefill's arithmetic names the family's: the bf16 dot for bf16
 * where it rounds x to bf16, the int8 dot for Q8_0 where it rounds x to int8, the f32 FMA for f32
 * everywhere. */
static void test_peak(void **state) {
    (void)state;
    tp_pool *pool = tp_create(2);
    assert_non_null(pool);
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii)) continue;
        double f = kn_peak_gops(pool, 0), i8 = kn_peak_gops(NULL, 1);
        assert_true(isfinite(f) && f > 0);
        if (kn_q8_int8()) assert_true(isfinite(i8) && i8 > 0);
        else assert_true(i8 == 0.0);
        const char *arith = NULL, *fam = NULL;
        assert_true(kn_peak_prefill_gops(NULL, BENCH_F32, &arith, &fam) > 0);
        assert_string_equal(arith, "f32 FMA");
        assert_string_equal(fam, isa(ii));
        assert_true(kn_peak_prefill_gops(NULL, BENCH_BF16, &arith, &fam) > 0);
        assert_string_equal(arith, kn_bf16_dot() ? "bf16 dot" : "f32 FMA");
        assert_true(kn_peak_prefill_gops(NULL, BENCH_Q8_0, &arith, &fam) > 0);
        assert_string_equal(arith, kn_q8_int8() ? "int8 dot" : "f32 FMA");
    }
    tp_destroy(pool);
}

int main(void) {
    if (kn_family_add(&test_family)) {
        fprintf(stderr, "test_kernels: kn_family_add(%s) refused\n", test_family.name);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_selection),
        cmocka_unit_test(test_family_added),
        cmocka_unit_test(test_auto_tuned),
        cmocka_unit_test(test_auto_margin),
        cmocka_unit_test(test_auto_cache_versions),
        cmocka_unit_test(test_auto_busy_not_kept),
        cmocka_unit_test(test_auto_recheck),
        cmocka_unit_test(test_swiglu_bitwise),
        cmocka_unit_test(test_vexpf_bitwise),
        cmocka_unit_test(test_f32_round_trip),
        cmocka_unit_test(test_f16_round_trip),
        cmocka_unit_test(test_bf16_round_trip),
        cmocka_unit_test(test_q8_0_round_trip),
        cmocka_unit_test(test_kernel_f16_all_patterns),
        cmocka_unit_test(test_kernel_bf16_all_patterns),
        cmocka_unit_test(test_matmul_f32),
        cmocka_unit_test(test_matmul_f32_token_blocks),
        cmocka_unit_test(test_scratch_x_key),
        cmocka_unit_test(test_matmul_f16),
        cmocka_unit_test(test_matmul_bf16),
        cmocka_unit_test(test_matmul_q8_0),
        cmocka_unit_test(test_matmul_q4_0),
        cmocka_unit_test(test_matmul_block_types),
        cmocka_unit_test(test_block_types_bit_exact),
        cmocka_unit_test(test_q8_int8_integer_x),
        cmocka_unit_test(test_split_x),
        cmocka_unit_test(test_repack_q4_0),
        cmocka_unit_test(test_q4_0_g16),
        cmocka_unit_test(test_int8_tiny_block),
        cmocka_unit_test(test_bf16_dot_grid_x),
        cmocka_unit_test(test_matmul_threads),
        cmocka_unit_test(test_matmul_multi),
        cmocka_unit_test(test_triad),
        cmocka_unit_test(test_read_bandwidth),
        cmocka_unit_test(test_peak),
        cmocka_unit_test(test_repack_bf16), /* last: it adds a family the others would walk */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
