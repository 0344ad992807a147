/* bench sweep: sustained load. A serving scenario run at several offered rates (its
 * workload.requests.sweep, harness/scenario/traffic.h), each point a `bench run` of its own
 * (every repetition a fresh worker, as any variant), then per point and variant:
 * throughput, TTFT/TPOT percentiles with 95% intervals over the repetitions, goodput, a
 * VALID/INVALID verdict (harness/report/sweep.h), the knee, and a figure.
 *
 * Output, in --out DIR (default results/<scenario>-sweep/<UTC time>):
 *   points/r<RATE>/scenario.json, results/     each point's scenario and bench run
 *   sweep.csv                                  one row per rate and variant
 *   sweep-concurrency.csv, .svg                the same per concurrency cap (closed loop), when asked
 *   knee.csv                                   the knee search's points and knee per variant, when it ran
 *   sweep-v<V>.dat, sweep.gp, sweep.svg        the figure's data per variant (rate, TTFT p50 p99, TPOT
 *                                              p50 p99, goodput and its interval, ITL p99, 1 VALID / 0
 *                                              INVALID), its script, the figure (gnuplot, when installed)
 */
#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/cli/cliargs.h"
#include "util/ut_fs.h"
#include "harness/report/locations.h"
#include "harness/cli/commands.h"
#include "harness/parent/subproc.h"
#include "harness/report/rmodel.h"
#include "harness/report/sweep.h"
#include "harness/scenario/scenario.h"
#include "harness/scenario/stats.h"
#include "harness/scenario/traffic.h"

#define SWC_MAX_VARIANTS 16

typedef struct swc {
    const char *file;
    scenario *s;
    const tf_traffic *tf;
    char out[PATH_MAX], self[PATH_MAX];
    char scdir[PATH_MAX];           /* the scenario's folder: the points read what it may */
    const char *allow[16];
    int n_allow;
    const char *only;
    int allow_launch;               /* --allow-launch: passed to every point's bench run */
    int reps;
    sw_rules rules;
    FILE *csv;
    FILE *dat[SWC_MAX_VARIANTS];    /* per variant: rate and figures, for the figure */
    char label[SWC_MAX_VARIANTS][64];
    int n_variants;
    double rate_lo, rate_hi;        /* the rates (or concurrencies) of the table */
    int conc;                       /* 1: the table's points are concurrency caps, not rates */
    const char *prefix;             /* "sweep" or "sweep-concurrency": its files */
} swc;

static void swc_usage(FILE *f) {
    fprintf(f, "usage: bench sweep SCENARIO.json [--out DIR] [--rates R,R,...] [--concurrency N,N,...] [--knee LO:HI] [--repeat N]\n"
               "                   [--only key=val,...] [--allow-read DIR]... [--allow-launch]\n\n"
               "Runs a serving scenario at each offered rate of its workload.requests.sweep (or --rates),\n"
               "each point a bench run of its own with N repetitions, and reports per rate and variant the\n"
               "throughput, TTFT/TPOT percentiles with 95%% intervals, goodput and a VALID/INVALID verdict;\n"
               "with a knee (sweep.knee or --knee) it searches, variant by variant, the highest rate whose\n"
               "goodput stays at the target; with concurrency levels (sweep.concurrency or --concurrency) it\n"
               "also runs the closed loop at each: every request due at once, N in flight. docs/serving.md.\n"
               "--allow-launch lets the points start the servers the scenario's http targets launch, as\n"
               "`bench run --allow-launch` does (docs/reliability.md). Results: --out DIR, else\n"
               "RESULTS/<scenario>-sweep/<UTC time>-<commit> (RESULTS as for bench run).\n");
}

/* Runs the scenario at rate with reps repetitions in points/<tag>; returns its results.json
 * (its folder in res), or NULL. */
