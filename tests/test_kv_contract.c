/* The KV interface's contract, for every kv module found on the module path (tu_modules:
 * none is named here, so a module dropped into a module folder is checked with no edit):
 *   - the registration: capabilities and slots agree (modreg.c refused it otherwise), f32 is
 *     among its cache types;
 *   - store and attend against a float64 reference, prefill-shaped (n > 1) and decode-shaped
 *     (n = 1), on three sequences interleaved;
 *   - the memory slot: used is exactly the stored positions' bytes, reserved covers it,
 *     wasted and cached are inside it, and release gives the positions back;
 *   - reserve past the context is refused with a message, and leaves the sequence usable;
 *   - with BENCH_CAP_KV_PREFIX_SHARE, a released prefix is attached to a new sequence and
 *     attends as if stored; with BENCH_CAP_KV_FORK, two forked sequences diverge
 *     (copy-on-write) and each attends over its own positions;
 *   - all of it in every cache type the module declares (kv.h cache_types), K and V alike and
 *     one mixed pair, with the K/V data first rounded to the type by the core's own
 *     conversion (kn_quant_row), so that the float64 reference sees what the cache holds;
 *     a head size the type cannot hold (q8_0 with 20) is refused with BENCH_ERR_REFUSED.
 * BENCH_CONFORMANCE=kv=NAME narrows the list (the SDK test runs it on an out-of-tree module). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/lib/kv_test.h"

/* GQA (2 query heads per KV head), a head size that is a multiple of 16 (the tree-ordered dot
 * of the built-in modules) and one that is not (shape3: 20). */
static const bench_kv_shape contract_shapes[] = {
    {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32, .max_pos = 48, .max_seqs = 3},
    {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 20, .max_pos = 67, .max_seqs = 3},
};

/* K and V of d rounded to the shape's types, row by row (kv_dim values), as the core converts
 * weights: what a cache of that type stores. */
static void round_to(const bench_kv_shape *s, data *d) {
    size_t kv_dim = (size_t)s->n_kv_heads * s->head_dim, rows = (size_t)s->max_seqs * s->n_layers * s->max_pos;
    for (size_t r = 0; r < rows; r++) {
        kvt_round(s->k_type, d->k + r * kv_dim, kv_dim);
        kvt_round(s->v_type, d->v + r * kv_dim, kv_dim);
    }
}

static bench_kv_memory mem_of(const kvt *t) {
    bench_kv_memory m = {0, 0, 0, 0};
    t->kv->memory(t->ctx, &m);
    return m;
}

static void expect_memory_sane(const kvt *t, const char *when) {
    bench_kv_memory m = mem_of(t);
    if (m.used > m.reserved || m.cached > m.used || m.wasted > m.reserved - m.used)
        fail_msg("kv %s %s: memory reserved %llu, used %llu, cached %llu, wasted %llu is not consistent "
                 "(used <= reserved, cached <= used, wasted <= reserved - used)", t->ent.mod->name, when,
                 (unsigned long long)m.reserved, (unsigned long long)m.used, (unsigned long long)m.cached,
                 (unsigned long long)m.wasted);
}

/* attention of queries [pos0, pos0+n) of seq in every layer against the float64 reference
 * over the positions of k/v (layout of data: one sequence's block of it) */
static void expect_attends(kvt *t, data *d, int seq, const float *k, const float *v, int pos0, int n, const char *what) {
    const bench_kv_shape *s = &t->shape;
    size_t nf = (size_t)n * s->n_heads * s->head_dim;
    char label[160];
    for (int l = 0; l < s->n_layers; l++) {
        t->kv->attend(t->ctx, seq, l, pos0, n, d->q, d->out);
        kvt_reference(s, k + layer_off(s, l), v + layer_off(s, l), pos0, n, d->q, d->ref);
        snprintf(label, sizeof(label), "kv %s %s: seq %d layer %d pos0 %d n %d", t->ent.mod->name, what, seq, l, pos0, n);
        kvt_expect_close(d->out, d->ref, nf, label);
    }
}

