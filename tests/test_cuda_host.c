/* The host-side logic of the CUDA modules, on the CPU (no GPU, no CUDA header):
 * the loaders' staging plan and its driver (engines/cuda/host/staging.h), the growth
 * arithmetic of the dynamic and virtual-memory KV caches (kvgrow.h), the device
 * mirror of block tables (tablemirror.h), the sort-free top-p draw of the GPU
 * sampler against sampler.c's sort (topp.h), and the forward pass's scratch layout
 * (scratch.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/cuda/host/kvgrow.h"
#include "engines/cuda/host/scratch.h"
#include "engines/cuda/host/staging.h"
#include "engines/cuda/host/tablemirror.h"
#include "engines/cuda/host/topp.h"
#include "engines/cuda/kvc_cuda.h"
#include "engines/modules/common/kv_types.h"

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* ---- staging ---- */

static void test_layout(void **state) {
    (void)state;
    uint64_t nb[] = {10, 0, 300, 256}, dst[4];
    assert_int_equal(stg_layout(nb, 4, 256, dst), 1024);
    assert_int_equal(dst[0], 0);
    assert_int_equal(dst[1], 256);
    assert_int_equal(dst[2], 256);
    assert_int_equal(dst[3], 768);
    assert_int_equal(stg_layout(nb, 0, 256, dst), 256);    /* never an empty region */
    assert_int_equal(stg_layout(nb, 4, 100, dst), 0);      /* not a power of two */
    uint64_t huge[] = {UINT64_MAX - 10, 20};
    assert_int_equal(stg_layout(huge, 2, 64, dst), 0);
}

#define FILES 3
#define FILE_BYTES 5000

/* A fake device: files are byte arrays, slots are buffers, copies land in `device`;
 * the ops check that a slot is never read into while its copies are pending. */
typedef struct fake {
    uint8_t file[FILES][FILE_BYTES];
    uint8_t *slots;     /* (n_slots, chunk) */
    size_t chunk;
    int n_slots;
    uint8_t *device;
    uint8_t *pending;   /* (n_slots) 1 between submit and wait */
    int reads, copies, waits, submits, fail_read_at, violations;
} fake;

static int f_wait(void *u, int slot, char *err, size_t n) {
    fake *f = u;
    (void)err; (void)n;
    if (!f->pending[slot]) f->violations++; /* a wait only for a submitted slot */
    f->pending[slot] = 0;
    f->waits++;
    return 0;
}

static int f_read(void *u, int slot, const stg_chunk *c, char *err, size_t n) {
    fake *f = u;
    if (f->reads++ == f->fail_read_at) return snprintf(err, n, "read failed on purpose"), -1;
    if (f->pending[slot]) f->violations++;
    if (c->len > f->chunk || c->file < 0 || c->file >= FILES || c->off + c->len > FILE_BYTES) f->violations++;
    else memcpy(f->slots + (size_t)slot * f->chunk, f->file[c->file] + c->off, c->len);
    return 0;
}

static int f_copy(void *u, int slot, const stg_copy *c, char *err, size_t n) {
    fake *f = u;
    (void)err; (void)n;
    if (c->slot_off + c->len > f->chunk) f->violations++;
    else memcpy(f->device + c->dst, f->slots + (size_t)slot * f->chunk + c->slot_off, c->len);
    f->copies++;
    return 0;
}

static int f_submit(void *u, int slot, char *err, size_t n) {
    fake *f = u;
    (void)err; (void)n;
    f->pending[slot] = 1;
    f->submits++;
    return 0;
}

static const stg_ops fake_ops = {f_wait, f_read, f_copy, f_submit};

static void fake_init(fake *f, size_t chunk, int n_slots, size_t device_bytes) {
    memset(f, 0, sizeof(*f));
    for (int i = 0; i < FILES; i++)
        for (int j = 0; j < FILE_BYTES; j++) f->file[i][j] = (uint8_t)(i * 31 + j * 7 + (j >> 8));
    f->chunk = chunk;
    f->n_slots = n_slots;
    f->slots = calloc((size_t)n_slots, chunk);
    f->device = calloc(device_bytes, 1);
    f->pending = calloc((size_t)n_slots, 1);
    f->fail_read_at = -1;
    assert_true(f->slots && f->device && f->pending);
}

