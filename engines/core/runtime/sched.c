/* The serving scheduler; see sched.h for the glossary and the invariants. */
#include "util/ut_clock.h"
#include "sched.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampler.h"

/* RQ_FREE: an open scheduler's slot that holds no request */
typedef enum { RQ_PENDING, RQ_WAITING, RQ_RUNNING, RQ_DONE, RQ_FREE } rq_state;

typedef struct rq {
    const sched_req *in;
    int *ids;               /* (cap_prompt + max_new) the prompt, then the tokens generated */
    int n_prompt;           /* the whole prompt: a turn's is known when it arrives */
    int cap_prompt;         /* n_prompt at most: a turn's, with every earlier answer at max_new */
    int next;               /* the request that follows this one (its next turn), -1: none */
    int64_t due_ns;         /* a turn: when it is sent (absolute), once the previous finished */
    int n_out;
    int seq;                /* while running */
    rq_state state;
    sampler *smp;           /* from the first admission to the finish */
    int64_t *tok_ns;        /* (max_new) each token's time, with token_times; else NULL */
    sched_done done;
} rq;

struct sched {
    engine *e;
    sched_opts o;
    int n;
    rq *r;                  /* (n) */
    sched_req *reqs;        /* (n) the caller's, copied */
    int *arrival;           /* (n_timed) requests that follow none, by arrival time, ties in index order */
    int n_timed;
    int next_arrival;       /* arrival[next_arrival] is the next to arrive */
    int *due;               /* (n) turns whose previous turn finished, not yet sent */
    int n_due;
    int inflight;           /* sent and not finished */
    int64_t slot_ns;        /* when a full max_inflight last had a request finish */
    int64_t t0;
    int *queue;             /* (n) ring of waiting requests, head first */
    int q_head, q_len;
    int *running;           /* (max_batch) running requests, oldest admission first */
    int n_running, max_batch;
    int *free_seqs, n_free; /* (max_seqs) sequences no request holds */
    int *b_seq, *b_tok, *b_pos; /* (max_batch) one decode step's batch */
    int vocab, n_done;
    int hold;               /* a preemption since the last finish: admit nothing while others run */
    int step_peak;          /* running requests at most during this step */
    int batch;              /* this step's decode batch */
    uint64_t tokens;        /* positions run so far */
    int open;               /* sched_open: requests submitted while it runs */
    sched_stats st;
};

static int64_t sched_now(void) { return ut_now_ns(); }

/* ---- create / destroy ---- */

static int by_arrival(const void *a, const void *b, void *reqs) {
    const sched_req *r = reqs;
    int i = *(const int *)a, j = *(const int *)b;
    if (r[i].arrival_ns != r[j].arrival_ns) return r[i].arrival_ns < r[j].arrival_ns ? -1 : 1;
    return i - j;
}

/* A request's lengths and arrival. */
static int check_lengths(const sched_req *q, int i, char *err, size_t errlen) {
    if (q->n_prompt >= 1 && q->max_new >= 1 && q->arrival_ns >= 0) return 0;
    return bench_errf(err, errlen, "sched: request %d: prompt %d tokens, max_new %d, arrival %lld ns: expected >= 1, >= 1, >= 0",
                      i, q->n_prompt, q->max_new, (long long)q->arrival_ns);
}

/* A request's positions (cap: its whole prompt at most) within the context, its ids in the vocabulary. */
static int check_fits(const sched_req *q, int i, int64_t cap, int vocab, int max_pos, char *err, size_t errlen) {
    /* the last token generated is never fed back */
    if (cap + q->max_new - 1 > max_pos)
        return bench_errf(err, errlen, "sched: request %d: prompt %lld + max_new %d - 1 positions exceed the engine's context of %d",
                          i, (long long)cap, q->max_new, max_pos);
    for (int k = 0; k < q->n_prompt; k++)
        if (q->prompt[k] < 0 || q->prompt[k] >= vocab)
            return bench_errf(err, errlen, "sched: request %d: token %d at position %d is outside the vocabulary of %d",
                              i, q->prompt[k], k, vocab);
    return 0;
}

static int check_opts(const sched_opts *o, char *err, size_t errlen) {
    if (o->max_batch >= 0 && o->max_inflight >= 0 && o->reserve_output >= 0 && o->reserve_output <= 1) return 0;
    return bench_errf(err, errlen, "sched: max_batch %d, max_inflight %d, reserve_output %g: expected >= 0, >= 0, 0 .. 1",
                      o->max_batch, o->max_inflight, o->reserve_output);
}

