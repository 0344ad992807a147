/* The "accuracy" metric: what each variant's cheaper path (a KV cache type, a kernel family)
 * costs in accuracy, in the same run as its speed (engines/core/runtime/accuracy.h, docs/accuracy.md).
 *
 * The figures are deterministic, so one pass per variant does, after the timed repetitions and
 * outside them (its two engines never share a process with a timed one):
 *     bench worker --spec <dir>/specs/v<V>.json --accuracy <dir>/accuracy/v<V>.json
 * Metrics (results.json summary, one value per variant, class exact):
 *   accuracy_kl_mean  accuracy_kl_max (nats)  accuracy_top1_pct  accuracy_err_max  accuracy_err_rms
 */
#ifndef BENCH_ACCURACY_RUN_H
#define BENCH_ACCURACY_RUN_H

#include <signal.h>

#include "harness/scenario/scenario.h"

typedef struct ar_figures {
    int ok;
    int n_pos;
    double kl_mean, kl_max, top1, err_max, err_rms;
    char error[512];        /* why not ok; "" for a variant not measured */
} ar_figures;

/* Every selected variant of s, its spec at <out_dir>/specs/v<V>.json. *out gets s->n_variants
 * entries (the caller frees it); a variant that fails has ok = 0 and its error, and the others
 * still run. Returns -1 only when out of memory. */
int ar_run_variants(const scenario *s, const char *bench_exe, const char *out_dir, volatile sig_atomic_t *interrupted,
                    ar_figures **out);

#endif
