/* The monotonic clock every part of bench stamps events with (harness/scenario/events.h):
 * CLOCK_MONOTONIC in ns, comparable across the parent and its workers. Header-only, so that
 * the modules (.so, which link only their own objects) take it too. */
#ifndef UT_CLOCK_H
#define UT_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t ut_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