/* A scheduler for n requests at once, its arrays allocated and every sequence free; NULL
 * when out of memory. */
static sched *sched_alloc(engine *e, int n, const sched_opts *o) {
    int max_seqs = engine_max_seqs(e);
    sched *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->e = e;
    s->o = *o;
    s->n = n;
    s->vocab = engine_model(e)->cfg.vocab_size;
    s->max_batch = o->max_batch > 0 && o->max_batch < max_seqs ? o->max_batch : max_seqs;
    s->r = calloc((size_t)n, sizeof(*s->r));
    s->reqs = calloc((size_t)n, sizeof(*s->reqs));
    s->arrival = malloc((size_t)n * sizeof(int));
    s->queue = malloc((size_t)n * sizeof(int));
    s->due = malloc((size_t)n * sizeof(int));
    s->running = malloc((size_t)s->max_batch * sizeof(int));
    s->free_seqs = malloc((size_t)max_seqs * sizeof(int));
    s->b_seq = malloc((size_t)s->max_batch * sizeof(int));
    s->b_tok = malloc((size_t)s->max_batch * sizeof(int));
    s->b_pos = malloc((size_t)s->max_batch * sizeof(int));
    if (!s->r || !s->reqs || !s->arrival || !s->queue || !s->due || !s->running || !s->free_seqs || !s->b_seq || !s->b_tok || !s->b_pos) {
        sched_destroy(s);
        return NULL;
    }
    /* popped from the top: sequence 0 first */
    for (int q = 0; q < max_seqs; q++) s->free_seqs[q] = max_seqs - 1 - q;
    s->n_free = max_seqs;
    return s;
}

int sched_create(engine *e, const sched_req *reqs, int n, const sched_opts *o, sched **out, char *err, size_t errlen) {
    *out = NULL;
    if (n < 1) return bench_errf(err, errlen, "sched: %d requests: expected at least 1", n);
    const model *m = engine_model(e);
    int vocab = m->cfg.vocab_size, max_pos = engine_max_pos(e);
    int64_t *cap = malloc((size_t)n * sizeof(int64_t));
    char *followed = calloc((size_t)n, 1);
    int rc = 0;
    if (!cap || !followed) {
        rc = bench_errf(err, errlen, "sched: out of memory");
        goto checked;
    }
    for (int i = 0; i < n && !rc; i++) {
        const sched_req *q = &reqs[i];
        int prev = q->follows - 1;
        if ((rc = check_lengths(q, i, err, errlen))) break;
        if (q->follows && (prev < 0 || prev >= i || followed[prev] || q->think_ns < 0)) {
            rc = bench_errf(err, errlen, "sched: request %d follows %d, think %lld ns: expected an earlier request that no "
                            "other follows, and a think time >= 0", i, prev, (long long)q->think_ns);
            break;
        }
        if (q->follows) followed[prev] = 1;
        /* a turn's prompt: the conversation so far, every answer at its longest */
        cap[i] = q->n_prompt + (q->follows ? cap[prev] + reqs[prev].max_new : 0);
        rc = check_fits(q, i, cap[i], vocab, max_pos, err, errlen);
    }
    if (!rc) rc = check_opts(o, err, errlen);
checked:
    free(followed);
    if (rc) {
        free(cap);
        return rc;
    }
    sched *s = sched_alloc(e, n, o);
    if (!s) {
        free(cap);
        return bench_errf(err, errlen, "sched: out of memory");
    }
    memcpy(s->reqs, reqs, (size_t)n * sizeof(*reqs));
    for (int i = 0; i < n; i++) {
        rq *r = &s->r[i];
        r->in = &s->reqs[i];
        r->seq = -1;
        r->next = -1;
        r->cap_prompt = (int)cap[i];
        r->n_prompt = r->in->n_prompt;
        r->ids = malloc(((size_t)r->cap_prompt + (size_t)r->in->max_new) * sizeof(int));
        if (!r->ids) goto oom;
        if (o->token_times && !(r->tok_ns = malloc((size_t)r->in->max_new * sizeof(int64_t)))) goto oom;
        /* a turn's own ids go in when it is sent, after the conversation so far */
        if (!r->in->follows) memcpy(r->ids, r->in->prompt, (size_t)r->in->n_prompt * sizeof(int));
        r->done = (sched_done){.req = i, .n_prompt = r->in->n_prompt};
        if (r->in->follows) s->r[r->in->follows - 1].next = i;
        else s->arrival[s->n_timed++] = i;
    }
    free(cap);
    cap = NULL;
    qsort_r(s->arrival, (size_t)s->n_timed, sizeof(int), by_arrival, s->reqs);
    *out = s;
    return 0;
oom:
    free(cap);
    sched_destroy(s);
    return bench_errf(err, errlen, "sched: out of memory");
}

