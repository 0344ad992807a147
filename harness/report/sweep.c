/* Sustained load: see sweep.h. */
#include "sweep.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/scenario/stats.h"

static int by_arrival(const void *a, const void *b) {
    const sw_req *x = a, *y = b;
    return x->arrival_ms < y->arrival_ms ? -1 : x->arrival_ms > y->arrival_ms;
}

static void sw_why(sw_point *p, const char *fmt, double a, double b) {
    size_t at = strlen(p->why);
    snprintf(p->why + at, sizeof(p->why) - at, fmt, at ? "; " : "", a, b);
}

int sw_eval(const sw_req *in, int n, const sw_rules *ru, sw_point *out) {
    memset(out, 0, sizeof(*out));
    if (n < 1) {
        snprintf(out->why, sizeof(out->why), "no requests");
        return -1;
    }
    sw_req *r = malloc((size_t)n * sizeof(*r));
    double *ttft = malloc((size_t)n * sizeof(double)), *tpot = malloc((size_t)n * sizeof(double));
    double *lat = malloc((size_t)n * sizeof(double));
    if (!r || !ttft || !tpot || !lat) {
        free(r);
        free(ttft);
        free(tpot);
        free(lat);
        snprintf(out->why, sizeof(out->why), "out of memory");
        return -1;
    }
    memcpy(r, in, (size_t)n * sizeof(*r));
    qsort(r, (size_t)n, sizeof(*r), by_arrival);
    int w = ru->warmup < n ? ru->warmup : n, m = n - w, nt = 0, met = 0;
    double t_lo = INFINITY, t_hi = -INFINITY, toks = 0;
    for (int i = w; i < n; i++) {
        const sw_req *q = &r[i];
        double tf = q->first_ms - q->arrival_ms, tp = q->n_out > 1 ? (q->end_ms - q->first_ms) / (q->n_out - 1) : NAN;
        ttft[i - w] = tf;
        lat[i - w] = q->end_ms - q->arrival_ms;
        if (q->n_out > 1) tpot[nt++] = tp;
        met += (!ru->ttft_ms || tf <= ru->ttft_ms) && (!ru->tpot_ms || q->n_out < 2 || tp <= ru->tpot_ms);
        toks += q->n_out;
        t_lo = q->arrival_ms < t_lo ? q->arrival_ms : t_lo;
        t_hi = q->end_ms > t_hi ? q->end_ms : t_hi;
    }
    out->n_counted = m;
    out->ttft_p50 = out->ttft_p90 = out->ttft_p99 = out->tpot_p50 = out->tpot_p90 = out->tpot_p99 = NAN;
    out->lat_p50 = out->lat_p99 = out->itl_p50 = out->itl_p99 = NAN;
    size_t ng = 0;
    for (int i = w; i < n; i++) ng += r[i].tok_ms && r[i].n_tok > 1 ? (size_t)r[i].n_tok - 1 : 0;
    double *gap = ng && ng < (size_t)INT32_MAX ? malloc(ng * sizeof(double)) : NULL;
    if (gap) {
        size_t k = 0;
        for (int i = w; i < n; i++)
            for (int j = 1; r[i].tok_ms && j < r[i].n_tok; j++) gap[k++] = r[i].tok_ms[j] - r[i].tok_ms[j - 1];
        st_sort(gap, (int)ng);
        out->itl_p50 = st_quantile_sorted(gap, (int)ng, 0.5);
        out->itl_p99 = st_quantile_sorted(gap, (int)ng, 0.99);
        free(gap);
    }
    if (m > 0) {
        out->seconds = (t_hi - t_lo) * 1e-3;
        out->req_s = out->seconds > 0 ? m / out->seconds : 0;
        out->out_tok_s = out->seconds > 0 ? toks / out->seconds : 0;
        out->goodput = (double)met / m;
        st_sort(ttft, m);
        st_sort(lat, m);
        out->ttft_p50 = st_quantile_sorted(ttft, m, 0.5);
        out->ttft_p90 = st_quantile_sorted(ttft, m, 0.9);
        out->ttft_p99 = st_quantile_sorted(ttft, m, 0.99);
        out->lat_p50 = st_quantile_sorted(lat, m, 0.5);
        out->lat_p99 = st_quantile_sorted(lat, m, 0.99);
        if (nt) {
            st_sort(tpot, nt);
            out->tpot_p50 = st_quantile_sorted(tpot, nt, 0.5);
            out->tpot_p90 = st_quantile_sorted(tpot, nt, 0.9);
            out->tpot_p99 = st_quantile_sorted(tpot, nt, 0.99);
        }
    }
    if (m < ru->min_requests) sw_why(out, "%s%.0f requests counted, fewer than %.0f", m, ru->min_requests);
    if (out->seconds < ru->min_seconds) sw_why(out, "%s%.3g s counted, shorter than %.3g s", out->seconds, ru->min_seconds);
    if (m > 0 && ru->windows >= 2) {
        /* completions per window while the load is offered (first to last counted arrival):
         * the drain after the last arrival says nothing of the sustained rate */
        int k = ru->windows;
        double a_hi = r[n - 1].arrival_ms, width = (a_hi - t_lo) / k, last = 0, prev = 0;
        for (int i = w; width > 0 && i < n; i++) {
            if (r[i].end_ms > a_hi) continue;
            int b = (int)((r[i].end_ms - t_lo) / width);
            b = b >= k ? k - 1 : b < 0 ? 0 : b;
            last += b == k - 1;
            prev += b == k - 2;
        }
        double mean = (last + prev) / 2;
        if (width <= 0) sw_why(out, "%snot steady: every counted request arrived at once (%.0f, %.0f)", m, 0);
        else if (mean <= 0 || fabs(last - prev) / 2 > ru->steady_tol * mean)
            sw_why(out, "%snot steady: the last two windows of the arrivals saw %.0f and %.0f requests finish", prev, last);
    }
    out->valid = !out->why[0];
    free(r);
    free(ttft);
    free(tpot);
    free(lat);
    return 0;
}

