/* Serving runs: many requests through the scheduler (engines/core/runtime/sched.h) in one
 * worker, for a scenario whose workload has "requests" (docs/scenarios.md). Three halves,
 * one per process side:
 *
 *   spec    harness/scenario/worker_spec.h: the parent puts the requests into the worker spec
 *           (sv_spec_add), the worker reads them back (sv_spec_read);
 *   worker  this file: the worker sizes the engine by the KV budget, makes the
 *           requests (sv_make_requests: the same ones for every variant, from the
 *           seed), runs the scheduler and streams events (harness/scenario/events.h):
 *           SERVE_START, a KV_SAMPLE per step, a REQUEST per finished request, SERVE_END;
 *   report  harness/report/serve_report.h: from the runner's record (rn_proc), sv_metrics
 *           derives the serve_* metrics, sv_proc_json and sv_timeline_csv write them out.
 *
 * A request: the shared prefix when it is one of the requests sharing it (BOS, then
 * ids drawn once), then its own prompt_len ids (BOS first when there is no prefix),
 * ids uniform over 3 .. vocab-1; at most output_len tokens; its sampler seeded with
 * the workload's seed + its index. Arrivals: all at 0, or a Poisson process.
 *
 * Metrics (per repetition, over its requests):
 *   serve_requests serve_s serve_output_tokens serve_prompt_tokens
 *   serve_output_tok_s serve_total_tok_s (prompt + output tokens per second)
 *   serve_ttft_{p50,p99}_ms (arrival to first token)  serve_tpot_{p50,p99}_ms
 *   ((end - first token) / (tokens - 1), requests of 2 tokens or more)
 *   serve_latency_{p50,p99}_ms (arrival to end)  serve_goodput_pct (share meeting every target)
 *   serve_itl_{p50,p99}_ms (every gap between two tokens; with token times, metrics "tokens")
 *   serve_prefix_hit_pct, serve_prefix_hit_turnN_pct (sessions: per turn; docs/serving.md)
 *   serve_peak_seqs serve_peak_waiting serve_waited serve_preemptions serve_steps
 *   serve_prefill_tokens (positions computed) serve_prefix_reused_tokens (attached instead)
 *   serve_kv_{reserved,live,cached,wasted}_peak_mib (engine_kv_memory's, at their peaks)
 *   serve_kv_{live,wasted}_mean_pct (of reserved, mean over the steps)
 *   minflt_serve majflt_serve (from the load snapshot to the end)
 */
#ifndef BENCH_SERVE_H
#define BENCH_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "engines/core/runtime/engine.h"
#include "engines/core/runtime/sched.h"
#include "harness/scenario/events.h"
#include "harness/scenario/scenario.h"
#include "harness/child/serve_reqs.h"

/* ---- the requests ---- */

/* The requests of a workload for a model of `vocab` ids, deterministic from rq->seed;
 * sampler seeds from sampler_seed. Returns 0, or -1 with err. */
int sv_make_requests(const sc_requests *rq, int vocab, int bos, uint64_t sampler_seed, sv_reqs *out,
                     char *err, size_t errlen);

/* ---- the worker ---- */

/* Sets the engine spec's sequences and KV budget for these requests. */
void sv_engine_spec(const sc_requests *rq, engine_spec *es);

typedef struct sv_sink {
    void (*send)(void *user, const bench_event *ev);    /* ev->t_ns is set */
    void *user;
} sv_sink;

/* Makes the requests and serves them on e, sending the events of events.h to sink.
 * temperature/topp/seed: the workload's sampling. Returns 0, or -1 with err. */
int sv_serve(engine *e, const sc_requests *rq, double temperature, double topp, uint64_t seed, const sv_sink *sink,
             char *err, size_t errlen);

#endif
