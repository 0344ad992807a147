/* The comparison of two sets of logits (accuracy.h says what each figure is, and how the
 * logits are made), apart from the engine so that the engine itself can compare (production
 * numerics, engine.h engine_numerics) without a cycle between engine.c and accuracy.c. */
#ifndef BENCH_ACC_COMPARE_H
#define BENCH_ACC_COMPARE_H

typedef struct acc_figures {
    int n_pos;              /* positions compared: n_prompt + generate - 1 (the last token needs no logits) */
    double kl_mean, kl_max; /* nats */
    double top1;            /* fraction of positions, 0..1 */
    double err_max, err_rms;/* relative to each position's largest |logit| */
    double err_rel;         /* RMS of (q - p) / RMS of p, over every logit: the k256 README's "relative RMS" */
} acc_figures;

/* Production numerics (engine.h engine_numerics): the most a family that rounds x may cost,
 * from llama.cpp's own cost on the same files (thirdparty/k256: its logits on each quantised
 * file against the exact path are 1.1 to 1.7% off in relative RMS, err_rel, with top-1 agreeing
 * on 95 to 100% of positions). A family as accurate as llama.cpp's CPU path passes: 2% is
 * above llama.cpp's worst type with a margin for another model, and 95% is its worst
 * top-1. */
#define ACC_PROD_ERR_REL_MAX 0.02
#define ACC_PROD_TOP1_MIN 0.95
/* 1 when f is within both bounds (and finite). */
int acc_production_ok(const acc_figures *f);

/* The index of the largest of x[0 .. n) (the first on ties). */
int acc_argmax(const float *x, int n);

/* The comparison alone: n positions of vocab logits each. */
void acc_compare(const float *ref, const float *var, int n, int vocab, acc_figures *out);

#endif
