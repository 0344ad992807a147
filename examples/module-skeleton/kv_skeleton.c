/* kv "skeleton": the smallest complete KV module, written outside bench's tree against the
 * installed SDK (docs/modules.md), to copy when writing your own.
 *
 * Layout: one contiguous f32 cache per sequence, allocated for the whole context at
 * create time through the host's allocator:
 *     K (n_layers, max_pos, kv_dim)   then   V (n_layers, max_pos, kv_dim)
 * Attention is plain scalar C in the order of the reference (llama2.c's run.c): a dot
 * product per position, divided by sqrt(head_dim), a softmax with the maximum taken out,
 * then the weighted sum of V rows. Slow, and exact where bench's own modules are.
 *
 * What a module must do, in the order bench calls it:
 *   bench_module_init   return the registration (api version, family, name, options, caps)
 *   create              the host has parsed and checked the options into struct skel_opts
 *   reserve/store/attend the forward pass, layer by layer
 *   memory              reserved/used/cached/wasted bytes: what serving admission reads
 *   release/destroy
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bench/alloc.h>
#include <bench/kv.h>

/* The options, as the host fills them (module.h: bench_option). */
typedef struct skel_opts {
    int touch;          /* write the cache at create time, so later steps take no page faults */
    int64_t max_seqs;   /* refuse a shape with more sequences than this (a module's own limit) */
} skel_opts;

static const bench_option skel_options[] = {
    BENCH_OPTION_BOOL(skel_opts, touch, "1", "write every page of the cache at create time"),
    BENCH_OPTION_INT(skel_opts, max_seqs, "64", 1, 4096, "the most sequences this cache takes"),
    BENCH_OPTION_END,
};

typedef struct skel_seq {
    float *mem;         /* (2, n_layers, max_pos, kv_dim) */
    int used;           /* positions stored (high-water mark) */
} skel_seq;

typedef struct skel {
    bench_kv_shape shape;
    const bench_host *host;
    size_t seq_bytes;
    skel_seq *seqs;     /* (max_seqs) */
    float *att;         /* (max_pos) attention scores */
    uint64_t attend_calls;
} skel;

static size_t kv_dim(const bench_kv_shape *s) { return (size_t)s->n_kv_heads * (size_t)s->head_dim; }

static float *k_rows(const skel *c, const skel_seq *q, int layer) {
    return q->mem + (size_t)layer * (size_t)c->shape.max_pos * kv_dim(&c->shape);
}
static float *v_rows(const skel *c, const skel_seq *q, int layer) {
    return q->mem + ((size_t)c->shape.n_layers + (size_t)layer) * (size_t)c->shape.max_pos * kv_dim(&c->shape);
}

static void skel_destroy(void *ctx) {
    skel *c = ctx;
    if (!c) return;
    const bench_allocator *a = c->host ? c->host->alloc : NULL;
    for (int i = 0; c->seqs && i < c->shape.max_seqs; i++) bench_free(a, c->seqs[i].mem, c->seq_bytes);
    free(c->seqs);
    free(c->att);
    free(c);
}

static int skel_create(const bench_kv_shape *shape, const void *opts, const bench_host *host, void **out, char *err,
                       size_t errlen) {
    const skel_opts *o = opts;
    /* the host asks only for cache types the iface declares; f32 is all this one stores */
    if (shape->k_type != BENCH_F32 || shape->v_type != BENCH_F32)
        return bench_errc(err, errlen, BENCH_ERR_REFUSED, "kv skeleton: stores f32 only");
    if (shape->max_seqs > o->max_seqs)
        return bench_errc(err, errlen, BENCH_ERR_REFUSED, "kv skeleton: %d sequences: option max_seqs=%lld allows fewer",
                          shape->max_seqs, (long long)o->max_seqs);
    skel *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv skeleton: out of memory");
    c->shape = *shape;
    c->host = host;
    c->seq_bytes = 2u * (size_t)shape->n_layers * (size_t)shape->max_pos * kv_dim(shape) * sizeof(float);
    c->seqs = calloc((size_t)shape->max_seqs, sizeof(*c->seqs));
    c->att = malloc((size_t)shape->max_pos * sizeof(float));
    if (!c->seqs || !c->att) {
        skel_destroy(c);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv skeleton: out of memory");
    }
    for (int i = 0; i < shape->max_seqs; i++) {
        c->seqs[i].mem = bench_alloc(host ? host->alloc : NULL, c->seq_bytes, 4096);
        if (!c->seqs[i].mem) {
            skel_destroy(c);
            return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv skeleton: cannot allocate %zu bytes", c->seq_bytes);
        }
        /* so that `bench run` counts these pages as the KV cache's in its memory figures */
        bench_name_region(host, c->seqs[i].mem, c->seq_bytes, BENCH_REGION_KV);
        if (o->touch) memset(c->seqs[i].mem, 0, c->seq_bytes);
    }
    *out = c;
    return 0;
}

