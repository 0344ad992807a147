/* The results model: records appended once, summaries made again, results.json written
 * atomically from the parts (rmodel.h). The reading half is resread.c. */
#include "harness/report/rmodel.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "harness/report/escape.h"
#include "util/ut_vec.h"

/* ---- atomic files ---- */

/* Test hook (BENCH_TEST_HOOKS=1 BENCH_TEST_ENOSPC_AFTER=N): after N files written,
 * every write fails with ENOSPC, as when the disk fills up during a run. */
static int rm_disk_full(void) {
    static long left = -2;  /* -2: not read yet; -1: no hook */
    if (left == -2) {
        const char *hooks = getenv("BENCH_TEST_HOOKS"), *n = getenv("BENCH_TEST_ENOSPC_AFTER");
        char *end = NULL;
        left = hooks && !strcmp(hooks, "1") && n && *n ? strtol(n, &end, 10) : -1;
        if (end && *end) left = -1;
    }
    if (left < 0) return 0;
    if (left == 0) return 1;
    left--;
    return 0;
}

static int rm_cannot_write(const char *path, const char *tmp, int fd, int e, char *err, size_t errlen) {
    if (fd >= 0) close(fd);
    unlink(tmp);
    return bench_errf(err, errlen, "%s: cannot write: %s; nothing was replaced (a previous %s, if any, is as it was)", path,
                      strerror(e), path);
}

int rs_write_atomic_v(const char *path, const char *const *data, const size_t *len, int n, char *err, size_t errlen) {
    int full = rm_disk_full();
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return bench_errf(err, errlen, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return bench_errf(err, errlen, "%s: %s", tmp, strerror(errno));
    for (int i = 0; i < n; i++) {
        size_t off = 0;
        while (off < len[i]) {
            ssize_t w = full ? (errno = ENOSPC, -1) : write(fd, data[i] + off, len[i] - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return rm_cannot_write(path, tmp, fd, w < 0 ? errno : EIO, err, errlen);
            off += (size_t)w;
        }
    }
    /* the data reaches the disk before the name does: a crash leaves the old file or the new one */
    if (fsync(fd)) return rm_cannot_write(path, tmp, fd, errno, err, errlen);
    if (close(fd)) return rm_cannot_write(path, tmp, -1, errno, err, errlen);
    if (rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return bench_errf(err, errlen, "%s: rename: %s", path, strerror(e));
    }
    return 0;
}

int rs_write_atomic(const char *path, const char *data, size_t len, char *err, size_t errlen) {
    return rs_write_atomic_v(path, &data, &len, 1, err, errlen);
}

/* ---- the model ---- */

static void rm_metric_free(rm_metric *x) {
    free(x->name);
    free(x->unit);
    free(x->v);
    free(x->run);
    free(x->proc);
    free(x->outlier);
}

void rm_variant_clear(rm_variant *v) {
    for (int k = 0; k < v->n; k++) rm_metric_free(&v->m[k]);
    free(v->m);
    free(v->key);
    free(v->label);
    memset(v, 0, sizeof(*v));
}

static void rm_variants_free(rm_model *m) {
    for (int i = 0; i < m->n; i++) rm_variant_clear(&m->v[i]);
    free(m->v);
    m->v = NULL;
    m->n = m->cap = 0;
}

static void rm_cols_free(rm_cols *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->c[i].name);
        free(c->c[i].v);
    }
    free(c->c);
    memset(c, 0, sizeof(*c));
}

static void rm_proc_free(rm_proc *p) {
    free(p->reason);
    mt_bag_free(&p->metrics);
    mt_bag_free(&p->counters);
    rm_cols_free(&p->timeline);
    rm_cols_free(&p->serve_kv);
    rm_cols_free(&p->serve_req);
    rm_cols_free(&p->kv);
    rm_cols_free(&p->server);
    free(p->tokens.name);
    free(p->tokens.v);
    for (int i = 0; i < p->nph; i++) {
        for (int k = 0; k < p->ph[i].n; k++) free(p->ph[i].r[k].name);
        free(p->ph[i].r);
        free(p->ph[i].name);
    }
    free(p->ph);
}

