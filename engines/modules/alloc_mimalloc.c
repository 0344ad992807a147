/* alloc "mimalloc": mimalloc 2 through mi_malloc_aligned/mi_free, a baseline.
 * Loading it does not replace the process's malloc: libmimalloc's malloc/free come
 * after libc's in the lookup order of a dlopen'ed library, so only the mi_* calls
 * below reach mimalloc. */
#include <mimalloc.h>

#include "allocators/alloc_common.h"
#include "engines/abi/alloc.h"

typedef struct mi_opts {
    int timing;
} mi_opts;

static const bench_option mi_options[] = {
    BENCH_OPTION_BOOL(mi_opts, timing, "0", "time every call with clock_gettime (costs ~2x20 ns per call)"),
    BENCH_OPTION_END,
};

typedef struct mi_ctx {
    int timing;
    uint64_t allocs, frees, bytes_live, bytes_peak, ns;
} mi_ctx;

static int mi_create(const void *opts, void **out, char *err, size_t errlen) {
    int timing = ((const mi_opts *)opts)->timing;
    mi_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc mimalloc: out of memory");
    c->timing = timing;
    *out = c;
    return 0;
}

/* The counts every call makes (the module's counters). */
static inline void mi_mod_count_alloc(mi_ctx *c, size_t size) {
    c->allocs++;
    c->bytes_live += size;
    if (c->bytes_live > c->bytes_peak) c->bytes_peak = c->bytes_live;
}

/* The timed variants are out of line, so an untimed call (the default) pays one test of
 * c->timing, and a free is a tail call into the allocator. */
__attribute__((noinline, cold)) static void *mi_alloc_timed(mi_ctx *c, size_t size, size_t align) {
    uint64_t t0 = alloc_now_ns();
    void *p = mi_malloc_aligned(size, align);
    c->ns += alloc_now_ns() - t0;
    if (p) mi_mod_count_alloc(c, size);
    return p;
}

static void *mi_alloc(void *ctx, size_t size, size_t align) {
    mi_ctx *c = ctx;
    if (__builtin_expect(c->timing, 0)) return mi_alloc_timed(c, size, align);
    void *p = mi_malloc_aligned(size, align);
    if (p) mi_mod_count_alloc(c, size);
    return p;
}

__attribute__((noinline, cold)) static void mi_free_cb_timed(mi_ctx *c, void *p) {
    uint64_t t0 = alloc_now_ns();
    mi_free(p);
    c->ns += alloc_now_ns() - t0;
}

static void mi_free_cb(void *ctx, void *p, size_t size) {
    mi_ctx *c = ctx;
    if (!p) return;
    c->frees++;
    c->bytes_live -= size;
    if (__builtin_expect(c->timing, 0)) {
        mi_free_cb_timed(c, p);
        return;
    }
    mi_free(p);
}

static void mi_counters(void *ctx, const bench_counter_sink *s) {
    mi_ctx *c = ctx;
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->allocs);
    bench_emit_as(s, "frees", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->frees);
    bench_emit(s, "bytes_live", "B", (double)c->bytes_live);
    bench_emit(s, "bytes_peak", "B", (double)c->bytes_peak);
    /* mimalloc's committed memory, process-wide (only this module uses mimalloc). */
    size_t commit = 0, peak_commit = 0;
    mi_process_info(NULL, NULL, NULL, NULL, NULL, &commit, &peak_commit, NULL);
    bench_emit(s, "bytes_reserved", "B", (double)commit);
    if (c->timing) bench_emit(s, "time_in_alloc", "ns", (double)c->ns);
}

static void mi_destroy(void *ctx) { free(ctx); }

static const struct bench_alloc_iface mi_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .create = mi_create,
    .alloc = mi_alloc,
    .free = mi_free_cb,
    .reset = NULL,
    .counters = mi_counters,
    .destroy = mi_destroy,
};

static const bench_module mi_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "alloc",
    .name = "mimalloc",
    .summary = "mimalloc 2 mi_malloc_aligned/mi_free (baseline)",
    .devices = "cpu",
    .caps = BENCH_CAP_ALLOC_THREAD_SAFE,
    .options = mi_options,
    .opts_size = sizeof(mi_opts),
    .score = NULL,
    .iface = &mi_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &mi_module; }