void sched_destroy(sched *s) {
    if (!s) return;
    for (int i = 0; s->r && i < s->n; i++) {
        free(s->r[i].ids);
        free(s->r[i].tok_ns);
        sampler_free(s->r[i].smp);
    }
    free(s->r);
    free(s->reqs);
    free(s->arrival);
    free(s->queue);
    free(s->due);
    free(s->running);
    free(s->free_seqs);
    free(s->b_seq);
    free(s->b_tok);
    free(s->b_pos);
    free(s);
}

const int *sched_output(const sched *s, int req, int *n) {
    if (req < 0 || req >= s->n) {
        *n = 0;
        return NULL;
    }
    *n = s->r[req].n_out;
    return s->r[req].ids + s->r[req].n_prompt;
}

const sched_stats *sched_get_stats(const sched *s) { return &s->st; }

/* ---- the queue and the sequences ---- */

static void q_push_back(sched *s, int i) {
    s->queue[(s->q_head + s->q_len++) % s->n] = i;
    s->r[i].state = RQ_WAITING;
}

static void q_push_front(sched *s, int i) {
    s->q_head = (s->q_head + s->n - 1) % s->n;
    s->queue[s->q_head] = i;
    s->q_len++;
    s->r[i].state = RQ_WAITING;
}

static void q_pop(sched *s) {
    s->q_head = (s->q_head + 1) % s->n;
    s->q_len--;
}

/* Gives r's sequence and KV back to the engine. */
static void seq_release(sched *s, rq *r) {
    engine_reset(s->e, r->seq);
    s->free_seqs[s->n_free++] = r->seq;
    r->seq = -1;
}

/* Takes the token sampled from logits; finishes r at max_new or EOS. Returns 1 when it finished. */
static int take_token(sched *s, rq *r, float *logits) {
    int tok = sampler_sample(r->smp, logits);
    int64_t now = sched_now();
    if (r->tok_ns) r->tok_ns[r->n_out] = now;
    r->ids[r->n_prompt + r->n_out++] = tok;
    s->st.output_tokens++;
    if (r->n_out == 1) r->done.first_ns = now;
    int eos = r->in->ignore_eos ? -1 : s->o.eos;
    int last = r->n_out >= r->in->max_new || tok == eos;
    if (s->o.on_token) s->o.on_token(s->o.user, (int)(r - s->r), tok, last);
    if (!last) return 0;
    r->done.end_ns = now;
    r->done.n_out = r->n_out;
    r->done.token_ns = r->tok_ns;
    r->state = RQ_DONE;
    if (s->o.max_inflight && s->inflight >= s->o.max_inflight) s->slot_ns = now;
    s->inflight--;
    if (r->next >= 0) {
        s->r[r->next].due_ns = now + s->r[r->next].in->think_ns;
        s->due[s->n_due++] = r->next;
    }
    s->hold = 0;
    seq_release(s, r);
    sampler_free(r->smp);
    r->smp = NULL;
    s->n_done++;
    if (s->o.on_done) s->o.on_done(s->o.user, &r->done);
    return 1;
}

/* ---- one step ---- */

/* Positions kept free for r's tokens still to come (sched.h: reserve). */
static double keep_free(const sched *s, const rq *r) { return ceil(s->o.reserve_output * (r->in->max_new - r->n_out)); }

/* With reserve_output, whether a shared pool has room for r (whose cached prefix is
 * attached) beside the tokens the running requests may still generate. */
static int pool_has_room(const sched *s, const rq *r, int new_positions) {
    if (s->o.reserve_output <= 0 || !s->n_running) return 1;
    engine_kv_mem m = engine_kv_memory(s->e);
    if (!m.shared_pool) return 1;
    double want = new_positions + keep_free(s, r);
    for (int k = 0; k < s->n_running; k++) want += keep_free(s, &s->r[s->running[k]]);
    return want * (double)engine_kv_token_bytes(s->e) <= m.reserved - m.live - m.wasted;
}

