/* Fault injection for the engine's allocator: an allocator that forwards to
 * another and makes every Nth allocation fail (returns NULL, as an exhausted
 * allocator does), so each path that allocates through a module is shown to
 * report the failure and free what it had (tests/test_reliab.c, under ASan/LSan).
 *
 * The engine wraps its allocator in one when the test hooks ask for it:
 *   BENCH_TEST_HOOKS=1 BENCH_TEST_ALLOC_FAIL_EVERY=N    (N >= 1)
 * and counts the calls it saw, failed or not, in engine.alloc_fault_calls. */
#ifndef BENCH_ALLOC_FAULT_H
#define BENCH_ALLOC_FAULT_H

#include <stdint.h>

#include "engines/abi/alloc.h"

typedef struct af_state {
    bench_allocator inner;
    uint64_t every;         /* 0: never fail (count only) */
    uint64_t calls;         /* allocations asked for */
    uint64_t failed;        /* of which made to fail */
    bench_allocator self;   /* what callers use: {&af_iface, this} */
} af_state;

/* Points st->self at a wrapper of inner failing every `every`th call. */
void af_wrap(af_state *st, const bench_allocator *inner, uint64_t every);

/* N from the environment (BENCH_TEST_HOOKS=1 and BENCH_TEST_ALLOC_FAIL_EVERY=N), 0 when not asked. */
uint64_t af_every_from_env(void);

#endif
