/* kv "prealloc" on CUDA: each sequence's cache is one cudaMalloc for the whole context,
 * written once (cudaMemset) when the engine is created, so prefill and decode never
 * allocate: flat device memory and no growth spikes. Position-major (kvc_cuda.h). */
#include "engines/abi/alloc.h"
#include "engines/cuda/cu_util.h"
#include "engines/cuda/kvc_cuda.h"

typedef struct prealloc_opts {
    int touch;
} prealloc_opts;

static const bench_option prealloc_options[] = {
    BENCH_OPTION_BOOL(prealloc_opts, touch, "1", "cudaMemset every byte at start-up"),
    BENCH_OPTION_END,
};

typedef struct pseq {
    void *mem;              /* (max_pos positions of kvcc_pos_bytes) on the device */
    int used;               /* positions stored (high-water mark) */
} pseq;

typedef struct prealloc_ctx {
    kvcc k;                 /* shape, stream, attention work */
    pseq *seqs;             /* (max_seqs) */
    size_t seq_bytes;
    int touch;
    uint64_t allocs, bytes_reserved, bytes_touched;
} prealloc_ctx;

static void prealloc_destroy(void *ctx);

static int prealloc_create(const bench_kv_shape *shape, const void *opts, const bench_host *host, void **out,
                           char *err, size_t errlen) {
    prealloc_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv prealloc: out of memory");
    if (kvcc_open(&c->k, shape, host, "kv prealloc", err, errlen)) goto fail;
    c->touch = ((const prealloc_opts *)opts)->touch;
    c->seqs = calloc((size_t)shape->max_seqs, sizeof(*c->seqs));
    if (!c->seqs) { bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv prealloc: out of memory"); goto fail; }
    c->seq_bytes = kvcc_pos_bytes(shape) * (size_t)shape->max_pos;
    for (int i = 0; i < shape->max_seqs; i++) {
        cudaError_t e = cudaMalloc((void **)&c->seqs[i].mem, c->seq_bytes);
        if (e != cudaSuccess) { cu_fail(err, errlen, "kv prealloc: cudaMalloc", e); goto fail; }
        c->allocs++;
        c->bytes_reserved += c->seq_bytes;
        if (c->touch) {
            if ((e = cudaMemsetAsync(c->seqs[i].mem, 0, c->seq_bytes, (cudaStream_t)c->k.stream)) != cudaSuccess) {
                cu_fail(err, errlen, "kv prealloc: cudaMemset", e);
                goto fail;
            }
            c->bytes_touched += c->seq_bytes;
        }
    }
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)c->k.stream);
    if (e != cudaSuccess) { cu_fail(err, errlen, "kv prealloc: start-up", e); goto fail; }
    *out = c;
    return 0;
fail:
    prealloc_destroy(c);
    return -1;
}

static int prealloc_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    prealloc_ctx *c = ctx;
    if (seq < 0 || seq >= c->k.shape.max_seqs) return bench_errf(err, errlen, "kv prealloc: sequence %d out of range", seq);
    if (n_pos > c->k.shape.max_pos)
        return bench_errf(err, errlen, "kv prealloc: position %d is past the context of %d", n_pos - 1, c->k.shape.max_pos);
    return 0;
}

static void prealloc_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    prealloc_ctx *c = ctx;
    kvcc_store(&c->k, c->seqs[seq].mem, layer, pos0, n, k, v);
    if (pos0 + n > c->seqs[seq].used) c->seqs[seq].used = pos0 + n;
}

static void prealloc_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    prealloc_ctx *c = ctx;
    kvcc_attend(&c->k, c->seqs[seq].mem, layer, pos0, n, q, out);
}

static void prealloc_release(void *ctx, int seq) {
    prealloc_ctx *c = ctx;
    if (seq >= 0 && seq < c->k.shape.max_seqs) c->seqs[seq].used = 0;
}

static void prealloc_memory(void *ctx, bench_kv_memory *m) {
    prealloc_ctx *c = ctx;
    uint64_t used = 0;
    for (int i = 0; i < c->k.shape.max_seqs; i++) used += (uint64_t)c->seqs[i].used * kvcc_pos_bytes(&c->k.shape);
    *m = (bench_kv_memory){.reserved = c->bytes_reserved, .used = used, .cached = 0, .wasted = c->bytes_reserved - used};
}

static void prealloc_counters(void *ctx, const bench_counter_sink *s) {
    prealloc_ctx *c = ctx;
    uint64_t used = 0;
    for (int i = 0; i < c->k.shape.max_seqs; i++) used += (uint64_t)c->seqs[i].used * kvcc_pos_bytes(&c->k.shape);
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
    if (c->k.stream) cudaStreamSynchronize((cudaStream_t)c->k.stream);
    for (int i = 0; c->seqs && i < c->k.shape.max_seqs; i++) cudaFree(c->seqs[i].mem);
    kvcc_close(&c->k);
    free(c->seqs);
    free(c);
}

static const struct bench_kv_iface prealloc_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .cache_types = KVC_CUDA_TYPES,
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
    .summary = "device cache: one cudaMalloc per sequence for the whole context, written once at start-up",
    .devices = "cuda",
    .options = prealloc_options,
    .opts_size = sizeof(prealloc_opts),
    .score = cu_score,
    .iface = &prealloc_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &prealloc_module; }
