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
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include <stdarg.h>
#include <fcntl.h>

/* Version 2: typed option tables filled by the host, capabilities, region kinds and error
 * codes. A version 1 module is refused at load (its create parsed text). */
#define BENCH_MODULE_API_VERSION 2u
#define BENCH_MODULE_INIT_SYMBOL "bench_module_init"
/* Modules are built with -fvisibility=hidden, so that `nm -D` shows only what is meant to be
 * seen: the init symbol, marked with this. */
#define BENCH_MODULE_EXPORT __attribute__((visibility("default")))

/* ---- options: typed tables the host parses, checks and fills (fio's fio_option) ----
 *
 * A module declares its options as a NULL-terminated table of bench_option and the size of
 * a struct of its own (bench_module.opts_size). The host reads "key=value" pairs from the
 * command line or a scenario, checks each against the table (unknown key, type, range,
 * enum choice), starts from every option's default and writes the values into a zeroed
 * struct at each option's offset. The module's create/open receives that struct: a module
 * parses no text. The table itself is checked when the module loads (modreg.c): offsets
 * inside opts_size, known types, defaults that parse and lie in their range, unique names.
 *
 * What each type stores at its offset:
 *   BENCH_OPT_BOOL    int       0 or 1 ("0/1/true/false/yes/no/on/off")
 *   BENCH_OPT_INT     int64_t   a whole number, may be negative
 *   BENCH_OPT_SIZE    uint64_t  bytes or a count, with k/m/g suffixes (powers of 1024)
 *   BENCH_OPT_ENUM    int       the index of the value in `choices` ("shared|private": 0 or 1)
 *   BENCH_OPT_STRING  char[BENCH_OPT_STRING_MAX], NUL-terminated
 * INT and SIZE check [min, max] where min < max; min == max == 0 means no range. */
enum { BENCH_OPT_BOOL = 1, BENCH_OPT_INT, BENCH_OPT_SIZE, BENCH_OPT_ENUM, BENCH_OPT_STRING };
#define BENCH_OPT_STRING_MAX 128

typedef struct bench_option {
    const char *name;
    int type;               /* BENCH_OPT_* */
    size_t offset;          /* offsetof(the module's options struct, field) */
    const char *def;        /* default, as a value would be written ("4m", "1", "shared") */
    int64_t min, max;       /* INT and SIZE: the inclusive range (both 0: none) */
    const char *choices;    /* ENUM: "a|b|c" */
    const char *help;
    unsigned flags;         /* BENCH_OPTF_* */
} bench_option;             /* tables end with an entry whose name is NULL */

/* The option sizes a shared KV pool (BENCH_CAP_KV_SHARED_POOL): the host refuses it beside
 * a KV budget, which sizes the pool itself (bench_kv_shape.pool_bytes). */
#define BENCH_OPTF_SIZES_POOL 1u

