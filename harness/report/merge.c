/* bench merge: shards' results.json into one (merge.h). */
#include "harness/report/merge.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "harness/report/escape.h"
#include "harness/report/rmodel.h"
#include "harness/report/results.h"
#include "harness/scenario/stats.h"
#include "util/ut_fs.h"
#include "util/ut_vec.h"

/* ---- errors: every problem found, one per line ---- */

typedef struct mg_errs {
    char *buf;
    size_t len;
    int n;
} mg_errs;

static void mg_err(mg_errs *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mg_err(mg_errs *e, const char *fmt, ...) {
    e->n++;
    if (e->len + 2 >= 8192) return;
    if (!e->buf && !(e->buf = calloc(1, 8192))) return;
    if (e->len) e->buf[e->len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(e->buf + e->len, 8192 - e->len, fmt, ap);
    va_end(ap);
    if (w > 0) e->len += (size_t)w < 8192 - e->len ? (size_t)w : 8191 - e->len;
}

/* ---- small JSON helpers ---- */

/* A field as text for messages: strings bare, anything else as compact JSON. */
static void mg_show(const cJSON *x, char *buf, size_t len) {
    if (!x) {
        snprintf(buf, len, "(absent)");
        return;
    }
    if (cJSON_IsString(x)) {
        snprintf(buf, len, "\"%s\"", x->valuestring);
        return;
    }
    char *t = cJSON_PrintUnformatted(x);
    snprintf(buf, len, "%s", t ? t : "?");
    if (t && strlen(t) >= len && len > 4) snprintf(buf + len - 4, 4, "...");
    free(t);
}

/* ---- machine types ---- */

static uint64_t mg_fnv(uint64_t h, const char *s) {
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull;   /* a field separator: "ab","c" != "a","bc" */
}

/* "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz" -> "Intel Xeon Platinum 8480+" */
static void mg_short_cpu(const char *model, char *buf, size_t len) {
    size_t o = 0;
    for (const char *p = model; *p && o + 1 < len;) {
        if (!strncmp(p, "(R)", 3) || !strncmp(p, "(TM)", 4) || !strncmp(p, "(tm)", 4)) {
            p += p[1] == 'R' ? 3 : 4;
            continue;
        }
        if (!strncmp(p, " CPU", 4) || !strncmp(p, " @", 2)) break;
        /* labels are axis values in keys (rmodel.h): no ',' or '=' */
        char c = *p == ',' || *p == '=' ? ' ' : *p;
        if (c == ' ' && (o == 0 || buf[o - 1] == ' ')) { p++; continue; }
        buf[o++] = c;
        p++;
    }
    while (o && buf[o - 1] == ' ') o--;
    buf[o] = 0;
    if (!o) snprintf(buf, len, "unknown CPU");
}

void mg_machine_type(const cJSON *env, char *id, size_t idlen, char *label, size_t lablen) {
    const cJSON *cpu = rm_json_get(env, "cpu");
    const char *model = rm_json_str(cpu, "model"), *flags = rm_json_str(cpu, "flags"), *kern = rm_json_str(env, "kernels");
    uint64_t h = 0xcbf29ce484222325ull;
    h = mg_fnv(h, model);
    h = mg_fnv(h, flags);
    h = mg_fnv(h, kern);
    const cJSON *g;
    int ng = 0;
    const char *g0 = NULL;
    cJSON_ArrayForEach(g, rm_json_get(env, "gpus")) {
        if (!cJSON_IsString(g)) continue;
        h = mg_fnv(h, g->valuestring);
        if (!ng++) g0 = g->valuestring;
    }
    snprintf(id, idlen, "%016llx", (unsigned long long)h);
    char cpu_s[160], gpu_s[160] = "";
    mg_short_cpu(model ? model : "unknown CPU", cpu_s, sizeof(cpu_s));
    if (g0) {
        char tmp[128];
        mg_short_cpu(g0, tmp, sizeof(tmp));
        if (ng > 1) snprintf(gpu_s, sizeof(gpu_s), " + %dx %s", ng, tmp);
        else snprintf(gpu_s, sizeof(gpu_s), " + %s", tmp);
    }
    snprintf(label, lablen, "%s%s", cpu_s, gpu_s);
}

/* ---- inputs ---- */

typedef struct mg_in {
    char path[PATH_MAX];        /* the results directory */
    rm_model model;             /* its results.json as read (rmodel.h) */
    cJSON *root;                /* its document (model.root's, once read) */
    int shard, count;           /* shard index of count; 0 of 1 when unsharded */
    const cJSON *cells;         /* the shard's cells, NULL when unsharded */
    int type;                   /* index into mg_ctx.types */
    int *vmap;                  /* (its variants) -> merged variant index */
    int nv;
} mg_in;

typedef struct mg_type {
    char id[32], label[200];
    int first;                  /* the first input of this type */
} mg_type;

typedef struct mg_ctx {
    int n, cap;
    mg_in *in;
    int nt;
    mg_type *types;             /* (nt) */
    mg_errs e;
} mg_ctx;

static int mg_has_results(const char *dir) {
    char p[PATH_MAX];
    struct stat st;
    return snprintf(p, sizeof(p), "%s/results.json", dir) < (int)sizeof(p) && !stat(p, &st) && S_ISREG(st.st_mode);
}

static int mg_add_input(mg_ctx *c, const char *dir_or_file) {
    if (UT_VEC_RESERVE(c->in, c->cap, c->n + 1)) return -1;
    mg_in *in = &c->in[c->n];
    memset(in, 0, sizeof(*in));
    snprintf(in->path, sizeof(in->path), "%s", dir_or_file);
    size_t l = strlen(in->path);
    if (l > 13 && !strcmp(in->path + l - 13, "/results.json")) in->path[l - 13] = 0;
    char file[PATH_MAX + 16], err[PATH_MAX + 256];
    snprintf(file, sizeof(file), "%s/results.json", in->path);
    char *text = rr_slurp(file, NULL, err, sizeof(err));
    if (!text) {
        mg_err(&c->e, "%s", err);
        return 0;
    }
    in->root = cJSON_Parse(text);
    free(text);
    if (!in->root) {
        mg_err(&c->e, "%s: not valid JSON", file);
        return 0;
    }
    const char *schema = rm_json_str(in->root, "schema");
    if (!schema || strcmp(schema, RS_SCHEMA)) {
        mg_err(&c->e, "%s: .schema: expected \"%s\", found %s", file, RS_SCHEMA, schema ? schema : "none");
        cJSON_Delete(in->root);
        return 0;
    }
    if (!cJSON_IsArray(rm_json_get(in->root, "runs")) || !cJSON_IsArray(rm_json_get(in->root, "variants")) ||
        !cJSON_IsObject(rm_json_get(in->root, "scenario")) || !cJSON_IsObject(rm_json_get(in->root, "environment"))) {
        mg_err(&c->e, "%s: expected .scenario, .environment, .variants and .runs", file);
        cJSON_Delete(in->root);
        return 0;
    }
    if (cJSON_GetObjectItemCaseSensitive(in->root, "merged")) {
        mg_err(&c->e, "%s: already a merged result (.merged): give the shards' own directories", file);
        cJSON_Delete(in->root);
        return 0;
    }
    const cJSON *sh = rm_json_get(in->root, "shard");
    in->shard = 0;
    in->count = 1;
    if (sh) {
        in->shard = rm_json_int(sh, "index", -1);
        in->count = rm_json_int(sh, "count", 0);
        in->cells = rm_json_get(sh, "cells");
        if (in->count < 1 || in->shard < 0 || in->shard >= in->count || !cJSON_IsArray(in->cells)) {
            mg_err(&c->e, "%s: .shard: expected index < count and a cells array", file);
            cJSON_Delete(in->root);
            return 0;
        }
    }
    /* its summaries, by the one reader (the units and classes its figures declared) */
    in->model.root = in->root;
    snprintf(in->model.file, sizeof(in->model.file), "%s", file);
    if (rr_read(&in->model, err, sizeof(err))) {
        mg_err(&c->e, "%s", err);
        rm_free(&in->model);
        return 0;
    }
    c->n++;
    return 0;
}

static int mg_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A results directory, its results.json, or a folder of results directories. */
static int mg_expand(mg_ctx *c, const char *arg) {
    struct stat st;
    if (stat(arg, &st)) {
        mg_err(&c->e, "%s: %s (expected a results directory)", arg, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode) || mg_has_results(arg)) return mg_add_input(c, arg);
    DIR *d = opendir(arg);
    if (!d) {
        mg_err(&c->e, "%s: %s", arg, strerror(errno));
        return 0;
    }
    char **names = NULL;
    int nn = 0, rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof(p), "%s/%s", arg, de->d_name) >= (int)sizeof(p) || !mg_has_results(p)) continue;
        char **nv = realloc(names, (size_t)(nn + 1) * sizeof(*nv));
        if (!nv || !(nv[nn] = strdup(p))) {
            names = nv ? nv : names;
            rc = -1;
            break;
        }
        names = nv;
        nn++;
    }
    closedir(d);
    if (!rc && !nn) mg_err(&c->e, "%s: no results.json in it or in its subdirectories", arg);
    if (!rc && nn) qsort(names, (size_t)nn, sizeof(*names), mg_cmp_str);
    for (int i = 0; !rc && i < nn; i++) rc = mg_add_input(c, names[i]);
    for (int i = 0; i < nn; i++) free(names[i]);
    free(names);
    return rc;
}

