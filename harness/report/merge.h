/* bench merge: the results of a sharded run (bench run --shard i/N, one results
 * directory per shard, machine or Slurm array task) joined into one results.json.
 *
 * Checks before anything is written, each refusal naming both inputs and the field:
 *   - one scenario: .scenario.name, .as_written, .overrides and the repetition counts
 *     agree (unless allow_scenarios: then variants are matched by key);
 *   - one build: .environment.git.sha and .dirty, .compiler.version, .flags, .sanitizers
 *     agree (unless allow_builds);
 *   - one plan: every input is a shard of the same N; no shard is given twice on one
 *     machine type (a shard run again on another machine type is a second measurement
 *     of the same cells, kept apart by type); every shard 0 .. N-1 is there and finished
 *     (unless partial); every measured record is one of its shard's cells.
 * An input without a "shard" is a whole run: shard 0 of 1.
 *
 * The machine type of a record is what its machine's results.json says about the CPU
 * model and flags, the compute kernels it dispatched to and its GPUs; records of one
 * type are one population. The merged document (docs/results-schema.json):
 *   runs[]            every input's records, measured ones in the unsharded run order,
 *                     each with its shard, machine (index into machines[]) and type;
 *   machines[]        one per input: its shard, directory, hostname and whole environment;
 *   machine_types[]   id (a hash of the fields above), label, the fields, its machines;
 *   summary[]         one entry per variant and machine type: statistics never mix types;
 *   environment       the first input's (the build is common to all);
 *   merged            the inputs and the plan.
 * (machines, machine_types and merged come before runs: the head, rmodel.h.)
 * `bench plot` then draws one series per variant and machine type (rmodel.h).
 */
#ifndef BENCH_MERGE_H
#define BENCH_MERGE_H

#include <stddef.h>

#include "harness/report/rmodel.h"

struct cJSON;

typedef struct mg_opts {
    int allow_scenarios;    /* merge runs of different scenarios, variants matched by key */
    int allow_builds;       /* merge runs of different builds */
    int partial;            /* missing or unfinished shards are allowed */
} mg_opts;

typedef struct mg_info {
    int inputs, shards, machine_types;
} mg_info;

/* The inputs: results directories, results.json files, or directories whose subdirectories
 * hold results (every one, in name order). Returns 0 with the merged model in *out (its head,
 * records and summaries, as the results model of a run: rmodel.h; the caller frees it with
 * rm_free) and what was merged in *info, or -1 with every problem found in err. */
int mg_merge(const char *const *inputs, int n, const mg_opts *o, rm_model *out, mg_info *info, char *err,
             size_t errlen);

/* Writes DIR/results.json and DIR/results.csv of a merged model (created as needed). */
int mg_write(rm_model *m, const char *dir, char *err, size_t errlen);

/* A machine type of an environment object: id (16 hex digits) and a short label
 * ("AMD EPYC 7B13" or "Intel Xeon Platinum 8480+ + NVIDIA H100 80GB HBM3"). */
void mg_machine_type(const struct cJSON *env, char *id, size_t idlen, char *label, size_t lablen);

#endif
