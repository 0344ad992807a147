/* Runs against an http target, the report's half: see http_report.h. */
#include "http_report.h"

#include <cJSON.h>
#include <stdlib.h>

#include "harness/net/httpc.h"
#include "harness/report/scrape_report.h"
#include "harness/report/serve_report.h"
#include "harness/scenario/events.h"
#include "harness/scenario/stats.h"

void hr_serve_metrics(const scenario *s, const rn_proc *p, mt_bag *b) {
    sv_metrics(s, p, b);
    sr_metrics(p, b);
    if (!p->mem_source || p->n_rtok < 2) return;
    double *g = malloc((size_t)p->n_rtok * sizeof(*g));
    if (!g) return;
    int n = 0;
    /* the arrivals come request by request (http_worker.c sends each request's together) */
    for (int i = 1; i < p->n_rtok; i++)
        if (p->rtok[i].req == p->rtok[i - 1].req) g[n++] = (double)(p->rtok[i].t_ns - p->rtok[i - 1].t_ns) * 1e-6;
    if (n) {
        st_sort(g, n);
        mt_add(b, "serve_itl_p50_ms", "ms", MT_TIME_LO, st_quantile_sorted(g, n, 0.50));
        mt_add(b, "serve_itl_p99_ms", "ms", MT_TIME_LO, st_quantile_sorted(g, n, 0.99));
        mt_add(b, "serve_itl_max_ms", "ms", MT_TIME_LO, g[n - 1]);
    }
    free(g);
}

void hr_inference_metrics(const scenario *s, const rn_proc *p, mt_bag *b) {
    (void)s;
    sr_metrics(p, b);
    /* the server's faults while it served, where no prefill snapshot splits them (events.h:
     * an http run's PREFILL_END takes none, a snapshot mid-stream would delay the tokens) */
    const rn_snap *a = &p->snap[RN_PH_LOAD], *z = &p->snap[RN_PH_END];
    if (!p->mem_source || p->snap[RN_PH_PREFILL].taken || !a->taken || !z->taken || !a->has_faults || !z->has_faults) return;
    mt_add(b, "minflt_workload", "count", MT_FAULTS, (double)(z->minflt - a->minflt));
    mt_add(b, "majflt_workload", "count", MT_FAULTS, (double)(z->majflt - a->majflt));
}

cJSON *hr_proc_json(const rn_proc *p, int64_t t0) {
    if (!p->mem_source) return NULL;
    static const char *const src[] = {"latency-only", "launched", "pid"};
    int k = p->mem_source - 1;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "memory", k >= 0 && k <= BENCH_TGT_PID ? src[k] : "?");
    if (p->mem_pid) cJSON_AddNumberToObject(o, "server_pid", p->mem_pid);
    /* memory "tree": the figures are the tree's sums; here its members one by one */
    cJSON *tree = p->tree ? pt_json(p->tree) : NULL;
    if (tree) cJSON_AddItemToObject(o, "tree", tree);
    cJSON *reqs = cJSON_AddArrayToObject(o, "requests"), *cur = NULL;
    for (int i = 0; i < p->n_rtok; i++) {
        if (!cur || p->rtok[i].req != p->rtok[i - 1].req) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddItemToArray(reqs, r);
            cJSON_AddNumberToObject(r, "request", (double)p->rtok[i].req);
            cur = cJSON_AddArrayToObject(r, "tokens_ms");
        }
        cJSON_AddItemToArray(cur, cJSON_CreateNumber((double)(p->rtok[i].t_ns - t0) * 1e-6));
    }
    /* every kind, 0 included, so that a reader sees what was checked as well as what failed */
    int by_kind[HC_ERR_COUNT] = {0};
    for (int i = 0; i < p->n_rfail; i++)
        if (p->rfail[i].kind > HC_OK && p->rfail[i].kind < HC_ERR_COUNT) by_kind[p->rfail[i].kind]++;
    cJSON *kinds = cJSON_AddObjectToObject(o, "failed_by_kind");
    for (int k = HC_OK + 1; k < HC_ERR_COUNT; k++) cJSON_AddNumberToObject(kinds, hc_err_name(k), by_kind[k]);
    cJSON *failed = cJSON_AddArrayToObject(o, "failed");
    for (int i = 0; i < p->n_rfail; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddItemToArray(failed, f);
        cJSON_AddNumberToObject(f, "request", (double)p->rfail[i].req);
        cJSON_AddStringToObject(f, "kind", hc_err_name((int)p->rfail[i].kind));
        cJSON_AddStringToObject(f, "message", p->rfail[i].msg);
    }
    return o;
}
