/* The KV interface's contract for one module (tests/test_kv_contract.c has the list of what
 * it checks): kvt_contract(name) runs it in every cache type the module declares. Shared by
 * test_kv_contract, over the modules in the module folder, and test_kv_types, over a module
 * compiled in with the test's made-up element type, which no module built by the Makefile
 * has. Include after tests/lib/kv_test.h. */
#ifndef BENCH_KV_CONTRACT_H
#define BENCH_KV_CONTRACT_H

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

/* Every cache type module `name` stores (its cache_types, read against the KV element type
 * table this test was built with, or dtype.h's for a type bench has no row for): K and V alike in each,
 * then one mixed pair where it stores both q8_0 and f16, in each contract shape; a head the
 * type's blocks cannot hold is refused by code with a message naming head_dim. */
static void kvt_contract(const char *name) {
    kvt probe;
    kvt_must_open(&probe, name, &contract_shapes[0], "");
    uint64_t caps = probe.ent.mod->caps;
    const struct bench_kv_iface *iface = probe.kv;
    assert_true(bench_kv_stores(iface, BENCH_F32));
    bench_dtype pairs[32 + 1][2];   /* cache_types is a 32-bit mask */
    int np = 0;
    for (int t = 0; t < 32; t++)
        if (bench_kv_stores(iface, (bench_dtype)t)) pairs[np][0] = pairs[np][1] = (bench_dtype)t, np++;
    if (bench_kv_stores(iface, BENCH_Q8_0) && bench_kv_stores(iface, BENCH_F16))
        pairs[np][0] = BENCH_Q8_0, pairs[np][1] = BENCH_F16, np++;
    kvt_close(&probe);
    for (int p = 0; p < np; p++) {
        print_message("kv %s, %s K / %s V: store/attend/memory%s%s\n", name, kvt_type_name(pairs[p][0]),
                      kvt_type_name(pairs[p][1]), caps & BENCH_CAP_KV_PREFIX_SHARE ? ", prefix share" : "",
                      caps & BENCH_CAP_KV_FORK ? ", fork" : "");
        for (size_t i = 0; i < sizeof(contract_shapes) / sizeof(contract_shapes[0]); i++) {
            bench_kv_shape s = contract_shapes[i];
            s.k_type = pairs[p][0];
            s.v_type = pairs[p][1];
            if (s.head_dim % (int)kvt_block_elems(s.k_type) || s.head_dim % (int)kvt_block_elems(s.v_type)) {
                /* a head the blocks cannot hold: refused by code, with a message naming head_dim */
                kvt t;
                char err[512] = "";
                int rc = kvt_open(&t, name, &s, "", err, sizeof(err));
                if (rc != -BENCH_ERR_REFUSED || !strstr(err, "head_dim"))
                    fail_msg("kv %s: a %s cache of head_dim %d: rc %d, %s (want refused, naming head_dim)", name,
                             kvt_type_name(s.k_type), s.head_dim, rc, err);
                continue;
            }
            contract_store_attend_memory(name, &s);
            if (caps & BENCH_CAP_KV_PREFIX_SHARE) contract_prefix_share(name, &s);
            if (caps & BENCH_CAP_KV_FORK) contract_fork(name, &s);
        }
    }
}

#endif
