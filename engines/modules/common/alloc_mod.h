/* What the six alloc modules (engines/modules/alloc_*.c) share: the timing option, the timed
 * calls, the counts a baseline keeps of what passes through it, and the counters every one
 * reports. Header-only, as module.h is: modules link nothing of bench's.
 *
 * A module's context starts with an alloc_mod, and the module describes its allocator as a
 * static const alloc_mod_ops. Its vtable slots forward to alloc_mod_alloc / _free / _reset
 * with those ops: there they are constants, so the compiler calls (or inlines) the allocator
 * directly, and an untimed call (the default) stays a test of m->timing and a tail call. The
 * timed variants are out of line and cold: two clock reads (~2x20 ns) cost more than a cached
 * alloc/free pair, so timing is an option, off by default.
 *
 * Counters, in the order a module reports them:
 *   allocs, frees, bytes_live, bytes_peak    every module (alloc_mod_emit_counts)
 *   bytes_reserved, failed                   arena, buddy, slab, from their stats (alloc_mod_emit_stats)
 *   the module's own                         region, chunks, large_allocs, jemalloc's mapped bytes...
 *   time_in_alloc (ns)                       last, with timing=1 (alloc_mod_emit_time)
 */
#ifndef BENCH_ALLOC_MOD_H
#define BENCH_ALLOC_MOD_H

#include "allocators/alloc_common.h"
#include "engines/abi/alloc.h"

/* The option every alloc module has, a row of its table: BENCH_OPTION_ALLOC_TIMING(my_opts). */
#define BENCH_OPTION_ALLOC_TIMING(type) \
    BENCH_OPTION_BOOL(type, timing, "0", "time every call with clock_gettime (costs ~2x20 ns per call)")

/* Every slot takes the module's context (which starts with its alloc_mod). */
typedef struct alloc_mod_ops {
    void *(*alloc)(void *ctx, size_t size, size_t align);   /* NULL when out of memory */
    void (*free)(void *ctx, void *p, size_t size);           /* p is not NULL where counts is set */
    void (*reset)(void *ctx);                                /* (optional) BENCH_CAP_ALLOC_RESET */
    /* 1: the module counts what passes through (a baseline: libc, jemalloc, mimalloc, whose
     * allocators keep no per-caller stats); 0: the allocator's own stats do (arena, buddy, slab) */
    int counts;
} alloc_mod_ops;

typedef struct alloc_mod {
    int timing;             /* option timing: every call timed */
    uint64_t ns;            /* in the allocator's calls, when timing (callers on one thread) */
    alloc_stats counted;    /* ops->counts: allocs, frees, bytes_live, bytes_peak of what passed through */
} alloc_mod;

static inline void alloc_mod_count_alloc(alloc_mod *m, size_t size) {
    m->counted.allocs++;
    m->counted.bytes_live += size;
    if (m->counted.bytes_live > m->counted.bytes_peak) m->counted.bytes_peak = m->counted.bytes_live;
}

/* ---- the calls: the module's vtable slots forward here with its ops ---- */

__attribute__((noinline, cold, unused)) static void *alloc_mod_alloc_timed(void *ctx, const alloc_mod_ops *ops,
                                                                          size_t size, size_t align) {
    alloc_mod *m = ctx;
    uint64_t t0 = alloc_now_ns();
    void *p = ops->alloc(ctx, size, align);
    m->ns += alloc_now_ns() - t0;
    return p;
}

static inline void *alloc_mod_alloc(void *ctx, const alloc_mod_ops *ops, size_t size, size_t align) {
    alloc_mod *m = ctx;
    if (!ops->counts) {
        if (__builtin_expect(m->timing, 0)) return alloc_mod_alloc_timed(ctx, ops, size, align);
        return ops->alloc(ctx, size, align);
    }
    void *p = __builtin_expect(m->timing, 0) ? alloc_mod_alloc_timed(ctx, ops, size, align) : ops->alloc(ctx, size, align);
    if (p) alloc_mod_count_alloc(m, size);
    return p;
}

__attribute__((noinline, cold, unused)) static void alloc_mod_free_timed(void *ctx, const alloc_mod_ops *ops, void *p,
                                                                        size_t size) {
    alloc_mod *m = ctx;
    uint64_t t0 = alloc_now_ns();
    ops->free(ctx, p, size);
    m->ns += alloc_now_ns() - t0;
}

/* A counting module passes no NULL on (free(NULL) is not a call it counts); the others hand
 * it to their allocator, which takes it. */
static inline void alloc_mod_free(void *ctx, const alloc_mod_ops *ops, void *p, size_t size) {
    alloc_mod *m = ctx;
    if (ops->counts) {
        if (!p) return;
        m->counted.frees++;
        m->counted.bytes_live -= size;
    }
    if (__builtin_expect(m->timing, 0)) {
        alloc_mod_free_timed(ctx, ops, p, size);
        return;
    }
    ops->free(ctx, p, size);
}

__attribute__((noinline, cold, unused)) static void alloc_mod_reset_timed(void *ctx, const alloc_mod_ops *ops) {
    alloc_mod *m = ctx;
    uint64_t t0 = alloc_now_ns();
    ops->reset(ctx);
    m->ns += alloc_now_ns() - t0;
}

static inline void alloc_mod_reset(void *ctx, const alloc_mod_ops *ops) {
    alloc_mod *m = ctx;
    if (__builtin_expect(m->timing, 0)) {
        alloc_mod_reset_timed(ctx, ops);
        return;
    }
    ops->reset(ctx);
}

/* ---- the counters (results.json's mod.alloc.<name>: readers depend on the names) ---- */

/* allocs, frees, bytes_live, bytes_peak: what every alloc module reports. */
static inline void alloc_mod_emit_counts(const bench_counter_sink *s, const alloc_stats *st) {
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)st->allocs);
    bench_emit_as(s, "frees", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)st->frees);
    bench_emit(s, "bytes_live", "B", (double)st->bytes_live);
    bench_emit(s, "bytes_peak", "B", (double)st->bytes_peak);
}

/* An allocator of bench's own (arena, buddy, slab): its stats, when they are compiled in
 * (BENCH_ALLOC_STATS). bytes_reserved is what the allocator says it is (buddy: the region's
 * high-water mark, not the reservation: see buddy.h). */
static inline void alloc_mod_emit_stats(const bench_counter_sink *s, const alloc_stats *st) {
    if (!BENCH_ALLOC_STATS) return;
    alloc_mod_emit_counts(s, st);
    bench_emit(s, "bytes_reserved", "B", (double)st->bytes_reserved);
    bench_emit(s, "failed", "count", (double)st->failed);
}

/* time_in_alloc, the last counter, with timing=1. */
static inline void alloc_mod_emit_time(const alloc_mod *m, const bench_counter_sink *s) {
    if (m->timing) bench_emit(s, "time_in_alloc", "ns", (double)m->ns);
}

#endif