/* Table entries, so that a module writes one line per option. */
#define BENCH_OPTION_BOOL(st, field, def, help) {#field, BENCH_OPT_BOOL, offsetof(st, field), def, 0, 0, NULL, help, 0}
#define BENCH_OPTION_INT(st, field, def, lo, hi, help) {#field, BENCH_OPT_INT, offsetof(st, field), def, lo, hi, NULL, help, 0}
#define BENCH_OPTION_SIZE(st, field, def, lo, hi, help) {#field, BENCH_OPT_SIZE, offsetof(st, field), def, lo, hi, NULL, help, 0}
#define BENCH_OPTION_ENUM(st, field, def, choices, help) {#field, BENCH_OPT_ENUM, offsetof(st, field), def, 0, 0, choices, help, 0}
#define BENCH_OPTION_STRING(st, field, def, help) {#field, BENCH_OPT_STRING, offsetof(st, field), def, 0, 0, NULL, help, 0}
/* a SIZE option that sizes the shared pool (BENCH_OPTF_SIZES_POOL) */
#define BENCH_OPTION_POOL(st, field, def, help) \
    {#field, BENCH_OPT_SIZE, offsetof(st, field), def, 0, 0, NULL, help, BENCH_OPTF_SIZES_POOL}
#define BENCH_OPTION_END {NULL, 0, 0, NULL, 0, 0, NULL, NULL, 0}

/* Options as the harness hands them to the host (the harness's side: a module never sees
 * them, it gets the filled struct). Either text as a user wrote it ("key=value" on a command
 * line: BENCH_OPTV_TEXT, parsed and range-checked against the table when the host fills the
 * struct), or a value the parent has already checked, typed (a worker spec's: the host
 * stores it at the option's offset by the option's type, with no text and no range check):
 *   BENCH_OPTV_BOOL  num 0 or 1                   a BOOL option
 *   BENCH_OPTV_NUM   num, |num| <= 2^53           an INT option, or a SIZE (num >= 0)
 *   BENCH_OPTV_STR   value                        an ENUM option (its choice's name) or a STRING */
enum { BENCH_OPTV_TEXT = 0, BENCH_OPTV_BOOL, BENCH_OPTV_NUM, BENCH_OPTV_STR };
/* The largest whole number a typed value carries: what a JSON number (a double) holds exactly. */
#define BENCH_OPTV_NUM_MAX (1ll << 53)
typedef struct bench_opt {
    const char *key, *value;    /* value: TEXT's text, STR's string; NULL for BOOL and NUM */
    int kind;                   /* BENCH_OPTV_*; 0 (TEXT) where only key and value are given */
    int64_t num;                /* BOOL and NUM */
} bench_opt;
typedef struct bench_opts { int n; const bench_opt *v; } bench_opts;

/* ---- capabilities: what a module declares it does, checked when it loads ----
 *
 * The host decides by these flags, never by a module's name or an option's name. A flag
 * that needs an optional slot is refused at load when the slot is missing, and a slot that
 * a flag governs is refused when the flag is not declared (modreg.c), so the flags and the
 * vtable cannot disagree. A flag of another family is refused too. */
#define BENCH_CAP_KV_SHARED_POOL    (1ull << 0)  /* kv: one pool for every sequence, sized by bench_kv_shape.pool_bytes */
#define BENCH_CAP_KV_PREFIX_SHARE   (1ull << 1)  /* kv: tokens + share_prefix slots (a prefix cache) */
#define BENCH_CAP_KV_FORK           (1ull << 2)  /* kv: fork slot (copy-on-write sequences) */
#define BENCH_CAP_ALLOC_THREAD_SAFE (1ull << 8)  /* alloc: alloc/free may be called from several threads at once */
#define BENCH_CAP_ALLOC_RESET       (1ull << 9)  /* alloc: reset slot (drops every block at once) */
#define BENCH_CAP_LOADER_MAPS_FILE  (1ull << 16) /* loader: tensors are the file's own pages (a truncation shows) */
#define BENCH_CAP_KV_MASK     0x00000000000000ffull
#define BENCH_CAP_ALLOC_MASK  0x000000000000ff00ull
#define BENCH_CAP_LOADER_MASK 0x0000000000ff0000ull

/* ---- error codes: a failing call returns -code and writes its message ----
 *
 * The host decides what a failure is (a repetition that ran out of memory, a file that is
 * not there, a request the module refused) by the code, never by the message's words.
 * bench_errf is the generic failure (-1, BENCH_ERR_FAIL); bench_errc names the code. */
enum {
    BENCH_ERR_FAIL = 1,     /* anything else */
    BENCH_ERR_NOMEM,        /* an allocation or mapping was refused */
    BENCH_ERR_NOTFOUND,     /* a file, module or entry that is not there */
    BENCH_ERR_REFUSED,      /* a request the module does not do (a capability, a value out of its range) */
    BENCH_ERR_INVALID,      /* bad input: a malformed file, an inconsistent shape */
    BENCH_ERR_IO,           /* a read or write failed */
};
#define BENCH_ERR_MAX BENCH_ERR_IO

/* The name of a code, for messages and results ("nomem"). */
static inline const char *bench_err_name(int code) {
    static const char *const names[] = {"ok", "fail", "nomem", "notfound", "refused", "invalid", "io"};
    if (code < 0) code = -code;
    return code <= BENCH_ERR_MAX ? names[code] : "fail";
}

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

/* ---- memory regions a module names, so that RSS is split by what holds it ---- */
enum {
    BENCH_REGION_WEIGHTS = 1,   /* the model's tensors ("bench:weights" in smaps) */
    BENCH_REGION_KV,            /* the KV cache ("bench:kv") */
    BENCH_REGION_SCRATCH,       /* activations, staging, bounce buffers ("bench:scratch") */
};
#define BENCH_REGION_MAX BENCH_REGION_SCRATCH

/* The name smaps shows for a region kind; NULL for a kind the host does not know. */
static inline const char *bench_region_name(int kind) {
    static const char *const names[] = {NULL, "bench:weights", "bench:kv", "bench:scratch"};
    return kind >= 1 && kind <= BENCH_REGION_MAX ? names[kind] : NULL;
}

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
     * kind is a BENCH_REGION_*: the host turns it into the name the memory figures use.
     * Call as host->name_region(host, addr, len, BENCH_REGION_KV), or through bench_name_region. */
    void (*name_region)(const struct bench_host *host, void *addr, size_t len, int kind);
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
    /* Opens one of the model's files (a path the loader was given) to read its bytes; flags as
     * for open(2). The host checks that the path still names the file it parsed: a path swapped
     * for another file since (a symlink out of the folders bench run may read) is refused with
     * err saying so, where a loader's own open() would read the other file. The descriptor, or
     * -1 with err set. Call through bench_open_model_file, which opens the path itself where the
     * host has no such slot (a test's host). */
    int (*open_file)(const struct bench_host *host, const char *path, int flags, char *err, size_t errlen);
} bench_host;

