/* Helpers shared by tests/test_kv_block.c and tests/test_kv_token.c: a KV module
 * driven through its vtable as the engine drives it (dlopen'ed by name, or one the test
 * compiled in and named with kvt_add_module), random K/V/Q, a float64 reference attention,
 * and the module's counters by name. Include after cmocka.h; a test that adds KV element
 * types of its own (KVQ_TEST_ROWS) defines them before. */
#ifndef BENCH_KV_TEST_H
#define BENCH_KV_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/kv.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/compute/quant.h"
#include "engines/core/runtime/engine.h"
#include "engines/core/runtime/modreg.h"
#include "engines/modules/common/kv_types.h"
#include "tests/lib/testutil.h"

typedef struct kvt {
    modreg_entry ent;
    const struct bench_kv_iface *kv;
    void *ctx;
    bench_kv_shape shape;
} kvt;

/* A host whose parallel_for runs the tasks one after another: the module's task
 * split is exercised with n_threads > 1, deterministically. */
static inline void kvt_serial_for(void *pool, bench_task_fn fn, void *arg, int n) {
    (void)pool;
    for (int i = 0; i < n; i++) fn(arg, i, n);
}
static const bench_host kvt_host3 = {.parallel_for = kvt_serial_for, .n_threads = 3};

/* Modules the test compiled in, by the name kvt_open takes (modules from the module folder
 * carry only the table they were built with; one compiled into the test reads the test's,
 * made-up rows included: tests/test_kv_types.c). */
#define KVT_MAX_LOCAL 4
static struct { const char *name; const bench_module *mod; } kvt_local[KVT_MAX_LOCAL];
static int kvt_n_local;

/* Names m `name` for kvt_open, ahead of the module folder; 0, or -1 when full. */
static inline int kvt_add_module(const char *name, const bench_module *m) {
    if (kvt_n_local == KVT_MAX_LOCAL) return -1;
    kvt_local[kvt_n_local].name = name;
    kvt_local[kvt_n_local++].mod = m;
    return 0;
}

/* Opens kv module `name` and creates it with opts "k=v,..." (may be ""); returns 0, or -1 with err. */
static inline int kvt_open(kvt *t, const char *name, const bench_kv_shape *shape, const char *opts, char *err, size_t errlen) {
    memset(t, 0, sizeof(*t));
    t->shape = *shape;
    for (int i = 0; i < kvt_n_local && !t->ent.mod; i++)
        if (!strcmp(kvt_local[i].name, name)) t->ent.mod = kvt_local[i].mod;   /* no handle: nothing to close */
    if (!t->ent.mod && modreg_load(tu_module_dir(), "kv", name, &t->ent, err, errlen)) return -1;
    t->kv = t->ent.mod->iface;
    bench_opts o = {0};
    void *storage = NULL, *filled = NULL;
    int rc = modreg_parse_opts(opts, &o, &storage, err, errlen);
    if (!rc) rc = modreg_fill_opts(t->ent.mod, &o, &filled, err, errlen);
    if (!rc) rc = t->kv->create(shape, filled, &kvt_host3, &t->ctx, err, errlen);
    free(storage);
    free(filled);
    if (rc) { modreg_entry_close(&t->ent); t->ctx = NULL; }
    return rc;
}

static inline void kvt_close(kvt *t) {
    if (t->kv && t->ctx) t->kv->destroy(t->ctx);
    modreg_entry_close(&t->ent);
    memset(t, 0, sizeof(*t));
}

static inline void kvt_must_open(kvt *t, const char *name, const bench_kv_shape *shape, const char *opts) {
    char err[512];
    if (kvt_open(t, name, shape, opts, err, sizeof(err))) fail_msg("kv %s (%s): %s", name, opts, err);
}

typedef struct kvt_probe { const char *name; double value; int found; } kvt_probe;

static inline void kvt_probe_emit(void *user, const char *name, const char *unit, double v) {
    kvt_probe *p = user;
    (void)unit;
    if (!strcmp(name, p->name)) { p->value = v; p->found = 1; }
}

