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
} worker_opts;

/* spec_text: a worker spec (JSON, as rn_worker_spec writes it); spec_name names it
 * in messages. Returns the exit status: 0, or 1 with the reason on stderr. */
int worker_exec(const char *spec_text, const char *spec_name, const worker_opts *o);

/* 1 when this build has <valgrind/callgrind.h> and so can mark phases. */
int worker_has_callgrind(void);

#endif
