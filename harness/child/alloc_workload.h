/* Allocator workloads, the worker's half: one workload on one allocator module, in the
 * worker process. The scenario's fields, the glossary and the counters reported are
 * described in harness/scenario/alloc_spec.h.
 */
#ifndef BENCH_ALLOC_WORKLOAD_H
#define BENCH_ALLOC_WORKLOAD_H

#include "harness/scenario/alloc_spec.h"

struct worker_opts;
struct cJSON;

/* One repetition of the allocator worker spec (parsed), in this process: ev_fd/ack_fd as `bench worker` (events.h), or -1
 * to print on stderr. o (may be NULL) is not used: an allocator workload has no
 * decode loop to repeat and no phases for callgrind. Returns the exit status. */
int aw_worker(const struct cJSON *spec, const char *spec_name, int ev_fd, int ack_fd, const struct worker_opts *o);

#endif