static inline int bench_open_model_file(const bench_host *host, const char *path, int flags, char *err, size_t errlen) {
    if (host && host->open_file) return host->open_file(host, path, flags, err, errlen);
#ifdef O_CLOEXEC /* a module built as strict ISO C (no _POSIX_C_SOURCE 200809) sees no O_CLOEXEC */
    flags |= O_CLOEXEC;
#endif
    int fd = open(path, flags);
    if (fd < 0) snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return fd;
}

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

/* Names a region through the host, where the host has the slot. */
static inline void bench_name_region(const bench_host *host, void *addr, size_t len, int kind) {
    if (host && host->name_region) host->name_region(host, addr, len, kind);
}

/* ---- registration ---- */

typedef struct bench_module {
    uint32_t api_version;               /* BENCH_MODULE_API_VERSION */
    const char *family;                 /* "loader", "kv", "alloc", "device" */
    const char *name;                   /* unique within the family */
    const char *summary;                /* one line for `bench list` */
    const char *devices;                /* comma-separated: "cpu", or "cuda" for a CUDA module */
    uint64_t caps;                      /* BENCH_CAP_* of the module's family */
    const bench_option *options;        /* ends with BENCH_OPTION_END; may be NULL */
    size_t opts_size;                   /* sizeof the struct the options fill (0: no options) */
    int (*score)(void);                 /* (optional) 0 = not usable here; default: usable */
    const void *iface;                  /* the family's vtable */
} bench_module;

typedef const bench_module *(*bench_module_init_fn)(void);

/* ---- helpers (header-only: modules link nothing of ours) ---- */

static inline int bench_errf(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int bench_errf(char *err, size_t n, const char *fmt, ...) {
    if (err && n) { va_list ap; va_start(ap, fmt); vsnprintf(err, n, fmt, ap); va_end(ap); }
    return -BENCH_ERR_FAIL;
}

static inline int bench_errc(char *err, size_t n, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static inline int bench_errc(char *err, size_t n, int code, const char *fmt, ...) {
    if (err && n) { va_list ap; va_start(ap, fmt); vsnprintf(err, n, fmt, ap); va_end(ap); }
    return code > 0 && code <= BENCH_ERR_MAX ? -code : -BENCH_ERR_FAIL;
}

#endif
