/* arena: alignment, reset, rollback, the growth policy, a shadow-model stress, misuse. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "allocators/arena.h"
#include "tests/lib/alloc_test.h"

static void check(const arena *a) {
    char err[256];
    if (arena_check(a, err, sizeof(err))) fail_msg("%s", err);
}

static void test_alignment(void **state) {
    (void)state;
    arena *a = arena_create(64 * 1024, 1);
    assert_non_null(a);
    for (size_t align = 1; align <= 65536; align *= 2)
        for (size_t size = 1; size <= 5000; size = size * 3 + 1) {
            char *p = arena_alloc(a, size, align);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % align, 0);
            memset(p, 0xab, size);
            assert_true(arena_owns(a, p) && arena_owns(a, p + size - 1));
        }
    check(a);
    arena_destroy(a);
    arena_destroy(NULL);
}

static void test_reset_to_empty(void **state) {
    (void)state;
    arena *a = arena_create(4096, 1);
    assert_non_null(a);
    char *first = arena_alloc(a, 100, 64);
    for (int i = 0; i < 1000; i++) assert_non_null(arena_alloc(a, 1000, 16));
    size_t chunks = arena_chunk_count(a);
    assert_true(chunks > 1);
    arena_reset(a);
    check(a);
    alloc_stats st;
    arena_get_stats(a, &st);
#if BENCH_ALLOC_STATS
    assert_int_equal(st.bytes_live, 0);
    assert_true(st.bytes_peak >= 1000 * 1000);
    assert_int_equal(st.allocs, 1001);
#endif
    assert_false(arena_owns(a, first));
    /* Empty again: the next block is where the first one was, and the same work maps nothing new. */
    assert_ptr_equal(arena_alloc(a, 100, 64), first);
    for (int i = 0; i < 1000; i++) assert_non_null(arena_alloc(a, 1000, 16));
    assert_int_equal(arena_chunk_count(a), chunks);
    check(a);
    arena_destroy(a);
}

static void test_rollback(void **state) {
    (void)state;
    arena *a = arena_create(8192, 1);
    assert_non_null(a);
    char *keep = arena_alloc(a, 300, 16);
    pat_fill(keep, 300, 7);
    arena_pos m = arena_mark(a);
    char *after = arena_alloc(a, 50, 32);
    for (int i = 0; i < 100; i++) assert_non_null(arena_alloc(a, 500, 8));   /* spans chunks */
    arena_rollback(a, m);
    check(a);
    assert_true(arena_owns(a, keep));
    assert_false(arena_owns(a, after));
    assert_true(pat_ok(keep, 300, 7));
    assert_ptr_equal(arena_alloc(a, 50, 32), after);
#if BENCH_ALLOC_STATS
    alloc_stats st;
    arena_get_stats(a, &st);
    assert_int_equal(st.bytes_live, 350);
#endif
    /* Nested marks unwind in order. */
    arena_pos m1 = arena_mark(a);
    arena_alloc(a, 10, 16);
    arena_pos m2 = arena_mark(a);
    arena_alloc(a, 10, 16);
    arena_rollback(a, m2);
    arena_rollback(a, m1);
    check(a);
    arena_destroy(a);
}

/* The peak is brought up to date lazily (at reset, rollback and reads), never on the
 * fast path: it must still be exact across resets and rollbacks. */
static void test_peak_exact(void **state) {
    (void)state;
    if (!BENCH_ALLOC_STATS) skip();   /* the counters compile away */
    arena *a = arena_create(4096, 1);
    assert_non_null(a);
    alloc_stats st;
    arena_alloc(a, 100, 16);
    arena_alloc(a, 200, 16);
    arena_pos m = arena_mark(a);
    arena_alloc(a, 500, 16);              /* live 800: the peak */
    arena_rollback(a, m);                 /* live 300 */
    arena_alloc(a, 50, 16);               /* live 350 */
    arena_get_stats(a, &st);
    assert_int_equal(st.bytes_live, 350);
    assert_int_equal(st.bytes_peak, 800);
    arena_reset(a);
    arena_alloc(a, 10, 16);
    arena_get_stats(a, &st);
    assert_int_equal(st.bytes_live, 10);
    assert_int_equal(st.bytes_peak, 800);
    for (int i = 0; i < 10; i++) arena_alloc(a, 100, 16);   /* live 1010, not yet settled */
    arena_get_stats(a, &st);
    assert_int_equal(st.bytes_peak, 1010);
    arena_reset(a);
    arena_get_stats(a, &st);
    assert_int_equal(st.bytes_peak, 1010);
    assert_int_equal(st.allocs, 15);
    check(a);
    arena_destroy(a);
}

