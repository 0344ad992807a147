/* Serving traffic, the worker's half: the requests of a workload with a trace or with
 * multi-turn sessions, and the arrival processes (harness/scenario/traffic.h says what the
 * scenario asks for; harness/child/serve.h runs them).
 *
 * A trace's row i is request i: prompt and output lengths scaled and capped
 * (tf_scale_len), sent at the row's time / time_scale (or as an arrival process says).
 * With hash ids (Mooncake) the prompt is their blocks in order, each tf_block_tokens
 * long (the last one takes what is left): a block's ids are drawn from its hash id and
 * the position in the block alone, so two rows with the same ids start with the same
 * tokens and the KV module's prefix cache sees the trace's sharing. Position 0 is BOS.
 * Without hash ids every prompt is BOS and ids drawn from the seed.
 *
 * Sessions: conversation c has T turns (uniform over turns), each turn a request of
 * prompt_len new ids and output_len tokens out that follows the previous turn
 * (sched_req.follows) after a think time uniform over think_ms; requests are numbered
 * conversation by conversation, turn by turn. First turns arrive as the arrival says.
 */
#ifndef BENCH_TRAFFIC_GEN_H
#define BENCH_TRAFFIC_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "harness/child/serve_reqs.h"
#include "harness/scenario/scenario.h"

/* Whether rq's requests come from here (a trace or sessions) rather than sv_make_requests. */
int tg_owns(const sc_requests *rq);
/* The requests of a trace or of sessions, as sv_make_requests. */
int tg_make_requests(const sc_requests *rq, int vocab, int bos, uint64_t sampler_seed, sv_reqs *out, char *err, size_t errlen);
/* Sets the arrival times of the requests that follow none from rq's arrival process
 * ({"process": ...}); nothing without one. 0, or -1 with err. */
int tg_arrivals(const sc_requests *rq, sv_reqs *r, char *err, size_t errlen);

#endif
