#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void st_sort(double *x, int n) {
    if (n > 1) qsort(x, (size_t)n, sizeof(*x), cmp_double);
}

double st_quantile_sorted(const double *s, int n, double q) {
    if (n <= 0) return NAN;
    if (q <= 0) return s[0];
    if (q >= 1) return s[n - 1];
    double pos = q * (n - 1);
    int i = (int)pos;
    double frac = pos - i;
    return i + 1 < n ? s[i] + frac * (s[i + 1] - s[i]) : s[i];
}

uint64_t st_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int st_summarize(const double *x, int n, st_summary *out, int *outlier) {
    memset(out, 0, sizeof(*out));
    if (n < 1) return -1;
    double *s = malloc((size_t)n * sizeof(*s));
    double *dev = malloc((size_t)n * sizeof(*dev));
    double *means = malloc(ST_BOOTSTRAP_RESAMPLES * sizeof(*means));
    if (!s || !dev || !means) {
        free(s); free(dev); free(means);
        return -1;
    }
    memcpy(s, x, (size_t)n * sizeof(*s));
    st_sort(s, n);
    out->n = n;
    out->min = s[0];
    out->max = s[n - 1];
    out->median = st_quantile_sorted(s, n, 0.5);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    out->mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - out->mean) * (x[i] - out->mean);
    out->stddev = n > 1 ? sqrt(ss / (n - 1)) : 0;

    out->ci_lo = out->ci_hi = out->mean;
    if (n > 1) {
        uint64_t st = ST_BOOTSTRAP_SEED;
        for (int r = 0; r < ST_BOOTSTRAP_RESAMPLES; r++) {
            double m = 0;
            for (int i = 0; i < n; i++) m += x[st_splitmix64(&st) % (uint64_t)n];
            means[r] = m / n;
        }
        st_sort(means, ST_BOOTSTRAP_RESAMPLES);
        out->ci_lo = st_quantile_sorted(means, ST_BOOTSTRAP_RESAMPLES, 0.025);
        out->ci_hi = st_quantile_sorted(means, ST_BOOTSTRAP_RESAMPLES, 0.975);
    }

    for (int i = 0; i < n; i++) dev[i] = fabs(x[i] - out->median);
    st_sort(dev, n);
    double mad = st_quantile_sorted(dev, n, 0.5), scale;
    if (mad > 0) {
        scale = mad / 0.6745;
    } else {
        double mean_ad = 0;
        for (int i = 0; i < n; i++) mean_ad += dev[i];
        scale = 1.2533 * mean_ad / n;
    }
    for (int i = 0; i < n; i++) {
        int o = scale > 0 && fabs(x[i] - out->median) / scale > ST_OUTLIER_Z;
        out->n_outliers += o;
        if (outlier) outlier[i] = o;
    }
    free(s);
    free(dev);
    free(means);
    return 0;
}
