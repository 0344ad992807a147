#include "results.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engines/core/compute/kernels.h"
#include "engines/core/compute/kernels_tune.h"
#include "engines/core/runtime/engine.h"
#include "engines/abi/module.h"
#include "harness/parent/perfev.h"
#include "harness/scenario/target.h"
#include "harness/report/scrape_report.h"
#include "harness/report/serve_report.h"
#include "harness/report/energy_report.h"
#include "harness/report/http_report.h"
#include "harness/report/reqlog.h"
#include "harness/report/compare.h"
#include "harness/report/escape.h"
#include "harness/report/locations.h"
#include "util/ut_vec.h"

/* ---- environment ---- */

static void rs_trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
}

/* The value of the first "key\t: value" line of a /proc file (cpuinfo, meminfo). */
static char *rs_proc_field(const char *file, const char *key) {
    FILE *f = fopen(file, "r");
    if (!f) return NULL;
    char *line = NULL, *out = NULL;
    size_t cap = 0, kl = strlen(key);
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, key, kl) || (line[kl] != ' ' && line[kl] != '\t' && line[kl] != ':')) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        rs_trim(c);
        out = strdup(c);
        break;
    }
    free(line);
    fclose(f);
    return out;
}

/* "always [madvise] never" -> "madvise" */
static void rs_bracketed(const char *file, char *buf, size_t len) {
    snprintf(buf, len, "unknown");
    FILE *f = fopen(file, "r");
    if (!f) return;
    char line[256];
    if (fgets(line, sizeof(line), f)) {
        char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b) {
            *b = 0;
            snprintf(buf, len, "%s", a + 1);
        }
    }
    fclose(f);
}

void rs_short_sha(char *buf, size_t len) { loc_commit_short(buf, len); }

/* The NVIDIA driver's model names, one per GPU, read from /proc: no CUDA runtime needed,
 * and none on a machine without the driver. */
static cJSON *rs_gpus(void) {
    cJSON *a = cJSON_CreateArray();
    glob_t g = {0};
    int none = !a || glob("/proc/driver/nvidia/gpus/*/information", 0, NULL, &g);
    for (size_t i = 0; !none && i < g.gl_pathc; i++) {
        char *model = rs_proc_field(g.gl_pathv[i], "Model");
        if (model) cJSON_AddItemToArray(a, cJSON_CreateString(model));
        free(model);
    }
    globfree(&g);
    return a;
}

#define RS_STR(x) #x
#define RS_XSTR(x) RS_STR(x)