static rm_model *swc_point(swc *c, double rate, int reps, const char *tag, char *res) {
    char dir[PATH_MAX + 64], sc[PATH_MAX + 96], log[PATH_MAX + 96], err[1024];
    snprintf(dir, sizeof(dir), "%s/points/%s", c->out, tag);
    snprintf(sc, sizeof(sc), "%s/scenario.json", dir);
    snprintf(res, PATH_MAX + 96, "%s/results", dir);
    snprintf(log, sizeof(log), "%s/run.log", dir);
    if (ut_mkdirs(dir)) {
        fprintf(stderr, "bench sweep: %s: %s\n", dir, strerror(errno));
        return NULL;
    }
    cJSON *j = cJSON_Duplicate(c->s->json, 1);
    if (!j) return NULL;
    cJSON *rq = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "workload"), "requests");
    cJSON *ar;
    if (c->conc) {
        /* closed loop: every request due at once, `rate` of them in flight */
        ar = cJSON_CreateString("all");
        cJSON *n = cJSON_CreateNumber(rate);
        if (!cJSON_ReplaceItemInObjectCaseSensitive(rq, "concurrency", n)) cJSON_AddItemToObject(rq, "concurrency", n);
    } else {
        /* the scenario's process at this rate; Poisson when it has none */
        ar = cJSON_CreateObject();
        ar_kind k = c->tf->has_arrival && c->tf->arrival.kind != AR_ALL && c->tf->arrival.kind != AR_RAMP ? c->tf->arrival.kind : AR_POISSON;
        cJSON_AddStringToObject(ar, "process", ar_kind_name(k));
        cJSON_AddNumberToObject(ar, "rate", rate);
        if (k == AR_GAMMA) cJSON_AddNumberToObject(ar, "burstiness", c->tf->arrival.burstiness);
    }
    if (!cJSON_ReplaceItemInObjectCaseSensitive(rq, "arrival", ar)) cJSON_AddItemToObject(rq, "arrival", ar);
    cJSON_DeleteItemFromObjectCaseSensitive(rq, "sweep");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "repetitions");
    cJSON_AddNumberToObject(j, "repetitions", reps);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    FILE *f = text ? fopen(sc, "w") : NULL;
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        fprintf(stderr, "bench sweep: %s: %s\n", sc, strerror(errno));
        free(text);
        return NULL;
    }
    free(text);
    char *argv[64];
    int a = 0;
    argv[a++] = c->self;
    argv[a++] = "run";
    argv[a++] = sc;
    argv[a++] = "--out";
    argv[a++] = res;
    argv[a++] = "--force";
    argv[a++] = "--allow-read";
    argv[a++] = c->scdir;
    for (int i = 0; i < c->n_allow; i++) {
        argv[a++] = "--allow-read";
        argv[a++] = (char *)c->allow[i];
    }
    if (c->only) {
        argv[a++] = "--only";
        argv[a++] = (char *)c->only;
    }
    if (c->allow_launch) argv[a++] = "--allow-launch";
    argv[a] = NULL;
    fprintf(stderr, "bench sweep: %g %s, %d repetition%s (%s)\n", rate, c->conc ? "in flight" : "requests/s", reps, reps > 1 ? "s" : "",
            log);
    if (sp_run(argv, "bench run", log, 86400, NULL, err, sizeof(err))) {
        fprintf(stderr, "bench sweep: the point at %g requests/s: %s\n", rate, err);
        return NULL;
    }
    rm_model *d = calloc(1, sizeof(*d));
    if (!d || rr_load(res, d, err, sizeof(err))) {
        fprintf(stderr, "bench sweep: %s\n", d ? err : "out of memory");
        free(d);
        return NULL;
    }
    return d;
}

static void swc_point_free(rm_model *d) {
    rm_free(d);
    free(d);
}

/* The token times of a repetition's requests, from its per-request export (the same
 * order as results.json's columns): tok[i] malloc'd, NULL where absent. */
static void swc_tokens(const char *res, int v, int rep, sw_req *r, int m) {
    char path[PATH_MAX + 96], *line = NULL;
    size_t cap = 0;
    snprintf(path, sizeof(path), "%s/timelines/v%d-r%d-p0-requests.jsonl", res, v, rep);
    FILE *f = fopen(path, "r");
    for (int i = 0; f && i < m && getline(&line, &cap, f) > 0; i++) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "token_ms"), *x;
        int n = cJSON_GetArraySize(t), k = 0;
        double *d = n > 0 ? malloc((size_t)n * sizeof(double)) : NULL;
        if (d) {
            cJSON_ArrayForEach(x, t) d[k++] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
            r[i].tok_ms = d;
            r[i].n_tok = n;
        }
        cJSON_Delete(j);
    }
    free(line);
    if (f) fclose(f);
}

