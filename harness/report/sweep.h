/* Sustained load: what one configuration serves at a given offered rate, and the knee,
 * the highest rate at which goodput stays at or above a target (docs/serving.md). Pure:
 * the requests of a repetition in, figures and verdicts out; `bench sweep`
 * (harness/cli/cmd_sweep.c) runs the points, each repetition a fresh `bench run` worker.
 *
 * One point's repetition (sw_eval), over its finished requests:
 *   warm-up    the first `warmup` requests by arrival are left out of every figure
 *              (MLPerf LoadGen's warm-up), as the queue fills from empty;
 *   counted    the rest: throughput (requests/s and output tokens/s over the span from
 *              the first counted arrival to the last counted end), TTFT, TPOT and
 *              latency percentiles, ITL percentiles (with token times), goodput (the
 *              share of counted requests meeting every SLO target: TTFT <= ttft_ms,
 *              TPOT <= tpot_ms);
 *   valid      at least min_requests counted, over at least min_seconds, and in steady
 *              state: the span over which the load is offered (first to last counted
 *              arrival) cut into `windows` equal windows, the requests finishing in the
 *              last two within steady_tol of their mean (a point whose throughput still
 *              climbs or collapses has not settled; the drain after the last arrival
 *              is left out). Requests that all arrive at once are no sustained load:
 *              INVALID. Each failed rule is named in why.
 *
 * The knee (sw_knee): bisection on the rate between lo (must pass) and hi (must fail).
 * A point passes when the 95% bootstrap interval of its goodput over the repetitions
 * lies at or above target, fails when it lies below; when the interval straddles the
 * target, repetitions are added up to max_reps, and if it still does the search stops
 * there: the knee cannot be told from that rate at this noise. Otherwise it stops when
 * hi - lo <= resolution x lo. The knee is the highest passing rate.
 */
#ifndef BENCH_SWEEP_H
#define BENCH_SWEEP_H

#include <stddef.h>

typedef struct sw_req {
    double arrival_ms, first_ms, end_ms;
    int n_out;
    const double *tok_ms;   /* (n_tok) every token's time, for ITL; NULL: none */
    int n_tok;
} sw_req;

typedef struct sw_rules {
    int warmup;             /* requests left out first, by arrival */
    int min_requests;       /* counted requests at least */
    double min_seconds;     /* counted span at least */
    int windows;            /* >= 2: the steady-state check's windows */
    double steady_tol;      /* e.g. 0.25: the last two windows' rates within 25% of their mean */
    double ttft_ms, tpot_ms;    /* SLO targets; 0: none (goodput is then 1) */
} sw_rules;

typedef struct sw_point {
    int n_counted;
    double seconds;         /* counted span */
    double req_s, out_tok_s;
    double goodput;         /* 0 .. 1 */
    double ttft_p50, ttft_p90, ttft_p99;    /* ms */
    double tpot_p50, tpot_p90, tpot_p99;    /* ms; NAN without requests of 2 tokens or more */
    double lat_p50, lat_p99;                /* ms */
    double itl_p50, itl_p99;                /* ms, over every gap between tokens; NAN without token times */
    int valid;
    char why[256];          /* the rules it broke, "" when valid */
} sw_point;

/* Evaluates one repetition's n requests (any order). Returns 0, or -1 when n is 0 or
 * memory runs out (out->why says which). */
int sw_eval(const sw_req *r, int n, const sw_rules *rules, sw_point *out);

/* ---- the knee ---- */

#define SW_MAX_POINTS 32

/* Runs one more repetition at rate; *goodput its goodput (0 .. 1), *valid its verdict.
 * Returns 0, or -1 to stop the search (the caller's error). */
typedef int (*sw_measure_fn)(void *user, double rate, int rep, double *goodput, int *valid);

typedef struct sw_search {
    double lo, hi;          /* requests/s, 0 < lo < hi */
    double target;          /* goodput, 0 .. 1 */
    int reps;               /* repetitions per point first */
    int max_reps;           /* at most, while a point's interval straddles the target */
    double resolution;      /* stop when hi - lo <= resolution x lo */
    int max_points;         /* <= SW_MAX_POINTS */
} sw_search;

enum { SW_PASS, SW_FAIL, SW_UNCLEAR };

typedef struct sw_knee_point {
    double rate;
    int reps, invalid;      /* repetitions, of which INVALID */
    double mean, ci_lo, ci_hi;  /* goodput over the repetitions */
    int verdict;            /* SW_PASS, SW_FAIL, SW_UNCLEAR */
} sw_knee_point;

typedef struct sw_knee_result {
    int n;
    sw_knee_point p[SW_MAX_POINTS];     /* in the order measured */
    double knee;            /* the highest passing rate; 0 when lo failed */
    int bracketed;          /* 1: a failing rate above the knee was found */
    int unresolved;         /* 1: stopped at a point whose interval straddles the target */
} sw_knee_result;

/* Returns 0 with out, or -1 with err (a bad search, or measure returned -1). */
int sw_knee(const sw_search *s, sw_measure_fn measure, void *user, sw_knee_result *out, char *err, size_t errlen);
const char *sw_verdict_name(int v);     /* "pass", "fail", "unclear" */

#endif