/* The module's counter `name`; fails the test when the module does not report it. */
static inline double kvt_counter(const kvt *t, const char *name) {
    kvt_probe p = {name, 0, 0};
    bench_counter_sink sink = {.emit = kvt_probe_emit, .user = &p};
    t->kv->counters(t->ctx, &sink);
    if (!p.found) fail_msg("kv %s: no counter %s", t->ent.mod->name, name);
    return p.value;
}

/* x (n values) as the core stores it in type t and reads it back: what a cache of type t holds.
 * A type the core does not write (dtype.h bench_dtype_writable: a test's made-up row, or a KV
 * type that is no weight type) is its row's own store and load, the only definition of it
 * there is. */
static inline void kvt_round(bench_dtype t, float *x, size_t n) {
    if (t == BENCH_F32) return;
    unsigned char *buf = malloc(n * sizeof(float));
    assert_non_null(buf);
    if (!bench_dtype_writable(t)) {
        assert_non_null(kvq_type_of(t));
        kvq_store_row(t, x, buf, n);
        kvq_load_row(t, buf, x, n);
        free(buf);
        return;
    }
    kn_quant_row(t, x, buf, (int)n);
    if (t == BENCH_F16) for (size_t i = 0; i < n; i++) x[i] = bench_f16_to_f32(((uint16_t *)buf)[i]);
    else if (t == BENCH_BF16) for (size_t i = 0; i < n; i++) x[i] = bench_bf16_to_f32(((uint16_t *)buf)[i]);
    else qn_dequant_row(t, buf, x, (int)n);
    free(buf);
}

/* Type t's name, values a block and bytes of n values: from the KV element type table this
 * test was built with (a made-up row included), else from dtype.h (a type an out-of-tree
 * module stores that bench has no row for). */
static inline const char *kvt_type_name(bench_dtype t) {
    return kvq_type_of(t) ? kvq_type_name(kvq_type_of(t)) : bench_dtype_name(t);
}
static inline size_t kvt_block_elems(bench_dtype t) {
    return kvq_type_of(t) ? kvq_type_of(t)->block_elems : bench_dtype_block_elems(t);
}
static inline size_t kvt_row_bytes(bench_dtype t, size_t n) {
    return kvq_type_of(t) ? kvq_bytes(t, n) : bench_kv_row_bytes(t, (int)n);
}

static inline size_t kvt_token_bytes(const bench_kv_shape *s) {
    /* per position: K and V of every layer, each kv_dim values in its cache type, block scales included */
    int kv_dim = s->n_kv_heads * s->head_dim;
    return (size_t)s->n_layers * (kvt_row_bytes(s->k_type, (size_t)kv_dim) + kvt_row_bytes(s->v_type, (size_t)kv_dim));
}

