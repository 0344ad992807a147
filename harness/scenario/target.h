/* A scenario's target: what runs the workload. The axis "target" (top level, matrix or
 * matrix.fixed, as every axis) takes choices of two kinds:
 *
 *   "engine"                       bench's engine in the worker process (the default)
 *   {"label": "bench-serve",       a server behind an OpenAI-compatible API
 *    "http": {
 *      "url": "http://127.0.0.1:{port}",        required; where the requests go, and only there
 *      "launch": ["{bench}", "serve", "--model", "{model}", "--port", "{port}"]
 *                                  the server's argv (no shell: a string is refused), started
 *                                  for every repetition, stopped after it; its memory is read
 *                                  from /proc as a worker's. Only with the user's leave:
 *                                  `bench run --allow-launch` or an allow-list (launch.h).
 *                                  Placeholders, each filled inside its one word (never split):
 *                                  {bench} this bench binary, {model} {tokenizer} the scenario's
 *                                  files (so the cache axis applies to the file the server
 *                                  reads), {port} a free loopback port
 *      "health": "/health",        the readiness path, polled until it answers 200
 *      "ready_timeout_s": 120,     a launched server not ready by then fails the repetition
 *      "request_timeout_s": 300,   each request's whole time at most (every timeout: 0.001 to 86400 s)
 *      "stop_timeout_s": 10,       SIGTERM, then SIGKILL after this
 *      "pid": 1234,                without launch: the server's pid, whose memory is read;
 *                                  neither launch nor pid: latency only
 *      "model": "name",            the requests' "model" field (vLLM wants it)
 *      "concurrency": 0,           requests in flight at most (0: the workload's max_batch, else all)
 *      "metrics": {...},           the server's /metrics read while it serves (target_metrics.h)
 *      "ignore_eos": true,         send ignore_eos (inference: always; serving: unless stop_at_eos)
 *      "memory": "process"}}       whose memory: the server's pid ("process"), or "tree": it and every
 *                                  process below it, summed (harness/parent/proctree.h; launch or pid)
 *
 * sc_choice of a target: name "engine" or "http", label as given ("engine", or the http
 * choice's "label", default "http"), http the settings parsed once, typed, defaults applied
 * (NULL for engine). The worker spec carries them as tg_to_json writes them and the worker
 * reads them back with tg_from_json: one writer, one reader, the same checks on both sides.
 */
#ifndef BENCH_TARGET_H
#define BENCH_TARGET_H

#include <stddef.h>

#include "harness/scenario/target_metrics.h"

typedef struct cJSON cJSON;

typedef void (*tg_err_fn)(void *user, const char *path, const char *msg);

/* The http settings, typed, every default applied. */
typedef struct tg_http {
    char *url, *health, *model;
    char **launch;          /* NULL-terminated argv as written (placeholders unfilled); NULL: not launched */
    double ready_timeout_s, request_timeout_s, stop_timeout_s;
    int pid;                /* 0: none */
    int concurrency;
    int ignore_eos;
    int memory_tree;        /* memory "tree": the server and its descendants */
    tm_spec metrics;        /* the /metrics series read while it serves; metrics.n 0: none */
} tg_http;

/* Validates choice j at path (".matrix.target[1]"), reporting every error through err;
 * on success sets *name, *label and *http (malloc'd, tg_http_free then free; NULL for engine).
 * Returns 0 or -1. */
int tg_parse(const cJSON *j, const char *path, char **name, char **label, tg_http **http, tg_err_fn err, void *user);

/* The settings as an http object of a scenario, every field written (defaults included): what
 * the worker spec carries and results.json records. NULL when out of memory. */
cJSON *tg_to_json(const tg_http *h);

/* An http object (a scenario's, or one tg_to_json wrote) into h, checked as tg_parse checks it:
 * 0, or -1 with the first error in err ("target.http.url: ..."). */
int tg_from_json(const cJSON *o, tg_http *h, char *err, size_t errlen);
void tg_http_free(tg_http *h);

/* Replaces {name} in tmpl by the value of name in keys/vals (n pairs); NULL when out of memory. */
char *tg_expand(const char *tmpl, const char *const *keys, const char *const *vals, int n);

#endif
