/* bench serve's engine thread: see batcher.h. */
#include "batcher.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engines/core/runtime/sched.h"
#include "util/ut_clock.h"

/* A waiting connection looks at its socket this often: a client that hung up while its
 * request waits for the engine (no token to write, so no write fails) cancels it. */
#define HB_PEER_CHECK_NS (200 * 1000000LL)

/* ======================================================================
 * Metrics: counters and gauges in one table, histograms with fixed buckets
 * ====================================================================== */

enum {
    HB_M_RUNNING, HB_M_WAITING, HB_M_RUNNING_MAX, HB_M_KV_USAGE, HB_M_KV_RESERVED, HB_M_KV_USED, HB_M_KV_CACHED,
    HB_M_KV_WASTED, HB_M_PROMPT, HB_M_GENERATION, HB_M_PREFILL, HB_M_PREFIX_HITS, HB_M_PREFIX_QUERIES,
    HB_M_PREEMPTIONS, HB_M_STEPS, HB_M_DECODE_TOKENS, HB_M_SUCCESS, HB_M_CANCELLED, HB_M_FAILED, HB_M_COUNT
};

static const struct hb_metric {
    int id;
    const char *name, *type, *help;
} hb_table[] = {
    {HB_M_RUNNING, "bench:requests_running", "gauge", "Requests holding a sequence (decoded in every step)."},
    {HB_M_WAITING, "bench:requests_waiting", "gauge", "Requests received and not running: queued, or waiting for KV room."},
    {HB_M_RUNNING_MAX, "bench:requests_running_max", "gauge", "Requests running at once, at most, since the server started."},
    {HB_M_KV_USAGE, "bench:kv_cache_usage_ratio", "gauge", "KV bytes running requests' positions hold over the KV bytes reserved (0 to 1)."},
    {HB_M_KV_RESERVED, "bench:kv_cache_reserved_bytes", "gauge", "KV memory the kv module holds."},
    {HB_M_KV_USED, "bench:kv_cache_used_bytes", "gauge", "KV memory the running requests' positions hold."},
    {HB_M_KV_CACHED, "bench:kv_cache_cached_bytes", "gauge", "KV memory of finished requests' prefixes kept for reuse (evictable)."},
    {HB_M_KV_WASTED, "bench:kv_cache_wasted_bytes", "gauge", "KV memory reserved and unusable (the free tails of partly filled blocks)."},
    {HB_M_PROMPT, "bench:prompt_tokens_total", "counter", "Prompt tokens of the requests admitted."},
    {HB_M_GENERATION, "bench:generation_tokens_total", "counter", "Tokens generated."},
    {HB_M_PREFILL, "bench:prefill_tokens_total", "counter", "Positions prefilled (prompts, and recomputation after preemption)."},
    {HB_M_PREFIX_HITS, "bench:prefix_cache_hits_total", "counter", "Positions attached from the prefix cache instead of prefilled."},
    {HB_M_PREFIX_QUERIES, "bench:prefix_cache_queries_total", "counter", "Positions admitted: prefix cache hits and prefilled."},
    {HB_M_PREEMPTIONS, "bench:num_preemptions_total", "counter", "Running requests that gave their KV back for others (recomputed later)."},
    {HB_M_STEPS, "bench:engine_steps_total", "counter", "Scheduler steps: admissions, then one batched decode."},
    {HB_M_DECODE_TOKENS, "bench:decode_tokens_total", "counter", "Tokens of the batched decodes (over engine_steps_total: the mean batch)."},
    {HB_M_SUCCESS, "bench:request_success_total", "counter", "Sequences that ran to their end (max_tokens, EOS, a stop string or id, or the server stopping); n choices count n."},
    {HB_M_CANCELLED, "bench:request_cancelled_total", "counter", "Requests whose client hung up before their end."},
    {HB_M_FAILED, "bench:request_failure_total", "counter", "Requests refused or failed (stopping, an engine failure, too long for the KV cache)."},
};

