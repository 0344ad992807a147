/* kv "token" through its vtable: attention through slot indices equals the
 * contiguous cache's (bit for bit) and a float64 reference (KVT_ATOL/KVT_RTOL),
 * the free-slot stack (no slot leaked), zero waste, radix-tree prefix sharing with
 * node splits, LRU eviction of unlocked leaves only, fork, option errors, and the
 * stories260K oracle through the engine. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/lib/kv_test.h"

static void test_attention_through_slots(void **state) {
    (void)state;
    expect_attention_matches("token", "");
    expect_attention_matches("token", "prefix_cache=0");
}

static void test_slots_and_waste(void **state) {
    (void)state;
    bench_kv_shape s = shape3;
    data d;
    data_make(&d, &s, 3);
    double tb = (double)kvt_token_bytes(&s);
    kvt t;
    kvt_must_open(&t, "token", &s, "");
    assert_int_equal((int)kvt_counter(&t, "slots_total"), 3 * 67);
    unsigned seed = 9;
    for (int round = 0; round < 20; round++) {
        int used = 0;
        for (int q = 0; q < s.max_seqs; q++) {
            int len = 1 + (int)((kvt_rand(&seed) + 1.0f) * 33.0f) % s.max_pos;
            kvt_append(&t, q, 0, len, d.k, d.v, NULL);
            used += len;
        }
        assert_true(kvt_counter(&t, "bytes_used") == used * tb);
        assert_true(kvt_counter(&t, "bytes_wasted") == 0);
        for (int q = 0; q < s.max_seqs; q++) t.kv->release(t.ctx, q);
        assert_int_equal((int)kvt_counter(&t, "slots_free"), 3 * 67);
    }
    kvt_close(&t);

    char err[256];
    kvt_must_open(&t, "token", &s, "pool_tokens=10");
    kvt_append(&t, 0, 0, 7, d.k, d.v, NULL);
    assert_true(t.kv->reserve(t.ctx, 1, 4, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "full"));
    assert_int_equal((int)kvt_counter(&t, "slots_in_use"), 7);
    kvt_append(&t, 1, 0, 3, d.k, d.v, NULL);
    assert_int_equal((int)kvt_counter(&t, "slots_free"), 0);
    t.kv->release(t.ctx, 0);
    t.kv->release(t.ctx, 1);
    assert_int_equal((int)kvt_counter(&t, "slots_free"), 10);
    assert_int_equal((int)kvt_counter(&t, "slots_peak"), 10);
    kvt_close(&t);
    data_free(&d);
}

static void test_radix_sharing_and_eviction(void **state) {
    (void)state;
    bench_kv_shape s = shape3;
    data d;
    data_make(&d, &s, 21);
    int a[67], b[67];
    for (int i = 0; i < 67; i++) { a[i] = 100 + i; b[i] = 200 + i; }
    int q_dim = s.n_heads * s.head_dim;
    char err[256];
    kvt t;
    kvt_must_open(&t, "token", &s, "pool_tokens=20");
    const struct bench_kv_iface *kv = t.kv;
    assert_non_null(kv);

    kvt_append(&t, 0, 0, 10, d.k, d.v, a);
    t.kv->attend(t.ctx, 0, 1, 0, 10, d.q, d.out);
    t.kv->release(t.ctx, 0);
    assert_int_equal((int)kvt_counter(&t, "slots_in_use"), 10);
    assert_int_equal((int)kvt_counter(&t, "slots_cached"), 10);
    assert_int_equal((int)kvt_counter(&t, "tree_nodes"), 1);

    /* a hit stops before the last id and splits the edge there */
    assert_int_equal(kv->share_prefix(t.ctx, 1, a, 10, err, sizeof(err)), 9);
    assert_int_equal((int)kvt_counter(&t, "tree_nodes"), 2);
    assert_int_equal((int)kvt_counter(&t, "slots_cached"), 1); /* the split-off leaf; the 9 are locked */
    kvt_append(&t, 1, 9, 1, d.k, d.v, a);
    t.kv->attend(t.ctx, 1, 1, 0, 10, d.q, d.out2);
    assert_memory_equal(d.out, d.out2, (size_t)10 * q_dim * sizeof(float));
    assert_true(kv->share_prefix(t.ctx, 1, a, 10, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "empty"));
    /* the duplicate of position 9 goes back to the free stack at release */
    t.kv->release(t.ctx, 1);
    assert_int_equal((int)kvt_counter(&t, "slots_in_use"), 10);
    assert_int_equal((int)kvt_counter(&t, "prefix_hit_tokens"), 9);

    /* b: 8 more tree slots, 2 free. 6 private slots evict the least recently used
     * unlocked leaves: a's 1-slot leaf, then its 9-slot parent, now a leaf */
    kvt_append(&t, 0, 0, 8, d.k, d.v, b);
    t.kv->release(t.ctx, 0);
    assert_int_equal((int)kvt_counter(&t, "slots_free"), 2);
    kvt_append(&t, 2, 0, 6, d.k, d.v, NULL);
    assert_int_equal((int)kvt_counter(&t, "evictions"), 10);
    assert_int_equal((int)kvt_counter(&t, "tree_nodes"), 1);
    assert_int_equal(kv->share_prefix(t.ctx, 1, a, 10, err, sizeof(err)), 0);
    t.kv->release(t.ctx, 1);
    /* a locked prefix is never evicted: seq 1 holds b[0..7); only b's last slot can go */
    assert_int_equal(kv->share_prefix(t.ctx, 1, b, 8, err, sizeof(err)), 7);
    assert_true(t.kv->reserve(t.ctx, 0, 8, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "full"));
    assert_int_equal((int)kvt_counter(&t, "evictions"), 11);
    assert_int_equal((int)kvt_counter(&t, "alloc_failures"), 1);
    t.kv->release(t.ctx, 1);
    assert_int_equal(kv->share_prefix(t.ctx, 0, b, 8, err, sizeof(err)), 7);
    t.kv->release(t.ctx, 0);
    t.kv->release(t.ctx, 2);
    /* no slot leaked: only the tree's 7 are held, all evictable */
    assert_int_equal((int)kvt_counter(&t, "slots_in_use"), 7);
    assert_int_equal((int)kvt_counter(&t, "slots_cached"), 7);
    assert_int_equal((int)kvt_counter(&t, "slots_free"), 13);
    kvt_close(&t);

    kvt_must_open(&t, "token", &s, "prefix_cache=0");
    kvt_append(&t, 0, 0, 10, d.k, d.v, a);
    t.kv->release(t.ctx, 0);
    assert_int_equal((int)kvt_counter(&t, "slots_in_use"), 0);
    assert_int_equal(t.kv->share_prefix(t.ctx, 0, a, 10, err, sizeof(err)), 0);
    kvt_close(&t);
    data_free(&d);
}

