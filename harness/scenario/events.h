/* The worker -> parent protocol of `bench run`.
 *
 * A worker (`bench worker --spec FILE --events FD --ack FD`) writes fixed-size
 * bench_event records to the events pipe. Each record is smaller than PIPE_BUF,
 * so a write is atomic and the parent never sees half a record.
 *
 * Order of one repetition (t_ns is CLOCK_MONOTONIC, comparable across processes):
 *   HELLO            [ack]  the worker runs; nothing loaded yet ("start" snapshot)
 *   LOAD_START              just before engine_create
 *   LOAD_END         [ack]  weights loaded, KV reserved            ("load" snapshot)
 *   PREFILL_START           just before the prompt's forward pass
 *   PREFILL_END      [ack]  a = prompt tokens, b = first token id ("prefill" snapshot)
 *   DECODE_START            after the ack: decode timing starts here
 *   TOKEN * N               a = index (1..), b = token id; one per decoded token
 *   DECODE_END
 *   COUNTER * K             name, unit, value: the modules' own counters; a = the class they
 *                          declare (BENCH_CTR_*, engines/abi/module.h), b = the better direction
 *   DONE             [ack]  everything measured                    ("end" snapshot)
 *   ERROR                   name = message, a = its code (BENCH_ERR_*, engines/abi/module.h: out
 *                           of memory, not found, refused...); the worker exits non-zero after it
 *   REGION                  any time: a = address, b = length, name = region ("weights", "kv",
 *                           "scratch"), as the engine named it; the parent uses it where the
 *                           kernel cannot name anonymous mappings (no CONFIG_ANON_VMA_NAME)
 *
 * A serving run (the scenario's workload has "requests", harness/child/serve.h) has no
 * PREFILL_*, DECODE_* or TOKEN events; between LOAD_END and the counters it sends:
 *   SERVE_START             the scheduler starts; a = requests
 *   KV_SAMPLE * steps       after each scheduler step: a = step, b = positions run so far
 *                           (prefill + decode); x[BENCH_KVS_*]: KV bytes reserved, live,
 *                           cached and wasted (engine.h: engine_kv_memory), requests running
 *                           (at most, in the step), in the step's decode batch, and waiting
 *   REQUEST * requests      one per finished request (t_ns: its end): a = its index, b = tokens
 *                           generated; x[BENCH_RQ_*]: arrival, first admission and first token
 *                           (CLOCK_MONOTONIC ns), prompt tokens, prefix positions reused,
 *                           positions prefilled, preemptions, waited (1: stayed queued once),
 *                           turn (0: a conversation's first) and conversation (sessions; else
 *                           0 and the request's index)
 *   REQ_TOKENS * k          (the worker spec's requests.token_times) after a REQUEST, its tokens'
 *                           times, BENCH_REQ_TOKENS_PER_EVENT an event: a = the request's
 *                           index, b = the first token's index, x[0] = how many, x[1 ..] the
 *                           times (CLOCK_MONOTONIC ns)
 *   SERVE_END               every request finished
 *
 * A run against an http target (harness/child/http_worker.h) sends the same events, timed
 * from the client's side, and three of its own:
 *   TARGET                  before HELLO: a = the pid whose memory the parent reads from then
 *                           on (the server's), b = where it came from (BENCH_TGT_*), name =
 *                           "tree" where the memory is that pid's and all its descendants' summed
 *   REQ_TOKEN               a = request index, b = token id (-1: the server sent none);
 *                           t_ns = when it arrived; every token of every request, in order
 *   REQ_FAIL                a = request index, b = the failure (harness/net/httpc.h HC_ERR_*),
 *                           name = what happened
 *   SCRAPE                  (the target's "metrics" block, harness/child/scrape.h) a read of the
 *                           server's /metrics, t_ns when its answer came: per series one event,
 *                           a = its index in the block, b = BENCH_SCR_* (how it was found),
 *                           value, name = the series; a failed read one event, a = -1, name =
 *                           why. Sent from the scraper's thread, between LOAD_END and DONE.
 *   REQ_END                 every request, ok or failed, as it ends (t_ns): a = request index,
 *                           b = the failure (HC_OK or HC_ERR_*); x[BENCH_RE_*]: when it was due
 *                           and sent, its first token (0: none), prompt and output tokens as
 *                           counted and as the server's usage reported them (-1: none), the
 *                           HTTP status (0: no answer). The per-request export's source
 *                           (harness/report/reqlog.h)
 *
 * [ack]: the event carries BENCH_EV_ACK and the worker then blocks reading one
 * byte from the ack pipe. The parent reads /proc/<pid>/smaps, the fault counts
 * and the perf counters at exactly that boundary and then writes the byte.
 * Every timed interval starts after an ack and ends at the next event, so the
 * wait is never inside a measurement. With `processes: N` the parent acks a
 * boundary only when every live worker has reached it (a barrier), so the
 * snapshots of the N processes describe the same moment.
 */
