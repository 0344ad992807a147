/* The engine target: bench's engine in the worker process (the scenario's target "engine",
 * the default). prepare loads the model through the engine (LOAD_START .. LOAD_END, the
 * model files checked before and after), run decodes one sequence or serves the requests
 * through the scheduler (harness/child/serve.h), collect sends the modules' counters, and
 * after_done measures decode's bandwidth bound where the scenario asks (metric "bandwidth").
 */
#ifndef BENCH_ENGINE_TARGET_H
#define BENCH_ENGINE_TARGET_H

#include <stddef.h>

#include "harness/child/wtarget.h"

extern const wt_target_i wt_engine;

/* The untimed accuracy pass (worker_opts.accuracy_out): the variant's logits at the
 * workload's positions against the reference's (engines/core/runtime/accuracy.h), written to
 * out_path as one JSON object {"n_pos", "kl_mean", "kl_max", "top1", "err_max", "err_rms"}.
 * Returns 0, or -code with err. */
int et_accuracy(const ws_engine *s, const char *out_path, char *err, size_t errlen);

#endif
