/* arena: a bump allocator over a list of chunks, dropped all at once.
 *
 * Glossary
 *   chunk     one mmap'd block of address space; a header, then the bytes handed out.
 *   cur       the chunk allocations come from now; chunks after it are kept, empty, for reuse.
 *   top       offset in cur of the first byte not yet handed out.
 *   mark      a saved (chunk, top) position; rollback returns to it and drops what came after.
 *   reset     rollback to the very start: every block is dropped, every chunk kept.
 *
 * Invariants (checked by arena_check)
 *   chunks = c_0 -> c_1 -> ... -> c_n,  cur = c_k for some 0 <= k <= n
 *   for every chunk c:  sizeof(header) <= c.top <= c.size
 *   data(cur) <= ptr <= end = cur + cur.size
 *   first_data = data(c_0),  first_end = c_0 + c_0.size        (what reset restores)
 *   blocks live  =  [data(c_i), c_i.top) for i < k   plus   [data(c_k), ptr)
 *   chunks after cur hold no live block (their top is stale and ignored)
 *   bytes_reserved = sum(c_i.size)                 (statistics on)
 *   bytes_live     = sum of sizes allocated since the last reset, less those rolled back
 *   peak           = max(st.bytes_peak, bytes_live): bytes_live only grows between two
 *                    resets or rollbacks, so st.bytes_peak is brought up to date only
 *                    where bytes_live drops (reset, rollback) or is read (stats, check),
 *                    never on the fast path
 *
 * Fast path: arena_alloc and arena_reset are static inline below (the engine and the
 * alloc module call them per block, per step); they read and write only ptr, end and
 * two counters. Everything else (a new chunk, rollback, checks) is out of line.
 *
 * Policy when full: with grow=1 a chunk of max(chunk_size, what the request needs)
 * is mapped and linked after cur (a request larger than chunk_size gets a chunk of
 * its own); with grow=0 the arena fails (NULL) once its first chunks are used up.
 * Chunks are never unmapped before arena_destroy, so a step that allocates what the
 * previous step allocated touches no new page: reset costs O(1), not page faults.
 *
 * There is no free: a block lives until reset or rollback. arena_owns() says whether
 * a pointer lies in a live block, which the module's free uses in debug builds.
 * Not thread-safe: one arena per thread (the engine resets one per forward step).
 */
#ifndef BENCH_ARENA_H
#define BENCH_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "allocators/alloc_common.h"

typedef struct arena_chunk arena_chunk;   /* opaque: a chunk's header (arena.c) */

/* Public only so the fast path below inlines; every field is the arena's own. */
typedef struct arena {
    char *ptr;            /* next free byte in cur: the fast path reads only ptr and end */
    char *end;            /* one past cur's last byte */
    char *first_data;     /* where reset puts ptr: the first chunk's first byte after its header */
    char *first_end;      /* where reset puts end */
    arena_chunk *cur;
    arena_chunk *first;
    size_t chunk_size;    /* B, page multiple */
    size_t n_chunks;
    int grow;
#if BENCH_ALLOC_STATS
    alloc_stats st;       /* st.bytes_peak lags: see "peak" above */
#endif
} arena;

/* A saved position. Valid until a reset or a rollback to an earlier mark. */
typedef struct arena_pos {
    void *chunk;           /* the chunk cur was */
    size_t top;            /* its top then */
    uint64_t bytes_live;   /* B, restored by rollback (statistics on) */
} arena_pos;

/* chunk_size: bytes per chunk, rounded up to pages (0: 1 MiB). grow: 1 adds chunks
 * when full, 0 fails. The first chunk is mapped at once. NULL when mmap fails. */
ALLOC_INTERNAL arena *arena_create(size_t chunk_size, int grow);
ALLOC_INTERNAL void arena_destroy(arena *a);   /* a may be NULL */

/* size > 0 (0 is treated as 1); align: any power of two (0 means 16). NULL when full
 * (grow=0) or out of memory. */
static inline void *arena_alloc(arena *a, size_t size, size_t align);

/* Drops every block; keeps every chunk. O(1) (O(chunks) under ASan, which re-poisons them). */
static inline void arena_reset(arena *a);
ALLOC_INTERNAL arena_pos arena_mark(const arena *a);
/* Drops every block allocated since m. O(1). A mark from before the last reset, or
 * from another arena, is a caller bug (aborts in debug builds). */
ALLOC_INTERNAL void arena_rollback(arena *a, arena_pos m);

/* 1 when p lies inside a block handed out since the last reset (O(chunks)). */
ALLOC_INTERNAL int arena_owns(const arena *a, const void *p);
/* Debug builds: aborts with a message when p is not an arena block (the module's free).
 * Release builds: nothing, not even a call (inline below). */
static inline void arena_verify_free(const arena *a, const void *p, size_t size);

/* 0 when every invariant above holds; otherwise -1 and a message in err. */
ALLOC_INTERNAL int arena_check(const arena *a, char *err, size_t errlen);
ALLOC_INTERNAL void arena_get_stats(const arena *a, alloc_stats *out);   /* zeros when BENCH_ALLOC_STATS=0 */
ALLOC_INTERNAL size_t arena_chunk_count(const arena *a);

/* ---- the fast path ---- */

/* Out of line: cur is full (finds or maps a chunk), or a debug check failed. */
ALLOC_INTERNAL void *arena_alloc_slow(arena *a, size_t size, size_t align);
ALLOC_INTERNAL void arena_reset_poison(arena *a);
ALLOC_INTERNAL void arena_verify_free_debug(const arena *a, const void *p, size_t size);

static inline void arena_verify_free(const arena *a, const void *p, size_t size) {
    if (BENCH_ALLOC_DEBUG && p) arena_verify_free_debug(a, p, size);
}

static inline void *arena_alloc(arena *a, size_t size, size_t align) {
    if (size == 0) size = 1;
    if (align == 0) align = 16;
    if (BENCH_ALLOC_DEBUG && !alloc_is_pow2(align)) alloc_misuse("arena", "alignment %zu is not a power of two", align);
    char *p = (char *)alloc_align_up((uintptr_t)a->ptr, align);
    /* Compared as differences so a huge size cannot wrap the pointer. */
    if (__builtin_expect(p > a->end || size > (size_t)(a->end - p), 0)) return arena_alloc_slow(a, size, align);
    a->ptr = p + size;
    ALLOC_UNPOISON(p, size);
    ALLOC_STAT(a->st.allocs++; a->st.bytes_live += size);   /* the peak: at the next reset, rollback or read */
    return p;
}

static inline void arena_reset(arena *a) {
#if defined(__SANITIZE_ADDRESS__)
    arena_reset_poison(a);   /* re-poisons every chunk: O(chunks) */
#else
    a->cur = a->first;
    a->ptr = a->first_data;
    a->end = a->first_end;
#endif
    ALLOC_STAT(if (a->st.bytes_live > a->st.bytes_peak) a->st.bytes_peak = a->st.bytes_live; a->st.bytes_live = 0);
}

#endif