void rm_run_free(rm_run *r) {
    for (int i = 0; i < r->nproc; i++) rm_proc_free(&r->procs[i]);
    free(r->procs);
    mt_bag_free(&r->metrics);
    rm_cols_free(&r->energy);
    free(r->energy_why);
    free(r->status);
    free(r->invalid_reason);
    free(r->text);
    memset(r, 0, sizeof(*r));
}

void rm_free(rm_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_runs; i++) rm_run_free(&m->runs[i]);
    free(m->runs);
    rm_variants_free(m);
    free(m->scenario);
    free(m->status);
    free(m->written);
    free(m->sha);
    free(m->only);
    for (int i = 0; i < m->n_types; i++) free(m->types[i]);
    free(m->types);
    cJSON_Delete(m->root);
    cJSON_Delete(m->head);
    memset(m, 0, sizeof(*m));
}

int rm_append(rm_model *m, cJSON *rec, mt_bag *run, mt_bag *procs, int nproc) {
    rm_run t = {0};
    char *text = rec ? cJSON_Print(rec) : NULL; /* formatted, as the rest of the file */
    cJSON_Delete(rec);
    /* The run is read from the text the file gets, not from rec: cJSON prints a number in 15
     * digits where they come within an ulp of it, so a time such as 4.7925249999... ms read
     * from rec and from the file could differ in its last bit, and the figure bench run draws
     * from memory from the one bench plot draws from the file (test_rmodel saw it: 0.00479252
     * against 0.00479253). */
    cJSON *back = text ? cJSON_Parse(text) : NULL;
    int bad = !back || rm_record(back, &t) || (run && t.nproc != nproc);
    cJSON_Delete(back);
    if (bad || UT_VEC_RESERVE(m->runs, m->cap_runs, m->n_runs + 1)) {
        free(text);
        rm_run_free(&t);
        if (run) mt_bag_free(run);
        for (int i = 0; run && i < nproc; i++) mt_bag_free(&procs[i]);
        return -1;
    }
    /* the record is gone: nothing may point into it */
    for (int i = 0; i < t.nproc; i++) t.procs[i].raw = NULL;
    t.raw = NULL;
    t.text = text;
    if (run) {
        /* the metrics as they were made, with their units and classes */
        mt_bag_free(&t.metrics);
        t.metrics = *run;
        memset(run, 0, sizeof(*run));
        for (int i = 0; i < nproc; i++) {
            mt_bag_free(&t.procs[i].metrics);
            t.procs[i].metrics = procs[i];
            memset(&procs[i], 0, sizeof(procs[i]));
        }
    }
    m->runs[m->n_runs++] = t;
    return 0;
}

/* ---- records: the one reader of runs[i] ---- */

const cJSON *rm_json_get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

const char *rm_json_str(const cJSON *o, const char *k) {
    const cJSON *s = rm_json_get(o, k);
    return cJSON_IsString(s) ? s->valuestring : NULL;
}

int rm_json_int(const cJSON *o, const char *k, int dflt) {
    const cJSON *x = rm_json_get(o, k);
    return cJSON_IsNumber(x) ? x->valueint : dflt;
}

