/* Synthetic models: the shape table and the deterministic weight generator.
 *
 * Values. Element k (row-major) of the 2-D weight called N is
 *     u = splitmix64(key(seed, N) + k * 0x9e3779b97f4a7c15)     (splitmix64's own stream)
 *     w = a * (int32)(u >> 32) / 2^31                          uniform in [-a, a)
 * so any element is computable on its own: chunks are generated in parallel,
 * in any order, and a tensor has the same values whatever the format, the
 * tensor order or the dtype (the dtype only rounds them). The key hashes the
 * tensor's name, not its index, for the same reason.
 *
 * Scale. With a = sqrt(3) * gain / sqrt(fan_in) a weight has standard deviation
 * gain / sqrt(fan_in), so a matrix maps unit-RMS inputs to unit-RMS outputs:
 *   q, k, v, gate, up, classifier     gain 1
 *   attn_output, ffn_down             gain 1 / sqrt(2 * n_layers): the 2L residual
 *                                     additions then sum to O(1), whatever the depth
 *   token_embd                        1/sqrt(dim) like the classifier it is when tied
 *   norms                             1.0
 * Every block reads RMS-normalised input, so activations stay O(1) however many
 * tokens are decoded; attention scores and logits have standard deviation ~1,
 * which keeps softmax away from both overflow and a flat distribution.
 */
#include "synth.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/model/model_write.h"
#include "engines/core/compute/threadpool.h"

/* ======================= shapes ======================= */

#define SHAPE(d, h, l, nh, nkv, v, ctx, theta) \
    {.dim = (d), .hidden_dim = (h), .n_layers = (l), .n_heads = (nh), .n_kv_heads = (nkv), .vocab_size = (v), \
     .seq_len = (ctx), .seq_len_header = (ctx), .rope_theta = (theta), .norm_eps = 1e-5f, .rope = ROPE_INTERLEAVED}

const synth_shape synth_shapes[] = {
    {"tiny", SHAPE(64, 172, 5, 8, 4, 512, 512, 10000.0f), 1,
     "stories260K (llama2.c): 260K parameters, shared classifier"},
    {"llama-110m", SHAPE(768, 2048, 12, 12, 12, 32000, 1024, 10000.0f), 1,
     "stories110M (llama2.c): 110M parameters, 438 MB in f32, shared classifier"},
    {"tinyllama-1.1b", SHAPE(2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f), 0,
     "TinyLlama-1.1B: GQA 32/4, separate classifier"},
    {"llama-3.2-1b", SHAPE(2048, 8192, 16, 32, 8, 128256, 8192, 500000.0f), 1,
     "Llama-3.2-1B: GQA 32/8, rope theta 500000, tied classifier; context 8192 here "
     "(the real model declares 131072), and a SentencePiece-style vocabulary instead of its BPE one"},
    {"llama2-7b", SHAPE(4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f), 0,
     "Llama-2-7B: 6.7B parameters (27 GB in f32, 7.2 GB in q8_0), separate classifier"},
    {NULL, {0}, 0, NULL},
};

#undef SHAPE

void synth_dtype_names(char *buf, size_t len, const char *sep, const char *last) {
    int total = 0, n = 0;
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++) total += bench_dtype_writable((bench_dtype)t);
    size_t used = 0;
    if (len) buf[0] = 0;
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++) {
        if (!bench_dtype_writable((bench_dtype)t)) continue;
        int w = snprintf(buf + used, used < len ? len - used : 0, "%s%s", !n ? "" : n + 1 == total ? last : sep,
                         bench_dtype_name((bench_dtype)t));
        if (w > 0) used += (size_t)w;
        n++;
    }
}

const synth_shape *synth_find_shape(const char *name) {
    if (!name) return NULL;
    for (const synth_shape *s = synth_shapes; s->name; s++)
        if (strcmp(s->name, name) == 0) return s;
    return NULL;
}

/* ======================= values ======================= */

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define SYNTH_GAMMA 0x9e3779b97f4a7c15ull /* splitmix64's increment */

static uint64_t tensor_key(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the name */
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return mix64(mix64(seed) ^ h);
}

static inline float value_at(uint64_t key, float scale, uint64_t k) {
    return (float)(int32_t)(mix64(key + k * SYNTH_GAMMA) >> 32) * scale;
}

