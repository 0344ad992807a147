#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/scenario/kind.h"
#include "harness/scenario/stats.h"
#include "util/ut_vec.h"

void mt_add(mt_bag *b, const char *name, const char *unit, mc_decl decl, double v) {
    if (!isfinite(v)) return;
    if (ut_vec_reserve_par(&b->cap, (size_t)b->n + 1, 5, (void *[]){&b->name, &b->unit, &b->v, &b->units_owned, &b->decl},
                           (size_t[]){sizeof(*b->name), sizeof(*b->unit), sizeof(*b->v), sizeof(*b->units_owned),
                                      sizeof(*b->decl)}))
        return;
    b->name[b->n] = strdup(name);
    b->units_owned[b->n] = strdup(unit);
    b->unit[b->n] = b->units_owned[b->n];
    b->v[b->n] = v;
    b->decl[b->n] = decl;
    if (b->name[b->n] && b->unit[b->n]) b->n++;
    else {
        free(b->name[b->n]);
        free(b->units_owned[b->n]);
    }
}

void mt_bag_free(mt_bag *b) {
    for (int i = 0; i < b->n; i++) {
        free(b->name[i]);
        free(b->units_owned[i]);
    }
    free(b->name);
    free(b->unit);
    free(b->v);
    free(b->units_owned);
    free(b->decl);
    memset(b, 0, sizeof(*b));
}

/* A perf event's counts, as perfev.c declares them; instructions within 0.5% (they vary with
 * the interrupts and page faults the kernel takes on the process's behalf). */
static mc_decl mt_perf_decl(const pe_counter *c) {
    mc_decl d = mc_from_counter("count", c->cls, c->better);
    if (!strcmp(c->name, "instructions")) d.tol_rel = 0.005;
    return d;
}

static double mt_mib(int64_t kib) { return (double)kib / 1024.0; }
static double mt_ms(int64_t ns) { return (double)ns * 1e-6; }

