/* kv "dynamic" on CUDA: a device cache that grows by `step` positions when full: a
 * bigger cudaMalloc, a device-to-device copy of what it holds, and a cudaFree of the old
 * one (which waits for the device). The copy spikes and the memory staircase that
 * "prealloc" and "vmm" avoid. Position-major (kvc_cuda.h): one copy per growth. */
#include "engines/abi/alloc.h"
#include "engines/cuda/cu_util.h"
#include "engines/cuda/host/kvgrow.h"
#include "engines/cuda/kvc_cuda.h"

typedef struct dynamic_opts {
    int64_t step;
} dynamic_opts;

static const bench_option dynamic_options[] = {
    BENCH_OPTION_INT(dynamic_opts, step, "256", 1, 1 << 24,
                     "positions added at each growth (a context shorter than step grows once, to the context)"),
    BENCH_OPTION_END,
};

typedef struct dseq {
    void *mem;              /* (cap positions of kvcc_pos_bytes) on the device; NULL until reserved */
    int cap, used;          /* positions of room; positions stored */
} dseq;

typedef struct dynamic_ctx {
    kvcc k;                 /* shape, stream, attention work */
    int step;
    dseq *seqs;             /* (max_seqs) */
    uint64_t allocs, grow_events, bytes_copied, bytes_reserved, grow_ns;
} dynamic_ctx;

static void dynamic_destroy(void *ctx);

static int dynamic_create(const bench_kv_shape *shape, const void *opts, const bench_host *host, void **out,
                          char *err, size_t errlen) {
    dynamic_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv dynamic: out of memory");
    if (kvcc_open(&c->k, shape, host, "kv dynamic", err, errlen)) goto fail;
    int64_t step = ((const dynamic_opts *)opts)->step;
    if (step > shape->max_pos) step = shape->max_pos;
    c->step = (int)step;
    c->seqs = calloc((size_t)shape->max_seqs, sizeof(*c->seqs));
    if (!c->seqs) { bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv dynamic: out of memory"); goto fail; }
    *out = c;
    return 0;
fail:
    dynamic_destroy(c);
    return -1;
}

static int dynamic_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    dynamic_ctx *c = ctx;
    if (seq < 0 || seq >= c->k.shape.max_seqs) return bench_errf(err, errlen, "kv dynamic: sequence %d out of range", seq);
    if (n_pos > c->k.shape.max_pos)
        return bench_errf(err, errlen, "kv dynamic: position %d is past the context of %d", n_pos - 1, c->k.shape.max_pos);
    dseq *q = &c->seqs[seq];
    if (n_pos <= q->cap) return 0;
    uint64_t t0 = cu_now_ns();
    int cap = kvg_dynamic_cap(n_pos, c->step, c->k.shape.max_pos);
    size_t pb = kvcc_pos_bytes(&c->k.shape), bytes = (size_t)cap * pb;
    void *mem = NULL;
    CU_TRY(cudaMalloc((void **)&mem, bytes), "kv dynamic: cudaMalloc");
    c->allocs++;
    if (q->mem) {
        size_t live = (size_t)q->used * pb;
        cudaError_t e = live ? cudaMemcpyAsync(mem, q->mem, live, cudaMemcpyDeviceToDevice, (cudaStream_t)c->k.stream)
                             : cudaSuccess;
        if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)c->k.stream);
        if (e != cudaSuccess) {
            cudaFree(mem);
            return cu_fail(err, errlen, "kv dynamic: growth copy", e);
        }
        cudaFree(q->mem);
        c->bytes_copied += live;
        c->grow_events++;
        c->bytes_reserved -= (uint64_t)q->cap * pb;
    }
    q->mem = mem;
    q->cap = cap;
    c->bytes_reserved += bytes;
    c->grow_ns += cu_now_ns() - t0;
    return 0;
}

static void dynamic_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    dynamic_ctx *c = ctx;
    kvcc_store(&c->k, c->seqs[seq].mem, layer, pos0, n, k, v);
    if (pos0 + n > c->seqs[seq].used) c->seqs[seq].used = pos0 + n;
}

static void dynamic_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    dynamic_ctx *c = ctx;
    kvcc_attend(&c->k, c->seqs[seq].mem, layer, pos0, n, q, out);
}

static void dynamic_release(void *ctx, int seq) {
    dynamic_ctx *c = ctx;
    if (seq < 0 || seq >= c->k.shape.max_seqs) return;
    dseq *q = &c->seqs[seq];
    if (q->mem) {
        cudaStreamSynchronize((cudaStream_t)c->k.stream); /* no queued kernel may still read it */
        cudaFree(q->mem);
        c->bytes_reserved -= (uint64_t)q->cap * kvcc_pos_bytes(&c->k.shape);
    }
    *q = (dseq){0};
}

static void dynamic_memory(void *ctx, bench_kv_memory *m) {
    dynamic_ctx *c = ctx;
    uint64_t used = 0;
    for (int i = 0; i < c->k.shape.max_seqs; i++) used += (uint64_t)c->seqs[i].used * kvcc_pos_bytes(&c->k.shape);
    *m = (bench_kv_memory){.reserved = c->bytes_reserved, .used = used, .cached = 0, .wasted = c->bytes_reserved - used};
}

static void dynamic_counters(void *ctx, const bench_counter_sink *s) {
    dynamic_ctx *c = ctx;
    uint64_t used = 0;
    for (int i = 0; i < c->k.shape.max_seqs; i++) used += (uint64_t)c->seqs[i].used * kvcc_pos_bytes(&c->k.shape);
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->allocs);
    bench_emit_as(s, "grow_events", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->grow_events);
    bench_emit(s, "bytes_copied", "B", (double)c->bytes_copied);
    bench_emit(s, "bytes_reserved", "B", (double)c->bytes_reserved);
    bench_emit(s, "bytes_used", "B", (double)used);
    bench_emit(s, "grow_ms", "ms", (double)c->grow_ns * 1e-6);
}

static void dynamic_destroy(void *ctx) {
    dynamic_ctx *c = ctx;
    if (!c) return;
    for (int i = 0; c->seqs && i < c->k.shape.max_seqs; i++) dynamic_release(c, i);
    kvcc_close(&c->k);
    free(c->seqs);
    free(c);
}

static const struct bench_kv_iface dynamic_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .cache_types = KVC_CUDA_TYPES,
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
    .summary = "device cache grown by `step` positions: a bigger cudaMalloc and a device copy each time",
    .devices = "cuda",
    .options = dynamic_options,
    .opts_size = sizeof(dynamic_opts),
    .score = cu_score,
    .iface = &dynamic_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &dynamic_module; }
