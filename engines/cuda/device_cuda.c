/* device "cuda": the Llama forward pass on an NVIDIA GPU (docs/cuda.md).
 *
 * One stream carries everything, in order: the token upload, the kernels, the KV
 * module's stores and attention (it queues on the same stream, bench_host.stream) and
 * the logits download; a pass synchronises once, at its end.
 * Products: one-token passes (decode) through the GEMV kernels of kernels.cu, q/k/v in
 * one launch and gate/up fused with SwiGLU, unless gemv=0; longer passes (prefill)
 * through cuBLAS: cublasSgemm for f32 weights, cublasGemmEx with 16-bit inputs and f32
 * accumulation for f16/bf16. The residual adds ride on the products (beta = 1).
 * Scratch: one block per pass (host/scratch.h), from a stream-ordered pool, an arena
 * region or cudaMalloc.
 * Measurements: CUDA events around each pass (TTFT, TPOT as the GPU sees them), around
 * each kernel group in every profile-th decode pass (time shares: weights, attention,
 * other), and cudaMemGetInfo after each pass (the memory timeline).
 */
#include <cublas_v2.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "engines/abi/device.h"
#include "engines/cuda/cu_util.h"
#include "engines/cuda/host/scratch.h"
#include "engines/cuda/kernels.h"

typedef struct dc_opts {
    int64_t gpu, profile;
    int scratch;
    uint64_t release_threshold;
    int gemv, bandwidth;
} dc_opts;

static const bench_option dc_options[] = {
    BENCH_OPTION_INT(dc_opts, gpu, "0", 0, 1023, "CUDA device index"),
    BENCH_OPTION_ENUM(dc_opts, scratch, "pool", "pool|arena|malloc",
                      "activations of a pass: stream-ordered pool (cudaMallocAsync), one cudaMalloc region grown to the largest pass, or cudaMalloc/cudaFree each pass"),
    BENCH_OPTION_SIZE(dc_opts, release_threshold, "256m", 0, 1ll << 46, "pool: bytes the pool keeps at a synchronisation (0: every pass's memory goes back)"),
    BENCH_OPTION_BOOL(dc_opts, gemv, "1", "one-token passes through bench's GEMV kernels (0: cuBLAS for every product)"),
    BENCH_OPTION_INT(dc_opts, profile, "32", 0, 1000000, "time the kernel groups of every Nth decode pass (left out of the TPOT events); 0: never"),
    BENCH_OPTION_BOOL(dc_opts, bandwidth, "0", "with the counters, measure a triad on the GPU and report decode speed against the bound it sets"),
    BENCH_OPTION_END,
};

enum { DC_POOL, DC_ARENA, DC_MALLOC };
enum { CAT_WEIGHTS, CAT_ATTN, CAT_OTHER, CAT_COUNT };
#define DC_TL_POINTS 16             /* memory timeline samples reported */
#define DC_BW_DEFAULT (256u << 20)  /* B per triad array: well past the L2 (50 MB on an H100) */

typedef struct dc_mem_sample {
    int pos;                /* positions held after the pass */
    uint64_t used;          /* B of device memory in use */
} dc_mem_sample;

typedef struct dc_ctx {
    int gpu, scratch, use_gemv, profile_every, measure_bw;
    uint64_t release_threshold;
    cudaStream_t stream;
    cublasHandle_t blas;
    int blas_ok;
    /* the model, bound */
    bench_dev_model m;
    bench_dev_layer *layers;        /* (n_layers) copy of bind's array */
    dsl_shape shape;
    int bound;
    uint64_t token_bytes;           /* B of weights a one-token pass reads: every matrix, one embedding row */
    /* scratch */
    void *arena;                    /* DC_ARENA: one region, grown to the largest pass */
    size_t arena_bytes;
    uint64_t scratch_peak, scratch_allocs, scratch_alloc_ns;
    /* buffers kept across passes */
    float *d_logits;                /* (logits_rows, vocab) the last pass's logits */
    int logits_rows, last_out;      /* capacity; rows the last pass wrote (0: none yet) */
    float *d_probs;                 /* (vocab) the sampler's */
    int *d_token;                   /* (1) the sampler's draw */
    int *h_tokens;                  /* pinned (max_pos) token upload */
    float *h_logits;                /* pinned (vocab) one row of logits */
    int *h_token;                   /* pinned (1) */
    /* events */
    cudaEvent_t ev_start, ev_end;
    cudaEvent_t *marks;             /* (cap_marks) a profiled pass's group boundaries */
    int *mark_cat;                  /* (cap_marks) the group that starts at each mark */
    int n_marks, cap_marks, profiling;
    /* measurements */
    uint64_t mem_total, mem_start, mem_load, mem_prefill, mem_peak;
    int have_prefill;
    dc_mem_sample *tl;              /* (cap_tl) one sample per pass */
    int n_tl, cap_tl;
    double ttft_ms, prefill_ms;
    double *decode_ms;              /* (cap_decode) event time of each unprofiled decode pass */
    int n_decode, cap_decode, decode_passes, profiled, passes;
    double share_ms[CAT_COUNT];
    int sm_count, cc_major, cc_minor;
} dc_ctx;

