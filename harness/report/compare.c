/* bench compare's engine: metric classes, the noise test, verdicts, output. */
#include "harness/report/compare.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/escape.h"
#include "harness/report/mclass.h"
#include "harness/scenario/stats.h"
#include "util/ut_vec.h"

#define CMP_ALPHA 0.05

/* ---- classes and directions: declared by each metric (harness/report/mclass.h) ---- */

static cmp_class cmp_of(mc_class c) {
    switch (c) {
    case MC_TIME: return CMP_TIMED;
    case MC_COUNT: return CMP_FAULTS;
    case MC_BYTES: return CMP_MEMORY;
    case MC_INFO: return CMP_INFO;
    default: return CMP_EXACT;
    }
}

cmp_class cmp_classify(const char *metric, const char *unit) { return cmp_of(mc_legacy(metric, unit).cls); }

const char *cmp_class_name(cmp_class c) {
    static const char *const n[] = {"timed", "faults", "memory", "exact", "info"};
    return c <= CMP_INFO ? n[c] : "?";
}

const char *cmp_verdict_name(cmp_verdict v) {
    static const char *const n[] = {"same", "noise", "NOT JUDGED", "within threshold", "improved",
                                    "REGRESSION", "changed", "-", "missing"};
    return v <= CMP_MISSING ? n[v] : "?";
}

int cmp_direction(const char *metric, const char *unit) { return mc_legacy(metric, unit).better; }

mc_decl cmp_decl(const rm_metric *a, const rm_metric *b, const char *metric, const char *unit) {
    /* B's declaration, the newer run's; A's; or, from files that declare nothing, the old rules */
    if (b && b->declared) return b->decl;
    if (a && a->declared) return a->decl;
    return mc_legacy(metric, unit);
}

/* ---- Mann-Whitney U ---- */

/* Number of orderings of n1 a's and n2 b's whose U (pairs a > b) is <= u, over
 * C(n1 + n2, n1); the no-ties null distribution. */
static double mw_cdf(int n1, int n2, double u) {
    int umax = n1 * n2;
    size_t w = (size_t)umax + 1;
    /* cnt[i][j][k]: orderings of i a's and j b's with U = k; doubles hold C(40, 20) exactly enough */
    double *cnt = calloc((size_t)(n1 + 1) * (size_t)(n2 + 1) * w, sizeof(double));
    if (!cnt) return NAN;
#define C(i, j, k) cnt[(((size_t)(i) * (size_t)(n2 + 1)) + (size_t)(j)) * w + (size_t)(k)]
    for (int i = 0; i <= n1; i++)
        for (int j = 0; j <= n2; j++) {
            if (!i || !j) {
                C(i, j, 0) = 1;
                continue;
            }
            for (int k = 0; k <= i * j; k++) {
                /* the largest element is an a (beating all j b's) or a b */
                double x = k >= j ? C(i - 1, j, k - j) : 0;
                C(i, j, k) = x + C(i, j - 1, k);
            }
        }
    double below = 0, total = 0;
    for (int k = 0; k <= umax; k++) {
        total += C(n1, n2, k);
        if (k <= u + 1e-9) below += C(n1, n2, k);
    }
#undef C
    free(cnt);
    return below / total;
}

double cmp_mann_whitney(const double *a, int na, const double *b, int nb, double alpha, int *decidable) {
    if (decidable) *decidable = 0;
    if (na < 1 || nb < 1) return NAN;
    /* the most extreme ordering has probability 2 / C(na + nb, na) two-sided */
    double comb = 1;
    for (int i = 1; i <= na; i++) comb = comb * (nb + i) / i;
    if (decidable) *decidable = 2.0 / comb <= alpha;
    /* U_a: pairs with a > b, ties counting one half */
    double ua = 0;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) ua += a[i] > b[j] ? 1 : a[i] == b[j] ? 0.5 : 0;
    double umin = fmin(ua, (double)na * nb - ua);
    double p;
    if (na + nb <= 40) {
        p = 2 * mw_cdf(na, nb, floor(umin));
    } else {
        /* normal approximation with the tie correction of the variance */
        int n = na + nb;
        double *all = malloc(sizeof(double) * (size_t)n);
        if (!all) return NAN;
        memcpy(all, a, sizeof(double) * (size_t)na);
        memcpy(all + na, b, sizeof(double) * (size_t)nb);
        st_sort(all, n);
        double ties = 0;
        for (int i = 0; i < n;) {
            int j = i;
            while (j < n && all[j] == all[i]) j++;
            double t = j - i;
            ties += t * t * t - t;
            i = j;
        }
        free(all);
        double mu = (double)na * nb / 2;
        double var = (double)na * nb / 12.0 * ((n + 1) - ties / ((double)n * (n - 1)));
        if (var <= 0) return 1;
        double z = (fabs(ua - mu) - 0.5) / sqrt(var);
        p = erfc(fmax(z, 0) / sqrt(2));
    }
    return p > 1 ? 1 : p;
}

/* ---- one metric ---- */

static double cmp_median(const rm_metric *s) {
    if (!s || s->n < 1) return NAN;
    double *x = malloc(sizeof(double) * (size_t)s->n);
    if (!x) return NAN;
    memcpy(x, s->v, sizeof(double) * (size_t)s->n);
    st_sort(x, s->n);
    double m = st_quantile_sorted(x, s->n, 0.5);
    free(x);
    return m;
}

static void cmp_range(const rm_metric *s, double *lo, double *hi) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < s->n; i++) *lo = fmin(*lo, s->v[i]), *hi = fmax(*hi, s->v[i]);
}