/* ---- checks ---- */

static void mg_same(mg_ctx *c, const mg_in *a, const mg_in *b, const cJSON *xa, const cJSON *xb, const char *field,
                    const char *what, const char *flag) {
    if (xa && xb ? cJSON_Compare(xa, xb, 1) : xa == xb) return;
    char sa[200], sb[200];
    mg_show(xa, sa, sizeof(sa));
    mg_show(xb, sb, sizeof(sb));
    mg_err(&c->e, "%s and %s are %s: %s is %s in the first, %s in the second (%s merges them anyway)", a->path, b->path,
           what, field, sa, sb, flag);
}

static void mg_check_scenario(mg_ctx *c, const mg_in *a, const mg_in *b) {
    const cJSON *sa = rm_json_get(a->root, "scenario"), *sb = rm_json_get(b->root, "scenario");
    static const char *what = "runs of different scenarios", *flag = "--allow-scenarios";
    mg_same(c, a, b, rm_json_get(sa, "name"), rm_json_get(sb, "name"), ".scenario.name", what, flag);
    mg_same(c, a, b, rm_json_get(sa, "as_written"), rm_json_get(sb, "as_written"), ".scenario.as_written", what, flag);
    mg_same(c, a, b, rm_json_get(sa, "overrides"), rm_json_get(sb, "overrides"), ".scenario.overrides", what, flag);
    static const char *as_run[] = {"repetitions", "warmup", "processes"};
    for (int i = 0; i < 3; i++) {
        char f[64];
        snprintf(f, sizeof(f), ".scenario.as_run.%s", as_run[i]);
        mg_same(c, a, b, rm_json_get(rm_json_get(sa, "as_run"), as_run[i]), rm_json_get(rm_json_get(sb, "as_run"), as_run[i]), f, what, flag);
    }
}