#define DC_CU(call, what)                                         \
    do {                                                          \
        cudaError_t e_ = (call);                                  \
        if (e_ != cudaSuccess) { cu_fail(err, errlen, what, e_); goto fail; } \
    } while (0)
#define DC_K(call, what)                                          \
    do {                                                          \
        int e_ = (call);                                          \
        if (e_) { cu_fail(err, errlen, what, (cudaError_t)e_); goto fail; } \
    } while (0)

static int blas_fail(char *err, size_t errlen, const char *what, cublasStatus_t s) {
    return bench_errf(err, errlen, "%s: %s", what, cublasGetStatusString(s));
}

static void dc_destroy(void *ctx);

/* ---- create, bind ---- */

static int dc_probe(char *err, size_t errlen) { return cu_probe(err, errlen); }

static int dc_create(const void *opts, void **out, void **stream, char *err, size_t errlen) {
    *out = NULL;
    if (!cu_probe(err, errlen)) return -1;
    dc_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "device cuda: out of memory");
    const dc_opts *o = opts;
    uint64_t gpu = (uint64_t)o->gpu;
    c->release_threshold = o->release_threshold;
    c->use_gemv = o->gemv;
    c->measure_bw = o->bandwidth;
    c->scratch = o->scratch == 1 ? DC_ARENA : o->scratch == 2 ? DC_MALLOC : DC_POOL;
    c->profile_every = (int)o->profile;
    int count = 0;
    DC_CU(cudaGetDeviceCount(&count), "device cuda: cudaGetDeviceCount");
    if (gpu >= (uint64_t)count) {
        bench_errf(err, errlen, "device cuda: option gpu=%llu: this machine has %d GPU%s (0..%d)", (unsigned long long)gpu,
                   count, count == 1 ? "" : "s", count - 1);
        goto fail;
    }
    c->gpu = (int)gpu;
    DC_CU(cudaSetDevice(c->gpu), "device cuda: cudaSetDevice");
    DC_CU(cudaFree(NULL), "device cuda: creating the context"); /* so that mem_start counts it */
    size_t free_b = 0, total_b = 0;
    DC_CU(cudaMemGetInfo(&free_b, &total_b), "device cuda: cudaMemGetInfo");
    c->mem_total = total_b;
    c->mem_start = c->mem_peak = total_b - free_b;
    DC_CU(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, c->gpu), "device cuda: SM count");
    DC_CU(cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, c->gpu), "device cuda: capability");
    DC_CU(cudaDeviceGetAttribute(&c->cc_minor, cudaDevAttrComputeCapabilityMinor, c->gpu), "device cuda: capability");
    DC_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "device cuda: cudaStreamCreate");
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) { blas_fail(err, errlen, "device cuda: cublasCreate", bs); goto fail; }
    c->blas_ok = 1;
    if ((bs = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS) {
        blas_fail(err, errlen, "device cuda: cublasSetStream", bs);
        goto fail;
    }
    if (c->scratch == DC_POOL) {
        cudaMemPool_t pool;
        DC_CU(cudaDeviceGetDefaultMemPool(&pool, c->gpu), "device cuda: cudaDeviceGetDefaultMemPool");
        DC_CU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &c->release_threshold),
              "device cuda: the pool's release threshold");
    }
    DC_CU(cudaEventCreate(&c->ev_start), "device cuda: cudaEventCreate");
    DC_CU(cudaEventCreate(&c->ev_end), "device cuda: cudaEventCreate");
    DC_CU(cudaMalloc((void **)&c->d_token, sizeof(int)), "device cuda: cudaMalloc");
    DC_CU(cudaHostAlloc((void **)&c->h_token, sizeof(int), cudaHostAllocDefault), "device cuda: cudaHostAlloc");
    *stream = c->stream;
    *out = c;
    return 0;
fail:
    dc_destroy(c);
    return -1;
}

/* A layer's matrices: where each is in bench_dev_layer, its name in messages and its shape in
 * the model's sizes. The check at bind and the bytes a token reads both walk this one list. */
enum { DC_DIM, DC_KV, DC_HIDDEN };
static const struct {
    const char *name;
    size_t off;
    int rows, cols;
} dc_layer_mats[] = {
    {"attn_q", offsetof(bench_dev_layer, wq), DC_DIM, DC_DIM},         {"attn_k", offsetof(bench_dev_layer, wk), DC_KV, DC_DIM},
    {"attn_v", offsetof(bench_dev_layer, wv), DC_KV, DC_DIM},          {"attn_output", offsetof(bench_dev_layer, wo), DC_DIM, DC_DIM},
    {"ffn_gate", offsetof(bench_dev_layer, w1), DC_HIDDEN, DC_DIM},    {"ffn_up", offsetof(bench_dev_layer, w3), DC_HIDDEN, DC_DIM},
    {"ffn_down", offsetof(bench_dev_layer, w2), DC_DIM, DC_HIDDEN},
};
#define DC_N_LAYER_MATS (sizeof(dc_layer_mats) / sizeof(dc_layer_mats[0]))