cJSON *rs_environment(void) {
    cJSON *env = cJSON_CreateObject();
    if (!env) return NULL;
    cJSON *cpu = cJSON_AddObjectToObject(env, "cpu");
    char *model = rs_proc_field("/proc/cpuinfo", "model name");
    char *flags = rs_proc_field("/proc/cpuinfo", "flags");
    cJSON_AddStringToObject(cpu, "model", model ? model : "unknown");
    cJSON_AddStringToObject(cpu, "flags", flags ? flags : "");
    cJSON_AddNumberToObject(cpu, "cores_online", (double)sysconf(_SC_NPROCESSORS_ONLN));
    free(model);
    free(flags);
    char *mem = rs_proc_field("/proc/meminfo", "MemTotal");
    cJSON_AddNumberToObject(env, "memory_bytes", mem ? strtod(mem, NULL) * 1024.0 : 0);
    free(mem);
    struct utsname u;
    if (!uname(&u)) {
        cJSON *k = cJSON_AddObjectToObject(env, "kernel");
        cJSON_AddStringToObject(k, "release", u.release);
        cJSON_AddStringToObject(k, "version", u.version);
        cJSON_AddStringToObject(k, "machine", u.machine);
        cJSON_AddStringToObject(env, "hostname", u.nodename);
    }
    char buf[256];
    cJSON *thp = cJSON_AddObjectToObject(env, "thp");
    rs_bracketed("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf));
    cJSON_AddStringToObject(thp, "enabled", buf);
    rs_bracketed("/sys/kernel/mm/transparent_hugepage/defrag", buf, sizeof(buf));
    cJSON_AddStringToObject(thp, "defrag", buf);
    FILE *pf = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    int paranoid = 99;
    if (pf) {
        if (fscanf(pf, "%d", &paranoid) != 1) paranoid = 99;
        fclose(pf);
    }
    cJSON_AddNumberToObject(env, "perf_event_paranoid", paranoid);
    cJSON *cc = cJSON_AddObjectToObject(env, "compiler");
    cJSON_AddStringToObject(cc, "version", __VERSION__);
#ifdef BENCH_CFLAGS
    cJSON_AddStringToObject(cc, "flags", BENCH_CFLAGS);
#else
    cJSON_AddStringToObject(cc, "flags", "unknown (the Makefile passes -DBENCH_CFLAGS=...)");
#endif
#ifdef __OPTIMIZE__
    cJSON_AddBoolToObject(cc, "optimized", 1);
#else
    cJSON_AddBoolToObject(cc, "optimized", 0);
#endif
#if defined(__SANITIZE_ADDRESS__)
    cJSON_AddStringToObject(cc, "sanitizers", "address,undefined");
#else
    cJSON_AddStringToObject(cc, "sanitizers", "none");
#endif
    cJSON *git = cJSON_AddObjectToObject(env, "git");
    /* the build's commit (make records it), not the current directory's */
    if (*loc_commit_sha()) {
        cJSON_AddStringToObject(git, "sha", loc_commit_sha());
        cJSON_AddBoolToObject(git, "dirty", loc_commit_dirty());
        cJSON_AddStringToObject(git, "recorded", "at build time");
    } else {
        cJSON_AddNullToObject(git, "sha");
        cJSON_AddNullToObject(git, "dirty");
    }
    /* what a machine type is made of besides the CPU (bench merge groups statistics by it) */
    cJSON_AddStringToObject(env, "kernels", kn_isa());
    cJSON_AddItemToObject(env, "gpus", rs_gpus());
    cJSON *lib = cJSON_AddObjectToObject(env, "libraries");
    cJSON_AddStringToObject(lib, "cjson", cJSON_Version());
    cJSON_AddStringToObject(lib, "libpfm", pe_library_version(buf, sizeof(buf)));
    cJSON_AddStringToObject(lib, "glibc", gnu_get_libc_version());
    return env;
}

/* ---- summary ---- */

void rs_variant_label(const scenario *s, int variant, char *buf, size_t len) {
    buf[0] = 0;
    const sc_variant *v = &s->variants[variant];
    size_t used = 0;
    for (int a = 0; a < sc_axis_count(); a++) {
        if (!sc_axis_shown(s, a)) continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? "/" : "", sc_pick(s, v, a)->label);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
    if (!buf[0]) snprintf(buf, len, "%s", "default");
}

static int rs_counted(const rn_run *r) { return !r->warmup && r->status == RN_OK && r->cache_ok; }

/* The callgrind and accuracy figures of a variant: one deterministic value each, not from a
 * repetition (run -1). */
static void rs_variant_extras(const rs_input *in, rm_variant *v) {
    /* instructions:callgrind: one deterministic count per variant, from its callgrind repetition */
    const cg_counts *cg = in->res->cg ? &in->res->cg[v->variant] : NULL;
    static const int cg_ph[] = {CG_PH_LOAD, CG_PH_PREFILL, CG_PH_DECODE, -1};
    for (int k = 0; cg && cg->ok && k < 4; k++) {
        char name[64];
        snprintf(name, sizeof(name), "instructions_%s", cg_ph[k] < 0 ? "total" : cg_phase_name(cg_ph[k]));
        /* exact to the instruction with one thread, but for 0.5% of start-up noise */
        mc_decl d = mc_declare(MC_EXACT, -1);
        d.tol_rel = 0.005;
        rm_add_value(v, name, "count", d, (double)(cg_ph[k] < 0 ? cg->total : cg->ir[cg_ph[k]]), -1, -1);
    }
    /* the accuracy pass: one deterministic figure per variant (harness/parent/accuracy_run.h) */
    const ar_figures *af = in->res->acc ? &in->res->acc[v->variant] : NULL;
    if (!af || !af->ok) return;
    const struct { const char *name, *unit; double v; int better; } acc[] = {
        {"accuracy_kl_mean", "nats", af->kl_mean, -1}, {"accuracy_kl_max", "nats", af->kl_max, -1},
        {"accuracy_top1_pct", "%", 100 * af->top1, 1},   {"accuracy_err_max", "ratio", af->err_max, -1},
        {"accuracy_err_rms", "ratio", af->err_rms, -1},
    };
    for (size_t k = 0; k < sizeof(acc) / sizeof(acc[0]); k++)
        rm_add_value(v, acc[k].name, acc[k].unit, mc_declare(MC_EXACT, acc[k].better), acc[k].v, -1, -1);
}

int rs_summarize(const rs_input *in) {
    const scenario *s = in->s;
    rm_model *m = in->model;
    int nv = s->n_variants, rc = -1;
    int *sel = calloc((size_t)(nv ? nv : 1), sizeof(*sel));
    char **labels = calloc((size_t)(nv ? nv : 1), sizeof(*labels));
    const char **keys = calloc((size_t)(nv ? nv : 1), sizeof(*keys));
    char *status = strdup(in->status), *name = strdup(s->name);
    if (!sel || !labels || !keys || !status || !name) goto out;
    free(m->status);
    free(m->scenario);
    m->status = status, m->scenario = name, status = name = NULL;
    m->warmup = s->warmup;
    m->processes = s->processes;
    for (int vi = 0; vi < nv; vi++) {
        char label[256];
        rs_variant_label(s, vi, label, sizeof(label));
        sel[vi] = s->variants[vi].selected;
        keys[vi] = s->variants[vi].key;
        if (!(labels[vi] = strdup(label))) goto out;
    }
    if (rm_summary_begin(m, nv, sel, keys, (const char *const *)labels)) goto out;
    for (int i = 0; i < m->n; i++) rs_variant_extras(in, &m->v[i]);
    rm_summary_finish(m);
    rc = 0;
out:
    for (int vi = 0; labels && vi < nv; vi++) free(labels[vi]);
    free(labels);
    free(keys);
    free(sel);
    free(status);
    free(name);
    return rc;
}

/* ---- results.json ---- */

static cJSON *rs_num_array(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static double rs_rel_ms(int64_t t, int64_t t0) { return t && t0 ? (double)(t - t0) * 1e-6 : NAN; }

static void rs_add_num_or_null(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static cJSON *rs_snap_json(const rn_proc *p, const rn_snap *sn) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "t_ms", rs_rel_ms(sn->t_ns, p->t_hello));
    if (sn->st.vm_rss >= 0) {
        cJSON *st = cJSON_AddObjectToObject(o, "status_kib");
        cJSON_AddNumberToObject(st, "vm_rss", (double)sn->st.vm_rss);
        cJSON_AddNumberToObject(st, "vm_hwm", (double)sn->st.vm_hwm);
        cJSON_AddNumberToObject(st, "rss_anon", (double)sn->st.rss_anon);
        cJSON_AddNumberToObject(st, "rss_file", (double)sn->st.rss_file);
        cJSON_AddNumberToObject(st, "rss_shmem", (double)sn->st.rss_shmem);
    }
    if (sn->pss_kib >= 0) cJSON_AddNumberToObject(o, "pss_kib", (double)sn->pss_kib);
    else cJSON_AddNullToObject(o, "pss_kib");
    if (sn->has_smaps) {
        cJSON *regs = cJSON_AddObjectToObject(o, "regions_kib");
        for (int i = 0; i < sn->smaps.n; i++) {
            const pm_region *g = &sn->smaps.v[i];
            cJSON *r = cJSON_AddObjectToObject(regs, g->name);
            cJSON_AddNumberToObject(r, "size", (double)g->size_kib);
            cJSON_AddNumberToObject(r, "rss", (double)g->rss_kib);
            cJSON_AddNumberToObject(r, "pss", (double)g->pss_kib);
            cJSON_AddNumberToObject(r, "anon", (double)g->anon_kib);
        }
    }
    if (sn->has_faults) {
        cJSON_AddNumberToObject(o, "minflt", (double)sn->minflt);
        cJSON_AddNumberToObject(o, "majflt", (double)sn->majflt);
    }
    return o;
}

/* Process pi of a repetition as results.json records it; its metrics, as made, into bag. */
static cJSON *rs_proc_json(const rs_input *in, const rn_run *r, int pi, mt_bag *bag) {
    const rn_proc *p = &r->procs[pi];
    const scenario *s = in->s;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", p->pid);
    cJSON_AddStringToObject(o, "status", rn_status_name(p->status));
    cJSON_AddStringToObject(o, "reason", p->reason);
    if (p->reaped && WIFEXITED(p->wstatus)) cJSON_AddNumberToObject(o, "exit_code", WEXITSTATUS(p->wstatus));
    else cJSON_AddNullToObject(o, "exit_code");
    if (p->reaped && WIFSIGNALED(p->wstatus)) cJSON_AddNumberToObject(o, "signal", WTERMSIG(p->wstatus));
    else cJSON_AddNullToObject(o, "signal");
    const char *log = strrchr(p->log_path, '/');
    char lp[600];
    snprintf(lp, sizeof(lp), "logs%s", log ? log : "");
    if (p->log_path[0]) cJSON_AddStringToObject(o, "log", lp);
    else cJSON_AddNullToObject(o, "log"); /* the worker wrote nothing; no empty file was kept */

    /* event times in ms since the worker said HELLO */
    cJSON *ev = cJSON_AddObjectToObject(o, "events_ms");
    rs_add_num_or_null(ev, "load_start", rs_rel_ms(p->t_load_start, p->t_hello));
    rs_add_num_or_null(ev, "load_end", rs_rel_ms(p->t_load_end, p->t_hello));
    rs_add_num_or_null(ev, "prefill_start", rs_rel_ms(p->t_prefill_start, p->t_hello));
    rs_add_num_or_null(ev, "prefill_end", rs_rel_ms(p->t_prefill_end, p->t_hello));
    rs_add_num_or_null(ev, "decode_start", rs_rel_ms(p->t_decode_start, p->t_hello));
    rs_add_num_or_null(ev, "decode_end", rs_rel_ms(p->t_decode_end, p->t_hello));
    rs_add_num_or_null(ev, "done", rs_rel_ms(p->t_done, p->t_hello));
    cJSON_AddNumberToObject(o, "prompt_tokens", p->n_prompt);

    cJSON *ph = cJSON_AddObjectToObject(o, "phases");
    for (int i = 0; i < RN_PH_COUNT; i++)
        if (p->snap[i].taken) cJSON_AddItemToObject(ph, rn_phase_name(i), rs_snap_json(p, &p->snap[i]));

    cJSON *ru = cJSON_AddObjectToObject(o, "rusage");
    cJSON_AddNumberToObject(ru, "maxrss_kib", (double)p->ru.ru_maxrss);
    cJSON_AddNumberToObject(ru, "minflt", (double)p->ru.ru_minflt);
    cJSON_AddNumberToObject(ru, "majflt", (double)p->ru.ru_majflt);
    cJSON_AddNumberToObject(ru, "nvcsw", (double)p->ru.ru_nvcsw);
    cJSON_AddNumberToObject(ru, "nivcsw", (double)p->ru.ru_nivcsw);
    cJSON_AddNumberToObject(ru, "utime_ms", p->ru.ru_utime.tv_sec * 1e3 + p->ru.ru_utime.tv_usec * 1e-3);
    cJSON_AddNumberToObject(ru, "stime_ms", p->ru.ru_stime.tv_sec * 1e3 + p->ru.ru_stime.tv_usec * 1e-3);

    cJSON *perf = cJSON_AddObjectToObject(o, "perf");
    for (int k = 0; p->perf_opened && k < p->perf.n; k++) {
        const pe_counter *c = &p->perf.c[k];
        cJSON *e = cJSON_AddObjectToObject(perf, c->name);
        cJSON_AddBoolToObject(e, "available", c->available);
        if (c->reason[0]) cJSON_AddStringToObject(e, "reason", c->reason);
        if (!c->available) continue;
        cJSON *vals = cJSON_AddObjectToObject(e, "phases");
        for (int i = 0; i < RN_PH_COUNT; i++)
            if (p->snap[i].taken && p->snap[i].perf_ok[k])
                cJSON_AddNumberToObject(vals, rn_phase_name(i), (double)p->snap[i].perf[k]);
    }
    if (!p->perf_opened) cJSON_AddStringToObject(perf, "note", "not collected: \"perf\" is not in the scenario's metrics");

    cJSON *ctr = cJSON_AddArrayToObject(o, "counters");
    for (int i = 0; i < p->n_counters; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "name", p->counters[i].name);
        cJSON_AddStringToObject(c, "unit", p->counters[i].unit);
        cJSON_AddNumberToObject(c, "value", p->counters[i].value);
        cJSON_AddItemToArray(ctr, c);
    }

    cJSON *met = cJSON_AddObjectToObject(o, "metrics");
    if (p->status == RN_OK) {
        mt_proc(s, p, bag);
        for (int k = 0; k < bag->n; k++) cJSON_AddNumberToObject(met, bag->name[k], bag->v[k]);
    }

    cJSON *serve = sv_proc_json(p, p->t_hello);
    if (serve) cJSON_AddItemToObject(o, "serve", serve);
    cJSON *http = hr_proc_json(p, p->t_hello);
    if (http) cJSON_AddItemToObject(o, "http", http);
    cJSON *scraped = sr_proc_json(p, p->t_hello);
    if (scraped) cJSON_AddItemToObject(o, "server_metrics", scraped);
    /* one sequence: its KV memory at the decode steps where it changed (a dynamic cache's growth) */
    cJSON *kvt = serve ? NULL : sv_kv_timeline_json(p, p->t_hello);
    if (kvt) cJSON_AddItemToObject(o, "kv_timeline", kvt);

    if ((s->metrics & SC_M_TOKENS) && p->n_tok) {
        cJSON *tk = cJSON_AddObjectToObject(o, "tokens");
        double *t = malloc((size_t)p->n_tok * sizeof(*t)), *id = malloc((size_t)p->n_tok * sizeof(*id));
        if (t && id) {
            for (int i = 0; i < p->n_tok; i++) {
                t[i] = rs_rel_ms(p->tok_ns[i], p->t_hello);
                id[i] = p->tok_id[i];
            }
            cJSON_AddItemToObject(tk, "t_ms", rs_num_array(t, p->n_tok));
            cJSON_AddItemToObject(tk, "id", rs_num_array(id, p->n_tok));
        }
        free(t);
        free(id);
    }

    if (p->n_tl) {
        cJSON *tl = cJSON_AddObjectToObject(o, "timeline");
        double *col = malloc((size_t)p->n_tl * sizeof(*col));
        if (col) {
            static const char *names[] = {"t_ms", "rss_kib", "hwm_kib", "anon_kib", "file_kib", "shmem_kib", "pss_kib"};
            for (int c = 0; c < 7; c++) {
                int all_missing = 1;
                for (int i = 0; i < p->n_tl; i++) {
                    const rn_sample *x = &p->tl[i];
                    double v = c == 0 ? rs_rel_ms(x->t_ns, p->t_hello) : c == 1 ? x->rss : c == 2 ? x->hwm
                             : c == 3 ? x->anon : c == 4 ? x->file : c == 5 ? x->shmem : x->pss;
                    col[i] = v;
                    if (c != 6 || v >= 0) all_missing = 0;
                }
                if (!all_missing) cJSON_AddItemToObject(tl, names[c], rs_num_array(col, p->n_tl));
            }
            free(col);
        }
    }
    return o;
}