static void mg_check_build(mg_ctx *c, const mg_in *a, const mg_in *b) {
    const cJSON *ea = rm_json_get(a->root, "environment"), *eb = rm_json_get(b->root, "environment");
    static const char *what = "different builds", *flag = "--allow-builds";
    static const char *f[][2] = {{"git", "sha"}, {"git", "dirty"}, {"compiler", "version"}, {"compiler", "flags"},
                                 {"compiler", "sanitizers"}};
    for (int i = 0; i < 5; i++) {
        char name[64];
        snprintf(name, sizeof(name), ".environment.%s.%s", f[i][0], f[i][1]);
        mg_same(c, a, b, rm_json_get(rm_json_get(ea, f[i][0]), f[i][1]), rm_json_get(rm_json_get(eb, f[i][0]), f[i][1]), name, what, flag);
    }
}

static void mg_check_plan(mg_ctx *c, const mg_opts *o) {
    int count = c->in[0].count;
    for (int i = 1; i < c->n; i++)
        if (c->in[i].count != count)
            mg_err(&c->e, "%s is shard %d/%d and %s shard %d/%d: shards of different plans", c->in[0].path,
                   c->in[0].shard, count, c->in[i].path, c->in[i].shard, c->in[i].count);
    if (c->e.n) return;
    for (int i = 0; i < c->n; i++)
        for (int j = i + 1; j < c->n; j++)
            if (c->in[i].shard == c->in[j].shard && c->in[i].type == c->in[j].type)
                mg_err(&c->e, "%s and %s are both shard %d/%d on one machine type (%s): its cells would count twice",
                       c->in[i].path, c->in[j].path, c->in[i].shard, count, c->types[c->in[i].type].label);
    char missing[512] = "";
    int nm = 0;
    for (int s = 0; s < count; s++) {
        int have = 0;
        for (int i = 0; i < c->n; i++) have |= c->in[i].shard == s;
        if (have) continue;
        size_t l = strlen(missing);
        if (l + 16 < sizeof(missing)) snprintf(missing + l, sizeof(missing) - l, "%s%d", nm ? ", " : "", s);
        nm++;
    }
    if (nm && !o->partial)
        mg_err(&c->e, "shard%s %s of %d missing: give every shard's results directory (or --partial)", nm > 1 ? "s" : "",
               missing, count);
    for (int i = 0; i < c->n && !o->partial; i++) {
        const char *st = c->in[i].model.status;
        if (strcmp(st, "complete"))
            mg_err(&c->e, "%s: .status is \"%s\": the shard did not finish (or --partial)", c->in[i].path, st[0] ? st : "?");
    }
}

