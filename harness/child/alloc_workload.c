#include "alloc_workload.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engines/core/runtime/alloc_trace.h"
#include "engines/abi/alloc.h"
#include "engines/core/runtime/modreg.h"
#include "harness/spec/events.h"
#include "harness/report/stats.h"

/* ======================================================================
 * The scenario: parsing and validation
 * ====================================================================== */

static const char *const aw_pattern_names[] = {"churn", "lifo", "fifo", "random", "prodcon", "trace", NULL};
static const char *const aw_touch_names[] = {"none", "first", "pages", NULL};

typedef struct aw_ctx {
    const char *file;
    sc_errors *errs;
} aw_ctx;

static void aw_err(aw_ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void aw_err(aw_ctx *c, const char *path, const char *fmt, ...) {
    char msg[768], line[1200];
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

static const char *aw_type(const cJSON *j) {
    return cJSON_IsString(j) ? "a string" : cJSON_IsNumber(j) ? "a number" : cJSON_IsBool(j) ? "a boolean"
         : cJSON_IsArray(j) ? "an array" : cJSON_IsObject(j) ? "an object" : "null";
}

static int aw_enum(const char *s, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

static void aw_join(char *buf, size_t len, const char *const *names) {
    buf[0] = 0;
    for (int i = 0; names[i]; i++) {
        if (i) strncat(buf, ", ", len - strlen(buf) - 1);
        strncat(buf, names[i], len - strlen(buf) - 1);
    }
}

static void aw_check_keys(aw_ctx *c, const cJSON *obj, const char *path, const char *const *allowed) {
    for (const cJSON *it = obj->child; it; it = it->next) {
        char p[256], list[512];
        snprintf(p, sizeof(p), "%s.%s", path, it->string);
        if (aw_enum(it->string, allowed) < 0) {
            aw_join(list, sizeof(list), allowed);
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
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble)) {
        aw_err(c, p, "expected an integer, got %s", cJSON_IsNumber(j) ? "a fraction" : aw_type(j));
        return -1;
    }
    if (j->valuedouble < (double)lo || j->valuedouble > (double)hi) {
        aw_err(c, p, "%.17g is out of range: expected %lld .. %lld", j->valuedouble, lo, hi);
        return -1;
    }
    *out = (long long)j->valuedouble;
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
        aw_err(c, path, "expected an object {\"name\": ..., \"pattern\": ..., ...}, got %s", aw_type(j));
        return -1;
    }
    static const char *const keys[] = {"name", "pattern", "size", "sizes", "live", "ops", "align", "seed",
                                       "touch", "trace", "rounds", NULL};
    aw_check_keys(c, j, path, keys);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name");
    snprintf(p, sizeof(p), "%s.name", path);
    if (!cJSON_IsString(nm)) aw_err(c, p, nm ? "expected a string, got %s" : "required: a string%s", nm ? aw_type(nm) : "");
    else {
        int ok = nm->valuestring[0] != 0;
        for (const char *q = nm->valuestring; *q; q++)
            ok &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '-' || *q == '_';
        if (!ok) aw_err(c, p, "\"%s\": expected letters, digits, '-' or '_' (it names the variant)", nm->valuestring);
        w->name = strdup(nm->valuestring);
    }
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(j, "pattern");
    snprintf(p, sizeof(p), "%s.pattern", path);
    int pat = cJSON_IsString(pt) ? aw_enum(pt->valuestring, aw_pattern_names) : -1;
    if (pat < 0) {
        char list[128];
        aw_join(list, sizeof(list), aw_pattern_names);
        aw_err(c, p, "expected one of %s, got %s%s%s", list, cJSON_IsString(pt) ? "\"" : "",
               !pt ? "nothing" : cJSON_IsString(pt) ? pt->valuestring : aw_type(pt), cJSON_IsString(pt) ? "\"" : "");
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
        int t = cJSON_IsString(tj) ? aw_enum(tj->valuestring, aw_touch_names) : -1;
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
                   tr ? aw_type(tr) : "");
        } else {
            w->trace = strdup(tr->valuestring);
            at_trace t;
            char err[512];
            if (at_load(tr->valuestring, &t, err, sizeof(err))) aw_err(c, p, "%s", err);
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
            aw_err(c, p, "expected an object {\"min\": B, \"max\": B, \"alpha\": a}, got %s", aw_type(szs));
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

static void aw_workload_free(aw_workload *w) {
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
        if (l && !cJSON_IsString(l)) aw_err(c, q, "expected a string, got %s", aw_type(l));
        else if (l) ch->label = strdup(l->valuestring);
        snprintf(q, sizeof(q), "%s.options", p);
        if (o && !cJSON_IsObject(o)) aw_err(c, q, "expected an object {\"option\": value}, got %s", aw_type(o));
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
            size_t u = strlen(opts);
            snprintf(opts + u, sizeof(opts) - u, "%s%s=%s", u ? "," : "", it->string, val);
        }
    } else {
        aw_err(c, p, "expected an allocator name or {\"name\": ..., \"options\": {...}, \"label\": ...}, got %s", aw_type(j));
        return -1;
    }
    ch->opts = strdup(opts);
    if (!ch->label) {
        char lab[600];
        snprintf(lab, sizeof(lab), "%s%s%s", ch->name, opts[0] ? ":" : "", opts);
        ch->label = strdup(lab);
    }
    modreg_entry e;
    char err[512];
    if (modreg_load(s->module_dir, "alloc", ch->name, &e, err, sizeof(err))) {
        char *have = modreg_names(s->module_dir, "alloc");
        aw_err(c, p, "unknown alloc \"%s\" (have: %s)", ch->name, have && *have ? have : "none built");
        free(have);
        return -1;
    }
    bench_opts bo;
    void *storage = NULL;
    if (modreg_parse_opts(ch->opts, &bo, &storage, err, sizeof(err)) || modreg_check_opts(e.mod, &bo, err, sizeof(err)))
        aw_err(c, p, "%s", err);
    free(storage);
    modreg_entry_close(&e);
    return 0;
}

static void aw_placeholder(sc_axis *ax, const char *name, int ival) {
    ax->v = calloc(1, sizeof(*ax->v));
    if (!ax->v) return;
    ax->n = 1;
    ax->v[0] = (sc_choice){strdup(name), strdup(""), strdup(name), ival};
}

int aw_parse_scenario(scenario *s, const cJSON *root, sc_errors *errs) {
    aw_ctx c = {.file = s->file, .errs = errs};
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
    if (d && !cJSON_IsString(d)) aw_err(&c, ".description", "expected a string, got %s", aw_type(d));
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
            for (int q = 0; !bad && q < al->n - 1; q++)
                if (!strcmp(al->v[q].label, ch->label)) aw_err(&c, p, "duplicate allocator \"%s\" (give a distinct \"label\")", ch->label);
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
            wl->v[wl->n++] = (sc_choice){strdup(nm), strdup(""), strdup(nm), i};
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
    cJSON_AddStringToObject(j, "alloc_opts", al->opts ? al->opts : "");
    cJSON_AddStringToObject(j, "module_dir", s->module_dir);
    cJSON_AddItemToObject(j, "workload", cJSON_Duplicate(w->json, 1));
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    return text;
}

int aw_is_spec(const char *spec_text) {
    cJSON *j = cJSON_Parse(spec_text);
    const cJSON *k = j ? cJSON_GetObjectItemCaseSensitive(j, "kind") : NULL;
    int yes = cJSON_IsString(k) && !strcmp(k->valuestring, "alloc_workload");
    cJSON_Delete(j);
    return yes;
}

/* ======================================================================
 * The worker: one workload on one allocator
 * ====================================================================== */

static int64_t aw_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t aw_rng(uint64_t *s) {
    /* xorshift64*: enough for sizes and permutations, and the same on every machine */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

enum { AW_NSIZES = 1 << 16 };

/* The calls of one pass, copied out of the iface into locals by every loop below: an
 * indirect call may write any memory, so r->ai->alloc and r->ctx read through r would be
 * loaded again after every call; from locals they stay in registers. */
typedef struct aw_fns {
    void *(*alloc)(void *ctx, size_t size, size_t align);
    void (*free)(void *ctx, void *p, size_t size);
    void (*reset)(void *ctx);   /* NULL: the allocator has none */
    void *ctx;
} aw_fns;

typedef struct aw_run {
    aw_fns f;                   /* what the loops call: the allocator's module, or the null allocator (floor) */
    const bench_alloc_iface *ai;
    void *ctx;
    int locked;                 /* prodcon on an allocator not safe under threads: calls under mu */
    pthread_mutex_t mu;
    const aw_workload *w;
    void **slot;                /* (n_slot) live blocks */
    uint64_t *slot_size;        /* (n_slot) */
    size_t n_slot;
    uint64_t *sizes;            /* (AW_NSIZES) drawn sizes, cycled */
    size_t size_i;
    uint32_t *perm;             /* (live) random free order */
    const at_trace *trace;
    uint64_t peak_live;         /* B */
    _Atomic uint64_t a_live_bytes, a_live_blocks;   /* prodcon */
    /* timing */
    int timed;
    int64_t t_last;
    double *batch_ns;           /* (cap_batch) ns per op of each timed batch, clock cost removed */
    size_t n_batch, cap_batch;
    int64_t overhead_ns;        /* one clock read, median */
    uint64_t clock_reads;
} aw_run;

/* The end of a batch of AW_BATCH ops: one clock read. Out of line, so the loops that
 * count down to it stay small; it runs once per 64 ops. */
__attribute__((noinline)) static void aw_batch_end(aw_run *r) {
    int64_t t = aw_now();
    if (r->timed && r->n_batch < r->cap_batch) {
        double d = (double)(t - r->t_last - r->overhead_ns);
        r->batch_ns[r->n_batch++] = (d > 0 ? d : 0) / AW_BATCH;
    }
    r->clock_reads++;
    r->t_last = t;
}

_Static_assert(AW_BATCH % 2 == 0, "churn and prodcon count their ops two at a time");

/* One op done: `left` counts down, in a register, the ops to the end of the batch. */
#define AW_TICK(r, left) do { if (--(left) == 0) { aw_batch_end(r); (left) = AW_BATCH; } } while (0)

/* What the workload writes into a new block. t is a constant in each caller below
 * (they are instantiated once per touch mode), so the test costs nothing per op. */
static inline __attribute__((always_inline)) void aw_touch_t(void *p, uint64_t size, aw_touch t) {
    if (t == AW_TOUCH_FIRST) *(volatile char *)p = 1;
    else if (t == AW_TOUCH_PAGES)
        for (uint64_t o = 0; o < size; o += 4096) ((volatile char *)p)[o] = 1;
}

/* churn: alloc, touch, free, ops/2 times. An allocator with reset() (whose free is a
 * no-op) is reset once per batch (32 pairs), when nothing is live: an engine resets
 * its arena once per step after many allocations, and a reset after every pair would
 * time a reset per allocation. -1: out of memory. */
static inline __attribute__((always_inline)) int aw_churn_t(aw_run *r, uint64_t ops, aw_touch t) {
    const aw_fns f = r->f;
    const uint64_t fixed = r->w->size, align = r->w->align, *sizes = r->sizes;
    size_t si = r->size_i;
    uint64_t peak = r->peak_live;
    int left = AW_BATCH, rc = 0;
    for (uint64_t i = 0; i < ops / 2; i++) {
        uint64_t sz = fixed ? fixed : sizes[si++ & (AW_NSIZES - 1)];
        void *p = f.alloc(f.ctx, (size_t)sz, (size_t)align);
        if (__builtin_expect(!p, 0)) {
            rc = -1;
            break;
        }
        aw_touch_t(p, sz, t);
        peak = sz > peak ? sz : peak;
        f.free(f.ctx, p, (size_t)sz);
        left -= 2;
        if (left == 0) {
            if (f.reset) f.reset(f.ctx);
            aw_batch_end(r);
            left = AW_BATCH;
        }
    }
    if (f.reset && left != AW_BATCH) f.reset(f.ctx);
    r->size_i = si;
    r->peak_live = peak;
    return rc;
}

/* lifo, fifo, random: rounds of `live` allocations, then their frees in the pattern's
 * order; an allocator with reset() is reset at the end of each round. -1: out of memory. */
static inline __attribute__((always_inline)) int aw_rounds_t(aw_run *r, uint64_t ops, aw_touch t) {
    const aw_fns f = r->f;
    const aw_workload *w = r->w;
    const uint64_t fixed = w->size, align = w->align, *sizes = r->sizes;
    void **slot = r->slot;
    uint64_t *slot_size = r->slot_size;
    const uint32_t *perm = r->perm;
    const aw_pattern pat = w->pattern;
    const uint64_t live = (uint64_t)w->live;
    size_t si = r->size_i;
    uint64_t peak = r->peak_live, done = 0;
    int left = AW_BATCH;
    while (done < ops) {
        uint64_t k = (ops - done) / 2, bytes = 0;
        if (k > live) k = live;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t sz = fixed ? fixed : sizes[si++ & (AW_NSIZES - 1)];
            void *p = f.alloc(f.ctx, (size_t)sz, (size_t)align);
            if (__builtin_expect(!p, 0)) {
                r->size_i = si;
                return -1;
            }
            aw_touch_t(p, sz, t);
            slot[i] = p;
            slot_size[i] = sz;
            bytes += sz;   /* every alloc of a round comes before its first free: the round's peak */
            AW_TICK(r, left);
        }
        peak = bytes > peak ? bytes : peak;
        if (pat == AW_LIFO) {
            for (uint64_t i = k; i-- > 0;) {
                f.free(f.ctx, slot[i], (size_t)slot_size[i]);
                AW_TICK(r, left);
            }
        } else if (pat == AW_FIFO) {
            for (uint64_t i = 0; i < k; i++) {
                f.free(f.ctx, slot[i], (size_t)slot_size[i]);
                AW_TICK(r, left);
            }
        } else {
            for (uint64_t i = 0; i < live; i++) {
                uint32_t s = perm[i];
                if (s >= k) continue;
                f.free(f.ctx, slot[s], (size_t)slot_size[s]);
                AW_TICK(r, left);
            }
        }
        if (f.reset) f.reset(f.ctx);
        done += 2 * k;
    }
    r->size_i = si;
    r->peak_live = peak;
    return 0;
}

/* The loops, one copy per touch mode. noinline: the floor pass and the allocator's
 * pass run the very same machine code, through the same indirect calls. */
__attribute__((noinline)) static int aw_run_rounds(aw_run *r, uint64_t ops) {
    int churn = r->w->pattern == AW_CHURN;
    switch (r->w->touch) {
    case AW_TOUCH_NONE: return churn ? aw_churn_t(r, ops, AW_TOUCH_NONE) : aw_rounds_t(r, ops, AW_TOUCH_NONE);
    case AW_TOUCH_FIRST: return churn ? aw_churn_t(r, ops, AW_TOUCH_FIRST) : aw_rounds_t(r, ops, AW_TOUCH_FIRST);
    default: return churn ? aw_churn_t(r, ops, AW_TOUCH_PAGES) : aw_rounds_t(r, ops, AW_TOUCH_PAGES);
    }
}

/* A trace, rounds times. Blocks a trace leaves live are freed after each round (untimed ops). */
__attribute__((noinline)) static int aw_run_trace(aw_run *r, int rounds) {
    const aw_fns f = r->f;
    const at_trace *t = r->trace;
    const aw_touch touch = r->w->touch;
    void **slot = r->slot;
    uint64_t *slot_size = r->slot_size;
    uint64_t live = 0, peak = r->peak_live;
    int left = AW_BATCH;
    for (int rd = 0; rd < rounds; rd++) {
        for (size_t i = 0; i < t->n; i++) {
            const at_op *op = &t->v[i];
            if (op->kind == AT_ALLOC) {
                void *p = f.alloc(f.ctx, (size_t)op->size, (size_t)op->align);
                if (!p) return -1;
                if (touch == AW_TOUCH_FIRST) aw_touch_t(p, op->size, AW_TOUCH_FIRST);
                else if (touch == AW_TOUCH_PAGES) aw_touch_t(p, op->size, AW_TOUCH_PAGES);
                slot[op->id] = p;
                slot_size[op->id] = op->size;
                live += op->size;
                peak = live > peak ? live : peak;
                AW_TICK(r, left);
            } else if (op->kind == AT_FREE) {
                f.free(f.ctx, slot[op->id], (size_t)slot_size[op->id]);
                slot[op->id] = NULL;
                live -= slot_size[op->id];
                AW_TICK(r, left);
            } else if (f.reset) {
                f.reset(f.ctx);
                memset(slot, 0, t->n_ids * sizeof(void *));
                live = 0;
            } else {
                for (uint32_t b = 0; b < t->n_ids; b++)
                    if (slot[b]) f.free(f.ctx, slot[b], (size_t)slot_size[b]), live -= slot_size[b], slot[b] = NULL;
            }
        }
        for (uint32_t b = 0; b < t->n_ids; b++)
            if (slot[b]) f.free(f.ctx, slot[b], (size_t)slot_size[b]), live -= slot_size[b], slot[b] = NULL;
        if (f.reset) f.reset(f.ctx);
    }
    r->peak_live = peak;
    return 0;
}

/* ---- producer/consumer: allocated on this thread, freed on another ---- */

enum { AW_RING = 4096 };

typedef struct aw_ring {
    _Atomic uint64_t head, tail;        /* head: next to write (producer), tail: next to read */
    void *v[AW_RING];
    aw_run *r;
    uint64_t n;                         /* blocks to pass */
} aw_ring;

static void aw_pc_free(aw_run *r, const aw_fns *f, void *p) {
    uint64_t sz = r->w->size ? r->w->size : 0;
    if (r->locked) pthread_mutex_lock(&r->mu);
    f->free(f->ctx, p, (size_t)sz);
    atomic_fetch_sub_explicit(&r->a_live_bytes, sz, memory_order_relaxed);
    if (atomic_fetch_sub_explicit(&r->a_live_blocks, 1, memory_order_relaxed) == 1 && f->reset && r->locked)
        f->reset(f->ctx);
    if (r->locked) pthread_mutex_unlock(&r->mu);
}

static void *aw_consumer(void *arg) {
    aw_ring *q = arg;
    const aw_fns f = q->r->f;
    for (uint64_t got = 0; got < q->n;) {
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
        if (t == atomic_load_explicit(&q->head, memory_order_acquire)) {
            sched_yield();
            continue;
        }
        void *p = q->v[t % AW_RING];
        atomic_store_explicit(&q->tail, t + 1, memory_order_release);
        aw_pc_free(q->r, &f, p);
        got++;
    }
    return NULL;
}

__attribute__((noinline)) static int aw_run_prodcon(aw_run *r, uint64_t ops) {
    aw_ring *q = calloc(1, sizeof(*q));
    if (!q) return -1;
    q->r = r;
    q->n = ops / 2;
    pthread_t th;
    if (pthread_create(&th, NULL, aw_consumer, q)) {
        free(q);
        return -1;
    }
    const aw_fns f = r->f;
    int rc = 0, left = AW_BATCH;
    uint64_t sz = r->w->size;   /* prodcon takes a fixed size: the consumer frees with it */
    for (uint64_t i = 0; i < q->n; i++) {
        uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
        while (h - atomic_load_explicit(&q->tail, memory_order_acquire) >= AW_RING) sched_yield();
        if (r->locked) pthread_mutex_lock(&r->mu);
        void *p = f.alloc(f.ctx, (size_t)sz, (size_t)r->w->align);
        /* counted live under the lock: else the consumer, freeing the last counted block,
         * could reset the arena between this alloc and its count, and p would be freed
         * after the reset (caught as misuse in debug builds) */
        uint64_t lb = 0;
        if (p) {
            lb = atomic_fetch_add_explicit(&r->a_live_bytes, sz, memory_order_relaxed) + sz;
            atomic_fetch_add_explicit(&r->a_live_blocks, 1, memory_order_relaxed);
        }
        if (r->locked) pthread_mutex_unlock(&r->mu);
        if (!p) {
            /* the consumer waits for q->n blocks: stop it by passing NULLs it will not free */
            rc = -1;
            break;
        }
        aw_touch_t(p, sz, r->w->touch);
        if (lb > r->peak_live) r->peak_live = lb;
        q->v[h % AW_RING] = p;
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
        /* one alloc here stands for two ops: it and its free on the other thread */
        left -= 2;
        if (left == 0) {
            aw_batch_end(r);
            left = AW_BATCH;
        }
    }
    if (rc) pthread_cancel(th);
    pthread_join(th, NULL);
    free(q);
    return rc;
}

/* ---- the driver's floor: the same loops on an allocator that does nothing ---- */

/* The null allocator: every alloc returns the one preallocated block (as large as the
 * workload's largest request, page aligned, every page touched), free and reset do
 * nothing. A pass on it costs what the driver costs per op (the indirect calls, the
 * size, the bookkeeping, the touch, the batch count) and nothing an allocator does. */
static void *aw_null_alloc(void *ctx, size_t size, size_t align) {
    (void)size, (void)align;
    return ctx;
}
static void aw_null_free(void *ctx, void *p, size_t size) { (void)ctx, (void)p, (void)size; }

/* The workload's largest request, B. */
static uint64_t aw_max_request(const aw_workload *w, const at_trace *t) {
    if (w->pattern == AW_TRACE) {
        uint64_t m = 1;
        for (size_t i = 0; i < t->n; i++)
            if (t->v[i].kind == AT_ALLOC && t->v[i].size > m) m = t->v[i].size;
        return m;
    }
    return w->size ? w->size : w->max;
}

/* ---- the worker's protocol side ---- */

typedef struct aw_wk {
    int ev_fd, ack_fd;
    int64_t t0;
} aw_wk;

static int aw_send(aw_wk *c, uint32_t type, int ack, const char *name, const char *unit, double value) {
    bench_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    ev.flags = ack ? BENCH_EV_ACK : 0;
    ev.t_ns = aw_now();
    ev.a = type == BENCH_EV_HELLO ? getpid() : 0;
    ev.value = value;
    if (name) snprintf(ev.name, sizeof(ev.name), "%s", name);
    if (unit) snprintf(ev.unit, sizeof(ev.unit), "%s", unit);
    if (c->ev_fd < 0) {
        static const char *n[] = {"?", "hello", "load_start", "load_end", "", "", "", "", "", "counter", "done", "error"};
        fprintf(stderr, "%9.3f ms  %-10s", (double)(ev.t_ns - c->t0) * 1e-6, type <= BENCH_EV_ERROR ? n[type] : "?");
        if (type == BENCH_EV_COUNTER) fprintf(stderr, " %s = %.6g %s", ev.name, value, ev.unit);
        if (type == BENCH_EV_ERROR) fprintf(stderr, " %s", name);
        fputc('\n', stderr);
        return 0;
    }
    ssize_t w;
    while ((w = write(c->ev_fd, &ev, sizeof(ev))) < 0 && errno == EINTR) {}
    if (w != (ssize_t)sizeof(ev)) return -1;
    if (ack) {
        char b;
        ssize_t r;
        while ((r = read(c->ack_fd, &b, 1)) < 0 && errno == EINTR) {}
        if (r != 1) return -1;
    }
    return 0;
}

static void aw_emit(void *user, const char *name, const char *unit, double v) {
    char n[96];
    snprintf(n, sizeof(n), "alloc.%s", name);
    aw_send(user, BENCH_EV_COUNTER, 0, n, unit, v);
}

static int aw_fail(aw_wk *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int aw_fail(aw_wk *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "bench worker: %s\n", msg);
    if (c->ev_fd >= 0) aw_send(c, BENCH_EV_ERROR, 0, msg, NULL, 0);
    return 1;
}

/* "VmRSS:" or "VmHWM:" of this process, in bytes; -1 when unreadable. */
static int64_t aw_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl)) {
            v = strtoll(line + kl, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The cost of one clock read: the median of back-to-back differences. */
static int64_t aw_clock_cost(void) {
    enum { N = 4001 };
    int64_t *d = malloc(N * sizeof(*d));
    if (!d) return 0;
    for (int i = 0; i < N; i++) {
        int64_t a = aw_now();
        d[i] = aw_now() - a;
    }
    qsort(d, N, sizeof(*d), cmp_i64);
    int64_t m = d[N / 2];
    free(d);
    return m;
}

/* Allocators that may be called from two threads at once; the others run the
 * producer/consumer pair under one mutex, as a caller sharing them would have to. */
static int aw_thread_safe(const char *name) {
    static const char *const safe[] = {"libc", "jemalloc", "mimalloc", "slab", NULL};
    return aw_enum(name, safe) >= 0;
}

static double aw_tv_ms(struct timeval t) { return (double)t.tv_sec * 1e3 + (double)t.tv_usec * 1e-3; }

/* One run of the workload: w->ops calls (a trace: w->rounds replays), or, for the
 * warm-up, `ops` calls (a trace: one replay). */
static int aw_go(aw_run *r, uint64_t ops, int rounds) {
    return r->w->pattern == AW_TRACE ? aw_run_trace(r, rounds)
         : r->w->pattern == AW_PRODCON ? aw_run_prodcon(r, ops) : aw_run_rounds(r, ops);
}

/* The figures of one timed pass, the clock's cost removed. */
typedef struct aw_timing {
    double ns_per_op;   /* ns, mean over the pass */
    double p50, p99;    /* ns per op, quantiles over the batches */
    size_t batches;
} aw_timing;

/* The untimed warm-up (warm ops), then the timed pass, on whatever r->f calls; getrusage
 * just around the timed pass when ru0/ru1 are given. Returns -1 when an alloc failed. */
static int aw_pass(aw_run *r, uint64_t warm, aw_timing *out, struct rusage *ru0, struct rusage *ru1) {
    memset(out, 0, sizeof(*out));
    r->timed = 0;
    int bad = aw_go(r, warm, 1);
    if (ru0) getrusage(RUSAGE_SELF, ru0);
    r->timed = 1;
    r->n_batch = 0;
    r->clock_reads = 0;
    int64_t t0 = aw_now();
    r->t_last = t0;
    if (!bad) bad = aw_go(r, r->w->ops, r->w->rounds);
    int64_t t1 = aw_now();
    if (ru1) getrusage(RUSAGE_SELF, ru1);
    r->timed = 0;
    double total_ns = (double)(t1 - t0) - (double)r->clock_reads * (double)r->overhead_ns;
    if (total_ns < 1) total_ns = 1;
    out->ns_per_op = total_ns / (double)r->w->ops;
    out->batches = r->n_batch;
    if (r->n_batch) {
        st_sort(r->batch_ns, (int)r->n_batch);
        out->p50 = st_quantile_sorted(r->batch_ns, (int)r->n_batch, 0.50);
        out->p99 = st_quantile_sorted(r->batch_ns, (int)r->n_batch, 0.99);
    }
    return bad ? -1 : 0;
}

int aw_worker(const char *spec_text, const char *spec_name, int ev_fd, int ack_fd) {
    aw_wk c = {.ev_fd = ev_fd, .ack_fd = ack_fd, .t0 = aw_now()};
    sc_errors errs = {0};
    aw_ctx pc = {.file = spec_name, .errs = &errs};
    aw_workload w = {0};
    aw_run r = {0};
    at_trace trace = {0};
    modreg_entry me = {0};
    void *storage = NULL;
    int rc = 1;
    cJSON *j = cJSON_Parse(spec_text);
    const cJSON *ja = j ? cJSON_GetObjectItemCaseSensitive(j, "alloc") : NULL;
    const cJSON *jo = j ? cJSON_GetObjectItemCaseSensitive(j, "alloc_opts") : NULL;
    const cJSON *jd = j ? cJSON_GetObjectItemCaseSensitive(j, "module_dir") : NULL;
    if (!cJSON_IsString(ja) || !cJSON_IsString(jo) || !cJSON_IsString(jd)) {
        aw_fail(&c, "%s: not an allocator worker spec (want alloc, alloc_opts, module_dir, workload)", spec_name);
        goto out;
    }
    if (aw_parse_workload(&pc, cJSON_GetObjectItemCaseSensitive(j, "workload"), ".workload", &w)) {
        aw_fail(&c, "%s", errs.n ? errs.v[0] : "bad workload");
        goto out;
    }
    if (aw_send(&c, BENCH_EV_HELLO, 1, NULL, NULL, 0)) goto out;
    aw_send(&c, BENCH_EV_LOAD_START, 0, NULL, NULL, 0);

    char err[512];
    bench_opts bo;
    if (modreg_load(jd->valuestring, "alloc", ja->valuestring, &me, err, sizeof(err)) ||
        modreg_parse_opts(jo->valuestring, &bo, &storage, err, sizeof(err)) || modreg_check_opts(me.mod, &bo, err, sizeof(err))) {
        aw_fail(&c, "%s", err);
        goto out;
    }
    r.ai = me.mod->iface;
    r.w = &w;
    int locked = w.pattern == AW_PRODCON && !aw_thread_safe(ja->valuestring);
    pthread_mutex_init(&r.mu, NULL);
    if (w.pattern == AW_PRODCON && !w.size) {
        aw_fail(&c, "%s: pattern prodcon takes a fixed \"size\" (the consumer frees with it)", spec_name);
        goto out;
    }
    if (w.pattern == AW_TRACE) {
        if (at_load(w.trace, &trace, err, sizeof(err))) {
            aw_fail(&c, "%s", err);
            goto out;
        }
        r.trace = &trace;
    }
    r.n_slot = w.pattern == AW_TRACE ? (trace.n_ids ? trace.n_ids : 1) : (size_t)w.live;
    r.slot = calloc(r.n_slot, sizeof(*r.slot));
    r.slot_size = calloc(r.n_slot, sizeof(*r.slot_size));
    r.sizes = malloc(AW_NSIZES * sizeof(*r.sizes));
    r.perm = malloc((size_t)w.live * sizeof(*r.perm));
    r.cap_batch = (size_t)(w.ops / AW_BATCH) + 1;
    r.batch_ns = malloc(r.cap_batch * sizeof(*r.batch_ns));
    if (!r.slot || !r.slot_size || !r.sizes || !r.perm || !r.batch_ns) {
        aw_fail(&c, "out of memory");
        goto out;
    }
    uint64_t rng = w.seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < AW_NSIZES; i++) {
        /* inverse CDF of p(s) ~ s^-alpha on [min, max]; alpha 1 is uniform in log(s) */
        double u = (double)(aw_rng(&rng) >> 11) * 0x1.0p-53, lo = (double)w.min, hi = (double)w.max, s;
        if (fabs(w.alpha - 1.0) < 1e-9) s = lo * pow(hi / lo, u);
        else {
            double e = 1.0 - w.alpha;
            s = pow(pow(lo, e) + u * (pow(hi, e) - pow(lo, e)), 1.0 / e);
        }
        uint64_t si = (uint64_t)s;
        r.sizes[i] = si < w.min ? w.min : si > w.max ? w.max : si;
    }
    for (int i = 0; i < w.live; i++) r.perm[i] = (uint32_t)i;
    for (int i = w.live - 1; i > 0; i--) {
        int k = (int)(aw_rng(&rng) % (uint64_t)(i + 1));
        uint32_t t = r.perm[i];
        r.perm[i] = r.perm[k];
        r.perm[k] = t;
    }
    /* every page of the driver's own arrays is touched now, not inside the timing (not zeros:
     * the compiler may turn malloc + memset 0 into calloc, whose fresh pages stay untouched) */
    for (size_t i = 0; i < r.cap_batch; i++) r.batch_ns[i] = -1.0;
    r.overhead_ns = aw_clock_cost();
    if (r.ai->create(&bo, &r.ctx, err, sizeof(err))) {
        aw_fail(&c, "%s", err);
        goto out;
    }
    if (aw_send(&c, BENCH_EV_LOAD_END, 1, NULL, NULL, 0)) goto out;

    /* warm-up: one round (a trace: one replay), untimed; then the timed pass */
    uint64_t warm = w.pattern == AW_CHURN || w.pattern == AW_PRODCON ? 2048 : 2 * (uint64_t)w.live;
    if (warm > w.ops) warm = w.ops;

    /* The driver's floor: the same passes on the null allocator, twice (the lower counts:
     * a busy machine only ever adds), before the allocator's own pass and before the RSS
     * baseline, its block unmapped again so it is in no figure of the allocator's. */
    aw_timing fl = {0};
    {
        size_t nb_len = (size_t)((aw_max_request(&w, &trace) + 4095) & ~(uint64_t)4095);
        void *nb = mmap(NULL, nb_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (nb == MAP_FAILED) {
            aw_fail(&c, "cannot map the floor's %zu B block", nb_len);
            goto out;
        }
        for (size_t o = 0; o < nb_len; o += 4096) ((volatile char *)nb)[o] = 1;
        r.f = (aw_fns){.alloc = aw_null_alloc, .free = aw_null_free, .reset = NULL, .ctx = nb};
        for (int k = 0; k < 2; k++) {
            aw_timing ft;
            aw_pass(&r, warm, &ft, NULL, NULL);   /* the null allocator never fails */
            if (k == 0 || ft.ns_per_op < fl.ns_per_op) fl = ft;
        }
        munmap(nb, nb_len);
        r.peak_live = 0;
        r.size_i = 0;
        memset(r.slot, 0, r.n_slot * sizeof(*r.slot));
        atomic_store(&r.a_live_bytes, 0);
        atomic_store(&r.a_live_blocks, 0);
    }
    r.f = (aw_fns){.alloc = r.ai->alloc, .free = r.ai->free, .reset = r.ai->reset, .ctx = r.ctx};
    r.locked = locked;

    /* peak RSS from here on: VmHWM restarts at the current RSS (clear_refs 5, Linux 4.0+) */
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    int hwm_reset = fd >= 0 && write(fd, "5", 1) == 1;
    if (fd >= 0) close(fd);
    int64_t rss0 = aw_status_bytes("VmRSS:");

    struct rusage ru0, ru1;
    aw_timing tm;
    if (aw_pass(&r, warm, &tm, &ru0, &ru1)) {
        aw_fail(&c, "%s: out of memory (alloc returned NULL)", ja->valuestring);
        goto out;
    }
    int64_t hwm = aw_status_bytes(hwm_reset ? "VmHWM:" : "VmRSS:");
    double ops = (double)w.ops;
    uint64_t minflt = (uint64_t)(ru1.ru_minflt - ru0.ru_minflt);
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.ops", "count", ops);
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.ns_per_op", "ns", tm.ns_per_op);
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.ops_per_s", "ops/s", 1e9 / tm.ns_per_op);
    if (tm.batches) {
        aw_send(&c, BENCH_EV_COUNTER, 0, "aw.ns_op_p50", "ns", tm.p50);
        aw_send(&c, BENCH_EV_COUNTER, 0, "aw.ns_op_p99", "ns", tm.p99);
    }
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.batches", "count", (double)tm.batches);
    /* the floor, and the allocator's figures less the floor's same statistic */
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.floor_ns_per_op", "ns", fl.ns_per_op);
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.net_ns_per_op", "ns", tm.ns_per_op - fl.ns_per_op);
    if (tm.batches && fl.batches) {
        aw_send(&c, BENCH_EV_COUNTER, 0, "aw.floor_ns_op_p50", "ns", fl.p50);
        aw_send(&c, BENCH_EV_COUNTER, 0, "aw.floor_ns_op_p99", "ns", fl.p99);
        aw_send(&c, BENCH_EV_COUNTER, 0, "aw.net_ns_op_p50", "ns", tm.p50 - fl.p50);
        aw_send(&c, BENCH_EV_COUNTER, 0, "aw.net_ns_op_p99", "ns", tm.p99 - fl.p99);
    }
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.timer_ns", "ns", (double)r.overhead_ns);
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.minflt", "count", (double)minflt);
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.minflt_per_op", "count", (double)minflt / ops);
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.sys_ms", "ms", aw_tv_ms(ru1.ru_stime) - aw_tv_ms(ru0.ru_stime));
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.user_ms", "ms", aw_tv_ms(ru1.ru_utime) - aw_tv_ms(ru0.ru_utime));
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.peak_live_bytes", "B", (double)r.peak_live);
    if (rss0 >= 0 && hwm >= 0) {
        double grow = (double)(hwm > rss0 ? hwm - rss0 : 0);
        aw_send(&c, BENCH_EV_COUNTER, 0, "aw.rss_growth_bytes", "B", grow);
        if (r.peak_live) aw_send(&c, BENCH_EV_COUNTER, 0, "aw.fragmentation", "ratio", grow / (double)r.peak_live);
    }
    aw_send(&c, BENCH_EV_COUNTER, 0, "aw.locked", "bool", locked);
    if (r.ai->counters) {
        bench_counter_sink sink = {aw_emit, &c};
        r.ai->counters(r.ctx, &sink);
    }
    rc = aw_send(&c, BENCH_EV_DONE, 1, NULL, NULL, 0) ? 1 : 0;
out:
    if (r.ctx) r.ai->destroy(r.ctx);
    if (r.ai) pthread_mutex_destroy(&r.mu);
    free(r.slot);
    free(r.slot_size);
    free(r.sizes);
    free(r.perm);
    free(r.batch_ns);
    at_trace_free(&trace);
    free(storage);
    modreg_entry_close(&me);
    aw_workload_free(&w);
    sc_errors_free(&errs);
    cJSON_Delete(j);
    return rc;
}

int aw_worker_file(const char *path, int ev_fd, int ack_fd, int *handled) {
    *handled = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;   /* the engine worker reports it */
    char *buf = NULL;
    size_t len = 0;
    for (;;) {
        char *nb = realloc(buf, len + 65536 + 1);
        if (!nb) break;
        buf = nb;
        size_t n = fread(buf + len, 1, 65536, f);
        len += n;
        if (n == 0) break;
    }
    fclose(f);
    if (!buf) return 0;
    buf[len] = 0;
    int rc = 0;
    if (aw_is_spec(buf)) {
        *handled = 1;
        rc = aw_worker(buf, path, ev_fd, ack_fd);
    }
    free(buf);
    return rc;
}

/* ======================================================================
 * The table
 * ====================================================================== */

static const rs_metric *aw_find(const rs_summary *sum, int variant, const char *name) {
    for (int i = 0; i < sum->n; i++) {
        if (sum->v[i].variant != variant) continue;
        for (int k = 0; k < sum->v[i].n; k++)
            if (!strcmp(sum->v[i].m[k].name, name) && sum->v[i].m[k].st.n) return &sum->v[i].m[k];
    }
    return NULL;
}

typedef struct aw_row {
    const char *metric, *title, *fmt;
    double scale;
    int ratio;      /* print x vs the baseline */
} aw_row;

void aw_print_table(FILE *f, const rs_input *in, const rs_summary *sum) {
    const scenario *s = in->s;
    const sc_axis *al = &s->axes[SC_AX_ALLOC], *wl = &s->axes[SC_AX_WORKLOAD];
    int base = 0;
    for (int i = 0; i < al->n; i++)
        if (!strcmp(al->v[i].label, "libc")) {
            base = i;
            break;
        }
    static const aw_row rows[] = {
        {"mod.aw.ns_per_op", "ns per op, raw (mean over the timed pass; op = one alloc or one free)", "%.2f", 1, 1},
        {"mod.aw.ns_op_p50", "ns per op, raw, p50 of 64-op batches, clock cost removed", "%.2f", 1, 1},
        {"mod.aw.ns_op_p99", "ns per op, raw, p99 of 64-op batches", "%.2f", 1, 1},
        {"mod.aw.floor_ns_per_op", "driver floor: ns per op of the same passes on the null allocator (mean)", "%.2f", 1, 0},
        {"mod.aw.net_ns_per_op", "ns per op net of the floor (raw mean less floor mean)", "%.2f", 1, 1},
        {"mod.aw.net_ns_op_p50", "ns per op net of the floor, p50 (raw p50 less floor p50)", "%.2f", 1, 1},
        {"mod.aw.net_ns_op_p99", "ns per op net of the floor, p99 (raw p99 less floor p99)", "%.2f", 1, 1},
        {"mod.aw.minflt_per_op", "minor faults per op (timed pass)", "%.4f", 1, 0},
        {"mod.aw.sys_ms", "system time, ms (timed pass)", "%.1f", 1, 0},
        {"mod.aw.fragmentation", "fragmentation: RSS growth at peak / bytes live at peak", "%.2f", 1, 0},
        {"peak_rss_mib", "peak RSS of the worker, MiB", "%.1f", 1, 0},
    };
    int cw = 16;
    for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++) {
        const aw_row *row = &rows[ri];
        fprintf(f, "\n%s (median of %d)%s%s%s\n", row->title, s->repetitions, row->ratio ? "; x: relative to " : "",
                row->ratio ? al->v[base].label : "", row->ratio ? " = 1.00x" : "");
        fprintf(f, "%-14s", "workload");
        for (int a = 0; a < al->n; a++) fprintf(f, " %*.*s", cw, cw, al->v[a].label);
        fputc('\n', f);
        for (int wi = 0; wi < wl->n; wi++) {
            int any = 0;
            for (int a = 0; a < al->n; a++) any |= s->variants[wi * al->n + a].selected;
            if (!any) continue;
            fprintf(f, "%-14.14s", wl->v[wi].label);
            const rs_metric *bm = aw_find(sum, wi * al->n + base, row->metric);
            for (int a = 0; a < al->n; a++) {
                const rs_metric *m = aw_find(sum, wi * al->n + a, row->metric);
                char cell[64] = "-";
                if (m) {
                    int n = snprintf(cell, sizeof(cell), row->fmt, m->st.median * row->scale);
                    if (row->ratio && bm && bm->st.median > 0 && n > 0)
                        snprintf(cell + n, sizeof(cell) - (size_t)n, " %5.3gx", m->st.median / bm->st.median);
                }
                fprintf(f, " %*s", cw, cell);
            }
            fputc('\n', f);
        }
    }
    fprintf(f, "\nspread (min .. max, CI) per cell: results.csv; every repetition: results.json\n");
}
