/* The per-request export, one schema for every target: timelines/v<V>-r<R>-p<P>-requests.jsonl,
 * one JSON object a line, a line per request in the order they ended (docs/serving.md,
 * "Per-request export"). Made from the runner's record of one process (rn_proc):
 *
 *   engine, serving      the scheduler's REQUEST events (and REQ_TOKENS)
 *   engine, one sequence its PREFILL_*, TOKEN and DECODE_END events: one line
 *   http                 REQ_END (every request, failed ones too) and REQ_TOKEN, REQ_FAIL
 *
 * Every line has: id, target, arrival_ms, sent_ms, first_token_ms, end_ms (ms since t0_ns;
 * null where it never happened), prompt_tokens and output_tokens (as counted by bench),
 * prompt_tokens_reported and output_tokens_reported (as the server's usage said; the
 * engine's own figures for the engine; null where none came), failure (null, or a kind of
 * harness/net/httpc.h) and, failed, message and http_status; token_ms (every token's time,
 * for http every streamed event that carried tokens) where the run has token times. A
 * serving engine's line also has session, turn, admit_ms, prefix_reused, prefilled,
 * preemptions and waited.
 */
#ifndef BENCH_REQLOG_H
#define BENCH_REQLOG_H

#include <stddef.h>
#include <stdint.h>

#include "harness/parent/runner.h"

/* The lines (malloc'd, *len bytes); NULL when the process ran no request or out of memory.
 * target names the target in every line ("engine", "http"). */
char *rl_requests_jsonl(const rn_proc *p, const char *target, int64_t t0_ns, size_t *len);

#endif
