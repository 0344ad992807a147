/* Serving traffic as production sees it, the scenario's half (docs/serving.md): the keys
 * of workload.requests beyond the synthetic ones, parsed and validated before anything
 * runs, carried to the worker in its spec, and turned into requests there
 * (harness/child/traffic_gen.h).
 *
 *   "trace": {"file": PATH, "format": NAME,          a row of the trace formats' table (trace.h; bench list)
 *             "requests": N, "seconds": S,           the window: first N rows, first S s; a
 *                                                    trace of more than TF_MAX_REQUESTS rows needs one
 *             "time_scale": X,                       replay X times faster (default 1)
 *             "length_scale": X,                     prompt and output lengths times X (default 1)
 *             "max_prompt": N, "max_output": N}      caps after scaling (Mooncake hash ids of
 *                                                    blocks past max_prompt are dropped as read)
 *       Replaces count, prompt_len, output_len and shared_prefix: the requests are the
 *       trace's rows, at their timestamps (an "arrival" process given as well replaces the
 *       timestamps; a trace without timestamps, sharegpt, arrives as "arrival" says, all
 *       at once by default). Mooncake's hash_ids become blocks of round(512 x
 *       length_scale) prompt tokens, the same ids the same tokens, so the KV modules'
 *       prefix sharing meets the trace's sharing pattern.
 *   "arrival": {"process": "poisson" | "gamma" | "constant" | "ramp" | "all",
 *               "rate": R, "burstiness": B, "rate_end": R2}   (harness/scenario/arrival.h)
 *       The older {"poisson_rate": R} and "all" stay as they were.
 *   "concurrency": N    closed loop: at most N requests in flight (sent and not finished);
 *       a request due while N are in flight is sent when one finishes, and its latency
 *       counts from then (vLLM's --max-concurrency)
 *   "sessions": {"turns": {"fixed": N} | {"uniform": [LO, HI]},
 *                "think_ms": {"fixed": MS} | {"uniform": [LO, HI]}}
 *       count conversations instead of count requests: each turn is a request whose
 *       prompt is the whole conversation so far (every earlier turn's prompt and answer)
 *       followed by a new message of prompt_len tokens; it is sent think_ms after the
 *       previous answer ends. The first turns arrive as "arrival" says.
 *   "sweep": {"rates": [R, ...],                         every variant at each rate,
 *             "concurrency": [N, ...],                   and/or at each cap, every request due at once,
 *             "knee": {"lo": R, "hi": R, "resolution": 0.05, "points": 12, "max_repetitions": 8},
 *             "target_pct": 90,                          goodput target (needs "targets")
 *             "warmup_requests": N, "min_requests": N, "min_seconds": S,
 *             "windows": 4, "steady_tolerance": 0.25}    (harness/report/sweep.h)
 *       What `bench sweep` runs: the scenario at each offered rate (the arrival process
 *       given, Poisson by default), each point `repetitions` fresh workers. bench run
 *       runs the scenario as written and ignores it.
 */
#ifndef BENCH_TRAFFIC_H
#define BENCH_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>

#include "harness/scenario/arrival.h"
#include "harness/scenario/scenario_types.h"
#include "harness/scenario/trace.h"

struct cJSON;

#define TF_MAX_RATES 32
#define TF_MAX_REQUESTS 100000      /* a trace's requests, at most (a scenario's count's limit) */
/* Bytes of a trace in the worker spec, at most (its rows and hash ids as JSON numbers).
 * The parent writes the spec and every worker parses it whole into a cJSON tree of about
 * 64 bytes a number, ~5x the text: 64 MiB of text is ~300 MiB in each. The whole Mooncake
 * conversation trace (12,031 rows, 13.7k prompt tokens a row on average: ~27 ids) makes
 * ~3 MB; the bound leaves 20x that, and refuses the 218 MB spec of 1,000 rows of 2^24
 * tokens given without max_prompt. */
#define TF_MAX_SPEC_BYTES (64ull << 20)

