/* The engine module ABI: what every module shared object exports.
 *
 * A module is a shared object `<family>_<name>.so` that exports one symbol,
 *     const bench_module *bench_module_init(void);
 * returning a static registration. The driver dlopens it by name, rejects an
 * api_version other than BENCH_MODULE_API_VERSION (printing both numbers), and
 * calls score(): 0 means "not usable on this machine" (a CUDA module without a GPU).
 *
 * The family's vtable (`iface`) is declared in the family header: loader.h, kv.h, alloc.h,
 * device.h. Modules never call the core directly: what they need from the host (threads,
 * memory for their buffers, a log) arrives in a bench_host at create time.
 *
 * Devices: a module is built for one device. The CPU's are <dir>/<family>_<name>.so; those
 * of another device d (built by nvcc for d = "cuda") are <dir>/<d>/<family>_<name>.so, found
 * by the same family and name when the engine runs on d (modreg_load_for).
 */
#ifndef BENCH_MODULE_H
#define BENCH_MODULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include <stdarg.h>

#define BENCH_MODULE_API_VERSION 1u
#define BENCH_MODULE_INIT_SYMBOL "bench_module_init"
/* Modules are built with -fvisibility=hidden, so that `nm -D` shows only what is meant to be
 * seen: the init symbol, marked with this. */
#define BENCH_MODULE_EXPORT __attribute__((visibility("default")))

/* ---- options: "key=value" pairs given on the command line or in a scenario ---- */

typedef struct bench_option_desc {
    const char *name;
    const char *type;   /* "bool", "int", "size" (accepts k/m/g suffixes), "enum:a|b|c", "string" */
    const char *def;    /* default value, as text */
    const char *help;
} bench_option_desc;    /* arrays end with a {NULL} entry */

typedef struct bench_opt { const char *key, *value; } bench_opt;
typedef struct bench_opts { int n; const bench_opt *v; } bench_opts;

/* ---- counters a module reports about itself ----
 *
 * Each counter declares, when emitted, its class and which direction is better; bench
 * compare judges it by them (results.json keeps them with the figure):
 *   BENCH_CTR_EXACT  a figure the module counts (allocations, bytes reserved): equal or changed
 *   BENCH_CTR_COUNT  a count with run-to-run slack (page faults): tolerance 5% + 16
 *   BENCH_CTR_BYTES  a memory reading with slack (a device's used memory): tolerance 2% + 0.25
 *   BENCH_CTR_TIME   a clock's figure (ms, ns, GB/s): a statistical test, never equal
 *   BENCH_CTR_INFO   shown, never judged
 * bench_emit declares by the unit alone (BENCH_CTR_UNIT): a clock's unit (ns, us, ms, s) is a
 * time, smaller better; a rate (a unit ending in "/s") a time, larger better; "fraction" a
 * time with no direction; "B" exact, smaller better; anything else exact with no direction.
 * bench_emit_as says both where the unit does not. */
enum { BENCH_CTR_UNIT, BENCH_CTR_EXACT, BENCH_CTR_COUNT, BENCH_CTR_BYTES, BENCH_CTR_TIME, BENCH_CTR_INFO };
enum { BENCH_BETTER_LOWER = -1, BENCH_BETTER_NONE = 0, BENCH_BETTER_HIGHER = 1 };

typedef struct bench_counter_sink {
    void (*emit)(void *user, const char *name, const char *unit, double value);
    void *user;
    /* (optional) the same with the class and direction; NULL: emit, the class read from the unit */
    void (*emit_as)(void *user, const char *name, const char *unit, int cls, int better, double value);
} bench_counter_sink;

static inline void bench_emit(const bench_counter_sink *s, const char *name, const char *unit, double v) {
    if (s && s->emit) s->emit(s->user, name, unit, v);
}

static inline void bench_emit_as(const bench_counter_sink *s, const char *name, const char *unit, int cls, int better,
                                 double v) {
    if (s && s->emit_as) s->emit_as(s->user, name, unit, cls, better, v);
    else bench_emit(s, name, unit, v);
}

/* ---- the allocator instance a module takes its memory from (see alloc.h) ---- */

typedef struct bench_alloc_iface bench_alloc_iface;
typedef struct bench_allocator {
    const bench_alloc_iface *iface;
    void *ctx;
} bench_allocator;

/* ---- what the host provides to a module ---- */

typedef void (*bench_task_fn)(void *arg, int task, int n_tasks);

