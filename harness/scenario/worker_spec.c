/* The worker spec: what the parent writes for one variant and the worker reads back. See worker_spec.h. */
#include "worker_spec.h"

#include <cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/module.h"
#include "engines/core/runtime/engine.h"
#include "engines/core/runtime/sampler.h"
#include "harness/scenario/spec_opts.h"
#include "harness/scenario/target.h"
#include "harness/scenario/traffic.h"


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
    cJSON_AddBoolToObject(o, "token_times", (s->metrics & SC_M_TOKENS) != 0);
    tf_spec_add(o, r);
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
    r->token_times = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "token_times"));
    if (tf_spec_read(o, r, err, errlen)) {
        sc_requests_free(r);
        return NULL;
    }
    return r;
}

/* ---- the engine's worker spec (inference and serving) ---- */

/* The fields, in the order they are written; the axes' are their rows' (scenario.h
 * sc_axis_def.spec), written where WS_AXES is. */
static const ws_field ws_fields[] = {
#define F(name, type, member, def, flags) {name, type, offsetof(ws_engine, member), def, flags}
    F("model", WS_STR, model, 0, 0),
    F("tokenizer", WS_STR, tokenizer, 0, WS_IF_SET),
    F("model_id", WS_STR, model_id, 0, WS_IF_SET),
    F("tokenizer_id", WS_STR, tokenizer_id, 0, WS_IF_SET),
    {"(axes)", WS_AXES, 0, 0, 0},
    F("bandwidth", WS_BOOL, bandwidth, 0, WS_IF_SET),
    F("ctx", WS_INT, ctx, 0, 0),
    F("requests", WS_REQUESTS, requests, 0, 0),
    F("prompt", WS_STR, prompt, 0, WS_IF_SET),
    F("prompt_tokens", WS_INT, prompt_tokens, 0, WS_IF_SET),
    F("generate", WS_INT, generate, 0, WS_IF_SET),
    F("seed", WS_NUM, seed, SAMPLER_DEFAULT_SEED, 0),
    F("temperature", WS_NUM, temperature, 0, 0),
    F("topp", WS_NUM, topp, SAMPLER_DEFAULT_TOPP, 0),
    F("module_dir", WS_STR, module_dir, 0, 0),
    F("fault", WS_STR, fault, 0, WS_IF_SET | WS_HOOK),
    F("delay_ms", WS_INT, delay_ms, 0, WS_IF_SET | WS_HOOK),
#undef F
};
#define WS_NFIELDS (sizeof(ws_fields) / sizeof(ws_fields[0]))

/* The choice of an axis into its spec field f of w, by f's type (sc_axis_def.spec). */
static void ws_fill_axis(ws_engine *w, const ws_field *f, const sc_choice *c) {
    void *p = (char *)w + f->off;
    switch (f->type) {
    case WS_STR: *(const char **)p = c->name; break;
    case WS_INT: case WS_BOOL: *(int *)p = c->ival; break;
    case WS_TARGET: *(struct tg_http **)p = c->http; break;
    case WS_OPTS: ((ws_opts *)p)->v = c->typed; break;
    case WS_CACHE_TYPE:
        *(sc_cache_type *)p = c->cache_type;
        w->kv_cache = c->name;
        break;
    case WS_NUM: case WS_REQUESTS: case WS_AXES: break;
    }
}