float synth_weight_value(uint64_t seed, const char *name, float a, uint64_t index) {
    return value_at(tensor_key(seed, name), a * 0x1p-31f, index);
}

bench_dtype synth_weight_dtype(bench_dtype want, int64_t cols) {
    return bench_dtype_is_quant(want) && cols % (int64_t)bench_dtype_block_elems(want) ? BENCH_F16 : want;
}

/* ======================= fast f32 -> f16 / q8_0 ======================= */

/* kn_quant_row is scalar, and at ~5 ns per element its f16 and q8_0 paths run
 * slower than a disk writes (tinyllama-1.1b: 4 s for 2.2 GB of f16, 3.5 s for
 * 1.2 GB of q8_0, on 2 cores). These AVX2+F16C versions give the same bytes
 * (test_synth checks it), so a model does not depend on the machine that made
 * it. They are used when the kernels chose a SIMD table (kn_isa(): the one
 * place the instruction set is decided; both SIMD tables imply AVX2 and F16C). */
#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2,f16c"))) static void quant_f16_avx2(const float *in, uint16_t *out, int n) {
    int i = 0;
    /* F16C rounds to nearest even, subnormals included: bench_f32_to_f16's rule */
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) out[i] = bench_f32_to_f16(in[i]);
}

__attribute__((target("avx2,f16c"))) static void quant_q8_0_avx2(const float *in, bench_block_q8_0 *b, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    for (int blk = 0; blk < n / BENCH_Q8_0_BLOCK; blk++) {
        const float *x = in + (size_t)blk * BENCH_Q8_0_BLOCK;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        float amax = _mm_cvtss_f32(m4);
        /* the scale exactly as kn_quant_row computes it */
        uint16_t dh = bench_f32_to_f16(amax / 127.0f);
        float d = bench_f16_to_f32(dh);
        float id = d > 0.0f && isfinite(d) ? 1.0f / d : 0.0f;
        b[blk].d = dh;
        __m256 vid = _mm256_set1_ps(id);
        for (int k = 0; k < 4; k++) {
            /* roundf (half away from zero), which has no AVX rounding mode: truncate, then
             * step away from zero when the dropped fraction (exact in f32) is >= 1/2 */
            __m256 q = _mm256_mul_ps(v[k], vid);
            __m256 t = _mm256_round_ps(q, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(q, t)), half, _CMP_GE_OQ);
            t = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(_mm256_and_ps(q, sign), one)));
            t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
            int32_t qi[8];
            _mm256_storeu_si256((__m256i *)(void *)qi, _mm256_cvttps_epi32(t));
            for (int j = 0; j < 8; j++) b[blk].qs[8 * k + j] = (int8_t)qi[j];
        }
    }
}
#endif

void synth_quant_row(bench_dtype dt, const float *in, void *out, int n) {
#if defined(__x86_64__)
    if ((dt == BENCH_F16 || dt == BENCH_Q8_0) && strcmp(kn_isa(), kn_isa_reference()) != 0) {
        if (dt == BENCH_F16) quant_f16_avx2(in, out, n);
        else quant_q8_0_avx2(in, out, n);
        return;
    }
#endif
    kn_quant_row(dt, in, out, n);
}

/* ======================= tensors ======================= */

typedef struct synth_tensor_info {
    float a;                    /* half-width of the uniform; 0 for norms (all 1.0) */
} synth_tensor_info;

typedef struct synth_ctx {
    uint64_t seed;
    int n;
    model_tensor *tensors;      /* (n) */
    synth_tensor_info *info;    /* (n) */
    tp_pool *pool;
} synth_ctx;

static void synth_free_tensors(synth_ctx *c) {
    if (c->tensors)
        for (int i = 0; i < c->n; i++) free(c->tensors[i].name);
    free(c->tensors);
    free(c->info);
    c->tensors = NULL;
    c->info = NULL;
    c->n = 0;
}