static int skel_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    skel *c = ctx;
    if (seq < 0 || seq >= c->shape.max_seqs)
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "kv skeleton: sequence %d out of range 0..%d", seq, c->shape.max_seqs - 1);
    if (n_pos > c->shape.max_pos)
        return bench_errc(err, errlen, BENCH_ERR_REFUSED, "kv skeleton: position %d is past the context of %d", n_pos - 1,
                          c->shape.max_pos);
    return 0;
}

static void skel_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    skel *c = ctx;
    skel_seq *q = &c->seqs[seq];
    size_t d = kv_dim(&c->shape);
    memcpy(k_rows(c, q, layer) + (size_t)pos0 * d, k, (size_t)n * d * sizeof(float));
    memcpy(v_rows(c, q, layer) + (size_t)pos0 * d, v, (size_t)n * d * sizeof(float));
    if (pos0 + n > q->used) q->used = pos0 + n;
}

static void skel_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    skel *c = ctx;
    const bench_kv_shape *s = &c->shape;
    const skel_seq *sq = &c->seqs[seq];
    int hd = s->head_dim, group = s->n_heads / s->n_kv_heads;
    size_t d = kv_dim(s), q_dim = (size_t)s->n_heads * (size_t)hd;
    const float *K = k_rows(c, sq, layer), *V = v_rows(c, sq, layer);
    float sqrt_hd = sqrtf((float)hd);
    c->attend_calls++;
    for (int i = 0; i < n; i++) {
        int pos = pos0 + i;
        for (int h = 0; h < s->n_heads; h++) {
            const float *qh = q + (size_t)i * q_dim + (size_t)h * (size_t)hd;
            size_t off = (size_t)(h / group) * (size_t)hd;
            float max = -INFINITY;
            for (int t = 0; t <= pos; t++) {
                float dot = 0.0f;
                for (int j = 0; j < hd; j++) dot += qh[j] * K[(size_t)t * d + off + (size_t)j];
                /* attn_f16 (kv.h): llama.cpp's rounding, for agreement with its logits */
                c->att[t] = s->attn_f16 ? dot * (1.0f / sqrt_hd) : dot / sqrt_hd;
                if (c->att[t] > max) max = c->att[t];
            }
            float sum = 0.0f;
            double sum_d = 0.0;
            for (int t = 0; t <= pos; t++) {
                c->att[t] = expf(c->att[t] - max);
                sum += c->att[t];
                sum_d += c->att[t];
            }
            const float inv = (float)(1.0 / sum_d);
            for (int t = 0; t <= pos; t++)
                c->att[t] = s->attn_f16 ? bench_f16_to_f32(bench_f32_to_f16(c->att[t] * inv)) : c->att[t] / sum;
            float *o = out + (size_t)i * q_dim + (size_t)h * (size_t)hd;
            for (int j = 0; j < hd; j++) {
                float acc = 0.0f;
                for (int t = 0; t <= pos; t++) acc += c->att[t] * V[(size_t)t * d + off + (size_t)j];
                o[j] = acc;
            }
        }
    }
}

static void skel_release(void *ctx, int seq) {
    skel *c = ctx;
    if (seq >= 0 && seq < c->shape.max_seqs) c->seqs[seq].used = 0;
}

/* The typed memory slot: the host reads these, never counters by name. */
static void skel_memory(void *ctx, bench_kv_memory *m) {
    skel *c = ctx;
    uint64_t used = 0, per_pos = 2u * (uint64_t)c->shape.n_layers * kv_dim(&c->shape) * sizeof(float);
    for (int i = 0; i < c->shape.max_seqs; i++) used += (uint64_t)c->seqs[i].used * per_pos;
    m->reserved = (uint64_t)c->shape.max_seqs * c->seq_bytes;
    m->used = used;
    m->cached = 0;
    m->wasted = m->reserved - used;     /* a contiguous cache's unused tail is waste */
}

/* Counters of the module's own choosing: results.json shows them as mod.kv.<name>. */
static void skel_counters(void *ctx, const bench_counter_sink *sink) {
    skel *c = ctx;
    bench_emit_as(sink, "attend_calls", "count", BENCH_CTR_EXACT, BENCH_BETTER_NONE, (double)c->attend_calls);
}

static const struct bench_kv_iface skel_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .cache_types = 1u << BENCH_F32,
    .create = skel_create,
    .reserve = skel_reserve,
    .store = skel_store,
    .attend = skel_attend,
    .release = skel_release,
    .memory = skel_memory,
    .counters = skel_counters,
    .destroy = skel_destroy,
};

static const bench_module skel_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "kv",
    .name = "skeleton",
    .summary = "example out-of-tree module: contiguous f32 cache, scalar reference attention",
    .devices = "cpu",
    .caps = 0,                      /* no shared pool, no prefix sharing, no fork */
    .options = skel_options,
    .opts_size = sizeof(skel_opts),
    .iface = &skel_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &skel_module; }
