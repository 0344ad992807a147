/* The KV cache types (engines/modules/common/kv_types.h's table, and a made-up row of this
 * test's) beyond the contract (test_kv_contract runs that in every type):
 *   - exact bytes: a position costs 2 x layers x kv_heads x head_dim x the type's size, block
 *     scales included, in the memory slot and in the engine's token bytes and KV budget;
 *   - bit identity: a cache of type T attends exactly (memcmp) as an f32 cache fed the values
 *     the core's own conversion gives (kn_quant_row), so no type is converted differently in
 *     the modules than in the kernels;
 *   - the engine refuses a type the module does not declare, naming what it stores. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libgen.h>
#include <math.h>

/* A made-up KV element type, in this test only: int8 scaled by 1/16, no blocks ("i8s"). What
 * adding a type takes is a row like this one and its two conversions (docs/extending.md, "A KV
 * element type"); test_every_row walks the table, so it runs this type with no list edited.
 * Its id is one no bench_dtype has. */
#define KVT_I8S ((bench_dtype)(BENCH_DTYPE_COUNT + 3))
static void i8s_store(const float *src, void *dst, size_t n) {
    for (size_t i = 0; i < n; i++) ((int8_t *)dst)[i] = (int8_t)fmaxf(-127.0f, fminf(127.0f, roundf(src[i] * 16.0f)));
}
static void i8s_load(const void *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)((const int8_t *)src)[i] / 16.0f;
}
#define KVQ_TEST_ROWS(ROW)                                                                               \
    ROW(KVT_I8S, KVQ_READ_CPU, .name = "i8s", .block_elems = 1, .block_bytes = 1, .store = i8s_store,   \
        .load = i8s_load)

#include "engines/modules/common/kv_attn.h"
#include "engines/modules/common/kv_types.h"
/* the contiguous layout's store and attention, compiled here so that they read this table;
 * under names of the test's own, so that no module's object seems to call into the test */
#define kvc_bytes kvt_contig_bytes
#define kvc_store kvt_contig_store
#define kvc_attend kvt_contig_attend
#include "engines/modules/common/kv_contig.c"
/* and a whole KV module over that layout, so that the interface's contract (kv_contract.h) runs
 * in every row of this table, the made-up one included: the modules in the module folder were
 * built with bench's rows only */
#define bench_module_init kvt_prealloc_init
#include "engines/modules/kv_prealloc.c"
#include "tests/lib/kv_contract.h"

/* 2 layers, 2 KV heads of 32: kv_dim 64 */
static const bench_kv_shape typed_shape = {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32,
                                           .max_pos = 40, .max_seqs = 2};

static void test_bytes_per_position(void **state) {
    (void)state;
    /* per position: layers x (K row + V row); a row is 64 values */
    static const struct { bench_dtype k, v; size_t bytes; } want[] = {
        {BENCH_F32, BENCH_F32, 2 * (256 + 256)},     /* 4 B a value */
        {BENCH_F16, BENCH_F16, 2 * (128 + 128)},     /* 2 B */
        {BENCH_BF16, BENCH_BF16, 2 * (128 + 128)},
        {BENCH_Q8_0, BENCH_Q8_0, 2 * (68 + 68)},     /* 2 blocks of 34 B (32 int8 + an f16 scale) */
        {BENCH_Q4_0, BENCH_Q4_0, 2 * (36 + 36)},     /* 2 blocks of 18 B (32 nibbles + an f16 scale) */
        {BENCH_Q8_0, BENCH_F16, 2 * (68 + 128)},
    };
    const char *const *kvs;
    int nk = tu_modules("kv", &kvs);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        bench_kv_shape s = typed_shape;
        s.k_type = want[i].k;
        s.v_type = want[i].v;
        assert_int_equal(kvt_token_bytes(&s), want[i].bytes);
        data d;
        data_make(&d, &s, 3);
        for (int k = 0; k < nk; k++) {
            kvt t;
            char err[512];
            int rc = kvt_open(&t, kvs[k], &s, "", err, sizeof(err));
            if (rc == -BENCH_ERR_REFUSED) continue;     /* a module that does not store the type */
            if (rc) fail_msg("kv %s: %s", kvs[k], err);
            kvt_append(&t, 0, 0, 10, d.k, d.v, NULL);
            kvt_append(&t, 1, 0, 3, d.k, d.v, NULL);
            bench_kv_memory m;
            t.kv->memory(t.ctx, &m);
            if (m.used != 13 * want[i].bytes)
                fail_msg("kv %s, %s/%s: 13 positions use %llu bytes, want 13 x %zu", kvs[k], bench_dtype_name(s.k_type),
                         bench_dtype_name(s.v_type), (unsigned long long)m.used, want[i].bytes);
            kvt_close(&t);
        }
        data_free(&d);
    }
}

