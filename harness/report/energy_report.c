/* A repetition's energy in results.json and its metrics (energy_report.h). */
#include "harness/report/energy_report.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/escape.h"

/* The phases as pairs of marks (runner.h RN_PH_*); serve stands in for prefill and decode
 * in a serving run, which has no prefill boundary. */
static const struct { const char *name; int a, b; } er_phases[] = {
    {"load", RN_PH_START, RN_PH_LOAD},
    {"prefill", RN_PH_LOAD, RN_PH_PREFILL},
    {"decode", RN_PH_PREFILL, RN_PH_END},
    {"serve", RN_PH_LOAD, RN_PH_END},
};
#define ER_NPH (int)(sizeof(er_phases) / sizeof(er_phases[0]))

static int er_phase(const en_run *e, int k, double *j, double *s) {
    /* serve only where there is no prefill mark: else it would count both phases again */
    if (!strcmp(er_phases[k].name, "serve") && e->mark[RN_PH_PREFILL].t_ns) return -1;
    return en_run_between(e, er_phases[k].a, er_phases[k].b, j, s);
}

/* The prompt tokens and the decoded ones (after the first, which prefill made) of every process. */
static void er_tokens(const rn_run *r, double *prompt, double *decoded) {
    *prompt = *decoded = 0;
    for (int i = 0; i < r->nproc; i++) {
        *prompt += r->procs[i].n_prompt;
        if (r->procs[i].n_tok > 1) *decoded += r->procs[i].n_tok - 1;
    }
}

static double er_mib(int64_t b) { return b < 0 ? NAN : (double)b / (1024.0 * 1024.0); }

static void er_num(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static cJSON *er_timeline(const rn_run *r) {
    const en_run *e = &r->energy;
    int64_t t0 = r->nproc ? r->procs[0].t_hello : 0;
    cJSON *tl = cJSON_CreateObject();
    cJSON *cols[4] = {cJSON_AddArrayToObject(tl, "t_ms"), cJSON_AddArrayToObject(tl, "watts"),
                      cJSON_AddArrayToObject(tl, "gpu_used_mib"), cJSON_AddArrayToObject(tl, "gpu_proc_mib")};
    int gpu = 0;
    for (int k = 0; k < e->n_pts; k++) gpu |= e->pts[k].gpu_used >= 0;
    for (int k = 0; k < e->n_pts; k++) {
        const en_point *p = &e->pts[k];
        double v[4] = {t0 ? (double)(p->t_ns - t0) * 1e-6 : NAN, p->w, er_mib(p->gpu_used), er_mib(p->gpu_proc)};
        for (int c = 0; c < 4; c++) {
            if (c >= 2 && !gpu) continue;
            cJSON_AddItemToArray(cols[c], isfinite(v[c]) ? cJSON_CreateNumber(v[c]) : cJSON_CreateNull());
        }
    }
    /* no GPU: no columns of nulls */
    if (!gpu) {
        cJSON_DeleteItemFromObject(tl, "gpu_used_mib");
        cJSON_DeleteItemFromObject(tl, "gpu_proc_mib");
    }
    return tl;
}

cJSON *er_run_json(const rn_run *r) {
    const en_run *e = &r->energy;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "available", en_available(e->rd));
    if (!en_available(e->rd)) {
        cJSON_AddStringToObject(o, "why", e->rd ? en_why(e->rd) : "not read");
        return o;
    }
    cJSON *src = cJSON_AddArrayToObject(o, "sources"), *un = cJSON_AddObjectToObject(o, "unavailable");
    for (int i = 0; i < en_n_sources(); i++) {
        if (!en_source_ok(e->rd, i)) {
            cJSON_AddStringToObject(un, en_source_name(i), en_source_why(e->rd, i));
            continue;
        }
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "name", en_source_name(i));
        cJSON_AddStringToObject(s, "what", en_source_what(i));
        cJSON_AddStringToObject(s, "method", en_source_method(e->rd, i));
        cJSON_AddItemToArray(src, s);
    }
    cJSON *ph = cJSON_AddObjectToObject(o, "phases");
    double j, s, pj = NAN, dj = NAN, prompt, decoded;
    for (int k = 0; k < ER_NPH; k++) {
        if (er_phase(e, k, &j, &s)) continue;
        cJSON *x = cJSON_AddObjectToObject(ph, er_phases[k].name);
        cJSON_AddNumberToObject(x, "j", j);
        cJSON_AddNumberToObject(x, "s", s);
        er_num(x, "w", s > 0 ? j / s : NAN);
        if (!strcmp(er_phases[k].name, "prefill")) pj = j;
        if (!strcmp(er_phases[k].name, "decode")) dj = j;
    }
    er_tokens(r, &prompt, &decoded);
    cJSON_AddNumberToObject(o, "prefill_tokens", prompt);
    cJSON_AddNumberToObject(o, "decoded_tokens", decoded);
    er_num(o, "j_per_prefill_token", prompt > 0 ? pj / prompt : NAN);
    er_num(o, "j_per_decoded_token", decoded > 0 ? dj / decoded : NAN);
    cJSON_AddItemToObject(o, "timeline", er_timeline(r));
    return o;
}

void er_metrics(const rn_run *r, mt_bag *b) {
    const en_run *e = &r->energy;
    char name[64];
    double j, s, prompt, decoded;
    er_tokens(r, &prompt, &decoded);
    for (int k = 0; k < ER_NPH; k++) {
        if (er_phase(e, k, &j, &s)) continue;
        snprintf(name, sizeof(name), "energy_%s_j", er_phases[k].name);
        mt_add(b, name, "J", MT_INFO_LO, j);
        snprintf(name, sizeof(name), "power_%s_w", er_phases[k].name);
        if (s > 0) mt_add(b, name, "W", MT_INFO, j / s);
        if (!strcmp(er_phases[k].name, "prefill") && prompt > 0)
            mt_add(b, "energy_prefill_j_per_tok", "J/tok", MT_INFO_LO, j / prompt);
        if (!strcmp(er_phases[k].name, "decode") && decoded > 0)
            mt_add(b, "energy_decode_j_per_tok", "J/tok", MT_INFO_LO, j / decoded);
    }
    int64_t used = -1, proc = -1;
    for (int k = 0; k < e->n_pts; k++) {
        if (e->pts[k].gpu_used > used) used = e->pts[k].gpu_used;
        if (e->pts[k].gpu_proc > proc) proc = e->pts[k].gpu_proc;
    }
    /* the GPUs' used memory counts every process on them: info; the workers' own is theirs */
    if (used >= 0) mt_add(b, "gpu_used_peak_mib", "MiB", MT_INFO_LO, er_mib(used));
    if (proc >= 0) mt_add(b, "gpu_proc_peak_mib", "MiB", MT_MEMORY, er_mib(proc));
}

void er_note(const rm_model *m, char *buf, size_t len) {
    buf[0] = 0;
    for (int i = 0; i < m->n_runs; i++) {
        const rm_run *r = &m->runs[i];
        if (!r->counted) continue;
        if (!r->energy_why) return;      /* a counted repetition had energy, or the file predates it */
        /* a file's text is anyone's: escaped for the terminal */
        char why[1024];
        snprintf(buf, len, "energy: unavailable here (%s)", es_term(why, sizeof(why), r->energy_why));
        return;
    }
}