/* A paged kv module's blocks by state (kv block's counters kv.blocks_<state>): read from
 * engine_counters at most this often, since that reads every module's counters, the
 * loader's among them. */
#define HB_COUNTERS_NS 1000000000LL
static const char *const hb_block_states[] = {"total", "in_use", "cached", "free"};
enum { HB_BLOCK_STATES = 4 };

#define HB_MAX_BUCKETS 24

typedef struct hb_hist {
    const char *name, *help;
    const double *le;       /* (n) upper bounds, seconds, increasing */
    int n;
    uint64_t count[HB_MAX_BUCKETS];     /* observations in (le[i-1], le[i]] */
    uint64_t total;
    double sum;
} hb_hist;

/* vLLM's buckets (vllm/v1/metrics/loggers.py), TPOT's with three below 10 ms: bench's CPU
 * engine decodes a token in a few ms. */
static const double hb_ttft_le[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                                    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double hb_tpot_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                    0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double hb_e2e_le[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                                   60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

enum { HB_H_TTFT, HB_H_TPOT, HB_H_E2E, HB_H_COUNT };

static void hb_observe(hb_hist *h, double x) {
    int i = 0;
    while (i < h->n && x > h->le[i]) i++;
    if (i < h->n) h->count[i]++;
    h->total++;
    h->sum += x;
}

/* ======================================================================
 * Jobs and the batcher
 * ====================================================================== */

enum { HB_QUEUED, HB_LIVE, HB_DONE, HB_FAILED };

struct hb_job {
    hb_batcher *b;
    int refs;               /* the connection's and the engine thread's; the last frees it */
    sched_req req;          /* prompt: prompt below */
    int *prompt;            /* (n_prompt) until it enters the scheduler, which copies it */
    int *toks;              /* (max_new) tokens made; the first n_toks published */
    int n_made;             /* engine thread only */
    int ending;             /* engine thread only: its last token made, or dropped unrun (error) */
    char unfit[800];        /* engine thread only: why the scheduler dropped it unrun */
    int64_t t_arrival, t_first, t_last;     /* ns; t_first/t_last: engine thread until published */
    /* under b->mu */
    int n_toks;
    int state;              /* HB_* */
    int gone;               /* the connection let go: cancel it */
    int finished;           /* with gone: it had what it asked for (a stop string): a success */
    int eos;                /* ended at EOS */
    int code;               /* HB_FAILED: the HTTP status */
    char msg[1400];         /* HB_FAILED: why */
    int slot;               /* HB_LIVE: its scheduler slot */
    hb_job *next;           /* HB_QUEUED: the FIFO */
    pthread_cond_t cv;      /* CLOCK_MONOTONIC: tokens published, or it ended */
};

struct hb_batcher {
    engine *e;
    sched *s;
    hb_opts o;
    int slots;              /* the scheduler's: max_batch x 2 */
    hb_job **by_slot;       /* (slots) live jobs; engine thread writes, under mu */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;     /* everything below */
    pthread_cond_t work;    /* a job queued or let go, or stop */
    hb_job *head, *tail;    /* the FIFO */
    int n_queued, n_live, n_running;
    int stopping, quit, gathered;
    char failed[1024];
    double m[HB_M_COUNT];
    hb_hist h[HB_H_COUNT];
    double blocks[HB_BLOCK_STATES];     /* bench:kv_cache_blocks, when has_blocks */
    int has_blocks;
    /* engine thread only: the last engine_counters read */
    double blocks_read[HB_BLOCK_STATES];
    int blocks_seen;
    int64_t counters_ns;
    int counters_stale;     /* a step ran since the last read */
};

static void hb_unref(hb_job *j) {
    if (--j->refs) return;
    pthread_cond_destroy(&j->cv);
    free(j->prompt);
    free(j->toks);
    free(j);
}

/* j ends (HB_DONE or HB_FAILED) and leaves the engine thread: its ref goes. Under mu. */
static void hb_end(hb_batcher *b, hb_job *j, int state, int code, const char *msg) {
    j->state = state;
    j->code = code;
    if (msg) snprintf(j->msg, sizeof(j->msg), "%s", msg);
    if (state == HB_FAILED) b->m[HB_M_FAILED]++;
    pthread_cond_broadcast(&j->cv);
    hb_unref(j);
}

/* A live job out of the scheduler: cancelled when it still runs or waits, its slot freed. */
static void hb_unslot(hb_batcher *b, hb_job *j) {
    sched_cancel(b->s, j->slot);
    sched_retire(b->s, j->slot);
    b->by_slot[j->slot] = NULL;
    b->n_live--;
}

/* Jobs whose connection let go leave: the queued unrun, the live cancelled (KV freed). */
static void hb_sweep(hb_batcher *b) {
    b->tail = NULL;
    for (hb_job **p = &b->head; *p;) {
        hb_job *j = *p;
        if (!j->gone) {
            b->tail = j;
            p = &j->next;
            continue;
        }
        *p = j->next;
        b->n_queued--;
        b->m[j->finished ? HB_M_SUCCESS : HB_M_CANCELLED]++;
        hb_unref(j);
    }
    for (int i = 0; i < b->slots; i++) {
        hb_job *j = b->by_slot[i];
        if (!j || !j->gone) continue;
        hb_unslot(b, j);
        b->m[j->finished ? HB_M_SUCCESS : HB_M_CANCELLED]++;
        hb_unref(j);
    }
}

static const char *hb_stop_msg(hb_batcher *b, char *buf, size_t len) {
    snprintf(buf, len, "the server is stopping%s%s: the request was not run", b->failed[0] ? ": " : "", b->failed);
    return buf;
}

/* While stopping, the queued jobs are refused. */
static void hb_refuse_queued(hb_batcher *b) {
    char msg[1200];
    while (b->head) {
        hb_job *j = b->head;
        b->head = j->next;
        b->n_queued--;
        hb_end(b, j, HB_FAILED, 503, hb_stop_msg(b, msg, sizeof(msg)));
    }
    b->tail = NULL;
}

/* The FIFO into the scheduler's free slots. */
static void hb_feed(hb_batcher *b) {
    while (b->head && b->n_live < b->slots) {
        hb_job *j = b->head;
        b->head = j->next;
        if (!b->head) b->tail = NULL;
        b->n_queued--;
        char err[512];
        int slot = sched_submit(b->s, &j->req, err, sizeof(err));
        if (slot < 0) {     /* hb_submit checked what sched_submit checks: only memory is left */
            hb_end(b, j, HB_FAILED, 500, err);
            continue;
        }
        free(j->prompt);
        j->prompt = NULL;
        j->req.prompt = NULL;
        j->slot = slot;
        j->state = HB_LIVE;
        b->by_slot[slot] = j;
        b->n_live++;
    }
}

/* Every live job fails with code and msg (an engine failure, the model changed). */
static void hb_fail_live(hb_batcher *b, int code, const char *msg) {
    for (int i = 0; i < b->slots; i++) {
        hb_job *j = b->by_slot[i];
        if (!j) continue;
        hb_unslot(b, j);
        hb_end(b, j, HB_FAILED, code, msg);
    }
}

/* Stopping: the live jobs with neither a sequence nor a token are refused; after a step
 * (after_step), the others end with the tokens they have, the one it gave them the last. */
static void hb_wind_down(hb_batcher *b, int after_step) {
    char msg[1200];
    for (int i = 0; i < b->slots; i++) {
        hb_job *j = b->by_slot[i];
        if (!j || j->ending) continue;
        if (!sched_is_running(b->s, i) && !j->n_made) {
            hb_unslot(b, j);
            hb_end(b, j, HB_FAILED, 503, hb_stop_msg(b, msg, sizeof(msg)));
        } else if (after_step) {
            j->ending = 1;
        }
    }
}

/* ---- the scheduler's callbacks, on the engine thread during sched_advance (mu not held) ---- */

static void hb_on_token(void *user, int slot, int tok, int last) {
    hb_batcher *b = user;
    hb_job *j = b->by_slot[slot];
    int64_t now = ut_now_ns();
    j->toks[j->n_made++] = tok;     /* beyond n_toks: no reader looks there until published */
    if (j->n_made == 1) j->t_first = now;
    j->t_last = now;
    if (last) j->ending = 1;
}

static void hb_on_done(void *user, const sched_done *d) {
    hb_batcher *b = user;
    hb_job *j = b->by_slot[d->req];
    if (!d->error) return;
    j->ending = 1;
    snprintf(j->unfit, sizeof(j->unfit), "prompt (%d tokens) + max_tokens (%d): %s", j->req.n_prompt, j->req.max_new, d->error);
}

static void hb_block_emit(void *user, const char *name, const char *unit, double value) {
    hb_batcher *b = user;
    (void)unit;
    if (strncmp(name, "kv.blocks_", 10)) return;
    for (int i = 0; i < HB_BLOCK_STATES; i++)
        if (!strcmp(name + 10, hb_block_states[i])) {
            b->blocks_read[i] = value;
            b->blocks_seen = 1;
        }
}

/* The engine's counters (mu not held: they may take a while), at most once per
 * HB_COUNTERS_NS unless forced (the engine going idle: its last state stays shown). */
static void hb_read_counters(hb_batcher *b, int force) {
    int64_t now = ut_now_ns();
    b->counters_stale = 1;
    if (!force && b->counters_ns && now - b->counters_ns < HB_COUNTERS_NS) return;
    b->counters_ns = now;
    b->counters_stale = 0;
    bench_counter_sink sink = {.emit = hb_block_emit, .user = b};
    engine_counters(b->e, &sink);
}

/* ---- publish: under mu, after each step ---- */

/* j's new tokens visible; at its end it leaves the scheduler. */
static void hb_publish_job(hb_batcher *b, hb_job *j) {
    if (j->n_made > j->n_toks) {
        if (!j->n_toks) {
            b->m[HB_M_PROMPT] += j->req.n_prompt;
            hb_observe(&b->h[HB_H_TTFT], (double)(j->t_first - j->t_arrival) * 1e-9);
        }
        b->m[HB_M_GENERATION] += j->n_made - j->n_toks;
        j->n_toks = j->n_made;
        pthread_cond_broadcast(&j->cv);
    }
    if (!j->ending) return;
    hb_unslot(b, j);
    if (j->unfit[0]) {
        hb_end(b, j, HB_FAILED, 400, j->unfit);
        return;
    }
    j->eos = !j->req.ignore_eos && b->o.eos >= 0 && j->n_made && j->toks[j->n_made - 1] == b->o.eos;
    if (j->n_made >= 2) hb_observe(&b->h[HB_H_TPOT], (double)(j->t_last - j->t_first) * 1e-9 / (j->n_made - 1));
    hb_observe(&b->h[HB_H_E2E], (double)(j->t_last - j->t_arrival) * 1e-9);
    b->m[HB_M_SUCCESS]++;
    hb_end(b, j, HB_DONE, 0, NULL);
}

static void hb_publish(hb_batcher *b) {
    for (int i = 0; i < b->slots; i++)
        if (b->by_slot[i]) hb_publish_job(b, b->by_slot[i]);
    int running = 0;
    for (int i = 0; i < b->slots; i++) running += b->by_slot[i] && sched_is_running(b->s, i);
    b->n_running = running;
    const sched_stats *st = sched_get_stats(b->s);
    b->m[HB_M_RUNNING_MAX] = st->peak_running;
    b->m[HB_M_PREFILL] = (double)st->prefill_tokens;
    b->m[HB_M_PREFIX_HITS] = (double)st->prefix_reused;
    b->m[HB_M_PREFIX_QUERIES] = (double)(st->prefix_reused + st->prefill_tokens);
    b->m[HB_M_PREEMPTIONS] = st->preemptions;
    b->m[HB_M_STEPS] = st->steps;
    b->m[HB_M_DECODE_TOKENS] = (double)st->decode_tokens;
    engine_kv_mem kv = engine_kv_memory(b->e);
    b->m[HB_M_KV_RESERVED] = kv.reserved;
    b->m[HB_M_KV_USED] = kv.live;
    b->m[HB_M_KV_CACHED] = kv.cached;
    b->m[HB_M_KV_WASTED] = kv.wasted;
    b->m[HB_M_KV_USAGE] = kv.reserved > 0 ? kv.live / kv.reserved : 0;
    memcpy(b->blocks, b->blocks_read, sizeof(b->blocks));
    b->has_blocks = b->blocks_seen;
}

/* ---- the engine thread ---- */

/* One step with mu released; then its outcome, under mu again. */
static void hb_step(hb_batcher *b) {
    pthread_mutex_unlock(&b->mu);
    char err[512], fault[1024];
    int rc = sched_advance(b->s, err, sizeof(err));
    /* the model's pages changed under the step: its tokens are garbage, never published */
    int faulted = b->o.model_fault && b->o.model_fault(fault, sizeof(fault));
    if (!faulted) hb_read_counters(b, 0);
    if (b->o.step_delay_ms) usleep((useconds_t)b->o.step_delay_ms * 1000);
    pthread_mutex_lock(&b->mu);
    if (faulted) {
        if (!b->failed[0]) snprintf(b->failed, sizeof(b->failed), "%s", fault);
        b->stopping = 1;
        hb_fail_live(b, 500, fault);
    } else if (rc) {
        char msg[600];
        snprintf(msg, sizeof(msg), "engine: %s", err);
        hb_fail_live(b, 500, msg);
    }
    if (b->stopping) hb_wind_down(b, 1);
    hb_publish(b);
}

static void *hb_main(void *arg) {
    hb_batcher *b = arg;
    hb_read_counters(b, 1);
    pthread_mutex_lock(&b->mu);
    hb_publish(b);      /* the KV gauges before any request */
    for (;;) {
        hb_sweep(b);
        if (b->stopping) {
            hb_refuse_queued(b);
            hb_wind_down(b, 0);     /* the running get their next token first */
        }
        hb_feed(b);
        int gathering = b->o.gather && !b->gathered && !b->stopping && b->n_live < b->o.max_batch;
        if (!b->n_live || gathering) {
            if (b->quit && !b->n_live) break;
            if (b->counters_stale) {
                pthread_mutex_unlock(&b->mu);
                hb_read_counters(b, 1);
                pthread_mutex_lock(&b->mu);
                hb_publish(b);
                continue;       /* a job may have come meanwhile */
            }
            pthread_cond_wait(&b->work, &b->mu);
            continue;
        }
        b->gathered = 1;
        hb_step(b);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

int hb_create(engine *e, const hb_opts *o, hb_batcher **out, char *err, size_t errlen) {
    *out = NULL;
    if (o->max_batch < 1) {
        snprintf(err, errlen, "max_batch %d: expected at least 1", o->max_batch);
        return -1;
    }
    hb_batcher *b = calloc(1, sizeof(*b));
    if (!b) goto oom;
    b->e = e;
    b->o = *o;
    b->slots = 2 * o->max_batch;
    static const hb_hist hists[HB_H_COUNT] = {
        [HB_H_TTFT] = {.name = "bench:time_to_first_token_seconds", .help = "Time from a request's arrival to its first token.",
                       .le = hb_ttft_le, .n = (int)(sizeof(hb_ttft_le) / sizeof(double))},
        [HB_H_TPOT] = {.name = "bench:time_per_output_token_seconds",
                       .help = "A request's mean time per token after its first (one observation a request).",
                       .le = hb_tpot_le, .n = (int)(sizeof(hb_tpot_le) / sizeof(double))},
        [HB_H_E2E] = {.name = "bench:e2e_request_latency_seconds", .help = "Time from a request's arrival to its last token.",
                      .le = hb_e2e_le, .n = (int)(sizeof(hb_e2e_le) / sizeof(double))},
    };
    memcpy(b->h, hists, sizeof(hists));
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->work, NULL);
    if (!(b->by_slot = calloc((size_t)b->slots, sizeof(*b->by_slot)))) goto oom;
    sched_opts so = {.eos = o->eos, .temperature = 1, .topp = 1, .max_batch = o->max_batch, .reserve_output = o->reserve_output,
                     .on_token = hb_on_token, .on_done = hb_on_done, .user = b};
    if (sched_open(e, b->slots, &so, &b->s, err, errlen)) goto fail;
    if (pthread_create(&b->thread, NULL, hb_main, b)) {
        snprintf(err, errlen, "cannot start the engine thread");
        goto fail;
    }
    b->started = 1;
    *out = b;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    hb_destroy(b);
    return -1;
}

void hb_stop(hb_batcher *b) {
    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
}

void hb_destroy(hb_batcher *b) {
    if (!b) return;
    if (b->started) {
        pthread_mutex_lock(&b->mu);
        b->stopping = b->quit = 1;
        pthread_cond_signal(&b->work);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
    }
    sched_destroy(b->s);
    free(b->by_slot);
    pthread_cond_destroy(&b->work);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

const char *hb_failed(hb_batcher *b) {
    pthread_mutex_lock(&b->mu);
    const char *f = b->failed[0] ? b->failed : NULL;
    pthread_mutex_unlock(&b->mu);
    return f;
}

/* ======================================================================
 * The connections' side
 * ====================================================================== */

hb_job *hb_submit(hb_batcher *b, const hb_params *p, int *code, char *msg, size_t len) {
    hb_job *j = calloc(1, sizeof(*j));
    if (j) {
        j->prompt = malloc((size_t)p->n_prompt * sizeof(int));
        j->toks = malloc((size_t)p->max_new * sizeof(int));
    }
    if (!j || !j->prompt || !j->toks) {
        if (j) free(j->prompt), free(j->toks);
        free(j);
        *code = 500;
        snprintf(msg, len, "out of memory");
        return NULL;
    }
    memcpy(j->prompt, p->prompt, (size_t)p->n_prompt * sizeof(int));
    j->b = b;
    j->req = (sched_req){.prompt = j->prompt, .n_prompt = p->n_prompt, .max_new = p->max_new, .seed = p->seed, .own_sampling = 1,
                         .temperature = p->temperature, .topp = p->topp, .ignore_eos = p->ignore_eos};
    j->t_arrival = ut_now_ns();
    j->slot = -1;
    j->refs = 2;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&b->mu);
    if (b->stopping) {
        char m[1200];
        snprintf(msg, len, "%s", hb_stop_msg(b, m, sizeof(m)));
        b->m[HB_M_FAILED]++;
        pthread_mutex_unlock(&b->mu);
        j->refs = 1;
        hb_unref(j);
        *code = 503;
        return NULL;
    }
    if (b->tail) b->tail->next = j;
    else b->head = j;
    b->tail = j;
    b->n_queued++;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
    return j;
}

/* 1 when the client at fd closed its end (a read would give 0). */
static int hb_peer_gone(int fd) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

int hb_next(hb_job *j, int k, int fd, int *tok, int *last) {
    hb_batcher *b = j->b;
    pthread_mutex_lock(&b->mu);
    while (j->n_toks <= k && (j->state == HB_QUEUED || j->state == HB_LIVE)) {
        int64_t until = ut_now_ns() + HB_PEER_CHECK_NS;
        struct timespec ts = {.tv_sec = (time_t)(until / 1000000000), .tv_nsec = (long)(until % 1000000000)};
        if (pthread_cond_timedwait(&j->cv, &b->mu, &ts) == ETIMEDOUT && fd >= 0 && hb_peer_gone(fd)) {
            pthread_mutex_unlock(&b->mu);
            return HB_GONE;
        }
    }
    int rc;
    if (j->n_toks > k) {
        *tok = j->toks[k];
        *last = j->state == HB_DONE && k == j->n_toks - 1;
        rc = HB_TOKEN;
    } else {
        rc = j->state == HB_DONE ? HB_END : HB_ERROR;
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

int hb_job_error(hb_job *j, char *msg, size_t len) {
    pthread_mutex_lock(&j->b->mu);
    int code = j->code ? j->code : 500;
    snprintf(msg, len, "%s", j->msg[0] ? j->msg : "the request failed");
    pthread_mutex_unlock(&j->b->mu);
    return code;
}

int hb_job_eos(hb_job *j) {
    pthread_mutex_lock(&j->b->mu);
    int e = j->eos;
    pthread_mutex_unlock(&j->b->mu);
    return e;
}

void hb_release(hb_job *j) {
    if (!j) return;
    hb_batcher *b = j->b;
    pthread_mutex_lock(&b->mu);
    if (j->state == HB_QUEUED || j->state == HB_LIVE) {
        j->gone = 1;
        pthread_cond_signal(&b->work);
    }
    hb_unref(j);
    pthread_mutex_unlock(&b->mu);
}

void hb_finish(hb_job *j) {
    hb_batcher *b = j->b;
    pthread_mutex_lock(&b->mu);
    if (j->state == HB_QUEUED || j->state == HB_LIVE) {
        j->gone = j->finished = 1;
        pthread_cond_signal(&b->work);
    }
    pthread_mutex_unlock(&b->mu);
}

void hb_load(hb_batcher *b, int *running, int *waiting) {
    pthread_mutex_lock(&b->mu);
    *running = b->n_running;
    *waiting = b->n_queued + b->n_live - b->n_running;
    pthread_mutex_unlock(&b->mu);
}

/* ======================================================================
 * GET /metrics: Prometheus' text format 0.0.4
 * ====================================================================== */

static void hb_print_hist(FILE *f, const hb_hist *h) {
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->count[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->le[i], (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", h->name, (unsigned long long)h->total, h->name, h->sum,
            h->name, (unsigned long long)h->total);
}

char *hb_metrics(hb_batcher *b) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    int running, waiting;
    hb_load(b, &running, &waiting);
    pthread_mutex_lock(&b->mu);
    b->m[HB_M_RUNNING] = running;
    b->m[HB_M_WAITING] = waiting;
    for (size_t i = 0; i < sizeof(hb_table) / sizeof(hb_table[0]); i++) {
        const struct hb_metric *m = &hb_table[i];
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", m->name, m->help, m->name, m->type, m->name, b->m[m->id]);
    }
    if (b->has_blocks) {
        fprintf(f, "# HELP bench:kv_cache_blocks KV blocks of a paged kv module (kv block) by state; read at most once a second.\n"
                "# TYPE bench:kv_cache_blocks gauge\n");
        for (int i = 0; i < HB_BLOCK_STATES; i++) fprintf(f, "bench:kv_cache_blocks{state=\"%s\"} %.17g\n", hb_block_states[i], b->blocks[i]);
    }
    for (int i = 0; i < HB_H_COUNT; i++) hb_print_hist(f, &b->h[i]);
    pthread_mutex_unlock(&b->mu);
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}