/* What auto ran per dtype on a CPU variant, as the workers read it from the cache of measurements
 * (kernels_tune.h; the same binary and thread count give the same key): "kernels_auto". Under
 * production numerics, "kernels_numerics" says what the check on the model decided for each
 * family that rounds x (the entries keyed by the model, engine_numerics_model_id); under exact,
 * that none competed. */
static void rs_kernels_auto(cJSON *o, const scenario *s, const sc_variant *v) {
    if (s->axes[SC_AX_KERNELS].n && strcmp(sc_pick(s, v, SC_AX_KERNELS)->name, "auto")) return;
    if (s->axes[SC_AX_DEVICE].n && strcmp(sc_pick(s, v, SC_AX_DEVICE)->name, "cpu")) return;
    int exact = s->axes[SC_AX_NUMERICS].n && sc_pick(s, v, SC_AX_NUMERICS)->ival == ENGINE_NUMERICS_EXACT;
    if (kt_mode_from_env() == KT_OFF) {
        cJSON_AddStringToObject(o, "kernels_auto", "the flags' order (BENCH_KERNELS_TUNE=0)");
        cJSON_AddStringToObject(o, "kernels_numerics", exact ? "exact: only exact families run" :
                                "production, but nothing measured (BENCH_KERNELS_TUNE=0): only exact families run");
        return;
    }
    char path[1024], key[KT_KEY_MAX], pkey[KT_KEY_MAX], id[128], err[256];
    kt_table *t = calloc(1, sizeof(*t));
    if (!t) return;
    kt_key(sc_pick(s, v, SC_AX_THREADS)->ival, key, sizeof(key));
    const char *p = kt_cache_path(path, sizeof(path));
    char desc[1536];
    if (p && kt_cache_load(p, key, ~0u, t, err, sizeof(err)) >= 0 && t->n) {
        kt_describe(t, desc, sizeof(desc));
        cJSON_AddStringToObject(o, "kernels_auto", desc);
    }
    if (exact) {
        cJSON_AddStringToObject(o, "kernels_numerics", "exact: only exact families run");
    } else {
        engine_numerics_model_id(s->model_resolved ? s->model_resolved : s->model_path, id, sizeof(id));
        kt_production_key(key, id, pkey, sizeof(pkey));
        char line[1600];
        if (p && kt_cache_load(p, pkey, ~0u, t, err, sizeof(err)) >= 0 && t->n) {
            kt_describe(t, desc, sizeof(desc));
            snprintf(line, sizeof(line), "production: %s", desc);
        } else {
            snprintf(line, sizeof(line), "production: no check kept for this model (none was faster, or the machine was busy: "
                                         "the workers' kernels.* counters say what ran)");
        }
        cJSON_AddStringToObject(o, "kernels_numerics", line);
    }
    free(t);
}

