/* The serving scheduler: continuous batching of many requests over one engine
 * (engine.h, created with max_seqs sequences and usually a KV budget).
 *
 * Glossary
 *   request   a prompt, the most tokens to generate, an arrival time and a sampler seed
 *   waiting   arrived and not running: the queue, first come first served; a preempted
 *             request goes back to its head
 *   running   holds one of the engine's sequences and the KV of its positions
 *   step      admissions, then one batched decode of every running request
 *   admit     the head of the queue takes a free sequence, attaches the longest prefix
 *             the KV module has cached (engine_share_prefix), reserves room for the
 *             rest and is prefilled (one sequence at a time, batched over its tokens),
 *             which gives its next token. When the KV module has no room it stays at
 *             the head and admission stops for this step: requests wait, never dropped.
 *   decode    every running request's last token, each at its own position, in one
 *             forward pass (engine_forward_batch)
 *   preempt   a running request whose next position finds no room makes the newest
 *             running request give its KV back; that request keeps its tokens and is
 *             prefilled again from its prompt and tokens when admitted again (vLLM's
 *             recompute preemption; the prefix cache usually still holds most of it).
 *             After a preemption nothing new is admitted while requests run, until one
 *             finishes: memory is short, and a newcomer would only be preempted again.
 *   reserve   (reserve_output r, shared pools only) a request is admitted only when the
 *             pool's room (engine_kv_memory: reserved - live - wasted) covers its new
 *             positions plus r x the tokens it may still generate, plus r x those of
 *             every running request: r 0 admits on the prompt alone (vLLM), r 1 never
 *             preempts (every request's worst case is kept free), in between is SGLang's
 *             new_token_ratio, fixed.
 *   finish    at the request's max_new tokens or at EOS; its sequence is released
 *
 *   turn      a request that follows another (sched_req.follows) arrives think_ns after
 *             it finishes, its prompt the other's prompt and tokens and then its own ids:
 *             a multi-turn conversation, whose earlier turns the prefix cache may still hold
 *
 * Invariants: not yet arrived + waiting + running + finished == n; the running
 * requests hold distinct sequences; a request's positions are its prompt and its
 * tokens but the last (the next input), and they fit the engine's context.
 *
 * Times are CLOCK_MONOTONIC in ns, comparable with harness/scenario/events.h timestamps.
 */
#ifndef BENCH_SCHED_H
#define BENCH_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct sched_req {
    const int *prompt;      /* (n_prompt) token ids, borrowed for the scheduler's life */
    int n_prompt;           /* >= 1 */
    int max_new;            /* tokens generated at most, >= 1 */
    int64_t arrival_ns;     /* after sched_run starts; 0: at once. Ignored with follows */
    uint64_t seed;          /* its sampler's seed */
    /* (optional) a conversation's next turn: 1 + the index of the earlier request whose
     * turn this follows (0: none). It is sent think_ns after that request finishes, and
     * its prompt is that request's prompt and tokens followed by these n_prompt ids. */
    int follows;
    int64_t think_ns;
    /* (optional) its own sampling instead of sched_opts' (bench serve: each HTTP request's) */
    int own_sampling;       /* 1: temperature and topp below */
    float temperature, topp;
    int ignore_eos;         /* 1: finishes at max_new only, whatever sched_opts.eos */
} sched_req;

/* One step, reported when it ends. */
typedef struct sched_step {
    int step;               /* 0, 1, ... */
    int64_t t_ns;
    int running;            /* requests holding a sequence during the step, at most (after admission) */
    int batch;              /* requests in the step's decode (0: none) */
    int waiting;            /* arrived and not running, at the step's end */
    uint64_t tokens;        /* positions run through the model so far: prefill + decode */
    engine_kv_mem kv;       /* engine_kv_memory after the step */
} sched_step;