/* An open scheduler's request that the KV cache cannot hold even alone leaves the queue
 * unrun, with on_done saying why: the requests behind it go on. */
static void drop_unfit(sched *s, int i, int n_ids, const char *why) {
    rq *r = &s->r[i];
    char msg[640];
    snprintf(msg, sizeof(msg), "%d positions do not fit the KV cache even alone: %s", n_ids, why);
    q_pop(s);
    r->state = RQ_DONE;
    s->inflight--;
    r->done.end_ns = sched_now();
    r->done.error = msg;
    if (s->o.on_done) s->o.on_done(s->o.user, &r->done);
    r->done.error = NULL;
}

/* Admits from the head of the queue while there is a sequence, batch room and KV room. */
static int admit(sched *s, char *err, size_t errlen) {
    /* memory is contended: a request admitted now would only be preempted again (thrashing) */
    if (s->hold && s->n_running) return 0;
    while (s->q_len && s->n_free && s->n_running < s->max_batch) {
        int i = s->queue[s->q_head];
        rq *r = &s->r[i];
        int n_ids = r->n_prompt + r->n_out;     /* a preempted request recomputes its tokens too */
        r->seq = s->free_seqs[--s->n_free];
        int m = engine_share_prefix(s->e, r->seq, r->ids, n_ids, err, errlen);
        if (m < 0) return -1;
        char why[512];
        if (!pool_has_room(s, r, n_ids - m)) {
            seq_release(s, r);
            return 0;
        }
        if (engine_reserve(s->e, r->seq, n_ids, why, sizeof(why))) {
            seq_release(s, r);
            /* with nothing running every position is free or evictable: it never fits */
            if (!s->n_running && s->open) {
                drop_unfit(s, i, n_ids, why);
                continue;
            }
            if (!s->n_running)
                return bench_errf(err, errlen, "sched: request %d (%d positions) does not fit the KV cache even alone: %s",
                                  i, n_ids, why);
            return 0;
        }
        q_pop(s);
        if (!r->smp && !(r->smp = sampler_create(s->vocab, r->in->own_sampling ? r->in->temperature : s->o.temperature,
                                                 r->in->own_sampling ? r->in->topp : s->o.topp, r->in->seed)))
            return bench_errf(err, errlen, "sched: out of memory");
        if (!r->done.admit_ns) r->done.admit_ns = sched_now();
        float *logits;
        if (engine_forward(s->e, r->seq, r->ids + m, n_ids - m, m, &logits, err, errlen)) return -1;
        r->done.prefix_reused += m;
        r->done.prefill_tokens += n_ids - m;
        s->st.prefix_reused += (uint64_t)m;
        s->st.prefill_tokens += (uint64_t)(n_ids - m);
        s->tokens += (uint64_t)(n_ids - m);
        r->state = RQ_RUNNING;
        if (!take_token(s, r, logits)) s->running[s->n_running++] = i;
        if (s->n_running > s->step_peak) s->step_peak = s->n_running;
    }
    return 0;
}

/* The newest running request gives its KV back and goes to the head of the queue. */
static void preempt_newest(sched *s) {
    int i = s->running[--s->n_running];
    rq *r = &s->r[i];
    seq_release(s, r);
    r->done.preemptions++;
    s->st.preemptions++;
    s->hold = 1;
    q_push_front(s, i);
}

static int decode(sched *s, char *err, size_t errlen) {
    /* room for every running request's next position, oldest first; the newest yield */
    for (int k = 0; k < s->n_running; k++) {
        rq *r = &s->r[s->running[k]];
        char why[512];
        while (engine_reserve(s->e, r->seq, r->n_prompt + r->n_out, why, sizeof(why)))
            if (s->running[s->n_running - 1] == s->running[k]) {
                preempt_newest(s);  /* itself: it waits until others finish */
                break;
            } else {
                preempt_newest(s);
            }
    }
    if (!s->n_running) return 0;
    s->batch = s->n_running;
    for (int k = 0; k < s->n_running; k++) {
        const rq *r = &s->r[s->running[k]];
        s->b_seq[k] = r->seq;
        s->b_pos[k] = r->n_prompt + r->n_out - 1;
        s->b_tok[k] = r->ids[s->b_pos[k]];
    }
    float *logits;
    if (engine_forward_batch(s->e, s->b_seq, s->b_tok, s->b_pos, s->n_running, &logits, err, errlen)) return -1;
    s->tokens += (uint64_t)s->n_running;
    s->st.decode_tokens += (uint64_t)s->n_running;
    int kept = 0;
    for (int k = 0; k < s->n_running; k++) {
        int i = s->running[k];
        if (!take_token(s, &s->r[i], logits + (size_t)k * s->vocab)) s->running[kept++] = i;
    }
    s->n_running = kept;
    return 0;
}