double rm_json_num(const cJSON *o, const char *k) {
    const cJSON *x = rm_json_get(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static char *rm_dup(const char *s) { return strdup(s ? s : ""); }

/* Every numeric member of a metrics object, in its order (units come from the summary). */
static void rm_bag_of(const cJSON *metrics, mt_bag *b) {
    const cJSON *x;
    cJSON_ArrayForEach(x, metrics)
        if (cJSON_IsNumber(x) && x->string) mt_add(b, x->string, "", MT_INFO, x->valuedouble);
}

static int rm_col_read(const cJSON *arr, const char *name, rm_col *c) {
    int n = cJSON_GetArraySize(arr), k = 0;
    *c = (rm_col){.name = strdup(name), .v = malloc(sizeof(double) * (size_t)(n ? n : 1))};
    if (!c->name || !c->v) return -1;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) c->v[k++] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    c->n = k;
    return 0;
}

/* Every array member of an object, as a column. */
static int rm_cols_read(const cJSON *o, rm_cols *out) {
    const cJSON *a;
    int n = 0;
    cJSON_ArrayForEach(a, o) n += cJSON_IsArray(a) && a->string;
    if (!n) return 0;
    if (!(out->c = calloc((size_t)n, sizeof(*out->c)))) return -1;
    cJSON_ArrayForEach(a, o)
        if (cJSON_IsArray(a) && a->string && rm_col_read(a, a->string, &out->c[out->n++])) return -1;
    return 0;
}

static int rm_phases_read(const cJSON *phases, rm_proc *p) {
    int n = cJSON_GetArraySize(phases);
    if (!cJSON_IsObject(phases) || !n) return 0;
    if (!(p->ph = calloc((size_t)n, sizeof(*p->ph)))) return -1;
    const cJSON *one;
    cJSON_ArrayForEach(one, phases) {
        if (!one->string) continue;
        rm_phase *ph = &p->ph[p->nph++];
        const cJSON *regs = rm_json_get(one, "regions_kib"), *r;
        int nr = cJSON_GetArraySize(regs);
        *ph = (rm_phase){.name = strdup(one->string), .t_ms = rm_json_num(one, "t_ms"),
                         .r = calloc((size_t)(nr ? nr : 1), sizeof(rm_region))};
        if (!ph->name || !ph->r) return -1;
        cJSON_ArrayForEach(r, regs) {
            if (!r->string) continue;
            rm_region *g = &ph->r[ph->n++];
            *g = (rm_region){.name = strdup(r->string), .size_kib = rm_json_num(r, "size"), .rss_kib = rm_json_num(r, "rss")};
            if (!g->name) return -1;
        }
    }
    return 0;
}

/* What the figures draw of one process: events, timeline, phases, tokens, counters, KV. */
static int rm_figures_read(const cJSON *p, rm_proc *q) {
    const cJSON *ev = rm_json_get(p, "events_ms"), *sv = rm_json_get(p, "serve"), *c;
    q->prompt_tokens = rm_json_num(p, "prompt_tokens");
    q->ev_load_end = rm_json_num(ev, "load_end");
    q->ev_prefill_end = rm_json_num(ev, "prefill_end");
    q->ev_decode_end = rm_json_num(ev, "decode_end");
    q->serve_start_ms = rm_json_num(sv, "start_ms");
    cJSON_ArrayForEach(c, rm_json_get(p, "counters")) {
        const char *name = rm_json_str(c, "name"), *unit = rm_json_str(c, "unit");
        if (name) mt_add(&q->counters, name, unit ? unit : "", MT_INFO, rm_json_num(c, "value"));
    }
    const cJSON *tok = rm_json_get(rm_json_get(p, "tokens"), "t_ms");
    if (cJSON_IsArray(tok) && rm_col_read(tok, "t_ms", &q->tokens)) return -1;
    if (rm_cols_read(rm_json_get(p, "timeline"), &q->timeline) || rm_cols_read(rm_json_get(sv, "kv_timeline"), &q->serve_kv) ||
        rm_cols_read(rm_json_get(sv, "requests"), &q->serve_req) || rm_cols_read(rm_json_get(p, "kv_timeline"), &q->kv) ||
        rm_cols_read(rm_json_get(rm_json_get(p, "server_metrics"), "timeline"), &q->server))
        return -1;
    return rm_phases_read(rm_json_get(p, "phases"), q);
}

static void rm_load_read(const cJSON *ml, rm_load *l) {
    *l = (rm_load){.known = cJSON_IsObject(ml)};
    if (!l->known) return;
    l->busy = cJSON_IsTrue(rm_json_get(ml, "busy"));
    l->cpus = rm_json_int(ml, "cpus", 0);
    l->others = rm_json_num(ml, "others_cpu");
    l->steal = rm_json_num(ml, "steal");
    double a = rm_json_num(ml, "load1_start"), b = rm_json_num(ml, "load1_end");
    l->load1 = isfinite(a) && isfinite(b) ? fmax(a, b) : isfinite(a) ? a : b;
}

int rm_record(const cJSON *r, rm_run *out) {
    const char *status = rm_json_str(r, "status");
    *out = (rm_run){.variant = rm_json_int(r, "variant", -1), .rep = rm_json_int(r, "repetition", -1),
                    .warmup = cJSON_IsTrue(rm_json_get(r, "warmup")), .valid = cJSON_IsTrue(rm_json_get(r, "valid")),
                    .counted = cJSON_IsTrue(rm_json_get(r, "counted")), .ok = status && !strcmp(status, "ok"),
                    .machine_type = rm_json_int(r, "machine_type", -1), .status = rm_dup(status),
                    .invalid_reason = rm_dup(rm_json_str(r, "invalid_reason")), .raw = r};
    rm_load_read(rm_json_get(r, "machine_load"), &out->load);
    rm_bag_of(rm_json_get(r, "metrics"), &out->metrics);
    const cJSON *en = rm_json_get(r, "energy");
    const char *en_why = cJSON_IsFalse(rm_json_get(en, "available")) ? rm_json_str(en, "why") : NULL;
    if (rm_cols_read(rm_json_get(en, "timeline"), &out->energy) || (en_why && !(out->energy_why = strdup(en_why))))
        return -1;
    const cJSON *ps = rm_json_get(r, "processes");
    int np = cJSON_IsArray(ps) ? cJSON_GetArraySize(ps) : 0;
    out->procs = calloc((size_t)(np ? np : 1), sizeof(*out->procs));
    if (!out->status || !out->invalid_reason || !out->procs) return -1;
    const cJSON *p;
    cJSON_ArrayForEach(p, ps) {
        rm_proc *q = &out->procs[out->nproc++];
        const char *pst = rm_json_str(p, "status");
        *q = (rm_proc){.ok = pst && !strcmp(pst, "ok"), .reason = rm_dup(rm_json_str(p, "reason")), .raw = p};
        if (!q->reason || rm_figures_read(p, q)) return -1;
        rm_bag_of(rm_json_get(p, "metrics"), &q->metrics);
    }
    return 0;
}

int rm_read_head(rm_model *d, const cJSON *head, char *err, size_t errlen) {
    const char *schema = rm_json_str(head, "schema");
    if (!schema || strncmp(schema, "bench-results/", 14)) {
        snprintf(err, errlen, "%s: .schema: expected \"bench-results/N\", found %s", d->file, schema ? schema : "none");
        return -1;
    }
    const cJSON *scen = rm_json_get(head, "scenario");
    const char *name = rm_json_str(scen, "name");
    if (!name) {
        snprintf(err, errlen, "%s: .scenario.name: expected a string", d->file);
        return -1;
    }
    const cJSON *git = rm_json_get(rm_json_get(head, "environment"), "git"), *ov = rm_json_get(scen, "overrides");
    const cJSON *as = rm_json_get(scen, "as_run");
    char *s[] = {rm_dup(name), rm_dup(rm_json_str(git, "sha")), rm_dup(rm_json_str(head, "written")), rm_dup(rm_json_str(head, "status")),
                 rm_dup(rm_json_str(ov, "only"))};
    char **to[] = {&d->scenario, &d->sha, &d->written, &d->status, &d->only};
    int oom = 0;
    for (int i = 0; i < 5; i++) oom |= !s[i];
    for (int i = 0; i < 5; i++) {
        if (oom) {
            free(s[i]);
            continue;
        }
        free(*to[i]);
        *to[i] = s[i];
    }
    if (oom) {
        snprintf(err, errlen, "%s: out of memory", d->file);
        return -1;
    }
    d->dirty = cJSON_IsTrue(rm_json_get(git, "dirty"));
    d->quick = cJSON_IsTrue(rm_json_get(ov, "quick"));
    d->warmup = rm_json_int(as, "warmup", 0);
    d->processes = rm_json_int(as, "processes", 1);
    return 0;
}

const rm_col *rm_col_of(const rm_cols *c, const char *name) {
    for (int i = 0; c && i < c->n; i++)
        if (!strcmp(c->c[i].name, name)) return &c->c[i];
    return NULL;
}

double rm_at(const rm_col *c, int k) { return c && k >= 0 && k < c->n ? c->v[k] : NAN; }

const rm_phase *rm_phase_of(const rm_proc *p, const char *name) {
    for (int i = 0; p && i < p->nph; i++)
        if (!strcmp(p->ph[i].name, name)) return &p->ph[i];
    return NULL;
}

const rm_region *rm_region_of(const rm_phase *ph, const char *name) {
    for (int i = 0; ph && i < ph->n; i++)
        if (!strcmp(ph->r[i].name, name)) return &ph->r[i];
    return NULL;
}

double rm_counter(const rm_proc *p, const char *name) {
    for (int i = 0; p && i < p->counters.n; i++)
        if (!strcmp(p->counters.name[i], name)) return p->counters.v[i];
    return NAN;
}

/* ---- summaries ---- */

rm_variant *rm_variant_of(rm_model *m, int variant) {
    for (int i = 0; i < m->n; i++)
        if (m->v[i].variant == variant) return &m->v[i];
    return NULL;
}

static rm_metric *rm_metric_get(rm_variant *v, const char *name, const char *unit, mc_decl decl) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->m[i].name, name)) return &v->m[i];
    if (UT_VEC_RESERVE(v->m, v->cap, v->n + 1)) return NULL;
    rm_metric *x = &v->m[v->n];
    *x = (rm_metric){.name = strdup(name), .unit = strdup(unit), .decl = decl, .declared = 1};
    if (!x->name || !x->unit) {
        rm_metric_free(x);
        return NULL;
    }
    v->n++;
    return x;
}

