/* The energy sources and a repetition's marks and timeline (energy.h). */
#include "harness/parent/energy.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/ut_vec.h"

/* ---- powercap (RAPL) ---- */

#define EN_RAPL_MAX 64          /* packages: more sockets than any machine has */

typedef struct en_rapl {
    int n;
    char path[EN_RAPL_MAX][PATH_MAX];  /* (n) each package's energy_uj */
    uint64_t range[EN_RAPL_MAX];        /* (n) µJ: max_energy_range_uj, where the counter wraps */
    uint64_t last[EN_RAPL_MAX];         /* (n) µJ: the raw value last read */
    double acc_j;                       /* unwrapped sum since open */
} en_rapl;

/* A whole number from a sysfs file; errno says why not. */
static int en_read_u64(const char *path, uint64_t *v) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    unsigned long long x;
    int got = fscanf(f, "%llu", &x);
    int e = ferror(f) ? errno : EINVAL;
    fclose(f);
    if (got != 1) {
        errno = e;
        return -1;
    }
    *v = x;
    return 0;
}

/* "intel-rapl:N": a package zone; "intel-rapl:N:M" (core, uncore, dram) is inside one and
 * counted by it, and intel-rapl-mmio repeats a package's counter. */
static int en_is_package(const char *name) {
    if (strncmp(name, "intel-rapl:", 11)) return 0;
    const char *p = name + 11;
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
    return *p == 0;
}

static int en_rapl_open(void **ctx, const char *root, const char *lib, char *why, size_t len) {
    (void)lib;
    char dir[3072];     /* room in a PATH_MAX for a zone's name and its file */
    snprintf(dir, sizeof(dir), "%.3000s/class/powercap", root);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, len, "no %s (%s): no powercap driver here", dir, strerror(errno));
        return -1;
    }
    en_rapl *r = calloc(1, sizeof(*r));
    if (!r) {
        closedir(d);
        snprintf(why, len, "out of memory");
        return -1;
    }
    struct dirent *de;
    int bad = 0;
    while (!bad && (de = readdir(d))) {
        if (!en_is_package(de->d_name)) continue;
        if (r->n == EN_RAPL_MAX) {
            snprintf(why, len, "more than %d packages under %s", EN_RAPL_MAX, dir);
            bad = 1;
            break;
        }
        char range[PATH_MAX + 32];
        int k = r->n;
        snprintf(r->path[k], sizeof(r->path[k]), "%s/%.200s/energy_uj", dir, de->d_name);
        snprintf(range, sizeof(range), "%s/%.200s/max_energy_range_uj", dir, de->d_name);
        if (en_read_u64(r->path[k], &r->last[k])) {
            /* root-only since Linux 5.10 (CVE-2020-8694): a user sees the file, not the number */
            snprintf(why, len, "%s: %s%s", r->path[k], strerror(errno),
                     errno == EACCES ? " (root-only on recent kernels: run as root, or chmod the file)" : "");
            bad = 1;
        } else if (en_read_u64(range, &r->range[k])) {
            snprintf(why, len, "%s: %s", range, strerror(errno));
            bad = 1;
        } else if (r->range[k] == 0) {
            snprintf(why, len, "%s: 0, no range to unwrap the counter against", range);
            bad = 1;
        } else {
            r->n++;
        }
    }
    closedir(d);
    if (!bad && r->n == 0) {
        snprintf(why, len, "no intel-rapl:N package zone under %s", dir);
        bad = 1;
    }
    if (bad) {
        free(r);
        return -1;
    }
    *ctx = r;
    return 0;
}

static int en_rapl_energy(void *ctx, int64_t t_ns, double *j) {
    (void)t_ns;
    en_rapl *r = ctx;
    uint64_t now[EN_RAPL_MAX];
    /* all packages or none: a sum missing one is no figure */
    for (int k = 0; k < r->n; k++)
        if (en_read_u64(r->path[k], &now[k])) return -1;
    for (int k = 0; k < r->n; k++) {
        uint64_t d = now[k] >= r->last[k] ? now[k] - r->last[k] : r->range[k] - r->last[k] + now[k];
        r->acc_j += (double)d * 1e-6;
        r->last[k] = now[k];
    }
    *j = r->acc_j;
    return 0;
}