/* The counted repetitions of variant v in a point's results (folder res), evaluated.
 * Returns their count. */
static int swc_eval(const swc *c, const char *res, const rm_model *doc, int v, sw_point *pts, int max) {
    int n = 0;
    for (int ri = 0; ri < doc->n_runs && n < max; ri++) {
        const rm_run *run = &doc->runs[ri];
        if (run->variant != v || !run->counted || run->nproc < 1) continue;
        const rm_cols *rq = &run->procs[0].serve_req;
        const rm_col *ar = rm_col_of(rq, "arrival_ms"), *fi = rm_col_of(rq, "first_ms");
        const rm_col *en = rm_col_of(rq, "end_ms"), *no = rm_col_of(rq, "output_tokens");
        int m = ar ? ar->n : 0;
        if (m < 1 || !fi || !en || !no || fi->n != m || en->n != m || no->n != m) continue;
        sw_req *r = malloc((size_t)m * sizeof(*r));
        if (!r) continue;
        for (int i = 0; i < m; i++)
            r[i] = (sw_req){.arrival_ms = ar->v[i], .first_ms = fi->v[i], .end_ms = en->v[i], .n_out = (int)no->v[i]};
        swc_tokens(res, v, run->rep, r, m);
        if (!sw_eval(r, m, &c->rules, &pts[n])) n++;
        for (int i = 0; i < m; i++) free((void *)r[i].tok_ms);
        free(r);
    }
    return n;
}

/* The mean and its 95% interval of field f over the points, into buf as "M [LO, HI]". */
static st_summary swc_sum(const sw_point *p, int n, size_t off) {
    double x[256];
    int k = 0;
    for (int i = 0; i < n && k < 256; i++) {
        double v = *(const double *)((const char *)&p[i] + off);
        if (!isnan(v)) x[k++] = v;
    }
    st_summary s = {0};
    if (!k || st_summarize(x, k, &s, NULL)) s.mean = s.ci_lo = s.ci_hi = s.median = NAN;
    return s;
}

/* A label for gnuplot's strings: scenario text is anyone's, keep it plain. */
static void swc_plain(char *dst, size_t len, const char *src) {
    size_t i = 0;
    for (; src && src[i] && i + 1 < len; i++) {
        char ch = src[i];
        dst[i] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr(" -_.:=/+", ch) ? ch : '_';
    }
    dst[i] = 0;
}

#define F(name) offsetof(sw_point, name)

