/* What a cheaper inference path costs in accuracy, measured as llama.cpp's
 * `llama-perplexity --kl-divergence` does: the logits of a variant against those of a
 * reference on the same file, at the same positions, fed the same tokens.
 *
 * The positions are a workload's: the prompt, run as one prefill pass, then `generate`
 * one-token decode steps, so that each path (the prefill GEMMs, the decode GEMVs, the
 * attention over the stored cache) is measured where the workload runs it. The reference
 * chooses the decoded tokens (greedy); the variant is teacher-forced to them, so one
 * early disagreement does not make every later position a different text.
 *
 * Per position i, with P the reference's softmax and Q the variant's, in double:
 *   KL_i      = sum_j P_j (log P_j - log Q_j)        (nats)
 *   top-1     argmax equal (first index on ties)
 *   err_i     max_j |q_j - p_j| / max_j |p_j|         over the raw logits
 * reported as mean and max KL, the share of positions whose top-1 agrees, the max of err_i
 * and the RMS of (q_j - p_j) / max_j |p_j| over every logit of every position.
 * Deterministic: the same build, file and settings give the same figures to the bit. */
#ifndef BENCH_ACCURACY_H
#define BENCH_ACCURACY_H

#include "acc_compare.h"
#include "engine.h"

/* acc_figures, acc_compare and the production bounds: acc_compare.h */


/* The default reference of a variant: the same model, modules and options, the exact
 * kernels (auto) and an f32 cache, without llama.cpp's rounding. A variant on a device
 * (cuda) is measured against the CPU's exact path: the CPU with its default modules. */
engine_spec acc_reference_spec(const engine_spec *variant);

/* The workload's positions through one engine made from spec: the prompt's logits from one
 * prefill pass, then one decode step per generated position. teacher: the token at each
 * position past the prompt is ids's, else it is chosen greedily from the previous logits (and
 * written to ids). *logits: n x vocab floats (malloc'd; the vocabulary is the engine's, known
 * once it is made), n = n_prompt + generate - 1; *vocab must match when nonzero. who names the
 * engine in err. Returns 0 or -BENCH_ERR_*. */
int acc_logits(const engine_spec *spec, const char *who, int *ids, int n_prompt, int generate, int teacher,
               float **logits, int *vocab, char *err, size_t errlen);

/* Runs the reference (prompt, then greedy decode of `generate` tokens), then the variant
 * teacher-forced on the same tokens, one engine at a time (never both in memory), and
 * compares their logits. prompt: n_prompt ids (BOS first). Returns 0, or -BENCH_ERR_* with
 * err naming which engine failed. */
int acc_measure(const engine_spec *variant, const engine_spec *reference, const int *prompt, int n_prompt, int generate,
                acc_figures *out, char *err, size_t errlen);


#endif