/* ---- variants and runs ---- */

static int mg_cell_in(const cJSON *cells, int variant, int rep) {
    const cJSON *x;
    cJSON_ArrayForEach(x, cells)
        if (rm_json_int(x, "variant", -1) == variant && rm_json_int(x, "repetition", -1) == rep) return 1;
    return 0;
}

/* Merged variants: the first input's, others matched by key (new keys appended). */
static cJSON *mg_variants(mg_ctx *c) {
    cJSON *vars = cJSON_Duplicate(rm_json_get(c->in[0].root, "variants"), 1);
    if (!vars) return NULL;
    for (int i = 0; i < c->n; i++) {
        mg_in *in = &c->in[i];
        const cJSON *iv = rm_json_get(in->root, "variants");
        in->nv = cJSON_GetArraySize(iv);
        in->vmap = calloc((size_t)(in->nv ? in->nv : 1), sizeof(int));
        if (!in->vmap) goto oom;
        int k = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, iv) {
            const char *key = rm_json_str(v, "key");
            int found = -1, m = 0;
            cJSON *mv;
            cJSON_ArrayForEach(mv, vars) {
                if (key && !strcmp(rm_json_str(mv, "key") ? rm_json_str(mv, "key") : "", key)) found = m;
                m++;
            }
            if (found < 0) {
                cJSON *nv = cJSON_Duplicate(v, 1);
                if (!nv) goto oom;
                cJSON_ReplaceItemInObjectCaseSensitive(nv, "index", cJSON_CreateNumber(m));
                cJSON_AddItemToArray(vars, nv);
                found = m;
            }
            int idx = rm_json_int(v, "index", k);
            in->vmap[idx >= 0 && idx < in->nv ? idx : k] = found;
            cJSON *mvf = cJSON_GetArrayItem(vars, found);
            if (cJSON_IsTrue(rm_json_get(v, "selected")) && !cJSON_IsTrue(rm_json_get(mvf, "selected")))
                cJSON_ReplaceItemInObjectCaseSensitive(mvf, "selected", cJSON_CreateTrue());
            k++;
        }
    }
    return vars;