/* How busy the machine was around one repetition, its workers' own CPU time taken out. */
static sl_load rs_run_load(const rn_run *r) {
    double workers_cpu = 0;
    for (int i = 0; i < r->nproc; i++) {
        const struct rusage *ru = &r->procs[i].ru;
        workers_cpu += (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec * 1e-6 + (double)ru->ru_stime.tv_sec +
                       (double)ru->ru_stime.tv_usec * 1e-6;
    }
    return sl_between(&r->load_start, &r->load_end, workers_cpu);
}

/* Repetition ri as results.json records it; its metrics, as made, into bag and procs (nproc). */
static cJSON *rs_run_json(const rs_input *in, int ri, mt_bag *bag, mt_bag *procs) {
    const rn_run *r = &in->res->runs[ri];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "variant", r->variant);
    cJSON_AddStringToObject(o, "key", in->s->variants[r->variant].key);
    cJSON_AddNumberToObject(o, "repetition", r->rep);
    cJSON_AddBoolToObject(o, "warmup", r->warmup);
    cJSON_AddStringToObject(o, "status", rn_status_name(r->status));
    cJSON_AddBoolToObject(o, "valid", r->cache_ok);
    cJSON_AddStringToObject(o, "invalid_reason", r->invalid_reason);
    cJSON_AddBoolToObject(o, "counted", rs_counted(r));
    cJSON_AddNumberToObject(o, "start_unix_ms", (double)r->wall_start_ms);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON *res = cJSON_AddObjectToObject(o, "residency");
    cJSON_AddStringToObject(res, "cache", sc_pick(in->s, &in->s->variants[r->variant], SC_AX_CACHE)->name);
    cJSON_AddNumberToObject(res, "resident_pages", (double)r->resident_pages);
    cJSON_AddNumberToObject(res, "total_pages", (double)r->total_pages);
    rs_add_num_or_null(res, "pct", r->total_pages ? 100.0 * (double)r->resident_pages / (double)r->total_pages : NAN);
    /* how busy the machine was: the report warns when other processes or the hypervisor took
     * enough of it to move the timings */
    sl_load ld = rs_run_load(r);
    cJSON *ml = cJSON_AddObjectToObject(o, "machine_load");
    rs_add_num_or_null(ml, "load1_start", r->load_start.ok ? r->load_start.load1 : NAN);
    rs_add_num_or_null(ml, "load1_end", r->load_end.ok ? r->load_end.load1 : NAN);
    cJSON_AddNumberToObject(ml, "cpus", ld.cpus);
    rs_add_num_or_null(ml, "cpu_busy", ld.busy);
    rs_add_num_or_null(ml, "others_cpu", ld.others);
    rs_add_num_or_null(ml, "steal", ld.steal);
    cJSON_AddBoolToObject(ml, "busy", ld.others > SL_BUSY_OTHERS || ld.steal > SL_BUSY_STEAL);
    cJSON *met = cJSON_AddObjectToObject(o, "metrics");
    mt_run(in->s, r, bag);
    er_metrics(r, bag);
    for (int k = 0; k < bag->n; k++) cJSON_AddNumberToObject(met, bag->name[k], bag->v[k]);
    cJSON_AddItemToObject(o, "energy", er_run_json(r));
    cJSON *ps = cJSON_AddArrayToObject(o, "processes");
    for (int i = 0; i < r->nproc; i++) cJSON_AddItemToArray(ps, rs_proc_json(in, r, i, &procs[i]));
    return o;
}

