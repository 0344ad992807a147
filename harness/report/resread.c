/* Reading results.json back into per-variant series of raw values. */
#include "harness/report/resread.h"
#include "util/ut_fs.h"
#include "util/ut_vec.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RR_MAX_FILE (1 << 30)  /* bytes read from one file, at most (docs/reliability.md) */

char *rr_slurp(const char *path, size_t *len, char *err, size_t errlen) {
    /* results.json of the largest runs are tens of MB; past this it is not one (/dev/zero, a model) */
    char *buf = ut_slurp(path, RR_MAX_FILE, len, err, errlen);
    if (!buf && errno == EFBIG) snprintf(err, errlen, "%s: larger than %d MiB: not a results file", path, RR_MAX_FILE >> 20);
    return buf;
}

static const char *rr_str(const cJSON *o, const char *k) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(s) ? s->valuestring : NULL;
}

static rr_series *rr_series_get(rr_variant *v, const char *name) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->m[i].name, name)) return &v->m[i];
    if (UT_VEC_RESERVE(v->m, v->cap, v->n + 1)) return NULL;
    rr_series *s = &v->m[v->n];
    *s = (rr_series){.name = strdup(name), .unit = strdup("")};
    if (!s->name || !s->unit) {
        free(s->name);
        free(s->unit);
        return NULL;
    }
    v->n++;
    return s;
}

static int rr_push(rr_series *s, double x) {
    if (UT_VEC_RESERVE(s->v, s->cap, s->n + 1)) return -1;
    s->v[s->n++] = x;
    return 0;
}

/* Adds every numeric member of a metrics object to the variant's series. */
static int rr_add_metrics(rr_variant *v, const cJSON *metrics) {
    const cJSON *m;
    cJSON_ArrayForEach(m, metrics) {
        if (!cJSON_IsNumber(m) || !m->string) continue;
        rr_series *s = rr_series_get(v, m->string);
        if (!s || rr_push(s, m->valuedouble)) return -1;
    }
    return 0;
}

void rr_free(rr_doc *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        for (int j = 0; j < d->v[i].n; j++) {
            free(d->v[i].m[j].name);
            free(d->v[i].m[j].unit);
            free(d->v[i].m[j].v);
        }
        free(d->v[i].m);
        free(d->v[i].owned);
    }
    free(d->v);
    cJSON_Delete(d->root);
    memset(d, 0, sizeof(*d));
}

/* 1 when a run or summary entry is of machine type t (-1: any). */
static int rr_type_is(const cJSON *o, int t) {
    if (t < 0) return 1;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "machine_type");
    return cJSON_IsNumber(x) && x->valueint == t;
}

/* The metric's declared class, better direction and tolerance (summary.metrics.<name>), where
 * the file has them; a file written before declarations has none (s->declared stays 0). */
static int rr_read_decl(const cJSON *mo, rr_series *s, const char *file, const char *key, char *err, size_t errlen) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(mo, "class");
    if (!c) return 0;
    int cls = cJSON_IsString(c) ? mc_class_parse(c->valuestring) : -1;
    if (cls < 0) {
        snprintf(err, errlen, "%s: summary of %s: metrics.%s.class: expected exact, count, bytes, time or info", file,
                 key, s->name);
        return -1;
    }
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(mo, "better");
    int better = 0;
    if (bt && (!cJSON_IsString(bt) || mc_better_parse(bt->valuestring, &better))) {
        snprintf(err, errlen, "%s: summary of %s: metrics.%s.better: expected higher, lower or none", file, key, s->name);
        return -1;
    }
    s->decl = mc_declare((mc_class)cls, better);
    const cJSON *tol = cJSON_GetObjectItemCaseSensitive(mo, "tolerance");
    if (tol) {
        const cJSON *rel = cJSON_GetArrayItem(tol, 0), *abs_ = cJSON_GetArrayItem(tol, 1);
        if (!cJSON_IsArray(tol) || cJSON_GetArraySize(tol) != 2 || !cJSON_IsNumber(rel) || !cJSON_IsNumber(abs_) ||
            rel->valuedouble < 0 || abs_->valuedouble < 0) {
            snprintf(err, errlen, "%s: summary of %s: metrics.%s.tolerance: expected [relative, absolute], both >= 0",
                     file, key, s->name);
            return -1;
        }
        s->decl.tol_rel = rel->valuedouble;
        s->decl.tol_abs = abs_->valuedouble;
    }
    s->declared = 1;
    return 0;
}