int rm_add_value(rm_variant *v, const char *name, const char *unit, mc_decl decl, double x, int run, int proc) {
    rm_metric *mm = rm_metric_get(v, name, unit, decl);
    if (!mm || ut_vec_reserve_par(&mm->cap, (size_t)mm->n + 1, 3, (void *[]){&mm->v, &mm->run, &mm->proc},
                                  (size_t[]){sizeof(*mm->v), sizeof(*mm->run), sizeof(*mm->proc)}))
        return -1;
    mm->v[mm->n] = x;
    mm->run[mm->n] = run;
    mm->proc[mm->n] = proc;
    mm->n++;
    return 0;
}

static int rm_add_bag(rm_variant *v, const mt_bag *b, int run, int proc) {
    for (int k = 0; k < b->n; k++)
        if (rm_add_value(v, b->name[k], b->unit[k], b->decl[k], b->v[k], run, proc)) return -1;
    return 0;
}

int rm_summarize_variant(const rm_model *m, rm_variant *v) {
    int found = 0;
    for (int ri = 0; ri < m->n_runs; ri++) {
        const rm_run *r = &m->runs[ri];
        if (r->variant != v->variant || (v->machine_type >= 0 && r->machine_type != v->machine_type)) continue;
        if (r->warmup) { v->warmups++; continue; }
        found++;
        if (!r->ok) { v->failed++; continue; }
        if (!r->valid) { v->invalid++; continue; }
        v->counted++;
        if (rm_add_bag(v, &r->metrics, ri, -1)) return -1;
        for (int pi = 0; pi < r->nproc; pi++)
            if (rm_add_bag(v, &r->procs[pi].metrics, ri, pi)) return -1;
    }
    return found;
}

