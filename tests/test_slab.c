/* slab: size classes, alignment, large pass-through, a shadow-model stress, threads
 * (including blocks freed on another thread than the one that allocated them), misuse. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocators/slab.h"
#include "tests/lib/alloc_test.h"

static void check(slab *s) {
    char err[256];
    if (slab_check(s, err, sizeof(err))) fail_msg("%s", err);
}

static void test_classes(void **state) {
    (void)state;
    size_t prev = 0;
    for (size_t sz = 1; sz <= SLAB_MAX_CLASS; sz++) {
        size_t c = slab_block_size(sz, 16);
        assert_true(c >= sz);
        assert_true(c >= prev);
        assert_true(c - sz < (sz <= 128 ? 16 : sz / 4 + 1));   /* waste under 25% above 128 B */
        prev = c;
    }
    assert_int_equal(slab_block_size(SLAB_MAX_CLASS + 1, 16), 0);
    assert_int_equal(slab_block_size(8, 8192), 0);   /* alignment above a page: mmap */
    assert_int_equal(slab_block_size(100, 64) % 64, 0);
}

static void test_alignment_and_large(void **state) {
    (void)state;
    slab *s = slab_create(64 << 20, 4 << 20);
    assert_non_null(s);
    for (size_t align = 1; align <= 16384; align *= 2)
        for (size_t size = 1; size <= 100000; size = size * 3 + 1) {
            char *p = slab_alloc(s, size, align);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % align, 0);
            memset(p, 0x5a, size);
            assert_true(slab_owns(s, p));
            slab_free(s, p, size);
        }
    check(s);
    alloc_stats st;
    slab_get_stats(s, &st);
#if BENCH_ALLOC_STATS
    assert_int_equal(st.allocs, st.frees);
    assert_int_equal(st.bytes_live, 0);
    assert_true(st.large_allocs > 0);
    assert_true(st.bytes_reserved >= SLAB_BYTES);
#endif
    slab_destroy(s);
    slab_destroy(NULL);
}

/* A freed large mapping is reused from the cache: the same address comes back. */
static void test_large_cache(void **state) {
    (void)state;
    slab *s = slab_create(0, 8 << 20);
    assert_non_null(s);
    void *p = slab_alloc(s, 1 << 20, 64);
    assert_non_null(p);
    slab_free(s, p, 1 << 20);
    void *q = slab_alloc(s, (1 << 20) - 100, 64);
    assert_ptr_equal(p, q);
    slab_free(s, q, (1 << 20) - 100);
    check(s);
    slab_destroy(s);
}

static void test_stress_shadow(void **state) {
    (void)state;
    slab *s = slab_create(256 << 20, 1 << 20);
    assert_non_null(s);
    enum { SLOTS = 2000 };
    live_blk *v = calloc(SLOTS, sizeof(*v));
    assert_non_null(v);
    uint64_t rng = 12345;
    uint32_t id = 0;
    size_t n = 0;
    for (int op = 0; op < 60000; op++) {
        int do_alloc = n == 0 || (n < SLOTS && tr_next(&rng) % 100 < 52);
        if (do_alloc) {
            size_t size = tr_size(&rng, 1, 65536), align = (size_t)1 << (3 + tr_next(&rng) % 10);
            char *p = slab_alloc(s, size, align);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % align, 0);
            pat_fill(p, size, ++id);
            v[n++] = (live_blk){p, size, id};
        } else {
            size_t i = tr_next(&rng) % n;
            if (!pat_ok(v[i].p, v[i].size, v[i].id)) fail_msg("block %u (%zu B) was overwritten", v[i].id, v[i].size);
            slab_free(s, v[i].p, v[i].size);
            v[i] = v[--n];
        }
        if (op % 10000 == 0) {
            assert_disjoint(v, n);
            check(s);
        }
    }
    assert_disjoint(v, n);
    while (n) {
        n--;
        assert_true(pat_ok(v[n].p, v[n].size, v[n].id));
        slab_free(s, v[n].p, v[n].size);
    }
    check(s);
#if BENCH_ALLOC_STATS
    alloc_stats st;
    slab_get_stats(s, &st);
    assert_int_equal(st.allocs, st.frees);
    assert_int_equal(st.bytes_live, 0);
#endif
    free(v);
    slab_destroy(s);
}

/* ---- threads ---- */

typedef struct thr_arg { slab *s; uint64_t seed; void **out; size_t n_out, allocs; int fail; } thr_arg;