int rr_load(const char *path, rr_doc *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    char file[4200];
    struct stat st;
    if (stat(path, &st)) {
        snprintf(err, errlen, "%s: %s (expected a results directory or its results.json)", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(out->dir, sizeof(out->dir), "%s", path);
        snprintf(file, sizeof(file), "%s/results.json", path);
    } else {
        snprintf(file, sizeof(file), "%s", path);
        snprintf(out->dir, sizeof(out->dir), "%s", path);
        char *slash = strrchr(out->dir, '/');
        if (slash) *slash = 0;
        else snprintf(out->dir, sizeof(out->dir), ".");
    }
    snprintf(out->file, sizeof(out->file), "%s", file);
    char *text = rr_slurp(file, NULL, err, errlen);
    if (!text) return -1;
    out->root = cJSON_Parse(text);
    free(text);
    if (!out->root) {
        snprintf(err, errlen, "%s: not valid JSON", file);
        return -1;
    }
    const char *schema = rr_str(out->root, "schema");
    if (!schema || strncmp(schema, "bench-results/", 14)) {
        snprintf(err, errlen, "%s: .schema: expected \"bench-results/N\", found %s", file, schema ? schema : "none");
        goto err;
    }
    const cJSON *scen = cJSON_GetObjectItemCaseSensitive(out->root, "scenario");
    out->scenario = rr_str(scen, "name");
    if (!out->scenario) {
        snprintf(err, errlen, "%s: .scenario.name: expected a string", file);
        goto err;
    }
    const cJSON *git = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(out->root, "environment"), "git");
    out->sha = rr_str(git, "sha");
    if (!out->sha) out->sha = "";
    out->dirty = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(git, "dirty"));
    out->written = rr_str(out->root, "written");
    if (!out->written) out->written = "";

    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(out->root, "variants");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(out->root, "runs");
    const cJSON *sums = cJSON_GetObjectItemCaseSensitive(out->root, "summary");
    if (!cJSON_IsArray(vars) || !cJSON_IsArray(runs) || !cJSON_IsArray(sums)) {
        snprintf(err, errlen, "%s: expected arrays .variants, .runs and .summary", file);
        goto err;
    }
    /* a merge of several machine types: one variant per scenario variant and type */
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(out->root, "machine_types");
    int nt = cJSON_GetArraySize(types) > 1 ? cJSON_GetArraySize(types) : 0;
    int nv = cJSON_GetArraySize(vars) * (nt ? nt : 1);
    out->v = calloc((size_t)(nv ? nv : 1), sizeof(*out->v));
    if (!out->v) {
        snprintf(err, errlen, "%s: out of memory", file);
        goto err;
    }
    const cJSON *var;
    int vpos = 0;
    cJSON_ArrayForEach(var, vars) for (int t = nt ? 0 : -1; t < nt; t++) {
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(var, "index");
        const char *key = rr_str(var, "key"), *label = rr_str(var, "label");
        if (!cJSON_IsNumber(idx) || !key || !label) {
            snprintf(err, errlen, "%s: .variants[%d]: expected index, key and label", file, vpos);
            goto err;
        }
        if (t <= 0) vpos++;
        const cJSON *sum = NULL, *s;
        cJSON_ArrayForEach(s, sums) {
            const cJSON *si = cJSON_GetObjectItemCaseSensitive(s, "variant");
            if (cJSON_IsNumber(si) && si->valueint == idx->valueint && rr_type_is(s, t)) sum = s;
        }
        rr_variant *v = &out->v[out->n];
        *v = (rr_variant){.index = idx->valueint, .key = key, .label = label, .summary = sum, .machine_type = t};
        if (t >= 0) {
            const char *tl = rr_str(cJSON_GetArrayItem(types, t), "label");
            size_t kl = strlen(key) + 1;
            size_t need = kl + strlen(",machine=") + strlen(tl ? tl : "") + 1 + strlen(label) + 3 + strlen(tl ? tl : "") + 1;
            if (!(v->owned = malloc(need))) goto oom;
            int n1 = snprintf(v->owned, need, "%s,machine=%s", key, tl ? tl : "");
            snprintf(v->owned + n1 + 1, need - (size_t)n1 - 1, "%s @ %s", label, tl ? tl : "");
            v->key = v->owned;
            v->label = v->owned + n1 + 1;
        }
        const cJSON *r;
        cJSON_ArrayForEach(r, runs) {
            const cJSON *rv = cJSON_GetObjectItemCaseSensitive(r, "variant");
            if (!cJSON_IsNumber(rv) || rv->valueint != v->index || !rr_type_is(r, t)) continue;
            if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "counted"))) continue;
            if (rr_add_metrics(v, cJSON_GetObjectItemCaseSensitive(r, "metrics"))) goto oom;
            const cJSON *p;
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(r, "processes"))
                if (rr_add_metrics(v, cJSON_GetObjectItemCaseSensitive(p, "metrics"))) goto oom;
        }
        if (!sum && !v->n) { /* not selected in this run, or never on this machine type */
            free(v->owned);
            v->owned = NULL;
            continue;
        }
        const cJSON *sm = cJSON_GetObjectItemCaseSensitive(sum, "metrics");
        for (int i = 0; i < v->n; i++) {
            const cJSON *mo = cJSON_GetObjectItemCaseSensitive(sm, v->m[i].name);
            const char *unit = rr_str(mo, "unit");
            if (!unit) continue;
            char *u = strdup(unit);
            if (!u) goto oom;
            free(v->m[i].unit);
            v->m[i].unit = u;
            if (rr_read_decl(mo, &v->m[i], file, v->key, err, errlen)) {
                out->n++; /* the half-built variant is freed too */
                goto err;
            }
        }
        out->n++;
    }
    return 0;