static const bench_dev_matrix *dc_layer_mat(const bench_dev_layer *L, size_t i) {
    return (const bench_dev_matrix *)((const char *)L + dc_layer_mats[i].off);
}

static int dc_size(const bench_dev_model *m, int kv_dim, int which) {
    return which == DC_KV ? kv_dim : which == DC_HIDDEN ? m->hidden_dim : m->dim;
}

static int check_matrix(const bench_dev_matrix *w, const char *what, int layer, int rows, int cols, char *err,
                        size_t errlen) {
    if (!w->data || w->rows != rows || w->cols != cols)
        return bench_errf(err, errlen, "device cuda: %s of layer %d is (%d, %d), expected (%d, %d)", what, layer, w->rows,
                          w->cols, rows, cols);
    if ((unsigned)w->dtype >= BENCH_DTYPE_COUNT)
        return bench_errf(err, errlen, "device cuda: %s of layer %d has an unknown dtype %d", what, layer, (int)w->dtype);
    return 0;
}

static int dc_bind(void *ctx, const bench_dev_model *m, char *err, size_t errlen) {
    dc_ctx *c = ctx;
    if (c->bound) return bench_errf(err, errlen, "device cuda: bound twice");
    if (m->n_heads < 1 || m->n_kv_heads < 1 || m->dim % m->n_heads || m->n_heads % m->n_kv_heads || (m->dim / m->n_heads) % 2)
        return bench_errf(err, errlen, "device cuda: %d heads, %d KV heads of dim %d: expected even head dims and whole groups",
                          m->n_heads, m->n_kv_heads, m->dim);
    int hd = m->dim / m->n_heads, kv_dim = m->n_kv_heads * hd;
    if (check_matrix(&m->tok_embd, "token_embd", -1, m->vocab_size, m->dim, err, errlen) ||
        check_matrix(&m->output, "output", -1, m->vocab_size, m->dim, err, errlen))
        return -1;
    for (int l = 0; l < m->n_layers; l++) {
        const bench_dev_layer *L = &m->layers[l];
        for (size_t i = 0; i < DC_N_LAYER_MATS; i++)
            if (check_matrix(dc_layer_mat(L, i), dc_layer_mats[i].name, l, dc_size(m, kv_dim, dc_layer_mats[i].rows),
                             dc_size(m, kv_dim, dc_layer_mats[i].cols), err, errlen))
                return -1;
        if (!L->attn_norm || !L->ffn_norm) return bench_errf(err, errlen, "device cuda: layer %d has no norm weights", l);
    }
    c->m = *m;
    c->token_bytes = (uint64_t)bench_dtype_row_bytes(m->output.dtype, m->dim) * (uint64_t)m->vocab_size +
                     bench_dtype_row_bytes(m->tok_embd.dtype, m->dim);
    for (int l = 0; l < m->n_layers; l++)
        for (size_t i = 0; i < DC_N_LAYER_MATS; i++) {
            const bench_dev_matrix *w = dc_layer_mat(&m->layers[l], i);
            c->token_bytes += (uint64_t)bench_dtype_row_bytes(w->dtype, w->cols) * (uint64_t)w->rows;
        }
    c->layers = malloc((size_t)m->n_layers * sizeof(*c->layers));
    if (!c->layers) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "device cuda: out of memory");
    memcpy(c->layers, m->layers, (size_t)m->n_layers * sizeof(*c->layers));
    c->m.layers = c->layers;
    c->shape = (dsl_shape){.dim = m->dim, .hidden = m->hidden_dim, .kv_dim = kv_dim, .vocab = m->vocab_size};
    size_t vocab = (size_t)m->vocab_size;
    CU_TRY(cudaMalloc((void **)&c->d_logits, vocab * sizeof(float)), "device cuda: cudaMalloc (logits)");
    c->logits_rows = 1;
    CU_TRY(cudaMalloc((void **)&c->d_probs, vocab * sizeof(float)), "device cuda: cudaMalloc (sampler)");
    CU_TRY(cudaHostAlloc((void **)&c->h_logits, vocab * sizeof(float), cudaHostAllocDefault), "device cuda: cudaHostAlloc");
    CU_TRY(cudaHostAlloc((void **)&c->h_tokens, (size_t)(m->max_pos > 0 ? m->max_pos : 1) * sizeof(int), cudaHostAllocDefault),
           "device cuda: cudaHostAlloc");
    /* a profiled pass marks at most 9 group changes a layer, plus embedding and classifier */
    c->cap_marks = 10 * m->n_layers + 8;
    c->marks = calloc((size_t)c->cap_marks, sizeof(*c->marks));
    c->mark_cat = calloc((size_t)c->cap_marks, sizeof(*c->mark_cat));
    if (!c->marks || !c->mark_cat) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "device cuda: out of memory");
    for (int i = 0; i < c->cap_marks; i++) CU_TRY(cudaEventCreate(&c->marks[i]), "device cuda: cudaEventCreate");
    c->mem_load = cu_mem_used();
    if (c->mem_load > c->mem_peak) c->mem_peak = c->mem_load;
    c->bound = 1;
    return 0;
}