int rs_append_run(const rs_input *in, int ri) {
    const rn_run *r = &in->res->runs[ri];
    mt_bag bag = {0}, *procs = calloc((size_t)(r->nproc ? r->nproc : 1), sizeof(*procs));
    if (!procs) return -1;
    /* built once, read back by the one reader of a record, serialised, and kept as text */
    int rc = rm_append(in->model, rs_run_json(in, ri, &bag, procs), &bag, procs, r->nproc);
    free(procs);
    return rc;
}

static cJSON *rs_choice_json(const sc_choice *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddStringToObject(o, "options", c->opts ? c->opts : "");
    cJSON_AddStringToObject(o, "label", c->label);
    return o;
}

/* The axes whose record in a variant is more than their choice (rs_axis_record). */
static void rs_record_kernels(cJSON *o, const sc_choice *ch) {
    /* the family the run used: "auto" resolved as the worker resolved it, on this CPU */
    const char *ran = kn_isa_resolve(ch->name);
    cJSON_AddStringToObject(o, "kernels", ran ? ran : ch->name);
    if (strcmp(ch->name, ran ? ran : ch->name)) cJSON_AddStringToObject(o, "kernels_asked", ch->name);
}

static void rs_record_target(cJSON *o, const sc_choice *ch) {
    cJSON *tj = cJSON_AddObjectToObject(o, "target");
    cJSON_AddStringToObject(tj, "name", ch->name);
    cJSON_AddStringToObject(tj, "label", ch->label);
    if (ch->http) cJSON_AddItemToObject(tj, "http", tg_to_json(ch->http));   /* its settings as they ran, defaults written */
}

static const struct {
    int axis;
    void (*record)(cJSON *o, const sc_choice *ch);
} rs_axis_records[] = {
    {SC_AX_KERNELS, rs_record_kernels},
    {SC_AX_TARGET, rs_record_target},
};

/* Variant v's choice on axis a, under the axis's key, as its row's type says: a module (or
 * device) as {name, options, label}, an integer as a number, a boolean as a boolean (for
 * repack: what was asked; whether matrices were rearranged is the counters', mod.weights.*),
 * anything else by its name. So an axis added to the table (sc_axis_add included) is recorded
 * with no edit here; rs_axis_records holds the two whose record is more than their choice. */
static void rs_axis_record(cJSON *o, const scenario *s, const sc_variant *v, int a) {
    const sc_axis_def *d = sc_axis_get(a);
    const sc_choice *ch = sc_pick(s, v, a);
    for (size_t i = 0; i < sizeof rs_axis_records / sizeof rs_axis_records[0]; i++)
        if (rs_axis_records[i].axis == a) {
            rs_axis_records[i].record(o, ch);
            return;
        }
    switch (d->type) {
    case SC_AXT_NONE: break;     /* not an engine scenario's (workload): its variants' names say it */
    case SC_AXT_MODULE: case SC_AXT_DEVICE: cJSON_AddItemToObject(o, d->key, rs_choice_json(ch)); break;
    case SC_AXT_INT: cJSON_AddNumberToObject(o, d->key, ch->ival); break;
    case SC_AXT_BOOL: cJSON_AddBoolToObject(o, d->key, ch->ival); break;
    case SC_AXT_ENUM: case SC_AXT_CUSTOM: cJSON_AddStringToObject(o, d->key, ch->name); break;
    }
}

