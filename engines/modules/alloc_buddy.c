/* alloc "buddy": power-of-two blocks split and coalesced over one reserved region. */
#include "allocators/buddy.h"
#include "engines/abi/alloc.h"

typedef struct buddy_opts {
    uint64_t region, min_block;
    int64_t cache;
    int locked, timing;
} buddy_opts;

static const bench_option buddy_options[] = {
    BENCH_OPTION_SIZE(buddy_opts, region, "1g", 1, 1ll << 46, "address space reserved (rounded up to a power of two; MAP_NORESERVE); the largest block"),
    BENCH_OPTION_SIZE(buddy_opts, min_block, "64", 16, 1ll << 46, "smallest block, a power of two >= 16 (at most region)"),
    BENCH_OPTION_INT(buddy_opts, cache, "8", 0, 64, "freed blocks (up to 1 MiB) held back from coalescing per order, for reuse (0: none)"),
    BENCH_OPTION_BOOL(buddy_opts, locked, "0", "1: a mutex around every call, for use from several threads"),
    BENCH_OPTION_BOOL(buddy_opts, timing, "0", "time every call with clock_gettime (costs ~2x20 ns per call)"),
    BENCH_OPTION_END,
};

typedef struct buddy_mod {
    buddy *b;
    int timing;
    uint64_t ns;
} buddy_mod;

static int buddy_mod_create(const void *opts, void **out, char *err, size_t errlen) {
    const buddy_opts *o = opts;
    uint64_t region = o->region, min_block = o->min_block, cache = (uint64_t)o->cache;
    int locked = o->locked, timing = o->timing;
    if (min_block > region || (min_block & (min_block - 1)))
        return bench_errf(err, errlen, "alloc buddy: option min_block=%llu: expected a power of two in [16, region]",
                          (unsigned long long)min_block);
    buddy_mod *m = calloc(1, sizeof(*m));
    if (!m) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc buddy: out of memory");
    m->timing = timing;
    m->b = buddy_create((size_t)region, (size_t)min_block, (unsigned)cache, locked);
    if (!m->b) {
        free(m);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc buddy: cannot reserve %llu B", (unsigned long long)region);
    }
    *out = m;
    return 0;
}

/* The timed variants are out of line, so the untimed calls (the default) are a test
 * of m->timing and a tail call: no stack frame of their own. */
__attribute__((noinline, cold)) static void *buddy_mod_alloc_timed(buddy_mod *m, size_t size, size_t align) {
    uint64_t t0 = alloc_now_ns();
    void *p = buddy_alloc(m->b, size, align);
    m->ns += alloc_now_ns() - t0;
    return p;
}

static void *buddy_mod_alloc(void *ctx, size_t size, size_t align) {
    buddy_mod *m = ctx;
    if (__builtin_expect(m->timing, 0)) return buddy_mod_alloc_timed(m, size, align);
    return buddy_alloc(m->b, size, align);
}

__attribute__((noinline, cold)) static void buddy_mod_free_timed(buddy_mod *m, void *p, size_t size) {
    uint64_t t0 = alloc_now_ns();
    buddy_free(m->b, p, size);
    m->ns += alloc_now_ns() - t0;
}

static void buddy_mod_free(void *ctx, void *p, size_t size) {
    buddy_mod *m = ctx;
    if (__builtin_expect(m->timing, 0)) {
        buddy_mod_free_timed(m, p, size);
        return;
    }
    buddy_free(m->b, p, size);
}

static void buddy_mod_counters(void *ctx, const bench_counter_sink *s) {
    buddy_mod *m = ctx;
    alloc_stats st;
    buddy_get_stats(m->b, &st);
    if (BENCH_ALLOC_STATS) {
        bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)st.allocs);
        bench_emit_as(s, "frees", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)st.frees);
        bench_emit(s, "bytes_live", "B", (double)st.bytes_live);
        bench_emit(s, "bytes_peak", "B", (double)st.bytes_peak);
        /* the region's high-water mark, not the reservation: see buddy.h */
        bench_emit(s, "bytes_reserved", "B", (double)st.bytes_reserved);
        bench_emit(s, "failed", "count", (double)st.failed);
    }
    bench_emit(s, "region", "B", (double)buddy_region(m->b));
    if (m->timing) bench_emit(s, "time_in_alloc", "ns", (double)m->ns);
}

static void buddy_mod_destroy(void *ctx) {
    buddy_mod *m = ctx;
    if (!m) return;
    buddy_destroy(m->b);
    free(m);
}

static const struct bench_alloc_iface buddy_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .create = buddy_mod_create,
    .alloc = buddy_mod_alloc,
    .free = buddy_mod_free,
    .reset = NULL,
    .counters = buddy_mod_counters,
    .destroy = buddy_mod_destroy,
};

static const bench_module buddy_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "alloc",
    .name = "buddy",
    .summary = "power-of-two blocks, split and coalesced in O(log n) over one reserved region",
    .devices = "cpu",
    .options = buddy_options,
    .opts_size = sizeof(buddy_opts),
    .score = NULL,
    .iface = &buddy_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &buddy_module; }