static int add_tensor(synth_ctx *c, const char *name, bench_dtype want, int64_t cols, int64_t rows, float gain) {
    model_tensor *t = &c->tensors[c->n];
    memset(t, 0, sizeof(*t));
    if (!(t->name = strdup(name))) return -1;
    c->n++;
    t->ne[0] = cols;
    t->ne[1] = rows;
    if (rows == 1) {
        t->n_dims = 1;
        t->dtype = BENCH_F32;
        c->info[c->n - 1].a = 0.0f;
    } else {
        t->n_dims = 2;
        t->dtype = synth_weight_dtype(want, cols);
        c->info[c->n - 1].a = sqrtf(3.0f) * gain / sqrtf((float)cols);
    }
    t->nbytes = (uint64_t)rows * bench_dtype_row_bytes(t->dtype, cols);
    return 0;
}

/* Tensors in llama.cpp's order: embedding, then each block, then the head. */
static int synth_make_tensors(synth_ctx *c, const synth_shape *sh, bench_dtype want) {
    const model_config *m = &sh->cfg;
    int64_t dim = m->dim, hid = m->hidden_dim, kv = (int64_t)m->n_kv_heads * (m->dim / m->n_heads);
    float res_gain = 1.0f / sqrtf(2.0f * (float)m->n_layers);
    int max = 3 + 9 * m->n_layers;
    c->tensors = calloc((size_t)max, sizeof(*c->tensors));
    c->info = calloc((size_t)max, sizeof(*c->info));
    if (!c->tensors || !c->info) return -1;
    char name[96];
    if (add_tensor(c, "token_embd.weight", want, dim, m->vocab_size, 1.0f)) return -1;
    for (int l = 0; l < m->n_layers; l++) {
        struct { const char *n; int64_t cols, rows; float gain; } lt[] = {
            {"attn_norm", dim, 1, 0}, {"attn_q", dim, dim, 1}, {"attn_k", dim, kv, 1}, {"attn_v", dim, kv, 1},
            {"attn_output", dim, dim, res_gain}, {"ffn_norm", dim, 1, 0}, {"ffn_gate", dim, hid, 1},
            {"ffn_down", hid, dim, res_gain}, {"ffn_up", dim, hid, 1},
        };
        for (size_t i = 0; i < sizeof(lt) / sizeof(lt[0]); i++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", l, lt[i].n);
            if (add_tensor(c, name, want, lt[i].cols, lt[i].rows, lt[i].gain)) return -1;
        }
    }
    if (add_tensor(c, "output_norm.weight", want, dim, 1, 0)) return -1;
    if (!sh->tied && add_tensor(c, "output.weight", want, dim, m->vocab_size, 1.0f)) return -1;
    return 0;
}

/* ---- the fill callback: chunks of the tensor generated in parallel ---- */

#define SYNTH_CHUNK 512         /* elements converted at a time; a multiple of the Q8_0 block */
#define SYNTH_TASK_ELEMS (1u << 20) /* elements per parallel task: ~1 ms of work */

typedef struct fill_job {
    uint64_t key;
    float scale;                /* a / 2^31 */
    bench_dtype dt;
    uint64_t n;                 /* elements */
    uint8_t *dst;
} fill_job;

static void fill_task(void *arg, int task, int n_tasks) {
    const fill_job *j = arg;
    uint64_t lo = (uint64_t)task * SYNTH_TASK_ELEMS, hi = lo + SYNTH_TASK_ELEMS;
    if (hi > j->n) hi = j->n;
    if (j->dt == BENCH_F32) {
        float *out = (float *)(void *)j->dst;
        for (uint64_t k = lo; k < hi; k++) out[k] = value_at(j->key, j->scale, k);
        return;
    }
    /* Chunks start at multiples of SYNTH_CHUNK and rows hold whole Q8_0 blocks, so no
     * block straddles two chunks, and a chunk's bytes start at (first element / block) * block bytes. */
    size_t be = bench_dtype_block_elems(j->dt), bb = bench_dtype_block_bytes(j->dt);
    float buf[SYNTH_CHUNK];
    for (uint64_t k0 = lo; k0 < hi; k0 += SYNTH_CHUNK) {
        int m = (int)(hi - k0 < SYNTH_CHUNK ? hi - k0 : SYNTH_CHUNK);
        for (int i = 0; i < m; i++) buf[i] = value_at(j->key, j->scale, k0 + (uint64_t)i);
        synth_quant_row(j->dt, buf, j->dst + k0 / be * bb, m);
    }
}