/* ---- scratch ---- */

static int scratch_get(dc_ctx *c, size_t bytes, void **out, char *err, size_t errlen) {
    uint64_t t0 = cu_now_ns();
    *out = NULL;
    switch (c->scratch) {
    case DC_POOL:
        CU_TRY(cudaMallocAsync(out, bytes, c->stream), "device cuda: cudaMallocAsync (scratch)");
        c->scratch_allocs++;
        break;
    case DC_ARENA:
        if (bytes > c->arena_bytes) {
            if (c->arena) CU_TRY(cudaFree(c->arena), "device cuda: cudaFree (scratch arena)");
            c->arena = NULL;
            c->arena_bytes = 0;
            CU_TRY(cudaMalloc(&c->arena, bytes), "device cuda: cudaMalloc (scratch arena)");
            c->arena_bytes = bytes;
            c->scratch_allocs++;
        }
        *out = c->arena;
        break;
    default:
        CU_TRY(cudaMalloc(out, bytes), "device cuda: cudaMalloc (scratch)");
        c->scratch_allocs++;
    }
    c->scratch_alloc_ns += cu_now_ns() - t0;
    if (bytes > c->scratch_peak) c->scratch_peak = bytes;
    return 0;
}

/* Queued on the stream for the pool; the others after the pass's synchronisation. */
static void scratch_put(dc_ctx *c, void *p) {
    if (!p) return;
    uint64_t t0 = cu_now_ns();
    if (c->scratch == DC_POOL) cudaFreeAsync(p, c->stream);
    else if (c->scratch == DC_MALLOC) cudaFree(p);
    c->scratch_alloc_ns += cu_now_ns() - t0;
}

/* ---- products ---- */

/* Which f32 buffer the 16-bit copy xh holds, and in which dtype: a GEMM with 16-bit
 * weights needs its input converted, once per input. */
typedef struct act16 {
    const float *src;
    bench_dtype dt;
} act16;

static int is16(bench_dtype dt) { return dt == BENCH_F16 || dt == BENCH_BF16; }

/* y (n, rows) = x (n, cols) . W^T, or y += with accumulate. */
static int mm(dc_ctx *c, const bench_dev_matrix *w, const float *x, int n, float *y, int accumulate, void *xh,
              act16 *tag, char *err, size_t errlen) {
    if ((n == 1 && c->use_gemv) || bench_dtype_is_quant(w->dtype)) {
        /* block-quantised weights have no cuBLAS type: a GEMV per token, dequantising on the fly */
        for (int t = 0; t < n; t++) {
            cuk_gemv_job j = {w->data, y + (size_t)t * w->rows, w->rows, accumulate};
            int e = cuk_gemv(c->stream, &j, 1, 0, w->dtype, w->cols, x + (size_t)t * w->cols);
            if (e) return cu_fail(err, errlen, "device cuda: gemv", (cudaError_t)e);
        }
        return 0;
    }
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t s;
    if (w->dtype == BENCH_F32) {
        s = cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, w->rows, n, w->cols, &one, w->data, w->cols, x, w->cols, &beta, y,
                        w->rows);
    } else {
        if (tag->src != x || tag->dt != w->dtype) {
            int e = cuk_to16(c->stream, x, (size_t)n * (size_t)w->cols, xh, w->dtype);
            if (e) return cu_fail(err, errlen, "device cuda: to16", (cudaError_t)e);
            *tag = (act16){x, w->dtype};
        }
        cudaDataType t = w->dtype == BENCH_F16 ? CUDA_R_16F : CUDA_R_16BF;
        /* row-major W (rows, cols) is column-major W^T: op T gives W; y is column-major (rows, n) */
        s = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, w->rows, n, w->cols, &one, w->data, t, w->cols, xh, t, w->cols,
                         &beta, y, CUDA_R_32F, w->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    return s == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(err, errlen, "device cuda: GEMM", s);
}

/* A profiled pass records an event where the kernel group changes. */
static void mark(dc_ctx *c, int cat) {
    if (!c->profiling || c->n_marks >= c->cap_marks) return;
    if (c->n_marks && c->mark_cat[c->n_marks - 1] == cat) return;
    c->mark_cat[c->n_marks] = cat;
    cudaEventRecord(c->marks[c->n_marks++], c->stream);
}

/* ---- the pass ---- */