/* Deterministic values in [-1, 1). */
static inline float kvt_rand(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    return (float)((*state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static inline void kvt_fill(float *v, size_t n, unsigned *state) {
    for (size_t i = 0; i < n; i++) v[i] = kvt_rand(state);
}

/* Reserves and stores positions pos0 .. pos0+n-1 of seq in every layer, K/V from
 * k, v laid out (n_layers, max_pos, kv_dim) by position; ids (may be NULL) are told first. */
static inline void kvt_append(kvt *t, int seq, int pos0, int n, const float *k, const float *v, const int *ids) {
    char err[512];
    const bench_kv_shape *s = &t->shape;
    size_t kv_dim = (size_t)s->n_kv_heads * s->head_dim;
    if (t->kv->reserve(t->ctx, seq, pos0 + n, err, sizeof(err))) fail_msg("reserve seq %d to %d: %s", seq, pos0 + n, err);
    if (ids && t->kv->tokens) t->kv->tokens(t->ctx, seq, pos0, n, ids + pos0);
    for (int l = 0; l < s->n_layers; l++) {
        size_t off = ((size_t)l * s->max_pos + (size_t)pos0) * kv_dim;
        t->kv->store(t->ctx, seq, l, pos0, n, k + off, v + off);
    }
}

/* Causal GQA attention in float64 over K/V laid out (max_pos, kv_dim) for one layer. */
static inline void kvt_reference(const bench_kv_shape *s, const float *k, const float *v, int pos0, int n,
                          const float *q, double *out) {
    int hd = s->head_dim, kv_dim = s->n_kv_heads * hd, q_dim = s->n_heads * hd, group = s->n_heads / s->n_kv_heads;
    double *att = malloc((size_t)s->max_pos * sizeof(double));
    assert_non_null(att);
    for (int i = 0; i < n; i++)
        for (int h = 0; h < s->n_heads; h++) {
            const float *qh = q + (size_t)i * q_dim + (size_t)h * hd;
            int pos = pos0 + i;
            double max = -INFINITY, sum = 0;
            for (int t = 0; t <= pos; t++) {
                double d = 0;
                for (int j = 0; j < hd; j++) d += (double)qh[j] * k[(size_t)t * kv_dim + (size_t)(h / group) * hd + j];
                att[t] = d / sqrt((double)hd);
                if (att[t] > max) max = att[t];
            }
            for (int t = 0; t <= pos; t++) { att[t] = exp(att[t] - max); sum += att[t]; }
            double *o = out + (size_t)i * q_dim + (size_t)h * hd;
            for (int j = 0; j < hd; j++) {
                double a = 0;
                for (int t = 0; t <= pos; t++) a += att[t] / sum * v[(size_t)t * kv_dim + (size_t)(h / group) * hd + j];
                o[j] = a;
            }
        }
    free(att);
}

/* |got - want| <= 1e-5 + 1e-4 |want|: float32 sums of <= 100 terms of |x| < 1 stay well inside. */
#define KVT_ATOL 1e-5
#define KVT_RTOL 1e-4
static inline void kvt_expect_close(const float *got, const double *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (fabs((double)got[i] - want[i]) > KVT_ATOL + KVT_RTOL * fabs(want[i]))
            fail_msg("%s: element %zu is %.9g, the float64 reference %.9g", what, i, (double)got[i], want[i]);
}

/* The shape of the random-data tests: GQA (2 query heads per KV head), a head
 * size that is not a multiple of the 16-lane dot, 3 sequences. */
static const bench_kv_shape shape3 = {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 20,
                                      .max_pos = 67, .max_seqs = 3};

typedef struct data {
    float *k, *v;   /* (max_seqs, n_layers, max_pos, kv_dim) */
    float *q;       /* (max_pos, q_dim) */
    float *out, *out2;
    double *ref;
} data;

static inline void data_make(data *d, const bench_kv_shape *s, unsigned seed) {
    size_t kv = (size_t)s->max_seqs * s->n_layers * s->max_pos * s->n_kv_heads * s->head_dim;
    size_t qn = (size_t)s->max_pos * s->n_heads * s->head_dim;
    d->k = malloc(kv * sizeof(float));
    d->v = malloc(kv * sizeof(float));
    d->q = malloc(qn * sizeof(float));
    d->out = malloc(qn * sizeof(float));
    d->out2 = malloc(qn * sizeof(float));
    d->ref = malloc(qn * sizeof(double));
    assert_true(d->k && d->v && d->q && d->out && d->out2 && d->ref);
    kvt_fill(d->k, kv, &seed);
    kvt_fill(d->v, kv, &seed);
    kvt_fill(d->q, qn, &seed);
}

static inline void data_free(data *d) {
    free(d->k); free(d->v); free(d->q); free(d->out); free(d->out2); free(d->ref);
}

static inline size_t seq_off(const bench_kv_shape *s, int seq) {
    return (size_t)seq * s->n_layers * s->max_pos * s->n_kv_heads * s->head_dim;
}
static inline size_t layer_off(const bench_kv_shape *s, int layer) {
    return (size_t)layer * s->max_pos * s->n_kv_heads * s->head_dim;
}

/* Three sequences appended in rounds of 3 positions, so each one's blocks are
 * scattered through the pool; then every layer's attention of queries at several
 * pos0/n is compared with prealloc's and with the float64 reference. */
static inline void expect_attention_matches(const char *name, const char *opts) {
    const bench_kv_shape *s = &shape3;
    data d;
    data_make(&d, s, 7);
    kvt t, c;
    kvt_must_open(&t, name, s, opts);
    kvt_must_open(&c, "prealloc", s, "");
    for (int pos = 0; pos < s->max_pos; pos += 3)
        for (int q = 0; q < s->max_seqs; q++) {
            int n = pos + 3 <= s->max_pos ? 3 : s->max_pos - pos;
            kvt_append(&t, q, pos, n, d.k + seq_off(s, q), d.v + seq_off(s, q), NULL);
            kvt_append(&c, q, pos, n, d.k + seq_off(s, q), d.v + seq_off(s, q), NULL);
        }
    const int cases[][2] = {{0, 1}, {15, 1}, {16, 1}, {66, 1}, {0, 67}, {10, 23}, {40, 27}};
    int q_dim = s->n_heads * s->head_dim;
    for (int q = 0; q < s->max_seqs; q++)
        for (int l = 0; l < s->n_layers; l++)
            for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int pos0 = cases[i][0], n = cases[i][1];
                t.kv->attend(t.ctx, q, l, pos0, n, d.q, d.out);
                c.kv->attend(c.ctx, q, l, pos0, n, d.q, d.out2);
                size_t nf = (size_t)n * q_dim;
                if (memcmp(d.out, d.out2, nf * sizeof(float)))
                    fail_msg("kv %s: seq %d layer %d pos0 %d n %d: differs from prealloc", name, q, l, pos0, n);
                kvt_reference(s, d.k + seq_off(s, q) + layer_off(s, l), d.v + seq_off(s, q) + layer_off(s, l), pos0, n, d.q, d.ref);
                kvt_expect_close(d.out, d.ref, nf, name);
            }
    kvt_close(&t);
    kvt_close(&c);
    data_free(&d);
}

/* ---- through the engine ---- */

typedef struct kvt_eprobe { const char *name; double v; int found; } kvt_eprobe;
static inline void kvt_eprobe_emit(void *user, const char *name, const char *unit, double v) {
    kvt_eprobe *p = user;
    (void)unit;
    if (!strcmp(name, p->name)) { p->v = v; p->found = 1; }
}
static inline double kvt_engine_counter(const engine *e, const char *name) {
    kvt_eprobe p = {name, 0, 0};
    bench_counter_sink sink = {.emit = kvt_eprobe_emit, .user = &p};
    engine_counters(e, &sink);
    if (!p.found) fail_msg("engine: no counter %s", name);
    return p.v;
}
static inline double kvt_engine_token_bytes(const engine *e) {
    const model_config *c = &engine_model(e)->cfg;
    return 2.0 * c->n_layers * c->n_kv_heads * (c->dim / c->n_heads) * sizeof(float);
}

/* Greedy "The little dog" on stories260K with kv module `kv` must give the ids of
 * ../shared/oracle; then check(e, positions stored) looks at the counters. Skips
 * without the shared files. */
static inline void kvt_expect_oracle(const char *kv, bench_opts opts, void (*check)(engine *e, int stored)) {
    char model[512], tok[512], oracle[512];
    if (!tu_shared("models/stories260K.bin", model, sizeof(model)) || !tu_shared("models/tok512.bin", tok, sizeof(tok)) ||
        !tu_shared("oracle/greedy_dog.ids.txt", oracle, sizeof(oracle)))
        skip();
    int want[256], got[257];
    int n_want = tu_read_ints(oracle, want, 256);
    assert_true(n_want > 10);
    engine_spec spec = {.model_path = model, .tokenizer_path = tok, .kv = kv, .kv_opts = opts,
                        .threads = 2, .module_dir = tu_module_dir()};
    char err[512];
    engine *e;
    if (engine_create(&spec, &e, err, sizeof(err))) fail_msg("%s", err);
    int n = tokenizer_encode(engine_tokenizer(e), "The little dog", 1, 0, got, 256, err, sizeof(err));
    assert_true(n > 0);
    float *logits;
    int vocab = engine_model(e)->cfg.vocab_size;
    if (engine_forward(e, 0, got, n, 0, &logits, err, sizeof(err))) fail_msg("%s", err);
    for (;;) {
        int best = 0;
        for (int i = 1; i < vocab; i++)
            if (logits[i] > logits[best]) best = i;
        got[n++] = best;
        if (n >= n_want) break;
        if (engine_forward(e, 0, &got[n - 1], 1, n - 1, &logits, err, sizeof(err))) fail_msg("%s", err);
    }
    for (int i = 0; i < n_want; i++)
        if (got[i] != want[i]) fail_msg("kv %s: id %d is %d, the oracle has %d", kv, i, got[i], want[i]);
    if (check) check(e, n_want - 1);
    engine_destroy(e);
}

#endif
