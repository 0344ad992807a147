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

#include "allocators/alloc_common.h"
#include "engines/abi/alloc.h"

typedef struct je_opts {
    int64_t dirty_decay_ms;
    int tcache, timing;
} je_opts;

static const bench_option je_options[] = {
    BENCH_OPTION_INT(je_opts, dirty_decay_ms, "-1", -1, 1ll << 40,
                     "set every arena's dirty_decay_ms (-1: jemalloc's default, 10 s); 0 purges at once"),
    BENCH_OPTION_BOOL(je_opts, tcache, "1", "0: MALLOCX_TCACHE_NONE on every call (no thread cache)"),
    BENCH_OPTION_BOOL(je_opts, timing, "0", "time every call with clock_gettime (costs ~2x20 ns per call)"),
    BENCH_OPTION_END,
};

typedef struct je_ctx {
    int timing;
    int flags;   /* MALLOCX_TCACHE_NONE or 0; alignment is or'ed in per call */
    uint64_t allocs, frees, bytes_live, bytes_peak, ns;
} je_ctx;

static int je_create(const void *opts, void **out, char *err, size_t errlen) {
    const je_opts *o = opts;
    int timing = o->timing, tcache = o->tcache;
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
    c->timing = timing;
    c->flags = tcache ? 0 : MALLOCX_TCACHE_NONE;
    *out = c;
    return 0;
}

/* The counts every call makes (the module's counters). */
static inline void je_count_alloc(je_ctx *c, size_t size) {
    c->allocs++;
    c->bytes_live += size;
    if (c->bytes_live > c->bytes_peak) c->bytes_peak = c->bytes_live;
}

/* The timed variants are out of line, so an untimed call (the default) pays one test of
 * c->timing, and a free is a tail call into the allocator. */
__attribute__((noinline, cold)) static void *je_alloc_timed(je_ctx *c, size_t size, size_t align) {
    uint64_t t0 = alloc_now_ns();
    void *p = mallocx(size ? size : 1, c->flags | MALLOCX_ALIGN(align));
    c->ns += alloc_now_ns() - t0;
    if (p) je_count_alloc(c, size);
    return p;
}

static void *je_alloc(void *ctx, size_t size, size_t align) {
    je_ctx *c = ctx;
    if (__builtin_expect(c->timing, 0)) return je_alloc_timed(c, size, align);
    void *p = mallocx(size ? size : 1, c->flags | MALLOCX_ALIGN(align));
    if (p) je_count_alloc(c, size);
    return p;
}

__attribute__((noinline, cold)) static void je_free_timed(je_ctx *c, void *p) {
    uint64_t t0 = alloc_now_ns();
    dallocx(p, c->flags);
    c->ns += alloc_now_ns() - t0;
}

static void je_free(void *ctx, void *p, size_t size) {
    je_ctx *c = ctx;
    if (!p) return;
    c->frees++;
    c->bytes_live -= size;
    if (__builtin_expect(c->timing, 0)) {
        je_free_timed(c, p);
        return;
    }
    dallocx(p, c->flags);
}

static void je_counters(void *ctx, const bench_counter_sink *s) {
    je_ctx *c = ctx;
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->allocs);
    bench_emit_as(s, "frees", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->frees);
    bench_emit(s, "bytes_live", "B", (double)c->bytes_live);
    bench_emit(s, "bytes_peak", "B", (double)c->bytes_peak);
    /* jemalloc's own view, process-wide (only this module uses jemalloc). Refreshed by "epoch". */
    uint64_t epoch = 1;
    size_t mapped = 0, len = sizeof(mapped);
    if (!mallctl("epoch", &epoch, &(size_t){sizeof(epoch)}, &epoch, sizeof(epoch)) &&
        !mallctl("stats.mapped", &mapped, &len, NULL, 0))
        bench_emit(s, "bytes_reserved", "B", (double)mapped);
    if (c->timing) bench_emit(s, "time_in_alloc", "ns", (double)c->ns);
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