/* 6 KV heads on the test host's 3 tasks: a decode's unit takes 2 adjacent KV heads
 * (kva_heads_per_unit), the path typed_shape's 2 heads on 3 tasks never takes */
static const bench_kv_shape wide_shape = {.n_layers = 1, .n_heads = 12, .n_kv_heads = 6, .head_dim = 32,
                                          .max_pos = 40, .max_seqs = 2};

/* wide_shape with heads of 64: a prefill of more than KVQ_QBLOCK queries converts each KV
 * head once (kva_typed_head) and sums two queries' values at once (kva_accum2), paths a
 * head of 32 does not take */
static const bench_kv_shape wide64_shape = {.n_layers = 1, .n_heads = 12, .n_kv_heads = 6, .head_dim = 64,
                                            .max_pos = 40, .max_seqs = 2};

/* Every typed row of the table the modules hold (bench's own types, not this test's) */
static void check_typed_attention(const bench_kv_shape *shape) {
    const char *const *kvs;
    int nk = tu_modules("kv", &kvs);
    const int kv_dim = shape->n_kv_heads * shape->head_dim, q_dim = shape->n_heads * shape->head_dim;
    for (bench_dtype ti = BENCH_F16; ti < BENCH_DTYPE_COUNT; ti++) {
        if (!kvq_type_of(ti)) continue;
        for (int k = 0; k < nk; k++) {
            bench_kv_shape s = *shape, f = *shape;
            s.k_type = s.v_type = ti;
            data d, r;
            data_make(&d, &s, 11);
            data_make(&r, &s, 11);
            size_t rows = (size_t)s.max_seqs * s.n_layers * s.max_pos;
            for (size_t i = 0; i < rows; i++) {
                kvt_round(ti, r.k + i * kv_dim, (size_t)kv_dim);
                kvt_round(ti, r.v + i * kv_dim, (size_t)kv_dim);
            }
            kvt typed, plain;
            char err[512];
            int rc = kvt_open(&typed, kvs[k], &s, "", err, sizeof(err));
            if (rc) {
                /* a module that does not store this type says so by code */
                if (rc != -BENCH_ERR_REFUSED) fail_msg("kv %s: %s", kvs[k], err);
                data_free(&d);
                data_free(&r);
                continue;
            }
            kvt_must_open(&plain, kvs[k], &f, "");
            kvt_append(&typed, 0, 0, 33, d.k, d.v, NULL);       /* the module converts */
            kvt_append(&plain, 0, 0, 33, r.k, r.v, NULL);       /* the core converted */
            for (int l = 0; l < s.n_layers; l++) {
                const int cases[][2] = {{0, 33}, {32, 1}, {17, 4}};
                for (int c = 0; c < 3; c++) {
                    typed.kv->attend(typed.ctx, 0, l, cases[c][0], cases[c][1], d.q, d.out);
                    plain.kv->attend(plain.ctx, 0, l, cases[c][0], cases[c][1], d.q, d.out2);
                    if (memcmp(d.out, d.out2, (size_t)cases[c][1] * q_dim * sizeof(float)))
                        fail_msg("kv %s, %s cache: attention at %d+%d differs from an f32 cache holding the core's %s values",
                                 kvs[k], bench_dtype_name(ti), cases[c][0], cases[c][1], bench_dtype_name(ti));
                }
            }
            kvt_close(&typed);
            kvt_close(&plain);
            data_free(&d);
            data_free(&r);
        }
    }
}

static void test_typed_attention_is_f32_attention_of_the_stored_values(void **state) {
    (void)state;
    check_typed_attention(&typed_shape);
    check_typed_attention(&wide_shape);
    check_typed_attention(&wide64_shape);
}

