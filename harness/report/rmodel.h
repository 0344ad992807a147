/* The results of a run in memory: the one model that bench run grows and writes, and that
 * bench show, plot, compare, history, merge and sweep read back (docs/results-schema.json,
 * RS_SCHEMA; the schema is unchanged by the model).
 *
 * Glossary
 *   head      what results.json holds before its records: schema, status, written,
 *             environment, scenario, variants (a merge's machines, machine_types, merged)
 *   record    one repetition as results.json keeps it (runs[i]): its typed fields (variant,
 *             status, counted, machine load, metrics, and what the figures draw: events,
 *             timeline columns, phases and regions, token times, counters, KV and serving
 *             columns); written, its JSON text; read, its place in the document (raw)
 *   variant   one variant's summary: counts of repetitions and its metrics
 *   metric    a name, a unit, a declared class (mclass.h), the raw values of the counted
 *             repetitions (run-level once per repetition, process-level once per process, in
 *             the order of runs[]) and their summary statistics
 *
 * Writing (bench run): rm_append takes each finished repetition's record once: its typed
 * fields are read from its JSON by rm_record, the one reader of a record, and the JSON is
 * serialised then and never again; the summaries are made again from the records' metrics
 * (rm_summary_begin .. rm_summary_finish: no repetition's raw data is walked twice); rm_write
 * writes results.json atomically from the head the caller builds, the records' texts as they
 * are, and the summaries, and skips a document equal to the last but for its time. A run that
 * stops keeps every record appended.
 *
 * Reading (resread.c): rr_load parses a results.json into the same model, through
 * rm_read_head and rm_record. A merged result of several machine types (`bench merge`,
 * merge.h) reads as one variant per scenario variant and machine type: key
 * "KEY,machine=TYPE", label "LABEL @ TYPE", its runs and summary entry those of that type.
 *
 * Invariants: a metric's (v, run, proc) arrays have n entries; summarized says st holds a
 * summary (computed, or read); n == 0 with summarized is a summary-only figure (callgrind's,
 * accuracy's); rr_find sees only metrics with values, rr_summary_metric only summarized ones.
 */
#ifndef BENCH_RMODEL_H
#define BENCH_RMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "harness/report/mclass.h"
#include "harness/report/metrics.h"
#include "harness/scenario/stats.h"

#define RS_SCHEMA "bench-results/1"

struct cJSON;

/* ---- the model ---- */

typedef struct rm_metric {
    char *name;
    char *unit;                 /* "" when a read file's summary has none */
    mc_decl decl;               /* class, better direction and tolerance (mclass.h) */
    int declared;               /* the decl was given (always when written; 0 in files older than declarations) */
    int n, cap;
    double *v;                  /* (n) one value per process of each counted repetition */
    int *run, *proc;            /* (n) where each came from: index into runs (-1: the variant's own), process (-1: the run) */
    int *outlier;               /* (n) or NULL */
    int summarized;             /* st holds the summary */
    st_summary st;
} rm_metric;

typedef struct rm_variant {
    int variant;                /* index into the scenario's variants (variants[].index) */
    char *key;                  /* "loader=pread,cache=cold" (",machine=TYPE" in a merge of types) */
    char *label;                /* "pread/cold" (" @ TYPE") */
    int machine_type;           /* a merge of several machine types: the type's index; else -1 */
    int counted, failed, invalid, warmups;
    int n, cap;
    rm_metric *m;               /* (n) in first-seen order */
} rm_variant;

typedef struct rm_load {
    int known;                  /* the record has a machine load (files before it do not) */
    int busy, cpus;
    double others, steal, load1;/* the most others' CPU share, steal; load average, start or end */
} rm_load;

/* A named column of numbers: a timeline's, a token list's (NAN where the file has no number). */
typedef struct rm_col {
    char *name;
    int n;
    double *v;                  /* (n) */
} rm_col;

typedef struct rm_cols {
    int n;
    rm_col *c;                  /* (n) in the record's order */
} rm_cols;

typedef struct rm_region {
    char *name;                 /* "weights", "kv", "model_file", "scratch", "other_anon", ... */
    double size_kib, rss_kib;   /* NAN when absent */
} rm_region;

typedef struct rm_phase {
    char *name;                 /* "load", "prefill", "end", ... (rn_phase_name) */
    double t_ms;                /* since the worker's HELLO */
    int n;
    rm_region *r;               /* (n) regions_kib, in the record's order */
} rm_phase;

