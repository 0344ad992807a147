#include "acc_compare.h"

#include <math.h>
#include <string.h>

int acc_argmax(const float *x, int n) {
    int best = 0;
    for (int j = 1; j < n; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

/* log-sum-exp of x in double, the largest taken out first */
static double log_sum_exp(const float *x, int n, double max) {
    double s = 0;
    for (int j = 0; j < n; j++) s += exp((double)x[j] - max);
    return max + log(s);
}

void acc_compare(const float *ref, const float *var, int n, int vocab, acc_figures *out) {
    memset(out, 0, sizeof(*out));
    out->n_pos = n;
    double kl_sum = 0, sq_sum = 0, d2_sum = 0, p2_sum = 0;
    int agree = 0;
    for (int i = 0; i < n; i++) {
        const float *p = ref + (size_t)i * vocab, *q = var + (size_t)i * vocab;
        int ap = acc_argmax(p, vocab), aq = acc_argmax(q, vocab);
        agree += ap == aq;
        double lp = log_sum_exp(p, vocab, p[ap]), lq = log_sum_exp(q, vocab, q[aq]);
        double kl = 0, scale = 0, worst = 0;
        for (int j = 0; j < vocab; j++) scale = fmax(scale, fabs((double)p[j]));
        if (scale == 0) scale = 1;
        for (int j = 0; j < vocab; j++) {
            double logp = (double)p[j] - lp, logq = (double)q[j] - lq;
            kl += exp(logp) * (logp - logq);
            d2_sum += ((double)q[j] - (double)p[j]) * ((double)q[j] - (double)p[j]);
            p2_sum += (double)p[j] * (double)p[j];
            double d = ((double)q[j] - (double)p[j]) / scale;
            worst = fmax(worst, fabs(d));
            sq_sum += d * d;
        }
        /* rounding can leave a KL of -1e-17 for equal distributions: it is 0 */
        if (kl < 0) kl = 0;
        kl_sum += kl;
        out->kl_max = fmax(out->kl_max, kl);
        out->err_max = fmax(out->err_max, worst);
    }
    if (n) {
        out->kl_mean = kl_sum / n;
        out->top1 = (double)agree / n;
        out->err_rms = sqrt(sq_sum / ((double)n * vocab));
        out->err_rel = p2_sum > 0 ? sqrt(d2_sum / p2_sum) : sqrt(d2_sum);
    }
}

int acc_production_ok(const acc_figures *f, const acc_figures *llama) {
    /* written so that a NaN figure fails */
    return f->n_pos > 0 && llama->n_pos == f->n_pos && f->err_rel <= llama->err_rel * (1 + ACC_PROD_SLACK) &&
           f->kl_mean <= llama->kl_mean * (1 + ACC_PROD_SLACK) && f->top1 >= llama->top1 - ACC_PROD_TOP1_NOISE;
}

