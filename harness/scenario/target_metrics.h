/* The http target's "metrics" block: which of the server's Prometheus series (GET /metrics)
 * bench reads while a repetition runs (harness/child/scrape.h does the reading; docs/http.md).
 *
 *   "metrics": {"url": "http://127.0.0.1:{port}/metrics",   default: the target's url + "/metrics"
 *               "period_s": 0.5,                            0.05 to 3600; default 0.5
 *               "preset": "llama-server",                   a server's usual series (below)
 *               "series": ["name", "name{label=\"v\"}"]}    more series; a name with labels picks
 *                                                           the samples carrying them
 * At least one of preset and series; at most TM_MAX_SERIES series in all. A name written with
 * several label sets counts their sum (prom_sum, harness/net/prom.h).
 *
 * The presets are the table tm_presets (target_metrics.c): each series a name and, for
 * a server that renamed it, an older name read when the first is absent.
 */
#ifndef BENCH_TARGET_METRICS_H
#define BENCH_TARGET_METRICS_H

#include <stddef.h>

typedef struct cJSON cJSON;

/* target.h's tg_err_fn, the same type: target.c calls this module, not the other way round */
typedef void (*tm_err_fn)(void *user, const char *path, const char *msg);

#define TM_MAX_SERIES 16
#define TM_DEFAULT_PERIOD_S 0.5

typedef struct tm_series {
    char *name;             /* a selector (prom.h): the series' key in results.json */
    char *fallback;         /* read when name is absent from a body; NULL: none */
} tm_series;

typedef struct tm_spec {
    char *url;              /* NULL: the target's url + "/metrics" */
    double period_s;
    int preset;             /* its index in the table of presets (tm_preset_name), -1: none;
                             * s[0..tm_preset_series(t)) are its series, the rest the block's own */
    int n;
    tm_series s[TM_MAX_SERIES];
} tm_spec;

/* Checks the block m at path (".matrix.target[1].http.metrics"); returns the count of errors,
 * each reported through fn. */
int tm_check(const cJSON *m, const char *path, tm_err_fn fn, void *user);

/* A checked block (tm_check) into *out, its preset expanded: 0, or -1 with err. */
int tm_from_json(const cJSON *m, tm_spec *out, char *err, size_t errlen);
/* The block as a scenario writes it (url, period_s, preset, series), every field written:
 * tm_from_json reads it back to the same spec. NULL when out of memory. */
cJSON *tm_to_json(const tm_spec *t);
void tm_free(tm_spec *t);

/* How many of t's series its preset gave (the first ones); 0 without a preset. */
int tm_preset_series(const tm_spec *t);

/* The i-th preset's name ("llama-server", "vllm", "sglang", "bench"), NULL past the last. */
const char *tm_preset_name(int i);

#endif