/* kva_dots' order of operations (kv_attn.h), written out in scalars: per position, 16 lanes of
 * products over d in steps of 16 (mul then add), then the tree: lanes i and i + 8, i and i + 4,
 * i and i + 2, 0 and 1. kva_dots reduces 16 positions' trees at once with shuffles; a wrong
 * lane or a changed pairing gives other bits (or other values) here. */
static float tree_dot(const float *q, const float *k, int hd) {
    float a[16];
    for (int l = 0; l < 16; l++) a[l] = q[l] * k[l];
    for (int d = 16; d < hd; d += 16)
        for (int l = 0; l < 16; l++) a[l] = a[l] + q[d + l] * k[d + l];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) a[l] = a[l] + a[l + w];
    return a[0];
}

static void test_dots_keep_the_tree_order(void **state) {
    (void)state;
    enum { COUNT = 53, MAXHD = 128, STRIDE = 160 };
    float q[MAXHD], *k = malloc(sizeof(float) * COUNT * STRIDE), att[COUNT];
    assert_non_null(k);
    uint64_t r = 99;
    for (int i = 0; i < COUNT * STRIDE; i++) k[i] = (float)((int64_t)((r = r * 6364136223846793005ull + 1) >> 40) - (1 << 23)) / 4096.0f;
    for (int i = 0; i < MAXHD; i++) q[i] = (float)((int64_t)((r = r * 6364136223846793005ull + 1) >> 40) - (1 << 23)) / 8192.0f;
    static const int hds[] = {16, 32, 64, 128};
    for (size_t h = 0; h < sizeof(hds) / sizeof(hds[0]); h++)
        for (int strided = 0; strided < 2; strided++) {
            const int hd = hds[h];
            const size_t stride = strided ? STRIDE : (size_t)hd;
            kva_dots(q, k, stride, COUNT, hd, att);
            for (int t = 0; t < COUNT; t++) {
                float want = tree_dot(q, k + (size_t)t * stride, hd);
                if (memcmp(&want, &att[t], sizeof(float)))
                    fail_msg("kva_dots hd %d stride %zu position %d: %.9g, the tree order gives %.9g", hd, stride, t, (double)att[t],
                             (double)want);
            }
        }
    free(k);
}

/* kva_rowmax finds what the scalar loop finds, NaNs skipped, for every length around the
 * vector width; a +0/-0 tie may keep either, which test_kv_types' memcmp of whole attentions
 * covers (x - (+0) and x - (-0) are the same to exp). */
static void test_rowmax_is_the_loop(void **state) {
    (void)state;
    float v[70];
    uint64_t r = 7;
    for (int n = 0; n <= 70; n++)
        for (int trial = 0; trial < 4; trial++) {
            for (int i = 0; i < n; i++) v[i] = (float)((int64_t)((r = r * 6364136223846793005ull + 1) >> 40) - (1 << 23)) / 1024.0f;
            if (trial == 1 && n) v[(int)(r % (uint64_t)n)] = NAN;
            if (trial == 2 && n) v[n - 1] = 1e30f;               /* the largest in the tail */
            if (trial == 3) for (int i = 0; i < n; i++) v[i] = -INFINITY;
            float want = -INFINITY;
            for (int i = 0; i < n; i++)
                if (v[i] > want) want = v[i];
            float got = kva_rowmax(v, n, -INFINITY);
            if (!(got == want || (isinf(got) && isinf(want) && got < 0 && want < 0)))
                fail_msg("kva_rowmax over %d values (trial %d): %g, the loop gives %g", n, trial, (double)got, (double)want);
        }
}

/* How many adjacent KV heads a unit of typed attention takes (kv_attn.h): at most what the
 * scores buffer and a chunk hold, and of those the run that leaves the busiest task the fewest
 * heads, the longest on a tie. */
static void test_heads_per_unit(void **state) {
    (void)state;
    assert_int_equal(kva_heads_per_unit(12, 64, 1, 2), 3);  /* llama-110m decode, 2 threads: 4 units, 2 each (4 a unit: 8 and 4) */
    assert_int_equal(kva_heads_per_unit(4, 64, 1, 2), 2);   /* tinyllama: 2 units */
    assert_int_equal(kva_heads_per_unit(8, 128, 1, 2), 4);  /* 8 KV heads of 128: the scores buffer's 4 */
    assert_int_equal(kva_heads_per_unit(6, 32, 1, 3), 2);   /* wide_shape on the test host */
    assert_int_equal(kva_heads_per_unit(2, 32, 1, 3), 1);   /* fewer heads than tasks */
    assert_int_equal(kva_heads_per_unit(12, 64, 4, 2), 1);  /* 4 queries fill the scores buffer */
    assert_int_equal(kva_heads_per_unit(4, 2048, 1, 1), 1); /* a chunk holds 2 rows of one head */
    assert_int_equal(kva_heads_per_unit(5, 64, 1, 2), 3);   /* 3 and 2 */
    assert_int_equal(kva_heads_per_unit(6, 64, 1, 4), 2);   /* 3 units on 4 tasks: 2 heads the busiest, as with 1 */
}

