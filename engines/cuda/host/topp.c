#include "topp.h"

#include <limits.h>
#include <math.h>
#include <string.h>

static uint32_t level(float p) { uint32_t b; memcpy(&b, &p, 4); return b; }
static float value(uint32_t b) { float p; memcpy(&p, &b, 4); return p; }

/* The kernel's reductions, one pass over the vocabulary each. */
static float mass_ge(const float *p, int n, uint32_t lo, uint32_t at_least) {
    float s = 0;
    for (int i = 0; i < n; i++) {
        uint32_t b = level(p[i]);
        if (b >= lo && b >= at_least) s += p[i];
    }
    return s;
}

static int count_eq(const float *p, int n, uint32_t l) {
    int c = 0;
    for (int i = 0; i < n; i++) c += level(p[i]) == l;
    return c;
}

/* The index of the j-th (1-based) element at level l, in index order. */
static int nth_eq(const float *p, int n, uint32_t l, int j) {
    for (int i = 0; i < n; i++)
        if (level(p[i]) == l && --j == 0) return i;
    return n - 1;
}

static int argmax(const float *p, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (p[i] > p[best]) best = i;
    return best;
}

/* The fewest k in 1..cap with base + k*v > t, adding v one at a time as sampler.c adds. */
static int fewest(float base, float v, float t, int cap, float *sum) {
    int k = 0;
    float s = base;
    while (k < cap && !(s > t)) {
        s += v;
        k++;
    }
    if (k == 0) { s += v; k = 1; } /* the level holds at least one element past base */
    *sum = s;
    return k;
}

int topp_ref_sample(const float *p, int n, float topp, float coin) {
    if (n <= 0) return 0;
    if (!(topp < 1)) { /* the whole distribution, in index order */
        float cdf = 0;
        for (int i = 0; i < n; i++) {
            cdf += p[i];
            if (coin < cdf) return i;
        }
        return n - 1;
    }
    uint32_t lo_level = level(n > 1 ? (1.0f - topp) / (float)(n - 1) : 0.0f);
    float total = mass_ge(p, n, lo_level, 0);
    if (!(total > 0) || !isfinite(total)) return argmax(p, n);

    /* the nucleus: every candidate above level P, and the first k_lim at P */
    uint32_t P;
    int k_lim;
    float cum;
    if (!(total > topp)) {
        P = lo_level;
        k_lim = INT_MAX;
        cum = total;
    } else {
        uint32_t lo = lo_level, hi = TOPP_LEVEL_ONE + 1;
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (mass_ge(p, n, lo_level, mid) > topp) lo = mid;
            else hi = mid;
        }
        P = lo;
        k_lim = fewest(mass_ge(p, n, lo_level, P + 1), value(P), topp, count_eq(p, n, P), &cum);
    }

    float r = coin * cum;
    /* the draw: the largest level Q >= P whose mass, the nucleus's share at P, exceeds r */
    uint32_t lo = P, hi = TOPP_LEVEL_ONE + 1;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (mass_ge(p, n, lo_level, mid) > r) lo = mid;
        else hi = mid;
    }
    uint32_t Q = lo;
    int at_q = count_eq(p, n, Q);
    int cap = Q == P && k_lim < at_q ? k_lim : at_q;
    if (cap < 1) return argmax(p, n); /* P below every candidate: cannot happen with total > 0 */
    float s;
    int j = fewest(mass_ge(p, n, lo_level, Q + 1), value(Q), r, cap, &s);
    return nth_eq(p, n, Q, j);
}
