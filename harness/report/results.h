/* What a run leaves behind, in results/<scenario>/<UTC time>-<short sha>/:
 *   results.json       environment, the scenario as run, every repetition's raw
 *                      record (events, phases, regions, faults, perf, counters,
 *                      tokens, timeline) and the summaries; docs/results-schema.json
 *   results.csv        one row per variant x metric: the summary statistics
 *   timelines/v<V>-r<R>-p<P>.csv   the sampled memory timeline of each process
 *   specs/, logs/      each variant's worker spec and each worker's stderr
 * Every file is written to a temporary name and renamed, so a reader (or a
 * Ctrl-C) never sees half a file.
 */
#ifndef BENCH_RESULTS_H
#define BENCH_RESULTS_H

#include <stdio.h>

#include "harness/report/metrics.h"
#include "harness/report/rmodel.h"
#include "harness/parent/runner.h"
#include "harness/scenario/stats.h"

typedef struct rs_input {
    const scenario *s;
    const rn_model_files *mf;
    const rn_result *res;
    const char *status;         /* "running", "complete", "interrupted", "stopped" */
    const char *dir;            /* the results directory */
    const char *only;           /* --only, or NULL */
    int repeat_override;        /* --repeat N, 0: none */
    int quick;
    struct cJSON *env;          /* rs_environment(), captured once */
    const struct cJSON *shard;  /* bench run --shard: its part of the plan (shard.h sh_shard_json); NULL: unsharded */
    rm_model *model;            /* the run's results (rmodel.h): rs_append_run grows it, rs_write writes it */
} rs_input;

/* Appends repetition ri (index into res->runs) to in->model: its record made once. 0, or -1
 * out of memory. */
int rs_append_run(const rs_input *in, int ri);
/* The model's summaries made again from its records, with the callgrind and accuracy figures
 * of in->res; the model's head fields (status, scenario) too. 0, or -1 out of memory. */
int rs_summarize(const rs_input *in);

/* The machine, the build and the libraries, as a JSON object. */
struct cJSON *rs_environment(void);
/* "a1b2c3d" (+ "-dirty"), or "nogit" */
void rs_short_sha(char *buf, size_t len);
/* Prints a note folded at 100 columns, at spaces (the tables of bench run and bench show). */
void rs_print_folded(FILE *f, const char *note);

/* Writes results.json (when it changed) and results.csv, atomically, from in->model. */
int rs_write(const rs_input *in, char *err, size_t errlen);
/* Writes the timelines of one repetition (index into res->runs). */
int rs_write_timelines(const rs_input *in, int run, char *err, size_t errlen);
/* results.json's members before "runs" (schema, status, written, environment, shard,
 * scenario, variants); the caller deletes it. */
struct cJSON *rs_head(const rs_input *in);

/* The comparison table, with units, on f, from the model's summaries and records. */
void rs_print_table(FILE *f, const rs_input *in, const rm_model *m);
/* The table's name for a metric ("TTFT", "minor faults, load"), or NULL; its row (for
 * ordering other views the same way), or -1. */
const char *rs_metric_title(const char *metric);
int rs_metric_rank(const char *metric);
const char *rs_metric_title_at(int rank); /* NULL past the last row */
/* A median and half its CI as the table prints them: digits by magnitude, counts whole,
 * never an exponent. */
void rs_fmt_value(char *buf, size_t len, double median, double half, int n, const char *unit);
/* One sentence: what `reps` counted repetitions per variant can and cannot show, and how to get
 * more: `need` repetitions a side let bench compare test this run's times against another
 * like it (cmp_reps_to_compare), the number its "too few repetitions" verdict would ask for. */
void rs_repetitions_note(char *buf, size_t len, int reps, int need);

/* One sentence warning that `busy` of `counted` repetitions ran on a busy machine (other
 * processes up to `others` of the `cpus` CPUs, the hypervisor up to `steal`, load average up
 * to `load`), or "" when busy is 0 (rmodel.c; rm_busy_note: the same from a model's records). */
void rs_busy_note(char *buf, size_t len, int busy, int counted, double others, double steal, double load, int cpus);

/* A variant's short label: the crossed axes' labels joined by '/' ("pread/cold"). */
void rs_variant_label(const scenario *s, int variant, char *buf, size_t len);

#endif