/* The AVX2 row loaders (kv_types.h) give the bits of the scalar conversions (blockquant.h) on
 * every int8 value and nibble, with scales of each kind: normal, subnormal, zero, negative,
 * infinite and NaN. Skips where the CPU has no AVX2 (the scalar path is then the one run). */
static void test_avx2_loaders_are_the_scalar_bits(void **state) {
    (void)state;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) {
        fprintf(stderr, "skip: this CPU has no AVX2/F16C: the AVX2 loaders never run here\n");
        skip();
    }
    static const uint16_t scales[] = {0x3c00, 0x2e66, 0x0001, 0x03ff, 0x0000, 0x8000, 0xbc00, 0x7bff, 0x7c00, 0xfc00, 0x7e00};
    enum { NB = 8 * (sizeof(scales) / sizeof(scales[0])) };
    bench_block_q8_0 q8[NB];
    bench_block_q4_0 q4[NB];
    uint64_t r = 12345;
    for (int i = 0; i < NB; i++) {
        q8[i].d = q4[i].d = scales[i % (sizeof(scales) / sizeof(scales[0]))];
        for (int j = 0; j < BENCH_Q8_0_BLOCK; j++) q8[i].qs[j] = (int8_t)(i < 8 ? i * 32 + j - 128 : (int)((r = r * 6364136223846793005ull + 1) >> 56));
        for (int j = 0; j < 16; j++) q4[i].qs[j] = (uint8_t)(i < 1 ? j * 16 + (15 - j) : (int)((r = r * 6364136223846793005ull + 1) >> 56));
    }
    float a[NB * 32], b[NB * 32];
    kvq_load_q8_0_avx2(q8, a, NB);
    for (int i = 0; i < NB; i++) bench_dequant_block_q8_0(&q8[i], b + i * 32);
    assert_memory_equal(a, b, sizeof(a));
    kvq_load_q4_0_avx2(q4, a, NB);
    for (int i = 0; i < NB; i++) bench_dequant_block_q4_0(&q4[i], b + i * 32);
    assert_memory_equal(a, b, sizeof(a));
    uint16_t h[NB * 32 + 5];   /* a tail that is not a multiple of 8 */
    for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) h[i] = (uint16_t)(i * 2654435761u >> 7);
    float c[NB * 32 + 5], e[NB * 32 + 5];
    kvq_load_bf16_avx2(h, c, NB * 32 + 5);
    for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
        uint32_t bits = (uint32_t)h[i] << 16;
        memcpy(&e[i], &bits, sizeof(float));
    }
    assert_memory_equal(c, e, sizeof(c));
    /* the F16C store against bench_f32_to_f16: every 2^-13 step over the half range's
     * exponents (halfway cases included), subnormals, overflow to inf, inf, signs */
    enum { NS = 1 << 16 };
    float *x = malloc(NS * sizeof(float));
    uint16_t *hv = malloc(NS * sizeof(uint16_t)), *hs = malloc(NS * sizeof(uint16_t));
    assert_true(x && hv && hs);
    for (uint32_t i = 0; i < NS; i++) {
        uint32_t bits = (i & 1 ? 0x80000000u : 0) | (0x33000000u + (i >> 1) * 0x1000u);  /* 2^-25 .. past 65520 */
        if (i == NS - 1) bits = 0x7f800000u;
        memcpy(&x[i], &bits, sizeof(float));
    }
    kvq_store_f16_f16c(x, hv, NS - 3);  /* a tail that is not a multiple of 8 */
    for (uint32_t i = 0; i < NS - 3; i++) hs[i] = bench_f32_to_f16(x[i]);
    for (uint32_t i = 0; i < NS - 3; i++)
        if (hv[i] != hs[i]) fail_msg("f32 %a (0x%08x): F16C 0x%04x, scalar 0x%04x", (double)x[i], (unsigned)(0x33000000u + (i >> 1) * 0x1000u), hv[i], hs[i]);
    free(x);
    free(hv);
    free(hs);