static void contract_store_attend_memory(const char *name, const bench_kv_shape *s) {
    data d;
    data_make(&d, s, 21);
    round_to(s, &d);
    kvt t;
    kvt_must_open(&t, name, s, "");
    expect_memory_sane(&t, "after create");
    assert_true(mem_of(&t).used == 0);
    const size_t tb = kvt_token_bytes(s);
    /* a prompt of 11 on seq 0, 5 on seq 1; then decode one position at a time, interleaved */
    int len[3] = {11, 5, 0};
    kvt_append(&t, 0, 0, len[0], d.k + seq_off(s, 0), d.v + seq_off(s, 0), NULL);
    kvt_append(&t, 1, 0, len[1], d.k + seq_off(s, 1), d.v + seq_off(s, 1), NULL);
    expect_attends(&t, &d, 0, d.k + seq_off(s, 0), d.v + seq_off(s, 0), 0, len[0], "prefill");
    for (int step = 0; step < 30; step++)
        for (int q = 0; q < 3; q++) {
            if (len[q] >= s->max_pos) continue;
            kvt_append(&t, q, len[q], 1, d.k + seq_off(s, q), d.v + seq_off(s, q), NULL);
            expect_attends(&t, &d, q, d.k + seq_off(s, q), d.v + seq_off(s, q), len[q], 1, "decode");
            len[q]++;
        }
    bench_kv_memory m = mem_of(&t);
    uint64_t want = (uint64_t)(len[0] + len[1] + len[2]) * tb;
    if (m.used != want)
        fail_msg("kv %s: %d+%d+%d positions of %zu bytes stored, memory says used %llu (want %llu)", name, len[0], len[1],
                 len[2], tb, (unsigned long long)m.used, (unsigned long long)want);
    assert_true(m.reserved >= want);
    expect_memory_sane(&t, "after decode");
    /* seq 0's earlier positions are still what was stored, after the others grew */
    expect_attends(&t, &d, 0, d.k + seq_off(s, 0), d.v + seq_off(s, 0), 3, 9, "again");

    /* past the context: refused with a message, and the sequence stays usable */
    char err[512] = "";
    assert_true(t.kv->reserve(t.ctx, 2, s->max_pos + 1, err, sizeof(err)) < 0);
    if (!err[0]) fail_msg("kv %s: reserve past the context failed without a message", name);
    expect_attends(&t, &d, 2, d.k + seq_off(s, 2), d.v + seq_off(s, 2), 0, len[2], "after a refused reserve");

    for (int q = 0; q < 3; q++) t.kv->release(t.ctx, q);
    m = mem_of(&t);
    if (m.used != m.cached)
        fail_msg("kv %s: every sequence released, yet %llu bytes are used beyond the %llu a prefix cache keeps", name,
                 (unsigned long long)m.used, (unsigned long long)m.cached);
    expect_memory_sane(&t, "after release");
    /* released sequences take new positions again */
    kvt_append(&t, 1, 0, 7, d.k + seq_off(s, 2), d.v + seq_off(s, 2), NULL);
    expect_attends(&t, &d, 1, d.k + seq_off(s, 2), d.v + seq_off(s, 2), 0, 7, "reused");
    kvt_close(&t);
    data_free(&d);
}

static void contract_prefix_share(const char *name, const bench_kv_shape *s) {
    data d;
    data_make(&d, s, 33);
    round_to(s, &d);
    kvt t;
    kvt_must_open(&t, name, s, "");
    int ids[256];
    for (int i = 0; i < s->max_pos; i++) ids[i] = 100 + i;
    int n = s->max_pos - 3;
    kvt_append(&t, 0, 0, n, d.k, d.v, ids);
    t.kv->release(t.ctx, 0);
    char err[512] = "";
    int got = t.kv->share_prefix(t.ctx, 1, ids, n, err, sizeof(err));
    if (got <= 0 || got >= n)
        fail_msg("kv %s declares prefix sharing, but attached %d of %d cached positions (%s)", name, got, n, err);
    /* the rest of the prompt, then attention over the attached prefix and the new positions */
    kvt_append(&t, 1, got, n - got, d.k, d.v, ids);
    expect_attends(&t, &d, 1, d.k, d.v, 0, n, "shared prefix");
    expect_memory_sane(&t, "with a shared prefix");
    /* a prompt that differs at its first token shares nothing */
    int other[256];
    for (int i = 0; i < n; i++) other[i] = 9000 + i;
    assert_int_equal(t.kv->share_prefix(t.ctx, 2, other, n, err, sizeof(err)), 0);
    kvt_close(&t);
    data_free(&d);
}

static void contract_fork(const char *name, const bench_kv_shape *s) {
    data d;
    data_make(&d, s, 45);
    round_to(s, &d);
    kvt t;
    kvt_must_open(&t, name, s, "");
    int n = 13;     /* a partial last block for any block size above 1 that does not divide 13 */
    kvt_append(&t, 0, 0, n, d.k + seq_off(s, 0), d.v + seq_off(s, 0), NULL);
    char err[512] = "";
    if (t.kv->fork(t.ctx, 0, 2, err, sizeof(err))) fail_msg("kv %s declares fork, and fork failed: %s", name, err);
    /* seq 2's own data from position n on: its copy of 0's positions first, then its own */
    float *k2 = malloc(seq_off(s, 1) * sizeof(float)), *v2 = malloc(seq_off(s, 1) * sizeof(float));
    assert_true(k2 && v2);
    memcpy(k2, d.k + seq_off(s, 0), seq_off(s, 1) * sizeof(float));
    memcpy(v2, d.v + seq_off(s, 0), seq_off(s, 1) * sizeof(float));
    size_t kv_dim = (size_t)s->n_kv_heads * s->head_dim;
    for (int l = 0; l < s->n_layers; l++)
        for (int p = n; p < n + 4; p++) {
            memcpy(k2 + layer_off(s, l) + (size_t)p * kv_dim, d.k + seq_off(s, 2) + layer_off(s, l) + (size_t)p * kv_dim,
                   kv_dim * sizeof(float));
            memcpy(v2 + layer_off(s, l) + (size_t)p * kv_dim, d.v + seq_off(s, 2) + layer_off(s, l) + (size_t)p * kv_dim,
                   kv_dim * sizeof(float));
        }
    for (int p = n; p < n + 4; p++) {
        kvt_append(&t, 0, p, 1, d.k + seq_off(s, 0), d.v + seq_off(s, 0), NULL);
        kvt_append(&t, 2, p, 1, k2, v2, NULL);
    }
    expect_attends(&t, &d, 0, d.k + seq_off(s, 0), d.v + seq_off(s, 0), 0, n + 4, "fork source");
    expect_attends(&t, &d, 2, k2, v2, 0, n + 4, "fork copy");
    expect_memory_sane(&t, "after fork");
    free(k2);
    free(v2);
    kvt_close(&t);
    data_free(&d);
}