static void fake_free(fake *f) {
    free(f->slots);
    free(f->device);
    free(f->pending);
}

static void test_plan_and_run(void **state) {
    (void)state;
    uint64_t seed = 12345;
    const size_t chunks[] = {1, 7, 64, 1000, 4096, 1 << 20};
    for (int round = 0; round < 60; round++) {
        int n = 1 + (int)(rng_next(&seed) % 12);
        stg_piece pieces[12];
        uint64_t nb[12], dst[12];
        for (int i = 0; i < n; i++) {
            uint64_t off = rng_next(&seed) % FILE_BYTES;
            uint64_t len = rng_next(&seed) % 4 == 0 ? 0 : rng_next(&seed) % (FILE_BYTES - off + 1);
            pieces[i] = (stg_piece){.file = (int)(rng_next(&seed) % FILES), .off = off, .len = len};
            nb[i] = len;
        }
        uint64_t total = stg_layout(nb, n, 64, dst);
        assert_true(total > 0);
        for (int i = 0; i < n; i++) pieces[i].dst = dst[i];
        size_t chunk = chunks[round % 6], gap = round % 3 == 0 ? 0 : 100;
        int slots = 1 + round % 4;
        stg_plan p;
        char err[256];
        assert_int_equal(stg_plan_make(pieces, n, chunk, gap, &p, err, sizeof(err)), 0);
        uint64_t want = 0;
        for (int i = 0; i < n; i++) want += pieces[i].len;
        assert_int_equal(p.bytes_copied, want);
        assert_true(p.bytes_read >= (want ? 1 : 0));
        for (int k = 0; k < p.n_chunks; k++) assert_true(p.chunks[k].len <= chunk && p.chunks[k].len > 0);
        fake f;
        fake_init(&f, chunk, slots, (size_t)total);
        assert_int_equal(stg_run(&p, slots, &fake_ops, &f, err, sizeof(err)), 0);
        assert_int_equal(f.violations, 0);
        assert_int_equal(f.reads, p.n_chunks);
        assert_int_equal(f.copies, p.n_copies);
        assert_int_equal(f.waits, f.submits); /* every copy is done on return */
        for (int i = 0; i < n; i++)
            if (pieces[i].len) assert_memory_equal(f.device + pieces[i].dst, f.file[pieces[i].file] + pieces[i].off, pieces[i].len);
        fake_free(&f);
        stg_plan_free(&p);
    }
}