typedef struct rm_proc {
    int ok;                     /* status "ok" */
    char *reason;
    mt_bag metrics;             /* written: with units and classes; read: units "" (the summary has them) */
    /* what the figures draw (NAN or empty where the record has none) */
    double prompt_tokens;
    double ev_load_end, ev_prefill_end, ev_decode_end;   /* events_ms */
    rm_cols timeline;           /* t_ms, rss_kib, anon_kib, file_kib, ..., any per-region column */
    int nph;
    rm_phase *ph;               /* (nph) phases, in order */
    rm_col tokens;              /* tokens.t_ms (n 0: none recorded) */
    mt_bag counters;            /* the modules' counters: name, unit, value */
    double serve_start_ms;      /* serve.start_ms */
    rm_cols serve_kv;           /* serve.kv_timeline: t_ms, reserved_bytes, ..., running, waiting */
    rm_cols serve_req;          /* serve.requests: arrival_ms, first_ms, end_ms, output_tokens, ... a request a row */
    rm_cols kv;                 /* kv_timeline of one sequence: tokens, reserved_bytes, live_bytes */
    rm_cols server;             /* server_metrics.timeline: t_ms, then a column per /metrics series (NaN: absent) */
    const struct cJSON *raw;    /* read: processes[i] of the document; NULL when written */
} rm_proc;

typedef struct rm_run {
    int variant, rep, warmup, valid, counted, ok;
    int machine_type;           /* -1 but in a merge of machine types */
    char *status;               /* "ok", "failed", ... (rn_status_name) */
    char *invalid_reason;       /* "" when valid */
    rm_load load;
    mt_bag metrics;             /* the run's own (sums over its processes) */
    int nproc;
    rm_proc *procs;             /* (nproc) */
    rm_cols energy;             /* energy.timeline: t_ms, watts, gpu_used_mib, gpu_proc_mib (energy_report.h) */
    char *energy_why;           /* energy.why where no source counted energy; NULL where one did, or none was recorded */
    char *text;                 /* written: the record as serialised once, at rm_append */
    const struct cJSON *raw;    /* read: runs[i] of the document */
} rm_run;

typedef struct rm_model {
    /* the head */
    char *scenario;             /* scenario.name */
    char *status;               /* "running", "complete", "interrupted", "stopped" */
    char *written;              /* "2026-11-22T22:32:03Z", or "" */
    char *sha;                  /* environment.git.sha, or "" */
    int dirty;
    int quick;                  /* scenario.overrides.quick */
    char *only;                 /* scenario.overrides.only, or "" */
    int warmup, processes;      /* as run */
    /* the repetitions, in the order they finished (written) or of runs[] (read) */
    int n_runs, cap_runs;
    rm_run *runs;
    /* the summaries: one per selected variant (written); per variant with a summary or counted runs (read) */
    int n, cap;
    rm_variant *v;
    int n_types;                /* a merge (merge.h): its machine types; 0 otherwise */
    char **types;               /* (n_types) their labels */
    /* read */
    struct cJSON *root;         /* the parsed document (owned); NULL in a run's own model */
    /* written */
    struct cJSON *head;         /* a copy of the head last written (owned): the report's environment and scenario */
    char dir[4096];             /* the results directory */
    char file[4200];            /* its results.json */
    /* written */
    int writes;                 /* results.json files written (renamed into place) */
    uint64_t written_hash;      /* of the document last written, less its "written" time (0: none) */
    int written_runs;           /* records in it */
} rm_model;

typedef rm_model rr_doc;        /* a results.json as read (the same model) */

void rm_free(rm_model *m);
/* A variant's fields freed, and zeroed. */
void rm_variant_clear(rm_variant *v);

/* ---- writing: a run's own model ---- */

/* Appends one repetition: its record's JSON (taken: its typed fields are read from it by
 * rm_record, then it is serialised and deleted) and its metrics with their units and classes,
 * which the record does not carry (the bags are taken: run, then procs[nproc]). Returns 0, or
 * -1 out of memory (all of it freed). */
int rm_append(rm_model *m, struct cJSON *rec, mt_bag *run, mt_bag *procs, int nproc);
/* (run NULL: the record's own metrics are kept, with units "", as a reader finds them.) */

/* The one reader of a record: runs[i] of results.json into its typed fields (raw set to r).
 * 0, or -1 out of memory (out half-built: rm_run_free frees it). */
int rm_record(const struct cJSON *r, rm_run *out);
void rm_run_free(rm_run *r);
/* The one reader of the head: scenario name, commit, time, status, overrides, as_run's warm-up
 * and processes, into the model's fields (rr_load from the file; rm_write from what it wrote).
 * 0, or -1 with the error (.schema not "bench-results/N", no .scenario.name). */
int rm_read_head(rm_model *d, const struct cJSON *head, char *err, size_t errlen);

/* The variants' summaries, made again from the records' metrics: one rm_variant per entry of
 * keys (selected variants only; key and label copied), plus the extra metrics the caller adds
 * after it (rm_add_value), then rm_finish computes the statistics. */
int rm_summary_begin(rm_model *m, int n_variants, const int *selected, const char *const *keys,
                     const char *const *labels);
