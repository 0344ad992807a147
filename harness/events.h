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
 *   COUNTER * K             name, unit, value: the modules' own counters
 *   DONE             [ack]  everything measured                    ("end" snapshot)
 *   ERROR                   name = message; the worker exits non-zero after it
 *   REGION                  any time: a = address, b = length, name = region ("weights", "kv",
 *                           "scratch"), as the engine named it; the parent uses it where the
 *                           kernel cannot name anonymous mappings (no CONFIG_ANON_VMA_NAME)
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
} bench_ev_type;

typedef struct bench_event {
    uint32_t type;          /* bench_ev_type */
    uint32_t flags;         /* BENCH_EV_ACK */
    int64_t t_ns;           /* CLOCK_MONOTONIC, ns */
    int64_t a, b;           /* per type, see above */
    double value;           /* COUNTER */
    char name[96];          /* COUNTER name, ERROR message (NUL-terminated, truncated) */
    char unit[16];          /* COUNTER unit */
} bench_event;              /* 152 bytes < PIPE_BUF: one write() is atomic */

_Static_assert(sizeof(bench_event) <= 512, "an event must stay far below PIPE_BUF");

#endif