oom:
    out->n++; /* the half-built variant is freed too */
    snprintf(err, errlen, "%s: out of memory", file);
err:
    rr_free(out);
    return -1;
}

const rr_series *rr_find(const rr_variant *v, const char *metric) {
    for (int i = 0; v && i < v->n; i++)
        if (!strcmp(v->m[i].name, metric)) return &v->m[i];
    return NULL;
}

const rr_variant *rr_find_variant(const rr_doc *d, const char *key) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->v[i].key, key)) return &d->v[i];
    return NULL;
}

const cJSON *rr_summary_metric(const rr_variant *v, const char *metric) {
    if (!v || !v->summary) return NULL;
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v->summary, "metrics"), metric);
}

double rr_summary_num(const rr_variant *v, const char *metric, const char *field) {
    const cJSON *m = rr_summary_metric(v, metric);
    if (!m) return NAN;
    if (!strcmp(field, "ci_lo") || !strcmp(field, "ci_hi")) {
        const cJSON *ci = cJSON_GetObjectItemCaseSensitive(m, "ci95");
        const cJSON *x = cJSON_GetArrayItem(ci, field[3] == 'l' ? 0 : 1);
        return cJSON_IsNumber(x) ? x->valuedouble : NAN;
    }
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(m, field);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

int rr_counted_runs(const rr_doc *d, const rr_variant *v, const cJSON **out, int max) {
    int n = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d->root, "runs")) {
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(r, "variant");
        if (!cJSON_IsNumber(rv) || rv->valueint != v->index || !rr_type_is(r, v->machine_type)) continue;
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "counted"))) continue;
        if (n < max) out[n] = r;
        n++;
    }
    return n < max ? n : max;
}