static void test_no_grow_fails_when_full(void **state) {
    (void)state;
    arena *a = arena_create(4096, 0);
    assert_non_null(a);
    int n = 0;
    while (arena_alloc(a, 100, 16)) n++;
    assert_true(n >= 30 && n <= 41);
    assert_null(arena_alloc(a, 5000, 16));
    assert_int_equal(arena_chunk_count(a), 1);
#if BENCH_ALLOC_STATS
    alloc_stats st;
    arena_get_stats(a, &st);
    assert_int_equal(st.allocs, (uint64_t)n);
    assert_true(st.failed >= 2);
#endif
    arena_reset(a);
    assert_non_null(arena_alloc(a, 100, 16));
    check(a);
    arena_destroy(a);
}

static void test_grow_oversize(void **state) {
    (void)state;
    arena *a = arena_create(4096, 1);
    assert_non_null(a);
    char *small = arena_alloc(a, 10, 16);
    char *big = arena_alloc(a, 1 << 20, 4096);   /* bigger than a chunk: a chunk of its own */
    assert_non_null(big);
    assert_int_equal((uintptr_t)big % 4096, 0);
    memset(big, 1, 1 << 20);
    char *after = arena_alloc(a, 10, 16);
    assert_non_null(after);
    assert_true(arena_owns(a, small) && arena_owns(a, big) && arena_owns(a, after));
    assert_null(arena_alloc(a, SIZE_MAX - 100, 16));   /* no wrap-around */
    check(a);
    arena_destroy(a);
}

/* Random sizes and alignments, with resets and rollbacks; every live block keeps its pattern. */
static void test_stress_shadow(void **state) {
    (void)state;
    arena *a = arena_create(32 * 1024, 1);
    assert_non_null(a);
    enum { MAXLIVE = 4096 };
    live_blk *live = calloc(MAXLIVE, sizeof(*live));
    assert_non_null(live);
    size_t n = 0, mark_n = 0;
    arena_pos mark = arena_mark(a);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    uint32_t id = 0;
    for (int op = 0; op < 40000; op++) {
        uint64_t r = tr_next(&rng) % 1000;
        if (r < 2 || n == MAXLIVE) {
            for (size_t i = 0; i < n; i++) assert_true(pat_ok(live[i].p, live[i].size, live[i].id));
            assert_disjoint(live, n);
            arena_reset(a);
            n = mark_n = 0;
            mark = arena_mark(a);
        } else if (r < 6) {
            mark = arena_mark(a);
            mark_n = n;
        } else if (r < 9) {
            for (size_t i = 0; i < n; i++) assert_true(pat_ok(live[i].p, live[i].size, live[i].id));
            arena_rollback(a, mark);
            n = mark_n;
        } else {
            size_t size = tr_size(&rng, 1, 16384), align = (size_t)1 << (tr_next(&rng) % 13);
            char *p = arena_alloc(a, size, align);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % align, 0);
            pat_fill(p, size, ++id);
            live[n++] = (live_blk){p, size, id};
        }
        if (op % 5000 == 0) check(a);
    }
    for (size_t i = 0; i < n; i++) assert_true(pat_ok(live[i].p, live[i].size, live[i].id));
    assert_disjoint(live, n);
    check(a);
    free(live);
    arena_destroy(a);
}

/* ---- misuse, each in a forked child ---- */

static void misuse_foreign_free(void) {
    arena *a = arena_create(4096, 1);
    static char elsewhere[64];
    arena_alloc(a, 32, 16);
    arena_verify_free(a, elsewhere, 32);
}
static void misuse_free_after_reset(void) {
    arena *a = arena_create(4096, 1);
    void *p = arena_alloc(a, 32, 16);
    arena_reset(a);
    arena_verify_free(a, p, 32);
}
static void misuse_free_wrong_size(void) {
    arena *a = arena_create(4096, 1);
    void *p = arena_alloc(a, 32, 16);
    arena_verify_free(a, p, 64);
}
static void misuse_rollback_ahead(void) {
    arena *a = arena_create(4096, 1);
    arena_alloc(a, 32, 16);
    arena_pos m = arena_mark(a);
    arena_reset(a);
    arena_rollback(a, m);
}
static void misuse_rollback_foreign(void) {
    arena *a = arena_create(4096, 1), *b = arena_create(4096, 1);
    arena_rollback(a, arena_mark(b));
}
static void misuse_bad_align(void) {
    arena *a = arena_create(4096, 1);
    arena_alloc(a, 32, 24);
}

static void test_misuse(void **state) {
    (void)state;
    if (!BENCH_ALLOC_DEBUG) skip();
    expect_misuse(misuse_foreign_free, "not a live block of this arena");
    expect_misuse(misuse_free_after_reset, "not a live block of this arena");
    expect_misuse(misuse_free_wrong_size, "does not extend that far");
    expect_misuse(misuse_rollback_ahead, "ahead of the current position");
    expect_misuse(misuse_rollback_foreign, "not from this arena");
    expect_misuse(misuse_bad_align, "not a power of two");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_reset_to_empty),
        cmocka_unit_test(test_rollback),
        cmocka_unit_test(test_peak_exact),
        cmocka_unit_test(test_no_grow_fails_when_full),
        cmocka_unit_test(test_grow_oversize),
        cmocka_unit_test(test_stress_shadow),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
