/* The http target (harness/scenario/target.h): one repetition whose requests
 * go to a server behind an OpenAI-compatible API instead of the engine in this process.
 *
 *   launched   the server command is started (its fds past stderr closed; it dies with
 *              the worker), TARGET names its pid, HELLO [ack] is its start; LOAD_START, then
 *              /health is polled until 200 and LOAD_END [ack] is its load: the parent's
 *              snapshots of the server's memory bracket the load as a worker's do. After DONE
 *              [ack] (its end snapshot: peak RSS) it gets SIGTERM, then SIGKILL.
 *   pid        a server left running, measured by that pid; latency only without one.
 *
 * The requests are the ones the in-process engine runs: the inference workload's prompt
 * ids (its text through the model's tokenizer, or BOS and 3, 4, 5 ...) as one request of
 * `generate` tokens, or a serving workload's requests (harness/child/serve.h,
 * sv_make_requests, the same seed). The events are the engine's (events.h), stamped with
 * the client's times: inference PREFILL_START at sending, PREFILL_END at the first token,
 * TOKEN at each arrival; serving SERVE_START, a REQUEST per request that succeeded, SERVE_END;
 * and REQ_TOKEN for every arrival, REQ_FAIL for every failed request. None of those waits
 * for an ack: a snapshot in the middle of a stream would delay the tokens behind it.
 *
 * A repetition fails (ERROR, exit 1), with the reason, when any request failed (of any kind
 * of httpc.h: an answer that contradicts itself or the request, e.g. no token, more tokens
 * than max_tokens, usage that disagrees, fails as surely as a refused connection; the kinds
 * and their counts lead the reason: "3 of 16 requests failed (2 no_tokens, 1 redirect)"),
 * when a launched server never became ready or exited before the end.
 */
#ifndef BENCH_HTTP_WORKER_H
#define BENCH_HTTP_WORKER_H

#include "harness/child/wtarget.h"

/* The http target (wtarget.h): prepare launches or finds the server and waits for its
 * health, run sends the requests, collect sends the http.* counters and fails the run on
 * any failed request or a server that died; close stops a launched server. The settings
 * are the spec's, typed (ws_engine.target_http: harness/scenario/target.h). */
extern const wt_target_i wt_http;

#endif