/* One request, reported when it finishes. */
typedef struct sched_done {
    int req;                /* index into the requests */
    int64_t arrival_ns, admit_ns, first_ns, end_ns;    /* admit: its first admission */
    int n_prompt, n_out;    /* n_prompt: the whole prompt (a turn's: the conversation so far and its own) */
    int prefix_reused;      /* positions attached from the prefix cache, over its admissions */
    int prefill_tokens;     /* positions it prefilled, over its admissions (recomputation included) */
    int preemptions;
    int waited;             /* 1: it stayed in the queue at the end of a step at least once */
    const int64_t *token_ns;    /* (n_out) when each token was sampled, with sched_opts.token_times; else
                                 * NULL. Valid during on_done only */
    const char *error;      /* NULL; an open scheduler's request dropped unrun: why (it does not fit
                             * the KV cache even alone). Valid during on_done only */
} sched_done;

typedef struct sched_opts {
    int eos;                /* the token that finishes a request; -1: none */
    float temperature, topp;    /* temperature 0: greedy */
    int max_batch;          /* running requests at most; 0: the engine's max_seqs */
    double reserve_output;  /* 0 .. 1: share of the tokens still to generate kept free at admission (see reserve) */
    int token_times;        /* 1: keep every token's time for on_done (sched_done.token_ns) */
    int max_inflight;       /* closed loop: requests sent and not finished at most; a request due
                             * while that many are in flight is sent when one finishes, and its
                             * arrival_ns is then. 0: open loop */
    /* (optional) called after every step, at every finished request, and at every token
     * sampled (last: 1 when it finishes the request; on_done follows) */
    void (*on_step)(void *user, const sched_step *st);
    void (*on_done)(void *user, const sched_done *d);
    void (*on_token)(void *user, int req, int token, int last);
    void *user;
} sched_opts;

typedef struct sched_stats {
    int steps;
    int peak_running;       /* concurrent sequences at most */
    int peak_waiting;       /* queue length at the end of a step, at most */
    int waited;             /* requests that stayed in the queue at the end of a step */
    int preemptions;
    uint64_t prefill_tokens;    /* positions prefilled (prompts, and recomputation after preemption) */
    uint64_t prefix_reused;     /* positions attached from the prefix cache instead */
    uint64_t decode_tokens;     /* tokens of the batched decode steps */
    uint64_t output_tokens;     /* every generated token, first tokens included */
    int64_t t_start_ns, t_end_ns;
    engine_kv_mem kv_peak;  /* each field's maximum over the steps */
} sched_stats;

typedef struct sched sched;

/* Checks every request against the engine (ids in the vocabulary, prompt + max_new - 1
 * positions within the context) and copies what it needs; reqs[i].prompt stays the
 * caller's. Returns 0, or -1 with err naming the request. */
int sched_create(engine *e, const sched_req *reqs, int n, const sched_opts *o, sched **out, char *err, size_t errlen);
void sched_destroy(sched *s);       /* s may be NULL */

/* Runs until every request has finished (sleeping while none has arrived yet).
 * -1 with err on an engine failure, or a request the KV cache cannot hold even alone. */
int sched_run(sched *s, char *err, size_t errlen);

/* The tokens request req generated (*n of them); valid until sched_destroy. */
const int *sched_output(const sched *s, int req, int *n);
const sched_stats *sched_get_stats(const sched *s);

/* ---- An open scheduler: requests come and go while it runs (bench serve) ----
 *
 * sched_open makes one with room for `slots` requests at once (waiting and running) and
 * none yet, its clock started. Each arrival is sched_submit'ed (it is then waiting, as a
 * request of sched_run that arrived; its prompt is copied, follows must be 0) and gets a
 * slot, which is its index in the callbacks and sched_output. sched_advance runs one step
 * (nothing when no request waits or runs). sched_cancel drops a waiting or running request
 * (its sequence and KV given back; no on_done). sched_retire frees a finished or cancelled
 * request's slot for a later submit. A request that does not fit the KV cache even alone is
 * dropped at its admission with on_done's error set, instead of failing the step.
 * Not thread-safe: one thread calls all of these. */
int sched_open(engine *e, int slots, const sched_opts *o, sched **out, char *err, size_t errlen);
/* The slot, or -1 with err (no free slot, or the request's own error as sched_create's). */
int sched_submit(sched *s, const sched_req *r, char *err, size_t errlen);
int sched_advance(sched *s, char *err, size_t errlen);     /* 0, or -1 with err: an engine failure */
void sched_cancel(sched *s, int slot);
void sched_retire(sched *s, int slot);
int sched_is_running(const sched *s, int slot);          /* 1: it holds a sequence */

#endif