oom:
    cJSON_Delete(vars);
    return NULL;
}

typedef struct mg_runref {
    int in, idx;                /* input, index in its runs[] */
    int warmup, rep, variant;   /* variant: merged index */
    const cJSON *run;
} mg_runref;

/* Warm-ups first (by input), then the measured runs in the unsharded order: repetition,
 * variant; records of one cell on several machine types by input. */
static int mg_cmp_run(const void *pa, const void *pb) {
    const mg_runref *a = pa, *b = pb;
    if (a->warmup != b->warmup) return b->warmup - a->warmup;
    if (a->warmup && a->in != b->in) return a->in - b->in;
    if (a->rep != b->rep) return a->rep - b->rep;
    if (a->variant != b->variant) return a->variant - b->variant;
    if (a->in != b->in) return a->in - b->in;
    return a->idx - b->idx;
}

/* ---- statistics per variant and machine type ---- */

/* A metric of a variant in the inputs' summaries: its unit and the class it declared
 * (harness/report/mclass.h); NULL when none has it. */
static const rm_metric *mg_metric_src(const mg_ctx *c, const char *key, const char *metric) {
    for (int i = 0; i < c->n; i++) {
        const rm_metric *x = rr_summary_metric(rr_find_variant(&c->in[i].model, key), metric);
        if (x) return x;
    }
    return NULL;
}

/* One summary entry: variant vi (merged) on machine type t, from the merged records of m;
 * 0 with nothing added when it has none there, -1 out of memory. */
static int mg_summary_one(const mg_ctx *c, const cJSON *vars, rm_model *m, int vi, int t, int multi) {
    const cJSON *var = cJSON_GetArrayItem(vars, vi);
    const char *key = rm_json_str(var, "key"), *label = rm_json_str(var, "label");
    rm_variant *v = &m->v[m->n];
    *v = (rm_variant){.variant = vi, .machine_type = t, .key = strdup(key ? key : "")};
    size_t ll = strlen(label ? label : "") + strlen(c->types[t].label) + 4;
    if ((v->label = malloc(ll))) snprintf(v->label, ll, multi ? "%s @ %s" : "%s", label ? label : "", c->types[t].label);
    int found = v->key && v->label ? rm_summarize_variant(m, v) : -1;
    if (found <= 0) {
        rm_variant_clear(v);
        return found;
    }
    m->n++; /* rm_free frees it from here */
    /* each figure's unit and class as its inputs declared them; none: as a file older than declarations */
    for (int k = 0; k < v->n; k++) {
        rm_metric *x = &v->m[k];
        const rm_metric *src = mg_metric_src(c, v->key, x->name);
        char *u = strdup(src ? src->unit : "");
        if (!u) return -1;
        free(x->unit);
        x->unit = u;
        x->declared = src ? src->declared : 0;
        x->decl = src ? src->decl : x->decl;
    }
    /* figures that live only in a summary (instructions:callgrind, one per variant and machine):
     * the first input of this type that has them */
    for (int i = 0; i < c->n; i++) {
        if (c->in[i].type != t) continue;
        const rm_variant *iv = rr_find_variant(&c->in[i].model, v->key);
        for (int k = 0; iv && k < iv->n; k++) {
            int have = 0;
            for (int q = 0; q < v->n && !have; q++) have = !strcmp(v->m[q].name, iv->m[k].name);
            if (!have && iv->m[k].summarized && rm_copy_summary_metric(v, &iv->m[k])) return -1;
        }
    }
    return 0;
}

