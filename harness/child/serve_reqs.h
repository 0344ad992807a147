/* The requests of a serving run, as the worker makes them (harness/child/serve.c for the
 * synthetic ones, harness/child/traffic_gen.c for traces and sessions) and hands them to
 * the scheduler. Its own file so that both makers share the type without a cycle. */
#ifndef BENCH_SERVE_REQS_H
#define BENCH_SERVE_REQS_H

#include "engines/core/runtime/sched.h"

typedef struct sv_reqs {
    int n;
    sched_req *r;           /* (n) */
    int *ids;               /* every prompt's ids, r[i].prompt points in here */
    int *turn, *session;    /* (n) sessions and traces (harness/child/traffic_gen.h); NULL: turn 0, session i */
} sv_reqs;

void sv_reqs_free(sv_reqs *r);

#endif