/* Every variant at one rate of the list: a row each in the table, sweep.csv and sweep.dat. */
static int swc_rate(swc *c, double rate) {
    char tag[64];
    snprintf(tag, sizeof(tag), "%s%g", c->conc ? "c" : "r", rate);
    char res[PATH_MAX + 96];
    rm_model *doc = swc_point(c, rate, c->reps, tag, res);
    if (!doc) return -1;
    if (!c->rate_lo || rate < c->rate_lo) c->rate_lo = rate;
    if (rate > c->rate_hi) c->rate_hi = rate;
    /* the selected variants: those with a summary */
    for (int vi = 0; vi < doc->n; vi++) {
        int v = doc->v[vi].variant;
        if (v < 0 || v >= SWC_MAX_VARIANTS) continue;
        if (v >= c->n_variants) c->n_variants = v + 1;
        swc_plain(c->label[v], sizeof(c->label[v]), doc->v[vi].label);
        sw_point pts[256];
        int n = swc_eval(c, res, doc, v, pts, 256), bad = 0;
        const char *why = "";
        for (int i = 0; i < n; i++)
            if (!pts[i].valid) {
                if (!bad) why = pts[i].why;
                bad++;
            }
        st_summary g = swc_sum(pts, n, F(goodput)), rs = swc_sum(pts, n, F(req_s)), ot = swc_sum(pts, n, F(out_tok_s));
        st_summary t50 = swc_sum(pts, n, F(ttft_p50)), t99 = swc_sum(pts, n, F(ttft_p99));
        st_summary p50 = swc_sum(pts, n, F(tpot_p50)), p99 = swc_sum(pts, n, F(tpot_p99));
        st_summary i50 = swc_sum(pts, n, F(itl_p50)), i99 = swc_sum(pts, n, F(itl_p99));
        const char *verdict = n && !bad ? "VALID" : "INVALID";
        printf("%8g  %-16s %3d  %7.3f  %8.1f  %9.1f [%.1f, %.1f]  %9.1f  %7.1f [%.1f, %.1f]  %7.1f  %7.1f  %5.1f [%.1f, %.1f]  %s%s%s\n",
               rate, c->label[v], n, rs.mean, ot.mean, t50.mean, t50.ci_lo, t50.ci_hi, t99.mean, p50.mean, p50.ci_lo, p50.ci_hi,
               p99.mean, i99.mean, 100 * g.mean, 100 * g.ci_lo, 100 * g.ci_hi, verdict, bad ? ": " : "", bad ? why : (n ? "" : ": no repetition"));
        fprintf(c->csv, "%g,%s,%d,%d,%g,%g,%g,%g,%g,%g,%g,%g,%g,%g,%g,%g,%g,%g,%g,%s,\"%s\",%g,%g,%g,%g\n", rate, c->label[v], n, n - bad,
                rs.mean, ot.mean, t50.mean, t50.ci_lo, t50.ci_hi, t99.mean, t99.ci_lo, t99.ci_hi, p50.mean, p99.mean, 100 * g.mean,
                100 * g.ci_lo, 100 * g.ci_hi, c->rules.ttft_ms, c->rules.tpot_ms, verdict, why, i50.mean, i99.mean, i99.ci_lo, i99.ci_hi);
        if (!c->dat[v]) {
            char p[PATH_MAX + 64];
            snprintf(p, sizeof(p), "%s/%s-v%d.dat", c->out, c->prefix, v);
            c->dat[v] = fopen(p, "w");
        }
        if (c->dat[v]) fprintf(c->dat[v], "%g %g %g %g %g %g %g %g %g %d\n", rate, t50.mean, t99.mean, p50.mean, p99.mean, 100 * g.mean,
                               100 * g.ci_lo, 100 * g.ci_hi, i99.mean, n && !bad);
    }
    swc_point_free(doc);
    fflush(stdout);
    return 0;
}

/* ---- the knee: one variant, a bench run per repetition ---- */

static int swc_measure(void *user, double rate, int rep, double *goodput, int *valid) {
    swc *c = user;
    char tag[64];
    char name[40];
    swc_plain(name, sizeof(name), c->only ? c->only : "all");
    for (char *q = name; *q; q++)
        if (*q == '/' || *q == ' ' || *q == ',') *q = '_';
    snprintf(tag, sizeof(tag), "knee-%s-r%g-k%d", name, rate, rep);
    char res[PATH_MAX + 96];
    rm_model *doc = swc_point(c, rate, 1, tag, res);
    if (!doc) return -1;
    int v = doc->n ? doc->v[doc->n - 1].variant : -1; /* the one selected */
    sw_point p;
    int n = v >= 0 ? swc_eval(c, res, doc, v, &p, 1) : 0;
    swc_point_free(doc);
    if (n != 1) {
        fprintf(stderr, "bench sweep: the point at %g requests/s has no counted repetition\n", rate);
        return -1;
    }
    *goodput = p.goodput;
    *valid = p.valid;
    fprintf(stderr, "bench sweep: %g requests/s, repetition %d: goodput %.1f%%, %s%s%s\n", rate, rep + 1, 100 * p.goodput,
            p.valid ? "VALID" : "INVALID", p.valid ? "" : ": ", p.why);
    return 0;
}