static void test_plan_merges_and_splits(void **state) {
    (void)state;
    /* two tensors 10 bytes apart in one file: one read with a gap of 10 allowed, two without */
    stg_piece pc[] = {{0, 100, 50, 0}, {0, 160, 40, 64}};
    stg_plan p;
    char err[128];
    assert_int_equal(stg_plan_make(pc, 2, 1024, 16, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_chunks, 1);
    assert_int_equal(p.bytes_read, 100);
    assert_int_equal(p.n_copies, 2);
    stg_plan_free(&p);
    assert_int_equal(stg_plan_make(pc, 2, 1024, 0, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_chunks, 2);
    assert_int_equal(p.bytes_read, 90);
    stg_plan_free(&p);
    /* a tensor of 2.5 chunks: three reads, three copies */
    stg_piece big = {1, 3, 250, 0};
    assert_int_equal(stg_plan_make(&big, 1, 100, 0, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_chunks, 3);
    assert_int_equal(p.chunks[2].len, 50);
    assert_int_equal(p.copies[1].dst, 100);
    stg_plan_free(&p);
    /* bad arguments */
    assert_int_equal(stg_plan_make(pc, 2, 0, 0, &p, err, sizeof(err)), -1);
    stg_piece wrap = {0, UINT64_MAX - 5, 10, 0};
    assert_int_equal(stg_plan_make(&wrap, 1, 64, 0, &p, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "overflows"));
}

static void test_run_failure_drains(void **state) {
    (void)state;
    stg_piece pc = {0, 0, 1000, 0};
    stg_plan p;
    char err[128];
    assert_int_equal(stg_plan_make(&pc, 1, 100, 0, &p, err, sizeof(err)), 0);
    fake f;
    fake_init(&f, 100, 3, 1000);
    f.fail_read_at = 5;
    assert_int_equal(stg_run(&p, 3, &fake_ops, &f, err, sizeof(err)), -1);
    assert_string_equal(err, "read failed on purpose");
    assert_int_equal(f.violations, 0);
    assert_int_equal(f.waits, f.submits); /* nothing left in flight */
    for (int s = 0; s < 3; s++) assert_int_equal(f.pending[s], 0);
    fake_free(&f);
    stg_plan_free(&p);
}

/* ---- KV growth ---- */

static void test_dynamic_capacity(void **state) {
    (void)state;
    assert_int_equal(kvg_dynamic_cap(1, 256, 2048), 256);
    assert_int_equal(kvg_dynamic_cap(256, 256, 2048), 256);
    assert_int_equal(kvg_dynamic_cap(257, 256, 2048), 512);
    assert_int_equal(kvg_dynamic_cap(2000, 256, 2048), 2048);
    assert_int_equal(kvg_dynamic_cap(2047, 7, 2048), 2048);     /* capped at the context */
    assert_int_equal(kvg_dynamic_cap(2147483601, 100, 2147483647), 2147483647); /* no int overflow */
}

static void test_vmm_plan(void **state) {
    (void)state;
    /* tinyllama-1.1b: 22 layers x K and V x 256 floats = 45056 B per position */
    size_t pb = 2u * 22 * 256 * 4, gran = 2u << 20;
    kvg_vmm v;
    char err[256];
    assert_int_equal(kvg_vmm_plan(pb, 2048, gran, 0, &v, err, sizeof(err)), 0);
    assert_int_equal(v.chunk, gran);
    assert_int_equal(v.max_chunks, (2048 * pb + gran - 1) / gran);     /* 44 */
    assert_int_equal(v.reserve, v.max_chunks * gran);
    assert_int_equal(kvg_vmm_chunks(&v, 0), 0);
    assert_int_equal(kvg_vmm_chunks(&v, 1), 1);
    assert_int_equal(kvg_vmm_chunks(&v, 46), 1);   /* 46 * 45056 < 2 MiB */
    assert_int_equal(kvg_vmm_chunks(&v, 47), 2);
    assert_int_equal(kvg_vmm_chunks(&v, 5000), v.max_chunks);
    for (int n = 1; n <= 2048; n++) {
        size_t c = kvg_vmm_chunks(&v, n);
        assert_true(c * v.chunk >= (size_t)n * pb);            /* room for every position */
        assert_true((c - 1) * v.chunk < (size_t)n * pb);       /* and not a chunk more */
        assert_true(c >= kvg_vmm_chunks(&v, n - 1));
    }
    assert_int_equal(kvg_vmm_plan(pb, 2048, gran, 3u << 20, &v, err, sizeof(err)), 0);
    assert_int_equal(v.chunk, 4u << 20);            /* rounded up to granules */
    assert_int_equal(kvg_vmm_plan(pb, 2048, 3u << 20, 0, &v, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "power of two"));
    assert_int_equal(kvg_vmm_plan(0, 2048, gran, 0, &v, err, sizeof(err)), -1);
    assert_int_equal(kvg_vmm_plan(SIZE_MAX / 2, 2048, gran, 0, &v, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "overflow"));
}

/* The contiguous CUDA caches' bytes per position in every cache type, exact: what their
 * allocations, the vmm plan and the memory slot count (tinyllama-1.1b's shape: 22 layers,
 * 4 KV heads of 64). And they store the types the CPU's caches do. */
static void test_typed_position_bytes(void **state) {
    (void)state;
    bench_kv_shape s = {.n_layers = 22, .n_heads = 32, .n_kv_heads = 4, .head_dim = 64, .max_pos = 2048, .max_seqs = 1};
    const struct { bench_dtype k, v; size_t row_k, pos; } want[] = {
        {BENCH_F32, BENCH_F32, 1024, 22u * 2 * 1024},
        {BENCH_F16, BENCH_F16, 512, 22u * 2 * 512},
        {BENCH_BF16, BENCH_BF16, 512, 22u * 2 * 512},
        {BENCH_Q8_0, BENCH_Q8_0, 8 * 34, 22u * 2 * 8 * 34},    /* 8 blocks of 34 bytes a row */
        {BENCH_Q4_0, BENCH_Q4_0, 8 * 18, 22u * 2 * 8 * 18},
        {BENCH_Q8_0, BENCH_F16, 8 * 34, 22u * (8 * 34 + 512)}, /* -ctk q8_0 -ctv f16 */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        s.k_type = want[i].k;
        s.v_type = want[i].v;
        assert_int_equal(kvcc_k_row(&s), want[i].row_k);
        assert_int_equal(kvcc_pos_bytes(&s), want[i].pos);
    }
    assert_int_equal(KVC_CUDA_TYPES, KVQ_CPU_TYPES);
}

/* ---- table mirror ---- */

static void test_table_mirror(void **state) {
    (void)state;
    int table[8] = {4, 9, 2, 7, 1, 0, 3, 5}, shadow[8] = {4, 9, 2, 7, 0, 0, 0, 0};
    int first;
    assert_int_equal(tmr_diff(table, shadow, 4, 4, &first), 0);        /* up to date */
    assert_int_equal(tmr_diff(table, shadow, 4, 6, &first), 2);        /* appended */
    assert_int_equal(first, 4);
    assert_int_equal(tmr_diff(table, shadow, 0, 3, &first), 3);        /* nothing synced */
    assert_int_equal(first, 0);
    shadow[1] = 8;                                                      /* rewritten (copy-on-write) */
    assert_int_equal(tmr_diff(table, shadow, 4, 4, &first), 3);
    assert_int_equal(first, 1);
    assert_int_equal(tmr_diff(table, shadow, 4, 2, &first), 1);        /* a shorter need */
    assert_int_equal(tmr_diff(table, shadow, 8, 0, &first), 0);
}

/* ---- the sort-free top-p draw against sampler.c's sort ---- */

typedef struct cand { float p; int i; } cand;

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* engines/core/runtime/sampler.c's sample_topp / sample_mult, line for line */
static int sorted_draw(const float *p, int n, float topp, float coin) {
    if (!(topp < 1)) {
        float cdf = 0;
        for (int i = 0; i < n; i++) {
            cdf += p[i];
            if (coin < cdf) return i;
        }
        return n - 1;
    }
    cand *c = malloc((size_t)n * sizeof(*c));
    float cutoff = n > 1 ? (1.0f - topp) / (float)(n - 1) : 0;
    int nc = 0;
    for (int i = 0; i < n; i++)
        if (p[i] >= cutoff) c[nc++] = (cand){p[i], i};
    qsort(c, (size_t)nc, sizeof(*c), cand_cmp);
    float cum = 0;
    int last = nc - 1;
    for (int i = 0; i < nc; i++) {
        cum += c[i].p;
        if (cum > topp) { last = i; break; }
    }
    float r = coin * cum, cdf = 0;
    int out = c[last].i;
    for (int i = 0; i <= last; i++) {
        cdf += c[i].p;
        if (r < cdf) { out = c[i].i; break; }
    }
    free(c);
    return out;
}

static void test_topp_matches_sort(void **state) {
    (void)state;
    /* Probabilities w_i / 2^16 with integer weights: every partial sum is exact, so the two
     * draws must agree whatever the order of their additions. Few distinct weights make ties. */
    uint64_t seed = 99;
    const float topps[] = {0.1f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f};
    int draws = 0;
    for (int round = 0; round < 400; round++) {
        int n = 2 + (int)(rng_next(&seed) % 300);
        int distinct = 1 + (int)(rng_next(&seed) % 6);
        uint32_t *w = calloc((size_t)n, sizeof(*w));
        float *p = malloc((size_t)n * sizeof(float));
        uint32_t left = 1u << 16;
        for (int i = 0; i < n && left; i++) {
            uint32_t x = 1 + (uint32_t)(rng_next(&seed) % (uint64_t)distinct) * (round % 2 ? 37u : 1u);
            if (x > left) x = left;
            w[(i * 7919) % n] = x;
            left -= x;
        }
        w[0] += left; /* the weights sum to 2^16 */
        for (int i = 0; i < n; i++) p[i] = (float)w[i] / 65536.0f;
        for (int t = 0; t < 6; t++)
            for (int c = 0; c < 8; c++) {
                float coin = (float)(rng_next(&seed) >> 40) / 16777216.0f;
                int want = sorted_draw(p, n, topps[t], coin), got = topp_ref_sample(p, n, topps[t], coin);
                if (want != got)
                    fprintf(stderr, "n %d topp %g coin %.9g: sort draws %d (p %g), bisection %d (p %g)\n", n,
                            (double)topps[t], (double)coin, want, (double)p[want], got, (double)p[got]);
                assert_int_equal(got, want);
                draws++;
            }
        free(w);
        free(p);
    }
    assert_int_equal(draws, 400 * 6 * 8);
    /* the edges: one token, every mass on one token, a coin just under 1 */
    float one = 1.0f;
    assert_int_equal(topp_ref_sample(&one, 1, 0.9f, 0.5f), 0);
    float peak[4] = {0, 0, 1, 0};
    assert_int_equal(topp_ref_sample(peak, 4, 0.5f, 0.99999994f), 2);
    assert_int_equal(topp_ref_sample(peak, 4, 1.0f, 0.99999994f), 2);
}

/* ---- scratch layout ---- */

static void test_scratch_layout(void **state) {
    (void)state;
    dsl_shape s = {.dim = 2048, .hidden = 5632, .kv_dim = 256, .vocab = 32000};
    dsl_layout l;
    size_t total = dsl_make(&s, 512, &l);
    assert_int_equal(total, l.total);
    struct { size_t off, len; } b[] = {
        {l.x, 512 * 2048 * 4}, {l.xb, 512 * 2048 * 4}, {l.q, 512 * 2048 * 4}, {l.k, 512 * 256 * 4},
        {l.v, 512 * 256 * 4}, {l.hb, 512 * 5632 * 4}, {l.hb2, 512 * 5632 * 4}, {l.xh, 512 * 5632 * 2},
        {l.tokens, 512 * 4},
    };
    size_t n = sizeof(b) / sizeof(b[0]);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(b[i].off % DSL_ALIGN, 0);
        assert_true(b[i].off + b[i].len <= total);
        for (size_t j = 0; j < i; j++) assert_true(b[i].off >= b[j].off + b[j].len || b[j].off >= b[i].off + b[i].len);
    }
    assert_int_equal(dsl_make(&s, 1, &l) < total, 1);
    assert_int_equal(dsl_make(&s, 0, &l), 0);
    dsl_shape bad = s;
    bad.kv_dim = 0;
    assert_int_equal(dsl_make(&bad, 4, &l), 0);
    dsl_shape huge = {.dim = 1 << 30, .hidden = 1 << 30, .kv_dim = 1 << 30, .vocab = 1 << 30};
    assert_int_equal(dsl_make(&huge, 1 << 30, &l), 0);     /* overflow */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_plan_and_run),
        cmocka_unit_test(test_plan_merges_and_splits),
        cmocka_unit_test(test_run_failure_drains),
        cmocka_unit_test(test_dynamic_capacity),
        cmocka_unit_test(test_vmm_plan),
        cmocka_unit_test(test_typed_position_bytes),
        cmocka_unit_test(test_table_mirror),
        cmocka_unit_test(test_topp_matches_sort),
        cmocka_unit_test(test_scratch_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