#ifndef BENCH_EVENTS_H
#define BENCH_EVENTS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define BENCH_EV_ACK 1u     /* flags: the worker waits for one byte on the ack pipe */

typedef enum bench_ev_type {
    BENCH_EV_HELLO = 1,
    BENCH_EV_LOAD_START,
    BENCH_EV_LOAD_END,
    BENCH_EV_PREFILL_START,
    BENCH_EV_PREFILL_END,
    BENCH_EV_DECODE_START,
    BENCH_EV_TOKEN,
    BENCH_EV_DECODE_END,
    BENCH_EV_COUNTER,
    BENCH_EV_DONE,
    BENCH_EV_ERROR,
    BENCH_EV_REGION,
    BENCH_EV_SERVE_START,
    BENCH_EV_KV_SAMPLE,
    BENCH_EV_REQUEST,
    BENCH_EV_SERVE_END,
    BENCH_EV_REQ_TOKENS,
    BENCH_EV_TARGET,
    BENCH_EV_REQ_TOKEN,
    BENCH_EV_REQ_FAIL,
    BENCH_EV_SCRAPE,
    BENCH_EV_REQ_END,
} bench_ev_type;

/* b of a TARGET: whose memory is read. LATENCY: none (a server left running, no pid given) */
enum { BENCH_TGT_LATENCY, BENCH_TGT_LAUNCHED, BENCH_TGT_PID };

/* b of a SCRAPE: the series by its name, by its fallback (an older server's name), absent from
 * the body (value NaN), or its name alone, sent once per series before the first read (so that a
 * series never read is still reported) */
enum { BENCH_SCR_NAME, BENCH_SCR_FALLBACK, BENCH_SCR_ABSENT, BENCH_SCR_DECLARE };

/* x[] of a KV_SAMPLE */
enum { BENCH_KVS_RESERVED, BENCH_KVS_LIVE, BENCH_KVS_CACHED, BENCH_KVS_WASTED, BENCH_KVS_RUNNING, BENCH_KVS_BATCH,
       BENCH_KVS_WAITING, BENCH_KVS_COUNT };
/* x[] of a REQUEST */
enum { BENCH_RQ_ARRIVAL_NS, BENCH_RQ_ADMIT_NS, BENCH_RQ_FIRST_NS, BENCH_RQ_PROMPT, BENCH_RQ_PREFIX_REUSED,
       BENCH_RQ_PREFILLED, BENCH_RQ_PREEMPTIONS, BENCH_RQ_WAITED, BENCH_RQ_TURN, BENCH_RQ_SESSION, BENCH_RQ_COUNT };

/* x[] of a REQ_END */
enum { BENCH_RE_ARRIVAL_NS, BENCH_RE_SENT_NS, BENCH_RE_FIRST_NS, BENCH_RE_PROMPT, BENCH_RE_PROMPT_REPORTED, BENCH_RE_OUTPUT,
       BENCH_RE_OUTPUT_REPORTED, BENCH_RE_HTTP_STATUS, BENCH_RE_COUNT };

typedef struct bench_event {
    uint32_t type;          /* bench_ev_type */
    uint32_t flags;         /* BENCH_EV_ACK */
    int64_t t_ns;           /* CLOCK_MONOTONIC, ns */
    int64_t a, b;           /* per type, see above */
    double value;           /* COUNTER */
    union {
        struct {
            char name[224]; /* COUNTER name, ERROR message (NUL-terminated, truncated): room for a
                             * failed request's kind and counts and a server's message cut to 160 */
            char unit[16];  /* COUNTER unit */
        };
        int64_t x[14];      /* KV_SAMPLE, REQUEST, REQ_END: the fields above */
    };
} bench_event;              /* 280 bytes < PIPE_BUF: one write() is atomic */

#define BENCH_REQ_TOKENS_PER_EVENT 13     /* x[1 .. 13] of a REQ_TOKENS */

_Static_assert(BENCH_KVS_COUNT <= 14 && BENCH_RQ_COUNT <= 14 && BENCH_RE_COUNT <= 14, "the serving fields fit the event's x[]");

_Static_assert(sizeof(bench_event) <= 512, "an event must stay far below PIPE_BUF");
_Static_assert(sizeof(bench_event) == 280, "the size the comment above gives");

/* One event as both workers (inference, allocators) build it: zeroed, so the unused
 * bytes that cross the pipe are defined; name and unit truncated to their fields. */
static inline bench_event bench_event_make(uint32_t type, int ack, int64_t t_ns, int64_t a, int64_t b,
                                           const char *name, const char *unit, double value) {
    bench_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    ev.flags = ack ? BENCH_EV_ACK : 0;
    ev.t_ns = t_ns;
    ev.a = a;
    ev.b = b;
    ev.value = value;
    if (name) snprintf(ev.name, sizeof(ev.name), "%s", name);
    if (unit) snprintf(ev.unit, sizeof(ev.unit), "%s", unit);
    return ev;
}

#endif
