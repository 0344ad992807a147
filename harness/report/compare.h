/* Comparing two runs of one scenario: what changed, whether beyond noise, and
 * whether it is a regression.
 *
 * Every metric falls in one class, which decides the test. The class, the better direction
 * and the tolerance are those the metric declared when it was made (harness/report/mclass.h,
 * kept in results.json); a file written before metrics declared them gets the classes its
 * names were given then (mc_legacy: cmp_classify, cmp_direction):
 *   CMP_TIMED  times and rates (ms, tok/s, ns/op): noisy. Two-sided Mann-Whitney U
 *              test on the raw values of the counted repetitions, exact distribution,
 *              its p adjusted by Holm's step-down over every timed metric of the
 *              comparison (m of them), so that the chance of any false alarm in the
 *              whole comparison is at most alpha = 0.05 (one metric alone: m = 1).
 *              When even the most extreme ranking could not reach alpha / m (below
 *              4 + 4 repetitions for m = 1, 8 + 8 for m = 100) the verdict is "too few
 *              repetitions" and the metric counts as not judged, unless the change
 *              is far beyond any plausible noise: more than CMP_FAR_CHANGE with the
 *              two runs' ranges apart (beyond both runs' whole spread), at least 2 + 2
 *              repetitions. That is reported as a regression (or improvement) marked
 *              "far" (row.far), since no test backs it.
 *              Two separate runs are not exchangeable: drift between them (clock,
 *              heat, other load, page cache) moves times alike, and no test on them
 *              can tell it from a change. So a change counts only above its noise
 *              floor: the larger of --threshold and the two runs' own spreads added
 *              (each its interquartile range over its median: the medians must move
 *              further than both runs' middle halves are wide); the output says so. A
 *              regression
 *              is beyond noise (adjusted p < alpha) AND worse than the floor.
 *   CMP_FAULTS page faults: deterministic up to the process's own start-up (the
 *              dynamic loader, libc); tolerance 5% + 16 faults.
 *   CMP_MEMORY RSS/PSS by region and total (MiB): deterministic up to a few pages of
 *              libc and stack; tolerance 2% + 0.25 MiB.
 *   CMP_EXACT  the modules' counters (bytes, allocation counts, grow events) and
 *              instruction counts: compared exactly (tolerance 0.5% for instructions).
 *              A module's counter in a clock's unit (ms, ns, s, GB/s, tokens/s, fraction)
 *              is TIMED instead, and one it declares a memory reading (the device's
 *              mod.device.gpu_mem_*) is MEMORY (engines/abi/module.h).
 *   CMP_INFO   figures that depend on the rest of the machine: context switches, page
 *              cache residency, and PSS (a shared page's cost is split among every
 *              process that maps it, other benches and shells included): shown, never
 *              a verdict.
 * The deterministic classes (FAULTS, MEMORY, EXACT) compare medians; any change
 * beyond the tolerance in the worse direction is a regression.
 *
 * Ratios inside one run (cmp_ratio): METRIC of the variants matching NUM over the
 * variants matching DEN with the same other axes, in A and in B; a regression when
 * B's ratio leaves [A / factor, A x factor], that band first widened by the tolerance
 * of the metric's class on A's numerator and denominator (a ratio of two small fault
 * counts is no steadier than the counts).
 */
#ifndef BENCH_COMPARE_H
#define BENCH_COMPARE_H

#include <stdio.h>

#include "harness/report/mclass.h"
#include "harness/report/rmodel.h"

/* A change this large (relative) with non-overlapping ranges is flagged without a test. */
#define CMP_FAR_CHANGE 0.5

typedef enum cmp_class { CMP_TIMED, CMP_FAULTS, CMP_MEMORY, CMP_EXACT, CMP_INFO } cmp_class;

typedef enum cmp_verdict {
    CMP_SAME,           /* deterministic, within tolerance */
    CMP_NOISE,          /* timed, not beyond noise */
    CMP_FEW,            /* timed, too few repetitions to decide */
    CMP_WITHIN,         /* beyond noise (or tolerance) but smaller than the threshold */
    CMP_IMPROVED,
    CMP_REGRESSED,
    CMP_CHANGED,        /* deterministic, no better/worse direction known */
    CMP_SHOWN,          /* CMP_INFO */
    CMP_MISSING,        /* in one run only */
} cmp_verdict;

typedef struct cmp_opts {
    double threshold;           /* relative, 0.05 = 5% */
    int deterministic_only;     /* timed metrics are shown but decide nothing (the CI gate) */
} cmp_opts;

typedef struct cmp_row {
    char variant[160];
    char metric[256];
    char unit[16];
    cmp_class cls;
    int na, nb;
    double a, b;                /* medians; NAN when absent */
    double change;              /* (b - a) / |a|; NAN when a == 0 and b != 0 */
    double p;                   /* Mann-Whitney two-sided p, NAN when not tested */
    double p_adj;               /* p adjusted by Holm over the comparison's timed metrics; NAN when not tested */
    double floor;               /* timed: the relative change a verdict needs (noise floor); NAN otherwise */
    int worse;                  /* > 0 B is worse, < 0 better, 0 no direction or equal */
    int apart;                  /* the two runs' ranges do not overlap */
    char test[64];              /* "U p=0.029", "too few repetitions", "tol 5%+16" */
    cmp_verdict verdict;
    int gated;                  /* counts towards the exit status */
    int far;                    /* verdict from CMP_FAR_CHANGE, not from a test */
} cmp_row;

