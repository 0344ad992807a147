/* Sustained load (harness/report/sweep.h) on a stand-in engine: one server of a fixed
 * service time S per request, first in first out, simulated (no clock, so nothing here
 * is timed):
 *   - the knee search finds the known capacity 1/S: with constant arrivals (every
 *     repetition the same) within the search's resolution, with Poisson arrivals (a new
 *     seed per repetition, intervals that need several repetitions) below 1/S and above
 *     the rate where the queue's waits already miss the SLO at the target;
 *   - the verdicts: a point below capacity is VALID; one above is not steady (its
 *     completion rate is the server's while arrivals outrun it... and its latency grows);
 *     too few requests or too short a span is INVALID, each rule named;
 *   - warm-up requests are left out of every figure;
 *   - a bad search is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/sweep.h"
#include "harness/scenario/arrival.h"
#include "harness/scenario/traffic.h"

#define S_MS 10.0       /* service time: capacity 100 requests/s */
#define N_REQ 400

typedef struct standin {
    int poisson;
    int calls;
    sw_rules rules;
} standin;

/* n requests at rate through one server of S_MS each, 4 tokens out each */
static void simulate(double rate, int poisson, uint64_t seed, sw_req *r, int n) {
    double t[N_REQ];
    ar_spec a = {.kind = poisson ? AR_POISSON : AR_CONSTANT, .rate = rate};
    assert_int_equal(ar_times(&a, n, seed, t), 0);
    double free_at = 0;
    for (int i = 0; i < n; i++) {
        double arr = t[i] * 1e3, start = arr > free_at ? arr : free_at;
        /* the first token after a quarter of the service, the rest spread over the remainder */
        r[i] = (sw_req){.arrival_ms = arr, .first_ms = start + S_MS / 4, .end_ms = start + S_MS, .n_out = 4};
        free_at = start + S_MS;
    }
}

static int measure(void *user, double rate, int rep, double *goodput, int *valid) {
    standin *s = user;
    sw_req r[N_REQ];
    simulate(rate, s->poisson, 1000 + (uint64_t)rep * 7919 + (uint64_t)(rate * 1000), r, N_REQ);
    sw_point p;
    assert_int_equal(sw_eval(r, N_REQ, &s->rules, &p), 0);
    *goodput = p.goodput;
    *valid = p.valid;
    s->calls++;
    return 0;
}

static void test_knee_constant(void **state) {
    /* SLO: TTFT within 3 service times; the queue grows from the first request above 1/S */
    standin s = {.rules = {.warmup = 10, .min_requests = 50, .min_seconds = 0.5, .windows = 4, .steady_tol = 0.25, .ttft_ms = 3 * S_MS}};
    sw_search q = {.lo = 10, .hi = 400, .target = 0.9, .reps = 2, .max_reps = 6, .resolution = 0.01, .max_points = 32};
    sw_knee_result k;
    char err[256];
    assert_int_equal(sw_knee(&q, measure, &s, &k, err, sizeof(err)), 0);
    assert_true(k.bracketed);
    assert_false(k.unresolved);
    /* above capacity the wait grows by (S - 1/rate) a request: 90% of 390 counted meet
     * 2.75 S of wait up to rate 1/S x 1.008 */
    assert_true(k.knee >= 100.0 * 0.99 && k.knee <= 100.0 * 1.02);
    /* identical repetitions: two each, never more */
    for (int i = 0; i < k.n; i++) assert_int_equal(k.p[i].reps, 2);
    assert_int_equal(s.calls, 2 * k.n);
}