cJSON *rs_head(const rs_input *in) {
    const scenario *s = in->s;
    cJSON *doc = rm_head_open(in->status);
    if (!doc) return NULL;
    if (in->env) cJSON_AddItemToObject(doc, "environment", cJSON_Duplicate(in->env, 1));
    else cJSON_AddObjectToObject(doc, "environment");
    if (in->shard) cJSON_AddItemToObject(doc, "shard", cJSON_Duplicate(in->shard, 1));

    cJSON *sc = cJSON_AddObjectToObject(doc, "scenario");
    cJSON_AddStringToObject(sc, "file", s->file);
    cJSON_AddStringToObject(sc, "name", s->name);
    cJSON_AddItemToObject(sc, "as_written", s->json ? cJSON_Duplicate(s->json, 1) : cJSON_CreateObject());
    cJSON *ov = cJSON_AddObjectToObject(sc, "overrides");
    if (in->only) cJSON_AddStringToObject(ov, "only", in->only);
    if (in->repeat_override) cJSON_AddNumberToObject(ov, "repeat", in->repeat_override);
    cJSON_AddBoolToObject(ov, "quick", in->quick);
    cJSON *as = cJSON_AddObjectToObject(sc, "as_run");
    cJSON_AddNumberToObject(as, "repetitions", s->repetitions);
    cJSON_AddNumberToObject(as, "warmup", s->warmup);
    cJSON_AddNumberToObject(as, "processes", s->processes);
    cJSON_AddNumberToObject(as, "sample_ms", s->sample_ms);
    cJSON_AddNumberToObject(as, "timeout_s", s->timeout_s);
    cJSON_AddStringToObject(as, "model_path", s->model_path ? s->model_path : "");
    cJSON *files = cJSON_AddArrayToObject(as, "model_files");
    for (int i = 0; in->mf && i < in->mf->n; i++) cJSON_AddItemToArray(files, cJSON_CreateString(in->mf->path[i]));
    cJSON_AddNumberToObject(as, "model_weight_bytes", in->mf ? (double)in->mf->bytes : 0);
    cJSON_AddStringToObject(as, "module_dir", s->module_dir);

    cJSON *vars = cJSON_AddArrayToObject(doc, "variants");
    for (int i = 0; i < s->n_variants; i++) {
        const sc_variant *v = &s->variants[i];
        char label[256];
        rs_variant_label(s, i, label, sizeof(label));
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddStringToObject(o, "key", v->key);
        cJSON_AddStringToObject(o, "label", label);
        cJSON_AddBoolToObject(o, "selected", v->selected);
        for (int a = 0; a < sc_axis_count(); a++)
            if (s->axes[a].n) rs_axis_record(o, s, v, a);
        rs_kernels_auto(o, s, v);
        const cg_counts *cg = in->res->cg ? &in->res->cg[i] : NULL;
        if (cg && cg->out_file[0]) {
            cJSON *c = cJSON_AddObjectToObject(o, "callgrind");
            cJSON_AddStringToObject(c, "out_file", cg->out_file);
            if (!cg->ok) cJSON_AddStringToObject(c, "error", cg->error);
            cJSON *ins = cJSON_AddObjectToObject(c, "instructions");
            for (int k = 0; cg->ok && k < CG_PH_COUNT; k++) cJSON_AddNumberToObject(ins, cg_phase_name(k), (double)cg->ir[k]);
            if (cg->ok) cJSON_AddNumberToObject(ins, "total", (double)cg->total);
        }
        cJSON_AddItemToArray(vars, o);
    }
    return doc;
}

/* ---- files ---- */

int rs_write(const rs_input *in, char *err, size_t errlen) {
    const rm_model *sum = in->model;
    char path[PATH_MAX];
    cJSON *head = rs_head(in);
    if (!head) return bench_errf(err, errlen, "out of memory building results.json");
    int writes = in->model->writes;
    int rc = rm_write(in->model, head, in->dir, err, errlen);
    cJSON_Delete(head);
    if (rc) return rc;
    if (writes == in->model->writes) return 0; /* unchanged: results.csv already says it too */

    size_t len = 0;
    char *csv = rm_csv(sum, &len);
    if (!csv) return bench_errf(err, errlen, "out of memory writing results.csv");
    snprintf(path, sizeof(path), "%s/results.csv", in->dir);
    rc = rs_write_atomic(path, csv, len, err, errlen);
    free(csv);
    return rc;
}

int rs_write_timelines(const rs_input *in, int ri, char *err, size_t errlen) {
    const rn_run *r = &in->res->runs[ri];
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/timelines", in->dir);
    if (mkdir(path, 0777) && errno != EEXIST) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    for (int pi = 0; pi < r->nproc; pi++) {
        const rn_proc *p = &r->procs[pi];
        if (!p->n_tl) continue;
        size_t cap = (size_t)p->n_tl * 96 + 256, len = 0;
        char *buf = malloc(cap);
        if (!buf) return bench_errf(err, errlen, "out of memory");
        len += (size_t)snprintf(buf, cap, "t_ms,rss_kib,hwm_kib,anon_kib,file_kib,shmem_kib,pss_kib,phase\n");
        for (int i = 0; i < p->n_tl; i++) {
            const rn_sample *x = &p->tl[i];
            const char *mark = "";
            for (int ph = 0; ph < RN_PH_COUNT; ph++)
                if (p->snap[ph].taken && p->snap[ph].t_ns == x->t_ns) mark = rn_phase_name(ph);
            int n = snprintf(buf + len, cap - len, "%.3f,%lld,%lld,%lld,%lld,%lld,%lld,%s\n",
                             rs_rel_ms(x->t_ns, p->t_hello), (long long)x->rss, (long long)x->hwm,
                             (long long)x->anon, (long long)x->file, (long long)x->shmem, (long long)x->pss, mark);
            if (n < 0 || (size_t)n >= cap - len) break;
            len += (size_t)n;
        }
        snprintf(path, sizeof(path), "%s/timelines/v%d-r%d-p%d.csv", in->dir, r->variant, r->rep, pi);
        int rc = rs_write_atomic(path, buf, len, err, errlen);
        free(buf);
        if (rc) return rc;
    }
    /* the server's /metrics reads (scrape_report.h) */
    for (int pi = 0; pi < r->nproc; pi++) {
        size_t len;
        char *csv = sr_timeline_csv(&r->procs[pi], r->procs[pi].t_hello, &len);
        if (!csv) continue;
        snprintf(path, sizeof(path), "%s/timelines/v%d-r%d-p%d-server.csv", in->dir, r->variant, r->rep, pi);
        int rc = rs_write_atomic(path, csv, len, err, errlen);
        free(csv);
        if (rc) return rc;
    }
    /* the KV memory per scheduler step (serving) or where it changed (one sequence) */
    for (int pi = 0; pi < r->nproc; pi++) {
        const rn_proc *p = &r->procs[pi];
        size_t len;
        char *csv = sv_timeline_csv(p, p->t_hello, &len);
        if (!csv) continue;
        snprintf(path, sizeof(path), "%s/timelines/v%d-r%d-p%d-kv.csv", in->dir, r->variant, r->rep, pi);
        int rc = rs_write_atomic(path, csv, len, err, errlen);
        free(csv);
        if (rc) return rc;
    }
    /* every request, whichever target ran it, one JSON object a line (reqlog.h, docs/serving.md) */
    const sc_choice *tgt = in->s->axes[SC_AX_TARGET].n ? sc_pick(in->s, &in->s->variants[r->variant], SC_AX_TARGET) : NULL;
    for (int pi = 0; pi < r->nproc; pi++) {
        const rn_proc *p = &r->procs[pi];
        size_t len;
        char *lines = rl_requests_jsonl(p, tgt ? tgt->name : "engine", p->t_hello, &len);
        if (!lines) continue;
        snprintf(path, sizeof(path), "%s/timelines/v%d-r%d-p%d-requests.jsonl", in->dir, r->variant, r->rep, pi);
        int rc = rs_write_atomic(path, lines, len, err, errlen);
        free(lines);
        if (rc) return rc;
    }
    return 0;
}