static int same_kind(const bench_dev_matrix *a, const bench_dev_matrix *b) { return a->dtype == b->dtype && a->cols == b->cols; }

static int layers(dc_ctx *c, int seq, int n, int pos0, uint8_t *s, const dsl_layout *L, char *err, size_t errlen) {
    const bench_dev_model *m = &c->m;
    int dim = m->dim, hd = dim / m->n_heads, hidden = m->hidden_dim;
    float *x = (float *)(s + L->x), *xb = (float *)(s + L->xb), *q = (float *)(s + L->q);
    float *k = (float *)(s + L->k), *v = (float *)(s + L->v), *hb = (float *)(s + L->hb), *hb2 = (float *)(s + L->hb2);
    void *xh = s + L->xh;
    act16 tag = {NULL, BENCH_F32};
    int decode = n == 1 && c->use_gemv;
    for (int l = 0; l < m->n_layers; l++) {
        const bench_dev_layer *W = &c->layers[l];
        mark(c, CAT_OTHER);
        int want16 = !decode && is16(W->wq.dtype);
        DC_K(cuk_rmsnorm(c->stream, x, W->attn_norm, n, dim, m->norm_eps, xb, want16 ? xh : NULL, W->wq.dtype),
             "device cuda: rmsnorm");
        tag = want16 ? (act16){xb, W->wq.dtype} : (act16){NULL, BENCH_F32};
        mark(c, CAT_WEIGHTS);
        if (decode && same_kind(&W->wq, &W->wk) && same_kind(&W->wq, &W->wv)) {
            cuk_gemv_job j[3] = {{W->wq.data, q, W->wq.rows, 0}, {W->wk.data, k, W->wk.rows, 0}, {W->wv.data, v, W->wv.rows, 0}};
            DC_K(cuk_gemv(c->stream, j, 3, 0, W->wq.dtype, dim, xb), "device cuda: gemv (q, k, v)");
        } else if (mm(c, &W->wq, xb, n, q, 0, xh, &tag, err, errlen) || mm(c, &W->wk, xb, n, k, 0, xh, &tag, err, errlen) ||
                   mm(c, &W->wv, xb, n, v, 0, xh, &tag, err, errlen)) {
            goto fail;
        }
        mark(c, CAT_OTHER);
        DC_K(cuk_rope(c->stream, q, k, n, m->n_heads, m->n_kv_heads, hd, pos0, m->rope_theta, m->rope_half), "device cuda: rope");
        mark(c, CAT_ATTN);
        m->kv->iface->store(m->kv->ctx, seq, l, pos0, n, k, v);
        m->kv->iface->attend(m->kv->ctx, seq, l, pos0, n, q, xb);
        tag = (act16){NULL, BENCH_F32}; /* xb was rewritten */
        mark(c, CAT_WEIGHTS);
        if (mm(c, &W->wo, xb, n, x, 1, xh, &tag, err, errlen)) goto fail;

        mark(c, CAT_OTHER);
        want16 = !decode && is16(W->w1.dtype);
        DC_K(cuk_rmsnorm(c->stream, x, W->ffn_norm, n, dim, m->norm_eps, xb, want16 ? xh : NULL, W->w1.dtype),
             "device cuda: rmsnorm");
        tag = want16 ? (act16){xb, W->w1.dtype} : (act16){NULL, BENCH_F32};
        mark(c, CAT_WEIGHTS);
        if (decode && same_kind(&W->w1, &W->w3)) {
            cuk_gemv_job j[2] = {{W->w1.data, hb, hidden, 0}, {W->w3.data, NULL, hidden, 0}};
            DC_K(cuk_gemv(c->stream, j, 2, 1, W->w1.dtype, dim, xb), "device cuda: gemv (gate, up, SwiGLU)");
        } else {
            if (mm(c, &W->w1, xb, n, hb, 0, xh, &tag, err, errlen) || mm(c, &W->w3, xb, n, hb2, 0, xh, &tag, err, errlen))
                goto fail;
            mark(c, CAT_OTHER);
            want16 = !decode && is16(W->w2.dtype);
            DC_K(cuk_swiglu(c->stream, hb, hb2, (size_t)n * (size_t)hidden, hb, want16 ? xh : NULL, W->w2.dtype),
                 "device cuda: swiglu");
            tag = want16 ? (act16){hb, W->w2.dtype} : (act16){NULL, BENCH_F32};
            mark(c, CAT_WEIGHTS);
        }
        if (mm(c, &W->w2, hb, n, x, 1, xh, &tag, err, errlen)) goto fail;
    }
    return 0;
fail:
    return -1;
}

static int ensure_logits(dc_ctx *c, int rows, char *err, size_t errlen) {
    if (rows <= c->logits_rows) return 0;
    CU_TRY(cudaFree(c->d_logits), "device cuda: cudaFree (logits)");
    c->d_logits = NULL;
    c->logits_rows = 0;
    CU_TRY(cudaMalloc((void **)&c->d_logits, (size_t)rows * (size_t)c->m.vocab_size * sizeof(float)),
           "device cuda: cudaMalloc (logits)");
    c->logits_rows = rows;
    return 0;
}

