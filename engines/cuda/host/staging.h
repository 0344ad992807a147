/* The staging plan of the CUDA loaders: tensor bytes go from the model files to the
 * device through staging buffers (loader "pinned": a ring of pinned slots cut from one
 * slab; loader "pread": one pageable buffer). Plain C with no CUDA header, so that it is
 * built everywhere and tested on the CPU (tests/test_cuda_host.c).
 *
 * Glossary
 *   piece   one tensor: file f, bytes [off, off + len) -> device bytes [dst, dst + len)
 *   chunk   one read: file f, bytes [off, off + len), len <= chunk_bytes, into one slot;
 *           it carries the copies of the piece parts it holds
 *   copy    slot bytes [slot_off, slot_off + len) -> device bytes [dst, dst + len)
 *   slot    one staging buffer of chunk_bytes; chunk k goes to slot k % n_slots
 *   gap     file bytes between two pieces of one file; read along (one read, not two)
 *           when at most max_gap, never copied
 *
 * The driver (stg_run), for chunk k in plan order (files in order, offsets ascending):
 *     wait(slot)     only when the slot was submitted before: its copies are done
 *     read(slot, chunk k)
 *     copy(slot, c)  for each copy of chunk k; may be asynchronous
 *     submit(slot)   the slot's copies end here (record an event)
 * and at the end wait(slot) for every slot submitted and not yet waited for, so that
 * every copy is done when stg_run returns. With n_slots >= 2 the read of chunk k + 1
 * overlaps the copies of chunk k.
 *
 * Invariants (checked by the tests): each byte of each piece is copied exactly once,
 * to its dst; a slot is never read into between its submit and its wait; each chunk
 * lies inside one file and holds at most chunk_bytes.
 */
#ifndef BENCH_CUDA_STAGING_H
#define BENCH_CUDA_STAGING_H

#include <stddef.h>
#include <stdint.h>

typedef struct stg_piece {
    int file;
    uint64_t off, len;      /* B, in the file */
    uint64_t dst;           /* B, offset in the device region */
} stg_piece;

typedef struct stg_copy {
    size_t slot_off;        /* B, in the slot */
    uint64_t dst;           /* B, in the device region */
    size_t len;             /* B */
} stg_copy;

typedef struct stg_chunk {
    int file;
    uint64_t off;           /* B, in the file */
    size_t len;             /* B, <= chunk_bytes */
    int first_copy, n_copies;   /* copies[first_copy .. first_copy + n_copies) */
} stg_chunk;

typedef struct stg_plan {
    stg_chunk *chunks;      /* (n_chunks) */
    int n_chunks;
    stg_copy *copies;       /* (n_copies) */
    int n_copies;
    size_t chunk_bytes;
    uint64_t bytes_read;    /* sum of chunk lengths (pieces and gaps read along) */
    uint64_t bytes_copied;  /* sum of piece lengths */
} stg_plan;

/* Device offsets for n tensors of nbytes[i], in list order, each aligned to align (a
 * power of two). Returns the region's size (at least align), 0 on overflow. */
uint64_t stg_layout(const uint64_t *nbytes, int n, uint64_t align, uint64_t *dst);

/* Cuts the pieces into chunks of at most chunk_bytes (> 0). Pieces of length 0 are
 * left out. Returns 0, or -1 with err (out of memory, a bad argument). */
int stg_plan_make(const stg_piece *pieces, int n, size_t chunk_bytes, size_t max_gap, stg_plan *out,
                  char *err, size_t errlen);
void stg_plan_free(stg_plan *p);    /* p may be zeroed */

typedef struct stg_ops {
    int (*wait)(void *user, int slot, char *err, size_t errlen);
    int (*read)(void *user, int slot, const stg_chunk *c, char *err, size_t errlen);
    int (*copy)(void *user, int slot, const stg_copy *c, char *err, size_t errlen);
    int (*submit)(void *user, int slot, char *err, size_t errlen);
} stg_ops;

/* Runs the plan over n_slots >= 1 slots; the first failing op's -1 ends it (after waiting
 * for the slots already submitted, so no copy is left in flight). */
int stg_run(const stg_plan *p, int n_slots, const stg_ops *ops, void *user, char *err, size_t errlen);

#endif
