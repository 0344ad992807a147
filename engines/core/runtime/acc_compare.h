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

/* Production numerics (engine.h engine_numerics): the most a family that rounds x may cost is
 * what llama.cpp's own rounding costs on the model in hand, measured by the same pass with x
 * rounded as llama.cpp rounds it (engines/core/compute/llama_x.h; on llama.cpp's k256 files the
 * emulation's error is llama.cpp's to within 1.3% in every one of the 10 types: test_k256).
 * A fixed bound cannot stand in for it: the rounding costs a model with random weights more
 * than a trained one, and a deep one more than a shallow one (llama.cpp's own is 1.1 to 1.7%
 * relative RMS on the 2-layer k256 files, 1.9 to 3.3% on a 12-layer synth llama-110m).
 * The family passes when its relative RMS and mean KL are each within ACC_PROD_SLACK of
 * llama.cpp's (the emulation's match, with room for f32 summation order), and its top-1
 * agreement is at most ACC_PROD_TOP1_NOISE under llama.cpp's: over 64 positions of a model with
 * random weights, near-ties make top-1 the noisiest figure (two roundings of nearly the same
 * error, ours with an f32 scale and llama.cpp's with an f16 one, part at 1 to 3 positions). */
#define ACC_PROD_SLACK 0.05
#define ACC_PROD_TOP1_NOISE 0.05
/* 1 when f is within llama's bounds (every figure finite, llama's from the same positions). */
int acc_production_ok(const acc_figures *f, const acc_figures *llama);

/* The index of the largest of x[0 .. n) (the first on ties). */
int acc_argmax(const float *x, int n);

/* The comparison alone: n positions of vocab logits each. */
void acc_compare(const float *ref, const float *var, int n, int vocab, acc_figures *out);

#endif