/* The merged model's summaries: one entry per variant and machine type. 0, or -1 out of memory. */
static int mg_summaries(const mg_ctx *c, const cJSON *vars, rm_model *m) {
    int nvars = cJSON_GetArraySize(vars), cap = nvars * c->nt;
    if (!(m->v = calloc((size_t)(cap > 0 ? cap : 1), sizeof(*m->v)))) return -1;
    m->cap = cap;
    for (int vi = 0; vi < nvars; vi++)
        for (int t = 0; t < c->nt; t++)
            if (mg_summary_one(c, vars, m, vi, t, c->nt > 1) < 0) return -1;
    rm_summary_finish(m);
    if (!(m->types = calloc((size_t)c->nt, sizeof(*m->types)))) return -1;
    for (; m->n_types < c->nt; m->n_types++)
        if (!(m->types[m->n_types] = strdup(c->types[m->n_types].label))) return -1;
    return 0;
}

/* ---- the merge ---- */

static void mg_ctx_free(mg_ctx *c) {
    for (int i = 0; i < c->n; i++) {
        rm_free(&c->in[i].model); /* and its document */
        free(c->in[i].vmap);
    }
    free(c->in);
    free(c->types);
    free(c->e.buf);
}

static void mg_types(mg_ctx *c) {
    c->types = calloc((size_t)c->n, sizeof(*c->types));
    if (!c->types) return;
    for (int i = 0; i < c->n; i++) {
        char id[32], label[200];
        mg_machine_type(rm_json_get(c->in[i].root, "environment"), id, sizeof(id), label, sizeof(label));
        int t = 0;
        while (t < c->nt && strcmp(c->types[t].id, id)) t++;
        if (t == c->nt) {
            snprintf(c->types[t].id, sizeof(c->types[t].id), "%s", id);
            snprintf(c->types[t].label, sizeof(c->types[t].label), "%s", label);
            c->types[t].first = i;
            c->nt++;
        }
        c->in[i].type = t;
    }
    /* two types with one label (the same CPU model, other flags or kernels): the id tells them apart */
    for (int t = 0; t < c->nt; t++)
        for (int u = 0; u < c->nt; u++) {
            if (u == t || strncmp(c->types[t].label, c->types[u].label, sizeof(c->types[t].label))) continue;
            size_t l = strlen(c->types[t].label);
            if (l + 9 < sizeof(c->types[t].label)) snprintf(c->types[t].label + l, sizeof(c->types[t].label) - l, " #%.6s", c->types[t].id);
        }
}

/* Every record of every input, checked against its shard's cells, in order (mg_cmp_run);
 * one cell once per machine type. *out (malloc'd, *n_out of them) borrows the inputs' runs.
 * -1: out of memory; the records' problems go to c->e. */
static int mg_collect_runs(mg_ctx *c, const cJSON *vars, mg_runref **out, int *n_out) {
    int nr = 0;
    for (int i = 0; i < c->n; i++) nr += c->in[i].model.n_runs;
    mg_runref *refs = calloc((size_t)(nr ? nr : 1), sizeof(*refs));
    if (!refs) return -1;
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        for (int idx = 0; idx < c->in[i].model.n_runs; idx++) {
            const rm_run *r = &c->in[i].model.runs[idx];
            int v = r->variant, rep = r->rep;
            if (v < 0 || v >= c->in[i].nv || rep < 0) {
                mg_err(&c->e, "%s: .runs[%d]: expected a variant index < %d and a repetition >= 0", c->in[i].path, idx,
                       c->in[i].nv);
            } else {
                refs[k] = (mg_runref){.in = i, .idx = idx, .warmup = r->warmup, .rep = rep, .variant = c->in[i].vmap[v],
                                      .run = r->raw};
                if (!refs[k].warmup && c->in[i].cells && !mg_cell_in(c->in[i].cells, v, rep))
                    mg_err(&c->e, "%s: .runs[%d]: variant %d repetition %d is not one of shard %d's cells", c->in[i].path,
                           idx, v, rep, c->in[i].shard);
                k++;
            }
        }
    }
    nr = k;
    qsort(refs, (size_t)nr, sizeof(*refs), mg_cmp_run);
    for (int i = 1; i < nr; i++) {
        const mg_runref *a = &refs[i - 1], *b = &refs[i];
        if (!a->warmup && !b->warmup && a->rep == b->rep && a->variant == b->variant && a->in != b->in &&
            c->in[a->in].type == c->in[b->in].type)
            mg_err(&c->e, "%s and %s both hold variant %s repetition %d on one machine type", c->in[a->in].path,
                   c->in[b->in].path, rm_json_str(cJSON_GetArrayItem(vars, a->variant), "key"), a->rep);
    }
    *out = refs;
    *n_out = nr;
    return 0;
}