static int swc_knee(swc *c, const char *label, FILE *f, double lo, double hi) {
    const tf_traffic *t = c->tf;
    sw_search q = {.lo = lo, .hi = hi, .target = t->target_pct / 100, .reps = c->reps, .max_reps = t->knee_max_reps > c->reps ? t->knee_max_reps : c->reps,
                   .resolution = t->knee_resolution, .max_points = t->knee_points};
    sw_knee_result k;
    char err[512];
    if (sw_knee(&q, swc_measure, c, &k, err, sizeof(err))) {
        fprintf(stderr, "bench sweep: %s\n", err);
        return -1;
    }
    printf("\nknee search for %s, goodput target %g%%:\n%8s  %4s  %7s  %-22s  %s\n", label, t->target_pct, "rate/s", "reps", "invalid",
           "goodput % [95% CI]", "verdict");
    for (int i = 0; i < k.n; i++) {
        const sw_knee_point *x = &k.p[i];
        printf("%8g  %4d  %7d  %5.1f [%.1f, %.1f]  %s\n", x->rate, x->reps, x->invalid, 100 * x->mean, 100 * x->ci_lo, 100 * x->ci_hi,
               sw_verdict_name(x->verdict));
        if (f) fprintf(f, "%s,%g,%d,%d,%g,%g,%g,%s\n", label, x->rate, x->reps, x->invalid, 100 * x->mean, 100 * x->ci_lo,
                       100 * x->ci_hi, sw_verdict_name(x->verdict));
    }
    if (f) fprintf(f, "%s,knee,%g,%d,%d,,,\n", label, k.knee, k.bracketed, k.unresolved);
    if (!k.knee) printf("knee: below %g requests/s (the lowest rate misses the target%s)\n", lo, k.unresolved ? " or cannot be told from it" : "");
    else if (!k.bracketed) printf("knee: at least %g requests/s%s\n", k.knee, k.unresolved ? " (the highest rate cannot be told from the target)" : " (above the range)");
    else printf("knee: %g requests/s%s\n", k.knee, k.unresolved ? " (stopped where goodput cannot be told from the target)" : "");
    return 0;
}

/* ---- the figure ---- */

