/* kv "block" through its vtable: attention through block tables equals the
 * contiguous cache's (bit for bit) and a float64 reference (KVT_ATOL/KVT_RTOL),
 * the block allocator's free list and reference counts, waste <= block_size - 1
 * tokens per sequence, prefix caching, LRU eviction, copy-on-write, no block
 * leaked, option errors, and the stories260K oracle through the engine. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/lib/kv_test.h"

static void test_attention_through_tables(void **state) {
    (void)state;
    expect_attention_matches("block", "block_size=5");
    expect_attention_matches("block", "block_size=16");
    expect_attention_matches("block", "block_size=1");
}

static void test_allocator_and_waste(void **state) {
    (void)state;
    bench_kv_shape s = shape3;
    data d;
    data_make(&d, &s, 11);
    double tb = (double)kvt_token_bytes(&s);
    kvt t;
    kvt_must_open(&t, "block", &s, "block_size=8,pool_tokens=40"); /* 5 blocks */
    assert_int_equal((int)kvt_counter(&t, "blocks_total"), 5);
    assert_true(kvt_counter(&t, "bytes_reserved") == 40 * tb);
    kvt_append(&t, 0, 0, 17, d.k, d.v, NULL);
    assert_int_equal((int)kvt_counter(&t, "blocks_in_use"), 3);
    assert_true(kvt_counter(&t, "bytes_used") == 17 * tb);
    assert_true(kvt_counter(&t, "bytes_wasted") == 7 * tb);
    /* 3 more blocks do not fit in the 2 left: an error, and nothing half-taken */
    char err[256];
    assert_true(t.kv->reserve(t.ctx, 1, 17, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "full"));
    assert_int_equal((int)kvt_counter(&t, "blocks_in_use"), 3);
    assert_int_equal((int)kvt_counter(&t, "blocks_free"), 2);
    assert_int_equal((int)kvt_counter(&t, "alloc_failures"), 1);
    kvt_append(&t, 1, 0, 16, d.k, d.v, NULL);
    assert_int_equal((int)kvt_counter(&t, "blocks_free"), 0);
    assert_true(kvt_counter(&t, "bytes_wasted") == 7 * tb); /* 16 fills two blocks exactly */
    t.kv->release(t.ctx, 0);
    t.kv->release(t.ctx, 1);
    assert_int_equal((int)kvt_counter(&t, "blocks_free"), 5);
    assert_int_equal((int)kvt_counter(&t, "blocks_peak"), 5);
    assert_true(kvt_counter(&t, "bytes_wasted_peak") == 7 * tb);
    kvt_close(&t);

    /* random lengths: waste is exactly the tail of each last block, < block_size per sequence */
    const int bs_list[] = {1, 3, 16};
    unsigned seed = 5;
    for (int b = 0; b < 3; b++) {
        int bs = bs_list[b];
        char opts[64];
        snprintf(opts, sizeof(opts), "block_size=%d", bs);
        kvt_must_open(&t, "block", &s, opts);
        for (int round = 0; round < 20; round++) {
            int want_waste = 0, want_used = 0;
            for (int q = 0; q < s.max_seqs; q++) {
                int len = 1 + (int)((kvt_rand(&seed) + 1.0f) * 33.0f) % s.max_pos;
                kvt_append(&t, q, 0, len, d.k, d.v, NULL);
                want_used += len;
                want_waste += (len + bs - 1) / bs * bs - len;
            }
            assert_true(kvt_counter(&t, "bytes_used") == want_used * tb);
            assert_true(kvt_counter(&t, "bytes_wasted") == want_waste * tb);
            assert_true(want_waste <= s.max_seqs * (bs - 1));
            for (int q = 0; q < s.max_seqs; q++) t.kv->release(t.ctx, q);
            assert_int_equal((int)kvt_counter(&t, "blocks_in_use"), 0);
            assert_int_equal((int)kvt_counter(&t, "blocks_free"), (int)kvt_counter(&t, "blocks_total"));
        }
        kvt_close(&t);
    }
    data_free(&d);
}