/* ======================================================================
 * The knee
 * ====================================================================== */

const char *sw_verdict_name(int v) { return v == SW_PASS ? "pass" : v == SW_FAIL ? "fail" : "unclear"; }

typedef struct sw_ctx {
    const sw_search *s;
    sw_measure_fn measure;
    void *user;
    sw_knee_result *out;
    char *err;
    size_t errlen;
} sw_ctx;

/* Measures rate until its interval leaves the target or max_reps are spent; -1 to stop. */
static int sw_point_at(sw_ctx *c, double rate, sw_knee_point **pp) {
    const sw_search *s = c->s;
    if (c->out->n >= SW_MAX_POINTS) return -1;
    sw_knee_point *p = &c->out->p[c->out->n++];
    *p = (sw_knee_point){.rate = rate};
    double g[256];
    int max = s->max_reps < 256 ? s->max_reps : 256;
    for (;;) {
        int want = p->reps < s->reps ? s->reps : p->reps + 1;
        while (p->reps < want) {
            int valid = 1;
            if (c->measure(c->user, rate, p->reps, &g[p->reps], &valid)) {
                snprintf(c->err, c->errlen, "sweep: the measurement at %g requests/s failed", rate);
                return -1;
            }
            p->invalid += !valid;
            p->reps++;
        }
        st_summary sm;
        if (st_summarize(g, p->reps, &sm, NULL)) {
            snprintf(c->err, c->errlen, "sweep: out of memory");
            return -1;
        }
        p->mean = sm.mean;
        p->ci_lo = sm.ci_lo;
        p->ci_hi = sm.ci_hi;
        p->verdict = sm.ci_lo >= s->target ? SW_PASS : sm.ci_hi < s->target ? SW_FAIL : SW_UNCLEAR;
        if (p->verdict != SW_UNCLEAR || p->reps >= max) break;
    }
    *pp = p;
    return 0;
}

int sw_knee(const sw_search *s, sw_measure_fn measure, void *user, sw_knee_result *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (!(s->lo > 0 && s->hi > s->lo && s->target > 0 && s->target <= 1 && s->reps >= 1 && s->max_reps >= s->reps &&
          s->resolution > 0 && s->max_points >= 2 && s->max_points <= SW_MAX_POINTS)) {
        snprintf(err, errlen, "sweep: knee search over [%g, %g] requests/s, target %g, %d to %d repetitions, resolution %g, "
                 "%d points: expected 0 < lo < hi, 0 < target <= 1, 1 <= reps <= max_reps, resolution > 0, 2 .. %d points",
                 s->lo, s->hi, s->target, s->reps, s->max_reps, s->resolution, s->max_points, SW_MAX_POINTS);
        return -1;
    }
    sw_ctx c = {.s = s, .measure = measure, .user = user, .out = out, .err = err, .errlen = errlen};
    sw_knee_point *p;
    if (sw_point_at(&c, s->lo, &p)) return -1;
    if (p->verdict != SW_PASS) {
        /* lo already misses the target (or cannot be told from it) */
        out->unresolved = p->verdict == SW_UNCLEAR;
        return 0;
    }
    double lo = s->lo, hi = s->hi;
    out->knee = lo;
    if (sw_point_at(&c, hi, &p)) return -1;
    if (p->verdict == SW_PASS) {
        out->knee = hi;     /* the capacity is above the range */
        return 0;
    }
    if (p->verdict == SW_UNCLEAR) {
        out->unresolved = 1;
        return 0;
    }
    out->bracketed = 1;
    while (hi - lo > s->resolution * lo && out->n < s->max_points) {
        double mid = (lo + hi) / 2;
        if (sw_point_at(&c, mid, &p)) return -1;
        if (p->verdict == SW_UNCLEAR) {
            out->unresolved = 1;
            break;
        }
        if (p->verdict == SW_PASS) lo = mid;
        else hi = mid;
    }
    out->knee = lo;
    return 0;
}