static void en_rapl_close(void *ctx) { free(ctx); }

/* ---- NVML ---- */

/* The few NVML declarations used (nvml.h is not needed to build): the calls return 0 on
 * success; a device is an opaque pointer. */
typedef void *en_nvml_dev;
typedef struct en_nvml_mem { unsigned long long total, free, used; } en_nvml_mem;      /* nvmlMemory_t */
typedef struct en_nvml_proc { unsigned int pid; unsigned long long used; } en_nvml_proc; /* nvmlProcessInfo_v1_t */
#define EN_NVML_NOT_SUPPORTED 3
#define EN_NVML_INSUFFICIENT_SIZE 7
#define EN_NVML_VALUE_NOT_AVAILABLE (~0ULL)     /* a process's memory the driver cannot say */
#define EN_NVML_MAX_DEV 64
#define EN_NVML_MAX_PROCS 256

typedef struct en_nvml_fns {
    int (*init)(void);                                              /* nvmlInit_v2 */
    int (*shutdown)(void);                                          /* nvmlShutdown */
    int (*count)(unsigned *n);                                      /* nvmlDeviceGetCount_v2 */
    int (*handle)(unsigned i, en_nvml_dev *d);                      /* nvmlDeviceGetHandleByIndex_v2 */
    int (*energy)(en_nvml_dev d, unsigned long long *mj);           /* nvmlDeviceGetTotalEnergyConsumption */
    int (*power)(en_nvml_dev d, unsigned *mw);                      /* nvmlDeviceGetPowerUsage */
    int (*mem)(en_nvml_dev d, en_nvml_mem *m);                      /* nvmlDeviceGetMemoryInfo */
    int (*procs)(en_nvml_dev d, unsigned *n, en_nvml_proc *p);      /* nvmlDeviceGetComputeRunningProcesses */
    const char *(*errstr)(int rc);                                  /* nvmlErrorString (optional) */
} en_nvml_fns;

typedef struct en_nvml {
    void *lib;
    en_nvml_fns f;
    int ndev;
    en_nvml_dev dev[EN_NVML_MAX_DEV];   /* (ndev) */
    int counter;                        /* every GPU has the energy counter; else all go by power */
    unsigned long long last_mj[EN_NVML_MAX_DEV];
    double last_w;                      /* all GPUs' power at last_t */
    int64_t last_t;
    double acc_j;
} en_nvml;

static const char *en_nvml_err(const en_nvml *n, int rc) {
    static char buf[32];
    if (n->f.errstr) return n->f.errstr(rc);
    snprintf(buf, sizeof(buf), "NVML error %d", rc);
    return buf;
}

/* The functions by name, each into its slot (memcpy: a data pointer is not a function pointer's
 * type); nvmlErrorString is optional. */
static int en_nvml_syms(en_nvml *n, char *why, size_t len) {
    static const struct { const char *name; size_t off; int optional; } t[] = {
        {"nvmlInit_v2", offsetof(en_nvml_fns, init), 0},
        {"nvmlShutdown", offsetof(en_nvml_fns, shutdown), 0},
        {"nvmlDeviceGetCount_v2", offsetof(en_nvml_fns, count), 0},
        {"nvmlDeviceGetHandleByIndex_v2", offsetof(en_nvml_fns, handle), 0},
        {"nvmlDeviceGetTotalEnergyConsumption", offsetof(en_nvml_fns, energy), 0},
        {"nvmlDeviceGetPowerUsage", offsetof(en_nvml_fns, power), 0},
        {"nvmlDeviceGetMemoryInfo", offsetof(en_nvml_fns, mem), 0},
        {"nvmlDeviceGetComputeRunningProcesses", offsetof(en_nvml_fns, procs), 0},
        {"nvmlErrorString", offsetof(en_nvml_fns, errstr), 1},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        void *f = dlsym(n->lib, t[i].name);
        if (!f && !t[i].optional) {
            snprintf(why, len, "the NVML library has no %s", t[i].name);
            return -1;
        }
        memcpy((char *)&n->f + t[i].off, &f, sizeof(f));
    }
    return 0;
}

