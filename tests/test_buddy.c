/* buddy: split and coalesce, alignment, exhaustion, a shadow-model stress, misuse. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "allocators/buddy.h"
#include "tests/lib/alloc_test.h"

static void check(buddy *b) {
    char err[256];
    if (buddy_check(b, err, sizeof(err))) fail_msg("%s", err);
}

/* Everything freed: one free block of the top order, nothing else. */
static void assert_whole(buddy *b) {
    buddy_flush(b);
    unsigned K = buddy_max_order(b);
    for (unsigned k = 0; k < K; k++)
        if (buddy_free_count(b, k) != 0) fail_msg("order %u still has %ld free blocks", k, buddy_free_count(b, k));
    assert_int_equal(buddy_free_count(b, K), 1);
}

static void test_create_params(void **state) {
    (void)state;
    buddy *b = buddy_create(3 << 20, 0, 8, 0);   /* rounded up to 4 MiB */
    assert_non_null(b);
    assert_int_equal(buddy_region(b), 4 << 20);
    assert_int_equal(buddy_min_block(b), 64);
    assert_int_equal(buddy_max_order(b), 16);
    assert_whole(b);
    check(b);
    buddy_destroy(b);
    assert_null(buddy_create(1 << 20, 48, 8, 0));   /* min block not a power of two */
    assert_null(buddy_create(1 << 20, 8, 8, 0));    /* too small for the free-list links */
    buddy_destroy(NULL);
}

static void test_split_coalesce(void **state) {
    (void)state;
    buddy *b = buddy_create(1 << 20, 64, 0, 0);   /* no cache: every free coalesces at once */
    assert_non_null(b);
    char *x = buddy_alloc(b, 64, 16);
    assert_non_null(x);
    /* One 64 B block split the region: one free block at every order below the top. */
    for (unsigned k = 0; k < buddy_max_order(b); k++) assert_int_equal(buddy_free_count(b, k), 1);
    char *y = buddy_alloc(b, 64, 16);
    assert_ptr_equal(y, x + 64);   /* x's buddy */
    check(b);
    buddy_free(b, x, 64);
    buddy_free(b, y, 64);
    assert_whole(b);
    /* Fill the region with min blocks, free in a shuffled order, and it is whole again. */
    size_t n = buddy_region(b) / 64;
    char **v = malloc(n * sizeof(*v));
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) assert_non_null(v[i] = buddy_alloc(b, 64, 64));
    assert_null(buddy_alloc(b, 1, 16));
    check(b);
    uint64_t rng = 99;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = tr_next(&rng) % (i + 1);
        char *t = v[i]; v[i] = v[j]; v[j] = t;
    }
    for (size_t i = 0; i < n; i++) buddy_free(b, v[i], 64);
    assert_whole(b);
    check(b);
    free(v);
    buddy_destroy(b);
}

static void test_alignment(void **state) {
    (void)state;
    buddy *b = buddy_create(64 << 20, 16, 8, 0);
    assert_non_null(b);
    for (size_t align = 1; align <= 65536; align *= 2)
        for (size_t size = 1; size <= 100000; size = size * 3 + 1) {
            char *p = buddy_alloc(b, size, align);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % align, 0);
            memset(p, 0x11, size);
            buddy_free(b, p, size);   /* free is given only the size: the order comes from the alloc bits */
        }
    assert_whole(b);
    /* Aligned blocks kept live together, then freed. */
    char *v[13];
    for (unsigned i = 0; i < 13; i++) {
        v[i] = buddy_alloc(b, 24, (size_t)1 << i);
        assert_int_equal((uintptr_t)v[i] % ((size_t)1 << i), 0);
    }
    check(b);
    for (unsigned i = 0; i < 13; i++) buddy_free(b, v[i], 24);
    assert_whole(b);
    assert_null(buddy_alloc(b, (64 << 20) + 1, 16));
    buddy_destroy(b);
}