static void test_prefix_cache(void **state) {
    (void)state;
    bench_kv_shape s = shape3;
    data d;
    data_make(&d, &s, 13);
    int ids[67], other[67];
    for (int i = 0; i < 67; i++) { ids[i] = 100 + i; other[i] = 300 + i; }
    int q_dim = s.n_heads * s.head_dim;
    kvt t;
    kvt_must_open(&t, "block", &s, "block_size=4,pool_tokens=16"); /* 4 blocks */
    const struct bench_kv_iface *kv = t.kv;
    assert_non_null(kv);
    char err[256];
    kvt_append(&t, 0, 0, 10, d.k, d.v, ids);
    t.kv->attend(t.ctx, 0, 1, 0, 10, d.q, d.out);
    t.kv->release(t.ctx, 0);
    /* the two full blocks stay cached; the partial third is freed */
    assert_int_equal((int)kvt_counter(&t, "blocks_cached"), 2);
    assert_int_equal((int)kvt_counter(&t, "blocks_free"), 2);

    /* a hit never covers the last id: 10 ids -> 2 blocks, 8 ids -> 1 block */
    assert_int_equal(kv->share_prefix(t.ctx, 1, ids, 8, err, sizeof(err)), 4);
    t.kv->release(t.ctx, 1);
    assert_int_equal(kv->share_prefix(t.ctx, 1, ids, 10, err, sizeof(err)), 8);
    assert_int_equal((int)kvt_counter(&t, "prefix_hit_tokens"), 12);
    assert_int_equal((int)kvt_counter(&t, "blocks_in_use"), 2);
    assert_int_equal((int)kvt_counter(&t, "blocks_cached"), 0);
    /* the shared prefix serves attention: same output as the sequence that computed it */
    kvt_append(&t, 1, 8, 2, d.k, d.v, ids);
    t.kv->attend(t.ctx, 1, 1, 0, 10, d.q, d.out2);
    assert_memory_equal(d.out, d.out2, (size_t)10 * q_dim * sizeof(float));
    assert_true(kv->share_prefix(t.ctx, 1, ids, 10, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "empty"));
    /* a different second block: one block of hit */
    other[0] = ids[0]; other[1] = ids[1]; other[2] = ids[2]; other[3] = ids[3];
    assert_int_equal(kv->share_prefix(t.ctx, 2, other, 10, err, sizeof(err)), 4);
    t.kv->release(t.ctx, 2);
    t.kv->release(t.ctx, 1);
    assert_int_equal((int)kvt_counter(&t, "blocks_cached"), 2);

    /* LRU eviction: 12 fresh positions need 3 blocks, 2 are free: the deepest cached
     * block (ids 4..7, released first) goes, the head (ids 0..3) stays */
    for (int i = 0; i < 67; i++) other[i] = 500 + i;
    kvt_append(&t, 0, 0, 12, d.k, d.v, other);
    assert_int_equal((int)kvt_counter(&t, "evictions"), 1);
    assert_int_equal(kv->share_prefix(t.ctx, 2, ids, 10, err, sizeof(err)), 4);
    /* everything in use or held: the pool is full */
    assert_true(t.kv->reserve(t.ctx, 1, 1, err, sizeof(err)) < 0);
    t.kv->release(t.ctx, 0);
    t.kv->release(t.ctx, 2);
    assert_int_equal((int)kvt_counter(&t, "blocks_in_use"), 0);
    assert_int_equal((int)(kvt_counter(&t, "blocks_free") + kvt_counter(&t, "blocks_cached")), 4);
    kvt_close(&t);

    /* prefix_cache=0: nothing is kept */
    kvt_must_open(&t, "block", &s, "block_size=4,prefix_cache=0");
    kvt_append(&t, 0, 0, 10, d.k, d.v, ids);
    t.kv->release(t.ctx, 0);
    assert_int_equal((int)kvt_counter(&t, "blocks_cached"), 0);
    assert_int_equal(t.kv->share_prefix(t.ctx, 0, ids, 10, err, sizeof(err)), 0);
    kvt_close(&t);
    data_free(&d);
}

