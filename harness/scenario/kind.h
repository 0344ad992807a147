/* Workload kinds: what a scenario runs in its workers.
 *
 *   inference   one sequence per worker: a prompt's prefill, then decode steps
 *   serving     many requests through the scheduler in one worker ("workload.requests")
 *   allocators  workloads on allocator modules, no model ("kind": "allocators")
 *
 * One table (harness/cli/kinds.c) has an entry per kind, with a slot per layer that does
 * something of its own for it:
 *
 *   parse        spec    the scenario file's fields for this kind (after the common checks)
 *   worker_spec  spec    the JSON the parent writes for one variant's worker
 *   worker       child   one repetition, in the worker process
 *   metrics      report  the kind's own metrics of one process (the common ones are everyone's)
 *   table        report  the summary bench run prints
 *
 * A new kind is one entry there. The table lives in the top layer (cli), which may name
 * every layer; below it, a scenario carries its entry (scenario.kind) and the spec layer
 * finds entries through the table main() hands to sc_use_kinds (tests/lib/testutil.c does
 * the same for every test binary), so that no layer names one above it.
 */
#ifndef BENCH_KIND_H
#define BENCH_KIND_H

#include <stddef.h>
#include <stdio.h>

struct cJSON;
struct scenario;
struct sc_variant;
struct sc_errors;
struct worker_opts;
struct rn_proc;
struct mt_bag;
struct rs_input;
struct rm_model;

typedef struct sc_kind {
    const char *name;           /* "inference", "serving", "allocators" */
    const char *file_kind;      /* the scenario's "kind" value; NULL: a scenario without one */
    int requests;               /* among kinds of one file_kind: 1 with workload.requests, 0 without, -1 either */
    const char *worker_kind;    /* the worker spec's "kind"; NULL: a spec without one (the engine's) */
    int needs_model;            /* bench run/exec prepare the scenario's model */
    int (*parse)(struct scenario *s, const struct cJSON *root, struct sc_errors *errs);
    char *(*worker_spec)(const struct scenario *s, const struct sc_variant *v);
    /* spec: the worker spec, parsed once by its caller (bench worker, bench exec) */
    int (*worker)(const struct cJSON *spec, const char *spec_name, int ev_fd, int ack_fd, const struct worker_opts *o);
    void (*metrics)(const struct scenario *s, const struct rn_proc *p, struct mt_bag *b);   /* may be NULL */
    void (*table)(FILE *f, const struct rs_input *in, const struct rm_model *sum);
} sc_kind;

/* The table the spec layer looks kinds up in (harness/cli/kinds.c: bench_kinds). */
void sc_use_kinds(const sc_kind *kinds, int n);

/* The first kind of a scenario whose "kind" is file_kind (NULL: none given); NULL with
 * why ("expected \"allocators\", got \"x\" ...") when there is none. */
const sc_kind *sc_kind_for_file(const char *file_kind, char *why, size_t whylen);
/* After parsing: the kind among those of k's file_kind that matches the scenario
 * (serving where it has requests). */
const sc_kind *sc_kind_for_scenario(const sc_kind *k, const struct scenario *s);
/* The kind that runs a worker spec whose "kind" is worker_kind (NULL: none given). */
const sc_kind *sc_kind_for_worker(const char *worker_kind);

#endif
