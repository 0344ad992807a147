/* alloc "arena": bump allocation, reset by the engine after every forward step.
 * free() does nothing (a block lives until reset); in debug builds it checks that
 * the pointer is a live block of this arena, which catches frees of foreign pointers
 * and of blocks dropped by an earlier reset. */
#include "allocators/arena.h"
#include "engines/abi/alloc.h"

typedef struct arena_opts {
    uint64_t chunk;
    int grow, timing;
} arena_opts;

static const bench_option arena_options[] = {
    BENCH_OPTION_SIZE(arena_opts, chunk, "4m", 1, 1ll << 40, "bytes mapped per chunk; a larger request gets a chunk of its own"),
    BENCH_OPTION_BOOL(arena_opts, grow, "1", "1: map another chunk when full; 0: fail (NULL) when the chunks are used up"),
    BENCH_OPTION_BOOL(arena_opts, timing, "0", "time every call with clock_gettime (costs ~2x20 ns per call)"),
    BENCH_OPTION_END,
};

typedef struct arena_mod {
    arena *a;
    int timing;
    uint64_t frees;    /* calls to free (each a no-op) */
    uint64_t resets;
    uint64_t ns;       /* in arena_alloc/reset, when timing */
} arena_mod;

static int arena_mod_create(const void *opts, void **out, char *err, size_t errlen) {
    const arena_opts *o = opts;
    uint64_t chunk = o->chunk;
    int grow = o->grow, timing = o->timing;
    arena_mod *m = calloc(1, sizeof(*m));
    if (!m) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc arena: out of memory");
    m->timing = timing;
    m->a = arena_create((size_t)chunk, grow);
    if (!m->a) {
        free(m);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc arena: cannot map a %llu B chunk", (unsigned long long)chunk);
    }
    *out = m;
    return 0;
}

/* The timed variants are out of line, so the untimed calls (the default) need no
 * stack frame: they test m->timing and run the inlined bump (arena.h). */
__attribute__((noinline, cold)) static void *arena_mod_alloc_timed(arena_mod *m, size_t size, size_t align) {
    uint64_t t0 = alloc_now_ns();
    void *p = arena_alloc(m->a, size, align);
    m->ns += alloc_now_ns() - t0;
    return p;
}

static void *arena_mod_alloc(void *ctx, size_t size, size_t align) {
    arena_mod *m = ctx;
    if (__builtin_expect(m->timing, 0)) return arena_mod_alloc_timed(m, size, align);
    return arena_alloc(m->a, size, align);
}

static void arena_mod_free(void *ctx, void *p, size_t size) {
    arena_mod *m = ctx;
    if (!p) return;
    arena_verify_free(m->a, p, size);   /* compiled away without BENCH_ALLOC_DEBUG */
    m->frees++;
}

__attribute__((noinline, cold)) static void arena_mod_reset_timed(arena_mod *m) {
    uint64_t t0 = alloc_now_ns();
    arena_reset(m->a);
    m->ns += alloc_now_ns() - t0;
    m->resets++;
}

static void arena_mod_reset(void *ctx) {
    arena_mod *m = ctx;
    if (__builtin_expect(m->timing, 0)) {
        arena_mod_reset_timed(m);
        return;
    }
    arena_reset(m->a);
    m->resets++;
}

static void arena_mod_counters(void *ctx, const bench_counter_sink *s) {
    arena_mod *m = ctx;
    alloc_stats st;
    arena_get_stats(m->a, &st);
    if (BENCH_ALLOC_STATS) {
        bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)st.allocs);
        bench_emit(s, "bytes_live", "B", (double)st.bytes_live);
        bench_emit(s, "bytes_peak", "B", (double)st.bytes_peak);
        bench_emit(s, "bytes_reserved", "B", (double)st.bytes_reserved);
        bench_emit(s, "failed", "count", (double)st.failed);
    }
    bench_emit_as(s, "frees", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)m->frees);
    bench_emit(s, "resets", "count", (double)m->resets);
    bench_emit(s, "chunks", "count", (double)arena_chunk_count(m->a));
    if (m->timing) bench_emit(s, "time_in_alloc", "ns", (double)m->ns);
}

static void arena_mod_destroy(void *ctx) {
    arena_mod *m = ctx;
    if (!m) return;
    arena_destroy(m->a);
    free(m);
}

static const struct bench_alloc_iface arena_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .create = arena_mod_create,
    .alloc = arena_mod_alloc,
    .free = arena_mod_free,   /* no-op: blocks live until reset */
    .reset = arena_mod_reset,
    .counters = arena_mod_counters,
    .destroy = arena_mod_destroy,
};

static const bench_module arena_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "alloc",
    .name = "arena",
    .summary = "bump pointer over mmap'd chunks, O(1) reset per forward step; free is a no-op",
    .devices = "cpu",
    .caps = BENCH_CAP_ALLOC_RESET,
    .options = arena_options,
    .opts_size = sizeof(arena_opts),
    .score = NULL,
    .iface = &arena_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &arena_module; }