int rm_add_value(rm_variant *v, const char *name, const char *unit, mc_decl decl, double x, int run, int proc);
/* One variant's counts and raw values from the records of variant v->variant (and, unless -1,
 * of machine type v->machine_type): run-level metrics, then each process's, of the counted
 * ones. Returns the records found (warm-ups aside), or -1 out of memory. */
int rm_summarize_variant(const rm_model *m, rm_variant *v);
/* A copy of a summary-only metric (callgrind's, accuracy's: no values) into v. 0, or -1. */
int rm_copy_summary_metric(rm_variant *v, const rm_metric *src);
/* The statistics of every metric that has values (the others keep theirs). */
void rm_summary_finish(rm_model *m);
rm_variant *rm_variant_of(rm_model *m, int variant);

/* The summaries as results.json writes them (what bench run --json prints). */
struct cJSON *rm_summary_json(const rm_model *m);
/* results.csv: one row per variant x metric, the summary statistics; a merge's with its machine
 * type last. malloc'd text (*len bytes), or NULL out of memory. */
char *rm_csv(const rm_model *m, size_t *len);

/* A head's first members: schema (RS_SCHEMA), status and written (now, UTC); the caller adds
 * the rest and deletes it. NULL out of memory. */
struct cJSON *rm_head_open(const char *status);

/* The document's head (environment, scenario, ...): the one last written, or the file's root. */
const struct cJSON *rm_head(const rm_model *m);
/* The head's parts the report shows, read here so that no reader walks the head itself: the
 * scenario's description as written (NULL where it has none), and the environment and the
 * scenario as indented JSON (malloc'd; NULL where the head has none, or out of memory). */
const char *rm_description(const rm_model *m);
char *rm_environment_text(const rm_model *m);
char *rm_scenario_text(const rm_model *m);

/* Writes DIR/results.json: head is the document's object with its members before "runs"
 * (schema, status, written, environment, shard, scenario, variants), then the records' texts,
 * then the summaries. Skipped when nothing but the "written" time changed since the last
 * write. 0, or -1 with the error (the previous results.json is kept). */
int rm_write(rm_model *m, const struct cJSON *head, const char *dir, char *err, size_t errlen);

/* Writes len bytes to path through a temporary file and a rename. */
int rs_write_atomic(const char *path, const char *data, size_t len, char *err, size_t errlen);
/* The same from n pieces. */
int rs_write_atomic_v(const char *path, const char *const *data, const size_t *len, int n, char *err, size_t errlen);

/* ---- reading ---- */

/* Loads DIR/results.json (or the file itself when path names a .json file) into a model.
 * Returns 0, or -1 with a message naming the file and field. */
int rr_load(const char *path, rm_model *out, char *err, size_t errlen);
/* The same from a document already parsed: out->root (owned by out) and out->file (for the
 * messages) set by the caller. 0, or -1 with the message (out is left for rm_free). */
int rr_read(rm_model *out, char *err, size_t errlen);
#define rr_free rm_free

/* A variant's metric with raw values from counted repetitions, or NULL. */
const rm_metric *rr_find(const rm_variant *v, const char *metric);
/* A variant's metric with a summary, or NULL. */
const rm_metric *rr_summary_metric(const rm_variant *v, const char *metric);
const rm_variant *rr_find_variant(const rm_model *d, const char *key);
/* A figure of one metric's summary ("median", "mean", "stddev", "min", "max", "n", "ci_lo",
 * "ci_hi"); NAN when absent. */
double rr_summary_num(const rm_variant *v, const char *metric, const char *field);
/* The counted records of a variant, in order: out[i] (borrowed). Returns the count (at most max). */
int rr_counted_runs(const rm_model *d, const rm_variant *v, const rm_run **out, int max);

/* A column by name, the value at k of a column (NAN past its end or without one), a phase, a
 * region of a phase, a counter's value (NAN when absent). */
const rm_col *rm_col_of(const rm_cols *c, const char *name);
double rm_at(const rm_col *c, int k);
const rm_phase *rm_phase_of(const rm_proc *p, const char *name);
const rm_region *rm_region_of(const rm_phase *ph, const char *name);
double rm_counter(const rm_proc *p, const char *name);

/* The busy-machine note (results.h rs_busy_note) from the counted records; "" when none was busy. */
void rm_busy_note(const rm_model *m, char *buf, size_t len);

/* A member of a JSON object; its string (NULL), int (dflt) or number (NAN) when it is one. */
const struct cJSON *rm_json_get(const struct cJSON *o, const char *k);
const char *rm_json_str(const struct cJSON *o, const char *k);
int rm_json_int(const struct cJSON *o, const char *k, int dflt);
double rm_json_num(const struct cJSON *o, const char *k);

/* Reads a whole file into a NUL-terminated buffer (caller frees); NULL with a message. */
char *rr_slurp(const char *path, size_t *len, char *err, size_t errlen);

#endif
