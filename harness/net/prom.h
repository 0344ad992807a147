/* A parser of Prometheus' text exposition format, version 0.0.4: what a server's
 * GET /metrics answers (bench serve, llama-server --metrics, vLLM, SGLang). A pure function
 * of the bytes, so it is tested and fuzzed on byte strings (fuzz/fuzz_prom.c).
 *
 *   body    = lines separated by "\n" (a "\r" before it is dropped; the last "\n" may be missing)
 *   ""                          a blank line, ignored
 *   "# HELP name text"          the family's help (read past, not kept)
 *   "# TYPE name type"          type: counter, gauge, histogram, summary, untyped; one per name
 *   "# anything else"           a comment
 *   sample  = name [ "{" label "=" "\"" value "\"" { "," ... } [","] "}" ] number [ timestamp ]
 *     name     [a-zA-Z_:][a-zA-Z0-9_:]*          label [a-zA-Z_][a-zA-Z0-9_]*, no label twice
 *     value    any bytes but '"', '\' and newline, escaped as \" \\ \n (no other escape)
 *     number   a decimal float (Go's ParseFloat: 1, -2.5e-3, .5), NaN, Inf, +Inf, -Inf
 *              (the words in any case)
 *     timestamp  milliseconds since the epoch, a whole number
 *   Blanks (space, tab) separate the tokens and may stand around the label set's
 *   punctuation.
 *
 * A histogram family X (# TYPE X histogram) has the series X_bucket (each with an "le"
 * label, a number), X_sum and X_count; a summary X has X (each with a "quantile" label),
 * X_sum and X_count. A sample of those names is given its family's name and type.
 *
 * Bounded: a body over PROM_MAX_BODY, a line over PROM_MAX_LINE, more than PROM_MAX_SAMPLES
 * samples or PROM_MAX_LABELS labels on one is refused, as anything malformed is, with the
 * line's number ("line 12: ...").
 */
#ifndef BENCH_PROM_H
#define BENCH_PROM_H

#include <stddef.h>
#include <stdint.h>

#define PROM_MAX_BODY (16u << 20)       /* bytes: vLLM with many LoRA adapters writes a few MiB */
#define PROM_MAX_LINE (64u << 10)       /* bytes, without the "\n" */
#define PROM_MAX_SAMPLES 200000
#define PROM_MAX_LABELS 64              /* on one sample */

typedef enum prom_type { PROM_UNTYPED, PROM_COUNTER, PROM_GAUGE, PROM_HISTOGRAM, PROM_SUMMARY } prom_type;
const char *prom_type_name(prom_type t);    /* "untyped", "counter", ... */

typedef struct prom_label {
    const char *name, *value;       /* value unescaped */
} prom_label;

typedef struct prom_sample {
    const char *name;               /* as written: "x_bucket" */
    const char *family;             /* "x" for a histogram's or summary's series; else name */
    prom_type type;                 /* the family's # TYPE; PROM_UNTYPED without one */
    const prom_label *labels;       /* (n_labels) in the order written */
    int n_labels;
    double value;
    int has_ts;
    int64_t ts_ms;                  /* when has_ts */
    int line;                       /* 1-based */
} prom_sample;

/* A parsed body. Every string lives in pool; the doc owns pool, samples and labels. */
typedef struct prom_doc {
    prom_sample *s;                 /* (n) in the order written */
    int n;
    prom_label *labels;             /* (n_labels) every sample's labels, sample by sample */
    int n_labels;
    char *pool;                     /* (pool_cap) NUL-terminated strings */
    size_t pool_len, pool_cap;
} prom_doc;

/* Parses len bytes of buf (not NUL-terminated; may hold anything) into d (zeroed first).
 * Returns 0, or -1 with err ("line N: what was expected") and d empty. */
int prom_parse(const char *buf, size_t len, prom_doc *d, char *err, size_t errlen);
void prom_free(prom_doc *d);        /* d may be NULL or empty */

/* The next sample at or after index from named name whose labels include every pair of
 * sel (n_sel 0: any labels); its index, or -1. */
int prom_find(const prom_doc *d, const char *name, const prom_label *sel, int n_sel, int from);

/* The sum of the values of every sample prom_find matches: a name written with several label
 * sets (vLLM's model_name, one per engine) counts all of them. Returns how many matched
 * (0: *v is left alone). */
int prom_sum(const prom_doc *d, const char *name, const prom_label *sel, int n_sel, double *v);

/* A selector as a scenario writes it: a name, optionally with labels to match,
 * `name{label="value",...}` (the sample syntax without the number). Parsed into sel, a
 * one-sample doc (sel->s[0]: name, labels). Returns 0, or -1 with err. */
int prom_selector(const char *text, prom_doc *sel, char *err, size_t errlen);

#endif
