/* What arena, slab and buddy share: statistics that compile away, debug-build
 * misuse checks that abort with a message, and small power-of-two helpers.
 *
 * Switches (define before including, or with -D):
 *   BENCH_ALLOC_STATS  1 (default): count allocations, frees, live/peak/reserved bytes.
 *                      0: every ALLOC_STAT_* macro is empty and *_stats() report zeros.
 *   BENCH_ALLOC_DEBUG  default: 1 unless NDEBUG. Misuse checks (double free,
 *                      foreign pointer, free inside an arena) and ASan poisoning of
 *                      released arena memory. Caller bugs abort with a message on stderr.
 */
#ifndef BENCH_ALLOC_COMMON_H
#define BENCH_ALLOC_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef BENCH_ALLOC_STATS
#define BENCH_ALLOC_STATS 1
#endif
#ifndef BENCH_ALLOC_DEBUG
#ifdef NDEBUG
#define BENCH_ALLOC_DEBUG 0
#else
#define BENCH_ALLOC_DEBUG 1
#endif
#endif

/* Counters every allocator keeps; all in bytes or counts since create.
 *   bytes_live     = sum of sizes of live blocks (as requested by the caller)
 *   bytes_peak     = max over time of bytes_live
 *   bytes_reserved = bytes of address space mapped from the OS (touched lazily)
 *   allocs - frees = number of live blocks (arena: frees counts blocks dropped by reset/rollback) */
typedef struct alloc_stats {
    uint64_t allocs;          /* successful allocations */
    uint64_t frees;           /* blocks given back */
    uint64_t bytes_live;      /* B */
    uint64_t bytes_peak;      /* B */
    uint64_t bytes_reserved;  /* B, address space from mmap */
    uint64_t large_allocs;    /* allocations served outside the allocator's own scheme (slab: mmap pass-through; arena: oversize chunks) */
    uint64_t failed;          /* allocations that returned NULL */
} alloc_stats;

#if BENCH_ALLOC_STATS
#define ALLOC_STAT(stmt) do { stmt; } while (0)
#define ALLOC_STAT_ALLOC(s, n) do { (s)->allocs++; (s)->bytes_live += (n); \
        if ((s)->bytes_live > (s)->bytes_peak) (s)->bytes_peak = (s)->bytes_live; } while (0)
#define ALLOC_STAT_FREE(s, n) do { (s)->frees++; (s)->bytes_live -= (n); } while (0)
#else
#define ALLOC_STAT(stmt) do { } while (0)
#define ALLOC_STAT_ALLOC(s, n) do { } while (0)
#define ALLOC_STAT_FREE(s, n) do { } while (0)
#endif

/* A caller bug found by a debug check: says which allocator and what, then aborts.
 * Aborting is right here: the heap is already wrong, and going on would hide where. */
__attribute__((noreturn, format(printf, 2, 3), cold))
static inline void alloc_misuse(const char *who, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: misuse: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    abort();
}

/* The allocators' functions are linked into the driver and into each alloc module.
 * Hidden, they are called directly inside a module's shared object instead of through
 * its PLT (no symbol interposition), and a module exports its init symbol only. */
#define ALLOC_INTERNAL __attribute__((visibility("hidden")))

static inline int alloc_is_pow2(size_t x) { return x && !(x & (x - 1)); }
static inline uintptr_t alloc_align_up(uintptr_t x, size_t a) { return (x + (a - 1)) & ~(uintptr_t)(a - 1); }
/* floor(log2(x)), x > 0 */
static inline unsigned alloc_log2(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }
/* ceil(log2(x)), x > 0 */
static inline unsigned alloc_log2_up(uint64_t x) { return x <= 1 ? 0 : 64u - (unsigned)__builtin_clzll(x - 1); }

/* Monotonic time for the modules' optional time-in-allocator counter. Two reads cost
 * about 2 x 20 ns here, more than a cached alloc/free pair, so timing is an option, off by default. */
#include "util/ut_clock.h"
static inline uint64_t alloc_now_ns(void) { return (uint64_t)ut_now_ns(); }

/* ASan poisoning, so a use of memory the allocator took back is reported where it happens. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define ALLOC_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ALLOC_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ALLOC_POISON(p, n) ((void)(p), (void)(n))
#define ALLOC_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