int rm_summary_begin(rm_model *m, int n_variants, const int *selected, const char *const *keys,
                     const char *const *labels) {
    rm_variants_free(m);
    m->v = calloc((size_t)(n_variants > 0 ? n_variants : 1), sizeof(*m->v));
    if (!m->v) return -1;
    m->cap = n_variants;
    for (int vi = 0; vi < n_variants; vi++) {
        if (!selected[vi]) continue;
        rm_variant *v = &m->v[m->n++];
        *v = (rm_variant){.variant = vi, .key = strdup(keys[vi]), .label = strdup(labels[vi]), .machine_type = -1};
        if (!v->key || !v->label || rm_summarize_variant(m, v) < 0) return -1;
    }
    return 0;
}

int rm_copy_summary_metric(rm_variant *v, const rm_metric *src) {
    if (UT_VEC_RESERVE(v->m, v->cap, v->n + 1)) return -1;
    rm_metric *x = &v->m[v->n];
    *x = (rm_metric){.name = strdup(src->name), .unit = strdup(src->unit), .decl = src->decl, .declared = src->declared,
                     .summarized = src->summarized, .st = src->st};
    if (!x->name || !x->unit) {
        rm_metric_free(x);
        return -1;
    }
    v->n++;
    return 0;
}

void rm_summary_finish(rm_model *m) {
    for (int i = 0; i < m->n; i++)
        for (int k = 0; k < m->v[i].n; k++) {
            rm_metric *x = &m->v[i].m[k];
            if (!x->n) continue; /* a summary-only figure keeps its statistics */
            free(x->outlier);
            x->outlier = calloc((size_t)x->n, sizeof(int));
            x->summarized = !st_summarize(x->v, x->n, &x->st, x->outlier);
        }
}

