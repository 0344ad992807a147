/* Serving traffic, the worker's half: see traffic_gen.h. */
#include "traffic_gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/scenario/stats.h"
#include "harness/scenario/traffic.h"

#define TG_MAX_REQUESTS 1000000     /* a sessions workload's requests, at most */

int tg_owns(const sc_requests *rq) { return rq->traffic && (rq->traffic->trace || rq->traffic->sessions); }

static double tg_unit(uint64_t *s) { return (double)(st_splitmix64(s) >> 11) * 0x1.0p-53; }

static int tg_draw(const sc_dist *d, int i, uint64_t *s) {
    switch (d->kind) {
    case SC_DIST_UNIFORM: return d->lo + (int)(st_splitmix64(s) % ((uint64_t)(d->hi - d->lo) + 1));
    case SC_DIST_FILE: return d->values[i % d->n_values];
    default: return d->lo;
    }
}

/* The id at offset o of the block whose hash id is h: the same for every row that has h. */
static int tg_block_id(int64_t h, int o, uint64_t seed, int vocab) {
    uint64_t x = (uint64_t)h * 0x9E3779B97F4A7C15ull ^ ((uint64_t)o << 32) ^ seed * 0xD1B54A32D192ED03ull;
    return 3 + (int)(st_splitmix64(&x) % (uint64_t)(vocab - 3));
}

/* The arrival offsets (s) of m first requests: the process given, else the old
 * poisson_rate, else NULL (the caller's default). */
static int tg_times(const sc_requests *rq, int m, double **t, char *err, size_t errlen) {
    *t = NULL;
    const tf_traffic *tf = rq->traffic;
    ar_spec a;
    if (tf && tf->has_arrival) a = tf->arrival;
    else if (rq->poisson_rate > 0) a = (ar_spec){.kind = AR_POISSON, .rate = rq->poisson_rate};
    else return 0;
    *t = malloc(((size_t)m + 1) * sizeof(double));
    if (!*t) return bench_errf(err, errlen, "serve: out of memory for %d arrival times", m);
    /* their own stream: the lengths and ids stay those of the same seed without a process */
    if (ar_times(&a, m, rq->seed ^ 0xA5A5A5A55A5A5A5Aull, *t)) {
        free(*t);
        *t = NULL;
        return bench_errf(err, errlen, "serve: arrival process %s at %g requests/s (burstiness %g, rate_end %g): out of range",
                          ar_kind_name(a.kind), a.rate, a.burstiness, a.rate_end);
    }
    return 0;
}

int tg_arrivals(const sc_requests *rq, sv_reqs *r, char *err, size_t errlen) {
    if (!rq->traffic || !rq->traffic->has_arrival) return 0;
    int m = 0;
    for (int i = 0; i < r->n; i++) m += !r->r[i].follows;
    double *t;
    if (tg_times(rq, m, &t, err, errlen)) return -1;
    for (int i = 0, k = 0; t && i < r->n; i++)
        if (!r->r[i].follows) r->r[i].arrival_ns = (int64_t)(t[k++] * 1e9);
    free(t);
    return 0;
}

static int tg_alloc(sv_reqs *out, int n, size_t total) {
    out->r = calloc((size_t)n, sizeof(*out->r));
    out->turn = calloc((size_t)n, sizeof(int));
    out->session = calloc((size_t)n, sizeof(int));
    out->ids = malloc((total + 1) * sizeof(int));
    return out->r && out->turn && out->session && out->ids ? 0 : -1;
}