static void swc_figure(swc *c) {
    int any = 0;
    for (int v = 0; v < c->n_variants; v++)
        if (c->dat[v]) {
            fclose(c->dat[v]);
            c->dat[v] = NULL;
            any = 1;
        }
    if (!any) return;
    char gp[PATH_MAX + 32];
    snprintf(gp, sizeof(gp), "%s/%s.gp", c->out, c->prefix);
    FILE *f = fopen(gp, "w");
    if (!f) return;
    fprintf(f, "# bench sweep: latency percentiles and goodput against the offered load, per variant\n"
               "set terminal svg size 900,800 dynamic\nset output '%s/%s.svg'\nset multiplot layout 2,1\n"
               "set key outside right\nset grid\nset xlabel '%s'\nset ylabel 'ms'\nset logscale y\n%s"
               "set title 'TTFT p50 (solid), p99 (dashed); TPOT p99 (dotted); ITL p99 (dash-dot)'\nplot ", c->out, c->prefix,
            c->conc ? "concurrency (requests in flight, closed loop)" : "offered rate (requests/s)",
            /* rates a sweep doubles read best on a log axis */
            c->rate_lo > 0 && c->rate_hi >= 8 * c->rate_lo ? "set logscale x 2\n" : "");
    const char *sep = "";
    for (int v = 0; v < c->n_variants; v++) {
        if (!c->label[v][0]) continue;
        fprintf(f, "%s'%s/%s-v%d.dat' using 1:2 with linespoints lc %d dt 1 title '%s TTFT p50', "
                   "'' using 1:3 with linespoints lc %d dt 2 title '%s TTFT p99', '' using 1:5 with linespoints lc %d dt 3 title '%s TPOT p99', '' using 1:9 with linespoints lc %d dt 4 title '%s ITL p99'",
                sep, c->out, c->prefix, v, v + 1, c->label[v], v + 1, c->label[v], v + 1, c->label[v], v + 1, c->label[v]);
        sep = ", ";
    }
    fprintf(f, "\nunset logscale y\nset ylabel 'goodput (%%)'\nset yrange [0:105]\nset title 'goodput, 95%% interval over the repetitions; "
               "target %g%%'\n"
               /* drawn thick, dark and labelled where it meets the axis: a thin gray dashed
                * line read as one more grid line (issue 40) */
               "set label 1 'target %g%%' at graph 0.01, first %g offset 0,0.6 tc rgb '#8b0000' front\n"
               "plot %g with lines lc rgb '#8b0000' lw 2.5 dt (10,5) title 'goodput target'",
            c->tf->target_pct, c->tf->target_pct, c->tf->target_pct, c->tf->target_pct);
    for (int v = 0; v < c->n_variants; v++)
        if (c->label[v][0])
            fprintf(f, ", '%s/%s-v%d.dat' using 1:6:7:8 with yerrorlines lc %d title '%s'", c->out, c->prefix, v, v + 1, c->label[v]);
    /* an INVALID point (a repetition broke a rule: too few requests, a failure, ...) is
     * ringed, so that no one reads its goodput as a measurement */
    const char *ring = "title 'INVALID'";
    for (int v = 0; v < c->n_variants; v++)
        if (c->label[v][0]) {
            fprintf(f, ", '%s/%s-v%d.dat' using 1:($10 > 0 ? 1/0 : $6) with points pt 6 ps 2.5 lc rgb 'red' %s", c->out, c->prefix, v,
                    ring);
            ring = "notitle";
        }
    fprintf(f, "\nunset multiplot\n");
    fclose(f);
    const char *g = getenv("BENCH_GNUPLOT");
    char *argv[] = {(char *)(g && *g ? g : "gnuplot"), gp, NULL};
    char log[PATH_MAX + 32], err[512];
    snprintf(log, sizeof(log), "%s/gnuplot.log", c->out);
    if (sp_run(argv, "gnuplot", log, 60, NULL, err, sizeof(err)))
        fprintf(stderr, "bench sweep: no figure (%s); the script is %s\n", err, gp);
    else
        fprintf(stderr, "bench sweep: figure %s/%s.svg\n", c->out, c->prefix);
}

/* One table: every variant at each point x[0 .. n) (rates, or concurrency caps with conc),
 * into <prefix>.csv, its figure <prefix>.svg. Returns 0 or -1. */
static int swc_table(swc *c, const double *x, int n, int conc) {
    c->conc = conc;
    c->prefix = conc ? "sweep-concurrency" : "sweep";
    c->n_variants = 0;
    c->rate_lo = c->rate_hi = 0;
    memset(c->label, 0, sizeof(c->label));
    char csv[PATH_MAX + 64];
    snprintf(csv, sizeof(csv), "%s/%s.csv", c->out, c->prefix);
    if (!(c->csv = fopen(csv, "w"))) {
        fprintf(stderr, "bench sweep: %s: %s\n", csv, strerror(errno));
        return -1;
    }
    fprintf(c->csv, "%s,variant,repetitions,valid,req_s,out_tok_s,ttft_p50_ms,ttft_p50_ci_lo,ttft_p50_ci_hi,ttft_p99_ms,ttft_p99_ci_lo,"
                    "ttft_p99_ci_hi,tpot_p50_ms,tpot_p99_ms,goodput_pct,goodput_ci_lo_pct,goodput_ci_hi_pct,slo_ttft_ms,slo_tpot_ms,verdict,why,"
                    "itl_p50_ms,itl_p99_ms,itl_p99_ci_lo,itl_p99_ci_hi\n", conc ? "concurrency" : "rate_rps");
    printf("%s%8s  %-16s %3s  %7s  %8s  %-24s  %9s  %-22s  %7s  %7s  %-18s  %s\n", conc ? "\nclosed loop:\n" : "", conc ? "in flight" : "rate/s",
           "variant", "n", "req/s", "out tok/s", "TTFT p50 ms [95% CI]", "TTFT p99", "TPOT p50 ms [95% CI]", "TPOT p99", "ITL p99",
           "goodput % [95% CI]", "verdict");
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = swc_rate(c, x[i]);
    fclose(c->csv);
    c->csv = NULL;
    swc_figure(c);
    return rc;
}