static void test_fork_copy_on_write(void **state) {
    (void)state;
    bench_kv_shape s = shape3;
    data d;
    data_make(&d, &s, 17);
    int q_dim = s.n_heads * s.head_dim;
    kvt t;
    kvt_must_open(&t, "block", &s, "block_size=4");
    const struct bench_kv_iface *kv = t.kv;
    char err[256];
    kvt_append(&t, 0, 0, 6, d.k, d.v, NULL);
    t.kv->attend(t.ctx, 0, 0, 0, 6, d.q, d.out);
    assert_int_equal(kv->fork(t.ctx, 0, 1, err, sizeof(err)), 0);
    assert_int_equal((int)kvt_counter(&t, "blocks_in_use"), 2); /* shared, not copied */
    assert_true(kv->fork(t.ctx, 0, 1, err, sizeof(err)) < 0);
    /* seq 1 appends into the shared partial block: it gets its own copy */
    const float *k1 = d.k + seq_off(&s, 1), *v1 = d.v + seq_off(&s, 1);
    kvt_append(&t, 1, 6, 1, k1, v1, NULL);
    assert_int_equal((int)kvt_counter(&t, "cow_copies"), 1);
    assert_int_equal((int)kvt_counter(&t, "blocks_in_use"), 3);
    /* seq 0 is untouched; seq 1 sees seq 0's six positions then its own */
    t.kv->attend(t.ctx, 0, 0, 0, 6, d.q, d.out2);
    assert_memory_equal(d.out, d.out2, (size_t)6 * q_dim * sizeof(float));
    size_t kv_dim = (size_t)s.n_kv_heads * s.head_dim;
    float *k = malloc((size_t)s.max_pos * kv_dim * sizeof(float)), *v = malloc((size_t)s.max_pos * kv_dim * sizeof(float));
    assert_true(k && v);
    memcpy(k, d.k, 6 * kv_dim * sizeof(float));
    memcpy(v, d.v, 6 * kv_dim * sizeof(float));
    memcpy(k + 6 * kv_dim, k1 + 6 * kv_dim, kv_dim * sizeof(float));
    memcpy(v + 6 * kv_dim, v1 + 6 * kv_dim, kv_dim * sizeof(float));
    t.kv->attend(t.ctx, 1, 0, 0, 7, d.q, d.out);
    kvt_reference(&s, k, v, 0, 7, d.q, d.ref);
    kvt_expect_close(d.out, d.ref, (size_t)7 * q_dim, "block after copy-on-write");
    /* seq 0 now holds its block alone: no second copy */
    kvt_append(&t, 0, 6, 1, d.k, d.v, NULL);
    assert_int_equal((int)kvt_counter(&t, "cow_copies"), 1);
    t.kv->release(t.ctx, 0);
    t.kv->release(t.ctx, 1);
    assert_int_equal((int)kvt_counter(&t, "blocks_free"), (int)kvt_counter(&t, "blocks_total"));
    free(k);
    free(v);
    kvt_close(&t);
    data_free(&d);
}

static void test_option_errors(void **state) {
    (void)state;
    kvt t;
    char err[512];
    assert_true(kvt_open(&t, "block", &shape3, "block_size=0", err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "block_size"));
    assert_true(kvt_open(&t, "block", &shape3, "block_size=68", err, sizeof(err)) < 0);
    assert_true(kvt_open(&t, "block", &shape3, "pool_tokens=64,pool_bytes=1m", err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "not both"));
    assert_true(kvt_open(&t, "block", &shape3, "pool_bytes=100", err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "pool_bytes"));
    /* 1 MiB over 16-token blocks of 640 bytes a token: 102 blocks */
    kvt_must_open(&t, "block", &shape3, "pool_bytes=1m");
    assert_int_equal((int)kvt_counter(&t, "blocks_total"), (1 << 20) / (16 * 640));
    assert_true(t.kv->reserve(t.ctx, 3, 1, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "out of range"));
    assert_true(t.kv->reserve(t.ctx, 0, 68, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "context"));
    kvt_close(&t);
}

/* The stories260K oracle with 7-token blocks (the last block partial): the ids,
 * then the blocks and the waste the counters report, then nothing held after the reset. */
static void check_blocks(engine *e, int stored) {
    int blocks = (stored + 6) / 7;
    assert_int_equal((int)kvt_engine_counter(e, "kv.blocks_in_use"), blocks);
    assert_true(kvt_engine_counter(e, "kv.bytes_wasted") == (blocks * 7 - stored) * kvt_engine_token_bytes(e));
    engine_reset(e, 0);
    assert_int_equal((int)kvt_engine_counter(e, "kv.blocks_in_use"), 0);
}

static void test_engine_oracle(void **state) {
    (void)state;
    bench_opt o[] = {{.key = "block_size", .value = "7"}};
    kvt_expect_oracle("block", (bench_opts){1, o}, check_blocks);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_through_tables),
        cmocka_unit_test(test_allocator_and_waste),
        cmocka_unit_test(test_prefix_cache),
        cmocka_unit_test(test_fork_copy_on_write),
        cmocka_unit_test(test_option_errors),
        cmocka_unit_test(test_engine_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
