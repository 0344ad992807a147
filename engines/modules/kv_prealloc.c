/* kv "prealloc": every sequence's cache is allocated for the whole context and
 * touched once when the engine is created (what vLLM does at start-up), so the
 * cost lands in load time, prefill and decode never allocate or fault, and RSS
 * stays flat. A released sequence keeps its memory for the next one. */
#include "common/kv_contig.h"
#include "engines/abi/alloc.h"

typedef struct prealloc_opts {
    int touch;
} prealloc_opts;

static const bench_option prealloc_options[] = {
    BENCH_OPTION_BOOL(prealloc_opts, touch, "1", "write every page at start-up (0: leave first-touch faults to prefill and decode)"),
    BENCH_OPTION_END,
};

typedef struct prealloc_ctx {
    bench_kv_shape shape;
    const bench_host *host;
    int touch;
    kvc_seq *seqs;          /* (max_seqs) */
    float *scratch;         /* (n_threads, kvq_scores_per_task) attention scores */
    size_t scratch_bytes;
    uint64_t allocs, bytes_reserved, bytes_touched;
} prealloc_ctx;

static void prealloc_destroy(void *ctx);
static int seq_alloc(prealloc_ctx *c, kvc_seq *q, char *err, size_t errlen);

static int prealloc_create(const bench_kv_shape *shape, const void *opts, const bench_host *host,
                           void **out, char *err, size_t errlen) {
    const prealloc_opts *o = opts;
    int rc = kvq_check_shape(shape, KVQ_CPU_TYPES, "kv prealloc", err, errlen);
    if (rc) return rc;
    prealloc_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv prealloc: out of memory");
    c->shape = *shape;
    c->host = host;
    c->touch = o->touch;
    rc = -BENCH_ERR_NOMEM;
    c->seqs = calloc((size_t)shape->max_seqs, sizeof(*c->seqs));
    int tasks = host && host->n_threads > 0 ? host->n_threads : 1;
    c->scratch_bytes = (size_t)tasks * kvq_scores_per_task(shape) * sizeof(float);
    c->scratch = bench_alloc(host ? host->alloc : NULL, c->scratch_bytes, 64);
    if (!c->seqs || !c->scratch) { bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv prealloc: out of memory"); goto err; }
    for (int i = 0; i < shape->max_seqs; i++)
        if ((rc = seq_alloc(c, &c->seqs[i], err, errlen))) goto err;
    *out = c;
    return 0;
err:
    prealloc_destroy(c);
    return rc;
}

static int seq_alloc(prealloc_ctx *c, kvc_seq *q, char *err, size_t errlen) {
    q->bytes = kvc_bytes(&c->shape, c->shape.max_pos);
    q->mem = bench_alloc(c->host ? c->host->alloc : NULL, q->bytes, 4096);
    if (!q->mem) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv prealloc: cannot allocate %zu bytes", q->bytes);
    q->cap = c->shape.max_pos;
    c->allocs++;
    c->bytes_reserved += q->bytes;
    bench_name_region(c->host, q->mem, q->bytes, BENCH_REGION_KV);
    if (c->touch) {
        memset(q->mem, 0, q->bytes);
        c->bytes_touched += q->bytes;
    }
    return 0;
}

static int prealloc_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    prealloc_ctx *c = ctx;
    if (seq < 0 || seq >= c->shape.max_seqs) return bench_errf(err, errlen, "kv prealloc: sequence %d out of range", seq);
    if (n_pos > c->shape.max_pos)
        return bench_errf(err, errlen, "kv prealloc: position %d is past the context of %d", n_pos - 1, c->shape.max_pos);
    return 0;
}

static void prealloc_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    prealloc_ctx *c = ctx;
    kvc_store(&c->shape, &c->seqs[seq], layer, pos0, n, k, v);
}

static void prealloc_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    prealloc_ctx *c = ctx;
    const kvc_seq *s = &c->seqs[seq];
    kvc_attend(&c->shape, c->host, kvc_k(&c->shape, s, layer), kvc_v(&c->shape, s, layer), pos0, n, q, out, c->scratch);
}

static void prealloc_release(void *ctx, int seq) {
    prealloc_ctx *c = ctx;
    if (seq >= 0 && seq < c->shape.max_seqs) c->seqs[seq].used = 0;
}

static void prealloc_memory(void *ctx, bench_kv_memory *m) {
    prealloc_ctx *c = ctx;
    m->reserved = c->bytes_reserved;
    m->used = kvc_used_bytes(&c->shape, c->seqs, c->shape.max_seqs);
    m->cached = 0;
    m->wasted = m->reserved - m->used;  /* each sequence's tail past its last position */
}

static void prealloc_counters(void *ctx, const bench_counter_sink *s) {
    prealloc_ctx *c = ctx;
    bench_kv_memory m;
    prealloc_memory(c, &m);
    uint64_t used = m.used;
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->allocs);
    bench_emit_as(s, "grow_events", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, 0);
    bench_emit(s, "bytes_copied", "B", 0);
    bench_emit(s, "bytes_reserved", "B", (double)c->bytes_reserved);
    bench_emit(s, "bytes_used", "B", (double)used);
    bench_emit(s, "bytes_touched", "B", (double)c->bytes_touched);
}

static void prealloc_destroy(void *ctx) {
    prealloc_ctx *c = ctx;
    if (!c) return;
    for (int i = 0; c->seqs && i < c->shape.max_seqs; i++)
        if (c->seqs[i].mem) bench_free(c->host ? c->host->alloc : NULL, c->seqs[i].mem, c->seqs[i].bytes);
    bench_free(c->host ? c->host->alloc : NULL, c->scratch, c->scratch_bytes);
    free(c->seqs);
    free(c);
}

static const struct bench_kv_iface prealloc_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .cache_types = KVQ_CPU_TYPES,
    .create = prealloc_create,
    .reserve = prealloc_reserve,
    .store = prealloc_store,
    .attend = prealloc_attend,
    .release = prealloc_release,
    .memory = prealloc_memory,
    .counters = prealloc_counters,
    .destroy = prealloc_destroy,
};

static const bench_module prealloc_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "kv",
    .name = "prealloc",
    .summary = "contiguous cache allocated and touched once for the whole context",
    .devices = "cpu",
    .options = prealloc_options,
    .opts_size = sizeof(prealloc_opts),
    .iface = &prealloc_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &prealloc_module; }