static int synth_fill(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen) {
    synth_ctx *c = user;
    if (i < 0 || i >= c->n) return bench_errf(err, errlen, "synth: fill asked for tensor %d of %d", i, c->n);
    const model_tensor *t = &c->tensors[i];
    if (nbytes != t->nbytes)
        return bench_errf(err, errlen, "synth: tensor %s: the writer asked for %llu bytes, it has %llu",
                          t->name, (unsigned long long)nbytes, (unsigned long long)t->nbytes);
    uint64_t n = (uint64_t)t->ne[0] * (uint64_t)t->ne[1];
    if (c->info[i].a == 0.0f) { /* a norm: all ones, f32 */
        float *out = dst;
        for (uint64_t k = 0; k < n; k++) out[k] = 1.0f;
        return 0;
    }
    fill_job job = {.key = tensor_key(c->seed, t->name), .scale = c->info[i].a * 0x1p-31f,
                    .dt = t->dtype, .n = n, .dst = dst};
    uint64_t tasks = (n + SYNTH_TASK_ELEMS - 1) / SYNTH_TASK_ELEMS;
    tp_run(c->pool, fill_task, &job, (int)tasks);
    return 0;
}

/* ======================= writing ======================= */

int synth_write(const synth_spec *spec, const char *path, char *err, size_t errlen) {
    const synth_shape *sh = synth_find_shape(spec->shape);
    if (!sh) {
        char have[256] = "";
        for (const synth_shape *s = synth_shapes; s->name; s++)
            snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%s", s == synth_shapes ? "" : ", ", s->name);
        return bench_errf(err, errlen, "%s: unknown synth shape \"%s\" (have: %s)", path, spec->shape ? spec->shape : "", have);
    }
    char dtypes[64];
    synth_dtype_names(dtypes, sizeof dtypes, ", ", ", ");
    if ((unsigned)spec->dtype >= BENCH_DTYPE_COUNT)
        return bench_errf(err, errlen, "%s: unknown dtype %d (have: %s)", path, (int)spec->dtype, dtypes);
    if (!bench_dtype_writable(spec->dtype))
        return bench_errf(err, errlen, "%s: dtype %s is read, not written (have: %s)", path, bench_dtype_name(spec->dtype),
                          dtypes);
    const char *fmt = spec->format ? spec->format : "";
    const model_writer *w = model_writer_find(fmt);
    char why[256];
    if (!w) return bench_errf(err, errlen, "%s: unknown format \"%s\" (have: %s)", path, fmt,
                              model_writer_names(why, sizeof why, ", "));
    if (!model_writer_holds(w, spec->dtype))
        return bench_errf(err, errlen, "%s: %s", path, model_writer_refusal(w, spec->dtype, why, sizeof why));

    int rc = -1;
    synth_ctx c = {.seed = spec->seed};
    model_vocab vocab = {0};
    if (synth_vocab_build(sh->cfg.vocab_size, &vocab, err, errlen)) return -1;
    if (synth_make_tensors(&c, sh, spec->dtype)) {
        bench_errf(err, errlen, "%s: out of memory for the tensor list", path);
        goto out;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    c.pool = tp_create(ncpu > 0 ? (int)ncpu : 1);
    if (!c.pool) {
        bench_errf(err, errlen, "%s: cannot start %ld threads", path, ncpu);
        goto out;
    }
    char name[128];
    snprintf(name, sizeof(name), "synth-%s-%s-s%llu", sh->name, bench_dtype_name(spec->dtype), (unsigned long long)spec->seed);
    model_write_src src = {.name = name, .cfg = &sh->cfg, .vocab = &vocab, .n_tensors = c.n,
                           .tensors = c.tensors, .fill = synth_fill, .user = &c};
    rc = w->write(path, &src, 0, err, errlen);
    if (!rc && w->vocab_path) { /* the vocabulary beside the model */
        char tok[4096];
        if (w->vocab_path(path, tok, sizeof(tok))) rc = bench_errf(err, errlen, "%s: path too long", path);
        else rc = w->vocab_write(tok, &vocab, err, errlen);
    }
out:
    tp_destroy(c.pool);
    synth_free_tensors(&c);
    model_vocab_free(&vocab);
    return rc;
}
