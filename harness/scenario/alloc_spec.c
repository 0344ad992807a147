/* Allocator workloads, the spec's half: the scenario's fields and the worker spec. See alloc_spec.h. */
#include "alloc_spec.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/runtime/alloc_trace.h"
#include "engines/core/runtime/modreg.h"
#include "harness/scenario/jsonval.h"
#include "harness/scenario/confine.h"
#include "harness/scenario/spec_opts.h"

/* ======================================================================
 * The scenario: parsing and validation
 * ====================================================================== */

static const char *const aw_pattern_names[] = {"churn", "lifo", "fifo", "random", "prodcon", "trace", NULL};
static const char *const aw_touch_names[] = {"none", "first", "pages", NULL};

typedef struct aw_ctx {
    const char *file;
    sc_errors *errs;
    int confine;        /* the scenario's own paths (confine.h); the worker's spec was checked by its parent */
} aw_ctx;

static void aw_err(aw_ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void aw_err(aw_ctx *c, const char *path, const char *fmt, ...) {
    char msg[2048], line[2600];     /* a refused path lists the allowed folders */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(line, sizeof(line), "%s: %s%s%s", c->file, path, *path ? ": " : "", msg);
    char *d = strdup(line);
    char **nv = realloc(c->errs->v, (size_t)(c->errs->n + 1) * sizeof(char *));
    if (!d || !nv) {
        free(d);
        if (nv) c->errs->v = nv;
        return;
    }
    c->errs->v = nv;
    c->errs->v[c->errs->n++] = d;
}

static void aw_check_keys(aw_ctx *c, const cJSON *obj, const char *path, const char *const *allowed) {
    for (const cJSON *it = obj->child; it; it = it->next) {
        char p[256], list[512];
        snprintf(p, sizeof(p), "%s.%s", path, it->string);
        if (jv_enum(it->string, allowed) < 0) {
            jv_join(list, sizeof(list), allowed);
            aw_err(c, p, "unknown key \"%s\" (allowed: %s)", it->string, list);
            continue;
        }
        for (const cJSON *j = obj->child; j != it; j = j->next)
            if (!strcmp(j->string, it->string)) {
                aw_err(c, p, "duplicate key");
                break;
            }
    }
}

/* An integer in [lo, hi] at key; *out untouched when absent. Returns 1 when present and valid. */
static int aw_int(aw_ctx *c, const cJSON *obj, const char *key, const char *path, long long lo, long long hi,
                  long long *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!j) return 0;
    char p[256];
    snprintf(p, sizeof(p), "%s.%s", path, key);
    char msg[160];
    if (jv_int(j, lo, hi, out, msg, sizeof(msg))) {
        aw_err(c, p, "%s", msg);
        return -1;
    }
    return 1;
}

static int aw_pow2(uint64_t x) { return x && !(x & (x - 1)); }

#define AW_MAX_SIZE (1ll << 30)

