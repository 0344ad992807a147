/* Arrival processes: see arrival.h. */
#include "arrival.h"

#include <math.h>
#include <string.h>

#include "harness/scenario/stats.h"

static const char *const ar_names[AR_KIND_COUNT] = {"all", "poisson", "gamma", "constant", "ramp"};

int ar_kind_from_name(const char *name) {
    for (int i = 0; name && i < AR_KIND_COUNT; i++)
        if (!strcmp(name, ar_names[i])) return i;
    return -1;
}

const char *ar_kind_name(ar_kind k) { return k >= 0 && k < AR_KIND_COUNT ? ar_names[k] : "?"; }

/* (0, 1]: never 0, so that log() stays finite */
static double ar_unit(uint64_t *s) { return ((double)(st_splitmix64(s) >> 11) + 1.0) * 0x1.0p-53; }

static double ar_normal(uint64_t *s) {
    /* Box-Muller; the second value is thrown away to keep the stream's use simple */
    return sqrt(-2.0 * log(ar_unit(s))) * cos(2.0 * M_PI * ar_unit(s));
}

double ar_gamma(uint64_t *s, double k) {
    if (k < 1) {
        /* G(k) = G(k + 1) U^(1/k) (Marsaglia and Tsang, section 6) */
        double g = ar_gamma(s, k + 1);
        return g * pow(ar_unit(s), 1.0 / k);
    }
    double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = ar_normal(s);
            v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        double u = ar_unit(s);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

int ar_times(const ar_spec *a, int n, uint64_t seed, double *t) {
    if (a->kind != AR_ALL && !(a->rate > 0 && isfinite(a->rate))) return -1;
    if (a->kind == AR_GAMMA && !(a->burstiness > 0 && isfinite(a->burstiness))) return -1;
    if (a->kind == AR_RAMP && !(a->rate_end > 0 && isfinite(a->rate_end))) return -1;
    if (a->kind < 0 || a->kind >= AR_KIND_COUNT) return -1;
    uint64_t s = seed;
    double at = 0;
    for (int i = 0; i < n; i++) {
        double gap = 0;
        switch (a->kind) {
        case AR_POISSON: gap = -log(ar_unit(&s)) / a->rate; break;
        /* shape b, scale 1 / (rate b): mean 1 / rate */
        case AR_GAMMA: gap = ar_gamma(&s, a->burstiness) / (a->rate * a->burstiness); break;
        case AR_CONSTANT: gap = 1.0 / a->rate; break;
        case AR_RAMP: gap = 1.0 / (a->rate + (a->rate_end - a->rate) * (n > 1 ? (double)i / (n - 1) : 0)); break;
        default: break;
        }
        at += gap;
        if (!(at <= AR_MAX_SECONDS)) return -1;
        t[i] = at;
    }
    return 0;
}
