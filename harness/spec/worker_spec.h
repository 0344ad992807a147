/* The worker spec: the JSON the parent writes for one variant (<results>/specs/v<N>.json)
 * and the worker reads back in a fresh process. One writer per workload kind
 * (harness/spec/kind.h); the engine's is here, the allocator workloads' in alloc_spec.h.
 *
 * An engine spec is a ws_engine: one table of its fields (worker_spec.c: name, type,
 * default, when it is written) serializes it on the parent's side and deserializes it on
 * the worker's, so the two cannot disagree on a name or a default. Either prompt or
 * prompt_tokens and generate (one sequence), or "requests" (a serving run: sv_spec_add).
 */
#ifndef BENCH_WORKER_SPEC_H
#define BENCH_WORKER_SPEC_H

#include <stddef.h>

#include "harness/spec/scenario.h"

struct cJSON;

/* A module's options in the spec, typed (spec_opts.h): the scenario's checked values where
 * the parent fills it; where the worker reads it, values pointing into the JSON, in an array
 * the spec owns (mem, freed by ws_engine_free). */
typedef struct ws_opts {
    bench_opts v;
    bench_opt *mem;
} ws_opts;

/* An engine worker spec, typed. Strings are borrowed: from the scenario where the parent
 * fills it (ws_engine_fill), from the parsed JSON where the worker reads it (ws_engine_read). */
typedef struct ws_engine {
    const char *model, *tokenizer;
    const char *model_id, *tokenizer_id;        /* "dev:ino" bench run read, or NULL (confine.h) */
    const char *module[3];                      /* loader, kv, alloc */
    ws_opts opts[3];                            /* their options */
    int threads;
    const char *device;                         /* NULL: cpu */
    ws_opts device_opts;
    const char *kernels;                        /* CPU kernel family; NULL: auto */
    const char *kv_cache;                       /* the KV cache types ("q8_0", "q8_0/f16"); NULL: f32 */
    int repack;                                 /* 1, the default: Q4_0 rearranged at load where the kernels decode it
                                                 * natively; 0: the file's layout (engine.h engine_repack) */
    /* the target (harness/child/targets.h) by name; NULL: "engine", the default, and not written */
    const char *target;
    /* its settings as JSON text (an http target's: harness/spec/target.h); NULL: none.
     * ws_engine_fill points it at the scenario's text; ws_engine_read mallocs it (the reader frees) */
    char *target_opts;
    int bandwidth;                              /* measure decode's read bound after the run (metric "bandwidth") */
    int ctx;
    const char *prompt;                         /* one sequence: prompt, or prompt_tokens; then generate */
    int prompt_tokens, generate;
    double seed, temperature, topp;
    const char *module_dir;
    const char *fault;                          /* test hooks: read only under BENCH_TEST_HOOKS=1 */
    int delay_ms;
    /* a serving run: the scenario's requests where the parent writes ("requests", sv_spec_add),
     * the spec's where the worker reads (sv_spec_read; owned, sc_requests_free) */
    const scenario *requests_of;
    sc_requests *requests;
} ws_engine;

/* The spec of variant v of s. */
void ws_engine_fill(ws_engine *w, const scenario *s, const sc_variant *v);
/* w as a spec's JSON object (NULL: out of memory). */
struct cJSON *ws_engine_json(const ws_engine *w);
/* A spec's object into w: every field, its table default where it is absent (the test hooks
 * only under BENCH_TEST_HOOKS=1). 0, or -1 with err (malformed requests or options); free
 * what it read with ws_engine_free, either way. */
int ws_engine_read(const struct cJSON *j, ws_engine *w, char *err, size_t errlen);
/* Frees what ws_engine_read allocated (requests, target_opts, the options' arrays) and zeroes them. */
void ws_engine_free(ws_engine *w);

/* The engine worker spec of one variant (JSON text; the caller frees it). */
char *sc_engine_worker_spec(const scenario *s, const sc_variant *v);

/* Adds the scenario's requests to a worker spec object (as "requests"). */
void sv_spec_add(struct cJSON *spec, const scenario *s);
/* The spec's "requests" back; NULL (and err "") when it has none, NULL with err when
 * it is malformed. The caller frees it with sc_requests_free. */
sc_requests *sv_spec_read(const struct cJSON *spec, char *err, size_t errlen);

#endif
