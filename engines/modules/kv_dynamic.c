/* kv "dynamic": a contiguous cache that grows by `step` positions when full,
 * copying what it holds into the bigger buffer (as mlx-lm grows by 256). Each
 * growth is an allocation, a copy and fresh pages to fault in during decode:
 * the RSS staircase and the TPOT spikes that prealloc avoids. */
#include "common/kv_contig.h"
#include "engines/abi/alloc.h"

typedef struct dynamic_opts {
    int64_t step;
} dynamic_opts;

static const bench_option dynamic_options[] = {
    BENCH_OPTION_INT(dynamic_opts, step, "256", 1, 1 << 24,
                     "positions added at each growth (a context shorter than step grows once, to the context)"),
    BENCH_OPTION_END,
};

typedef struct dynamic_ctx {
    bench_kv_shape shape;
    const bench_host *host;
    int step;
    kvc_seq *seqs;          /* (max_seqs) */
    float *scratch;         /* (n_threads, kvq_scores_per_task) attention scores */
    size_t scratch_bytes;
    uint64_t allocs, grow_events, bytes_copied, bytes_reserved;
} dynamic_ctx;

static void dynamic_destroy(void *ctx);

static int dynamic_create(const bench_kv_shape *shape, const void *opts, const bench_host *host,
                          void **out, char *err, size_t errlen) {
    const dynamic_opts *o = opts;
    int rc = kvq_check_shape(shape, KVQ_CPU_TYPES, "kv dynamic", err, errlen);
    if (rc) return rc;
    dynamic_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv dynamic: out of memory");
    c->shape = *shape;
    c->host = host;
    /* a step past the context is a cache that grows once: the whole context, as prealloc
     * but at first use (the default 256 on a context of 128 must not be an error) */
    c->step = o->step > shape->max_pos ? shape->max_pos : (int)o->step;
    c->seqs = calloc((size_t)shape->max_seqs, sizeof(*c->seqs));
    int tasks = host && host->n_threads > 0 ? host->n_threads : 1;
    c->scratch_bytes = (size_t)tasks * kvq_scores_per_task(shape) * sizeof(float);
    c->scratch = bench_alloc(host ? host->alloc : NULL, c->scratch_bytes, 64);
    if (!c->seqs || !c->scratch) {
        dynamic_destroy(c);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv dynamic: out of memory");
    }
    *out = c;
    return 0;
}

static int dynamic_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    dynamic_ctx *c = ctx;
    const bench_kv_shape *s = &c->shape;
    if (seq < 0 || seq >= s->max_seqs) return bench_errf(err, errlen, "kv dynamic: sequence %d out of range", seq);
    if (n_pos > s->max_pos)
        return bench_errf(err, errlen, "kv dynamic: position %d is past the context of %d", n_pos - 1, s->max_pos);
    kvc_seq *q = &c->seqs[seq];
    if (n_pos <= q->cap) return 0;
    int cap = (n_pos + c->step - 1) / c->step * c->step;
    if (cap > s->max_pos) cap = s->max_pos;
    kvc_seq nq = {.bytes = kvc_bytes(s, cap), .cap = cap, .used = q->used};
    const bench_allocator *a = c->host ? c->host->alloc : NULL;
    nq.mem = bench_alloc(a, nq.bytes, 4096);
    if (!nq.mem) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv dynamic: cannot grow to %zu bytes", nq.bytes);
    c->allocs++;
    bench_name_region(c->host, nq.mem, nq.bytes, BENCH_REGION_KV);
    if (q->mem) {
        size_t live_k = (size_t)q->used * kvc_k_row(s), live_v = (size_t)q->used * kvc_v_row(s);
        for (int l = 0; l < s->n_layers; l++) {
            memcpy(kvc_k(s, &nq, l), kvc_k(s, q, l), live_k);
            memcpy(kvc_v(s, &nq, l), kvc_v(s, q, l), live_v);
        }
        c->bytes_copied += (uint64_t)s->n_layers * (live_k + live_v);
        c->grow_events++;
        bench_free(a, q->mem, q->bytes);
        c->bytes_reserved -= q->bytes;
    }
    c->bytes_reserved += nq.bytes;
    *q = nq;
    return 0;
}

static void dynamic_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    dynamic_ctx *c = ctx;
    kvc_store(&c->shape, &c->seqs[seq], layer, pos0, n, k, v);
}

static void dynamic_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    dynamic_ctx *c = ctx;
    const kvc_seq *s = &c->seqs[seq];
    kvc_attend(&c->shape, c->host, kvc_k(&c->shape, s, layer), kvc_v(&c->shape, s, layer), pos0, n, q, out, c->scratch);
}

static void dynamic_release(void *ctx, int seq) {
    dynamic_ctx *c = ctx;
    kvc_seq *q = &c->seqs[seq];
    if (q->mem) {
        bench_free(c->host ? c->host->alloc : NULL, q->mem, q->bytes);
        c->bytes_reserved -= q->bytes;
    }
    memset(q, 0, sizeof(*q));
}

static void dynamic_memory(void *ctx, bench_kv_memory *m) {
    dynamic_ctx *c = ctx;
    m->reserved = c->bytes_reserved;
    m->used = kvc_used_bytes(&c->shape, c->seqs, c->shape.max_seqs);
    m->cached = 0;
    m->wasted = m->reserved - m->used;  /* the room grown but not yet written */
}

static void dynamic_counters(void *ctx, const bench_counter_sink *s) {
    dynamic_ctx *c = ctx;
    uint64_t used = kvc_used_bytes(&c->shape, c->seqs, c->shape.max_seqs);
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->allocs);
    bench_emit_as(s, "grow_events", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->grow_events);
    bench_emit(s, "bytes_copied", "B", (double)c->bytes_copied);
    bench_emit(s, "bytes_reserved", "B", (double)c->bytes_reserved);
    bench_emit(s, "bytes_used", "B", (double)used);
}

static void dynamic_destroy(void *ctx) {
    dynamic_ctx *c = ctx;
    if (!c) return;
    if (c->seqs)
        for (int i = 0; i < c->shape.max_seqs; i++) dynamic_release(c, i);
    bench_free(c->host ? c->host->alloc : NULL, c->scratch, c->scratch_bytes);
    free(c->seqs);
    free(c);
}

static const struct bench_kv_iface dynamic_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .cache_types = KVQ_CPU_TYPES,
    .create = dynamic_create,
    .reserve = dynamic_reserve,
    .store = dynamic_store,
    .attend = dynamic_attend,
    .release = dynamic_release,
    .memory = dynamic_memory,
    .counters = dynamic_counters,
    .destroy = dynamic_destroy,
};

static const bench_module dynamic_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "kv",
    .name = "dynamic",
    .summary = "contiguous cache grown by `step` positions with a copy (mlx-lm style)",
    .devices = "cpu",
    .options = dynamic_options,
    .opts_size = sizeof(dynamic_opts),
    .iface = &dynamic_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &dynamic_module; }
