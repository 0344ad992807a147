/* Reading results.json back into the results model (rmodel.h): the one walk of the schema. */
#include "harness/report/rmodel.h"
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

/* The records, each by the one reader of a record (rm_record). */
static int rr_records(rm_model *d, const cJSON *runs) {
    int n = cJSON_GetArraySize(runs);
    d->runs = calloc((size_t)(n ? n : 1), sizeof(*d->runs));
    if (!d->runs) return -1;
    const cJSON *r;
    cJSON_ArrayForEach(r, runs) if (rm_record(r, &d->runs[d->n_runs++])) return -1;
    return 0;
}

/* ---- the summaries ---- */

/* The metric's declared class, better direction and tolerance (summary.metrics.<name>), where
 * the file has them; a file written before declarations has none (declared stays 0). */
static int rr_read_decl(const cJSON *mo, rm_metric *s, const char *file, const char *key, char *err, size_t errlen) {
    const cJSON *c = rm_json_get(mo, "class");
    if (!c) return 0;
    int cls = cJSON_IsString(c) ? mc_class_parse(c->valuestring) : -1;
    if (cls < 0) {
        snprintf(err, errlen, "%s: summary of %s: metrics.%s.class: expected exact, count, bytes, time or info", file,
                 key, s->name);
        return -1;
    }
    const cJSON *bt = rm_json_get(mo, "better");
    int better = 0;
    if (bt && (!cJSON_IsString(bt) || mc_better_parse(bt->valuestring, &better))) {
        snprintf(err, errlen, "%s: summary of %s: metrics.%s.better: expected higher, lower or none", file, key, s->name);
        return -1;
    }
    s->decl = mc_declare((mc_class)cls, better);
    const cJSON *tol = rm_json_get(mo, "tolerance");
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

/* One summary entry's figures into its metrics: unit, class, statistics. A metric the summary
 * has and no counted run had (callgrind's instructions, accuracy) is added with no values. */
static int rr_summary(rm_variant *v, const cJSON *sum, const char *file, char *err, size_t errlen) {
    v->counted = rm_json_int(sum, "repetitions_counted", 0);
    v->failed = rm_json_int(sum, "repetitions_failed", 0);
    v->invalid = rm_json_int(sum, "repetitions_invalid", 0);
    const cJSON *mo;
    cJSON_ArrayForEach(mo, rm_json_get(sum, "metrics")) {
        if (!mo->string) continue;
        rm_metric *x = (rm_metric *)rr_summary_metric(v, mo->string);
        for (int i = 0; !x && i < v->n; i++)
            if (!strcmp(v->m[i].name, mo->string)) x = &v->m[i];
        if (!x) {
            if (UT_VEC_RESERVE(v->m, v->cap, v->n + 1)) goto oom;
            x = &v->m[v->n];
            *x = (rm_metric){.name = strdup(mo->string), .unit = strdup("")};
            v->n++;
            if (!x->name || !x->unit) goto oom;
        }
        const char *unit = rm_json_str(mo, "unit");
        if (unit) {
            char *u = strdup(unit);
            if (!u) goto oom;
            free(x->unit);
            x->unit = u;
        }
        if (rr_read_decl(mo, x, file, v->key, err, errlen)) return -1;
        const cJSON *ci = rm_json_get(mo, "ci95"), *lo = cJSON_GetArrayItem(ci, 0), *hi = cJSON_GetArrayItem(ci, 1);
        x->st = (st_summary){.n = rm_json_int(mo, "n", 0), .median = rm_json_num(mo, "median"), .mean = rm_json_num(mo, "mean"),
                             .stddev = rm_json_num(mo, "stddev"), .min = rm_json_num(mo, "min"), .max = rm_json_num(mo, "max"),
                             .ci_lo = cJSON_IsNumber(lo) ? lo->valuedouble : NAN,
                             .ci_hi = cJSON_IsNumber(hi) ? hi->valuedouble : NAN,
                             .n_outliers = cJSON_GetArraySize(rm_json_get(mo, "outliers"))};
        x->summarized = 1;
    }
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", file);
    return -1;
}

/* 1 when a summary entry is of machine type t (-1: any). */
static int rr_type_is(const cJSON *o, int t) { return t < 0 || rm_json_int(o, "machine_type", -1) == t; }

/* The key and label of variant var (of machine type t, whose label is tl, in a merge of types). */
static int rr_names(rm_variant *v, const char *key, const char *label, int t, const char *tl) {
    if (t < 0) {
        v->key = strdup(key);
        v->label = strdup(label);
    } else {
        size_t nk = strlen(key) + strlen(tl) + 10, nl = strlen(label) + strlen(tl) + 4;
        if ((v->key = malloc(nk))) snprintf(v->key, nk, "%s,machine=%s", key, tl);
        if ((v->label = malloc(nl))) snprintf(v->label, nl, "%s @ %s", label, tl);
    }
    return v->key && v->label ? 0 : -1;
}

/* One variant (of machine type t): the raw values of its counted records, then its summary. */
static int rr_one_variant(rm_model *d, const cJSON *var, const cJSON *sums, int t, const cJSON *types, int pos, char *err,
                      size_t errlen) {
    const cJSON *idx = rm_json_get(var, "index");
    const char *key = rm_json_str(var, "key"), *label = rm_json_str(var, "label");
    if (!cJSON_IsNumber(idx) || !key || !label) {
        snprintf(err, errlen, "%s: .variants[%d]: expected index, key and label", d->file, pos);
        return -1;
    }
    const cJSON *sum = NULL, *s;
    cJSON_ArrayForEach(s, sums)
        if (rm_json_int(s, "variant", -1) == idx->valueint && rr_type_is(s, t)) sum = s;
    rm_variant *v = &d->v[d->n++];
    *v = (rm_variant){.variant = idx->valueint, .machine_type = t};
    const char *tl = t >= 0 ? rm_json_str(cJSON_GetArrayItem(types, t), "label") : NULL;
    if (rr_names(v, key, label, t, tl ? tl : "")) goto oom;
    for (int ri = 0; ri < d->n_runs; ri++) {
        const rm_run *r = &d->runs[ri];
        if (r->variant != v->variant || (t >= 0 && r->machine_type != t)) continue;
        v->warmups += r->warmup;
        if (!r->counted) continue;
        for (int k = 0; k < r->metrics.n; k++)
            if (rm_add_value(v, r->metrics.name[k], "", MT_INFO, r->metrics.v[k], ri, -1)) goto oom;
        for (int pi = 0; pi < r->nproc; pi++)
            for (int k = 0; k < r->procs[pi].metrics.n; k++)
                if (rm_add_value(v, r->procs[pi].metrics.name[k], "", MT_INFO, r->procs[pi].metrics.v[k], ri, pi)) goto oom;
    }
    for (int k = 0; k < v->n; k++) v->m[k].declared = 0; /* until the summary says */
    if (!sum && !v->n) { /* not selected in this run, or never on this machine type */
        free(v->key);
        free(v->label);
        d->n--;
        return 0;
    }
    return sum ? rr_summary(v, sum, d->file, err, errlen) : 0;
oom:
    snprintf(err, errlen, "%s: out of memory", d->file);
    return -1;
}

/* DIR/results.json, or the file itself, into d->file and d->dir; 0, or -1 with the error. */
static int rr_paths(const char *path, rm_model *d, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st)) {
        snprintf(err, errlen, "%s: %s (expected a results directory or its results.json)", path, strerror(errno));
        return -1;
    }
    snprintf(d->dir, sizeof(d->dir), "%s", path);
    if (S_ISDIR(st.st_mode)) {
        snprintf(d->file, sizeof(d->file), "%s/results.json", path);
        return 0;
    }
    snprintf(d->file, sizeof(d->file), "%s", path);
    char *slash = strrchr(d->dir, '/');
    if (slash) *slash = 0;
    else snprintf(d->dir, sizeof(d->dir), ".");
    return 0;
}