static void test_knee_poisson(void **state) {
    standin s = {.poisson = 1, .rules = {.warmup = 10, .min_requests = 50, .windows = 4, .steady_tol = 0.5, .ttft_ms = 3 * S_MS}};
    sw_search q = {.lo = 10, .hi = 400, .target = 0.9, .reps = 3, .max_reps = 12, .resolution = 0.02, .max_points = 32};
    sw_knee_result k;
    char err[256];
    assert_int_equal(sw_knee(&q, measure, &s, &k, err, sizeof(err)), 0);
    /* M/D/1: random arrivals queue below capacity; the knee is under 1/S, and not far under */
    assert_true(k.knee < 100.0);
    assert_true(k.knee > 30.0);
    for (int i = 0; i < k.n; i++) {
        assert_true(k.p[i].ci_lo <= k.p[i].mean && k.p[i].mean <= k.p[i].ci_hi);
        if (k.p[i].verdict == SW_PASS) assert_true(k.p[i].ci_lo >= 0.9 && k.p[i].rate <= k.knee);
        if (k.p[i].verdict == SW_FAIL) assert_true(k.p[i].ci_hi < 0.9 && k.p[i].rate > k.knee);
    }
}

static void test_verdicts(void **state) {
    sw_rules ru = {.warmup = 10, .min_requests = 100, .min_seconds = 1, .windows = 4, .steady_tol = 0.2, .ttft_ms = 3 * S_MS};
    sw_req r[N_REQ];
    sw_point p;
    /* half capacity: steady, every request in time */
    simulate(50, 0, 1, r, N_REQ);
    assert_int_equal(sw_eval(r, N_REQ, &ru, &p), 0);
    assert_true(p.valid);
    assert_string_equal(p.why, "");
    assert_int_equal(p.n_counted, N_REQ - 10);
    assert_float_equal(p.goodput, 1.0, 1e-12);
    assert_float_equal(p.ttft_p50, S_MS / 4, 1e-9);
    assert_float_equal(p.tpot_p50, S_MS * 0.75 / 3, 1e-9);
    assert_float_equal(p.req_s, 50.0, 1.0);
    /* arrivals all at once: completions still at the server's pace, but the queue never
     * settles and TTFT grows; a burst's last windows are steady only by accident, so
     * check the latency instead */
    simulate(1000, 0, 1, r, N_REQ);
    assert_int_equal(sw_eval(r, N_REQ, &ru, &p), 0);
    assert_true(p.goodput < 0.05);
    assert_true(p.ttft_p99 > 100 * S_MS);
    /* every request at once: no sustained load */
    for (int i = 0; i < N_REQ; i++) r[i].arrival_ms = 0;
    assert_int_equal(sw_eval(r, N_REQ, &ru, &p), 0);
    assert_false(p.valid);
    assert_non_null(strstr(p.why, "arrived at once"));
    /* too few, too short */
    simulate(50, 0, 1, r, 40);
    assert_int_equal(sw_eval(r, 40, &ru, &p), 0);
    assert_false(p.valid);
    assert_non_null(strstr(p.why, "30 requests counted, fewer than 100"));
    assert_non_null(strstr(p.why, "shorter than 1 s"));
    /* not steady: the last 50 requests come at a quarter of the rate */
    simulate(50, 0, 1, r, N_REQ);
    for (int i = 350; i < N_REQ; i++) {
        double shift = (i - 350) * 60.0;
        r[i].arrival_ms += shift;
        r[i].first_ms += shift;
        r[i].end_ms += shift;
    }
    assert_int_equal(sw_eval(r, N_REQ, &ru, &p), 0);
    assert_false(p.valid);
    assert_non_null(strstr(p.why, "not steady"));
    /* warm-up: the slow first requests do not count */
    simulate(50, 0, 1, r, N_REQ);
    for (int i = 0; i < 10; i++) r[i].first_ms += 1000;
    assert_int_equal(sw_eval(r, N_REQ, &ru, &p), 0);
    assert_float_equal(p.goodput, 1.0, 1e-12);
    ru.warmup = 0;
    assert_int_equal(sw_eval(r, N_REQ, &ru, &p), 0);
    assert_float_equal(p.goodput, (N_REQ - 10.0) / N_REQ, 1e-12);
}

/* ITL over every gap between tokens of the counted requests: the warm-up's slow gaps
 * are left out; without token times it is NAN. */