static cJSON *rm_num_array(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static void rm_metric_json(cJSON *ms, const rm_metric *x) {
    cJSON *o = cJSON_AddObjectToObject(ms, x->name);
    cJSON_AddStringToObject(o, "unit", x->unit);
    /* how bench compare judges it (harness/report/mclass.h); a figure of a file older than the
     * declarations (merged) has none, and compare reads it by its name */
    if (x->declared) cJSON_AddStringToObject(o, "class", mc_class_name(x->decl.cls));
    if (x->declared) cJSON_AddStringToObject(o, "better", mc_better_name(x->decl.better));
    if (x->declared && (x->decl.tol_rel > 0 || x->decl.tol_abs > 0)) {
        double tol[2] = {x->decl.tol_rel, x->decl.tol_abs};
        cJSON_AddItemToObject(o, "tolerance", rm_num_array(tol, 2));
    }
    cJSON_AddNumberToObject(o, "n", x->st.n);
    cJSON_AddNumberToObject(o, "median", x->st.median);
    cJSON_AddNumberToObject(o, "mean", x->st.mean);
    cJSON_AddNumberToObject(o, "stddev", x->st.stddev);
    cJSON_AddNumberToObject(o, "min", x->st.min);
    cJSON_AddNumberToObject(o, "max", x->st.max);
    double ci[2] = {x->st.ci_lo, x->st.ci_hi};
    cJSON_AddItemToObject(o, "ci95", rm_num_array(ci, 2));
    cJSON *out = cJSON_AddArrayToObject(o, "outliers");
    for (int j = 0; x->outlier && j < x->n; j++) {
        if (!x->outlier[j]) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "run", x->run[j]);
        cJSON_AddNumberToObject(e, "process", x->proc[j]);
        cJSON_AddNumberToObject(e, "value", x->v[j]);
        cJSON_AddItemToArray(out, e);
    }
}