/* "machines" (one per input) and "machine_types" (the inputs grouped by CPU and GPUs) */
static void mg_add_machines(const mg_ctx *c, cJSON *doc) {
    cJSON *machines = cJSON_AddArrayToObject(doc, "machines");
    for (int i = 0; i < c->n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddNumberToObject(m, "shard", c->in[i].shard);
        cJSON_AddStringToObject(m, "source", c->in[i].path);
        const char *host = rm_json_str(rm_json_get(c->in[i].root, "environment"), "hostname");
        cJSON_AddStringToObject(m, "hostname", host ? host : "");
        cJSON_AddNumberToObject(m, "machine_type", c->in[i].type);
        cJSON_AddItemToObject(m, "environment", cJSON_Duplicate(rm_json_get(c->in[i].root, "environment"), 1));
        cJSON_AddItemToArray(machines, m);
    }
    cJSON *types = cJSON_AddArrayToObject(doc, "machine_types");
    for (int t = 0; t < c->nt; t++) {
        const cJSON *env = rm_json_get(c->in[c->types[t].first].root, "environment");
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "id", c->types[t].id);
        cJSON_AddStringToObject(x, "label", c->types[t].label);
        const char *model = rm_json_str(rm_json_get(env, "cpu"), "model"), *flags = rm_json_str(rm_json_get(env, "cpu"), "flags"),
                   *kern = rm_json_str(env, "kernels");
        cJSON_AddStringToObject(x, "cpu_model", model ? model : "");
        cJSON_AddStringToObject(x, "cpu_flags", flags ? flags : "");
        cJSON_AddStringToObject(x, "kernels", kern ? kern : "");
        const cJSON *g = rm_json_get(env, "gpus");
        cJSON_AddItemToObject(x, "gpus", g ? cJSON_Duplicate(g, 1) : cJSON_CreateArray());
        cJSON *ms = cJSON_AddArrayToObject(x, "machines");
        for (int i = 0; i < c->n; i++)
            if (c->in[i].type == t) cJSON_AddItemToArray(ms, cJSON_CreateNumber(i));
        cJSON_AddItemToArray(types, x);
    }
}

/* "merged": the shards, the inputs, the shards missing and what was allowed */
static void mg_add_merged(const mg_ctx *c, cJSON *doc, const mg_opts *o) {
    cJSON *mj = cJSON_AddObjectToObject(doc, "merged");
    cJSON_AddNumberToObject(mj, "shards", c->in[0].count);
    cJSON *src = cJSON_AddArrayToObject(mj, "inputs");
    for (int i = 0; i < c->n; i++) cJSON_AddItemToArray(src, cJSON_CreateString(c->in[i].path));
    cJSON *miss = cJSON_AddArrayToObject(mj, "missing_shards");
    for (int s = 0; s < c->in[0].count; s++) {
        int have = 0;
        for (int i = 0; i < c->n; i++) have |= c->in[i].shard == s;
        if (!have) cJSON_AddItemToArray(miss, cJSON_CreateNumber(s));
    }
    cJSON *al = cJSON_AddObjectToObject(mj, "allowed");
    cJSON_AddBoolToObject(al, "scenarios", o->allow_scenarios);
    cJSON_AddBoolToObject(al, "builds", o->allow_builds);
    cJSON_AddBoolToObject(al, "partial", o->partial);
}