typedef struct bench_host {
    /* Runs fn(arg, i, n) for i in [0, n) on the engine's threads and returns when all are done. */
    void (*parallel_for)(void *pool, bench_task_fn fn, void *arg, int n);
    void *pool;
    int n_threads;
    /* Backing memory for the module's buffers (KV storage, staging). NULL: use libc. */
    const bench_allocator *alloc;
    /* Names an anonymous mapping for /proc/<pid>/smaps (PR_SET_VMA_ANON_NAME), best effort,
     * and tells the host's caller about it (it finds the region where the kernel cannot name it).
     * Call as host->name_region(host, addr, len, "bench:kv"). */
    void (*name_region)(const struct bench_host *host, void *addr, size_t len, const char *name);
    /* The device the engine runs on: "cpu", or a device module's name ("cuda"). A module built
     * for a device takes and returns device pointers (the loader's tensors, the KV module's
     * k, v, q and out). NULL is read as "cpu". */
    const char *device;
    /* Off the CPU: the device's stream (a cudaStream_t for "cuda") on which the forward pass
     * runs; the module queues its kernels and copies there, in the order it is called. */
    void *stream;
    /* Messages for the person running the benchmark (a fallback taken, a request the kernel
     * refused): one line, no newline, starting with the module ("loader mmap: ..."). The host
     * prints them where its own go. Call through bench_logf, which uses stderr where the
     * host (or this slot) is NULL. */
    void (*log)(const struct bench_host *host, const char *msg);
} bench_host;

static inline void bench_logf(const bench_host *host, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void bench_logf(const bench_host *host, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (host && host->log) host->log(host, msg);
    else fprintf(stderr, "%s\n", msg);
}

/* ---- registration ---- */

typedef struct bench_module {
    uint32_t api_version;               /* BENCH_MODULE_API_VERSION */
    const char *family;                 /* "loader", "kv", "alloc", "device" */
    const char *name;                   /* unique within the family */
    const char *summary;                /* one line for `bench list` */
    const char *devices;                /* comma-separated: "cpu", or "cuda" for a CUDA module */
    const bench_option_desc *options;   /* NULL-terminated; may be NULL */
    int (*score)(void);                 /* (optional) 0 = not usable here; default: usable */
    const void *iface;                  /* the family's vtable */
} bench_module;

typedef const bench_module *(*bench_module_init_fn)(void);

/* ---- helpers a module uses to read its options (header-only: modules link nothing of ours) ---- */

static inline const char *bench_opts_get(const bench_opts *o, const char *key, const bench_option_desc *desc) {
    if (o)
        for (int i = o->n - 1; i >= 0; i--)
            if (strcmp(o->v[i].key, key) == 0) return o->v[i].value;
    for (; desc && desc->name; desc++)
        if (strcmp(desc->name, key) == 0) return desc->def;
    return NULL;
}

static inline int bench_errf(char *err, size_t n, const char *fmt, ...) {
    if (err && n) { va_list ap; va_start(ap, fmt); vsnprintf(err, n, fmt, ap); va_end(ap); }
    return -1;
}

/* Parses a size such as 4096, 64k, 2m, 1g. Returns 0 on success. */
static inline int bench_parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-') return -1;
    uint64_t mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B') { if (*end == 'i') end++; if (*end == 'B') end++; }
    if (*end || (mul > 1 && v > UINT64_MAX / mul)) return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

static inline int bench_parse_bool(const char *s, int *out) {
    if (!s) return -1;
    if (!strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")) { *out = 1; return 0; }
    if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")) { *out = 0; return 0; }
    return -1;
}

/* Reads option `key` as a bool/size into *out, with an error naming the module and the option. */
static inline int bench_opt_bool(const bench_opts *o, const bench_option_desc *d, const char *mod,
                                 const char *key, int *out, char *err, size_t n) {
    const char *v = bench_opts_get(o, key, d);
    if (bench_parse_bool(v, out)) return bench_errf(err, n, "%s: option %s=%s: expected a bool (0/1/true/false)", mod, key, v ? v : "");
    return 0;
}
static inline int bench_opt_size(const bench_opts *o, const bench_option_desc *d, const char *mod,
                                 const char *key, uint64_t *out, char *err, size_t n) {
    const char *v = bench_opts_get(o, key, d);
    if (bench_parse_size(v, out)) return bench_errf(err, n, "%s: option %s=%s: expected a size (e.g. 4096, 64k, 1m)", mod, key, v ? v : "");
    return 0;
}

#endif
