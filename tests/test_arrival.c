/* Arrival processes (harness/scenario/arrival.h), over many draws from fixed seeds (so the
 * checks are deterministic, not timed):
 *   - gamma: the gaps' mean is 1/rate and their coefficient of variation 1/sqrt(burstiness),
 *     for bursty (0.25), Poisson-like (1) and regular (4) traffic; burstiness 1 matches
 *     the Poisson process's statistics;
 *   - poisson: mean 1/rate, CV 1;
 *   - constant and ramp: the exact gaps; all: zeros;
 *   - the same seed gives the same times, another seed other times;
 *   - out-of-range specs are refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/scenario/arrival.h"

#define N 200000

/* The gaps' mean and coefficient of variation. */
static void gap_stats(const double *t, int n, double *mean, double *cv) {
    double s = 0, ss = 0, prev = 0;
    for (int i = 0; i < n; i++) {
        double g = t[i] - prev;
        assert_true(g >= 0);
        prev = t[i];
        s += g;
        ss += g * g;
    }
    *mean = s / n;
    double var = ss / n - *mean * *mean;
    *cv = sqrt(var) / *mean;
}

static void test_gamma(void **state) {
    double *t = malloc(N * sizeof(double));
    assert_non_null(t);
    static const double bs[] = {0.25, 1, 4};
    for (int k = 0; k < 3; k++) {
        ar_spec a = {.kind = AR_GAMMA, .rate = 8, .burstiness = bs[k]};
        assert_int_equal(ar_times(&a, N, 42, t), 0);
        double mean, cv;
        gap_stats(t, N, &mean, &cv);
        assert_float_equal(mean, 1.0 / 8, 0.02 / 8);
        assert_float_equal(cv, 1.0 / sqrt(bs[k]), 0.03 / sqrt(bs[k]));
    }
    ar_spec p = {.kind = AR_POISSON, .rate = 8};
    assert_int_equal(ar_times(&p, N, 42, t), 0);
    double mean, cv;
    gap_stats(t, N, &mean, &cv);
    assert_float_equal(mean, 1.0 / 8, 0.02 / 8);
    assert_float_equal(cv, 1.0, 0.03);
    free(t);
}

static void test_exact(void **state) {
    double t[5];
    ar_spec c = {.kind = AR_CONSTANT, .rate = 4};
    assert_int_equal(ar_times(&c, 5, 1, t), 0);
    for (int i = 0; i < 5; i++) assert_float_equal(t[i], 0.25 * (i + 1), 1e-12);
    /* 1, 2, 3, 4, 5 requests/s */
    ar_spec r = {.kind = AR_RAMP, .rate = 1, .rate_end = 5};
    assert_int_equal(ar_times(&r, 5, 1, t), 0);
    double want = 0;
    for (int i = 0; i < 5; i++) {
        want += 1.0 / (i + 1);
        assert_float_equal(t[i], want, 1e-12);
    }
    ar_spec all = {.kind = AR_ALL};
    assert_int_equal(ar_times(&all, 5, 1, t), 0);
    for (int i = 0; i < 5; i++) assert_true(t[i] == 0);
}

static void test_seeds_and_refusals(void **state) {
    double a[64], b[64], c[64];
    ar_spec g = {.kind = AR_GAMMA, .rate = 2, .burstiness = 0.5};
    assert_int_equal(ar_times(&g, 64, 7, a), 0);
    assert_int_equal(ar_times(&g, 64, 7, b), 0);
    assert_int_equal(ar_times(&g, 64, 8, c), 0);
    assert_memory_equal(a, b, sizeof(a));
    assert_true(memcmp(a, c, sizeof(a)) != 0);
    ar_spec bad[] = {{.kind = AR_POISSON, .rate = 0}, {.kind = AR_GAMMA, .rate = 1, .burstiness = 0},
                     {.kind = AR_RAMP, .rate = 1, .rate_end = -1}, {.kind = AR_CONSTANT, .rate = NAN}};
    for (int i = 0; i < 4; i++) assert_int_equal(ar_times(&bad[i], 4, 1, a), -1);
    assert_int_equal(ar_kind_from_name("gamma"), AR_GAMMA);
    assert_int_equal(ar_kind_from_name("bursty"), -1);
    assert_string_equal(ar_kind_name(AR_RAMP), "ramp");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gamma),
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_seeds_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