#else
    fprintf(stderr, "skip: not x86-64\n");
    skip();
#endif
}

static void test_engine_budget_and_refusal_by_type(void **state) {
    (void)state;
    char model[512];
    TU_NEED(tu_shared("models/stories260K.bin", model, sizeof(model)));
    char err[1024];
    engine *e = NULL;
    /* stories260K: 5 layers, 4 KV heads of 8: an f16 position is 5 x 2 x 32 x 2 = 640 bytes */
    engine_spec s = {.model_path = model, .kv = "token", .threads = 1, .module_dir = tu_module_dir(),
                     .kv_k_type = BENCH_F16, .kv_v_type = BENCH_F16, .kv_budget_tokens = 100, .max_seqs = 2};
    if (engine_create(&s, &e, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(engine_kv_token_bytes(e), 640);
    engine_kv_mem m = engine_kv_memory(e);
    assert_true(m.reserved == 100.0 * 640);
    engine_destroy(e);
    /* a quantised cache on 8-value heads: refused, naming head_dim */
    s.kv_k_type = s.kv_v_type = BENCH_Q8_0;
    e = NULL;
    assert_int_equal(engine_create(&s, &e, err, sizeof(err)), -BENCH_ERR_REFUSED);
    assert_non_null(strstr(err, "head_dim a multiple of 32"));
    /* a module that stores f32 only (tests/modules/broken.c's kv_pooled): refused, saying so */
    char mods[4096], path[9000];
    snprintf(mods, sizeof(mods), "%s", tu_module_dir());
    snprintf(path, sizeof(path), "%s/test-modules:%s", dirname(mods), tu_module_dir());
    s = (engine_spec){.model_path = model, .kv = "pooled", .threads = 1, .module_dir = path, .kv_k_type = BENCH_F16,
                      .kv_v_type = BENCH_F32};
    assert_int_equal(engine_create(&s, &e, err, sizeof(err)), -BENCH_ERR_REFUSED);
    if (!strstr(err, "kv pooled stores f32, not a f16 K / f32 V cache")) fail_msg("unclear: %s", err);
    /* the names the command line and scenarios take */
    bench_dtype k, v;
    assert_int_equal(engine_parse_cache_type("q8_0/f16", &k, &v, err, sizeof(err)), 0);
    assert_true(k == BENCH_Q8_0 && v == BENCH_F16);
    assert_int_equal(engine_parse_cache_type("q4_0", &k, &v, err, sizeof(err)), 0);
    assert_true(k == BENCH_Q4_0 && v == BENCH_Q4_0);
    assert_true(engine_parse_cache_type("q6_k", &k, &v, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "expected f32, f16, bf16, q8_0 or q4_0"));
    char names[128];
    engine_cache_type_names(names, sizeof names, ", "); /* harness/scenario/scenario.c's form */
    assert_string_equal(names, "f32, f16, bf16, q8_0, q4_0");
}

/* Every row of the KV element type table, this test's made-up one included: its name parses
 * back to it and is listed, a row costs its blocks' bytes (bench's own types: as dtype.h
 * sizes them), a head that is not a whole number of blocks is refused, and a contiguous cache
 * of the type (kv_contig.c, compiled in above) attends bitwise as an f32 cache holding what
 * the type's load gives back for each stored value. */
static void check_row(const kvq_type *r) {
    char names[256];
    kvq_type_names(names, sizeof names, SIZE_MAX, " or ");
    assert_non_null(strstr(names, kvq_type_name(r)));
    assert_int_equal(kvq_type_parse(kvq_type_name(r), strlen(kvq_type_name(r))), r->id);
    assert_int_equal(kvq_bytes(r->id, 64 * r->block_elems), 64 * r->block_bytes);
    if (r->id < BENCH_DTYPE_COUNT) assert_int_equal(kvq_bytes(r->id, 64 * r->block_elems), bench_kv_row_bytes(r->id, 64 * (int)r->block_elems));
    bench_kv_shape s = typed_shape, f = typed_shape;
    s.k_type = s.v_type = r->id;
    char err[256];
    assert_int_equal(kvq_check_shape(&s, KVQ_CPU_TYPES, "kv test", err, sizeof err), 0);
    s.head_dim = 8;
    assert_int_equal(kvq_check_shape(&s, KVQ_CPU_TYPES, "kv test", err, sizeof err),
                     r->block_elems > 8 ? -BENCH_ERR_REFUSED : 0);
    s.head_dim = typed_shape.head_dim;
    enum { N = 33 };
    const size_t kv_dim = (size_t)s.n_kv_heads * s.head_dim, q_dim = (size_t)s.n_heads * s.head_dim;
    float *k = malloc(N * kv_dim * sizeof(float)), *v = malloc(N * kv_dim * sizeof(float)), *q = malloc(N * q_dim * sizeof(float));
    float *out = malloc(N * q_dim * sizeof(float)), *out2 = malloc(N * q_dim * sizeof(float));
    unsigned char *row = malloc(kvq_bytes(r->id, kv_dim));
    float *scratch = malloc(kvq_scores_per_task(&s) * sizeof(float));
    kvc_seq typed = {.cap = s.max_pos}, plain = {.cap = s.max_pos};
    typed.mem = malloc(kvc_bytes(&s, typed.cap));
    plain.mem = malloc(kvc_bytes(&f, plain.cap));
    unsigned seed = 7;
    for (size_t i = 0; i < N * q_dim; i++) q[i] = kvt_rand(&seed);
    for (int l = 0; l < s.n_layers; l++) {
        for (size_t i = 0; i < N * kv_dim; i++) k[i] = kvt_rand(&seed), v[i] = kvt_rand(&seed);
        kvc_store(&s, &typed, l, 0, N, k, v);
        for (int p = 0; p < N; p++)
            for (float *x = k; x; x = x == k ? v : NULL) { /* K, then V: what the type gives back */
                kvq_store_row(r->id, x + (size_t)p * kv_dim, row, kv_dim);
                kvq_load_row(r->id, row, x + (size_t)p * kv_dim, kv_dim);
            }
        kvc_store(&f, &plain, l, 0, N, k, v);
        kvc_attend(&s, NULL, kvc_k(&s, &typed, l), kvc_v(&s, &typed, l), 0, N, q, out, scratch);
        kvc_attend(&f, NULL, kvc_k(&f, &plain, l), kvc_v(&f, &plain, l), 0, N, q, out2, scratch);
        if (memcmp(out, out2, N * q_dim * sizeof(float)))
            fail_msg("%s cache, layer %d: attention differs from an f32 cache holding its values", kvq_type_name(r), l);
    }
    free(k), free(v), free(q), free(out), free(out2), free(row), free(scratch), free(typed.mem), free(plain.mem);
}

static void test_every_row(void **state) {
    (void)state;
    int made_up = 0;
    for (size_t t = 0; t < KVQ_N_IDS; t++) {
        const kvq_type *r = kvq_type_of((bench_dtype)t);
        if (!r) continue;
        check_row(r);
        made_up |= r->id == KVT_I8S;
    }
    assert_true(made_up);
    assert_true(KVQ_CPU_TYPES >> KVT_I8S & 1u);
    assert_false(KVQ_CUDA_TYPES >> KVT_I8S & 1u); /* attn.cu has no reader of it */
}

/* The KV interface's contract (test_kv_contract's, on the module compiled in above) in every
 * type of this table: store and attend against the float64 reference, memory, release, the
 * refusal of a head its blocks cannot hold. */
static void test_contract_in_every_row(void **state) {
    (void)state;
    assert_true(prealloc_iface.cache_types >> KVT_I8S & 1u);   /* the made-up row is among them */
    kvt_contract("prealloc (compiled in)");
}

int main(void) {
    if (kvt_add_module("prealloc (compiled in)", kvt_prealloc_init())) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_per_position),
        cmocka_unit_test(test_every_row),
        cmocka_unit_test(test_contract_in_every_row),
        cmocka_unit_test(test_typed_attention_is_f32_attention_of_the_stored_values),
        cmocka_unit_test(test_heads_per_unit),
        cmocka_unit_test(test_dots_keep_the_tree_order),
        cmocka_unit_test(test_rowmax_is_the_loop),
        cmocka_unit_test(test_avx2_loaders_are_the_scalar_bits),
        cmocka_unit_test(test_engine_budget_and_refusal_by_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