static void report_step(sched *s) {
    sched_step st = {.step = s->st.steps, .t_ns = sched_now(), .running = s->step_peak, .batch = s->batch,
                     .waiting = s->q_len, .tokens = s->tokens};
    if (s->step_peak > s->st.peak_running) s->st.peak_running = s->step_peak;
    st.kv = engine_kv_memory(s->e);
    engine_kv_mem *pk = &s->st.kv_peak;
    if (st.kv.reserved > pk->reserved) pk->reserved = st.kv.reserved;
    if (st.kv.live > pk->live) pk->live = st.kv.live;
    if (st.kv.cached > pk->cached) pk->cached = st.kv.cached;
    if (st.kv.wasted > pk->wasted) pk->wasted = st.kv.wasted;
    s->st.steps++;
    if (s->o.on_step) s->o.on_step(s->o.user, &st);
}

/* The next request to send: the earlier of the next timed arrival and the earliest due
 * turn (-1: none); *at its time, *k its place in due (-1: a timed one). */
static int next_due(const sched *s, int64_t *at, int *k) {
    int i = -1;
    *k = -1;
    if (s->next_arrival < s->n_timed) {
        i = s->arrival[s->next_arrival];
        *at = s->t0 + s->reqs[i].arrival_ns;
    }
    for (int d = 0; d < s->n_due; d++)
        if (i < 0 || s->r[s->due[d]].due_ns < *at) {
            i = s->due[d];
            *at = s->r[i].due_ns;
            *k = d;
        }
    return i;
}

/* Sends i: a turn's prompt becomes the conversation so far and its own ids. */
static void send_req(sched *s, int i, int64_t at) {
    rq *r = &s->r[i];
    if (r->in->follows) {
        const rq *p = &s->r[r->in->follows - 1];
        int had = p->n_prompt + p->n_out;
        memcpy(r->ids, p->ids, (size_t)had * sizeof(int));
        memcpy(r->ids + had, r->in->prompt, (size_t)r->in->n_prompt * sizeof(int));
        r->n_prompt = r->done.n_prompt = had + r->in->n_prompt;
    }
    /* held back by the concurrency cap: sent when a request in flight finished */
    r->done.arrival_ns = s->o.max_inflight && s->slot_ns > at ? s->slot_ns : at;
    s->inflight++;
    q_push_back(s, i);
}

/* Admissions, one batched decode, the report. */
static int one_step(sched *s, char *err, size_t errlen) {
    s->step_peak = s->n_running;
    s->batch = 0;
    if (admit(s, err, errlen) || decode(s, err, errlen)) return -1;
    /* the requests still queued had to wait for room */
    for (int k = 0; k < s->q_len; k++) {
        rq *r = &s->r[s->queue[(s->q_head + k) % s->n]];
        if (!r->done.waited) s->st.waited++;
        r->done.waited = 1;
    }
    if (s->q_len > s->st.peak_waiting) s->st.peak_waiting = s->q_len;
    report_step(s);
    return 0;
}

int sched_run(sched *s, char *err, size_t errlen) {
    int64_t t0 = sched_now();
    s->t0 = t0;
    s->st.t_start_ns = t0;
    while (s->n_done < s->n) {
        int64_t now = sched_now(), at = 0;
        int i, k;
        while ((!s->o.max_inflight || s->inflight < s->o.max_inflight) && (i = next_due(s, &at, &k)) >= 0 && at <= now) {
            if (k < 0) s->next_arrival++;
            else s->due[k] = s->due[--s->n_due];
            send_req(s, i, at);
        }
        if (!s->n_running && !s->q_len && next_due(s, &at, &k) >= 0) {
            /* idle until the next request arrives */
            int64_t wait = at > now ? at - now : 0;
            struct timespec d = {.tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000};
            while (nanosleep(&d, &d) && errno == EINTR) {}
            continue;
        }
        if (one_step(s, err, errlen)) return -1;
    }
    s->st.t_end_ns = sched_now();
    return 0;
}