/* ---- the terminal table ---- */

typedef struct rs_row { const char *metric, *title; } rs_row;

static const rs_row rs_rows[] = {
    {"load_ms", "load"},
    {"ttft_ms", "TTFT"},
    {"tpot_ms", "TPOT"},
    {"itl_p99_ms", "ITL p99"},
    {"decode_tok_s", "decode"},
    {"mod.bandwidth.decode_bound_tok_s", "  read bound"},
    {"decode_bound_pct", "  decode / read bound"},
    {"prefill_tok_s", "prefill"},
    {"peak_rss_mib", "peak RSS (VmHWM)"},
    {"rss_end_mib", "RSS at end"},
    {"anon_end_mib", "  RssAnon"},
    {"file_end_mib", "  RssFile"},
    {"pss_end_mib", "PSS at end"},
    {"region_weights_rss_end_mib", "  weights (anon)"},
    {"region_model_file_rss_end_mib", "  model file map"},
    {"region_kv_rss_end_mib", "  KV cache"},
    {"region_scratch_rss_end_mib", "  scratch"},
    {"weights_pss_total_mib", "weights PSS, all procs"},
    {"minflt_load", "minor faults, load"},
    {"majflt_load", "major faults, load"},
    {"minflt_prefill", "minor faults, prefill"},
    {"majflt_prefill", "major faults, prefill"},
    {"minflt_decode", "minor faults, decode"},
    {"mod.kv.grow_events", "KV grow events"},
    {"serve_requests", "requests served"},
    {"serve_s", "serving time"},
    {"serve_output_tok_s", "tokens/s, output"},
    {"serve_total_tok_s", "tokens/s, prompt+output"},
    {"serve_ttft_p50_ms", "TTFT p50"},
    {"serve_ttft_p99_ms", "TTFT p99"},
    {"serve_tpot_p50_ms", "TPOT p50"},
    {"serve_tpot_p99_ms", "TPOT p99"},
    {"serve_itl_p50_ms", "ITL p50"},
    {"serve_itl_p99_ms", "ITL p99"},
    {"serve_goodput_pct", "goodput (met the targets)"},
    {"serve_peak_seqs", "peak concurrent seqs"},
    {"serve_waited", "requests queued for room"},
    {"serve_preemptions", "preemptions"},
    {"serve_prefill_tokens", "prefill positions run"},
    {"serve_prefix_reused_tokens", "prefix positions reused"},
    {"serve_prefix_hit_pct", "prefix hit rate"},
    {"serve_prefix_hit_turn1_pct", "  turn 1"},
    {"serve_prefix_hit_turn2_pct", "  turn 2"},
    {"serve_prefix_hit_turn3_pct", "  turn 3"},
    {"serve_prefix_hit_turn4_pct", "  turn 4"},
    {"serve_kv_reserved_peak_mib", "KV reserved, peak"},
    {"serve_kv_live_peak_mib", "KV live, peak"},
    {"serve_kv_cached_peak_mib", "KV prefix cache, peak"},
    {"serve_kv_wasted_peak_mib", "KV wasted, peak"},
    {"serve_kv_live_mean_pct", "KV live/reserved, mean"},
    {"serve_kv_wasted_mean_pct", "KV wasted/reserved, mean"},
    {"energy_prefill_j_per_tok", "energy per prompt token"},
    {"energy_decode_j_per_tok", "energy per decoded token"},
    {"power_decode_w", "  power, decode"},
    {"energy_serve_j", "energy, serving"},
    {"gpu_proc_peak_mib", "GPU memory, workers' peak"},
    {"residency_pct", "page cache before run"},
    {"accuracy_kl_mean", "KL vs exact f32, mean"},
    {"accuracy_kl_max", "KL vs exact f32, max"},
    {"accuracy_top1_pct", "top-1 agreement"},
    {"instructions_load", "instructions, load"},
    {"instructions_prefill", "instructions, prefill"},
    {"instructions_decode", "instructions, decode"},
    {NULL, NULL},
};


const char *rs_metric_title(const char *metric) {
    for (const rs_row *row = rs_rows; row->metric; row++)
        if (!strcmp(row->metric, metric)) return row->title[0] == ' ' ? row->title + 2 : row->title;
    return NULL;
}

const char *rs_metric_title_at(int rank) {
    return rank >= 0 && rank < (int)(sizeof(rs_rows) / sizeof(rs_rows[0])) ? rs_rows[rank].title : NULL;
}

int rs_metric_rank(const char *metric) {
    for (const rs_row *row = rs_rows; row->metric; row++)
        if (!strcmp(row->metric, metric)) return (int)(row - rs_rows);
    return -1;
}

void rs_fmt_value(char *buf, size_t len, double v, double half, int n, const char *unit) {
    if (n == 0 || !isfinite(v)) {
        snprintf(buf, len, "-");
        return;
    }
    if (!strcmp(unit, "nats") || !strcmp(unit, "ratio")) {
        /* divergences span decades (0, 7e-07, 0.03): significant digits, not decimals */
        snprintf(buf, len, "%.3g", v);
        return;
    }
    int prec = fabs(v) >= 1000 ? 0 : fabs(v) >= 100 ? 1 : fabs(v) >= 1 ? 2 : 3;
    if (!strcmp(unit, "count")) prec = 0;
    /* a CI half-width beyond the value itself says nothing about it: "163.3 ±1150.3" reads as
     * a measurement, "163.3 (noise)" as what it is */
    if (n > 1 && half > fabs(v)) snprintf(buf, len, "%.*f (noise)", prec, v);
    else if (n > 1 && half > 0) snprintf(buf, len, "%.*f ±%.*f", prec, v, prec, half);
    else snprintf(buf, len, "%.*f", prec, v);
}