/* A run's own spread of one metric: its interquartile range over |median|; 0 below 2 values. */
static double cmp_spread(const rm_metric *s) {
    if (!s || s->n < 2) return 0;
    double *x = malloc(sizeof(double) * (size_t)s->n);
    if (!x) return 0;
    memcpy(x, s->v, sizeof(double) * (size_t)s->n);
    st_sort(x, s->n);
    double med = st_quantile_sorted(x, s->n, 0.5);
    double iqr = st_quantile_sorted(x, s->n, 0.75) - st_quantile_sorted(x, s->n, 0.25);
    free(x);
    return med != 0 && isfinite(iqr) ? iqr / fabs(med) : 0;
}

/* The smallest two-sided p the Mann-Whitney test can give na + nb repetitions. */
static double cmp_min_p(int na, int nb) {
    double comb = 1;
    for (int i = 1; i <= na; i++) comb = comb * (nb + i) / i;
    return 2.0 / comb;
}

int cmp_reps_needed(double level) {
    for (int n = 1; n < 64; n++)
        if (cmp_min_p(n, n) <= level) return n;
    return 64;
}

int cmp_reps_to_compare(const rm_model *sum) {
    int m = 0;
    for (int i = 0; i < sum->n; i++)
        for (int j = 0; j < sum->v[i].n; j++) {
            const rm_metric *x = &sum->v[i].m[j];
            m += x->n > 0 && cmp_of(cmp_decl(x, x, x->name, x->unit).cls) == CMP_TIMED;
        }
    return cmp_reps_needed(CMP_ALPHA / (m > 0 ? m : 1));
}

void cmp_holm(const double *p, int n, double *adj) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        adj[i] = NAN;
        m += isfinite(p[i]);
    }
    if (!m) return;
    int *ord = malloc(sizeof(int) * (size_t)m);
    if (!ord) {
        /* no room to sort: Bonferroni, which Holm never exceeds */
        for (int i = 0; i < n; i++)
            if (isfinite(p[i])) adj[i] = fmin(1, p[i] * m);
        return;
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(p[i])) ord[k++] = i;
    /* insertion sort by p, stable: m is a few hundred at most */
    for (int i = 1; i < m; i++) {
        int x = ord[i], j = i;
        while (j > 0 && p[ord[j - 1]] > p[x]) ord[j] = ord[j - 1], j--;
        ord[j] = x;
    }
    double run = 0;
    for (int j = 0; j < m; j++) {
        run = fmax(run, fmin(1, (double)(m - j) * p[ord[j]]));
        adj[ord[j]] = run;
    }
    free(ord);
}

/* The verdict of a timed row tested in a family of m (its p_adj already set): see compare.h. */
static void cmp_decide_timed(cmp_row *r, int m) {
    r->far = 0;
    int decidable = cmp_min_p(r->na, r->nb) <= CMP_ALPHA / m;
    if (!decidable) {
        /* No test can speak, but a change like 15 -> 34 ms with the ranges apart is
         * not noise on any machine this runs on; say so, marked as untested. One
         * repetition a side has no range, so it stays unjudged. */
        /* (the ranges apart already say the change exceeds both runs' whole spread) */
        if (r->na >= 2 && r->nb >= 2 && fabs(r->change) > CMP_FAR_CHANGE && r->apart && r->worse) {
            r->far = 1;
            r->verdict = r->worse > 0 ? CMP_REGRESSED : CMP_IMPROVED;
            snprintf(r->test, sizeof(r->test), "far: >%g%%, ranges apart, %d+%d reps", CMP_FAR_CHANGE * 100, r->na, r->nb);
            return;
        }
        int need = cmp_reps_needed(CMP_ALPHA / m);
        r->verdict = CMP_FEW;
        snprintf(r->test, sizeof(r->test), "too few repetitions (%d+%d, need %d+%d)", r->na, r->nb, need, need);
        return;
    }
    if (m > 1) snprintf(r->test, sizeof(r->test), "p=%.2g Holm %.2g, floor %.0f%%", r->p, r->p_adj, r->floor * 100);
    else snprintf(r->test, sizeof(r->test), "Mann-Whitney p=%.3g, floor %.0f%%", r->p, r->floor * 100);
    if (!(r->p_adj < CMP_ALPHA)) r->verdict = CMP_NOISE;
    else if (!(fabs(r->change) > r->floor)) r->verdict = CMP_WITHIN;
    else r->verdict = r->worse > 0 ? CMP_REGRESSED : r->worse < 0 ? CMP_IMPROVED : CMP_CHANGED;
}

