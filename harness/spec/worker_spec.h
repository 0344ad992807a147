/* The worker spec: the JSON the parent writes for one variant (<results>/specs/v<N>.json)
 * and the worker reads back in a fresh process. One writer per workload kind
 * (harness/spec/kind.h); the engine's is here, the allocator workloads' in alloc_spec.h.
 *
 * An engine spec: model, tokenizer, loader/kv/alloc and their _opts, threads, device,
 * device_opts, ctx, seed, temperature, topp, module_dir; then either prompt or
 * prompt_tokens and generate (one sequence), or "requests" (a serving run: sv_spec_add).
 */
#ifndef BENCH_WORKER_SPEC_H
#define BENCH_WORKER_SPEC_H

#include <stddef.h>

#include "harness/spec/scenario.h"

struct cJSON;

/* The engine worker spec of one variant (JSON text; the caller frees it). */
char *sc_engine_worker_spec(const scenario *s, const sc_variant *v);

/* Adds the scenario's requests to a worker spec object (as "requests"). */
void sv_spec_add(struct cJSON *spec, const scenario *s);
/* The spec's "requests" back; NULL (and err "") when it has none, NULL with err when
 * it is malformed. The caller frees it with sc_requests_free. */
sc_requests *sv_spec_read(const struct cJSON *spec, char *err, size_t errlen);

#endif
