/* alloc "slab": 40 size classes (16 B .. 32 KiB) with per-thread caches; larger
 * requests go to mmap, with freed mappings cached for reuse. */
#include "allocators/slab.h"
#include "common/alloc_mod.h"

typedef struct slab_opts {
    uint64_t region, large_cache;
    int timing;
} slab_opts;

static const bench_option slab_options[] = {
    BENCH_OPTION_SIZE(slab_opts, region, "1g", SLAB_BYTES, 1ll << 46, "address space reserved for slabs (MAP_NORESERVE: pages are touched on use)"),
    BENCH_OPTION_SIZE(slab_opts, large_cache, "64m", 0, 1ll << 46, "bytes of freed mappings above 32 KiB kept for reuse (0: munmap at once)"),
    BENCH_OPTION_ALLOC_TIMING(slab_opts),
    BENCH_OPTION_END,
};

typedef struct slab_mod {
    alloc_mod base;     /* first: the shared calls and counters take the context as one */
    slab *s;
} slab_mod;

static int slab_mod_create(const void *opts, void **out, char *err, size_t errlen) {
    const slab_opts *o = opts;
    uint64_t region = o->region, cache = o->large_cache;
    slab_mod *m = calloc(1, sizeof(*m));
    if (!m) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc slab: out of memory");
    m->base.timing = o->timing;
    m->s = slab_create((size_t)region, (size_t)cache);
    if (!m->s) {
        free(m);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc slab: cannot reserve %llu B", (unsigned long long)region);
    }
    *out = m;
    return 0;
}

static void *slab_op_alloc(void *ctx, size_t size, size_t align) { return slab_alloc(((slab_mod *)ctx)->s, size, align); }
static void slab_op_free(void *ctx, void *p, size_t size) { slab_free(((slab_mod *)ctx)->s, p, size); }
static const alloc_mod_ops slab_ops = {.alloc = slab_op_alloc, .free = slab_op_free};

static void *slab_mod_alloc(void *ctx, size_t size, size_t align) { return alloc_mod_alloc(ctx, &slab_ops, size, align); }
static void slab_mod_free(void *ctx, void *p, size_t size) { alloc_mod_free(ctx, &slab_ops, p, size); }

static void slab_mod_counters(void *ctx, const bench_counter_sink *s) {
    slab_mod *m = ctx;
    alloc_stats st;
    slab_get_stats(m->s, &st);
    alloc_mod_emit_stats(s, &st);
    if (BENCH_ALLOC_STATS) {
        bench_emit_as(s, "large_allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)st.large_allocs);
        uint64_t refills, flushes;
        slab_get_trips(m->s, &refills, &flushes);
        bench_emit(s, "central_refills", "count", (double)refills);
        bench_emit(s, "central_flushes", "count", (double)flushes);
    }
    alloc_mod_emit_time(&m->base, s);
}

static void slab_mod_destroy(void *ctx) {
    slab_mod *m = ctx;
    if (!m) return;
    slab_destroy(m->s);
    free(m);
}

static const struct bench_alloc_iface slab_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .create = slab_mod_create,
    .alloc = slab_mod_alloc,
    .free = slab_mod_free,
    .reset = NULL,   /* blocks are freed one by one */
    .counters = slab_mod_counters,
    .destroy = slab_mod_destroy,
};

static const bench_module slab_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "alloc",
    .name = "slab",
    .summary = "size classes 16 B..32 KiB with per-thread caches; larger sizes mmap'd and cached",
    .devices = "cpu",
    .caps = BENCH_CAP_ALLOC_THREAD_SAFE,
    .options = slab_options,
    .opts_size = sizeof(slab_opts),
    .score = NULL,
    .iface = &slab_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &slab_module; }
