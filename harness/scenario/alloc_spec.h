/* Allocator workloads (the spec's half; the worker is harness/child/alloc_workload.h, the
 * tables harness/report/alloc_table.h): a scenario kind ("kind": "allocators") that runs each
 * workload on each allocator module, every repetition in a fresh `bench worker`
 * process (the runner's fork/exec, timeout, sampling and results machinery).
 *
 * Glossary
 *   op        one allocator call: an alloc or a free. A workload of N ops makes N/2
 *             allocations and frees each of them (a trace: as recorded).
 *   round     lifo/fifo/random: `live` allocations, then their frees in the pattern's
 *             order; the last round is shorter when ops/2 is not a multiple of live.
 *   batch     AW_BATCH ops timed by one pair of clock reads; ns/op p50/p99 are
 *             quantiles over the batches, less the clock's own cost (measured).
 *   reset     an allocator that has reset() (the arena; its free() is a no-op) is
 *             reset when nothing is live: at the end of each round (lifo, fifo,
 *             random) or replay (trace), and in churn once per batch (32 pairs), as
 *             an engine resets once per step after many allocations.
 *   floor     the driver's own cost per op: the same passes (same machine code, same
 *             indirect calls, touches and counts) on the null allocator, whose alloc
 *             returns one preallocated block and whose free does nothing. Measured
 *             twice in each worker before the allocator's pass; the lower pass counts.
 *   net       the allocator's figure less the floor's same statistic (mean from mean,
 *             p50 from p50, p99 from p99). The raw figures are always reported too.
 *
 * The worker reports counters (results: mod.aw.<name>): ops, ns_per_op, ns_op_p50,
 * ns_op_p99, ops_per_s, floor_ns_per_op, floor_ns_op_p50, floor_ns_op_p99,
 * net_ns_per_op, net_ns_op_p50, net_ns_op_p99, timer_ns, minflt, minflt_per_op,
 * sys_ms, user_ms (the timed pass only), peak_live_bytes, rss_growth_bytes (VmHWM
 * less VmRSS before the first allocation), fragmentation (rss_growth_bytes /
 * peak_live_bytes), and the module's own counters as mod.alloc.<name>.
 */
#ifndef BENCH_ALLOC_SPEC_H
#define BENCH_ALLOC_SPEC_H

#include <stdint.h>

#include "harness/scenario/scenario_types.h"

#define AW_BATCH 64     /* ops per clock read */

typedef enum aw_pattern { AW_CHURN, AW_LIFO, AW_FIFO, AW_RANDOM, AW_PRODCON, AW_TRACE } aw_pattern;
typedef enum aw_touch { AW_TOUCH_NONE, AW_TOUCH_FIRST, AW_TOUCH_PAGES } aw_touch;

typedef struct aw_workload {
    char *name;
    aw_pattern pattern;
    uint64_t size;              /* B; 0: drawn from the power law below */
    uint64_t min, max;          /* B, power law p(s) ~ s^-alpha over [min, max] */
    double alpha;
    uint64_t align;             /* B, a power of two */
    uint64_t ops;               /* allocator calls; trace: rounds x the trace's calls */
    int live;                   /* lifo/fifo/random: blocks per round */
    uint64_t seed;
    aw_touch touch;             /* what the workload writes into each new block */
    char *trace;                /* trace: the file (engines/core/runtime/alloc_trace.h) */
    int rounds;                 /* trace: replays of the whole file */
    struct cJSON *json;         /* the workload as written, passed to the worker */
} aw_workload;

typedef struct aw_scenario {
    int n;
    aw_workload *w;             /* (n) = the choices of the "workload" axis */
} aw_scenario;

/* Fills s (whose file, module_dir and json are set) from an allocator scenario's
 * root object: name, axes alloc x workload, variants. Errors go to errs, each
 * "<file>: <JSON path>: <message>". Returns 0 or -1. */
int aw_parse_scenario(scenario *s, const struct cJSON *root, sc_errors *errs);
void aw_scenario_free(aw_scenario *a);          /* a may be NULL */

/* One workload object of a scenario or a worker spec; path names it in errors (".workload"). */
int aw_workload_parse(const char *file, const struct cJSON *j, const char *path, aw_workload *w, sc_errors *errs);
void aw_workload_free(aw_workload *w);

/* The worker spec of one variant (JSON text; the caller frees it). */
char *aw_worker_spec(const scenario *s, const sc_variant *v);

#endif