static void test_itl(void **state) {
    enum { N = 20, T = 5 };
    sw_req r[N];
    double tok[N][T];
    for (int i = 0; i < N; i++) {
        double gap = i < 2 ? 100 : i % 2 ? 2 : 4;
        for (int k = 0; k < T; k++) tok[i][k] = i * 10 + k * gap;
        r[i] = (sw_req){.arrival_ms = i * 10, .first_ms = tok[i][0], .end_ms = tok[i][T - 1], .n_out = T, .tok_ms = tok[i], .n_tok = T};
    }
    sw_rules ru = {.warmup = 2};
    sw_point p;
    assert_int_equal(sw_eval(r, N, &ru, &p), 0);
    assert_true(p.itl_p50 >= 2 && p.itl_p50 <= 4);
    assert_float_equal(p.itl_p99, 4, 1e-12);
    ru.warmup = 0;
    assert_int_equal(sw_eval(r, N, &ru, &p), 0);
    assert_float_equal(p.itl_p99, 100, 1e-12);
    for (int i = 0; i < N; i++) r[i].tok_ms = NULL;
    assert_int_equal(sw_eval(r, N, &ru, &p), 0);
    assert_true(isnan(p.itl_p50) && isnan(p.itl_p99));
}

static void test_bad_search(void **state) {
    standin s = {0};
    sw_search q = {.lo = 10, .hi = 5, .target = 0.9, .reps = 1, .max_reps = 1, .resolution = 0.1, .max_points = 8};
    sw_knee_result k;
    char err[512];
    assert_int_equal(sw_knee(&q, measure, &s, &k, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "expected 0 < lo < hi"));
    assert_int_equal(s.calls, 0);
}

/* The sweep points' parser (tf_points_parse), shared by the scenario's lists and bench
 * sweep's --rates: counts, non-numbers, inf, nan, too small, not ascending. */
static void test_points_parse(void **state) {
    (void)state;
    double v[TF_MAX_RATES];
    int n = 0;
    char err[256];
    assert_int_equal(tf_points_parse("0.5,1,2e3", 0, v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_true(v[0] == 0.5 && v[2] == 2000);
    assert_int_equal(tf_points_parse("0.001", 0, v, &n, err, sizeof(err)), 0);     /* the bound itself */
    static const struct { const char *text; int conc; const char *want; } bad[] = {
        {"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33", 0, "33 rates: expected at most 32"},
        {"inf", 0, "entry 1, \"inf\": expected a rate 0.001 .. 1e+06 requests/s"},
        {"1,-inf", 0, "entry 2, \"-inf\": expected a rate"},
        {"nan", 0, "entry 1, \"nan\": expected a rate"},
        {"1e-300", 0, "entry 1, \"1e-300\": expected a rate 0.001"},
        {"0", 0, "entry 1, \"0\": expected a rate"},
        {"1e7", 0, "entry 1, \"1e7\": expected a rate 0.001 .. 1e+06"},
        {"1,1", 0, "entry 2, \"1\": expected more than the previous one, 1"},
        {"1x", 0, "entry 1, \"1x\": expected a number"},
        {"", 0, "entry 1, \"\": expected a number"},
        {"2,", 0, "entry 2, \"\": expected a number"},
        {"2.5", 1, "entry 1, \"2.5\": expected a whole number of requests in flight, 1 .. 100000"},
        {"0", 1, "expected a whole number"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        assert_int_equal(tf_points_parse(bad[i].text, bad[i].conc, v, &n, err, sizeof(err)), -1);
        if (!strstr(err, bad[i].want)) fail_msg("\"%s\": no \"%s\" in \"%s\"", bad[i].text, bad[i].want, err);
    }
}

/* Arrival offsets past AR_MAX_SECONDS are refused, not cast to int64 ns out of range. */
static void test_arrivals_bounded(void **state) {
    (void)state;
    double t[4];
    ar_spec a = {.kind = AR_CONSTANT, .rate = 1e-300};
    assert_int_equal(ar_times(&a, 4, 1, t), -1);
    a.rate = AR_MIN_RATE;
    assert_int_equal(ar_times(&a, 4, 1, t), 0);
    assert_true(fabs(t[3] - 4000) < 1e-6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knee_constant),
        cmocka_unit_test(test_knee_poisson),
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_itl),
        cmocka_unit_test(test_bad_search),
        cmocka_unit_test(test_points_parse),
        cmocka_unit_test(test_arrivals_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
