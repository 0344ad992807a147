/* Serving runs, the report's half: see serve_report.h. */
#include "serve_report.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/scenario/events.h"
#include "harness/scenario/stats.h"


static double sv_ms(int64_t ns) { return (double)ns * 1e-6; }

/* Adds name_p50 and name_p99 of x (sorted in place) when it has values. */
static void sv_quantiles(mt_bag *b, const char *name, double *x, int n) {
    if (n < 1) return;
    char k[96];
    st_sort(x, n);
    snprintf(k, sizeof(k), "%s_p50_ms", name);
    mt_add(b, k, "ms", MT_TIME_LO, st_quantile_sorted(x, n, 0.50));
    snprintf(k, sizeof(k), "%s_p99_ms", name);
    mt_add(b, k, "ms", MT_TIME_LO, st_quantile_sorted(x, n, 0.99));
}

/* Inter-token latency: every gap between two tokens of a request (with token times). */
static void sv_itl(const rn_proc *p, mt_bag *b) {
    size_t m = 0;
    for (int i = 0; i < p->n_reqs; i++) m += p->reqs[i].n_tok > 1 ? (size_t)p->reqs[i].n_tok - 1 : 0;
    if (!m || m > (size_t)INT32_MAX) return;
    double *g = malloc(m * sizeof(double));
    if (!g) return;
    size_t k = 0;
    for (int i = 0; i < p->n_reqs; i++)
        for (int j = 1; j < p->reqs[i].n_tok; j++) g[k++] = sv_ms(p->reqs[i].tok_ns[j] - p->reqs[i].tok_ns[j - 1]);
    sv_quantiles(b, "serve_itl", g, (int)m);
    free(g);
}

/* The share of prompt positions attached from the prefix cache, overall and, for
 * conversations, per turn (where the earlier turns are the prefix). */
static void sv_turn_metrics(const rn_proc *p, mt_bag *b) {
    enum { MAX_TURNS = 8 };     /* turns reported one by one; later ones count in the last */
    double prompt[MAX_TURNS] = {0}, reused[MAX_TURNS] = {0}, all_p = 0, all_r = 0;
    int top = 0;
    for (int i = 0; i < p->n_reqs; i++) {
        const rn_request *r = &p->reqs[i];
        int u = r->turn < 0 ? 0 : r->turn >= MAX_TURNS ? MAX_TURNS - 1 : (int)r->turn;
        top = u > top ? u : top;
        prompt[u] += (double)r->n_prompt;
        reused[u] += (double)r->prefix_reused;
        all_p += (double)r->n_prompt;
        all_r += (double)r->prefix_reused;
    }
    if (all_p > 0) mt_add(b, "serve_prefix_hit_pct", "%", MT_EXACT_HI, 100.0 * all_r / all_p);
    for (int u = 0; top > 0 && u <= top; u++) {
        char k[64];
        snprintf(k, sizeof(k), "serve_prefix_hit_turn%d%s_pct", u + 1, u == MAX_TURNS - 1 ? "_on" : "");
        if (prompt[u] > 0) mt_add(b, k, "%", MT_EXACT_HI, 100.0 * reused[u] / prompt[u]);
    }
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
    mt_add(b, "serve_requests", "count", MT_EXACT, n);
    mt_add(b, "serve_s", "s", MT_TIME_LO, secs);
    mt_add(b, "serve_output_tokens", "count", MT_EXACT, out_tok);
    mt_add(b, "serve_prompt_tokens", "count", MT_EXACT, prompt_tok);
    if (secs > 0) {
        mt_add(b, "serve_output_tok_s", "tok/s", MT_TIME_HI, out_tok / secs);
        mt_add(b, "serve_total_tok_s", "tok/s", MT_TIME_HI, (out_tok + prompt_tok) / secs);
    }
    sv_quantiles(b, "serve_ttft", ttft, n);
    sv_quantiles(b, "serve_tpot", tpot, n_tpot);
    sv_quantiles(b, "serve_latency", lat, n);
    sv_itl(p, b);
    if (rq && (rq->ttft_ms > 0 || rq->tpot_ms > 0)) mt_add(b, "serve_goodput_pct", "%", MT_TIME_HI, 100.0 * met / n);
    mt_add(b, "serve_prefill_tokens", "count", MT_EXACT, prefilled);
    sv_turn_metrics(p, b);
    mt_add(b, "serve_prefix_reused_tokens", "count", MT_EXACT_HI, reused);
    mt_add(b, "serve_preemptions", "count", MT_EXACT_LO, preempt);
    mt_add(b, "serve_waited", "count", MT_EXACT_LO, waited);
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
        mt_add(b, "serve_steps", "count", MT_EXACT, p->n_kvs);
        mt_add(b, "serve_peak_seqs", "count", MT_EXACT, peak);
        mt_add(b, "serve_peak_waiting", "count", MT_EXACT_LO, peak_wait);
        mt_add(b, "serve_kv_reserved_peak_mib", "MiB", MT_MEMORY, res / 1048576.0);
        mt_add(b, "serve_kv_live_peak_mib", "MiB", MT_MEMORY, live / 1048576.0);
        mt_add(b, "serve_kv_cached_peak_mib", "MiB", MT_MEMORY, cached / 1048576.0);
        mt_add(b, "serve_kv_wasted_peak_mib", "MiB", MT_MEMORY, wasted / 1048576.0);
        mt_add(b, "serve_kv_live_mean_pct", "%", MT_TIME_HI, 100.0 * util / p->n_kvs);
        mt_add(b, "serve_kv_wasted_mean_pct", "%", MT_TIME_LO, 100.0 * waste / p->n_kvs);
    }
    const rn_snap *a = &p->snap[RN_PH_LOAD], *z = &p->snap[RN_PH_END];
    if (a->taken && z->taken && a->has_faults && z->has_faults) {
        mt_add(b, "minflt_serve", "count", MT_FAULTS, (double)(z->minflt - a->minflt));
        mt_add(b, "majflt_serve", "count", MT_FAULTS, (double)(z->majflt - a->majflt));
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
    SV_COLUMN(rq, "turn", n, (double)r[i].turn);
    SV_COLUMN(rq, "session", n, (double)r[i].session);
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
