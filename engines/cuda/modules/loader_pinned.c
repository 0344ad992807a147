/* loader "pinned" (CUDA): a ring of pinned staging slots cut from one cudaHostAlloc slab.
 * Chunk k of the files is pread into slot k % slots and sent with cudaMemcpyAsync; an
 * event per slot says when its copies are done, so the read of chunk k + 1 overlaps the
 * copy of chunk k and a slot is reused only once its copy has finished (host/staging.h),
 * as llama.cpp's and InfiniLM's loaders stage their uploads. The slab is freed once the
 * weights are on the device. Counters: engines/cuda/ld_cuda.h. */
#include "engines/cuda/cu_util.h"
#include "engines/cuda/ld_cuda.h"

typedef struct pinned_opts {
    uint64_t chunk;
    int64_t slots;
} pinned_opts;

static const bench_option pinned_options[] = {
    BENCH_OPTION_SIZE(pinned_opts, chunk, "16m", 4096, 1ll << 30, "bytes per slot (one read, its copies)"),
    BENCH_OPTION_INT(pinned_opts, slots, "4", 1, 64, "slots in the ring (2 or more overlap reads with copies)"),
    BENCH_OPTION_END,
};

#define PINNED_MAX_SLOTS 64
#define PINNED_GAP (64u << 10)  /* B of file between two tensors read along rather than a second read */

typedef struct pinned_ctx {
    ldc l;
    uint64_t chunk, n_slots;
    uint8_t *slab;                          /* (n_slots, chunk) pinned */
    cudaEvent_t ev[PINNED_MAX_SLOTS];       /* the copies of each slot */
    const char *const *files;               /* during load() */
} pinned_ctx;

static int pinned_open(const void *opts, const bench_host *host, void **out, char *err, size_t errlen) {
    pinned_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader pinned: out of memory");
    if (ldc_init(&c->l, "loader pinned", host, err, errlen)) goto fail;
    c->chunk = ((const pinned_opts *)opts)->chunk;
    c->n_slots = (uint64_t)((const pinned_opts *)opts)->slots;
    if (c->chunk < 4096 || c->chunk > (1ull << 30)) {
        bench_errf(err, errlen, "loader pinned: option chunk=%llu: expected 4k..1g", (unsigned long long)c->chunk);
        goto fail;
    }
    if (c->n_slots < 1 || c->n_slots > PINNED_MAX_SLOTS) {
        bench_errf(err, errlen, "loader pinned: option slots=%llu: expected 1..%d", (unsigned long long)c->n_slots,
                   PINNED_MAX_SLOTS);
        goto fail;
    }
    *out = c;
    return 0;
fail:
    free(c);
    return -1;
}

static uint8_t *slot_buf(pinned_ctx *c, int slot) { return c->slab + (size_t)slot * (size_t)c->chunk; }

static int r_wait(void *u, int slot, char *err, size_t errlen) {
    pinned_ctx *c = u;
    CU_TRY(cudaEventSynchronize(c->ev[slot]), "loader pinned: waiting for a slot");
    return 0;
}

static int r_read(void *u, int slot, const stg_chunk *ch, char *err, size_t errlen) {
    pinned_ctx *c = u;
    return ldc_read(&c->l, ch->file, c->files[ch->file], slot_buf(c, slot), ch->off, ch->len, err, errlen);
}

static int r_copy(void *u, int slot, const stg_copy *cp, char *err, size_t errlen) {
    pinned_ctx *c = u;
    CU_TRY(cudaMemcpyAsync((uint8_t *)c->l.dev + cp->dst, slot_buf(c, slot) + cp->slot_off, cp->len, cudaMemcpyHostToDevice,
                           (cudaStream_t)c->l.stream),
           "loader pinned: cudaMemcpyAsync");
    c->l.h2d_bytes += cp->len;
    return 0;
}

static int r_submit(void *u, int slot, char *err, size_t errlen) {
    pinned_ctx *c = u;
    CU_TRY(cudaEventRecord(c->ev[slot], (cudaStream_t)c->l.stream), "loader pinned: cudaEventRecord");
    return 0;
}

static const stg_ops ring_ops = {r_wait, r_read, r_copy, r_submit};

static void free_ring(pinned_ctx *c) {
    for (uint64_t i = 0; i < c->n_slots; i++)
        if (c->ev[i]) cudaEventDestroy(c->ev[i]), c->ev[i] = NULL;
    if (c->slab) cudaFreeHost(c->slab);
    c->slab = NULL;
}

static int pinned_load(void *ctx, const char *const *files, int n_files, const bench_tensor_ref *t, int n,
                       const void **data, char *err, size_t errlen) {
    pinned_ctx *c = ctx;
    if (ldc_begin(&c->l, files, n_files, t, n, data, err, errlen)) return -1;
    stg_piece *pieces = ldc_pieces(&c->l, t, n);
    stg_plan plan = {0};
    c->files = files;
    int rc = pieces ? stg_plan_make(pieces, n, (size_t)c->chunk, PINNED_GAP, &plan, err, errlen)
                    : bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader pinned: out of memory");
    /* no more slots than chunks: a small model takes no more pinned memory than it needs */
    int slots = (int)c->n_slots < plan.n_chunks ? (int)c->n_slots : (plan.n_chunks > 0 ? plan.n_chunks : 1);
    size_t slab = (size_t)slots * (size_t)c->chunk;
    cudaError_t e = cudaSuccess;
    if (!rc && (e = cudaHostAlloc((void **)&c->slab, slab, cudaHostAllocDefault)) != cudaSuccess) {
        c->slab = NULL;
        rc = cu_fail(err, errlen, "loader pinned: cudaHostAlloc of the staging slab", e);
    }
    for (int i = 0; !rc && i < slots; i++)
        if ((e = cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming)) != cudaSuccess)
            rc = cu_fail(err, errlen, "loader pinned: cudaEventCreate", e);
    if (!rc) {
        c->l.pinned_bytes = slab;
        rc = stg_run(&plan, slots, &ring_ops, c, err, errlen);
    }
    if (ldc_end(&c->l, rc ? NULL : err, rc ? 0 : errlen) && !rc) rc = -1;
    free_ring(c);
    stg_plan_free(&plan);
    free(pieces);
    c->files = NULL;
    return rc;
}

static void pinned_counters(void *ctx, const bench_counter_sink *s) {
    pinned_ctx *c = ctx;
    ldc_counters(&c->l, s);
    bench_emit(s, "slots", "count", (double)c->n_slots);
    bench_emit(s, "chunk_B", "B", (double)c->chunk);
}

static void pinned_close(void *ctx) {
    pinned_ctx *c = ctx;
    if (!c) return;
    ldc_close(&c->l);
    free_ring(c);
    free(c);
}

static const struct bench_loader_iface pinned_iface = {
    .version = BENCH_LOADER_IFACE_VERSION,
    .open = pinned_open,
    .load = pinned_load,
    .counters = pinned_counters,
    .close = pinned_close,
};

static const bench_module pinned_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "loader",
    .name = "pinned",
    .summary = "pinned ring: pread into pinned slots of one slab, cudaMemcpyAsync overlapping the next read",
    .devices = "cuda",
    .options = pinned_options,
    .opts_size = sizeof(pinned_opts),
    .score = cu_score,
    .iface = &pinned_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &pinned_module; }