void mt_proc(const scenario *s, const rn_proc *p, mt_bag *b) {
    char name[160];
    if (p->t_load_end && p->t_load_start) mt_add(b, "load_ms", "ms", MT_TIME_LO, mt_ms(p->t_load_end - p->t_load_start));
    if (p->t_prefill_end && p->t_prefill_start) {
        double ttft = mt_ms(p->t_prefill_end - p->t_prefill_start);
        mt_add(b, "ttft_ms", "ms", MT_TIME_LO, ttft);
        if (ttft > 0) mt_add(b, "prefill_tok_s", "tok/s", MT_TIME_HI, p->n_prompt / (ttft * 1e-3));
    }
    int steps = p->n_tok - 1;
    double decode_tok_s = 0;
    if (steps > 0 && p->t_decode_start) {
        double dec = mt_ms(p->tok_ns[p->n_tok - 1] - p->t_decode_start);
        mt_add(b, "tpot_ms", "ms", MT_TIME_LO, dec / steps);
        if (dec > 0) mt_add(b, "decode_tok_s", "tok/s", MT_TIME_HI, decode_tok_s = steps / (dec * 1e-3));
        double *itl = malloc((size_t)steps * sizeof(*itl));
        if (itl) {
            for (int k = 0; k < steps; k++)
                itl[k] = mt_ms(p->tok_ns[k + 1] - (k == 0 ? p->t_decode_start : p->tok_ns[k]));
            st_sort(itl, steps);
            mt_add(b, "itl_p50_ms", "ms", MT_TIME_LO, st_quantile_sorted(itl, steps, 0.50));
            mt_add(b, "itl_p90_ms", "ms", MT_TIME_LO, st_quantile_sorted(itl, steps, 0.90));
            mt_add(b, "itl_p99_ms", "ms", MT_TIME_LO, st_quantile_sorted(itl, steps, 0.99));
            mt_add(b, "itl_max_ms", "ms", MT_TIME_LO, itl[steps - 1]);
            free(itl);
        }
    }
    const rn_snap *end = &p->snap[RN_PH_END];
    if (end->taken && end->st.vm_hwm > 0) mt_add(b, "peak_rss_mib", "MiB", MT_MEMORY, mt_mib(end->st.vm_hwm));
    mt_add(b, "ru_maxrss_mib", "MiB", MT_MEMORY, mt_mib(p->ru.ru_maxrss));
    static const int phs[] = {RN_PH_LOAD, RN_PH_PREFILL, RN_PH_END};
    for (int i = 0; i < 3; i++) {
        const rn_snap *sn = &p->snap[phs[i]];
        const char *ph = rn_phase_name(phs[i]);
        if (!sn->taken || sn->st.vm_rss < 0) continue;
        snprintf(name, sizeof(name), "rss_%s_mib", ph), mt_add(b, name, "MiB", MT_MEMORY, mt_mib(sn->st.vm_rss));
        snprintf(name, sizeof(name), "anon_%s_mib", ph), mt_add(b, name, "MiB", MT_MEMORY, mt_mib(sn->st.rss_anon));
        snprintf(name, sizeof(name), "file_%s_mib", ph), mt_add(b, name, "MiB", MT_MEMORY, mt_mib(sn->st.rss_file));
        snprintf(name, sizeof(name), "shmem_%s_mib", ph), mt_add(b, name, "MiB", MT_MEMORY, mt_mib(sn->st.rss_shmem));
        if (sn->pss_kib >= 0) snprintf(name, sizeof(name), "pss_%s_mib", ph), mt_add(b, name, "MiB", MT_INFO_LO, mt_mib(sn->pss_kib));
    }
    static const int rph[] = {RN_PH_LOAD, RN_PH_END};
    for (int i = 0; i < 2; i++) {
        const rn_snap *sn = &p->snap[rph[i]];
        if (!sn->taken || !sn->has_smaps) continue;
        for (int r = 0; r < sn->smaps.n; r++) {
            const pm_region *g = &sn->smaps.v[r];
            snprintf(name, sizeof(name), "region_%s_rss_%s_mib", g->name, rn_phase_name(rph[i]));
            mt_add(b, name, "MiB", MT_MEMORY, mt_mib(g->rss_kib));
            snprintf(name, sizeof(name), "region_%s_pss_%s_mib", g->name, rn_phase_name(rph[i]));
            mt_add(b, name, "MiB", MT_INFO_LO, mt_mib(g->pss_kib));
        }
    }
    /* faults per phase: load = start..load, prefill = load..prefill, decode = prefill..end */
    static const char *fph[] = {"load", "prefill", "decode"};
    for (int i = 0; i < 3; i++) {
        const rn_snap *a = &p->snap[i], *z = &p->snap[i + 1];
        if (a->taken && z->taken && a->has_faults && z->has_faults) {
            snprintf(name, sizeof(name), "minflt_%s", fph[i]), mt_add(b, name, "count", MT_FAULTS, (double)(z->minflt - a->minflt));
            snprintf(name, sizeof(name), "majflt_%s", fph[i]), mt_add(b, name, "count", MT_FAULTS, (double)(z->majflt - a->majflt));
        }
        for (int k = 0; p->perf_opened && k < p->perf.n; k++) {
            if (!a->taken || !z->taken || !a->perf_ok[k] || !z->perf_ok[k]) continue;
            snprintf(name, sizeof(name), "perf_%s_%s", p->perf.c[k].name, fph[i]);
            mt_add(b, name, "count", mt_perf_decl(&p->perf.c[k]), (double)(z->perf[k] - a->perf[k]));
        }
    }
    for (int k = 0; p->perf_opened && k < p->perf.n; k++)
        if (end->taken && end->perf_ok[k]) {
            snprintf(name, sizeof(name), "perf_%s_total", p->perf.c[k].name);
            mt_add(b, name, "count", mt_perf_decl(&p->perf.c[k]), (double)end->perf[k]);
        }
    mt_add(b, "minflt_total", "count", MT_FAULTS, (double)p->ru.ru_minflt);
    mt_add(b, "majflt_total", "count", MT_FAULTS, (double)p->ru.ru_majflt);
    /* what the worker read from disk, not from the page cache (ru_inblock: 512-byte blocks):
     * pread's reads of a cold model show here, though they are not page faults */
    mt_add(b, "disk_read_mib", "MiB", MT_INFO, (double)p->ru.ru_inblock * 512.0 / (1024.0 * 1024.0));
    mt_add(b, "nvcsw", "count", MT_INFO, (double)p->ru.ru_nvcsw);
    mt_add(b, "nivcsw", "count", MT_INFO, (double)p->ru.ru_nivcsw);
    mt_add(b, "user_ms", "ms", MT_TIME_LO, p->ru.ru_utime.tv_sec * 1e3 + p->ru.ru_utime.tv_usec * 1e-3);
    mt_add(b, "sys_ms", "ms", MT_TIME_LO, p->ru.ru_stime.tv_sec * 1e3 + p->ru.ru_stime.tv_usec * 1e-3);
    if (s->kind && s->kind->metrics) s->kind->metrics(s, p, b);
    for (int i = 0; i < p->n_counters; i++) {
        snprintf(name, sizeof(name), "mod.%s", p->counters[i].name);
        const char *unit = p->counters[i].unit[0] ? p->counters[i].unit : "count";
        mt_add(b, name, unit, mc_from_counter(unit, p->counters[i].cls, p->counters[i].better), p->counters[i].value);
        /* the metric "bandwidth": decode against the read bound the same worker measured after it */
        if (!strcmp(p->counters[i].name, "bandwidth.decode_bound_tok_s") && p->counters[i].value > 0 && decode_tok_s > 0)
            mt_add(b, "decode_bound_pct", "%", MT_TIME_HI, 100.0 * decode_tok_s / p->counters[i].value);
    }
}

void mt_run(const scenario *s, const rn_run *r, mt_bag *b) {
    int64_t pss = 0, weights = 0;
    int have_pss = 1, have_w = 0;
    for (int i = 0; i < r->nproc; i++) {
        const rn_snap *sn = &r->procs[i].snap[RN_PH_END];
        if (!sn->taken || sn->pss_kib < 0) have_pss = 0;
        else pss += sn->pss_kib;
        if (sn->taken && sn->has_smaps) {
            /* absent, not 0, where neither a named weights region nor a model file mapping was seen */
            const pm_region *w = pm_find_region(&sn->smaps, "weights"), *f = pm_find_region(&sn->smaps, "model_file");
            weights += (w ? w->pss_kib : 0) + (f ? f->pss_kib : 0);
            have_w |= w || f;
        }
    }
    if (have_pss) mt_add(b, "pss_total_end_mib", "MiB", MT_INFO_LO, mt_mib(pss));
    if (have_w) mt_add(b, "weights_pss_total_mib", "MiB", MT_INFO_LO, mt_mib(weights));
    if (r->total_pages) mt_add(b, "residency_pct", "%", MT_INFO, 100.0 * (double)r->resident_pages / (double)r->total_pages);
    (void)s;
}
