/* Runs against an http target (harness/child/http_worker.h), the report's half: from the
 * runner's record of the client's events (rn_proc: rtok, rfail, mem_source).
 *
 * Metrics (an inference run has the engine's own ttft/tpot/itl besides):
 *   serve_itl_{p50,p99,max}_ms   serving: the gaps between one request's token arrivals, over every request
 *   minflt_workload majflt_workload   inference: the server's faults from ready to the end
 * results.json, each process of an http run, "http":
 *   {"memory": "launched" | "pid" | "latency-only", "server_pid": N,
 *    "requests": [{"request": i, "tokens_ms": [arrival, ...]}],   (ms since the process's HELLO)
 *    "failed_by_kind": {"connect": 0, ..., "usage_mismatch": 0},   (every kind of httpc.h, 0 included)
 *    "failed": [{"request": i, "kind": "closed", "message": "..."}]}
 */
#ifndef BENCH_HTTP_REPORT_H
#define BENCH_HTTP_REPORT_H

#include <stdint.h>

#include "harness/parent/runner.h"
#include "harness/report/metrics.h"
#include "harness/scenario/scenario.h"

struct cJSON;

/* The serving kind's metrics: sv_metrics (serve_report.h), and the ITL of an http run. */
void hr_serve_metrics(const scenario *s, const rn_proc *p, mt_bag *b);
/* The inference kind's metrics: an http run's faults from ready to the end
 * (minflt_workload, majflt_workload); nothing for the engine in process. */
void hr_inference_metrics(const scenario *s, const rn_proc *p, mt_bag *b);
/* results.json's "http" object of one process; NULL when it was not an http run. */
struct cJSON *hr_proc_json(const rn_proc *p, int64_t t0_ns);

#endif
