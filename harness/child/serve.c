/* Serving runs: see serve.h. */
#include "serve.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/report/stats.h"

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

void sv_reqs_free(sv_reqs *r) {
    if (!r) return;
    free(r->r);
    free(r->ids);
    memset(r, 0, sizeof(*r));
}

/* Draws in a fixed order (the prefix, who shares it, then each request's lengths, ids
 * and arrival), so the same seed gives the same requests whatever else changes. */
int sv_make_requests(const sc_requests *rq, int vocab, int bos, uint64_t sampler_seed, sv_reqs *out,
                     char *err, size_t errlen) {
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
    return 0;
oom:
    free(prefix);
    free(shares);
    free(perm);
    free(own);
    free(outl);
    sv_reqs_free(out);
    return bench_errf(err, errlen, "serve: out of memory for %d requests", n);
}

/* ======================================================================
 * The worker spec
 * ====================================================================== */

static const char *const sv_dist_kinds[] = {"fixed", "uniform", "file"};

static cJSON *sv_dist_json(const sc_dist *d) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", sv_dist_kinds[d->kind]);
    cJSON_AddNumberToObject(o, "lo", d->lo);
    cJSON_AddNumberToObject(o, "hi", d->hi);
    if (d->kind == SC_DIST_FILE) cJSON_AddItemToObject(o, "values", cJSON_CreateIntArray(d->values, d->n_values));
    return o;
}

void sv_spec_add(cJSON *spec, const scenario *s) {
    const sc_requests *r = s->requests;
    if (!r) return;
    cJSON *o = cJSON_AddObjectToObject(spec, "requests");
    cJSON_AddNumberToObject(o, "count", r->count);
    cJSON_AddItemToObject(o, "prompt_len", sv_dist_json(&r->prompt_len));
    cJSON_AddItemToObject(o, "output_len", sv_dist_json(&r->output_len));
    cJSON_AddNumberToObject(o, "prefix_tokens", r->prefix_tokens);
    cJSON_AddNumberToObject(o, "prefix_fraction", r->prefix_fraction);
    cJSON_AddNumberToObject(o, "poisson_rate", r->poisson_rate);
    cJSON_AddNumberToObject(o, "kv_budget_bytes", (double)r->kv_budget_bytes);
    cJSON_AddNumberToObject(o, "kv_budget_tokens", (double)r->kv_budget_tokens);
    cJSON_AddNumberToObject(o, "seed", (double)r->seed);
    cJSON_AddNumberToObject(o, "max_batch", r->max_batch);
    cJSON_AddNumberToObject(o, "reserve_output", r->reserve_output);
    cJSON_AddBoolToObject(o, "stop_at_eos", r->stop_at_eos);
}

/* A number of the spec in [lo, hi]; -1 with err naming it otherwise. */
static int sv_num(const cJSON *o, const char *key, double lo, double hi, double *out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return bench_errf(err, errlen, "worker spec: requests.%s: expected a number %g .. %g", key, lo, hi);
    *out = v->valuedouble;
    return 0;
}

static int sv_dist_read(const cJSON *o, const char *key, sc_dist *d, char *err, size_t errlen) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key), *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
    double lo = 0, hi = 0;
    d->kind = -1;
    for (int i = 0; cJSON_IsString(k) && i < 3; i++)
        if (!strcmp(k->valuestring, sv_dist_kinds[i])) d->kind = i;
    if (d->kind < 0 || sv_num(j, "lo", 1, 1 << 20, &lo, err, errlen) || sv_num(j, "hi", lo, 1 << 20, &hi, err, errlen))
        return bench_errf(err, errlen, "worker spec: requests.%s: expected {kind, lo, hi[, values]}", key);
    d->lo = (int)lo;
    d->hi = (int)hi;
    if (d->kind != SC_DIST_FILE) return 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "values");
    int n = cJSON_GetArraySize(v);
    if (!cJSON_IsArray(v) || n < 1 || !(d->values = malloc((size_t)n * sizeof(int))))
        return bench_errf(err, errlen, "worker spec: requests.%s.values: expected a list of lengths", key);
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsNumber(it) || it->valuedouble < d->lo || it->valuedouble > d->hi)
            return bench_errf(err, errlen, "worker spec: requests.%s.values[%d]: expected %d .. %d", key, d->n_values, d->lo, d->hi);
        d->values[d->n_values++] = (int)it->valuedouble;
    }
    return 0;
}