static int grow(void **v, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 256;
    while (nc < need) nc *= 2;
    void *nv = realloc(*v, (size_t)nc * elem);
    if (!nv) return -1;
    *v = nv;
    *cap = nc;
    return 0;
}

/* Event times of the pass just synchronised, into the measurements. */
static void record(dc_ctx *c, int n, int pos0) {
    float ms = 0;
    cudaEventElapsedTime(&ms, c->ev_start, c->ev_end);
    if (c->passes == 0) c->ttft_ms = ms;
    if (n > 1) c->prefill_ms += ms;
    else if (c->profiling) {
        c->profiled++;
        for (int i = 0; i < c->n_marks; i++) {
            float seg = 0;
            cudaEventElapsedTime(&seg, c->marks[i], i + 1 < c->n_marks ? c->marks[i + 1] : c->ev_end);
            c->share_ms[c->mark_cat[i]] += seg;
        }
    } else if (!grow((void **)&c->decode_ms, &c->cap_decode, c->n_decode + 1, sizeof(double))) {
        c->decode_ms[c->n_decode++] = ms;
    }
    uint64_t used = cu_mem_used();
    if (used > c->mem_peak) c->mem_peak = used;
    if (n > 1 && !c->have_prefill) {
        c->mem_prefill = used;
        c->have_prefill = 1;
    }
    if (!grow((void **)&c->tl, &c->cap_tl, c->n_tl + 1, sizeof(*c->tl))) c->tl[c->n_tl++] = (dc_mem_sample){pos0 + n, used};
    c->passes++;
    if (n == 1) c->decode_passes++;
}

static int dc_forward(void *ctx, int seq, const int *tokens, int n, int pos0, float *logits, int n_out, char *err,
                      size_t errlen) {
    dc_ctx *c = ctx;
    const bench_dev_model *m = &c->m;
    if (!c->bound) return bench_errf(err, errlen, "device cuda: forward before bind");
    if (n <= 0 || n_out <= 0 || n_out > n || n > m->max_pos)
        return bench_errf(err, errlen, "forward: %d tokens, %d outputs (context %d)", n, n_out, m->max_pos);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->vocab_size)
            return bench_errf(err, errlen, "forward: token %d at position %d is outside the vocabulary of %d", tokens[i],
                              pos0 + i, m->vocab_size);
    dsl_layout L;
    size_t bytes = dsl_make(&c->shape, n, &L);
    if (!bytes) return bench_errf(err, errlen, "device cuda: a pass of %d tokens overflows the scratch sizes", n);
    if (ensure_logits(c, n_out, err, errlen)) return -1;
    void *mem = NULL;
    if (scratch_get(c, bytes, &mem, err, errlen)) return -1;
    uint8_t *s = mem;
    int dim = m->dim;
    c->profiling = n == 1 && c->profile_every > 0 && c->decode_passes % c->profile_every == c->profile_every - 1;
    c->n_marks = 0;
    size_t vocab = (size_t)m->vocab_size;

    memcpy(c->h_tokens, tokens, (size_t)n * sizeof(int)); /* the last pass synchronised: h_tokens is free */
    DC_CU(cudaMemcpyAsync(s + L.tokens, c->h_tokens, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, c->stream),
          "device cuda: token upload");
    DC_CU(cudaEventRecord(c->ev_start, c->stream), "device cuda: cudaEventRecord");
    mark(c, CAT_OTHER);
    DC_K(cuk_embed(c->stream, m->tok_embd.data, m->tok_embd.dtype, (const int *)(s + L.tokens), n, dim, (float *)(s + L.x)),
         "device cuda: embedding");
    if (layers(c, seq, n, pos0, s, &L, err, errlen)) goto fail;

    mark(c, CAT_OTHER);
    float *x_last = (float *)(s + L.x) + (size_t)(n - n_out) * dim, *xb = (float *)(s + L.xb);
    int want16 = !(n_out == 1 && c->use_gemv) && is16(m->output.dtype);
    DC_K(cuk_rmsnorm(c->stream, x_last, m->out_norm, n_out, dim, m->norm_eps, xb, want16 ? s + L.xh : NULL, m->output.dtype),
         "device cuda: rmsnorm");
    act16 tag = want16 ? (act16){xb, m->output.dtype} : (act16){NULL, BENCH_F32};
    mark(c, CAT_WEIGHTS);
    if (mm(c, &m->output, xb, n_out, c->d_logits, 0, s + L.xh, &tag, err, errlen)) goto fail;
    DC_CU(cudaEventRecord(c->ev_end, c->stream), "device cuda: cudaEventRecord");
    if (n_out == 1)
        DC_CU(cudaMemcpyAsync(c->h_logits, c->d_logits, vocab * sizeof(float), cudaMemcpyDeviceToHost, c->stream),
              "device cuda: logits download");
    else
        DC_CU(cudaMemcpyAsync(logits, c->d_logits, (size_t)n_out * vocab * sizeof(float), cudaMemcpyDeviceToHost, c->stream),
              "device cuda: logits download");
    scratch_put(c, c->scratch == DC_POOL ? mem : NULL);
    if (c->scratch == DC_POOL) mem = NULL;
    DC_CU(cudaStreamSynchronize(c->stream), "device cuda: the forward pass");
    /* the KV module's launches cannot report; their errors wait here */
    DC_CU(cudaGetLastError(), "device cuda: a kernel of the KV module");
    if (n_out == 1) memcpy(logits, c->h_logits, vocab * sizeof(float));
    if (mem) scratch_put(c, mem);
    c->last_out = n_out;
    record(c, n, pos0);
    return 0;