/* ---- an open scheduler (sched.h) ---- */

int sched_open(engine *e, int slots, const sched_opts *o, sched **out, char *err, size_t errlen) {
    *out = NULL;
    if (slots < 1) return bench_errf(err, errlen, "sched: %d slots: expected at least 1", slots);
    if (o->max_inflight) return bench_errf(err, errlen, "sched: an open scheduler takes no max_inflight (its caller sends)");
    if (check_opts(o, err, errlen)) return -1;
    sched *s = sched_alloc(e, slots, o);
    if (!s) return bench_errf(err, errlen, "sched: out of memory");
    s->open = 1;
    for (int i = 0; i < slots; i++) s->r[i] = (rq){.in = &s->reqs[i], .seq = -1, .next = -1, .state = RQ_FREE};
    s->t0 = s->st.t_start_ns = sched_now();
    *out = s;
    return 0;
}

int sched_submit(sched *s, const sched_req *q, char *err, size_t errlen) {
    if (!s->open) return bench_errf(err, errlen, "sched: sched_submit on a scheduler made by sched_create");
    int i = 0;
    while (i < s->n && s->r[i].state != RQ_FREE) i++;
    if (i == s->n) return bench_errf(err, errlen, "sched: all %d slots hold a request", s->n);
    if (q->follows) return bench_errf(err, errlen, "sched: request %d follows %d: an open scheduler takes no turns", i, q->follows - 1);
    if (check_lengths(q, i, err, errlen) || check_fits(q, i, q->n_prompt, s->vocab, engine_max_pos(s->e), err, errlen)) return -1;
    rq *r = &s->r[i];
    r->ids = malloc(((size_t)q->n_prompt + (size_t)q->max_new) * sizeof(int));
    r->tok_ns = s->o.token_times ? malloc((size_t)q->max_new * sizeof(int64_t)) : NULL;
    if (!r->ids || (s->o.token_times && !r->tok_ns)) {
        sched_retire(s, i);
        return bench_errf(err, errlen, "sched: out of memory");
    }
    s->reqs[i] = *q;
    s->reqs[i].prompt = r->ids;     /* the caller's is borrowed only for this call */
    memcpy(r->ids, q->prompt, (size_t)q->n_prompt * sizeof(int));
    r->n_prompt = r->cap_prompt = q->n_prompt;
    r->n_out = 0;
    r->done = (sched_done){.req = i, .n_prompt = q->n_prompt};
    send_req(s, i, sched_now());
    return i;
}

int sched_advance(sched *s, char *err, size_t errlen) {
    if (!s->n_running && !s->q_len) return 0;
    return one_step(s, err, errlen);
}

/* Takes i out of the waiting queue, keeping the others' order. */
static void q_remove(sched *s, int i) {
    int kept = 0;
    for (int k = 0; k < s->q_len; k++) {
        int j = s->queue[(s->q_head + k) % s->n];
        if (j != i) s->queue[(s->q_head + kept++) % s->n] = j;
    }
    s->q_len = kept;
}

void sched_cancel(sched *s, int i) {
    if (i < 0 || i >= s->n) return;
    rq *r = &s->r[i];
    if (r->state == RQ_WAITING) {
        q_remove(s, i);
    } else if (r->state == RQ_RUNNING) {
        int kept = 0;
        for (int k = 0; k < s->n_running; k++)
            if (s->running[k] != i) s->running[kept++] = s->running[k];
        s->n_running = kept;
        seq_release(s, r);
    } else {
        return;
    }
    sampler_free(r->smp);
    r->smp = NULL;
    r->state = RQ_DONE;
    s->inflight--;
    s->hold = 0;        /* its memory is free again, as at a finish */
}

void sched_retire(sched *s, int i) {
    if (i < 0 || i >= s->n || s->r[i].state == RQ_WAITING || s->r[i].state == RQ_RUNNING) return;
    rq *r = &s->r[i];
    free(r->ids);
    free(r->tok_ns);
    sampler_free(r->smp);
    *r = (rq){.in = &s->reqs[i], .seq = -1, .next = -1, .state = RQ_FREE};
    s->reqs[i] = (sched_req){0};
}

int sched_is_running(const sched *s, int i) { return i >= 0 && i < s->n && s->r[i].state == RQ_RUNNING; }
