/* bench serve's engine thread: concurrent HTTP requests batched on the serving scheduler
 * (engines/core/runtime/sched.h, opened: requests come and go while it runs).
 *
 *   a connection's thread                    the engine thread (the only one that touches the engine)
 *   hb_submit: a job into the FIFO   ---->   feeds the FIFO into the scheduler's free slots
 *   hb_next: waits for token k       <----   one sched_advance (admissions, one batched decode),
 *                                            then every job's new tokens published under mu
 *   hb_release: done with the job    ---->   a job still queued or running is cancelled: its
 *                                            sequence and KV go back (sched_cancel)
 *
 * Glossary
 *   job       one completion request: its prompt ids, max_tokens, sampling, and the tokens
 *             made so far; owned by its connection and by the engine thread (two refs)
 *   queued    in the FIFO, not yet in the scheduler (its slots are max_batch x 2: the
 *             scheduler's own queue sees a batch's worth of candidates for KV room)
 *   live      in the scheduler: waiting there for a sequence and KV room, or running
 *   publish   after each step, under mu: tokens made become visible to hb_next, finished
 *             jobs leave the scheduler, the metrics are brought up to date
 *
 * Invariants (under mu): every job is queued, live or ended; queued + live jobs hold the
 * engine thread's ref; a job's published tokens (n_toks) never exceed those made.
 *
 * Greedy ids do not depend on the batch: the scheduler decodes each sequence at its own
 * positions with the same arithmetic whatever else runs (tests/test_sched.c
 * test_batch_matches_alone; tests/test_serve_batch.c over HTTP).
 *
 * Stopping (hb_stop): no job is taken any more (503), the queued and the live that have
 * no token yet end refused (503), the running end at their next token (finish "length").
 */
#ifndef BENCH_BATCHER_H
#define BENCH_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "engines/core/runtime/engine.h"

typedef struct hb_opts {
    int max_batch;              /* requests running at once at most, >= 1 (at most the engine's sequences) */
    double reserve_output;      /* sched_opts.reserve_output: 0 (vLLM: admit on the prompt alone) */
    int eos;                    /* the token that finishes a request without ignore_eos; -1: none */
    /* (test hooks) gather: the first step waits until max_batch jobs are in, so that a test
     * sees them batched whatever the machine's speed; step_delay_ms: sleep after each step */
    int gather;
    int step_delay_ms;
    /* (optional) after every step: nonzero when the model can no longer be trusted (server.h) */
    int (*model_fault)(char *msg, size_t len);
} hb_opts;

typedef struct hb_params {
    const int *prompt;          /* (n_prompt) ids, copied by hb_submit */
    int n_prompt, max_new;
    float temperature, topp;    /* temperature 0: greedy */
    uint64_t seed;
    int ignore_eos;
} hb_params;

typedef struct hb_batcher hb_batcher;
typedef struct hb_job hb_job;

/* Opens the scheduler on e (created with at least max_batch sequences; borrowed) and starts
 * the engine thread. 0, or -1 with err. */
int hb_create(engine *e, const hb_opts *o, hb_batcher **out, char *err, size_t errlen);
/* Stops (hb_stop), waits for the jobs to leave the engine, joins its thread. b may be NULL. */
void hb_destroy(hb_batcher *b);
/* From now on no job is taken; see the header comment. */
void hb_stop(hb_batcher *b);
/* NULL, or why the batcher took no more jobs (opts.model_fault's message); stable once set. */
const char *hb_failed(hb_batcher *b);

/* A job for p, queued; NULL with *code (503: stopping, 500: out of memory) and msg. */
hb_job *hb_submit(hb_batcher *b, const hb_params *p, int *code, char *msg, size_t len);

enum { HB_TOKEN = 1, HB_END = 0, HB_ERROR = -1, HB_GONE = -2 };
/* Waits for the job's token k (0: the first generated). HB_TOKEN with *tok and *last (1: the
 * job's last token); HB_END: it ended with fewer tokens; HB_ERROR: it failed (hb_job_error);
 * HB_GONE: the client at fd (>= 0; -1: not watched) hung up while it waited. */
int hb_next(hb_job *j, int k, int fd, int *tok, int *last);
/* The HTTP status of a failed job (400, 500, 503) and its message. */
int hb_job_error(hb_job *j, char *msg, size_t len);
int hb_job_eos(hb_job *j);      /* 1: it ended at EOS (finish_reason "stop") */
/* The connection has what it asked for before the job's end (a stop string or stop id came):
 * the job leaves the engine as a cancelled one does (its KV freed), counted a success. The
 * connection still releases it. */
void hb_finish(hb_job *j);
/* The connection is done with j: cancelled when still queued or live. j may be NULL. */
void hb_release(hb_job *j);

/* Jobs running (holding a sequence) and waiting (queued, or live without a sequence). */
void hb_load(hb_batcher *b, int *running, int *waiting);
/* The metrics in Prometheus' text format 0.0.4 (docs/http.md); NULL when out of memory. Free it. */
char *hb_metrics(hb_batcher *b);

#endif