void ws_engine_fill(ws_engine *w, const scenario *s, const sc_variant *v) {
    *w = (ws_engine){0};
    w->model = s->model_resolved ? s->model_resolved : s->model_path ? s->model_path : "";
    if (s->tokenizer_path) w->tokenizer = s->tokenizer_resolved ? s->tokenizer_resolved : s->tokenizer_path;
    for (int a = 0; a < sc_axis_count(); a++) {
        const sc_axis_def *d = sc_axis_get(a);
        for (int k = 0; k < 2 && d->spec[k].name; k++) {
            /* an axis the scenario has no choice on reads as its field's default */
            if (!s->axes[a].n) {
                if (d->spec[k].type == WS_INT || d->spec[k].type == WS_BOOL) *(int *)((char *)w + d->spec[k].off) = (int)d->spec[k].def;
                continue;
            }
            ws_fill_axis(w, &d->spec[k], sc_pick(s, v, a));
        }
    }
    if (!s->axes[SC_AX_DEVICE].n) w->device = "cpu";
    if (w->target && !strcmp(w->target, "engine")) w->target = NULL; /* the default, not written */
    w->bandwidth = (s->metrics & SC_M_BANDWIDTH) != 0;
    w->ctx = s->ctx;
    if (s->requests) {
        w->requests_of = s;
    } else {
        w->prompt = s->prompt;
        if (!s->prompt) w->prompt_tokens = s->prompt_tokens;
        w->generate = s->generate;
    }
    w->seed = (double)s->seed;
    w->temperature = s->temperature;
    w->topp = s->topp;
    w->module_dir = s->module_dir;
    w->fault = s->fault;
    w->delay_ms = s->delay_ms;
}

/* Field f of w into j; -1: out of memory. */
static int ws_write(cJSON *j, const ws_engine *w, const ws_field *f) {
    const void *p = (const char *)w + f->off;
    switch (f->type) {
    case WS_STR: {
        const char *x = *(const char *const *)p;
        if (x || !(f->flags & WS_IF_SET)) cJSON_AddStringToObject(j, f->name, x ? x : "");
        break;
    }
    case WS_INT:
        if (*(const int *)p != (int)f->def || !(f->flags & WS_IF_SET)) cJSON_AddNumberToObject(j, f->name, *(const int *)p);
        break;
    case WS_NUM:
        if (*(const double *)p != 0 || !(f->flags & WS_IF_SET)) cJSON_AddNumberToObject(j, f->name, *(const double *)p);
        break;
    case WS_BOOL:
        if (*(const int *)p != (int)f->def || !(f->flags & WS_IF_SET)) cJSON_AddBoolToObject(j, f->name, *(const int *)p);
        break;
    case WS_REQUESTS:
        if (w->requests_of) sv_spec_add(j, w->requests_of);
        break;
    case WS_TARGET: {
        const tg_http *h = *(tg_http *const *)p;
        cJSON *o = h ? tg_to_json(h) : NULL;
        if (h && !o) return -1;
        if (o) cJSON_AddItemToObject(j, f->name, o);
        break;
    }
    case WS_OPTS: {
        cJSON *o = so_opts_json(&((const ws_opts *)p)->v);
        if (!o) return -1;
        cJSON_AddItemToObject(j, f->name, o);
        break;
    }
    case WS_CACHE_TYPE: {
        /* the one writer of the typed pair: its text, which ws_read parses back */
        const sc_cache_type *ct = p;
        char name[32];
        engine_cache_type_name(ct->k, ct->v, name, sizeof(name));
        cJSON_AddStringToObject(j, f->name, name);
        break;
    }
    case WS_AXES:
        for (int a = 0; a < sc_axis_count(); a++)
            for (int k = 0; k < 2 && sc_axis_get(a)->spec[k].name; k++)
                if (ws_write(j, w, &sc_axis_get(a)->spec[k])) return -1;
        break;
    }
    return 0;
}

cJSON *ws_engine_json(const ws_engine *w) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    for (size_t i = 0; i < WS_NFIELDS; i++)
        if (ws_write(j, w, &ws_fields[i])) {
            cJSON_Delete(j);
            return NULL;
        }
    return j;
}