static int tg_trace(const sc_requests *rq, int vocab, int bos, uint64_t sampler_seed, sv_reqs *out, char *err, size_t errlen) {
    const tf_traffic *tf = rq->traffic;
    const tr_trace *tr = tf->trace;
    int n = tr->n, bt = tf_block_tokens(tr, tf->length_scale);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)tf_scale_len(tr->r[i].input, tf->length_scale, tf->max_prompt);
    if (tg_alloc(out, n, total)) {
        sv_reqs_free(out);
        return bench_errf(err, errlen, "serve: out of memory for %d trace requests (%zu prompt tokens)", n, total);
    }
    double *t;
    if (tg_times(rq, n, &t, err, errlen)) {
        sv_reqs_free(out);
        return -1;
    }
    uint64_t st = rq->seed;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const tr_req *q = &tr->r[i];
        int len = tf_scale_len(q->input, tf->length_scale, tf->max_prompt);
        int *p = out->ids + at;
        for (int j = 0; j < len; j++) {
            if (!j) p[j] = bos;
            else if (q->n_hash) {
                int k = j / bt < q->n_hash ? j / bt : q->n_hash - 1;
                p[j] = tg_block_id(tr->hash[q->hash_at + (size_t)k], j - k * bt, rq->seed, vocab);
            } else {
                p[j] = 3 + (int)(st_splitmix64(&st) % (uint64_t)(vocab - 3));
            }
        }
        double ts = t ? t[i] : tr->timed ? q->t_s / tf->time_scale : 0;
        out->r[i] = (sched_req){.prompt = p, .n_prompt = len, .max_new = tf_scale_len(q->output, tf->length_scale, tf->max_output),
                                .arrival_ns = (int64_t)llround(ts * 1e9), .seed = sampler_seed + (uint64_t)i};
        out->turn[i] = 0;
        out->session[i] = i;
        at += (size_t)len;
    }
    free(t);
    out->n = n;
    return 0;
}

static int tg_sessions(const sc_requests *rq, int vocab, int bos, uint64_t sampler_seed, sv_reqs *out, char *err, size_t errlen) {
    const tf_traffic *tf = rq->traffic;
    int c = rq->count;
    uint64_t st = rq->seed;
    int *turns = malloc((size_t)c * sizeof(int));
    if (!turns) return bench_errf(err, errlen, "serve: out of memory for %d conversations", c);
    long long n = 0;
    for (int k = 0; k < c; k++) {
        turns[k] = tf->turns_lo + (int)(st_splitmix64(&st) % (uint64_t)(tf->turns_hi - tf->turns_lo + 1));
        n += turns[k];
    }
    if (n > TG_MAX_REQUESTS) {
        free(turns);
        return bench_errf(err, errlen, "serve: %d conversations make %lld turns: expected at most %d requests", c, n, TG_MAX_REQUESTS);
    }
    int *own = malloc((size_t)n * sizeof(int)), *outl = malloc((size_t)n * sizeof(int));
    double *think = malloc((size_t)n * sizeof(double));
    size_t total = 0;
    if (!own || !outl || !think) goto oom;
    for (long long i = 0; i < n; i++) {
        own[i] = tg_draw(&rq->prompt_len, (int)i, &st);
        outl[i] = tg_draw(&rq->output_len, (int)i, &st);
        think[i] = tf->think_lo_ms + (tf->think_hi_ms - tf->think_lo_ms) * tg_unit(&st);
        total += (size_t)own[i];
    }
    if (tg_alloc(out, (int)n, total)) goto oom;
    double *t;
    if (tg_times(rq, c, &t, err, errlen)) {
        free(turns);
        free(own);
        free(outl);
        free(think);
        sv_reqs_free(out);
        return -1;
    }
    size_t at = 0;
    int i = 0;
    for (int k = 0; k < c; k++)
        for (int u = 0; u < turns[k]; u++, i++) {
            int *p = out->ids + at;
            for (int j = 0; j < own[i]; j++) p[j] = !u && !j ? bos : 3 + (int)(st_splitmix64(&st) % (uint64_t)(vocab - 3));
            out->r[i] = (sched_req){.prompt = p, .n_prompt = own[i], .max_new = outl[i], .seed = sampler_seed + (uint64_t)i,
                                    .arrival_ns = !u && t ? (int64_t)llround(t[k] * 1e9) : 0,
                                    .follows = u ? i : 0, .think_ns = u ? (int64_t)llround(think[i] * 1e6) : 0};
            out->turn[i] = u;
            out->session[i] = k;
            at += (size_t)own[i];
        }
    free(t);
    free(turns);
    free(own);
    free(outl);
    free(think);
    out->n = (int)n;
    return 0;
oom:
    free(turns);
    free(own);
    free(outl);
    free(think);
    sv_reqs_free(out);
    return bench_errf(err, errlen, "serve: out of memory for %lld turns", n);
}

int tg_make_requests(const sc_requests *rq, int vocab, int bos, uint64_t sampler_seed, sv_reqs *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (vocab <= 3) return bench_errf(err, errlen, "serve: a vocabulary of %d ids is too small for synthetic prompts (ids 3 ..)", vocab);
    if (rq->traffic->trace) return tg_trace(rq, vocab, bos, sampler_seed, out, err, errlen);
    return tg_sessions(rq, vocab, bos, sampler_seed, out, err, errlen);
}