/* One workload object; path like ".workloads[2]". Also used by the worker on its spec. */
static int aw_parse_workload(aw_ctx *c, const cJSON *j, const char *path, aw_workload *w) {
    int n0 = c->errs->n;
    memset(w, 0, sizeof(*w));
    w->align = 16;
    w->alpha = 1.0;
    w->seed = 1;
    w->touch = AW_TOUCH_PAGES;      /* RSS then counts every page handed out: fragmentation needs it */
    w->rounds = 10;
    w->live = 1000;
    char p[256];
    if (!cJSON_IsObject(j)) {
        aw_err(c, path, "expected an object {\"name\": ..., \"pattern\": ..., ...}, got %s", jv_type(j));
        return -1;
    }
    static const char *const keys[] = {"name", "pattern", "size", "sizes", "live", "ops", "align", "seed",
                                       "touch", "trace", "rounds", NULL};
    aw_check_keys(c, j, path, keys);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name");
    snprintf(p, sizeof(p), "%s.name", path);
    if (!cJSON_IsString(nm)) aw_err(c, p, nm ? "expected a string, got %s" : "required: a string%s", nm ? jv_type(nm) : "");
    else {
        int ok = nm->valuestring[0] != 0;
        for (const char *q = nm->valuestring; *q; q++)
            ok &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '-' || *q == '_';
        if (!ok) aw_err(c, p, "\"%s\": expected letters, digits, '-' or '_' (it names the variant)", nm->valuestring);
        w->name = strdup(nm->valuestring);
    }
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(j, "pattern");
    snprintf(p, sizeof(p), "%s.pattern", path);
    int pat = cJSON_IsString(pt) ? jv_enum(pt->valuestring, aw_pattern_names) : -1;
    if (pat < 0) {
        char list[128];
        jv_join(list, sizeof(list), aw_pattern_names);
        aw_err(c, p, "expected one of %s, got %s%s%s", list, cJSON_IsString(pt) ? "\"" : "",
               !pt ? "nothing" : cJSON_IsString(pt) ? pt->valuestring : jv_type(pt), cJSON_IsString(pt) ? "\"" : "");
        return -1;
    }
    w->pattern = (aw_pattern)pat;
    int rounds_kind = pat == AW_LIFO || pat == AW_FIFO || pat == AW_RANDOM;
    long long v;
    if (cJSON_GetObjectItemCaseSensitive(j, "live") && !rounds_kind) {
        snprintf(p, sizeof(p), "%s.live", path);
        aw_err(c, p, "applies to patterns lifo, fifo and random only, not %s", aw_pattern_names[pat]);
    } else if (aw_int(c, j, "live", path, 1, 1000000, &v) > 0) w->live = (int)v;
    if (aw_int(c, j, "align", path, 1, 4096, &v) > 0) {
        if (!aw_pow2((uint64_t)v) || v < 8) {
            snprintf(p, sizeof(p), "%s.align", path);
            aw_err(c, p, "%lld: expected a power of two 8 .. 4096", v);
        }
        w->align = (uint64_t)v;
    }
    if (aw_int(c, j, "seed", path, 0, INT64_MAX / 2, &v) > 0) w->seed = (uint64_t)v;
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(j, "touch");
    if (tj) {
        snprintf(p, sizeof(p), "%s.touch", path);
        int t = cJSON_IsString(tj) ? jv_enum(tj->valuestring, aw_touch_names) : -1;
        if (t < 0) aw_err(c, p, "expected \"none\", \"first\" (one byte per block) or \"pages\" (one byte per 4 KiB)");
        else w->touch = (aw_touch)t;
    }
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "trace");
    if (pat == AW_TRACE) {
        static const char *const bad[] = {"size", "sizes", "ops", NULL};
        for (int i = 0; bad[i]; i++)
            if (cJSON_GetObjectItemCaseSensitive(j, bad[i])) {
                snprintf(p, sizeof(p), "%s.%s", path, bad[i]);
                aw_err(c, p, "not for pattern trace: the trace gives sizes and calls (ops = rounds x its calls)");
            }
        snprintf(p, sizeof(p), "%s.trace", path);
        if (!cJSON_IsString(tr)) {
            aw_err(c, p, tr ? "expected a file name, got %s" : "required: a file made by bench generate --trace-alloc%s",
                   tr ? jv_type(tr) : "");
        } else {
            w->trace = strdup(tr->valuestring);
            at_trace t;
            char err[1800];
            if (c->confine && cf_check(c->file, tr->valuestring, err, sizeof(err))) aw_err(c, p, "%s", err);
            else if (at_load(tr->valuestring, &t, err, sizeof(err))) aw_err(c, p, "%s", err);
            else {
                w->ops = t.calls;
                at_trace_free(&t);
            }
        }
        if (aw_int(c, j, "rounds", path, 1, 10000000, &v) > 0) w->rounds = (int)v;
        w->ops *= (uint64_t)w->rounds;
        return c->errs->n > n0 ? -1 : 0;
    }
    if (tr || cJSON_GetObjectItemCaseSensitive(j, "rounds")) {
        snprintf(p, sizeof(p), "%s.%s", path, tr ? "trace" : "rounds");
        aw_err(c, p, "applies to pattern trace only");
    }
    snprintf(p, sizeof(p), "%s.ops", path);
    int r = aw_int(c, j, "ops", path, 2, 100000000000ll, &v);
    if (r == 0) aw_err(c, p, "required: an even count of allocator calls (allocs + frees) >= 2");
    else if (r > 0 && (v & 1)) aw_err(c, p, "%lld is odd: every alloc is freed, so ops (allocs + frees) is even", v);
    else if (r > 0) w->ops = (uint64_t)v;
    const cJSON *sz = cJSON_GetObjectItemCaseSensitive(j, "size"), *szs = cJSON_GetObjectItemCaseSensitive(j, "sizes");
    if (!sz == !szs) {
        aw_err(c, path, "expected exactly one of \"size\" (bytes) and \"sizes\" ({\"min\": B, \"max\": B, \"alpha\": a})");
    } else if (sz) {
        if (aw_int(c, j, "size", path, 1, AW_MAX_SIZE, &v) > 0) w->size = (uint64_t)v;
    } else {
        snprintf(p, sizeof(p), "%s.sizes", path);
        if (!cJSON_IsObject(szs)) {
            aw_err(c, p, "expected an object {\"min\": B, \"max\": B, \"alpha\": a}, got %s", jv_type(szs));
        } else {
            static const char *const sk[] = {"min", "max", "alpha", NULL};
            aw_check_keys(c, szs, p, sk);
            long long lo = 0, hi = 0;
            int a = aw_int(c, szs, "min", p, 1, AW_MAX_SIZE, &lo), b = aw_int(c, szs, "max", p, 1, AW_MAX_SIZE, &hi);
            char q[300];
            snprintf(q, sizeof(q), "%s.%s", p, a == 0 ? "min" : "max");
            if (a == 0 || b == 0) aw_err(c, q, "required: bytes 1 .. %lld", AW_MAX_SIZE);
            else if (a > 0 && b > 0 && hi < lo) aw_err(c, q, "%lld is less than min %lld", hi, lo);
            w->min = (uint64_t)lo;
            w->max = (uint64_t)hi;
            const cJSON *al = cJSON_GetObjectItemCaseSensitive(szs, "alpha");
            snprintf(q, sizeof(q), "%s.alpha", p);
            if (al && (!cJSON_IsNumber(al) || al->valuedouble < 0 || al->valuedouble > 4))
                aw_err(c, q, "expected a number 0 .. 4 (1: every power of two equally likely)");
            else if (al) w->alpha = al->valuedouble;
        }
    }
    return c->errs->n > n0 ? -1 : 0;
}