static void *churn_thread(void *arg) {
    thr_arg *t = arg;
    void *keep[256];
    size_t sizes[256];
    int n = 0;
    for (int i = 0; i < 20000; i++) {
        if (n < 256 && (n == 0 || tr_next(&t->seed) % 2)) {
            sizes[n] = tr_size(&t->seed, 8, 4096);
            keep[n] = slab_alloc(t->s, sizes[n], 16);
            if (!keep[n]) { t->fail = 1; return NULL; }
            memset(keep[n], (int)(n & 0xff), sizes[n]);
            n++;
            t->allocs++;
        } else {
            int j = (int)(tr_next(&t->seed) % (uint64_t)n);
            if (((unsigned char *)keep[j])[sizes[j] - 1] != (unsigned char)(j & 0xff)) t->fail = 1;
            slab_free(t->s, keep[j], sizes[j]);
            n--;
            if (j != n) {
                keep[j] = keep[n];
                sizes[j] = sizes[n];
                memset(keep[j], (int)(j & 0xff), sizes[j]);
            }
        }
    }
    /* The rest is handed to the main thread, which frees it: cross-thread frees. */
    for (int i = 0; i < n; i++) t->out[i] = keep[i];
    t->n_out = (size_t)n;
    for (int i = 0; i < n; i++) t->out[256 + i] = (void *)(uintptr_t)sizes[i];
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    slab *s = slab_create(256 << 20, 0);
    assert_non_null(s);
    enum { T = 4 };
    pthread_t th[T];
    thr_arg args[T];
    void *outs[T][512];
    for (int i = 0; i < T; i++) {
        args[i] = (thr_arg){.s = s, .seed = 77 + (uint64_t)i, .out = outs[i]};
        assert_int_equal(pthread_create(&th[i], NULL, churn_thread, &args[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_false(args[i].fail);
    }
    check(s);
    for (int i = 0; i < T; i++)
        for (size_t j = 0; j < args[i].n_out; j++) slab_free(s, outs[i][j], (size_t)(uintptr_t)outs[i][256 + j]);
    check(s);
#if BENCH_ALLOC_STATS
    alloc_stats st;
    slab_get_stats(s, &st);
    assert_int_equal(st.allocs, st.frees);
    assert_int_equal(st.bytes_live, 0);
    size_t total = 0;
    for (int i = 0; i < T; i++) total += args[i].allocs;
    assert_int_equal(st.allocs, total);   /* summed over threads that have exited */
#endif
    slab_destroy(s);
}

/* A producer allocates, a consumer frees, at the same time, through a ring. */
enum { RING = 1024, PC_N = 50000 };
typedef struct pc_ring { slab *s; void *_Atomic slot[RING]; } pc_ring;

static void *producer(void *arg) {
    pc_ring *r = arg;
    for (int i = 0; i < PC_N; i++) {
        void *p = slab_alloc(r->s, 64, 16);
        if (!p) abort();
        *(int *)p = i;
        while (atomic_load_explicit(&r->slot[i % RING], memory_order_acquire)) sched_yield();
        atomic_store_explicit(&r->slot[i % RING], p, memory_order_release);
    }
    return NULL;
}

static void test_producer_consumer(void **state) {
    (void)state;
    pc_ring *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->s = slab_create(64 << 20, 0);
    assert_non_null(r->s);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, producer, r), 0);
    for (int i = 0; i < PC_N; i++) {
        void *p;
        while (!(p = atomic_load_explicit(&r->slot[i % RING], memory_order_acquire))) sched_yield();
        atomic_store_explicit(&r->slot[i % RING], NULL, memory_order_release);
        assert_int_equal(*(int *)p, i);
        slab_free(r->s, p, 64);
    }
    pthread_join(t, NULL);
    check(r->s);
#if BENCH_ALLOC_STATS
    alloc_stats st;
    slab_get_stats(r->s, &st);
    assert_int_equal(st.allocs, PC_N);
    assert_int_equal(st.frees, PC_N);
    assert_int_equal(st.bytes_live, 0);
#endif
    slab_destroy(r->s);
    free(r);
}

/* ---- the thread cache's bins ---- */

/* Rounds of 1000 x 64 B allocated, then freed newest first (or oldest first): more
 * than a bin holds at first (2 x 64 blocks), so the first rounds trip to the central
 * list; the bin's limit then grows to the working set, and later rounds make no trip. */
static void bursts(slab *s, int rounds, int lifo) {
    static void *v[1000];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 1000; i++) assert_non_null(v[i] = slab_alloc(s, 64, 16));
        for (int i = 0; i < 1000; i++) slab_free(s, v[lifo ? 999 - i : i], 64);
    }
}

