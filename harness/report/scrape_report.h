/* An http target's reads of the server's /metrics (the target's "metrics" block,
 * harness/child/scrape.h), the report's half: from the runner's record (rn_proc.scrape).
 *
 * Metrics, per process, for each series NAME of the block (bench compare compares them as it
 * does every metric; "info": a server's figures, no better direction):
 *   server.NAME.peak   the largest value read      server.NAME.mean   the mean of the values read
 *   server.scrapes_failed                          reads that got no usable body
 * results.json, each process of a run with the block, "server_metrics":
 *   {"reads": N, "failed": K, "first_failure": "...",          (only with failures)
 *    "series": {"NAME": {"peak": x, "mean": x, "samples": n, "absent": k, "fallback": "OLD"}},
 *    "timeline": {"t_ms": [...], "NAME": [...], ...}}          one row per read; null: absent
 * ("fallback": the series came under a preset's older name, e.g. vllm:gpu_cache_usage_perc.)
 * timelines/vV-rR-pP-server.csv: the same rows, t_ms (since HELLO) then a column per series.
 */
#ifndef BENCH_SCRAPE_REPORT_H
#define BENCH_SCRAPE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "harness/parent/runner.h"
#include "harness/report/metrics.h"

struct cJSON;

void sr_metrics(const rn_proc *p, mt_bag *b);
/* results.json's "server_metrics" of one process; NULL without a metrics block. */
struct cJSON *sr_proc_json(const rn_proc *p, int64_t t0_ns);
/* The timeline CSV (malloc'd, *len bytes); NULL without reads. */
char *sr_timeline_csv(const rn_proc *p, int64_t t0_ns, size_t *len);

#endif