void cmp_metric(const rm_metric *a, const rm_metric *b, const char *metric, const char *unit, const cmp_opts *o,
                cmp_row *r) {
    snprintf(r->metric, sizeof(r->metric), "%s", metric);
    snprintf(r->unit, sizeof(r->unit), "%s", unit);
    mc_decl d = cmp_decl(a, b, metric, unit);
    r->cls = cmp_of(d.cls);
    r->na = a ? a->n : 0;
    r->nb = b ? b->n : 0;
    r->a = cmp_median(a);
    r->b = cmp_median(b);
    r->p = r->p_adj = r->floor = NAN;
    r->test[0] = 0;
    r->gated = 0;
    r->far = 0;
    r->worse = 0;
    r->apart = 0;
    if (!r->na || !r->nb) {
        r->change = NAN;
        r->verdict = CMP_MISSING;
        snprintf(r->test, sizeof(r->test), "in %s only", r->na ? "A" : "B");
        return;
    }
    r->change = r->a != 0 ? (r->b - r->a) / fabs(r->a) : r->b == 0 ? 0 : NAN;
    int dir = d.better;
    int worse = r->b > r->a ? -dir : r->b < r->a ? dir : 0; /* > 0: B is worse */
    r->worse = worse;
    if (r->cls == CMP_INFO) {
        r->verdict = CMP_SHOWN;
        snprintf(r->test, sizeof(r->test), "not compared");
        return;
    }
    if (r->cls == CMP_TIMED) {
        r->p = cmp_mann_whitney(a->v, a->n, b->v, b->n, CMP_ALPHA, NULL);
        r->p_adj = r->p; /* one metric alone; cmp_docs adjusts over the comparison */
        r->gated = !o->deterministic_only;
        /* the noise floor: the medians must move further than both runs' spreads together */
        r->floor = fmax(o->threshold, cmp_spread(a) + cmp_spread(b));
        double amin, amax, bmin, bmax;
        cmp_range(a, &amin, &amax);
        cmp_range(b, &bmin, &bmax);
        r->apart = amax < bmin || bmax < amin;
        cmp_decide_timed(r, 1);
        return;
    }
    double rel = d.tol_rel, abs_ = d.tol_abs;
    r->gated = 1;
    if (rel == 0 && abs_ == 0) snprintf(r->test, sizeof(r->test), "exact");
    else snprintf(r->test, sizeof(r->test), "tolerance %g%% + %g", rel * 100, abs_);
    if (fabs(r->b - r->a) <= rel * fabs(r->a) + abs_) r->verdict = CMP_SAME;
    else r->verdict = worse > 0 ? CMP_REGRESSED : worse < 0 ? CMP_IMPROVED : CMP_CHANGED;
}

/* ---- whole documents ---- */

static cmp_row *cmp_add(cmp_report *rep) {
    if (UT_VEC_RESERVE(rep->rows, rep->cap, rep->n + 1)) return NULL;
    cmp_row *r = &rep->rows[rep->n++];
    memset(r, 0, sizeof(*r));
    return r;
}

static void cmp_count(cmp_report *rep, const cmp_row *r) {
    if (r->gated && (r->verdict == CMP_REGRESSED || (r->verdict == CMP_CHANGED && r->cls != CMP_TIMED)))
        rep->regressions++;
    if (r->gated && r->verdict == CMP_FEW) {
        if (!rep->not_judged_few) rep->few_na = r->na, rep->few_nb = r->nb;
        rep->not_judged++, rep->not_judged_few++;
    }
}

/* A timed metric, or a whole variant, in one run only: nothing to judge it against.
 * (Deterministic figures that vanish from B are gated, and the table shows them.) */
static void cmp_count_missing(cmp_report *rep, const cmp_row *r, const cmp_opts *o) {
    if (r->verdict == CMP_MISSING && (r->cls == CMP_TIMED || !strcmp(r->metric, "(variant)")) && !o->deterministic_only)
        rep->not_judged++, rep->not_judged_missing++;
}

int cmp_exit_status(const cmp_report *r) {
    return r->regressions ? CMP_EXIT_REGRESSION : r->not_judged ? CMP_EXIT_NOT_JUDGED : CMP_EXIT_PASS;
}

