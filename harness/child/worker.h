/* One repetition of one variant, in the calling process.
 *
 * `bench worker` (forked by `bench run`, reporting on pipes) and `bench exec`
 * (run by hand under perf or valgrind, printing its phases on stderr) both go
 * through it, so what an investigation looks at is what a benchmark measured.
 */
#ifndef BENCH_WORKER_H
#define BENCH_WORKER_H

typedef struct worker_opts {
    int loop;           /* run the decode phase this many times (0 or 1: once), for attaching perf */
    int callgrind;      /* dump callgrind stats at each phase's end (start, load, prefill, decode)
                           and print no timings, so that the counts do not depend on them */
    const char *kernels; /* (optional) the CPU kernel family instead of the variant's (bench exec --kernels) */
    const char *accuracy_out; /* (optional) run the untimed accuracy pass instead (engines/core/runtime/accuracy.h)
                               * and write its figures to this file as JSON; how `bench run` measures the
                               * "accuracy" metric */
} worker_opts;

/* The inference and serving kinds' worker (harness/scenario/kind.h). spec: an engine worker
 * spec (harness/scenario/worker_spec.h), parsed; spec_name names it in messages. ev_fd/ack_fd:
 * the events and ack pipes of bench worker (harness/scenario/events.h), or -1 to print the
 * phases on stderr (bench exec). o may be NULL. Returns the exit status: 0, or 1 with the
 * reason reported. */
struct cJSON;
int worker_engine(const struct cJSON *spec, const char *spec_name, int ev_fd, int ack_fd, const worker_opts *o);

/* Reports a failure before any kind's worker runs (bench worker cannot read its spec):
 * on stderr, and as an error event where ev_fd >= 0. Returns 1, the exit status. */
int worker_fail(int ev_fd, const char *msg);

/* 1 when this build has <valgrind/callgrind.h> and so can mark phases. */
int worker_has_callgrind(void);

#endif
