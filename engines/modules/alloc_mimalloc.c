/* alloc "mimalloc": mimalloc 2 through mi_malloc_aligned/mi_free, a baseline.
 * Loading it does not replace the process's malloc: libmimalloc's malloc/free come
 * after libc's in the lookup order of a dlopen'ed library, so only the mi_* calls
 * below reach mimalloc. */
#include <mimalloc.h>

#include "common/alloc_mod.h"

typedef struct mi_opts {
    int timing;
} mi_opts;

static const bench_option mi_options[] = {
    BENCH_OPTION_ALLOC_TIMING(mi_opts),
    BENCH_OPTION_END,
};

static int mi_create(const void *opts, void **out, char *err, size_t errlen) {
    alloc_mod *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc mimalloc: out of memory");
    c->timing = ((const mi_opts *)opts)->timing;
    *out = c;
    return 0;
}

static void *mi_op_alloc(void *ctx, size_t size, size_t align) {
    (void)ctx;
    return mi_malloc_aligned(size, align);
}
static void mi_op_free(void *ctx, void *p, size_t size) {
    (void)ctx, (void)size;
    mi_free(p);
}
static const alloc_mod_ops mi_ops = {.alloc = mi_op_alloc, .free = mi_op_free, .counts = 1};

static void *mi_alloc(void *ctx, size_t size, size_t align) { return alloc_mod_alloc(ctx, &mi_ops, size, align); }
static void mi_free_cb(void *ctx, void *p, size_t size) { alloc_mod_free(ctx, &mi_ops, p, size); }

static void mi_counters(void *ctx, const bench_counter_sink *s) {
    alloc_mod *c = ctx;
    alloc_mod_emit_counts(s, &c->counted);
    /* mimalloc's committed memory, process-wide (only this module uses mimalloc). */
    size_t commit = 0, peak_commit = 0;
    mi_process_info(NULL, NULL, NULL, NULL, NULL, &commit, &peak_commit, NULL);
    bench_emit(s, "bytes_reserved", "B", (double)commit);
    alloc_mod_emit_time(c, s);
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