void aw_workload_free(aw_workload *w) {
    free(w->name);
    free(w->trace);
    cJSON_Delete(w->json);
    memset(w, 0, sizeof(*w));
}

void aw_scenario_free(aw_scenario *a) {
    if (!a) return;
    for (int i = 0; i < a->n; i++) aw_workload_free(&a->w[i]);
    free(a->w);
    free(a);
}

/* Module name and options, checked against what is built. */
static int aw_parse_alloc(aw_ctx *c, const scenario *s, const cJSON *j, const char *p, sc_choice *ch) {
    memset(ch, 0, sizeof(*ch));
    char opts[512] = "";
    /* the options as the file gives them, one pair each (a string in the JSON tree, a
     * number's or bool's text in gtext), checked against the module's table below */
    enum { AW_MAX_OPTS = 32 };
    bench_opt given[AW_MAX_OPTS];
    char gtext[AW_MAX_OPTS][32];
    int ng = 0;
    if (cJSON_IsString(j)) {
        ch->name = strdup(j->valuestring);
    } else if (cJSON_IsObject(j)) {
        static const char *const keys[] = {"name", "options", "label", NULL};
        aw_check_keys(c, j, p, keys);
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "name"), *l = cJSON_GetObjectItemCaseSensitive(j, "label");
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "options");
        char q[300];
        snprintf(q, sizeof(q), "%s.name", p);
        if (!cJSON_IsString(n)) {
            aw_err(c, q, "required: an allocator module name (a string)");
            return -1;
        }
        ch->name = strdup(n->valuestring);
        snprintf(q, sizeof(q), "%s.label", p);
        if (l && !cJSON_IsString(l)) aw_err(c, q, "expected a string, got %s", jv_type(l));
        else if (l) ch->label = strdup(l->valuestring);
        snprintf(q, sizeof(q), "%s.options", p);
        if (o && !cJSON_IsObject(o)) aw_err(c, q, "expected an object {\"option\": value}, got %s", jv_type(o));
        for (const cJSON *it = o && cJSON_IsObject(o) ? o->child : NULL; it; it = it->next) {
            char val[128];
            if (cJSON_IsBool(it)) snprintf(val, sizeof(val), "%d", cJSON_IsTrue(it));
            else if (cJSON_IsString(it)) snprintf(val, sizeof(val), "%s", it->valuestring);
            else if (cJSON_IsNumber(it) && it->valuedouble == floor(it->valuedouble))
                snprintf(val, sizeof(val), "%lld", (long long)it->valuedouble);
            else {
                aw_err(c, q, "option %s: expected a boolean, an integer or a string", it->string);
                continue;
            }
            if (ng == AW_MAX_OPTS) {
                aw_err(c, q, "more than %d options", AW_MAX_OPTS);
                break;
            }
            given[ng] = (bench_opt){.key = it->string, .value = cJSON_IsString(it) ? it->valuestring : strcpy(gtext[ng], val),
                                    .kind = BENCH_OPTV_TEXT};
            ng++;
            size_t u = strlen(opts);
            snprintf(opts + u, sizeof(opts) - u, "%s%s=%s", u ? "," : "", it->string, val);
        }
    } else {
        aw_err(c, p, "expected an allocator name or {\"name\": ..., \"options\": {...}, \"label\": ...}, got %s", jv_type(j));
        return -1;
    }
    ch->opts = strdup(opts);
    if (!ch->label) {
        char lab[600];
        snprintf(lab, sizeof(lab), "%s%s%s", ch->name, opts[0] ? ":" : "", opts);
        ch->label = strdup(lab);
    }
    const bench_module *m;
    char err[512];
    if (modreg_cache_load(s->mods, s->module_dir, NULL, "alloc", ch->name, &m, err, sizeof(err))) {
        char *have = modreg_names(s->module_dir, "alloc");
        aw_err(c, p, "unknown alloc \"%s\" (have: %s)", ch->name, have && *have ? have : "none built");
        free(have);
        return -1;
    }
    /* checked here once: the worker spec carries the typed values (aw_worker_spec) */
    bench_opts bo = {ng, given};
    if (modreg_type_opts(m, &bo, &ch->typed, &ch->typed_mem, err, sizeof(err))) aw_err(c, p, "%s", err);
    return 0;
}

