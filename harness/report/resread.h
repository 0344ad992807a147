/* Reading a finished run back: results.json (docs/results-schema.json) as the
 * figures, the report, `bench compare` and `bench history` need it.
 *
 * A merged result with several machine types (`bench merge`, merge.h) reads as one
 * variant per scenario variant and machine type: key "KEY,machine=TYPE", label
 * "LABEL @ TYPE", its runs and summary entry those of that type; so every figure
 * draws one series per machine type and `bench compare` matches variant and type.
 *
 * For each variant, every metric's raw values are gathered from the counted
 * repetitions (runs[].counted): run-level metrics once per repetition,
 * process-level metrics once per process, in the order of runs[]. The summary
 * statistics that `bench run` computed stay in the cJSON tree (rr_variant.summary).
 */
#ifndef BENCH_RESREAD_H
#define BENCH_RESREAD_H

#include <stddef.h>
#include <stdint.h>

#include "harness/report/mclass.h"

struct cJSON;

typedef struct rr_series {
    char *name;
    char *unit;                 /* from the summary; "" when the summary has none */
    int declared;               /* the summary gave the metric's class (decl); 0 in older files */
    mc_decl decl;
    int n, cap;
    double *v;                  /* (n) raw values of the counted repetitions */
} rr_series;

typedef struct rr_variant {
    int index;                  /* variants[].index */
    const char *key;            /* "loader=pread,cache=cold" (borrowed from root) */
    const char *label;          /* "pread/cold" (borrowed) */
    int n, cap;
    rr_series *m;               /* (n) in first-seen order */
    const struct cJSON *summary;/* summary[i] of this variant, or NULL */
    int machine_type;           /* a merge of several machine types (merge.h): the type's index; else -1 */
    char *owned;                /* key and label of a per-type variant ("...,machine=LABEL", "... @ LABEL") */
} rr_variant;

typedef struct rr_doc {
    struct cJSON *root;         /* owned */
    char dir[4096];             /* the results directory */
    char file[4200];            /* its results.json */
    const char *scenario;       /* scenario.name (borrowed) */
    const char *sha;            /* environment.git.sha, or "" */
    int dirty;
    const char *written;        /* "2026-11-22T22:32:03Z", or "" */
    int n;
    rr_variant *v;              /* (n) variants that have a summary or counted runs */
} rr_doc;

/* Loads DIR/results.json (or the file itself when path names a .json file).
 * Returns 0, or -1 with a message naming the file and field. */
int rr_load(const char *path, rr_doc *out, char *err, size_t errlen);
void rr_free(rr_doc *d);

const rr_series *rr_find(const rr_variant *v, const char *metric);
const rr_variant *rr_find_variant(const rr_doc *d, const char *key);
/* The summary object of one metric ({unit, n, median, mean, ..., ci95}), or NULL. */
const struct cJSON *rr_summary_metric(const rr_variant *v, const char *metric);
/* A number from the summary of one metric (field "median", "mean", ...); NAN when absent. */
double rr_summary_num(const rr_variant *v, const char *metric, const char *field);

/* The counted runs of a variant, in order: out[i] are run objects (borrowed). Returns the count. */
int rr_counted_runs(const rr_doc *d, const rr_variant *v, const struct cJSON **out, int max);

/* Reads a whole file into a NUL-terminated buffer (caller frees); NULL with a message. */
char *rr_slurp(const char *path, size_t *len, char *err, size_t errlen);

#endif
