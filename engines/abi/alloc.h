/* Family "alloc": where the engine's scratch/activation memory and the KV
 * modules' backing memory come from. Version BENCH_ALLOC_IFACE_VERSION.
 *
 * Lifetimes: every block from alloc() is given back by free() with the same
 * size, or dropped all at once by reset() where the allocator has one (arena).
 */
#ifndef BENCH_ALLOC_H
#define BENCH_ALLOC_H

#include "module.h"

/* Version 2 (module API 2): create takes the module's filled options struct; thread safety
 * and reset are declared as capabilities (BENCH_CAP_ALLOC_*). */
#define BENCH_ALLOC_IFACE_VERSION 2u

struct bench_alloc_iface {
    uint32_t version;   /* BENCH_ALLOC_IFACE_VERSION */
    int   (*create)(const void *opts, void **ctx, char *err, size_t errlen);
    /* size > 0; align is a power of two >= sizeof(void*). NULL when out of memory. */
    void *(*alloc)(void *ctx, size_t size, size_t align);
    /* p may be NULL. size is the size given to alloc. */
    void  (*free)(void *ctx, void *p, size_t size);
    /* BENCH_CAP_ALLOC_RESET: drops every live block at once; NULL without the capability. */
    void  (*reset)(void *ctx);
    /* (optional) allocations, bytes live, peak bytes, ns spent in the allocator... */
    void  (*counters)(void *ctx, const bench_counter_sink *sink);
    void  (*destroy)(void *ctx);   /* ctx may be NULL */
};

static inline void *bench_alloc(const bench_allocator *a, size_t size, size_t align) {
    if (!a) {
        /* ISO C's aligned_alloc, so that a module built with plain -std=c17 (no _GNU_SOURCE)
         * compiles this header: it wants the size a multiple of the alignment */
        if (align < sizeof(void *)) align = sizeof(void *);
        return size > SIZE_MAX - align ? NULL : aligned_alloc(align, (size + align - 1) / align * align);
    }
    return a->iface->alloc(a->ctx, size, align < sizeof(void *) ? sizeof(void *) : align);
}
static inline void bench_free(const bench_allocator *a, void *p, size_t size) {
    if (!a) { free(p); return; }
    a->iface->free(a->ctx, p, size);
}
/* counters, default: none (libc's NULL allocator has none either) */
static inline void bench_alloc_counters(const bench_allocator *a, const bench_counter_sink *sink) {
    if (a && a->iface->counters) a->iface->counters(a->ctx, sink);
}

#endif
