/* slab: size classes from 16 B to 32 KiB, each with free lists carved from 64 KiB
 * slabs of one reserved region; larger sizes go to mmap.
 *
 * Glossary
 *   region     one address range reserved at create (MAP_NORESERVE; pages are touched on
 *              first use), cut into slabs. Pointer p is small iff base <= p < base + region.
 *   slab       SLAB_BYTES (64 KiB) of the region, aligned to 64 KiB, given to one class
 *              for good. Slabs carry no header: class_of[slab index] says its class.
 *   class      a block size C: 16..128 by 16, then 4 steps per doubling up to 32 KiB (40 classes).
 *   block      one C-byte piece of a slab, at slab + k*C. A free block's first word links
 *              it into a free list; a live block has no header at all.
 *   tcache     per-thread, per-allocator free lists, one bin per class; no locks, no atomics.
 *   batch(C)   blocks moved per trip to central: 8 KiB / C, clamped to 4 .. 64.
 *   limit      per bin: the most blocks it holds before it gives a batch back to central.
 *              2*batch(C) at first; doubled, up to bin_cap(C) = max(2*batch(C),
 *              SLAB_BIN_MAX_BYTES / C), when the bin overflows after it had to refill
 *              since its last overflow (its thread allocates and frees bursts larger
 *              than the limit). A bin that only frees never refills and keeps its limit.
 *   trip       one lock round trip to a central list: a refill or a flush (counted).
 *   central    per-class free list and carving point (bump) shared by all threads, under a mutex.
 *   large      a request above 32 KiB, or aligned above 4 KiB: its own mmap of 2^b pages, with a
 *              header on the page before the block; freed mappings are kept, by b, for reuse,
 *              up to large_cache bytes, so a steady workload neither maps nor faults.
 *
 * Thread safety: the fast path touches only the calling thread's tcache (found through
 * one initial-exec thread-local slot: no call). A bin holding more than its limit gives
 * batch(C) back to central; an empty bin takes batch(C) from central (or carves them
 * from the class's slab). A block may be freed by any thread (it joins that thread's
 * tcache). Cost: one lock per batch, not per call; once a thread's bursts fit its
 * bins' limits, none. A thread's tcache goes back to central when the thread exits.
 * A thread's bins hold at most sum over C of bin_cap(C) * C, about 10 MiB.
 *
 * Invariants (slab_check, with no other thread inside the allocator)
 *   for every class c:  carved(c) = |central(c)| + sum over tcaches |bin(c)| + live(c)
 *   every block on a free list lies in a slab of its class, at a multiple of C from the slab start
 *   no block is on two free lists, nor twice on one
 *   bin.count = length of bin's list,   bin.count <= bin.limit
 *   2*batch(C) <= bin.limit <= bin_cap(C)
 *   slabs used <= region / SLAB_BYTES
 *   bytes_reserved = slabs used * SLAB_BYTES + sum of large mappings (live and cached)
 *   large mappings cached <= large_cache bytes
 *
 * Alignment: align <= 16 takes the class of size; otherwise the smallest class >= max(size, align)
 * that is a multiple of align (its blocks are then aligned, slabs being 64 KiB aligned).
 * free(p, size) finds the class from p, so a block aligned into a larger class frees right.
 *
 * Memory a class took is kept by the class until slab_destroy: no page is returned to the
 * kernel, so a steady workload stops faulting once warm.
 *
 * Statistics are per thread and summed on read: bytes_peak is exact while one thread uses
 * the allocator, and an upper bound (the sum of per-thread peaks) otherwise.
 */
#ifndef BENCH_SLAB_H
#define BENCH_SLAB_H

#include <stddef.h>
#include <stdint.h>

#include "allocators/alloc_common.h"

#define SLAB_SHIFT 16
#define SLAB_BYTES ((size_t)1 << SLAB_SHIFT)   /* B per slab */
#define SLAB_NCLASS 40
#define SLAB_MAX_CLASS ((size_t)32768)         /* B, largest class */
#define SLAB_MAX_ALIGN ((size_t)4096)          /* B, larger alignments go to mmap */
#define SLAB_BIN_MAX_BYTES ((size_t)256 << 10)  /* B, most one thread-cache bin's limit grows to (at least 2 * batch blocks) */

typedef struct slab slab;

/* region: bytes reserved for slabs (0: 1 GiB), rounded up to SLAB_BYTES.
 * large_cache: bytes of freed large mappings kept for reuse (0: munmap at once). NULL on failure. */
ALLOC_INTERNAL slab *slab_create(size_t region, size_t large_cache);
/* Unmaps everything, including blocks still live. s may be NULL. Must not race with other calls. */
ALLOC_INTERNAL void slab_destroy(slab *s);

/* size 0 is taken as 1; align a power of two (0 means 16). NULL when out of memory. */
ALLOC_INTERNAL void *slab_alloc(slab *s, size_t size, size_t align);
/* p may be NULL; size is what alloc was given. Any thread may free. */
ALLOC_INTERNAL void slab_free(slab *s, void *p, size_t size);

/* 1 when p lies in the slab region (a small block, live or not) or is a live large block. */
ALLOC_INTERNAL int slab_owns(slab *s, const void *p);
/* The class size a request is served from; 0 when it goes to mmap. */
ALLOC_INTERNAL size_t slab_block_size(size_t size, size_t align);

/* 0 when the invariants hold; -1 and a message otherwise. Call with no other thread inside. */
ALLOC_INTERNAL int slab_check(slab *s, char *err, size_t errlen);
ALLOC_INTERNAL void slab_get_stats(slab *s, alloc_stats *out);   /* zeros when BENCH_ALLOC_STATS=0 */
/* Trips of the thread caches to the central lists since create, each one lock round trip:
 * refills (an empty bin took a batch) and flushes (a full bin gave one back). Zeros when
 * BENCH_ALLOC_STATS=0. */
ALLOC_INTERNAL void slab_get_trips(slab *s, uint64_t *refills, uint64_t *flushes);

#endif
