/* The worker spec: the JSON the parent writes for one variant (<results>/specs/v<N>.json)
 * and the worker reads back in a fresh process. One writer per workload kind
 * (harness/scenario/kind.h); the engine's is here, the allocator workloads' in alloc_spec.h.
 *
 * An engine spec is a ws_engine: one table of its fields (worker_spec.c: name, type,
 * default, when it is written) serializes it on the parent's side and deserializes it on
 * the worker's, so the two cannot disagree on a name or a default. Either prompt or
 * prompt_tokens and generate (one sequence), or "requests" (a serving run: sv_spec_add).
 */
#ifndef BENCH_WORKER_SPEC_H
#define BENCH_WORKER_SPEC_H

#include <stddef.h>

#include "harness/scenario/scenario.h"
#include "harness/scenario/ws_types.h"

struct cJSON;

/* The spec of variant v of s. */
void ws_engine_fill(ws_engine *w, const scenario *s, const sc_variant *v);
/* w as a spec's JSON object (NULL: out of memory). */
struct cJSON *ws_engine_json(const ws_engine *w);
/* A spec's object into w: every field, its table default where it is absent (the test hooks
 * only under BENCH_TEST_HOOKS=1). 0, or -1 with err (malformed requests or options); free
 * what it read with ws_engine_free, either way. */
int ws_engine_read(const struct cJSON *j, ws_engine *w, char *err, size_t errlen);
/* Frees what ws_engine_read allocated (requests, target_http, the options' arrays) and zeroes them. */
void ws_engine_free(ws_engine *w);

/* The engine worker spec of one variant (JSON text; the caller frees it). */
char *sc_engine_worker_spec(const scenario *s, const sc_variant *v);

/* Adds the scenario's requests to a worker spec object (as "requests"). */
void sv_spec_add(struct cJSON *spec, const scenario *s);
/* The spec's "requests" back; NULL (and err "") when it has none, NULL with err when
 * it is malformed. The caller frees it with sc_requests_free. */
sc_requests *sv_spec_read(const struct cJSON *spec, char *err, size_t errlen);

#endif