cJSON *rm_summary_json(const rm_model *m) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < m->n; i++) {
        const rm_variant *v = &m->v[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "variant", v->variant);
        cJSON_AddStringToObject(o, "key", v->key);
        cJSON_AddStringToObject(o, "label", v->label);
        if (v->machine_type >= 0) cJSON_AddNumberToObject(o, "machine_type", v->machine_type);
        cJSON_AddNumberToObject(o, "repetitions_counted", v->counted);
        cJSON_AddNumberToObject(o, "repetitions_failed", v->failed);
        cJSON_AddNumberToObject(o, "repetitions_invalid", v->invalid);
        cJSON *ms = cJSON_AddObjectToObject(o, "metrics");
        for (int k = 0; k < v->n; k++)
            if (v->m[k].summarized) rm_metric_json(ms, &v->m[k]);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

char *rm_csv(const rm_model *m, size_t *len) {
    char *csv = NULL;
    FILE *f = open_memstream(&csv, len);
    if (!f) return NULL;
    fprintf(f, "variant,label,key,metric,unit,n,median,mean,stddev,min,max,ci95_lo,ci95_hi,outliers%s\n",
            m->n_types ? ",machine_type" : "");
    for (int i = 0; i < m->n; i++) {
        const rm_variant *v = &m->v[i];
        for (int k = 0; k < v->n; k++) {
            const rm_metric *x = &v->m[k];
            if (!x->summarized) continue;
            /* labels, keys and machine types quoted (labels are anyone's, keys hold commas), any quote doubled */
            fprintf(f, "%d,", v->variant);
            es_csv(f, v->label, 1);
            fputc(',', f);
            es_csv(f, v->key, 1);
            fputc(',', f);
            es_csv(f, x->name, 0);
            fputc(',', f);
            es_csv(f, x->unit, 0);
            fprintf(f, ",%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d", x->st.n, x->st.median, x->st.mean, x->st.stddev,
                    x->st.min, x->st.max, x->st.ci_lo, x->st.ci_hi, x->st.n_outliers);
            if (m->n_types) {
                fputc(',', f);
                es_csv(f, v->machine_type >= 0 && v->machine_type < m->n_types ? m->types[v->machine_type] : "", 1);
            }
            fputc('\n', f);
        }
    }
    if (fclose(f)) {
        free(csv);
        return NULL;
    }
    return csv;
}

/* ---- results.json ---- */

cJSON *rm_head_open(const char *status) {
    cJSON *doc = cJSON_CreateObject();
    if (!doc) return NULL;
    cJSON_AddStringToObject(doc, "schema", RS_SCHEMA);
    cJSON_AddStringToObject(doc, "status", status);
    time_t now = time(NULL);
    struct tm tm;
    char ts[64];
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(doc, "written", ts);
    return doc;
}

static uint64_t rm_fnv(uint64_t h, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

/* FNV-1a of the document's parts less the value of its "written" time, the one field that
 * differs when an unchanged run is written again (a hash, not a copy: the parent's memory is
 * measured too). The records are never changed once appended: their count stands for them. */
/* What results.json would say, less the time it is written at: the head's members but
 * "written" (a copy without it: the field is left out as a value, not searched for in text),
 * the count of records (each written once, never changed) and the summary. 0 when out of memory
 * (then the file is written). */
static uint64_t rm_doc_hash(const cJSON *head, int n_runs, const char *summary) {
    cJSON *timeless = cJSON_Duplicate(head, 1);
    if (timeless) cJSON_DeleteItemFromObjectCaseSensitive(timeless, "written");
    char *text = timeless ? cJSON_PrintUnformatted(timeless) : NULL;
    cJSON_Delete(timeless);
    if (!text) return 0;
    uint64_t h = rm_fnv(1469598103934665603ull, text, strlen(text));
    free(text);
    h = rm_fnv(h, (const char *)&n_runs, sizeof(n_runs));
    h = rm_fnv(h, summary, strlen(summary));
    return h ? h : 1;
}

int rm_write(rm_model *m, const cJSON *head, const char *dir, char *err, size_t errlen) {
    cJSON *sj = rm_summary_json(m);
    char *htext = cJSON_Print(head), *stext = sj ? cJSON_Print(sj) : NULL;
    cJSON_Delete(sj);
    char *close = htext ? strrchr(htext, '}') : NULL;
    int n = 2 * m->n_runs + 4, rc = 0;
    const char **part = calloc((size_t)n, sizeof(*part));
    size_t *len = calloc((size_t)n, sizeof(*len));
    if (!close || !stext || !part || !len) {
        rc = bench_errf(err, errlen, "out of memory building results.json");
        goto out;
    }
    uint64_t h = rm_doc_hash(head, m->n_runs, stext);
    if (h && m->written_hash == h) goto out; /* results.json already says this */
    /* { head members , "runs": [ record, record ... ], "summary": [...] } */
    while (close > htext && (close[-1] == '\n' || close[-1] == '\t')) close--;
    int k = 0;
    part[k] = htext, len[k++] = (size_t)(close - htext);
    part[k] = ",\n\t\"runs\": [", len[k] = strlen(part[k]), k++;
    for (int i = 0; i < m->n_runs; i++) {
        if (i) part[k] = ",\n", len[k] = 2, k++;
        part[k] = m->runs[i].text, len[k] = strlen(part[k]), k++;
    }
    part[k] = "],\n\t\"summary\": ", len[k] = strlen(part[k]), k++;
    part[k] = stext, len[k] = strlen(stext), k++;
    part[k] = "\n}\n", len[k] = 3, k++;
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/results.json", dir) >= (int)sizeof(path)) {
        rc = bench_errf(err, errlen, "%s/results.json: path too long", dir);
        goto out;
    }
    rc = rs_write_atomic_v(path, part, len, k, err, errlen);
    if (!rc) {
        /* the head as written, kept (head may be the model's own already: bench merge) */
        cJSON *copy = head == m->head ? NULL : cJSON_Duplicate(head, 1);
        if (copy) {
            cJSON_Delete(m->head);
            m->head = copy;
        }
        char e2[256];
        rm_read_head(m, head, e2, sizeof(e2)); /* its fields, as a reader finds them */
        m->writes++;
        m->written_hash = h;
        m->written_runs = m->n_runs;
    }
out:
    free(part);
    free(len);
    free(htext);
    free(stext);
    return rc;
}

/* ---- reading the model ---- */

const cJSON *rm_head(const rm_model *m) { return m->head ? m->head : m->root; }

const char *rm_description(const rm_model *m) {
    const cJSON *aw = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rm_head(m), "scenario"), "as_written");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(aw, "description");
    return cJSON_IsString(d) && d->valuestring[0] ? d->valuestring : NULL;
}

