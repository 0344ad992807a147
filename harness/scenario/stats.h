/* Statistics across repetitions: the summary of one metric of one variant.
 *
 * ci_lo/ci_hi: a 95% percentile-bootstrap interval of the mean, from
 * ST_BOOTSTRAP_RESAMPLES resamples drawn with a fixed seed, so the same
 * numbers give the same interval on every run and machine.
 * Outliers: modified z-score |0.6745 (x - median) / MAD| > 3.5 (Iglewicz and
 * Hoaglin); when MAD is 0 the mean absolute deviation stands in (x 1.2533).
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stdint.h>

#define ST_BOOTSTRAP_RESAMPLES 2000
#define ST_BOOTSTRAP_SEED 0x5eed5eedull
#define ST_OUTLIER_Z 3.5

typedef struct st_summary {
    int n;
    double median, mean, stddev;    /* stddev: sample (n - 1); 0 when n < 2 */
    double min, max;
    double ci_lo, ci_hi;            /* 95% bootstrap CI of the mean; = mean when n < 2 */
    int n_outliers;
} st_summary;

/* Summarises x[0..n). outlier (may be NULL) receives n flags. Returns -1 when n < 1
 * or out of memory. x is not modified. */
int st_summarize(const double *x, int n, st_summary *out, int *outlier);

/* Quantile q in [0, 1] of sorted[0..n), linear interpolation between closest ranks. */
double st_quantile_sorted(const double *sorted, int n, double q);

/* Sorts x in place, ascending. */
void st_sort(double *x, int n);

/* splitmix64: the next draw of a seeded stream; small, and the same on every platform. */
uint64_t st_splitmix64(uint64_t *state);

#endif
