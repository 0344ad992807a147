/* alloc "buddy": power-of-two blocks split and coalesced over one reserved region. */
#include "allocators/buddy.h"
#include "common/alloc_mod.h"

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
    BENCH_OPTION_ALLOC_TIMING(buddy_opts),
    BENCH_OPTION_END,
};

typedef struct buddy_mod {
    alloc_mod base;     /* first: the shared calls and counters take the context as one */
    buddy *b;
} buddy_mod;

static int buddy_mod_create(const void *opts, void **out, char *err, size_t errlen) {
    const buddy_opts *o = opts;
    uint64_t region = o->region, min_block = o->min_block, cache = (uint64_t)o->cache;
    if (min_block > region || (min_block & (min_block - 1)))
        return bench_errf(err, errlen, "alloc buddy: option min_block=%llu: expected a power of two in [16, region]",
                          (unsigned long long)min_block);
    buddy_mod *m = calloc(1, sizeof(*m));
    if (!m) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc buddy: out of memory");
    m->base.timing = o->timing;
    m->b = buddy_create((size_t)region, (size_t)min_block, (unsigned)cache, o->locked);
    if (!m->b) {
        free(m);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc buddy: cannot reserve %llu B", (unsigned long long)region);
    }
    *out = m;
    return 0;
}

static void *buddy_op_alloc(void *ctx, size_t size, size_t align) { return buddy_alloc(((buddy_mod *)ctx)->b, size, align); }
static void buddy_op_free(void *ctx, void *p, size_t size) { buddy_free(((buddy_mod *)ctx)->b, p, size); }
static const alloc_mod_ops buddy_ops = {.alloc = buddy_op_alloc, .free = buddy_op_free};

static void *buddy_mod_alloc(void *ctx, size_t size, size_t align) { return alloc_mod_alloc(ctx, &buddy_ops, size, align); }
static void buddy_mod_free(void *ctx, void *p, size_t size) { alloc_mod_free(ctx, &buddy_ops, p, size); }

static void buddy_mod_counters(void *ctx, const bench_counter_sink *s) {
    buddy_mod *m = ctx;
    alloc_stats st;
    buddy_get_stats(m->b, &st);
    alloc_mod_emit_stats(s, &st);
    bench_emit(s, "region", "B", (double)buddy_region(m->b));
    alloc_mod_emit_time(&m->base, s);
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