fail:
    cudaStreamSynchronize(c->stream); /* nothing in flight may still read the scratch */
    cudaGetLastError();
    if (mem) scratch_put(c, mem);
    c->last_out = 0;
    return -1;
}

/* ---- sampling, bandwidth ---- */

static int dc_sample(void *ctx, float temperature, float topp, float coin, int *token, char *err, size_t errlen) {
    dc_ctx *c = ctx;
    if (!c->last_out) return bench_errf(err, errlen, "device cuda: sample before a forward pass");
    const float *row = c->d_logits + (size_t)(c->last_out - 1) * (size_t)c->m.vocab_size;
    int e = temperature > 0 ? cuk_sample(c->stream, row, c->m.vocab_size, temperature, topp, coin, c->d_probs, c->d_token)
                            : cuk_argmax(c->stream, row, c->m.vocab_size, c->d_token);
    if (e) return cu_fail(err, errlen, "device cuda: sampler", (cudaError_t)e);
    CU_TRY(cudaMemcpyAsync(c->h_token, c->d_token, sizeof(int), cudaMemcpyDeviceToHost, c->stream), "device cuda: sampler");
    CU_TRY(cudaStreamSynchronize(c->stream), "device cuda: sampler");
    *token = *c->h_token;
    return 0;
}

static double dc_bandwidth(void *ctx, size_t bytes, int reps) {
    dc_ctx *c = ctx;
    size_t n = (bytes ? bytes : DC_BW_DEFAULT) / sizeof(float) / 4 * 4;
    float *a = NULL, *b = NULL, *d = NULL;
    double best = 0;
    cudaEvent_t t0 = NULL, t1 = NULL;
    if (n == 0 || reps < 1 || cudaMalloc((void **)&a, n * 4) || cudaMalloc((void **)&b, n * 4) ||
        cudaMalloc((void **)&d, n * 4) || cudaEventCreate(&t0) || cudaEventCreate(&t1))
        goto out;
    cudaMemsetAsync(b, 0, n * 4, c->stream);
    cudaMemsetAsync(d, 0, n * 4, c->stream);
    if (cuk_triad(c->stream, a, b, d, 3.0f, n)) goto out; /* warm-up */
    for (int r = 0; r < reps; r++) {
        cudaEventRecord(t0, c->stream);
        cuk_triad(c->stream, a, b, d, 3.0f, n);
        cudaEventRecord(t1, c->stream);
        float ms = 0;
        if (cudaEventSynchronize(t1) || cudaEventElapsedTime(&ms, t0, t1) || ms <= 0) { best = 0; goto out; }
        double bw = 3.0 * (double)n * 4.0 / ((double)ms * 1e-3);
        if (bw > best) best = bw;
    }
out:
    cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
    return best;
}

