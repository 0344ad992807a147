/* alloc "mimalloc": mimalloc 2 through mi_malloc_aligned/mi_free, a baseline.
 * Loading it does not replace the process's malloc: libmimalloc's malloc/free come
 * after libc's in the lookup order of a dlopen'ed library, so only the mi_* calls
 * below reach mimalloc. */
#include <mimalloc.h>

#include "allocators/alloc_common.h"
#include "engines/abi/alloc.h"

static const bench_option_desc mi_options[] = {
    {"timing", "bool", "0", "time every call with clock_gettime (costs ~2x20 ns per call)"},
    {NULL, NULL, NULL, NULL},
};

typedef struct mi_ctx {
    int timing;
    uint64_t allocs, frees, bytes_live, bytes_peak, ns;
} mi_ctx;

static int mi_create(const bench_opts *opts, void **out, char *err, size_t errlen) {
    int timing = 0;
    if (bench_opt_bool(opts, mi_options, "alloc mimalloc", "timing", &timing, err, errlen)) return -1;
    mi_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errf(err, errlen, "alloc mimalloc: out of memory");
    c->timing = timing;
    *out = c;
    return 0;
}

static void *mi_alloc(void *ctx, size_t size, size_t align) {
    mi_ctx *c = ctx;
    uint64_t t0 = c->timing ? alloc_now_ns() : 0;
    void *p = mi_malloc_aligned(size, align);
    if (c->timing) c->ns += alloc_now_ns() - t0;
    if (p) {
        c->allocs++;
        c->bytes_live += size;
        if (c->bytes_live > c->bytes_peak) c->bytes_peak = c->bytes_live;
    }
    return p;
}

static void mi_free_cb(void *ctx, void *p, size_t size) {
    mi_ctx *c = ctx;
    if (!p) return;
    uint64_t t0 = c->timing ? alloc_now_ns() : 0;
    mi_free(p);
    if (c->timing) c->ns += alloc_now_ns() - t0;
    c->frees++;
    c->bytes_live -= size;
}

static void mi_counters(void *ctx, const bench_counter_sink *s) {
    mi_ctx *c = ctx;
    bench_emit(s, "allocs", "count", (double)c->allocs);
    bench_emit(s, "frees", "count", (double)c->frees);
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
    .options = mi_options,
    .score = NULL,
    .iface = &mi_iface,
};

const bench_module *bench_module_init(void) { return &mi_module; }