sc_requests *sv_spec_read(const cJSON *spec, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(spec, "requests");
    if (!o) return NULL;
    sc_requests *r = calloc(1, sizeof(*r));
    if (!r) {
        bench_errf(err, errlen, "out of memory");
        return NULL;
    }
    double count = 0, np = 0, frac = 0, rate = 0, bb = 0, bt = 0, seed = 0, mb = 0, ro = 0;
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(o, "stop_at_eos");
    if (sv_num(o, "count", 1, 1e5, &count, err, errlen) || sv_dist_read(o, "prompt_len", &r->prompt_len, err, errlen) ||
        sv_dist_read(o, "output_len", &r->output_len, err, errlen) ||
        sv_num(o, "prefix_tokens", 0, 1 << 20, &np, err, errlen) || sv_num(o, "prefix_fraction", 0, 1, &frac, err, errlen) ||
        sv_num(o, "poisson_rate", 0, 1e9, &rate, err, errlen) || sv_num(o, "kv_budget_bytes", 0, 0x1p62, &bb, err, errlen) ||
        sv_num(o, "kv_budget_tokens", 0, 0x1p62, &bt, err, errlen) || sv_num(o, "seed", 0, 0x1p63, &seed, err, errlen) ||
        sv_num(o, "max_batch", 0, 1e5, &mb, err, errlen) || sv_num(o, "reserve_output", 0, 1, &ro, err, errlen)) {
        sc_requests_free(r);
        return NULL;
    }
    if (!cJSON_IsBool(eos)) {
        bench_errf(err, errlen, "worker spec: requests.stop_at_eos: expected true or false");
        sc_requests_free(r);
        return NULL;
    }
    r->count = (int)count;
    r->prefix_tokens = (int)np;
    r->prefix_fraction = frac;
    r->poisson_rate = rate;
    r->kv_budget_bytes = (uint64_t)bb;
    r->kv_budget_tokens = (uint64_t)bt;
    r->seed = (uint64_t)seed;
    r->max_batch = (int)mb;
    r->reserve_output = ro;
    r->stop_at_eos = cJSON_IsTrue(eos);
    return r;
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

static void sv_on_step(void *user, const sched_step *st) {
    int64_t x[BENCH_KVS_COUNT];
    x[BENCH_KVS_RESERVED] = (int64_t)st->kv.reserved;
    x[BENCH_KVS_LIVE] = (int64_t)st->kv.live;
    x[BENCH_KVS_CACHED] = (int64_t)st->kv.cached;
    x[BENCH_KVS_WASTED] = (int64_t)st->kv.wasted;
    x[BENCH_KVS_RUNNING] = st->running;
    x[BENCH_KVS_BATCH] = st->batch;
    x[BENCH_KVS_WAITING] = st->waiting;
    sv_send(user, BENCH_EV_KV_SAMPLE, st->t_ns, st->step, (int64_t)st->tokens, x, BENCH_KVS_COUNT);
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
    sv_send(user, BENCH_EV_REQUEST, d->end_ns, d->req, d->n_out, x, BENCH_RQ_COUNT);
}

int sv_serve(engine *e, const sc_requests *rq, double temperature, double topp, uint64_t seed, const sv_sink *sink,
             char *err, size_t errlen) {
    const model *m = engine_model(e);
    const tokenizer *tok = engine_tokenizer(e);
    int bos = tok ? tokenizer_bos(tok) : 1;
    int eos = !rq->stop_at_eos ? -1 : tok ? tokenizer_eos(tok) : m->vocab.eos;
    sv_reqs reqs;
    if (sv_make_requests(rq, m->cfg.vocab_size, bos, seed, &reqs, err, errlen)) return -1;
    sched_opts o = {.eos = eos, .temperature = (float)temperature, .topp = (float)topp, .max_batch = rq->max_batch,
                    .reserve_output = rq->reserve_output,
                    .on_step = sv_on_step, .on_done = sv_on_done, .user = (void *)sink};
    sched *s = NULL;
    int rc = sched_create(e, reqs.r, reqs.n, &o, &s, err, errlen);
    if (!rc) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sv_send(sink, BENCH_EV_SERVE_START, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, reqs.n, 0, NULL, 0);
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

/* ======================================================================
 * The parent: metrics and results
 * ====================================================================== */

static double sv_ms(int64_t ns) { return (double)ns * 1e-6; }

/* Adds name_p50 and name_p99 of x (sorted in place) when it has values. */
static void sv_quantiles(mt_bag *b, const char *name, double *x, int n) {
    if (n < 1) return;
    char k[96];
    st_sort(x, n);
    snprintf(k, sizeof(k), "%s_p50_ms", name);
    mt_add(b, k, "ms", st_quantile_sorted(x, n, 0.50));
    snprintf(k, sizeof(k), "%s_p99_ms", name);
    mt_add(b, k, "ms", st_quantile_sorted(x, n, 0.99));
}

void sv_metrics(const scenario *s, const rn_proc *p, mt_bag *b) {
    if (!p->t_serve_start || !p->t_serve_end || p->n_reqs < 1) return;
    int n = p->n_reqs, n_tpot = 0, met = 0;
    double secs = (double)(p->t_serve_end - p->t_serve_start) * 1e-9;
    double *ttft = malloc((size_t)n * sizeof(double)), *tpot = malloc((size_t)n * sizeof(double));
    double *lat = malloc((size_t)n * sizeof(double));
    if (!ttft || !tpot || !lat) goto out;
    double out_tok = 0, prompt_tok = 0, prefilled = 0, reused = 0, preempt = 0, waited = 0;
    const sc_requests *rq = s ? s->requests : NULL;
    for (int i = 0; i < n; i++) {
        const rn_request *r = &p->reqs[i];
        out_tok += (double)r->n_out;
        prompt_tok += (double)r->n_prompt;
        prefilled += (double)r->prefilled;
        reused += (double)r->prefix_reused;
        preempt += (double)r->preemptions;
        waited += (double)(r->waited != 0);
        ttft[i] = sv_ms(r->first_ns - r->arrival_ns);
        lat[i] = sv_ms(r->end_ns - r->arrival_ns);
        double tp = r->n_out > 1 ? sv_ms(r->end_ns - r->first_ns) / (double)(r->n_out - 1) : NAN;
        if (r->n_out > 1) tpot[n_tpot++] = tp;
        /* a one-token request has no TPOT to miss */
        if (rq && (!rq->ttft_ms || ttft[i] <= rq->ttft_ms) && (!rq->tpot_ms || r->n_out < 2 || tp <= rq->tpot_ms)) met++;
    }
    mt_add(b, "serve_requests", "count", n);
    mt_add(b, "serve_s", "s", secs);
    mt_add(b, "serve_output_tokens", "count", out_tok);
    mt_add(b, "serve_prompt_tokens", "count", prompt_tok);
    if (secs > 0) {
        mt_add(b, "serve_output_tok_s", "tok/s", out_tok / secs);
        mt_add(b, "serve_total_tok_s", "tok/s", (out_tok + prompt_tok) / secs);
    }
    sv_quantiles(b, "serve_ttft", ttft, n);
    sv_quantiles(b, "serve_tpot", tpot, n_tpot);
    sv_quantiles(b, "serve_latency", lat, n);
    if (rq && (rq->ttft_ms > 0 || rq->tpot_ms > 0)) mt_add(b, "serve_goodput_pct", "%", 100.0 * met / n);
    mt_add(b, "serve_prefill_tokens", "count", prefilled);
    mt_add(b, "serve_prefix_reused_tokens", "count", reused);
    mt_add(b, "serve_preemptions", "count", preempt);
    mt_add(b, "serve_waited", "count", waited);
    if (p->n_kvs) {
        double res = 0, live = 0, cached = 0, wasted = 0, util = 0, waste = 0;
        int peak = 0, peak_wait = 0;
        for (int i = 0; i < p->n_kvs; i++) {
            const rn_kv_sample *k = &p->kvs[i];
            if ((double)k->reserved > res) res = (double)k->reserved;
            if ((double)k->live > live) live = (double)k->live;
            if ((double)k->cached > cached) cached = (double)k->cached;
            if ((double)k->wasted > wasted) wasted = (double)k->wasted;
            if (k->running > peak) peak = k->running;
            if (k->waiting > peak_wait) peak_wait = k->waiting;
            util += k->reserved > 0 ? (double)k->live / (double)k->reserved : 0;
            waste += k->reserved > 0 ? (double)k->wasted / (double)k->reserved : 0;
        }
        mt_add(b, "serve_steps", "count", p->n_kvs);
        mt_add(b, "serve_peak_seqs", "count", peak);
        mt_add(b, "serve_peak_waiting", "count", peak_wait);
        mt_add(b, "serve_kv_reserved_peak_mib", "MiB", res / 1048576.0);
        mt_add(b, "serve_kv_live_peak_mib", "MiB", live / 1048576.0);
        mt_add(b, "serve_kv_cached_peak_mib", "MiB", cached / 1048576.0);
        mt_add(b, "serve_kv_wasted_peak_mib", "MiB", wasted / 1048576.0);
        mt_add(b, "serve_kv_live_mean_pct", "%", 100.0 * util / p->n_kvs);
        mt_add(b, "serve_kv_wasted_mean_pct", "%", 100.0 * waste / p->n_kvs);
    }
    const rn_snap *a = &p->snap[RN_PH_LOAD], *z = &p->snap[RN_PH_END];
    if (a->taken && z->taken && a->has_faults && z->has_faults) {
        mt_add(b, "minflt_serve", "count", (double)(z->minflt - a->minflt));
        mt_add(b, "majflt_serve", "count", (double)(z->majflt - a->majflt));
    }
out:
    free(ttft);
    free(tpot);
    free(lat);
}

/* Adds the column name = f(i) for i < n to o. */
#define SV_COLUMN(o, name, n, expr)                                    \
    do {                                                               \
        double *c_ = malloc((size_t)((n) > 0 ? (n) : 1) * sizeof(double)); \
        if (!c_) break;                                                \
        for (int i = 0; i < (n); i++) c_[i] = (expr);                  \
        cJSON_AddItemToObject(o, name, cJSON_CreateDoubleArray(c_, (n))); \
        free(c_);                                                      \
    } while (0)

cJSON *sv_kv_timeline_json(const rn_proc *p, int64_t t0) {
    if (!p->n_kvs) return NULL;
    cJSON *kv = cJSON_CreateObject();
    if (!kv) return NULL;
    const rn_kv_sample *k = p->kvs;
    int m = p->n_kvs;
    SV_COLUMN(kv, "t_ms", m, sv_ms(k[i].t_ns - t0));
    SV_COLUMN(kv, "step", m, (double)k[i].step);
    SV_COLUMN(kv, "tokens", m, (double)k[i].tokens);
    SV_COLUMN(kv, "reserved_bytes", m, (double)k[i].reserved);
    SV_COLUMN(kv, "live_bytes", m, (double)k[i].live);
    SV_COLUMN(kv, "cached_bytes", m, (double)k[i].cached);
    SV_COLUMN(kv, "wasted_bytes", m, (double)k[i].wasted);
    SV_COLUMN(kv, "running", m, (double)k[i].running);
    SV_COLUMN(kv, "batch", m, (double)k[i].batch);
    SV_COLUMN(kv, "waiting", m, (double)k[i].waiting);
    return kv;
}

cJSON *sv_proc_json(const rn_proc *p, int64_t t0) {
    if (!p->t_serve_start) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "requests_planned", p->n_requests_planned);
    cJSON_AddNumberToObject(o, "start_ms", sv_ms(p->t_serve_start - t0));
    if (p->t_serve_end) cJSON_AddNumberToObject(o, "end_ms", sv_ms(p->t_serve_end - t0));
    cJSON *rq = cJSON_AddObjectToObject(o, "requests");
    const rn_request *r = p->reqs;
    int n = p->n_reqs;
    SV_COLUMN(rq, "id", n, (double)r[i].id);
    SV_COLUMN(rq, "prompt_tokens", n, (double)r[i].n_prompt);
    SV_COLUMN(rq, "output_tokens", n, (double)r[i].n_out);
    SV_COLUMN(rq, "prefix_reused", n, (double)r[i].prefix_reused);
    SV_COLUMN(rq, "prefilled", n, (double)r[i].prefilled);
    SV_COLUMN(rq, "preemptions", n, (double)r[i].preemptions);
    SV_COLUMN(rq, "waited", n, (double)r[i].waited);
    SV_COLUMN(rq, "arrival_ms", n, sv_ms(r[i].arrival_ns - t0));
    SV_COLUMN(rq, "admit_ms", n, sv_ms(r[i].admit_ns - t0));
    SV_COLUMN(rq, "first_ms", n, sv_ms(r[i].first_ns - t0));
    SV_COLUMN(rq, "end_ms", n, sv_ms(r[i].end_ns - t0));
    SV_COLUMN(rq, "ttft_ms", n, sv_ms(r[i].first_ns - r[i].arrival_ns));
    /* null for a one-token request */
    SV_COLUMN(rq, "tpot_ms", n, r[i].n_out > 1 ? sv_ms(r[i].end_ns - r[i].first_ns) / (double)(r[i].n_out - 1) : NAN);
    cJSON *kv = sv_kv_timeline_json(p, t0);
    if (kv) cJSON_AddItemToObject(o, "kv_timeline", kv);
    return o;
}
#undef SV_COLUMN

char *sv_timeline_csv(const rn_proc *p, int64_t t0, size_t *len) {
    *len = 0;
    if (!p->n_kvs) return NULL;
    char *buf = NULL;
    size_t cap = 0;
    FILE *f = open_memstream(&buf, &cap);
    if (!f) return NULL;
    fprintf(f, "t_ms,step,tokens,kv_reserved_bytes,kv_live_bytes,kv_cached_bytes,kv_wasted_bytes,running,batch,waiting\n");
    for (int i = 0; i < p->n_kvs; i++) {
        const rn_kv_sample *k = &p->kvs[i];
        fprintf(f, "%.3f,%lld,%lld,%lld,%lld,%lld,%lld,%d,%d,%d\n", sv_ms(k->t_ns - t0), (long long)k->step,
                (long long)k->tokens, (long long)k->reserved, (long long)k->live, (long long)k->cached, (long long)k->wasted,
                k->running, k->batch, k->waiting);
    }
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    *len = cap;
    return buf;
}