/* ---- counters ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void dc_counters(void *ctx, const bench_counter_sink *s) {
    dc_ctx *c = ctx;
    uint64_t end = cu_mem_used();
    if (end > c->mem_peak) c->mem_peak = end;
    bench_emit(s, "compute_capability", "", c->cc_major + c->cc_minor / 10.0);
    bench_emit(s, "sm_count", "count", c->sm_count);
    bench_emit_as(s, "gpu_mem_total_B", "B", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, (double)c->mem_total);
    bench_emit_as(s, "gpu_mem_used_start_B", "B", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, (double)c->mem_start);
    bench_emit_as(s, "gpu_mem_used_load_B", "B", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, (double)c->mem_load);
    if (c->have_prefill) bench_emit_as(s, "gpu_mem_used_prefill_B", "B", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, (double)c->mem_prefill);
    bench_emit_as(s, "gpu_mem_used_end_B", "B", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, (double)end);
    bench_emit_as(s, "gpu_mem_used_peak_B", "B", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, (double)c->mem_peak);
    /* the timeline: up to DC_TL_POINTS passes, evenly spread, named by the positions held */
    int points = c->n_tl < DC_TL_POINTS ? c->n_tl : DC_TL_POINTS;
    for (int k = 0; k < points; k++) {
        int i = points > 1 ? (int)((long long)k * (c->n_tl - 1) / (points - 1)) : 0;
        char name[64];
        snprintf(name, sizeof(name), "gpu_mem_used_pos%05d_B", c->tl[i].pos);
        bench_emit_as(s, name, "B", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, (double)c->tl[i].used);
    }
    bench_emit(s, "scratch_peak_B", "B", (double)c->scratch_peak);
    bench_emit_as(s, "scratch_allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->scratch_allocs);
    bench_emit(s, "scratch_alloc_ms", "ms", (double)c->scratch_alloc_ns * 1e-6);
    if (c->passes) {
        bench_emit(s, "ttft_event_ms", "ms", c->ttft_ms);
        bench_emit(s, "prefill_event_ms", "ms", c->prefill_ms);
    }
    if (c->n_decode) {
        double *v = malloc((size_t)c->n_decode * sizeof(double)), sum = 0;
        for (int i = 0; i < c->n_decode; i++) sum += c->decode_ms[i];
        bench_emit(s, "tpot_event_ms", "ms", sum / c->n_decode);
        if (v) {
            memcpy(v, c->decode_ms, (size_t)c->n_decode * sizeof(double));
            qsort(v, (size_t)c->n_decode, sizeof(double), cmp_double);
            bench_emit(s, "tpot_event_p50_ms", "ms", v[(c->n_decode - 1) / 2]);
            bench_emit(s, "tpot_event_p99_ms", "ms", v[(int)((c->n_decode - 1) * 0.99)]);
            bench_emit(s, "tpot_event_max_ms", "ms", v[c->n_decode - 1]);
            free(v);
        }
        bench_emit(s, "decode_events", "count", c->n_decode);
    }
    double total = c->share_ms[CAT_WEIGHTS] + c->share_ms[CAT_ATTN] + c->share_ms[CAT_OTHER];
    bench_emit(s, "profiled_passes", "count", c->profiled);
    if (c->profiled && total > 0) {
        bench_emit(s, "share_weights", "fraction", c->share_ms[CAT_WEIGHTS] / total);
        bench_emit(s, "share_attention", "fraction", c->share_ms[CAT_ATTN] / total);
        bench_emit(s, "share_other", "fraction", c->share_ms[CAT_OTHER] / total);
        bench_emit(s, "profiled_pass_ms", "ms", total / c->profiled);
    }
    bench_emit(s, "weights_per_token_B", "B", (double)c->token_bytes);
    if (c->measure_bw && c->n_decode && c->token_bytes) {
        /* decode reads every weight once a token: memory bandwidth / those bytes bounds it */
        double bw = dc_bandwidth(c, 0, 5), mean = 0;
        for (int i = 0; i < c->n_decode; i++) mean += c->decode_ms[i];
        mean /= c->n_decode;
        bench_emit(s, "triad_gb_s", "GB/s", bw / 1e9);
        if (bw > 0 && mean > 0) {
            double bound = bw / (double)c->token_bytes, tps = 1000.0 / mean;
            bench_emit(s, "decode_bound_tok_s", "tokens/s", bound);
            bench_emit(s, "decode_event_tok_s", "tokens/s", tps);
            bench_emit(s, "decode_bound_fraction", "fraction", tps / bound);
        }
    }
}

static void dc_destroy(void *ctx) {
    dc_ctx *c = ctx;
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    for (int i = 0; c->marks && i < c->cap_marks; i++)
        if (c->marks[i]) cudaEventDestroy(c->marks[i]);
    if (c->ev_start) cudaEventDestroy(c->ev_start);
    if (c->ev_end) cudaEventDestroy(c->ev_end);
    if (c->arena) cudaFree(c->arena);
    cudaFree(c->d_logits);
    cudaFree(c->d_probs);
    cudaFree(c->d_token);
    if (c->h_tokens) cudaFreeHost(c->h_tokens);
    if (c->h_logits) cudaFreeHost(c->h_logits);
    if (c->h_token) cudaFreeHost(c->h_token);
    if (c->blas_ok) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaGetLastError();
    free(c->marks);
    free(c->mark_cat);
    free(c->layers);
    free(c->tl);
    free(c->decode_ms);
    free(c);
}

static const struct bench_device_iface dc_iface = {
    .version = BENCH_DEVICE_IFACE_VERSION,
    .probe = dc_probe,
    .create = dc_create,
    .bind = dc_bind,
    .forward = dc_forward,
    .sample = dc_sample,
    .bandwidth = dc_bandwidth,
    .counters = dc_counters,
    .destroy = dc_destroy,
};

static const bench_module dc_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "device",
    .name = "cuda",
    .summary = "the forward pass on an NVIDIA GPU: cuBLAS prefill, GEMV decode, GPU sampler, events and memory metrics",
    .devices = "cuda",
    .options = dc_options,
    .opts_size = sizeof(dc_opts),
    .score = cu_score,
    .iface = &dc_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &dc_module; }