/* --knee LO:HI, each a rate as the scenario's knee.lo and knee.hi are; 0, or -1 said. */
static int swc_knee_arg(const char *arg, double *lo, double *hi) {
    double v[2];
    int n = 0;
    char text[128], err[256];
    snprintf(text, sizeof(text), "%s", arg);
    char *colon = strchr(text, ':');
    if (!colon || strchr(colon + 1, ':') || strchr(text, ',')) {
        fprintf(stderr, "bench sweep: --knee %s: expected LO:HI, %g <= LO < HI <= %g (requests/s)\n", arg, AR_MIN_RATE, TF_MAX_SWEEP_RATE);
        return -1;
    }
    *colon = ',';
    if (tf_points_parse(text, 0, v, &n, err, sizeof(err))) {     /* one colon, no comma: two entries */
        fprintf(stderr, "bench sweep: --knee %s: %s (LO:HI, LO < HI)\n", arg, err);
        return -1;
    }
    *lo = v[0];
    *hi = v[1];
    return 0;
}

int cmd_sweep(int argc, char **argv) {
    static const char *const known[] = {"--out", "--rates", "--concurrency", "--knee", "--repeat", "--only", "--allow-read",
                                        "--allow-launch", "--help", NULL};
    swc c = {0};
    const char *out = NULL, *rates = NULL, *knee = NULL, *conc = NULL;
    int repeat = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            swc_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--out") && v) out = argv[++i];
        else if (!strcmp(a, "--rates") && v) rates = argv[++i];
        else if (!strcmp(a, "--knee") && v) knee = argv[++i];
        else if (!strcmp(a, "--concurrency") && v) conc = argv[++i];
        else if (!strcmp(a, "--repeat") && v) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 256) {
                fprintf(stderr, "bench sweep: --repeat %s: expected 1 .. 256\n", argv[i]);
                return CLI_EXIT_USAGE;
            }
            repeat = (int)n;
        } else if (!strcmp(a, "--only") && v) c.only = argv[++i];
        else if (!strcmp(a, "--allow-read") && v && c.n_allow < 16) {
            if (cli_allow_read("sweep", argv[++i])) return CLI_EXIT_USAGE;
            c.allow[c.n_allow++] = argv[i];
        } else if (!strcmp(a, "--allow-launch")) c.allow_launch = 1;
        else if (a[0] != '-' && !c.file) c.file = a;
        else return cli_bad_arg(stderr, "sweep", a, known);
    }
    if (!c.file) {
        swc_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    cli_allow_model_cache();
    sc_errors errs = {0};
    if (sc_load(c.file, NULL, &c.s, &errs)) {
        for (int i = 0; i < errs.n; i++) fprintf(stderr, "%s\n", errs.v[i]);
        fprintf(stderr, "bench sweep: %d error%s in %s; nothing was run\n", errs.n, errs.n == 1 ? "" : "s", c.file);
        sc_errors_free(&errs);
        return 1;
    }
    int rc = 1;
    const sc_requests *rq = c.s->requests;
    c.tf = rq ? rq->traffic : NULL;
    if (!c.tf || !c.tf->has_sweep) {
        fprintf(stderr, "%s: .workload.requests.sweep: required by bench sweep: {\"rates\": [R, ...]} or {\"knee\": {\"lo\": R, \"hi\": R}}, "
                        "with \"targets\" (docs/serving.md)\n", c.file);
        goto out;
    }
    /* the command line's points: the scenario's bounds and messages (tf_points_parse) */
    double r[TF_MAX_RATES];
    int nr = c.tf->n_rates;
    memcpy(r, c.tf->rates, sizeof(r));
    char perr[256];
    if (rates && tf_points_parse(rates, 0, r, &nr, perr, sizeof(perr))) {
        fprintf(stderr, "bench sweep: --rates: %s (ascending rates, comma-separated)\n", perr);
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    double cc[TF_MAX_RATES];
    int nc = c.tf->n_conc;
    for (int i = 0; i < nc; i++) cc[i] = c.tf->conc[i];
    if (conc && tf_points_parse(conc, 1, cc, &nc, perr, sizeof(perr))) {
        fprintf(stderr, "bench sweep: --concurrency: %s (ascending caps, comma-separated)\n", perr);
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    double klo = c.tf->knee_lo, khi = c.tf->knee_hi;
    if (knee && swc_knee_arg(knee, &klo, &khi)) {
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    if (c.only) {
        char err[512];
        if (sc_select(c.s, c.only, err, sizeof(err))) {
            fprintf(stderr, "bench sweep: --only %s: %s\n", c.only, err);
            rc = CLI_EXIT_USAGE;
            goto out;
        }
    }
    /* every point is a bench run that would refuse the launch: refuse it once, before any */
    if ((rc = cli_launch_gate("sweep", c.s, c.allow_launch))) goto out;
    rc = 1;
    c.reps = repeat ? repeat : c.s->repetitions;
    c.rules = (sw_rules){.warmup = c.tf->warmup_requests, .min_requests = c.tf->min_requests, .min_seconds = c.tf->min_seconds,
                         .windows = c.tf->windows, .steady_tol = c.tf->steady_tolerance, .ttft_ms = rq->ttft_ms, .tpot_ms = rq->tpot_ms};
    ssize_t sl = readlink("/proc/self/exe", c.self, sizeof(c.self) - 1);
    if (sl <= 0) {
        fprintf(stderr, "bench sweep: /proc/self/exe: %s\n", strerror(errno));
        goto out;
    }
    c.self[sl] = 0;
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", c.file);
    char *slash = strrchr(tmp, '/');
    if (slash) *slash = 0;
    if (!realpath(slash ? tmp : ".", c.scdir)) snprintf(c.scdir, sizeof(c.scdir), ".");
    if (out) snprintf(c.out, sizeof(c.out), "%s", out);
    else {
        char stamp[32];
        time_t now = time(NULL);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", gmtime(&now));
        /* where bench run puts its folders, named as they are: time, then the commit */
        char root[PATH_MAX], sha[64];
        const char *why;
        loc_results_root(root, sizeof(root), &why);
        loc_commit_short(sha, sizeof(sha));
        if (snprintf(c.out, sizeof(c.out), "%s/%s-sweep/%s-%s", root, c.s->name, stamp, sha) >= (int)sizeof(c.out)) {
            fprintf(stderr, "bench sweep: results folder name too long under %s\n", root);
            goto out;
        }
    }
    char abs[PATH_MAX];
    if (ut_mkdirs(c.out) || !realpath(c.out, abs)) {
        fprintf(stderr, "bench sweep: %s: %s\n", c.out, strerror(errno));
        goto out;
    }
    snprintf(c.out, sizeof(c.out), "%s", abs);
    rc = 0;
    if (nr) rc = swc_table(&c, r, nr, 0) ? 1 : 0;
    if (!rc && nc) rc = swc_table(&c, cc, nc, 1) ? 1 : 0;
    c.conc = 0;
    if (!rc && klo > 0) {
        /* each variant alone: its own points, its own knee */
        char kp[PATH_MAX + 32];
        snprintf(kp, sizeof(kp), "%s/knee.csv", c.out);
        FILE *kf = fopen(kp, "w");
        if (kf) fprintf(kf, "variant,rate_rps,repetitions,invalid,goodput_pct,goodput_ci_lo_pct,goodput_ci_hi_pct,verdict\n");
        for (int i = 0; i < c.s->n_variants && !rc; i++) {
            if (!c.s->variants[i].selected) continue;
            c.only = c.s->variants[i].key;
            rc = swc_knee(&c, c.s->variants[i].key, kf, klo, khi) ? 1 : 0;
        }
        if (kf) fclose(kf);
    }
    fprintf(stderr, "bench sweep: results in %s\n", c.out);
out:
    for (int v = 0; v < SWC_MAX_VARIANTS; v++)
        if (c.dat[v]) fclose(c.dat[v]);
    sc_free(c.s);
    return rc;
}