typedef struct tf_traffic {
    int has_arrival;            /* 1: arrival was given as {"process": ...} */
    ar_spec arrival;
    int concurrency;            /* requests in flight at most; 0: open loop */
    /* trace: NULL when none */
    tr_trace *trace;
    char *trace_file;           /* as written */
    double time_scale;          /* > 0; the replay's times are the trace's / time_scale */
    double length_scale;        /* > 0 */
    int max_prompt, max_output; /* tokens after scaling, at most; 0: no cap */
    /* sessions: 0 when none */
    int sessions;
    int turns_lo, turns_hi;     /* turns of a conversation, uniform over [lo, hi] */
    double think_lo_ms, think_hi_ms;    /* think time before the next turn, uniform over [lo, hi] */
    /* sweep: what `bench sweep` does with the scenario (bench run ignores it); has_sweep 0: none */
    int has_sweep;
    int n_rates;
    double rates[TF_MAX_RATES];         /* requests/s, ascending: every variant at each */
    int n_conc;
    int conc[TF_MAX_RATES];             /* closed-loop concurrency caps, ascending: every variant at each */
    double knee_lo, knee_hi;            /* the knee search's range; 0: no search */
    double knee_resolution;             /* stop when hi - lo <= resolution x lo */
    int knee_points, knee_max_reps;
    double target_pct;                  /* goodput target, % of requests within the SLO */
    int warmup_requests, min_requests;
    double min_seconds;
    int windows;
    double steady_tolerance;
} tf_traffic;

/* Parses the traffic keys of the workload.requests object j ("trace", "sessions",
 * "concurrency", and "arrival" when it has "process") into r->traffic, and with a trace
 * sets r->count and r->prompt_len/output_len (as uniform [min, max] of the scaled rows,
 * for the context check). Errors go to errs, "<file>: <JSON path>: ...". Returns 0 or -1. */
int tf_parse(const char *file, sc_errors *errs, const struct cJSON *j, sc_requests *r);
/* Whether j (workload.requests) has a trace: count, prompt_len and output_len are then
 * the trace's. */
int tf_has_trace(const struct cJSON *j);
void tf_free(tf_traffic *t);    /* t may be NULL */

/* The positions of the longest request r can make (its prompt, its output but the last
 * token), for the check against the context. */
long long tf_longest(const sc_requests *r);

/* Bytes of trace t in the worker spec (tf_spec_add's "trace"), an upper bound: each
 * number at its most digits and its separator. */
size_t tf_trace_spec_bytes(const tr_trace *t);
/* Hash ids a row needs at most, with the prompt cap and scale given (cap 0: TR_MAX_TOKENS):
 * ceil(cap / tokens per id). The worker's prompt never reaches a block past them. */
int tf_hash_needed(int max_prompt, double length_scale);

/* ---- sweep points: the scenario's lists and bench sweep's --rates, --concurrency alike ---- */

#define TF_MAX_SWEEP_RATE 1e6       /* requests/s of a sweep point, at most */
#define TF_MAX_SWEEP_CONC 100000    /* requests in flight of a sweep point, at most */

/* Whether v may follow prev (the list's previous point; first: none) in a list of rates
 * (conc 0: [AR_MIN_RATE, TF_MAX_SWEEP_RATE], finite) or of concurrency caps (conc 1: whole
 * numbers 1 .. TF_MAX_SWEEP_CONC), ascending. 0, or -1 with why: "expected ...". */
int tf_point_check(double v, double prev, int first, int conc, char *why, size_t len);
/* A comma-separated list of such points ("0.5,1,2"): 1 .. TF_MAX_RATES of them, each
 * checked by tf_point_check. 0 with v[0 .. *n), or -1 with err naming the entry and its text,
 * or the count and the limit. */
int tf_points_parse(const char *text, int conc, double *v, int *n, char *err, size_t errlen);

/* A trace length scaled and capped: max(1, min(cap, round(len x scale))); cap 0: none. */
int tf_scale_len(int len, double scale, int cap);
/* Prompt tokens per hash id of a scaled trace: max(1, round(block_tokens x scale)). */
int tf_block_tokens(const tr_trace *t, double scale);

/* The worker spec: adds r's traffic (as "traffic", the trace rows inline) to the
 * requests object o; reads it back into r (0), or -1 with err. */
void tf_spec_add(struct cJSON *o, const sc_requests *r);
int tf_spec_read(const struct cJSON *o, sc_requests *r, char *err, size_t errlen);

#endif