static void aw_placeholder(sc_axis *ax, const char *name, int ival) {
    ax->v = calloc(1, sizeof(*ax->v));
    if (!ax->v) return;
    ax->n = 1;
    ax->v[0] = (sc_choice){.name = strdup(name), .opts = strdup(""), .label = strdup(name), .ival = ival};
}

int aw_parse_scenario(scenario *s, const cJSON *root, sc_errors *errs) {
    aw_ctx c = {.file = s->file, .errs = errs, .confine = 1};
    static const char *const keys[] = {"kind", "name", "description", "allocators", "workloads", "repetitions",
                                       "warmup", "timeout_s", "sample_ms", NULL};
    aw_check_keys(&c, root, "", keys);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "kind");
    if (!cJSON_IsString(k) || strcmp(k->valuestring, "allocators"))
        aw_err(&c, ".kind", "expected \"allocators\" (leave \"kind\" out for an engine scenario)");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (!cJSON_IsString(n)) aw_err(&c, ".name", "required: a string (it names the results directory)");
    else {
        int ok = n->valuestring[0] && n->valuestring[0] != '.';
        for (const char *q = n->valuestring; *q; q++)
            ok &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '-' ||
                  *q == '_' || *q == '.';
        if (!ok) aw_err(&c, ".name", "\"%s\": expected letters, digits, '-', '_' or '.' only", n->valuestring);
        s->name = strdup(n->valuestring);
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "description");
    if (d && !cJSON_IsString(d)) aw_err(&c, ".description", "expected a string, got %s", jv_type(d));
    else if (d) s->description = strdup(d->valuestring);
    long long v;
    s->repetitions = 3;
    s->warmup = 1;
    s->processes = 1;
    s->sample_ms = 5;
    s->timeout_s = 300;
    s->metrics = SC_M_TIMELINE;
    if (aw_int(&c, root, "repetitions", "", 1, 100000, &v) > 0) s->repetitions = (int)v;
    if (aw_int(&c, root, "warmup", "", 0, 100000, &v) > 0) s->warmup = (int)v;
    static const char *const nums[] = {"timeout_s", "sample_ms"};
    for (int i = 0; i < 2; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, nums[i]);
        if (!j) continue;
        char p[32];
        snprintf(p, sizeof(p), ".%s", nums[i]);
        double lo = i == 0 ? 0 : -1e-300, hi = i == 0 ? 86400 : 60000;
        if (!cJSON_IsNumber(j) || j->valuedouble <= lo || j->valuedouble > hi)
            aw_err(&c, p, "expected a number %s .. %g", i == 0 ? "more than 0" : "0", hi);
        else if (i == 0) s->timeout_s = j->valuedouble;
        else s->sample_ms = j->valuedouble;
    }

    aw_scenario *a = calloc(1, sizeof(*a));
    s->aw = a;
    sc_axis *al = &s->axes[SC_AX_ALLOC], *wl = &s->axes[SC_AX_WORKLOAD];
    const cJSON *ja = cJSON_GetObjectItemCaseSensitive(root, "allocators");
    if (!cJSON_IsArray(ja) || !cJSON_GetArraySize(ja)) {
        aw_err(&c, ".allocators", "required: a non-empty list of allocator modules, e.g. [\"libc\", \"arena\"]");
    } else if ((al->v = calloc((size_t)cJSON_GetArraySize(ja), sizeof(*al->v)))) {
        int i = 0;
        for (const cJSON *it = ja->child; it; it = it->next, i++) {
            char p[64];
            snprintf(p, sizeof(p), ".allocators[%d]", i);
            sc_choice *ch = &al->v[al->n];
            int bad = aw_parse_alloc(&c, s, it, p, ch);
            al->n++;
            /* an entry that failed to parse has no label: nothing to be a duplicate of */
            for (int q = 0; !bad && q < al->n - 1; q++)
                if (al->v[q].label && !strcmp(al->v[q].label, ch->label)) aw_err(&c, p, "duplicate allocator \"%s\" (give a distinct \"label\")", ch->label);
        }
    }
    const cJSON *jw = cJSON_GetObjectItemCaseSensitive(root, "workloads");
    if (!cJSON_IsArray(jw) || !cJSON_GetArraySize(jw)) {
        aw_err(&c, ".workloads", "required: a non-empty list of workloads, e.g. [{\"name\": \"churn64\", \"pattern\": "
               "\"churn\", \"size\": 64, \"ops\": 1000000}]");
    } else if (a && (a->w = calloc((size_t)cJSON_GetArraySize(jw), sizeof(*a->w))) &&
               (wl->v = calloc((size_t)cJSON_GetArraySize(jw), sizeof(*wl->v)))) {
        int i = 0;
        for (const cJSON *it = jw->child; it; it = it->next, i++) {
            char p[64];
            snprintf(p, sizeof(p), ".workloads[%d]", i);
            aw_workload *w = &a->w[a->n++];
            aw_parse_workload(&c, it, p, w);
            w->json = cJSON_Duplicate(it, 1);
            const char *nm = w->name ? w->name : "?";
            for (int q = 0; w->name && q < a->n - 1; q++)
                if (a->w[q].name && !strcmp(a->w[q].name, nm)) aw_err(&c, p, "duplicate workload name \"%s\"", nm);
            wl->v[wl->n++] = (sc_choice){.name = strdup(nm), .opts = strdup(""), .label = strdup(nm), .ival = i};
        }
    }
    if (errs->n) return -1;
    al->crossed = wl->crossed = 1;
    /* the engine axes do not apply: one placeholder each, so every variant still names them */
    aw_placeholder(&s->axes[SC_AX_LOADER], "-", 0);
    aw_placeholder(&s->axes[SC_AX_KV], "-", 0);
    aw_placeholder(&s->axes[SC_AX_CACHE], "cold", SC_CACHE_COLD);   /* no model files: nothing to evict */
    aw_placeholder(&s->axes[SC_AX_THREADS], "1", 1);
    /* workload slowest, allocator fastest: a repetition runs every allocator on one
     * workload back to back, so drift of the machine touches them alike */
    s->n_variants = wl->n * al->n;
    s->variants = calloc((size_t)s->n_variants, sizeof(*s->variants));
    if (!s->variants) {
        aw_err(&c, "", "out of memory");
        return -1;
    }
    for (int wi = 0; wi < wl->n; wi++)
        for (int ai = 0; ai < al->n; ai++) {
            sc_variant *vr = &s->variants[wi * al->n + ai];
            vr->pick[SC_AX_WORKLOAD] = wi;
            vr->pick[SC_AX_ALLOC] = ai;
            char key[512];
            snprintf(key, sizeof(key), "alloc=%s,workload=%s", al->v[ai].label, wl->v[wi].label);
            vr->key = strdup(key);
            vr->selected = 1;
        }
    return 0;
}

char *aw_worker_spec(const scenario *s, const sc_variant *v) {
    const sc_choice *al = sc_pick(s, v, SC_AX_ALLOC);
    const aw_workload *w = &s->aw->w[v->pick[SC_AX_WORKLOAD]];
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "kind", "alloc_workload");
    cJSON_AddStringToObject(j, "alloc", al->name);
    cJSON_AddItemToObject(j, "alloc_opts", so_opts_json(&al->typed));
    cJSON_AddStringToObject(j, "module_dir", s->module_dir);
    cJSON_AddItemToObject(j, "workload", cJSON_Duplicate(w->json, 1));
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    return text;
}

int aw_workload_parse(const char *file, const cJSON *j, const char *path, aw_workload *w, sc_errors *errs) {
    aw_ctx c = {.file = file, .errs = errs};
    return aw_parse_workload(&c, j, path, w);
}