static void test_bursts_stay_in_bin(void **state) {
    (void)state;
    if (!BENCH_ALLOC_STATS) skip();   /* the counters compile away */
    for (int lifo = 0; lifo < 2; lifo++) {
        slab *s = slab_create(64 << 20, 0);
        assert_non_null(s);
        uint64_t r0, f0, r1, f1;
        bursts(s, 4, lifo);
        check(s);   /* the bins' limits within [2 x batch, cap], counts within limits */
        slab_get_trips(s, &r0, &f0);
        assert_true(r0 >= 1000 / 64);   /* the first round carves in batches */
        bursts(s, 50, lifo);
        slab_get_trips(s, &r1, &f1);
        assert_int_equal(r1, r0);
        assert_int_equal(f1, f0);
        check(s);
        slab_destroy(s);
    }
}

/* A bin that only frees (another thread allocates) never refills, so its limit stays
 * 2 x batch: it gives a batch back every batch frees, and the allocating thread finds
 * them on the central list instead of carving new slabs. */
enum { FO_N = 10000 };
static void *fo_blocks[FO_N];

static void *free_only(void *arg) {
    slab *s = arg;
    for (int i = 0; i < FO_N; i++) slab_free(s, fo_blocks[i], 64);
    return NULL;   /* the thread's cache goes back to central at exit */
}

static void test_free_only_bin_keeps_limit(void **state) {
    (void)state;
    if (!BENCH_ALLOC_STATS) skip();   /* the counters compile away */
    slab *s = slab_create(64 << 20, 0);
    assert_non_null(s);
    for (int i = 0; i < FO_N; i++) assert_non_null(fo_blocks[i] = slab_alloc(s, 64, 16));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, free_only, s), 0);
    pthread_join(t, NULL);
    uint64_t refills, flushes;
    slab_get_trips(s, &refills, &flushes);
    /* 64 B: batch 64, limit 128. The bin overflows at its 129th block and then every 64
     * frees: 1 + (10000 - 129) / 64 = 155 flushes, then the 80 blocks left at exit. */
    assert_int_equal(flushes, 156);
    assert_int_equal(refills, (FO_N + 63) / 64);   /* the allocating thread carved them, 64 at a time */
    check(s);
    slab_destroy(s);
}

/* ---- misuse ---- */

static void misuse_double_free_small(void) {
    slab *s = slab_create(16 << 20, 0);
    void *p = slab_alloc(s, 64, 16);
    slab_free(s, p, 64);
    slab_free(s, p, 64);
}
static void misuse_double_free_large(void) {
    slab *s = slab_create(16 << 20, 0);
    void *p = slab_alloc(s, 100000, 16);
    slab_free(s, p, 100000);
    slab_free(s, p, 100000);
}
static void misuse_foreign(void) {
    slab *s = slab_create(16 << 20, 0);
    void *p = malloc(64);
    slab_free(s, p, 64);
}
static void misuse_other_slab(void) {
    slab *a = slab_create(16 << 20, 0), *b = slab_create(16 << 20, 0);
    void *p = slab_alloc(a, 64, 16);
    slab_free(b, p, 64);
}
static void misuse_interior(void) {
    slab *s = slab_create(16 << 20, 0);
    char *p = slab_alloc(s, 64, 16);
    slab_free(s, p + 16, 48);
}
static void misuse_wrong_size(void) {
    slab *s = slab_create(16 << 20, 0);
    void *p = slab_alloc(s, 64, 16);
    slab_free(s, p, 4000);
}

static void test_misuse(void **state) {
    (void)state;
    if (!BENCH_ALLOC_DEBUG) skip();
    expect_misuse(misuse_double_free_small, "double free");
    expect_misuse(misuse_double_free_large, "double free");
    expect_misuse(misuse_foreign, "not a live block of this allocator");
    expect_misuse(misuse_other_slab, "not a live block of this allocator");
    expect_misuse(misuse_interior, "not the start of a");
    expect_misuse(misuse_wrong_size, "wrong size");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_alignment_and_large),
        cmocka_unit_test(test_large_cache),
        cmocka_unit_test(test_stress_shadow),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_producer_consumer),
        cmocka_unit_test(test_bursts_stay_in_bin),
        cmocka_unit_test(test_free_only_bin_keeps_limit),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