/* The labels of a merge's machine types (machine_types[].label). */
static int rr_types(rm_model *d, const cJSON *types) {
    int nt = cJSON_GetArraySize(types);
    if (!nt) return 0;
    if (!(d->types = calloc((size_t)nt, sizeof(*d->types)))) return -1;
    const cJSON *t;
    cJSON_ArrayForEach(t, types) {
        const char *l = rm_json_str(t, "label");
        if (!(d->types[d->n_types++] = strdup(l ? l : ""))) return -1;
    }
    return 0;
}

int rr_read(rm_model *out, char *err, size_t errlen) {
    if (rm_read_head(out, out->root, err, errlen)) return -1;
    const cJSON *vars = rm_json_get(out->root, "variants"), *runs = rm_json_get(out->root, "runs"), *sums = rm_json_get(out->root, "summary");
    if (!cJSON_IsArray(vars) || !cJSON_IsArray(runs) || !cJSON_IsArray(sums)) {
        snprintf(err, errlen, "%s: expected arrays .variants, .runs and .summary", out->file);
        return -1;
    }
    /* a merge of several machine types: one variant per scenario variant and type */
    const cJSON *types = rm_json_get(out->root, "machine_types");
    int nt = cJSON_GetArraySize(types) > 1 ? cJSON_GetArraySize(types) : 0;
    int nv = cJSON_GetArraySize(vars) * (nt ? nt : 1);
    out->v = calloc((size_t)(nv ? nv : 1), sizeof(*out->v));
    if (rr_records(out, runs) || rr_types(out, types) || !out->v) {
        snprintf(err, errlen, "%s: out of memory", out->file);
        return -1;
    }
    out->cap = nv;
    const cJSON *var;
    int pos = 0;
    cJSON_ArrayForEach(var, vars) {
        for (int t = nt ? 0 : -1; t < nt; t++)
            if (rr_one_variant(out, var, sums, t, types, pos, err, errlen)) return -1;
        pos++;
    }
    return 0;
}

int rr_load(const char *path, rm_model *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (rr_paths(path, out, err, errlen)) return -1;
    char *text = rr_slurp(out->file, NULL, err, errlen);
    if (!text) return -1;
    out->root = cJSON_Parse(text);
    free(text);
    if (!out->root) {
        snprintf(err, errlen, "%s: not valid JSON", out->file);
        goto err;
    }
    if (rr_read(out, err, errlen)) goto err;
    return 0;
err:
    rm_free(out);
    return -1;
}
