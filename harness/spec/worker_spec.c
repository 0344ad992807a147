/* The worker spec: what the parent writes for one variant and the worker reads back. See worker_spec.h. */
#include "worker_spec.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/module.h"


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

/* ---- the engine's worker spec (inference and serving) ---- */

char *sc_engine_worker_spec(const scenario *s, const sc_variant *v) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "model", s->model_resolved ? s->model_resolved : s->model_path ? s->model_path : "");
    if (s->tokenizer_path) cJSON_AddStringToObject(j, "tokenizer", s->tokenizer_resolved ? s->tokenizer_resolved : s->tokenizer_path);
    /* the files bench run read: the worker refuses others (confine.h); "dev:ino", as
     * strings, since a JSON number does not hold 64 bits */
    char id[64];
    if (s->model_resolved) {
        snprintf(id, sizeof(id), "%llu:%llu", s->model_dev, s->model_ino);
        cJSON_AddStringToObject(j, "model_id", id);
    }
    if (s->tokenizer_path && s->tokenizer_resolved) {
        snprintf(id, sizeof(id), "%llu:%llu", s->tokenizer_dev, s->tokenizer_ino);
        cJSON_AddStringToObject(j, "tokenizer_id", id);
    }
    static const int fam[] = {SC_AX_LOADER, SC_AX_KV, SC_AX_ALLOC};
    for (int i = 0; i < 3; i++) {
        const sc_choice *c = sc_pick(s, v, fam[i]);
        char key[32];
        cJSON_AddStringToObject(j, sc_axis_name(fam[i]), c->name);
        snprintf(key, sizeof(key), "%s_opts", sc_axis_name(fam[i]));
        cJSON_AddStringToObject(j, key, c->opts ? c->opts : "");
    }
    cJSON_AddNumberToObject(j, "threads", sc_pick(s, v, SC_AX_THREADS)->ival);
    cJSON_AddStringToObject(j, "device", sc_device(s, v));
    cJSON_AddStringToObject(j, "device_opts", sc_device_opts(s, v));
    cJSON_AddStringToObject(j, "kernels", sc_pick(s, v, SC_AX_KERNELS)->name);
    cJSON_AddStringToObject(j, "kv_cache", sc_pick(s, v, SC_AX_KV_CACHE)->name);
    if (s->metrics & SC_M_BANDWIDTH) cJSON_AddBoolToObject(j, "bandwidth", 1);
    cJSON_AddNumberToObject(j, "ctx", s->ctx);
    /* an http target: its settings as the scenario gave them (harness/spec/target.h) */
    const sc_choice *tgt = s->axes[SC_AX_TARGET].n ? sc_pick(s, v, SC_AX_TARGET) : NULL;
    if (tgt && tgt->opts) cJSON_AddItemToObject(j, "http", cJSON_Parse(tgt->opts));
    if (s->requests) {
        sv_spec_add(j, s);
    } else {
        if (s->prompt) cJSON_AddStringToObject(j, "prompt", s->prompt);
        else cJSON_AddNumberToObject(j, "prompt_tokens", s->prompt_tokens);
        cJSON_AddNumberToObject(j, "generate", s->generate);
    }
    cJSON_AddNumberToObject(j, "seed", (double)s->seed);
    cJSON_AddNumberToObject(j, "temperature", s->temperature);
    cJSON_AddNumberToObject(j, "topp", s->topp);
    cJSON_AddStringToObject(j, "module_dir", s->module_dir);
    if (s->fault) cJSON_AddStringToObject(j, "fault", s->fault);
    if (s->delay_ms) cJSON_AddNumberToObject(j, "delay_ms", s->delay_ms);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    return text;
}
