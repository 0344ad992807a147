/* A fixed pool of worker threads that run one parallel-for at a time.
 * The calling thread takes part, so a pool of n threads starts n-1 workers. */
#ifndef BENCH_THREADPOOL_H
#define BENCH_THREADPOOL_H

#include "engines/abi/module.h"

typedef struct tp_pool tp_pool;

tp_pool *tp_create(int n_threads);      /* n_threads >= 1; NULL on failure */
void tp_destroy(tp_pool *p);            /* p may be NULL */
int tp_threads(const tp_pool *p);
/* Runs fn(arg, i, n_tasks) for every i in [0, n_tasks) and returns when all are done.
 * p may be NULL (runs on the caller). Matches bench_host.parallel_for. */
void tp_run(void *p, bench_task_fn fn, void *arg, int n_tasks);

#endif