int cmp_docs(const rr_doc *a, const rr_doc *b, const cmp_opts *o, cmp_report *out, char *err, size_t errlen) {
    int first = out->n;
    snprintf(out->a_name, sizeof(out->a_name), "%s", a->file);
    snprintf(out->b_name, sizeof(out->b_name), "%s", b->file);
    if (strcmp(a->scenario, b->scenario)) {
        char sa[256], sb[256];
        fprintf(stderr, "bench compare: note: comparing scenario \"%s\" with \"%s\"\n", es_term(sa, sizeof(sa), a->scenario),
                es_term(sb, sizeof(sb), b->scenario));
    }
    for (int i = 0; i < b->n; i++) {
        const rm_variant *vb = &b->v[i], *va = rr_find_variant(a, vb->key);
        if (!va) {
            cmp_row *r = cmp_add(out);
            if (!r) goto oom;
            snprintf(r->variant, sizeof(r->variant), "%s", vb->label);
            snprintf(r->metric, sizeof(r->metric), "(variant)");
            r->a = r->b = r->change = r->p = NAN;
            r->verdict = CMP_MISSING;
            snprintf(r->test, sizeof(r->test), "in B only");
            continue;
        }
        for (int j = 0; j < vb->n; j++) {
            const rm_metric *sb = &vb->m[j], *sa = rr_find(va, sb->name);
            cmp_row *r = cmp_add(out);
            if (!r) goto oom;
            snprintf(r->variant, sizeof(r->variant), "%s", vb->label);
            cmp_metric(sa, sb, sb->name, sb->unit, o, r);
            /* a deterministic figure that vanished from B is a change the gate must see */
            if (r->verdict == CMP_MISSING && r->cls != CMP_TIMED && r->cls != CMP_INFO) r->gated = 1;
        }
        for (int j = 0; j < va->n; j++) {
            if (rr_find(vb, va->m[j].name)) continue;
            cmp_row *r = cmp_add(out);
            if (!r) goto oom;
            snprintf(r->variant, sizeof(r->variant), "%s", vb->label);
            cmp_metric(&va->m[j], NULL, va->m[j].name, va->m[j].unit, o, r);
        }
    }
    for (int i = 0; i < a->n; i++) {
        if (rr_find_variant(b, a->v[i].key)) continue;
        cmp_row *r = cmp_add(out);
        if (!r) goto oom;
        snprintf(r->variant, sizeof(r->variant), "%s", a->v[i].label);
        snprintf(r->metric, sizeof(r->metric), "(variant)");
        r->a = r->b = r->change = r->p = NAN;
        r->verdict = CMP_MISSING;
        snprintf(r->test, sizeof(r->test), "in A only");
    }
    /* the timed metrics are one family: Holm over all of them, then each verdict again */
    int m = 0;
    size_t nrows = (size_t)(out->n - first + 1);
    double *p = calloc(nrows, sizeof(double)), *adj = calloc(nrows, sizeof(double)), *fl = calloc(nrows, sizeof(double));
    if (!p || !adj || !fl) {
        free(p);
        free(adj);
        free(fl);
        goto oom;
    }
    for (int i = first; i < out->n; i++) {
        const cmp_row *r = &out->rows[i];
        p[i - first] = r->cls == CMP_TIMED && r->na && r->nb ? r->p : NAN;
        m += isfinite(p[i - first]);
    }
    cmp_holm(p, out->n - first, adj);
    /* One metric's spread from a few repetitions is itself noisy, and among many metrics
     * some will look tight by chance: the floor is at least the median of the metrics'
     * own floors */
    int nf = 0;
    for (int i = first; i < out->n; i++)
        if (isfinite(p[i - first])) fl[nf++] = out->rows[i].floor;
    st_sort(fl, nf);
    double common = nf ? st_quantile_sorted(fl, nf, 0.5) : 0;
    free(fl);
    for (int i = first; i < out->n; i++) {
        cmp_row *r = &out->rows[i];
        if (!isfinite(p[i - first])) continue;
        r->p_adj = adj[i - first];
        r->floor = fmax(r->floor, common);
        cmp_decide_timed(r, m);
    }
    free(p);
    free(adj);
    out->timed_m = m;
    out->few_need = cmp_reps_needed(CMP_ALPHA / (m > 0 ? m : 1));
    for (int i = first; i < out->n; i++) {
        cmp_count(out, &out->rows[i]);
        cmp_count_missing(out, &out->rows[i], o);
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* ---- A/B: interleaved rounds, paired differences ---- */

double cmp_wilcoxon(const double *d, int n, int *pairs) {
    *pairs = 0;
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    int *r2 = malloc(sizeof(int) * (size_t)(n ? n : 1)); /* twice the mid-ranks: integers */
    if (!x || !r2) {
        free(x);
        free(r2);
        return NAN;
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(d[i]) && d[i] != 0) x[m++] = d[i];
    *pairs = m;
    if (!m) {
        free(x);
        free(r2);
        return NAN;
    }
    /* rank |x| (insertion sort of the indices by |x|; m is the number of rounds) */
    int *ord = malloc(sizeof(int) * (size_t)m);
    if (!ord) {
        free(x);
        free(r2);
        return NAN;
    }
    for (int i = 0; i < m; i++) ord[i] = i;
    for (int i = 1; i < m; i++) {
        int k = ord[i], j = i;
        while (j > 0 && fabs(x[ord[j - 1]]) > fabs(x[k])) ord[j] = ord[j - 1], j--;
        ord[j] = k;
    }
    for (int i = 0; i < m;) {
        int j = i;
        while (j < m && fabs(x[ord[j]]) == fabs(x[ord[i]])) j++;
        for (int k = i; k < j; k++) r2[ord[k]] = i + j + 1; /* 2 x mean of ranks i+1 .. j */
        i = j;
    }
    free(ord);
    int wplus = 0, total = 0;
    for (int i = 0; i < m; i++) {
        total += r2[i];
        if (x[i] > 0) wplus += r2[i];
    }
    /* the null distribution: each rank's sign a fair coin; cnt[s] = subsets with rank sum s */
    double *cnt = calloc((size_t)total + 1, sizeof(double));
    if (!cnt) {
        free(x);
        free(r2);
        return NAN;
    }
    cnt[0] = 1;
    int top = 0;
    for (int i = 0; i < m; i++) {
        for (int s = top; s >= 0; s--)
            if (cnt[s] != 0) cnt[s + r2[i]] += cnt[s];
        top += r2[i];
    }
    double le = 0, ge = 0, all = ldexp(1, m);
    for (int s = 0; s <= total; s++) {
        if (s <= wplus) le += cnt[s];
        if (s >= wplus) ge += cnt[s];
    }
    free(cnt);
    free(x);
    free(r2);
    double p = 2 * fmin(le, ge) / all;
    return p > 1 ? 1 : p;
}

/* All rounds of one side as one model: each series the rounds' values in order, named as
 * round 0's (copies; rr_free frees them). */
static int cmp_concat(const rr_doc *r, int n, rr_doc *out) {
    memset(out, 0, sizeof(*out));
    snprintf(out->file, sizeof(out->file), "%.4096s (and %d more rounds)", r[0].file, n - 1);
    out->scenario = strdup(r[0].scenario);
    out->sha = strdup(r[0].sha);
    out->written = strdup(r[0].written);
    out->v = calloc((size_t)(r[0].n ? r[0].n : 1), sizeof(*out->v));
    if (!out->v || !out->scenario || !out->sha || !out->written) return -1;
    for (int i = 0; i < r[0].n; i++) {
        const rm_variant *v0 = &r[0].v[i];
        rm_variant *v = &out->v[out->n++];
        v->key = strdup(v0->key);
        v->label = strdup(v0->label);
        v->machine_type = -1;
        if (!v->key || !v->label) return -1;
        v->m = calloc((size_t)(v0->n ? v0->n : 1), sizeof(*v->m));
        if (!v->m) return -1;
        for (int j = 0; j < v0->n; j++) {
            rm_metric *s = &v->m[v->n++];
            s->name = strdup(v0->m[j].name);
            s->unit = strdup(v0->m[j].unit);
            s->declared = v0->m[j].declared;
            s->decl = v0->m[j].decl;
            if (!s->name || !s->unit) return -1;
            int total = 0;
            for (int k = 0; k < n; k++) total += rr_find(rr_find_variant(&r[k], v->key), s->name) ? rr_find(rr_find_variant(&r[k], v->key), s->name)->n : 0;
            s->v = malloc(sizeof(double) * (size_t)(total ? total : 1));
            if (!s->v) return -1;
            for (int k = 0; k < n; k++) {
                const rm_metric *x = rr_find(rr_find_variant(&r[k], v->key), s->name);
                for (int q = 0; x && q < x->n; q++) s->v[s->n++] = x->v[q];
            }
        }
    }
    return 0;
}

int cmp_paired(const rr_doc *a, const rr_doc *b, int n, const cmp_opts *o, cmp_report *out, char *err, size_t errlen) {
    rr_doc ca, cb;
    int rc = -1;
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    int ok_a = cmp_concat(a, n, &ca), ok_b = cmp_concat(b, n, &cb);
    if (!d || ok_a || ok_b) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    int first = out->n;
    if (cmp_docs(&ca, &cb, o, out, err, errlen)) goto done;
    out->rounds = n;
    /* the timed rows again, on paired differences: which variant each row is, by label */
    int m = 0;
    for (int i = first; i < out->n; i++) {
        cmp_row *r = &out->rows[i];
        if (r->cls != CMP_TIMED || !r->na || !r->nb) continue;
        const rm_variant *vb = NULL;
        for (int k = 0; k < cb.n && !vb; k++)
            if (!strcmp(cb.v[k].label, r->variant)) vb = &cb.v[k];
        int nd = 0;
        for (int k = 0; vb && k < n; k++) {
            double ma = cmp_median(rr_find(rr_find_variant(&a[k], vb->key), r->metric));
            double mb = cmp_median(rr_find(rr_find_variant(&b[k], vb->key), r->metric));
            if (isfinite(ma) && isfinite(mb)) d[nd++] = mb - ma;
        }
        int pairs;
        r->p = cmp_wilcoxon(d, nd, &pairs);
        r->na = r->nb = pairs;
        r->floor = o->threshold;
        m += isfinite(r->p);
    }
    /* Holm over them, then each verdict: decidable when its pairs can reach alpha / m (the
     * most extreme signs of k pairs have p = 2 / 2^k) */
    double *p = calloc((size_t)(out->n - first + 1), sizeof(double)), *adj = calloc((size_t)(out->n - first + 1), sizeof(double));
    if (!p || !adj) {
        free(p);
        free(adj);
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int i = first; i < out->n; i++)
        p[i - first] = out->rows[i].cls == CMP_TIMED && out->rows[i].na ? out->rows[i].p : NAN;
    cmp_holm(p, out->n - first, adj);
    out->regressions = out->not_judged = out->not_judged_few = out->not_judged_missing = 0;
    out->timed_m = m;
    out->few_need = 1;
    while (out->few_need < 64 && ldexp(2, -out->few_need) > CMP_ALPHA / (m ? m : 1)) out->few_need++;
    for (int i = first; i < out->n; i++) {
        cmp_row *r = &out->rows[i];
        if (r->cls == CMP_TIMED && isfinite(p[i - first])) {
            r->p_adj = adj[i - first];
            r->far = 0;
            if (ldexp(2, -r->na) > CMP_ALPHA / m) {
                r->verdict = CMP_FEW;
                snprintf(r->test, sizeof(r->test), "too few rounds (%d, need %d)", r->na, out->few_need);
            } else {
                snprintf(r->test, sizeof(r->test), "paired: Wilcoxon p=%.2g Holm %.2g", r->p, r->p_adj);
                if (!(r->p_adj < CMP_ALPHA)) r->verdict = CMP_NOISE;
                else if (!(fabs(r->change) > r->floor)) r->verdict = CMP_WITHIN;
                else r->verdict = r->worse > 0 ? CMP_REGRESSED : r->worse < 0 ? CMP_IMPROVED : CMP_CHANGED;
            }
        } else if (r->cls == CMP_TIMED && r->verdict != CMP_MISSING) {
            r->verdict = CMP_FEW; /* no pair differed, or none was measured */
            r->p_adj = NAN;
            snprintf(r->test, sizeof(r->test), "no paired difference");
            if (r->na == 0) r->verdict = CMP_SAME;
        }
        cmp_count(out, r);
        cmp_count_missing(out, r, o);
    }
    free(p);
    free(adj);
    rc = 0;
done:
    free(d);
    rr_free(&ca);
    rr_free(&cb);
    return rc;
}

/* ---- ratios inside one run ---- */

int cmp_parse_ratio(const char *spec, cmp_ratio *r, char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    r->factor = 1.5;
    const char *c1 = strchr(spec, ':');
    const char *slash = c1 ? strchr(c1, '/') : NULL;
    if (!c1 || !slash || c1 == spec) goto bad;
    const char *c2 = strchr(slash, ':');
    size_t lm = (size_t)(c1 - spec), ln = (size_t)(slash - c1 - 1), ld = c2 ? (size_t)(c2 - slash - 1) : strlen(slash + 1);
    if (!ln || !ld || lm >= sizeof(r->metric) || ln >= sizeof(r->num) || ld >= sizeof(r->den)) goto bad;
    memcpy(r->metric, spec, lm);
    memcpy(r->num, c1 + 1, ln);
    memcpy(r->den, slash + 1, ld);
    if (!strchr(r->num, '=') || !strchr(r->den, '=')) goto bad;
    if (c2) {
        char *end;
        r->factor = strtod(c2 + 1, &end);
        if (*end || !(r->factor > 1)) {
            snprintf(err, errlen, "--ratio %s: factor \"%s\": expected a number > 1", spec, c2 + 1);
            return -1;
        }
    }
    return 0;
bad:
    snprintf(err, errlen, "--ratio %s: expected METRIC:AXIS=VALUE/AXIS=VALUE[:FACTOR] (e.g. mod.kv.allocs:kv=dynamic/kv=prealloc:1.5)",
             spec);
    return -1;
}

/* key with the selector `from` replaced by `to` ("loader=mmap,kv=dynamic", "kv=dynamic", "kv=prealloc");
 * 0 when key does not hold `from` as a whole item. */
static int cmp_swap(const char *key, const char *from, const char *to, char *out, size_t len) {
    size_t fl = strlen(from);
    for (const char *p = key; (p = strstr(p, from)); p++) {
        if ((p != key && p[-1] != ',') || (p[fl] && p[fl] != ',')) continue;
        snprintf(out, len, "%.*s%s%s", (int)(p - key), key, to, p + fl);
        return 1;
    }
    return 0;
}

/* The median of metric in variant key, and the tolerance its class allows it (0 for exact
 * figures); NAN when the variant or metric is absent. */
static double cmp_var_median(const rr_doc *d, const char *key, const char *metric, double *tol) {
    const rm_metric *s = rr_find(rr_find_variant(d, key), metric);
    double m = cmp_median(s), rel = 0, abs_ = 0;
    if (s) {
        mc_decl dc = cmp_decl(NULL, s, metric, s->unit);
        if (dc.cls != MC_TIME && dc.cls != MC_INFO) rel = dc.tol_rel, abs_ = dc.tol_abs;
    }
    *tol = rel * fabs(m) + abs_;
    return m;
}

int cmp_ratios(const rr_doc *a, const rr_doc *b, const cmp_ratio *q, cmp_report *out) {
    int found = 0;
    for (int i = 0; i < b->n; i++) {
        char den_key[512];
        if (!cmp_swap(b->v[i].key, q->num, q->den, den_key, sizeof(den_key))) continue;
        if (!rr_find_variant(b, den_key)) continue;
        cmp_row *r = cmp_add(out);
        if (!r) return found;
        found++;
        snprintf(r->variant, sizeof(r->variant), "%s", b->v[i].label);
        snprintf(r->metric, sizeof(r->metric), "ratio %s %s/%s", q->metric, q->num, q->den);
        snprintf(r->unit, sizeof(r->unit), "x");
        r->cls = CMP_EXACT;
        double tn, td, tol_b; /* B's tolerances are not used: the band is A's */
        double na = cmp_var_median(a, b->v[i].key, q->metric, &tn), da = cmp_var_median(a, den_key, q->metric, &td);
        r->a = da != 0 ? na / da : NAN;
        double nb = cmp_var_median(b, b->v[i].key, q->metric, &tol_b), db = cmp_var_median(b, den_key, q->metric, &tol_b);
        r->b = db != 0 ? nb / db : NAN;
        r->na = r->nb = 1;
        r->p = r->p_adj = r->floor = NAN;
        r->gated = 1;
        r->change = isfinite(r->a) && r->a != 0 ? (r->b - r->a) / fabs(r->a) : NAN;
        if (!isfinite(r->b) || !isfinite(r->a)) {
            snprintf(r->test, sizeof(r->test), "within x%g of A", q->factor);
            /* both undefined (0/0) is no change; one side undefined is */
            r->verdict = isfinite(r->a) == isfinite(r->b) ? CMP_SAME : CMP_CHANGED;
        } else {
            /* A ratio can be no steadier than its parts: A's numerator and denominator
             * may each move by their class's tolerance (faults 5% + 16, memory 2% +
             * 0.25 MiB) before the factor applies. Small fault counts on either side
             * thus widen the band instead of raising false alarms. */
            double lo_n = fmax(fabs(na) - tn, 0), hi_n = fabs(na) + tn;
            double lo_d = fmax(fabs(da) - td, 0), hi_d = fabs(da) + td;
            double lo = lo_n / hi_d / q->factor, hi = lo_d > 0 ? hi_n / lo_d * q->factor : INFINITY;
            if (tn > 0 || td > 0) snprintf(r->test, sizeof(r->test), "in [%.3g, %.3g]: x%g + tolerances", lo, hi, q->factor);
            else snprintf(r->test, sizeof(r->test), "within x%g of A", q->factor);
            r->verdict = fabs(r->b) >= lo && fabs(r->b) <= hi ? CMP_SAME : CMP_REGRESSED;
        }
        cmp_count(out, r);
    }
    return found;
}

void cmp_report_free(cmp_report *r) {
    if (!r) return;
    free(r->rows);
    memset(r, 0, sizeof(*r));
}

/* ---- output ---- */

static void cmp_num(char *buf, size_t len, double x) {
    if (isnan(x)) snprintf(buf, len, "-");
    else if (x != 0 && (fabs(x) >= 1e6 || fabs(x) < 1e-3)) snprintf(buf, len, "%.4g", x);
    else snprintf(buf, len, "%.4g", x);
}

static void cmp_change(char *buf, size_t len, const cmp_row *r) {
    if (isnan(r->change)) snprintf(buf, len, r->na && r->nb && r->a == 0 ? "new" : "-");
    else snprintf(buf, len, "%+.1f%%", r->change * 100);
}

static int cmp_shown(const cmp_row *r, cmp_show show) {
    if (show == CMP_SHOW_ALL) return 1;
    /* --deterministic-only: a far change in a time decides nothing, and the gate's brief
     * table is for what does */
    if (r->far && !r->gated) return 0;
    /* the default shows what could not be judged too: a gated time with too few repetitions */
    if (show == CMP_SHOW_CHANGED && r->verdict == CMP_FEW && r->gated) return 1;
    return !(r->verdict == CMP_SAME || r->verdict == CMP_NOISE || r->verdict == CMP_SHOWN ||
             r->verdict == CMP_FEW || r->verdict == CMP_WITHIN || (r->verdict == CMP_MISSING && !r->gated));
}

static int cmp_far_count(const cmp_report *rep) {
    int n = 0;
    for (int i = 0; i < rep->n; i++) n += rep->rows[i].far && rep->rows[i].gated;
    return n;
}

/* Before the table, so that a comparison that could not judge never reads as a pass. */
static void cmp_print_not_judged(FILE *f, const cmp_report *rep, int md) {
    int far = cmp_far_count(rep);
    if (rep->not_judged) {
        fprintf(f, "%sNOT JUDGED: %d metric%s could not be judged, so this comparison is not a pass (exit status %d, or 1 "
                   "with a regression):%s\n",
                md ? "**" : "", rep->not_judged, rep->not_judged == 1 ? "" : "s", CMP_EXIT_NOT_JUDGED, md ? "**  " : "");
        if (rep->not_judged_few && rep->rounds)
            fprintf(f, "  - %d timed metric%s: too few rounds (%d; with %d timed metrics tested together, the signed-rank "
                       "test needs %d pairs to reach p < 0.05/%d): scripts/ab.sh with more rounds%s\n",
                    rep->not_judged_few, rep->not_judged_few == 1 ? "" : "s", rep->rounds, rep->timed_m, rep->few_need,
                    rep->timed_m > 0 ? rep->timed_m : 1, md ? "  " : "");
        else if (rep->not_judged_few)
            fprintf(f, "  - %d timed metric%s: too few repetitions (%d+%d; with %d timed metric%s tested together, the "
                       "Mann-Whitney test needs %d+%d to reach p < 0.05/%d):\n"
                       "    run both with `bench run SCENARIO --repeat %d` or more, or compare with --deterministic-only%s\n",
                    rep->not_judged_few, rep->not_judged_few == 1 ? "" : "s", rep->few_na, rep->few_nb, rep->timed_m,
                    rep->timed_m == 1 ? "" : "s", rep->few_need, rep->few_need, rep->timed_m > 0 ? rep->timed_m : 1,
                    rep->few_need, md ? "  " : "");
        if (rep->not_judged_missing)
            fprintf(f, "  - %d timed metric%s or variant%s in one run only%s\n", rep->not_judged_missing,
                    rep->not_judged_missing == 1 ? "" : "s", rep->not_judged_missing == 1 ? "" : "s", md ? "  " : "");
    }
    if (far)
        fprintf(f, "%d change%s far beyond noise (> %g%%, ranges apart) flagged without a test: verdicts marked \"(far)\"%s\n",
                far, far == 1 ? "" : "s", CMP_FAR_CHANGE * 100, md ? "  " : "");
    if (md && (rep->not_judged || far)) fprintf(f, "\n");
}

/* What a time verdict of two separate runs can and cannot say, and the rule it follows. */
static void cmp_print_drift(FILE *f, const cmp_report *rep, const cmp_opts *o, int md) {
    if (o->deterministic_only || !rep->timed_m) return;
    if (rep->rounds) {
        fprintf(f, "%sA/B interleaved:%s %d rounds, A and B back to back in each (ABBA order); times judged on the "
                   "paired differences round by round (Wilcoxon signed-rank, Holm over the %d timed metric%s), so drift "
                   "slower than a round cancels; a change must also exceed --threshold (%g%%).%s\n",
                md ? "**" : "", md ? "**" : "", rep->rounds, rep->timed_m, rep->timed_m == 1 ? "" : "s",
                o->threshold * 100, md ? "\n" : "");
        return;
    }
    fprintf(f, "%sTimes are confounded by drift:%s A and B are separate runs, and whatever changed between them "
               "(clock frequency, heat, other load, the page cache) moves times as a code change would; no test on two "
               "runs can tell them apart. So a time is judged only above its noise floor, the larger of --threshold "
               "(%g%%) and the two runs' own spreads added (each its interquartile range over its median; shown per "
               "row), and only when its "
               "Mann-Whitney p, adjusted by Holm over the %d timed metric%s compared here, is below 0.05: at most a 5%% "
               "chance of any false alarm among them, drift aside.%s\n",
            md ? "**" : "", md ? "**" : "", o->threshold * 100, rep->timed_m, rep->timed_m == 1 ? "" : "s", md ? "\n" : "");
}

void cmp_print(FILE *f, const cmp_report *rep, cmp_format fmt, cmp_show show, const cmp_opts *o) {
    if (fmt == CMP_FMT_JSON) {
        cJSON *j = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(j, "rows");
        cJSON_AddStringToObject(j, "a", rep->a_name);
        cJSON_AddStringToObject(j, "b", rep->b_name);
        cJSON_AddNumberToObject(j, "threshold", o->threshold);
        cJSON_AddBoolToObject(j, "deterministic_only", o->deterministic_only);
        cJSON_AddNumberToObject(j, "regressions", rep->regressions);
        cJSON_AddNumberToObject(j, "not_judged", rep->not_judged);
        cJSON_AddNumberToObject(j, "not_judged_too_few_repetitions", rep->not_judged_few);
        cJSON_AddNumberToObject(j, "not_judged_in_one_run_only", rep->not_judged_missing);
        cJSON_AddNumberToObject(j, "timed_metrics_tested", rep->timed_m);
        cJSON_AddStringToObject(j, "multiple_comparisons", "holm");
        cJSON_AddBoolToObject(j, "times_confounded_by_drift", !o->deterministic_only && rep->timed_m > 0 && !rep->rounds);
        cJSON_AddNumberToObject(j, "ab_rounds", rep->rounds);
        cJSON_AddNumberToObject(j, "exit_status", cmp_exit_status(rep));
        for (int i = 0; i < rep->n; i++) {
            const cmp_row *r = &rep->rows[i];
            if (!cmp_shown(r, show)) continue;
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "variant", r->variant);
            cJSON_AddStringToObject(x, "metric", r->metric);
            cJSON_AddStringToObject(x, "unit", r->unit);
            cJSON_AddStringToObject(x, "class", cmp_class_name(r->cls));
            cJSON_AddNumberToObject(x, "n_a", r->na);
            cJSON_AddNumberToObject(x, "n_b", r->nb);
            /* cJSON writes NAN as null */
            cJSON_AddNumberToObject(x, "a", r->a);
            cJSON_AddNumberToObject(x, "b", r->b);
            cJSON_AddNumberToObject(x, "change", r->change);
            cJSON_AddNumberToObject(x, "p", r->p);
            cJSON_AddNumberToObject(x, "p_adjusted", r->p_adj);
            cJSON_AddNumberToObject(x, "noise_floor", r->floor);
            cJSON_AddStringToObject(x, "test", r->test);
            cJSON_AddStringToObject(x, "verdict", cmp_verdict_name(r->verdict));
            cJSON_AddBoolToObject(x, "gated", r->gated);
            cJSON_AddBoolToObject(x, "far", r->far);
            cJSON_AddItemToArray(rows, x);
        }
        char *t = cJSON_Print(j);
        if (t) fprintf(f, "%s\n", t);
        free(t);
        cJSON_Delete(j);
        return;
    }
    int md = fmt == CMP_FMT_MARKDOWN;
    fprintf(f, md ? "**A** `%s`  \n**B** `%s`\n\n" : "A: %s\nB: %s\n", rep->a_name, rep->b_name);
    cmp_print_not_judged(f, rep, md);
    cmp_print_drift(f, rep, o, md);
    if (md) fprintf(f, "| variant | metric | A | B | change | test | verdict |\n|---|---|---:|---:|---:|---|---|\n");
    else fprintf(f, "%-22s %-38s %12s %12s %9s  %-38s %s\n", "variant", "metric", "A", "B", "change", "test", "verdict");
    int shown = 0;
    for (int i = 0; i < rep->n; i++) {
        const cmp_row *r = &rep->rows[i];
        if (!cmp_shown(r, show)) continue;
        shown++;
        char a[32], b[32], ch[32], name[160];
        cmp_num(a, sizeof(a), r->a);
        cmp_num(b, sizeof(b), r->b);
        cmp_change(ch, sizeof(ch), r);
        snprintf(name, sizeof(name), r->unit[0] ? "%s (%s)" : "%s", r->metric, r->unit);
        char v[48];
        snprintf(v, sizeof(v), "%s%s", cmp_verdict_name(r->verdict), r->far ? " (far)" : "");
        /* the labels and counter names are the files': control characters escaped (escape.h) */
        char var[4 * sizeof(r->variant)], nm[4 * sizeof(name)];
        es_term(var, sizeof(var), r->variant);
        es_term(nm, sizeof(nm), name);
        if (md)
            fprintf(f, "| %s | %s | %s | %s | %s | %s | %s%s%s |\n", var, nm, a, b, ch, r->test,
                    r->verdict == CMP_REGRESSED ? "**" : "", v, r->verdict == CMP_REGRESSED ? "**" : "");
        else
            fprintf(f, "%-22s %-38s %12s %12s %9s  %-38s %s%s\n", var, nm, a, b, ch, r->test, v,
                    r->gated || r->verdict == CMP_SHOWN || r->verdict == CMP_MISSING ? "" : " (not gated)");
    }
    if (show != CMP_SHOW_ALL && !shown)
        fprintf(f, "%s(no change beyond tolerance or noise in %d comparisons%s)\n", md ? "\n" : "", rep->n - rep->not_judged,
                rep->not_judged ? "; the metrics not judged are not among them" : "");
    if (show != CMP_SHOW_ALL && shown < rep->n)
        fprintf(f, "%s(%d of %d rows shown; --all shows every row)\n", md ? "\n" : "", shown, rep->n);
    fprintf(f, "%s%d regression%s beyond %s%s", md ? "\n" : "", rep->regressions, rep->regressions == 1 ? "" : "s",
            o->deterministic_only ? "the tolerances of deterministic figures and ratios" : "tolerance or threshold",
            o->deterministic_only ? " (times shown, not gated)" : "");
    if (rep->not_judged) fprintf(f, "; %d metric%s NOT JUDGED (see the top)", rep->not_judged, rep->not_judged == 1 ? "" : "s");
    fprintf(f, "\n");
}