/* Field f of the spec j into w; 0, or -1 with err. */
static int ws_read(const cJSON *j, ws_engine *w, const ws_field *f, int hooked, char *err, size_t errlen) {
    void *p = (char *)w + f->off;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, f->name);
    if ((f->flags & WS_HOOK) && !hooked) return 0;
    switch (f->type) {
    case WS_STR: *(const char **)p = cJSON_IsString(x) ? x->valuestring : NULL; break;
    case WS_INT: *(int *)p = (int)(cJSON_IsNumber(x) ? x->valuedouble : f->def); break;
    case WS_NUM: *(double *)p = cJSON_IsNumber(x) ? x->valuedouble : f->def; break;
    case WS_BOOL: *(int *)p = cJSON_IsBool(x) ? cJSON_IsTrue(x) : (int)f->def; break;
    case WS_REQUESTS:
        w->requests = sv_spec_read(j, err, errlen);
        if (!w->requests && err && err[0]) return -1;
        break;
    case WS_TARGET: {
        if (!x) break;
        char e[512];
        tg_http *h = calloc(1, sizeof(*h));
        if (!h) return bench_errf(err, errlen, "out of memory reading %s", f->name);
        if (tg_from_json(x, h, e, sizeof(e))) {
            free(h);
            return bench_errf(err, errlen, "worker spec: %s: %s", f->name, e);
        }
        *(tg_http **)p = h;
        break;
    }
    case WS_OPTS: {
        ws_opts *o = p;
        if (so_opts_read(j, f->name, &o->v, &o->mem, err, errlen)) return -1;
        break;
    }
    case WS_CACHE_TYPE: {
        /* the one reader of the typed pair; absent: an f32 cache */
        sc_cache_type *ct = p;
        char e[256];
        *ct = (sc_cache_type){BENCH_F32, BENCH_F32};
        w->kv_cache = cJSON_IsString(x) ? x->valuestring : NULL;
        if (w->kv_cache && engine_parse_cache_type(w->kv_cache, &ct->k, &ct->v, e, sizeof(e)))
            return bench_errf(err, errlen, "worker spec: %s: %s", f->name, e);
        break;
    }
    case WS_AXES:
        for (int a = 0; a < sc_axis_count(); a++)
            for (int k = 0; k < 2 && sc_axis_get(a)->spec[k].name; k++)
                if (ws_read(j, w, &sc_axis_get(a)->spec[k], hooked, err, errlen)) return -1;
        break;
    }
    return 0;
}

int ws_engine_read(const cJSON *j, ws_engine *w, char *err, size_t errlen) {
    *w = (ws_engine){0};
    if (err && errlen) err[0] = 0;
    /* the test hooks act only where the test suite asked for them */
    const char *hooks = getenv("BENCH_TEST_HOOKS");
    int hooked = hooks && !strcmp(hooks, "1");
    for (size_t i = 0; i < WS_NFIELDS; i++)
        if (ws_read(j, w, &ws_fields[i], hooked, err, errlen)) return -1;
    return 0;
}

void ws_engine_free(ws_engine *w) {
    sc_requests_free(w->requests);
    w->requests = NULL;
    tg_http_free(w->target_http);
    free(w->target_http);
    w->target_http = NULL;
    for (int i = 0; i < 4; i++) {
        ws_opts *o = i < 3 ? &w->opts[i] : &w->device_opts;
        free(o->mem);
        *o = (ws_opts){{0, NULL}, NULL};
    }
}

char *sc_engine_worker_spec(const scenario *s, const sc_variant *v) {
    ws_engine w;
    ws_engine_fill(&w, s, v);
    /* the files bench run read: the worker refuses others (confine.h); "dev:ino", as
     * strings, since a JSON number does not hold 64 bits */
    char mid[64], tid[64];
    if (s->model_resolved) {
        snprintf(mid, sizeof(mid), "%llu:%llu", s->model_dev, s->model_ino);
        w.model_id = mid;
    }
    if (s->tokenizer_path && s->tokenizer_resolved) {
        snprintf(tid, sizeof(tid), "%llu:%llu", s->tokenizer_dev, s->tokenizer_ino);
        w.tokenizer_id = tid;
    }
    cJSON *j = ws_engine_json(&w);
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    return text;
}