static void test_fork(void **state) {
    (void)state;
    bench_kv_shape s = shape3;
    data d;
    data_make(&d, &s, 23);
    int a[67];
    for (int i = 0; i < 67; i++) a[i] = 100 + i;
    int q_dim = s.n_heads * s.head_dim;
    double tb = (double)kvt_token_bytes(&s);
    char err[256];
    kvt t;
    kvt_must_open(&t, "token", &s, "");
    const struct bench_kv_iface *kv = t.kv;
    /* with ids the prompt is in the tree: the fork shares it, copies nothing */
    kvt_append(&t, 0, 0, 6, d.k, d.v, a);
    t.kv->attend(t.ctx, 0, 0, 0, 6, d.q, d.out);
    assert_int_equal(kv->fork(t.ctx, 0, 1, err, sizeof(err)), 0);
    assert_int_equal((int)kvt_counter(&t, "slots_in_use"), 6);
    assert_true(kvt_counter(&t, "bytes_copied") == 0);
    assert_true(kv->fork(t.ctx, 0, 1, err, sizeof(err)) < 0);
    kvt_append(&t, 1, 6, 1, d.k + seq_off(&s, 1), d.v + seq_off(&s, 1), NULL);
    t.kv->attend(t.ctx, 0, 0, 0, 6, d.q, d.out2);
    assert_memory_equal(d.out, d.out2, (size_t)6 * q_dim * sizeof(float));
    t.kv->release(t.ctx, 1);
    /* without ids the private positions are copied */
    kvt_append(&t, 1, 0, 5, d.k + seq_off(&s, 1), d.v + seq_off(&s, 1), NULL);
    t.kv->attend(t.ctx, 1, 1, 0, 5, d.q, d.out);
    assert_int_equal(kv->fork(t.ctx, 1, 2, err, sizeof(err)), 0);
    assert_true(kvt_counter(&t, "bytes_copied") == 5 * tb);
    t.kv->attend(t.ctx, 2, 1, 0, 5, d.q, d.out2);
    assert_memory_equal(d.out, d.out2, (size_t)5 * q_dim * sizeof(float));
    for (int q = 0; q < 3; q++) t.kv->release(t.ctx, q);
    assert_int_equal((int)kvt_counter(&t, "slots_in_use"), 6); /* the tree's prompt */
    kvt_close(&t);
    data_free(&d);
}

static void test_option_errors(void **state) {
    (void)state;
    kvt t;
    char err[512];
    assert_true(kvt_open(&t, "token", &shape3, "pool_tokens=64,pool_bytes=1m", err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "not both"));
    assert_true(kvt_open(&t, "token", &shape3, "pool_bytes=100", err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "pool_bytes"));
    assert_true(kvt_open(&t, "token", &shape3, "prefix_cache=maybe", err, sizeof(err)) < 0);
    kvt_must_open(&t, "token", &shape3, "pool_bytes=64k");
    assert_int_equal((int)kvt_counter(&t, "slots_total"), 65536 / 640);
    assert_true(t.kv->reserve(t.ctx, -1, 1, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "out of range"));
    kvt_close(&t);
}

static void check_slots(engine *e, int stored) {
    assert_int_equal((int)kvt_engine_counter(e, "kv.slots_in_use"), stored);
    assert_true(kvt_engine_counter(e, "kv.bytes_wasted") == 0);
    engine_reset(e, 0);
    /* the whole sequence stays in the radix tree, unlocked */
    assert_int_equal((int)kvt_engine_counter(e, "kv.slots_cached"), stored);
}

static void test_engine_oracle(void **state) {
    (void)state;
    kvt_expect_oracle("token", (bench_opts){0, NULL}, check_slots);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_through_slots),
        cmocka_unit_test(test_slots_and_waste),
        cmocka_unit_test(test_radix_sharing_and_eviction),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_option_errors),
        cmocka_unit_test(test_engine_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
