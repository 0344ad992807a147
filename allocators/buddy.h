/* buddy: power-of-two blocks over one reserved region, split on allocation and
 * coalesced on free; no header in any block (free is given the size).
 *
 * Glossary
 *   region     2^R bytes reserved at create with MAP_NORESERVE, aligned to its own size;
 *              pages are touched on first use.
 *   order k    blocks of size min_block * 2^k; k = 0 .. K with min_block * 2^K = region.
 *   block      (k, i): the bytes [base + i*size_k, base + (i+1)*size_k).
 *   buddy      of (k, i): (k, i ^ 1), the other half of the order-(k+1) block they split from.
 *   free list  per order, doubly linked through the first 16 bytes of each free block.
 *   free bit   F[k][i] = 1 iff (k, i) is on free list k.
 *   alloc bit  A[k][i] = 1 iff (k, i) was handed out whole; free() finds a block's order by
 *              it, so a block made bigger by alignment frees right though only its size is given.
 *   nonempty   bit k set iff free list k is non-empty: the smallest usable order is one ctz.
 *   cache      per order (blocks up to 1 MiB), up to `cache` freed blocks held back from
 *              coalescing, reused newest first. Without it, a lone 64 B alloc/free pair in an
 *              empty region splits and re-merges every order down from the top (~24 page-
 *              distant list moves, ~190 ns); with it, ~5 ns. Cached blocks keep their alloc
 *              bit; buddy_flush() gives them back for real.
 *
 * Invariants (checked by buddy_check)
 *   every byte of the region lies in exactly one block that is free or allocated
 *   F[k][i] = 1  =>  F[k][i ^ 1] = 0          (two free buddies are always merged)
 *   |free list k| = sum over i of F[k][i],   nonempty bit k = (|free list k| > 0)
 *   sum of free block sizes + sum of allocated block sizes = region
 *   after every block is freed and buddy_flush(): free list K = { (K, 0) }, every other list empty
 *   a cached block of order k has A[k][i] = 1 and is cached once; |cache k| <= cache
 *
 * Costs: alloc and free are O(K) = O(log(region / min_block)) bit operations and list moves.
 * Alignment: a request takes order ceil(log2(max(size, align, min_block))); blocks of order k
 * are aligned to their size, since the region is aligned to its size.
 * Misuse caught in debug builds: a pointer outside the region, not at a block start, a
 * double free, a size larger than the block. A double free goes unnoticed only when the
 * same address has since been handed out again (as with any allocator).
 *
 * Not thread-safe unless created with locked=1 (one mutex around every call).
 * bytes_reserved in the statistics is the region's high-water mark: the end of the
 * highest block ever handed out, rounded to pages (address space above it is untouched
 * except the free-list links of split blocks, one page per order at most).
 */
#ifndef BENCH_BUDDY_H
#define BENCH_BUDDY_H

#include <stddef.h>
#include <stdint.h>

#include "allocators/alloc_common.h"

typedef struct buddy buddy;

/* region: bytes to reserve, rounded up to a power of two (0: 1 GiB; at most 2^46).
 * min_block: smallest block, a power of two >= 16 (0: 64). cache: freed blocks held back
 * per order (0: none, at most 64). NULL when invalid or mmap fails. */
ALLOC_INTERNAL buddy *buddy_create(size_t region, size_t min_block, unsigned cache, int locked);
/* Frees the cached blocks for real, coalescing them. */
ALLOC_INTERNAL void buddy_flush(buddy *b);
ALLOC_INTERNAL void buddy_destroy(buddy *b);   /* b may be NULL */

/* size 0 is taken as 1; align a power of two (0 means 16). NULL when no block is big enough. */
ALLOC_INTERNAL void *buddy_alloc(buddy *b, size_t size, size_t align);
/* p may be NULL; size is what alloc was given. */
ALLOC_INTERNAL void buddy_free(buddy *b, void *p, size_t size);

ALLOC_INTERNAL int buddy_owns(const buddy *b, const void *p);   /* 1 when p lies in the region */
ALLOC_INTERNAL size_t buddy_region(const buddy *b);             /* B */
ALLOC_INTERNAL size_t buddy_min_block(const buddy *b);          /* B */
/* Free blocks at order k (k = log2(block / min_block)); -1 when k is out of range. For tests. */
ALLOC_INTERNAL long buddy_free_count(buddy *b, unsigned k);
ALLOC_INTERNAL unsigned buddy_max_order(const buddy *b);

/* 0 when the invariants hold; -1 and a message otherwise. O(region / min_block). */
ALLOC_INTERNAL int buddy_check(buddy *b, char *err, size_t errlen);
ALLOC_INTERNAL void buddy_get_stats(buddy *b, alloc_stats *out);   /* zeros when BENCH_ALLOC_STATS=0 */

#endif
