/* alloc "jemalloc": jemalloc 5 through its non-standard API (mallocx/dallocx), a baseline.
 *
 * Loading: this module links libjemalloc.so.2, which exports malloc/free too. dlopen
 * does not make them the process's malloc: the executable's references were bound to
 * libc's (or ASan's) before, and a dlopen'ed library comes after them in the lookup
 * order, RTLD_GLOBAL or not. Only this module's mallocx/dallocx calls reach jemalloc.
 *
 * Static TLS: libjemalloc.so.2 is built with initial-exec TLS (2.6 KiB) and glibc
 * refuses to dlopen it ("cannot allocate memory in static TLS block") unless the
 * process started with more surplus static TLS:
 *     GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384
 * The driver (or the test) must set it in the environment of the process that loads
 * this module, before that process starts.
 *
 * free is dallocx, not sdallocx: the size class of an aligned allocation depends on
 * the alignment, which free is not given. */
#include <jemalloc/jemalloc.h>

#include "common/alloc_mod.h"

typedef struct je_opts {
    int64_t dirty_decay_ms;
    int tcache, timing;
} je_opts;

static const bench_option je_options[] = {
    BENCH_OPTION_INT(je_opts, dirty_decay_ms, "-1", -1, 1ll << 40,
                     "set every arena's dirty_decay_ms (-1: jemalloc's default, 10 s); 0 purges at once"),
    BENCH_OPTION_BOOL(je_opts, tcache, "1", "0: MALLOCX_TCACHE_NONE on every call (no thread cache)"),
    BENCH_OPTION_ALLOC_TIMING(je_opts),
    BENCH_OPTION_END,
};

typedef struct je_ctx {
    alloc_mod base;     /* first: the shared calls and counters take the context as one */
    int flags;          /* MALLOCX_TCACHE_NONE or 0; alignment is or'ed in per call */
} je_ctx;

static int je_create(const void *opts, void **out, char *err, size_t errlen) {
    const je_opts *o = opts;
    long decay = (long)o->dirty_decay_ms;
    if (decay >= 0) {
        ssize_t v = decay;
        /* 4096 = MALLCTL_ARENAS_ALL: every existing arena; "arenas." sets it for arenas made later. */
        if (mallctl("arena.4096.dirty_decay_ms", NULL, NULL, &v, sizeof(v)) ||
            mallctl("arenas.dirty_decay_ms", NULL, NULL, &v, sizeof(v)))
            return bench_errf(err, errlen, "alloc jemalloc: cannot set dirty_decay_ms=%ld", decay);
    }
    je_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc jemalloc: out of memory");
    c->base.timing = o->timing;
    c->flags = o->tcache ? 0 : MALLOCX_TCACHE_NONE;
    *out = c;
    return 0;
}

static void *je_op_alloc(void *ctx, size_t size, size_t align) {
    return mallocx(size ? size : 1, ((je_ctx *)ctx)->flags | MALLOCX_ALIGN(align));
}
static void je_op_free(void *ctx, void *p, size_t size) {
    (void)size;
    dallocx(p, ((je_ctx *)ctx)->flags);
}
static const alloc_mod_ops je_ops = {.alloc = je_op_alloc, .free = je_op_free, .counts = 1};

static void *je_alloc(void *ctx, size_t size, size_t align) { return alloc_mod_alloc(ctx, &je_ops, size, align); }
static void je_free(void *ctx, void *p, size_t size) { alloc_mod_free(ctx, &je_ops, p, size); }

static void je_counters(void *ctx, const bench_counter_sink *s) {
    je_ctx *c = ctx;
    alloc_mod_emit_counts(s, &c->base.counted);
    /* jemalloc's own view, process-wide (only this module uses jemalloc). Refreshed by "epoch". */
    uint64_t epoch = 1;
    size_t mapped = 0, len = sizeof(mapped);
    if (!mallctl("epoch", &epoch, &(size_t){sizeof(epoch)}, &epoch, sizeof(epoch)) &&
        !mallctl("stats.mapped", &mapped, &len, NULL, 0))
        bench_emit(s, "bytes_reserved", "B", (double)mapped);
    alloc_mod_emit_time(&c->base, s);
}

static void je_destroy(void *ctx) { free(ctx); }

static const struct bench_alloc_iface je_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .create = je_create,
    .alloc = je_alloc,
    .free = je_free,
    .reset = NULL,
    .counters = je_counters,
    .destroy = je_destroy,
};

static const bench_module je_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "alloc",
    .name = "jemalloc",
    .summary = "jemalloc 5 mallocx/dallocx (baseline); needs GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384",
    .devices = "cpu",
    .caps = BENCH_CAP_ALLOC_THREAD_SAFE,
    .options = je_options,
    .opts_size = sizeof(je_opts),
    .score = NULL,
    .iface = &je_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &je_module; }