static void test_stress_shadow(void **state) {
    (void)state;
    buddy *b = buddy_create(256 << 20, 32, 8, 0);
    assert_non_null(b);
    enum { SLOTS = 2000 };
    live_blk *v = calloc(SLOTS, sizeof(*v));
    assert_non_null(v);
    uint64_t rng = 4242;
    uint32_t id = 0;
    size_t n = 0;
    for (int op = 0; op < 60000; op++) {
        if (n == 0 || (n < SLOTS && tr_next(&rng) % 100 < 52)) {
            size_t size = tr_size(&rng, 1, 65536), align = (size_t)1 << (tr_next(&rng) % 13);
            char *p = buddy_alloc(b, size, align);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % align, 0);
            pat_fill(p, size, ++id);
            v[n++] = (live_blk){p, size, id};
        } else {
            size_t i = tr_next(&rng) % n;
            if (!pat_ok(v[i].p, v[i].size, v[i].id)) fail_msg("block %u (%zu B) was overwritten", v[i].id, v[i].size);
            buddy_free(b, v[i].p, v[i].size);
            v[i] = v[--n];
        }
        if (op % 10000 == 0) {
            assert_disjoint(v, n);
            check(b);
        }
    }
    assert_disjoint(v, n);
    while (n) {
        n--;
        assert_true(pat_ok(v[n].p, v[n].size, v[n].id));
        buddy_free(b, v[n].p, v[n].size);
    }
    assert_whole(b);
    check(b);
#if BENCH_ALLOC_STATS
    alloc_stats st;
    buddy_get_stats(b, &st);
    assert_int_equal(st.allocs, st.frees);
    assert_int_equal(st.bytes_live, 0);
    assert_true(st.bytes_peak > 0 && st.bytes_reserved >= st.bytes_peak);
#endif
    free(v);
    buddy_destroy(b);
}

/* The cache hands a freed block straight back, and flush coalesces what it holds. */
static void test_cache(void **state) {
    (void)state;
    buddy *b = buddy_create(1 << 20, 64, 2, 0);
    void *p = buddy_alloc(b, 64, 16), *q = buddy_alloc(b, 64, 16), *r = buddy_alloc(b, 64, 16);
    buddy_free(b, p, 64);
    assert_ptr_equal(buddy_alloc(b, 50, 16), p);
    buddy_free(b, p, 50);
    buddy_free(b, q, 64);
    buddy_free(b, r, 64);   /* the cache holds 2: this one coalesces */
    check(b);
    assert_int_equal(buddy_free_count(b, buddy_max_order(b)), 0);
    assert_whole(b);
    check(b);
    buddy_destroy(b);
}

/* ---- misuse ---- */

static void misuse_double_free_nocache(void) {
    buddy *b = buddy_create(1 << 20, 64, 0, 0);
    void *p = buddy_alloc(b, 100, 16);
    buddy_alloc(b, 100, 16);
    buddy_free(b, p, 100);
    buddy_free(b, p, 100);
}

static void misuse_double_free(void) {
    buddy *b = buddy_create(1 << 20, 64, 8, 0);
    void *p = buddy_alloc(b, 100, 16);
    buddy_alloc(b, 100, 16);
    buddy_free(b, p, 100);
    buddy_free(b, p, 100);
}
static void misuse_foreign(void) {
    buddy *b = buddy_create(1 << 20, 64, 8, 0);
    static char elsewhere[128];
    buddy_free(b, elsewhere, 64);
}
static void misuse_other_buddy(void) {
    buddy *a = buddy_create(1 << 20, 64, 8, 0), *b = buddy_create(1 << 20, 64, 8, 0);
    buddy_free(b, buddy_alloc(a, 64, 16), 64);
}
static void misuse_interior(void) {
    buddy *b = buddy_create(1 << 20, 64, 8, 0);
    char *p = buddy_alloc(b, 1024, 16);
    buddy_free(b, p + 64, 64);
}
static void misuse_too_big(void) {
    buddy *b = buddy_create(1 << 20, 64, 8, 0);
    void *p = buddy_alloc(b, 64, 16);
    buddy_alloc(b, 64, 16);
    buddy_free(b, p, 4096);
}

static void test_misuse(void **state) {
    (void)state;
    if (!BENCH_ALLOC_DEBUG) skip();
    expect_misuse(misuse_double_free, "double free");
    expect_misuse(misuse_double_free_nocache, "double free");
    expect_misuse(misuse_foreign, "outside the region");
    expect_misuse(misuse_other_buddy, "outside the region");
    expect_misuse(misuse_interior, "no allocated block starts there");
    expect_misuse(misuse_too_big, "wrong size");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_params),
        cmocka_unit_test(test_split_coalesce),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_stress_shadow),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
