/* Serving runs, the worker's half: see serve.h. */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/child/traffic_gen.h"
#include "util/ut_clock.h"
#include "harness/scenario/stats.h"
#include "harness/scenario/traffic.h"

/* ======================================================================
 * The requests
 * ====================================================================== */

static uint64_t sv_next(uint64_t *s) { return st_splitmix64(s); }

static double sv_unit(uint64_t *s) { return (double)(sv_next(s) >> 11) * 0x1.0p-53; }   /* [0, 1) */

static int sv_between(uint64_t *s, int lo, int hi) { return lo + (int)(sv_next(s) % ((uint64_t)(hi - lo) + 1)); }

static int sv_draw(const sc_dist *d, int i, uint64_t *s) {
    switch (d->kind) {
    case SC_DIST_UNIFORM: return sv_between(s, d->lo, d->hi);
    case SC_DIST_FILE: return d->values[i % d->n_values];
    default: return d->lo;
    }
}


/* Draws in a fixed order (the prefix, who shares it, then each request's lengths, ids
 * and arrival), so the same seed gives the same requests whatever else changes. */
int sv_make_requests(const sc_requests *rq, int vocab, int bos, uint64_t sampler_seed, sv_reqs *out,
                     char *err, size_t errlen) {
    if (tg_owns(rq)) return tg_make_requests(rq, vocab, bos, sampler_seed, out, err, errlen);
    memset(out, 0, sizeof(*out));
    if (vocab <= 3) return bench_errf(err, errlen, "serve: a vocabulary of %d ids is too small for synthetic prompts (ids 3 ..)", vocab);
    if (rq->count < 1) return bench_errf(err, errlen, "serve: %d requests", rq->count);
    int n = rq->count;
    uint64_t st = rq->seed;
    int *prefix = NULL, *shares = NULL, *perm = NULL, *own = NULL, *outl = NULL;
    int np = rq->prefix_tokens;
    prefix = malloc(((size_t)np + 1) * sizeof(int));
    shares = calloc((size_t)n, sizeof(int));
    perm = malloc((size_t)n * sizeof(int));
    own = malloc((size_t)n * sizeof(int));
    outl = malloc((size_t)n * sizeof(int));
    out->r = calloc((size_t)n, sizeof(*out->r));
    if (!prefix || !shares || !perm || !own || !outl || !out->r) goto oom;
    for (int k = 0; k < np; k++) prefix[k] = k == 0 ? bos : 3 + (int)(sv_next(&st) % (uint64_t)(vocab - 3));
    /* exactly round(fraction x count) requests share it, chosen by a seeded shuffle */
    int k_share = np ? (int)llround(rq->prefix_fraction * n) : 0;
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = 0; i < k_share; i++) {
        int j = i + (int)(sv_next(&st) % (uint64_t)(n - i)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        shares[perm[i]] = 1;
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        own[i] = sv_draw(&rq->prompt_len, i, &st);
        outl[i] = sv_draw(&rq->output_len, i, &st);
        total += (size_t)own[i] + (shares[i] ? (size_t)np : 0);
    }
    out->ids = malloc(total * sizeof(int));
    if (!out->ids) goto oom;
    size_t at = 0;
    double t_s = 0;
    for (int i = 0; i < n; i++) {
        int *p = out->ids + at, len = 0;
        if (shares[i]) {
            memcpy(p, prefix, (size_t)np * sizeof(int));
            len = np;
        }
        for (int k = 0; k < own[i]; k++, len++) p[len] = len == 0 ? bos : 3 + (int)(sv_next(&st) % (uint64_t)(vocab - 3));
        if (rq->poisson_rate > 0) t_s += -log(1.0 - sv_unit(&st)) / rq->poisson_rate;
        out->r[i] = (sched_req){.prompt = p, .n_prompt = len, .max_new = outl[i], .arrival_ns = (int64_t)(t_s * 1e9),
                                .seed = sampler_seed + (uint64_t)i};
        at += (size_t)len;
    }
    out->n = n;
    free(prefix);
    free(shares);
    free(perm);
    free(own);
    free(outl);
    return tg_arrivals(rq, out, err, errlen);
oom:
    free(prefix);
    free(shares);
    free(perm);
    free(own);
    free(outl);
    sv_reqs_free(out);
    return bench_errf(err, errlen, "serve: out of memory for %d requests", n);
}


void sv_engine_spec(const sc_requests *rq, engine_spec *es) {
    /* no more sequences than requests: a shared pool's tables cost memory per sequence */
    es->max_seqs = rq->max_batch > 0 && rq->max_batch < rq->count ? rq->max_batch : rq->count;
    es->kv_budget_bytes = rq->kv_budget_bytes;
    es->kv_budget_tokens = rq->kv_budget_tokens;
}

/* ======================================================================
 * The worker: the scheduler's reports as events
 * ====================================================================== */