/* The GPUs' power now, W; -1 when one cannot say. */
static double en_nvml_watts(en_nvml *n) {
    double w = 0;
    for (int i = 0; i < n->ndev; i++) {
        unsigned mw;
        if (n->f.power(n->dev[i], &mw)) return -1;
        w += mw * 1e-3;
    }
    return w;
}

static int en_nvml_open(void **ctx, const char *root, const char *lib, char *why, size_t len) {
    (void)root;
    en_nvml *n = calloc(1, sizeof(*n));
    if (!n) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    int rc;
    unsigned cnt = 0;
    if (!(n->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
        snprintf(why, len, "%s", dlerror());
        goto err;
    }
    if (en_nvml_syms(n, why, len)) goto err;
    if ((rc = n->f.init())) {
        snprintf(why, len, "nvmlInit: %s", en_nvml_err(n, rc));
        n->f.shutdown = NULL; /* nothing to shut down */
        goto err;
    }
    if ((rc = n->f.count(&cnt))) {
        snprintf(why, len, "nvmlDeviceGetCount: %s", en_nvml_err(n, rc));
        goto err;
    }
    if (cnt == 0) {
        snprintf(why, len, "NVML sees no GPU");
        goto err;
    }
    n->ndev = cnt > EN_NVML_MAX_DEV ? EN_NVML_MAX_DEV : (int)cnt;
    n->counter = 1;
    for (int i = 0; i < n->ndev; i++) {
        if ((rc = n->f.handle((unsigned)i, &n->dev[i]))) {
            snprintf(why, len, "nvmlDeviceGetHandleByIndex(%d): %s", i, en_nvml_err(n, rc));
            goto err;
        }
        /* Volta and later count energy; older GPUs only say their power */
        if (n->f.energy(n->dev[i], &n->last_mj[i])) n->counter = 0;
    }
    if (!n->counter && (n->last_w = en_nvml_watts(n)) < 0) {
        snprintf(why, len, "the GPUs report neither an energy counter nor their power");
        goto err;
    }
    *ctx = n;
    return 0;
err:
    if (n->f.shutdown) n->f.shutdown();
    if (n->lib) dlclose(n->lib);
    free(n);
    return -1;
}

static int en_nvml_energy(void *ctx, int64_t t_ns, double *j) {
    en_nvml *n = ctx;
    if (n->counter) {
        unsigned long long now[EN_NVML_MAX_DEV];
        for (int i = 0; i < n->ndev; i++)
            if (n->f.energy(n->dev[i], &now[i])) return -1;
        for (int i = 0; i < n->ndev; i++) {
            /* the counter runs from the driver's load and does not wrap in 64 bits */
            if (now[i] >= n->last_mj[i]) n->acc_j += (double)(now[i] - n->last_mj[i]) * 1e-3;
            n->last_mj[i] = now[i];
        }
    } else {
        double w = en_nvml_watts(n);
        if (w < 0) return -1;
        /* trapezoids between readings: as exact as the readings are close */
        if (n->last_t && t_ns > n->last_t) n->acc_j += 0.5 * (w + n->last_w) * (double)(t_ns - n->last_t) * 1e-9;
        n->last_w = w;
        n->last_t = t_ns;
    }
    *j = n->acc_j;
    return 0;
}

/* The GPUs' used memory, and the part the given pids' compute contexts hold (B). */
static void en_nvml_memory(en_nvml *n, const pid_t *pids, int np, int64_t *used, int64_t *proc) {
    *used = *proc = 0;
    for (int i = 0; i < n->ndev; i++) {
        en_nvml_mem m;
        if (n->f.mem(n->dev[i], &m)) *used = -1;
        else if (*used >= 0) *used += (int64_t)m.used;
        en_nvml_proc p[EN_NVML_MAX_PROCS];
        unsigned cnt = EN_NVML_MAX_PROCS;
        if (*proc < 0 || n->f.procs(n->dev[i], &cnt, p)) {
            *proc = -1;
            continue;
        }
        for (unsigned k = 0; k < cnt && k < EN_NVML_MAX_PROCS; k++)
            for (int q = 0; q < np; q++) {
                if ((pid_t)p[k].pid != pids[q]) continue;
                /* under MIG, or without the rights, the driver says "not available" */
                if (p[k].used == EN_NVML_VALUE_NOT_AVAILABLE) *proc = -1;
                if (*proc >= 0) *proc += (int64_t)p[k].used;
            }
    }
}

static void en_nvml_close(void *ctx) {
    en_nvml *n = ctx;
    n->f.shutdown();
    dlclose(n->lib);
    free(n);
}

/* ---- the table ---- */

typedef struct en_source_i {
    const char *name;
    const char *what;
    /* opens on root (the sysfs root) or lib (NVML's); 0, or -1 with why */
    int (*open)(void **ctx, const char *root, const char *lib, char *why, size_t len);
    /* J since open, unwrapped; 0, or -1 when a counter could not be read */
    int (*energy)(void *ctx, int64_t t_ns, double *j);
    void (*close)(void *ctx);
} en_source_i;

enum { EN_SRC_RAPL, EN_SRC_NVML };

static const en_source_i en_sources[EN_MAX_SRC] = {
    [EN_SRC_RAPL] = {.name = "rapl", .what = "CPU packages (powercap RAPL)", .open = en_rapl_open,
                     .energy = en_rapl_energy, .close = en_rapl_close},
    [EN_SRC_NVML] = {.name = "nvml", .what = "GPUs (NVML)", .open = en_nvml_open, .energy = en_nvml_energy,
                     .close = en_nvml_close},
};

struct en_reader {
    void *ctx[EN_MAX_SRC];      /* NULL: not opened */
    char why[EN_MAX_SRC][384];  /* a closed source's reason */
    char all_why[EN_MAX_SRC * 400];
};

en_reader *en_open(const char *root, const char *nvml_lib) {
    en_reader *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    if (!root) root = getenv("BENCH_SYSFS_ROOT");
    if (!root || !*root) root = "/sys";
    if (!nvml_lib) nvml_lib = getenv("BENCH_NVML_LIB");
    if (!nvml_lib || !*nvml_lib) nvml_lib = "libnvidia-ml.so.1";
    size_t off = 0;
    for (int i = 0; i < EN_MAX_SRC; i++) {
        if (!en_sources[i].open(&r->ctx[i], root, nvml_lib, r->why[i], sizeof(r->why[i]))) continue;
        r->ctx[i] = NULL;
        int w = snprintf(r->all_why + off, sizeof(r->all_why) - off, "%s%s: %s", off ? "; " : "", en_sources[i].name,
                         r->why[i]);
        if (w > 0 && (size_t)w < sizeof(r->all_why) - off) off += (size_t)w;
    }
    if (en_available(r)) r->all_why[0] = 0;
    return r;
}

void en_close(en_reader *r) {
    if (!r) return;
    for (int i = 0; i < EN_MAX_SRC; i++)
        if (r->ctx[i]) en_sources[i].close(r->ctx[i]);
    free(r);
}

int en_available(const en_reader *r) {
    for (int i = 0; r && i < EN_MAX_SRC; i++)
        if (r->ctx[i]) return 1;
    return 0;
}

const char *en_why(const en_reader *r) { return !r ? "no reader" : r->all_why; }
int en_n_sources(void) { return EN_MAX_SRC; }
const char *en_source_name(int i) { return i >= 0 && i < EN_MAX_SRC ? en_sources[i].name : "?"; }
const char *en_source_what(int i) { return i >= 0 && i < EN_MAX_SRC ? en_sources[i].what : "?"; }
int en_source_ok(const en_reader *r, int i) { return r && i >= 0 && i < EN_MAX_SRC && r->ctx[i]; }
const char *en_source_why(const en_reader *r, int i) { return r && i >= 0 && i < EN_MAX_SRC ? r->why[i] : ""; }

const char *en_source_method(const en_reader *r, int i) {
    if (!en_source_ok(r, i)) return "none";
    if (i == EN_SRC_NVML && !((const en_nvml *)r->ctx[i])->counter) return "power samples";
    return "counter";
}

void en_read(en_reader *r, int64_t t_ns, const pid_t *pids, int n, en_now *out) {
    *out = (en_now){.t_ns = t_ns, .ok = en_available(r), .gpu_used = -1, .gpu_proc = -1};
    for (int i = 0; i < EN_MAX_SRC; i++) {
        out->j[i] = NAN;
        if (!r || !r->ctx[i]) continue;
        if (en_sources[i].energy(r->ctx[i], t_ns, &out->j[i])) {
            out->j[i] = NAN;
            out->ok = 0;
        }
    }
    if (r && r->ctx[EN_SRC_NVML]) en_nvml_memory(r->ctx[EN_SRC_NVML], pids, n, &out->gpu_used, &out->gpu_proc);
}

/* ---- one repetition ---- */

void en_run_begin(en_run *e, en_reader *rd) {
    memset(e, 0, sizeof(*e));
    e->rd = rd;
}

void en_run_pid(en_run *e, pid_t pid) {
    if (pid > 0 && !UT_VEC_RESERVE(e->pids, e->cap_pids, e->npids + 1)) e->pids[e->npids++] = pid;
}

/* The joules of all sources in a reading; NAN when it is not whole. */
static double en_total(const en_now *x) {
    if (!x->ok) return NAN;
    double j = 0;
    for (int i = 0; i < EN_MAX_SRC; i++)
        if (isfinite(x->j[i])) j += x->j[i];
    return j;
}

/* A point from a reading: the watts since the last point's. */
static void en_point_add(en_run *e, const en_now *x) {
    if (UT_VEC_RESERVE(e->pts, e->cap_pts, e->n_pts + 1)) return;
    double w = NAN;
    if (e->last.t_ns && x->t_ns > e->last.t_ns)
        w = (en_total(x) - en_total(&e->last)) / ((double)(x->t_ns - e->last.t_ns) * 1e-9);
    e->pts[e->n_pts++] = (en_point){.t_ns = x->t_ns, .w = w, .gpu_used = x->gpu_used, .gpu_proc = x->gpu_proc};
    e->last = *x;
}

void en_run_mark(en_run *e, int k, int64_t t_ns) {
    /* nothing to read: no marks, no points (the record says why) */
    if (!en_available(e->rd) || k < 0 || k >= EN_MARKS || e->mark[k].t_ns) return;
    en_read(e->rd, t_ns, e->pids, e->npids, &e->mark[k]);
    en_point_add(e, &e->mark[k]);
}

void en_run_sample(en_run *e, int64_t t_ns) {
    if (!en_available(e->rd) || !e->mark[0].t_ns || e->mark[EN_MARKS - 1].t_ns) return;
    en_now x;
    en_read(e->rd, t_ns, e->pids, e->npids, &x);
    en_point_add(e, &x);
}

void en_run_free(en_run *e) {
    free(e->pids);
    free(e->pts);
    en_reader *rd = e->rd;
    memset(e, 0, sizeof(*e));
    e->rd = rd;
}

int en_run_between(const en_run *e, int a, int b, double *j, double *s) {
    if (a < 0 || b >= EN_MARKS || a >= b || !e->mark[a].t_ns || !e->mark[b].t_ns) return -1;
    double ja = en_total(&e->mark[a]), jb = en_total(&e->mark[b]);
    if (!isfinite(ja) || !isfinite(jb) || e->mark[b].t_ns <= e->mark[a].t_ns) return -1;
    *j = jb - ja;
    *s = (double)(e->mark[b].t_ns - e->mark[a].t_ns) * 1e-9;
    return 0;
}