char *rm_environment_text(const rm_model *m) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(rm_head(m), "environment");
    return e ? cJSON_Print(e) : NULL;
}

char *rm_scenario_text(const rm_model *m) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(rm_head(m), "scenario");
    return s ? cJSON_Print(s) : NULL;
}

const rm_metric *rr_find(const rm_variant *v, const char *metric) {
    for (int i = 0; v && i < v->n; i++)
        if (v->m[i].n && !strcmp(v->m[i].name, metric)) return &v->m[i];
    return NULL;
}

const rm_metric *rr_summary_metric(const rm_variant *v, const char *metric) {
    for (int i = 0; v && i < v->n; i++)
        if (v->m[i].summarized && !strcmp(v->m[i].name, metric)) return &v->m[i];
    return NULL;
}

const rm_variant *rr_find_variant(const rm_model *d, const char *key) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->v[i].key, key)) return &d->v[i];
    return NULL;
}

double rr_summary_num(const rm_variant *v, const char *metric, const char *field) {
    const rm_metric *x = rr_summary_metric(v, metric);
    if (!x) return NAN;
    const st_summary *s = &x->st;
    if (!strcmp(field, "median")) return s->median;
    if (!strcmp(field, "mean")) return s->mean;
    if (!strcmp(field, "stddev")) return s->stddev;
    if (!strcmp(field, "min")) return s->min;
    if (!strcmp(field, "max")) return s->max;
    if (!strcmp(field, "n")) return s->n;
    if (!strcmp(field, "ci_lo")) return s->ci_lo;
    if (!strcmp(field, "ci_hi")) return s->ci_hi;
    return NAN;
}

int rr_counted_runs(const rm_model *d, const rm_variant *v, const rm_run **out, int max) {
    int n = 0;
    for (int i = 0; i < d->n_runs && n < max; i++) {
        const rm_run *r = &d->runs[i];
        if (r->variant != v->variant || !r->counted) continue;
        if (v->machine_type >= 0 && r->machine_type != v->machine_type) continue;
        out[n++] = r;
    }
    return n;
}

void rs_busy_note(char *buf, size_t len, int busy, int counted, double others, double steal, double load, int cpus) {
    buf[0] = 0;
    if (busy <= 0) return;
    snprintf(buf, len,
             "Warning: busy machine: in %d of %d counted repetition%s other processes used up to %.0f%% of the %d CPU%s "
             "(the hypervisor stole up to %.0f%%; load average up to %.1f). Times from a busy machine are not those of a "
             "quiet one: compare them with care, or run again on a quiet machine.",
             busy, counted, counted == 1 ? "" : "s", isfinite(others) ? others * 100 : 0, cpus, cpus == 1 ? "" : "s",
             isfinite(steal) ? steal * 100 : 0, isfinite(load) ? load : 0);
}

void rm_busy_note(const rm_model *m, char *buf, size_t len) {
    int busy = 0, counted = 0, cpus = 0;
    double others = 0, steal = 0, load = 0;
    for (int i = 0; i < m->n_runs; i++) {
        const rm_run *r = &m->runs[i];
        if (!r->counted) continue;
        counted++;
        if (!r->load.busy) continue;
        busy++;
        cpus = r->load.cpus;
        if (isfinite(r->load.others)) others = fmax(others, r->load.others);
        if (isfinite(r->load.steal)) steal = fmax(steal, r->load.steal);
        if (isfinite(r->load.load1)) load = fmax(load, r->load.load1);
    }
    rs_busy_note(buf, len, busy, counted, others, steal, load, cpus);
}
