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
 *   blocks live  =  [data(c_i), c_i.top) for i < k   plus   [data(c_k), cur.top)
 *   chunks after cur hold no live block (their top is stale and ignored)
 *   bytes_reserved = sum(c_i.size)                 (statistics on)
 *   bytes_live     = sum of sizes allocated since the last reset, less those rolled back
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

typedef struct arena arena;

/* A saved position. Valid until a reset or a rollback to an earlier mark. */
typedef struct arena_pos {
    void *chunk;           /* the chunk cur was */
    size_t top;            /* its top then */
    uint64_t bytes_live;   /* B, restored by rollback (statistics on) */
} arena_pos;

/* chunk_size: bytes per chunk, rounded up to pages (0: 1 MiB). grow: 1 adds chunks
 * when full, 0 fails. The first chunk is mapped at once. NULL when mmap fails. */
arena *arena_create(size_t chunk_size, int grow);
void arena_destroy(arena *a);   /* a may be NULL */

/* size > 0 (0 is treated as 1); align: any power of two (0 means 16). NULL when full
 * (grow=0) or out of memory. */
void *arena_alloc(arena *a, size_t size, size_t align);

/* Drops every block; keeps every chunk. O(1) (O(chunks) under ASan, which re-poisons them). */
void arena_reset(arena *a);
arena_pos arena_mark(const arena *a);
/* Drops every block allocated since m. O(1). A mark from before the last reset, or
 * from another arena, is a caller bug (aborts in debug builds). */
void arena_rollback(arena *a, arena_pos m);

/* 1 when p lies inside a block handed out since the last reset (O(chunks)). */
int arena_owns(const arena *a, const void *p);
/* Debug builds: aborts with a message when p is not an arena block (the module's free). */
void arena_verify_free(const arena *a, const void *p, size_t size);

/* 0 when every invariant above holds; otherwise -1 and a message in err. */
int arena_check(const arena *a, char *err, size_t errlen);
void arena_get_stats(const arena *a, alloc_stats *out);   /* zeros when BENCH_ALLOC_STATS=0 */
size_t arena_chunk_count(const arena *a);

#endif
