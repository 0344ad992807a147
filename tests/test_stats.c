/* Statistics across repetitions: summary figures on known data, the bootstrap
 * interval's determinism, and MAD outliers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "harness/scenario/stats.h"

static void test_summary_known_values(void **state) {
    (void)state;
    const double x[] = {4, 1, 3, 2, 5};
    st_summary s;
    assert_int_equal(st_summarize(x, 5, &s, NULL), 0);
    assert_int_equal(s.n, 5);
    assert_true(s.median == 3 && s.mean == 3 && s.min == 1 && s.max == 5);
    assert_true(fabs(s.stddev - sqrt(2.5)) < 1e-12);    /* sample stddev: sum of squares 10 / (n - 1) */
    assert_true(s.ci_lo <= s.mean && s.mean <= s.ci_hi);
    assert_true(s.ci_lo >= 1 && s.ci_hi <= 5);
    assert_int_equal(s.n_outliers, 0);
}

static void test_even_count_median_interpolates(void **state) {
    (void)state;
    const double x[] = {10, 1, 2, 3};
    st_summary s;
    assert_int_equal(st_summarize(x, 4, &s, NULL), 0);
    assert_true(s.median == 2.5);
    double sorted[] = {1, 2, 3, 4};
    assert_true(st_quantile_sorted(sorted, 4, 0.5) == 2.5);
    assert_true(st_quantile_sorted(sorted, 4, 0) == 1 && st_quantile_sorted(sorted, 4, 1) == 4);
    assert_true(fabs(st_quantile_sorted(sorted, 4, 0.9) - 3.7) < 1e-12);
}

static void test_single_value(void **state) {
    (void)state;
    const double x[] = {7};
    st_summary s;
    assert_int_equal(st_summarize(x, 1, &s, NULL), 0);
    assert_true(s.median == 7 && s.stddev == 0 && s.ci_lo == 7 && s.ci_hi == 7);
    assert_int_equal(st_summarize(x, 0, &s, NULL), -1);
}

static void test_bootstrap_is_deterministic(void **state) {
    (void)state;
    double x[20];
    for (int i = 0; i < 20; i++) x[i] = 100 + (i * 37 % 11);
    st_summary a, b;
    assert_int_equal(st_summarize(x, 20, &a, NULL), 0);
    assert_int_equal(st_summarize(x, 20, &b, NULL), 0);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_true(a.ci_lo < a.mean && a.mean < a.ci_hi);
    /* the interval of the mean is narrower than the data's range */
    assert_true(a.ci_hi - a.ci_lo < a.max - a.min);
}

static void test_mad_flags_outlier(void **state) {
    (void)state;
    const double x[] = {10.0, 10.2, 9.9, 10.1, 10.0, 25.0, 9.8};
    int flags[7];
    st_summary s;
    assert_int_equal(st_summarize(x, 7, &s, flags), 0);
    assert_int_equal(s.n_outliers, 1);
    for (int i = 0; i < 7; i++) assert_int_equal(flags[i], i == 5);
}

static void test_mad_zero_falls_back_to_mean_deviation(void **state) {
    (void)state;
    /* more than half the values equal: MAD is 0, the mean absolute deviation decides */
    const double x[] = {5, 5, 5, 5, 5, 5, 9};
    int flags[7];
    st_summary s;
    assert_int_equal(st_summarize(x, 7, &s, flags), 0);
    assert_int_equal(s.n_outliers, 1);
    assert_int_equal(flags[6], 1);
    const double same[] = {3, 3, 3};
    assert_int_equal(st_summarize(same, 3, &s, flags), 0);
    assert_int_equal(s.n_outliers, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_known_values),
        cmocka_unit_test(test_even_count_median_interpolates),
        cmocka_unit_test(test_single_value),
        cmocka_unit_test(test_bootstrap_is_deterministic),
        cmocka_unit_test(test_mad_flags_outlier),
        cmocka_unit_test(test_mad_zero_falls_back_to_mean_deviation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