void rs_repetitions_note(char *buf, size_t len, int reps, int need) {
    if (reps <= 0)
        snprintf(buf, len,
                 "No repetition was counted (the run was interrupted before one finished, or every one failed): "
                 "there are no medians to show, and no figures to draw.");
    else if (reps >= need)
        snprintf(buf, len,
                 "%d repetitions per variant: bench compare can test times between two such runs (Mann-Whitney "
                 "over this run's timed metrics together, Holm-adjusted: %d + %d needed); more repetitions "
                 "(--repeat N) narrow the CIs.",
                 reps, need, need);
    else
        snprintf(buf, len,
                 "%d repetition%s per variant: enough for the medians and the deterministic figures (faults, "
                 "memory, counters), not for bench compare to test times (with this run's timed metrics tested "
                 "together it needs %d + %d, and below that flags only changes > 50%% with the ranges apart). "
                 "For times, run with --repeat %d or more.",
                 reps, reps == 1 ? "" : "s", need, need, need);
}

void rs_print_folded(FILE *f, const char *note) {
    for (const char *p = note; *p;) {
        size_t n = strlen(p);
        if (n > 100) {
            n = 100;
            while (n > 0 && p[n] != ' ') n--;
            if (!n) n = 100;
        }
        fprintf(f, "%.*s\n", (int)n, p);
        p += n;
        while (*p == ' ') p++;
    }
}

static void rs_fmt(char *buf, size_t len, const rm_metric *m) {
    if (!m) {
        snprintf(buf, len, "-");
        return;
    }
    rs_fmt_value(buf, len, m->st.median, (m->st.ci_hi - m->st.ci_lo) / 2, m->st.n, m->unit);
}


/* The table of bench run: every field from the model (the run's own, or one read back). */
void rs_print_table(FILE *f, const rs_input *in, const rm_model *sum) {
    (void)in;
    if (!sum->n) return;
    int colw = 14;
    char label[256];
    for (int i = 0; i < sum->n; i++) {
        es_term(label, sizeof(label), sum->v[i].label);
        if ((int)strlen(label) + 2 > colw) colw = (int)strlen(label) + 2;
    }
    if (colw > 40) colw = 40;
    int titlew = 32;
    fprintf(f, "%s: median ± half the 95%% CI of the mean over the counted repetitions (%d warm-up dropped)%s\n",
            sum->scenario, sum->warmup, sum->processes > 1 ? "; values pooled over the processes" : "");
    fprintf(f, "%-*s", titlew, "metric");
    for (int i = 0; i < sum->n; i++) fprintf(f, "%*.*s", colw, colw - 2, es_term(label, sizeof(label), sum->v[i].label));
    fputc('\n', f);
    fprintf(f, "%-*s", titlew, "repetitions counted");
    for (int i = 0; i < sum->n; i++) fprintf(f, "%*d", colw, sum->v[i].counted);
    fputc('\n', f);
    for (const rs_row *row = rs_rows; row->metric; row++) {
        int any = 0;
        const char *unit = "";
        for (int i = 0; i < sum->n; i++) {
            const rm_metric *m = rr_summary_metric(&sum->v[i], row->metric);
            if (m) { any = 1; unit = m->unit; }
        }
        if (!any) continue;
        char title[128];
        snprintf(title, sizeof(title), "%s (%s)", row->title, unit);
        fprintf(f, "%-*s", titlew, title);
        for (int i = 0; i < sum->n; i++) {
            char cell[64];
            rs_fmt(cell, sizeof(cell), rr_summary_metric(&sum->v[i], row->metric));
            fprintf(f, "%*s", colw + (strstr(cell, "±") ? 1 : 0), cell);
        }
        fputc('\n', f);
    }
    /* what these repetitions can show, where a reader decides whether to trust a difference */
    int reps = INT_MAX;
    /* a variant whose every repetition failed says so in its own line below: the note speaks
     * of the ones that counted */
    for (int i = 0; i < sum->n; i++)
        if (sum->v[i].counted > 0) reps = sum->v[i].counted < reps ? sum->v[i].counted : reps;
    if (reps == INT_MAX) reps = 0;
    char note[512];
    rs_repetitions_note(note, sizeof(note), reps, cmp_reps_to_compare(sum));
    rs_print_folded(f, note);
    /* and whether the machine was quiet while they ran */
    rm_busy_note(sum, note, sizeof(note));
    if (note[0]) rs_print_folded(f, note);
    er_note(sum, note, sizeof(note));
    if (note[0]) rs_print_folded(f, note);
    for (int i = 0; i < sum->n; i++) {
        const rm_variant *v = &sum->v[i];
        if (!v->failed && !v->invalid) continue;
        fprintf(f, "%s: %d failed, %d invalid of %d repetitions", es_term(label, sizeof(label), v->label), v->failed,
                v->invalid, v->counted + v->failed + v->invalid);
        for (int ri = 0; ri < sum->n_runs; ri++) {
            const rm_run *r = &sum->runs[ri];
            if (r->variant != v->variant || r->warmup || r->counted) continue;
            const char *why = r->invalid_reason;
            for (int pi = 0; pi < r->nproc && !r->ok; pi++)
                if (!r->procs[pi].ok) { why = r->procs[pi].reason; break; }
            /* a reason may quote a server's error body or a worker's last line: escaped */
            char st[64], reason[2048];
            fprintf(f, "; rep %d %s: %s", r->rep - sum->warmup + 1, r->ok ? "invalid" : es_term(st, sizeof(st), r->status),
                    es_term(reason, sizeof(reason), why));
            break;
        }
        fputc('\n', f);
    }
}
