/* Serving runs, the report's half (harness/child/serve.h has the whole story): the
 * serve_* metrics and the "serve" and "kv_timeline" objects of results.json, derived
 * from the events the runner kept (rn_proc).
 *
 * Metrics: see harness/child/serve.h.
 */
#ifndef BENCH_SERVE_REPORT_H
#define BENCH_SERVE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "harness/parent/runner.h"
#include "harness/report/metrics.h"
#include "harness/scenario/scenario.h"

struct cJSON;

/* The serve_* metrics of one process's serving run (nothing when it was not one). */
void sv_metrics(const scenario *s, const rn_proc *p, mt_bag *b);
/* results.json's "serve" object of one process, times in ms since t0_ns; NULL when not a serving run. */
struct cJSON *sv_proc_json(const rn_proc *p, int64_t t0_ns);
/* The KV_SAMPLE events of one process as results.json's "kv_timeline" object: a serving run's
 * scheduler steps, or a single sequence's decode steps where its KV memory changed; NULL
 * when it sent none. */
struct cJSON *sv_kv_timeline_json(const rn_proc *p, int64_t t0_ns);
/* The KV timeline as CSV (t_ms since t0_ns, step, tokens, bytes, sequences); *out is malloc'd,
 * NULL when the process sent no KV_SAMPLE. */
char *sv_timeline_csv(const rn_proc *p, int64_t t0_ns, size_t *len);
/* The per-request export (requests.jsonl) is every target's: harness/report/reqlog.h. */

#endif