static void test_every_kv_module_keeps_the_contract(void **state) {
    (void)state;
    const char *const *kvs;
    int nk = tu_modules("kv", &kvs);
    for (int k = 0; k < nk; k++) {
        kvt probe;
        kvt_must_open(&probe, kvs[k], &contract_shapes[0], "");
        uint64_t caps = probe.ent.mod->caps;
        const struct bench_kv_iface *iface = probe.kv;
        assert_true(bench_kv_stores(iface, BENCH_F32));
        /* K and V alike in every type it stores, then one mixed pair where it stores both */
        bench_dtype pairs[BENCH_DTYPE_COUNT + 1][2];
        int np = 0;
        for (int t = 0; t < BENCH_DTYPE_COUNT; t++)
            if (bench_kv_stores(iface, (bench_dtype)t)) pairs[np][0] = pairs[np][1] = (bench_dtype)t, np++;
        if (bench_kv_stores(iface, BENCH_Q8_0) && bench_kv_stores(iface, BENCH_F16))
            pairs[np][0] = BENCH_Q8_0, pairs[np][1] = BENCH_F16, np++;
        kvt_close(&probe);
        for (int p = 0; p < np; p++) {
            print_message("kv %s, %s K / %s V: store/attend/memory%s%s\n", kvs[k], bench_dtype_name(pairs[p][0]),
                          bench_dtype_name(pairs[p][1]), caps & BENCH_CAP_KV_PREFIX_SHARE ? ", prefix share" : "",
                          caps & BENCH_CAP_KV_FORK ? ", fork" : "");
            for (size_t i = 0; i < sizeof(contract_shapes) / sizeof(contract_shapes[0]); i++) {
                bench_kv_shape s = contract_shapes[i];
                s.k_type = pairs[p][0];
                s.v_type = pairs[p][1];
                if (s.head_dim % (int)bench_dtype_block_elems(s.k_type) || s.head_dim % (int)bench_dtype_block_elems(s.v_type)) {
                    /* a head the blocks cannot hold: refused by code, with a message naming head_dim */
                    kvt t;
                    char err[512] = "";
                    int rc = kvt_open(&t, kvs[k], &s, "", err, sizeof(err));
                    if (rc != -BENCH_ERR_REFUSED || !strstr(err, "head_dim"))
                        fail_msg("kv %s: a %s cache of head_dim %d: rc %d, %s (want refused, naming head_dim)", kvs[k],
                                 bench_dtype_name(s.k_type), s.head_dim, rc, err);
                    continue;
                }
                contract_store_attend_memory(kvs[k], &s);
                if (caps & BENCH_CAP_KV_PREFIX_SHARE) contract_prefix_share(kvs[k], &s);
                if (caps & BENCH_CAP_KV_FORK) contract_fork(kvs[k], &s);
            }
        }
    }
}

/* The shared pool is a declared capability, not an option's name: with a host budget in
 * bench_kv_shape.pool_bytes, every module declaring BENCH_CAP_KV_SHARED_POOL sizes its pool
 * from it (reserved within one block of the budget), and one that does not declare it is
 * never handed one. */
static void test_shared_pool_is_a_capability(void **state) {
    (void)state;
    const char *const *kvs;
    int nk = tu_modules("kv", &kvs), pooled = 0;
    for (int k = 0; k < nk; k++) {
        bench_kv_shape s = contract_shapes[0];
        kvt t;
        kvt_must_open(&t, kvs[k], &s, "");
        int has = !!(t.ent.mod->caps & BENCH_CAP_KV_SHARED_POOL);
        kvt_close(&t);
        if (!has) continue;
        pooled++;
        const size_t tb = kvt_token_bytes(&s);
        s.pool_bytes = 100 * tb + tb / 2;
        kvt_must_open(&t, kvs[k], &s, "");
        bench_kv_memory m = mem_of(&t);
        if (m.reserved > s.pool_bytes || m.reserved + 64 * tb < s.pool_bytes)
            fail_msg("kv %s: a host budget of %llu bytes gave a pool of %llu", kvs[k], (unsigned long long)s.pool_bytes,
                     (unsigned long long)m.reserved);
        kvt_close(&t);
    }
    print_message("%d kv module(s) with a shared pool\n", pooled);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kv_module_keeps_the_contract),
        cmocka_unit_test(test_shared_pool_is_a_capability),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