static void sv_send(const sv_sink *k, uint32_t type, int64_t t, int64_t a, int64_t b, const int64_t *x, int nx) {
    bench_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    ev.t_ns = t;
    ev.a = a;
    ev.b = b;
    for (int i = 0; i < nx; i++) ev.x[i] = x[i];
    k->send(k->user, &ev);
}

/* What the scheduler's reports need: where to send, and which turn each request is. */
typedef struct sv_ctx {
    const sv_sink *sink;
    const sv_reqs *reqs;
} sv_ctx;

static void sv_on_step(void *user, const sched_step *st) {
    const sv_sink *k = ((const sv_ctx *)user)->sink;
    int64_t x[BENCH_KVS_COUNT];
    x[BENCH_KVS_RESERVED] = (int64_t)st->kv.reserved;
    x[BENCH_KVS_LIVE] = (int64_t)st->kv.live;
    x[BENCH_KVS_CACHED] = (int64_t)st->kv.cached;
    x[BENCH_KVS_WASTED] = (int64_t)st->kv.wasted;
    x[BENCH_KVS_RUNNING] = st->running;
    x[BENCH_KVS_BATCH] = st->batch;
    x[BENCH_KVS_WAITING] = st->waiting;
    sv_send(k, BENCH_EV_KV_SAMPLE, st->t_ns, st->step, (int64_t)st->tokens, x, BENCH_KVS_COUNT);
}

static void sv_on_done(void *user, const sched_done *d) {
    int64_t x[BENCH_RQ_COUNT];
    x[BENCH_RQ_ARRIVAL_NS] = d->arrival_ns;
    x[BENCH_RQ_ADMIT_NS] = d->admit_ns;
    x[BENCH_RQ_FIRST_NS] = d->first_ns;
    x[BENCH_RQ_PROMPT] = d->n_prompt;
    x[BENCH_RQ_PREFIX_REUSED] = d->prefix_reused;
    x[BENCH_RQ_PREFILLED] = d->prefill_tokens;
    x[BENCH_RQ_PREEMPTIONS] = d->preemptions;
    x[BENCH_RQ_WAITED] = d->waited;
    const sv_ctx *c = user;
    x[BENCH_RQ_TURN] = c->reqs->turn ? c->reqs->turn[d->req] : 0;
    x[BENCH_RQ_SESSION] = c->reqs->session ? c->reqs->session[d->req] : d->req;
    sv_send(c->sink, BENCH_EV_REQUEST, d->end_ns, d->req, d->n_out, x, BENCH_RQ_COUNT);
    for (int k = 0; d->token_ns && k < d->n_out; k += BENCH_REQ_TOKENS_PER_EVENT) {
        int64_t t[1 + BENCH_REQ_TOKENS_PER_EVENT];
        int m = d->n_out - k < BENCH_REQ_TOKENS_PER_EVENT ? d->n_out - k : BENCH_REQ_TOKENS_PER_EVENT;
        t[0] = m;
        memcpy(t + 1, d->token_ns + k, (size_t)m * sizeof(int64_t));
        sv_send(c->sink, BENCH_EV_REQ_TOKENS, d->end_ns, d->req, k, t, 1 + m);
    }
}

int sv_serve(engine *e, const sc_requests *rq, double temperature, double topp, uint64_t seed, const sv_sink *sink,
             char *err, size_t errlen) {
    const model *m = engine_model(e);
    const tokenizer *tok = engine_tokenizer(e);
    int bos = tok ? tokenizer_bos(tok) : 1;
    int eos = !rq->stop_at_eos ? -1 : tok ? tokenizer_eos(tok) : m->vocab.eos;
    sv_reqs reqs;
    if (sv_make_requests(rq, m->cfg.vocab_size, bos, seed, &reqs, err, errlen)) return -1;
    sv_ctx ctx = {.sink = sink, .reqs = &reqs};
    sched_opts o = {.eos = eos, .temperature = (float)temperature, .topp = (float)topp, .max_batch = rq->max_batch,
                    .reserve_output = rq->reserve_output, .max_inflight = rq->traffic ? rq->traffic->concurrency : 0,
                    .token_times = rq->token_times,
                    .on_step = sv_on_step, .on_done = sv_on_done, .user = &ctx};
    sched *s = NULL;
    int rc = sched_create(e, reqs.r, reqs.n, &o, &s, err, errlen);
    if (!rc) {
        sv_send(sink, BENCH_EV_SERVE_START, ut_now_ns(), reqs.n, 0, NULL, 0);
        rc = sched_run(s, err, errlen);
    }
    if (!rc) {
        const sched_stats *st = sched_get_stats(s);
        sv_send(sink, BENCH_EV_SERVE_END, st->t_end_ns, st->steps, 0, NULL, 0);
    }
    sched_destroy(s);
    sv_reqs_free(&reqs);
    return rc;
}
