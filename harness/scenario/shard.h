/* Sharding a scenario's matrix over machines: `bench plan --shards N`, `bench run --shard i/N`.
 *
 * A cell is one measured repetition of one selected variant. The cells, in the order
 * an unsharded `bench run` runs them (repetition 1 of every variant, then repetition
 * 2 of every variant... A B A B), are cut into N contiguous pieces whose sizes differ
 * by at most one: shard i runs cells [start[i], start[i+1]).
 *   - deterministic: the plan depends only on the variants selected, the repetition
 *     count and N, so every machine computes the same one from the same command line;
 *   - balanced: shards differ by at most one cell, and within a shard the counts of
 *     any two variants differ by at most one (a window of a period-V sequence);
 *   - interleaved: a shard runs its cells in the unsharded order, so it stays A B A B.
 * Warm-up repetitions are per machine: a shard runs the scenario's warm-up repetitions
 * of each variant it has a cell of, before its measured ones, as `bench run` does.
 *
 * Repetition numbers are the runner's (rn_run.rep: 0-based, warm-ups first), so a
 * shard's records carry the numbers the unsharded run gives the same cells.
 */
#ifndef BENCH_SHARD_H
#define BENCH_SHARD_H

#include <stddef.h>

#include "harness/scenario/scenario.h"

typedef struct cJSON cJSON;

typedef struct sh_cell {
    int variant;                /* index into scenario.variants */
    int rep;                    /* the runner's repetition number: warmup .. warmup + repetitions - 1 */
} sh_cell;

typedef struct sh_plan {
    int n_shards;
    int warmup;                 /* the scenario's warm-up repetitions, run on every shard */
    int n_cells;                /* selected variants x repetitions */
    sh_cell *cells;             /* (n_cells) in the unsharded run order */
    int *start;                 /* (n_shards + 1) shard i runs cells[start[i] .. start[i + 1]) */
} sh_plan;

/* The plan of s as selected (after --only, --repeat, --quick) over n_shards machines.
 * Fails, naming both counts, when there are fewer cells than shards (a shard would be empty). */
int sh_plan_make(const scenario *s, int n_shards, sh_plan *out, char *err, size_t errlen);
void sh_plan_free(sh_plan *p);      /* p may be zeroed or half built */

/* "i/N" with 0 <= i < N: the form `bench run --shard` and $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT give. */
int sh_parse(const char *text, int *index, int *count, char *err, size_t errlen);

/* 1 when shard `shard` runs repetition rep of variant: a cell of its own, or a warm-up
 * repetition of a variant it has a cell of. */
int sh_keeps(const sh_plan *p, int shard, int variant, int rep);
/* The number of cells of variant in shard. */
int sh_variant_cells(const sh_plan *p, int shard, int variant);

/* The plan as JSON (`bench plan`): every shard's cells, warm-ups and command line
 * (run_cmd, "bench run FILE [--only ...]", followed by " --shard i/N"). */
cJSON *sh_plan_json(const scenario *s, const sh_plan *p, const char *run_cmd);
/* One shard's part of the plan, as its results.json records it ("shard"). */
cJSON *sh_shard_json(const sh_plan *p, int shard);

#endif