typedef struct cmp_ratio {
    char metric[120];
    char num[64], den[64];      /* axis selectors "kv=dynamic" */
    double factor;              /* allowed factor of change, > 1 */
} cmp_ratio;

typedef struct cmp_report {
    int n, cap;
    cmp_row *rows;
    int regressions;
    /* gated metrics that could not be judged: a timed metric with too few repetitions
     * (and no far change), or one present in only one run */
    int not_judged, not_judged_few, not_judged_missing;
    int few_na, few_nb;         /* the repetitions of the first too-few row, for the message */
    int timed_m;                /* the timed metrics tested together (Holm's m) */
    int few_need;               /* repetitions a side that could reach alpha / timed_m */
    char a_name[4200], b_name[4200];
    int rounds;                 /* an A/B comparison (cmp_paired): its rounds; 0 for two separate runs */
} cmp_report;

/* The class and direction of a metric of a file that declares none (mc_legacy). */
cmp_class cmp_classify(const char *metric, const char *unit);
const char *cmp_class_name(cmp_class c);
const char *cmp_verdict_name(cmp_verdict v);
/* +1 when larger is better (rates), -1 when smaller is better, 0 unknown. */
int cmp_direction(const char *metric, const char *unit);
/* What a metric is judged by: B's declaration, else A's, else mc_legacy (a or b may be NULL). */
mc_decl cmp_decl(const rm_metric *a, const rm_metric *b, const char *metric, const char *unit);

/* Two-sided Mann-Whitney U p-value (exact for n1 + n2 <= 40, normal approximation
 * with tie correction above). *decidable = 0 when the smallest p the sizes allow is
 * above alpha. Returns NAN when a side is empty. */
double cmp_mann_whitney(const double *a, int na, const double *b, int nb, double alpha, int *decidable);

/* One metric of one variant: fills r (variant/metric names left to the caller). */
void cmp_metric(const rm_metric *a, const rm_metric *b, const char *metric, const char *unit, const cmp_opts *o,
                cmp_row *r);

/* Compares every variant (matched by key) and metric of b against a. */
int cmp_docs(const rr_doc *a, const rr_doc *b, const cmp_opts *o, cmp_report *out, char *err, size_t errlen);
/* An interleaved A/B comparison (scripts/ab.sh): a[k] and b[k] are round k's runs of the two
 * builds, made back to back (in ABBA order), n rounds. Deterministic figures are judged as
 * by cmp_docs on all rounds together; a timed metric on its paired differences, round by
 * round (B's median less A's), by the exact Wilcoxon signed-rank test, Holm-adjusted over
 * the timed metrics, and a change must exceed --threshold: drift slower than a round
 * cancels in each pair, so no noise floor beyond that is needed. */
int cmp_paired(const rr_doc *a, const rr_doc *b, int n, const cmp_opts *o, cmp_report *out, char *err, size_t errlen);
/* Two-sided exact Wilcoxon signed-rank p of n differences (zeros dropped, ties at mid-rank);
 * NAN when none is left. *pairs: the differences that counted. */
double cmp_wilcoxon(const double *d, int n, int *pairs);

/* "METRIC:NUM/DEN[:FACTOR]" -> r. */
int cmp_parse_ratio(const char *spec, cmp_ratio *r, char *err, size_t errlen);
/* Adds one row per matched pair of variants. Returns the number of pairs found. */
int cmp_ratios(const rr_doc *a, const rr_doc *b, const cmp_ratio *r, cmp_report *out);
void cmp_report_free(cmp_report *r);

/* bench compare's exit status: */
enum {
    CMP_EXIT_PASS = 0,          /* every gated metric judged, no regression */
    CMP_EXIT_REGRESSION = 1,    /* at least one regression (far changes included) */
    CMP_EXIT_USAGE = 2,         /* bad arguments, unreadable results */
    CMP_EXIT_NOT_JUDGED = 3,    /* no regression found, but some gated metrics could not be judged */
};
int cmp_exit_status(const cmp_report *r);

/* Holm's step-down adjustment of m p-values (NAN entries are left out of the family and
 * stay NAN): adj[i] = max over the j-th smallest p up to p[i] of min(1, (m - j + 1) p_(j)). */
void cmp_holm(const double *p, int n, double *adj);
/* The fewest repetitions a side whose most extreme ranking reaches p <= level (two-sided). */
int cmp_reps_needed(double level);
/* The repetitions a side that bench compare needs to test the times of a run like sum
 * against another like it: its timed metrics over all variants are one Holm family of m,
 * so cmp_reps_needed(0.05 / m), what the verdict "too few repetitions (need N+N)" says. */
int cmp_reps_to_compare(const rm_model *sum);

typedef enum cmp_format { CMP_FMT_TABLE, CMP_FMT_MARKDOWN, CMP_FMT_JSON } cmp_format;
/* Which rows: */
typedef enum cmp_show {
    CMP_SHOW_ALL,               /* --all: every row */
    CMP_SHOW_CHANGED,           /* the default: what changed, and what could not be judged */
    CMP_SHOW_BRIEF,             /* --brief: what changed (the CI gate) */
} cmp_show;
void cmp_print(FILE *f, const cmp_report *r, cmp_format fmt, cmp_show show, const cmp_opts *o);

#endif
