/* alloc_trace: records every call an engine makes to its allocator, and reads
 * such a record back for replay (harness/child/alloc_workload.c).
 *
 * File format (text, one call per line, '#' starts a comment line):
 *   # bench-alloc-trace 1       first line: the format and its version
 *   a ID SIZE ALIGN             alloc; IDs are 0, 1, 2... in order of allocation;
 *                               SIZE > 0 bytes, ALIGN a power of two
 *   f ID                        free of the live block ID
 *   r                           reset: every live block dropped at once
 * Example (a decode step of stories260K with the prealloc KV cache):
 *   a 0 131072 64               the KV cache, at load
 *   a 1 4352 64                 one forward pass's scratch
 *   f 1
 *
 * Invariants of a valid trace (checked by at_load): an ID is freed at most once
 * and only after its alloc; IDs are dense and increasing; live bytes never go
 * below 0. Blocks still live at the end are allowed (the replay frees them).
 *
 * The recorder is not thread-safe: the engine calls its allocator from one thread
 * (scratch on the forward pass's thread, KV at create and destroy).
 */
#ifndef BENCH_ALLOC_TRACE_H
#define BENCH_ALLOC_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "engines/abi/module.h"

/* ---- recording ---- */

typedef struct at_recorder at_recorder;

/* Opens path for writing and wraps inner: the allocator returned by
 * at_recorder_allocator() forwards each call to inner and writes its line. */
int at_recorder_open(const char *path, const bench_allocator *inner, at_recorder **out, char *err, size_t errlen);
/* The wrapping allocator; valid until at_recorder_close. */
const bench_allocator *at_recorder_allocator(const at_recorder *r);
/* What was recorded so far: calls (allocs + frees), and the peak of live bytes. */
void at_recorder_totals(const at_recorder *r, uint64_t *calls, uint64_t *peak_live);
/* Flushes and closes; r may be NULL. Returns -1 with err when a write failed. */
int at_recorder_close(at_recorder *r, char *err, size_t errlen);

/* ---- reading ---- */

enum { AT_ALLOC = 'a', AT_FREE = 'f', AT_RESET = 'r' };

typedef struct at_op {
    uint8_t kind;       /* AT_ALLOC, AT_FREE, AT_RESET */
    uint32_t id;        /* block id (alloc, free) */
    uint32_t align;     /* B, alloc */
    uint64_t size;      /* B, alloc */
} at_op;

typedef struct at_trace {
    size_t n;
    at_op *v;           /* (n) */
    uint32_t n_ids;     /* blocks allocated */
    uint64_t calls;     /* allocs + frees (resets are not calls) */
    uint64_t peak_live; /* B, the most bytes live at once */
    uint64_t live_at_end;   /* blocks never freed */
} at_trace;

/* Reads and checks a trace; errors name the file and line. */
int at_load(const char *path, at_trace *t, char *err, size_t errlen);
void at_trace_free(at_trace *t);

#endif
