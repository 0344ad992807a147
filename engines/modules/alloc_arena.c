/* alloc "arena": bump allocation, reset by the engine after every forward step.
 * free() does nothing (a block lives until reset); in debug builds it checks that
 * the pointer is a live block of this arena, which catches frees of foreign pointers
 * and of blocks dropped by an earlier reset. */
#include "allocators/arena.h"
#include "common/alloc_mod.h"

typedef struct arena_opts {
    uint64_t chunk;
    int grow, timing;
} arena_opts;

static const bench_option arena_options[] = {
    BENCH_OPTION_SIZE(arena_opts, chunk, "4m", 1, 1ll << 40, "bytes mapped per chunk; a larger request gets a chunk of its own"),
    BENCH_OPTION_BOOL(arena_opts, grow, "1", "1: map another chunk when full; 0: fail (NULL) when the chunks are used up"),
    BENCH_OPTION_ALLOC_TIMING(arena_opts),
    BENCH_OPTION_END,
};

typedef struct arena_mod {
    alloc_mod base;     /* first: the shared calls and counters take the context as one */
    arena *a;
    uint64_t frees;     /* calls to free (each a no-op) */
    uint64_t resets;
} arena_mod;

static int arena_mod_create(const void *opts, void **out, char *err, size_t errlen) {
    const arena_opts *o = opts;
    uint64_t chunk = o->chunk;
    arena_mod *m = calloc(1, sizeof(*m));
    if (!m) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc arena: out of memory");
    m->base.timing = o->timing;
    m->a = arena_create((size_t)chunk, o->grow);
    if (!m->a) {
        free(m);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc arena: cannot map a %llu B chunk", (unsigned long long)chunk);
    }
    *out = m;
    return 0;
}

/* inline: arena.h's bump is inlined into the module's alloc (untimed, it needs no stack frame),
 * as it was before the shared calls; gcc would otherwise keep it out of line for its size. */
static inline void *arena_op_alloc(void *ctx, size_t size, size_t align) { return arena_alloc(((arena_mod *)ctx)->a, size, align); }
static inline void arena_op_reset(void *ctx) {
    arena_mod *m = ctx;
    arena_reset(m->a);
    m->resets++;
}
static const alloc_mod_ops arena_ops = {.alloc = arena_op_alloc, .reset = arena_op_reset};

static void *arena_mod_alloc(void *ctx, size_t size, size_t align) { return alloc_mod_alloc(ctx, &arena_ops, size, align); }
static void arena_mod_reset(void *ctx) { alloc_mod_reset(ctx, &arena_ops); }

/* Not through the shared calls: free is no call into the arena, and is not timed. */
static void arena_mod_free(void *ctx, void *p, size_t size) {
    arena_mod *m = ctx;
    if (!p) return;
    arena_verify_free(m->a, p, size);   /* compiled away without BENCH_ALLOC_DEBUG */
    m->frees++;
}

static void arena_mod_counters(void *ctx, const bench_counter_sink *s) {
    arena_mod *m = ctx;
    alloc_stats st;
    arena_get_stats(m->a, &st);
    st.frees = m->frees;   /* the calls to free, not the blocks a reset dropped (alloc_common.h) */
    alloc_mod_emit_stats(s, &st);
    if (!BENCH_ALLOC_STATS)
        bench_emit_as(s, "frees", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)m->frees);
    bench_emit(s, "resets", "count", (double)m->resets);
    bench_emit(s, "chunks", "count", (double)arena_chunk_count(m->a));
    alloc_mod_emit_time(&m->base, s);
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