int mg_merge(const char *const *inputs, int n, const mg_opts *o, rm_model *out, mg_info *info, char *err,
             size_t errlen) {
    memset(out, 0, sizeof(*out));
    mg_ctx c = {0};
    cJSON *doc = NULL;
    mg_runref *refs = NULL;
    int rc = -1;
    if (n < 1) {
        snprintf(err, errlen, "no results directories given");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (mg_expand(&c, inputs[i])) goto oom;
    if (c.e.n) goto fail;
    mg_types(&c);
    if (!c.types) goto oom;
    for (int i = 1; i < c.n; i++) {
        if (!o->allow_scenarios) mg_check_scenario(&c, &c.in[0], &c.in[i]);
        if (!o->allow_builds) mg_check_build(&c, &c.in[0], &c.in[i]);
    }
    if (c.e.n) goto fail;
    mg_check_plan(&c, o);
    if (c.e.n) goto fail;

    cJSON *vars = mg_variants(&c);
    if (!vars) goto oom;
    int nr = 0;
    if (mg_collect_runs(&c, vars, &refs, &nr)) {
        cJSON_Delete(vars);
        goto oom;
    }
    if (c.e.n) {
        cJSON_Delete(vars);
        goto fail;
    }

    /* the head: what comes before the records in results.json */
    const cJSON *first = c.in[0].root;
    const char *status = "complete";
    for (int i = 0; i < c.n; i++) {
        const char *st = c.in[i].model.status;
        if (st[0] && strcmp(st, "complete")) status = st;
    }
    if (!(doc = rm_head_open(status))) {
        cJSON_Delete(vars);
        goto oom;
    }
    cJSON_AddItemToObject(doc, "environment", cJSON_Duplicate(rm_json_get(first, "environment"), 1));
    cJSON_AddItemToObject(doc, "scenario", cJSON_Duplicate(rm_json_get(first, "scenario"), 1));
    cJSON_AddItemToObject(doc, "variants", vars);
    mg_add_machines(&c, doc);
    mg_add_merged(&c, doc, o);

    /* the records, each with its shard, machine and type, into the merged model */
    for (int i = 0; i < nr; i++) {
        cJSON *r = cJSON_Duplicate(refs[i].run, 1);
        if (!r) goto oom;
        cJSON_ReplaceItemInObjectCaseSensitive(r, "variant", cJSON_CreateNumber(refs[i].variant));
        cJSON_AddNumberToObject(r, "shard", c.in[refs[i].in].shard);
        cJSON_AddNumberToObject(r, "machine", refs[i].in);
        cJSON_AddNumberToObject(r, "machine_type", c.in[refs[i].in].type);
        if (rm_append(out, r, NULL, NULL, 0)) goto oom;
    }
    if (mg_summaries(&c, vars, out)) goto oom;
    char e2[256];
    if (rm_read_head(out, doc, e2, sizeof(e2))) goto oom;
    out->head = doc;
    doc = NULL;
    *info = (mg_info){.inputs = c.n, .shards = c.in[0].count, .machine_types = c.nt};
    rc = 0;
    goto done;
oom:
    mg_err(&c.e, "out of memory");
fail:
    snprintf(err, errlen, "%s", c.e.buf ? c.e.buf : "out of memory");
    rm_free(out);
done:
    free(refs);
    cJSON_Delete(doc);
    mg_ctx_free(&c);
    return rc;
}

/* ---- files ---- */

int mg_write(rm_model *m, const char *dir, char *err, size_t errlen) {
    if (ut_mkdirs(dir)) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (rm_write(m, m->head, dir, err, errlen)) return -1;
    /* results.csv: bench run's columns, and the machine type last */
    size_t len = 0;
    char *csv = rm_csv(m, &len), path[PATH_MAX];
    if (!csv) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(path, sizeof(path), "%s/results.csv", dir);
    int rc = rs_write_atomic(path, csv, len, err, errlen);
    free(csv);
    return rc;
}
