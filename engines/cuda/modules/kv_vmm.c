/* kv "vmm": a device cache grown through CUDA virtual memory. Each sequence reserves
 * address space for the whole context once (cuMemAddressReserve); each growth creates
 * physical chunks (cuMemCreate) and maps them after what is mapped (cuMemMap,
 * cuMemSetAccess). Nothing is copied and the addresses stay put, so decode sees no copy
 * spike; memory still grows in chunk steps (the granularity, 2 MiB on current GPUs).
 * Arithmetic: engines/cuda/host/kvgrow.h. Layout: position-major (kvc_cuda.h).
 *
 * The driver's cuMem* functions come from cudaGetDriverEntryPointByVersion, not from
 * linking libcuda: the module loads, and says "not usable here", where no driver is. */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "engines/abi/alloc.h"
#include "engines/cuda/cu_util.h"
#include "engines/cuda/host/kvgrow.h"
#include "engines/cuda/kvc_cuda.h"

typedef struct vmm_opts {
    uint64_t chunk;
} vmm_opts;

static const bench_option vmm_options[] = {
    BENCH_OPTION_SIZE(vmm_opts, chunk, "0", 0, 1ll << 40, "bytes mapped per growth step, rounded up to the granularity (0: one granule)"),
    BENCH_OPTION_END,
};

typedef struct drv {
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuGetErrorString_v6000 error_string;
} drv;

typedef struct vseq {
    CUdeviceptr va;                     /* reserve bytes of address space; 0 until reserved */
    CUmemGenericAllocationHandle *h;    /* (max_chunks) physical chunks, mapped in order */
    size_t mapped;                      /* chunks mapped */
    int used;                           /* positions stored */
} vseq;

typedef struct vmm_ctx {
    kvcc k;                             /* shape, stream, attention work */
    drv d;
    kvg_vmm plan;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    vseq *seqs;                         /* (max_seqs) */
    uint64_t chunks_created, grow_events, map_ns, peak_mapped;
} vmm_ctx;

static int drv_fail(const vmm_ctx *c, char *err, size_t errlen, const char *what, CUresult r) {
    const char *s = NULL;
    if (c->d.error_string) c->d.error_string(r, &s);
    return bench_errf(err, errlen, "kv vmm: %s: CUDA driver error %d (%s)", what, (int)r, s ? s : "?");
}

static int get_entry(const char *name, void **fn, char *err, size_t errlen) {
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
    /* ByVersion from CUDA 12.5 (the other is deprecated there); 12000: the cuMem* ABI of CUDA 12 */
#if CUDART_VERSION >= 12050
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
#elif CUDART_VERSION >= 12000
    cudaError_t e = cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, &q);
#else
    cudaError_t e = cudaGetDriverEntryPoint(name, fn, cudaEnableDefault);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
        if (e == cudaSuccess) cudaGetLastError();
        return bench_errf(err, errlen, "kv vmm: the CUDA driver has no %s (%s)", name,
                          e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
    }
    return 0;
}

static void vmm_destroy(void *ctx);

static int vmm_create(const bench_kv_shape *shape, const void *opts, const bench_host *host, void **out, char *err,
                      size_t errlen) {
    vmm_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv vmm: out of memory");
    if (kvcc_open(&c->k, shape, host, "kv vmm", err, errlen)) goto fail;
    uint64_t chunk = ((const vmm_opts *)opts)->chunk;
    if (get_entry("cuMemGetAllocationGranularity", (void **)&c->d.granularity, err, errlen) ||
        get_entry("cuMemAddressReserve", (void **)&c->d.reserve, err, errlen) ||
        get_entry("cuMemAddressFree", (void **)&c->d.address_free, err, errlen) ||
        get_entry("cuMemCreate", (void **)&c->d.create, err, errlen) ||
        get_entry("cuMemRelease", (void **)&c->d.release, err, errlen) ||
        get_entry("cuMemMap", (void **)&c->d.map, err, errlen) ||
        get_entry("cuMemUnmap", (void **)&c->d.unmap, err, errlen) ||
        get_entry("cuMemSetAccess", (void **)&c->d.set_access, err, errlen) ||
        get_entry("cuGetErrorString", (void **)&c->d.error_string, err, errlen))
        goto fail;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) { cu_fail(err, errlen, "kv vmm: cudaGetDevice", e); goto fail; }
    c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->prop.location.id = dev;
    c->access.location = c->prop.location;
    c->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t gran = 0;
    CUresult r = c->d.granularity(&gran, &c->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) { drv_fail(c, err, errlen, "cuMemGetAllocationGranularity", r); goto fail; }
    if (kvg_vmm_plan(kvcc_pos_bytes(shape), shape->max_pos, gran, chunk, &c->plan, err, errlen)) goto fail;
    c->seqs = calloc((size_t)shape->max_seqs, sizeof(*c->seqs));
    if (!c->seqs) { bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv vmm: out of memory"); goto fail; }
    for (int i = 0; i < shape->max_seqs; i++) {
        vseq *q = &c->seqs[i];
        q->h = calloc(c->plan.max_chunks, sizeof(*q->h));
        if (!q->h) { bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv vmm: out of memory"); goto fail; }
        if ((r = c->d.reserve(&q->va, c->plan.reserve, 0, 0, 0)) != CUDA_SUCCESS) {
            q->va = 0;
            drv_fail(c, err, errlen, "cuMemAddressReserve", r);
            goto fail;
        }
    }
    *out = c;
    return 0;
fail:
    vmm_destroy(c);
    return -1;
}

static int vmm_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    vmm_ctx *c = ctx;
    if (seq < 0 || seq >= c->k.shape.max_seqs) return bench_errf(err, errlen, "kv vmm: sequence %d out of range", seq);
    if (n_pos > c->k.shape.max_pos)
        return bench_errf(err, errlen, "kv vmm: position %d is past the context of %d", n_pos - 1, c->k.shape.max_pos);
    vseq *q = &c->seqs[seq];
    size_t need = kvg_vmm_chunks(&c->plan, n_pos), had = q->mapped;
    if (need <= had) return 0;
    uint64_t t0 = cu_now_ns();
    while (q->mapped < need) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr at = q->va + q->mapped * c->plan.chunk;
        CUresult r = c->d.create(&h, c->plan.chunk, &c->prop, 0);
        if (r != CUDA_SUCCESS) return drv_fail(c, err, errlen, "cuMemCreate", r);
        c->chunks_created++;
        if ((r = c->d.map(at, c->plan.chunk, 0, h, 0)) != CUDA_SUCCESS) {
            c->d.release(h);
            return drv_fail(c, err, errlen, "cuMemMap", r);
        }
        if ((r = c->d.set_access(at, c->plan.chunk, &c->access, 1)) != CUDA_SUCCESS) {
            c->d.unmap(at, c->plan.chunk);
            c->d.release(h);
            return drv_fail(c, err, errlen, "cuMemSetAccess", r);
        }
        q->h[q->mapped++] = h;
    }
    if (had) c->grow_events++;
    c->map_ns += cu_now_ns() - t0;
    uint64_t mapped = 0;
    for (int i = 0; i < c->k.shape.max_seqs; i++) mapped += c->seqs[i].mapped;
    if (mapped > c->peak_mapped) c->peak_mapped = mapped;
    return 0;
}

static void *base(const vmm_ctx *c, int seq) { return (void *)(uintptr_t)c->seqs[seq].va; }

static void vmm_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    vmm_ctx *c = ctx;
    kvcc_store(&c->k, base(c, seq), layer, pos0, n, k, v);
    if (pos0 + n > c->seqs[seq].used) c->seqs[seq].used = pos0 + n;
}

static void vmm_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    vmm_ctx *c = ctx;
    kvcc_attend(&c->k, base(c, seq), layer, pos0, n, q, out);
}

/* Unmaps and frees the sequence's chunks; the address range stays reserved for the next. */
static void unmap_all(vmm_ctx *c, vseq *q) {
    if (q->mapped && c->k.stream) cudaStreamSynchronize((cudaStream_t)c->k.stream); /* no kernel may still read them */
    while (q->mapped) {
        q->mapped--;
        c->d.unmap(q->va + q->mapped * c->plan.chunk, c->plan.chunk);
        c->d.release(q->h[q->mapped]);
    }
    q->used = 0;
}

static void vmm_release(void *ctx, int seq) {
    vmm_ctx *c = ctx;
    if (seq >= 0 && seq < c->k.shape.max_seqs) unmap_all(c, &c->seqs[seq]);
}

static void vmm_memory(void *ctx, bench_kv_memory *m) {
    vmm_ctx *c = ctx;
    uint64_t used = 0, mapped = 0;
    for (int i = 0; i < c->k.shape.max_seqs; i++) {
        used += (uint64_t)c->seqs[i].used * kvcc_pos_bytes(&c->k.shape);
        mapped += c->seqs[i].mapped;
    }
    uint64_t reserved = mapped * c->plan.chunk;
    *m = (bench_kv_memory){.reserved = reserved, .used = used, .cached = 0, .wasted = reserved - used};
}

static void vmm_counters(void *ctx, const bench_counter_sink *s) {
    vmm_ctx *c = ctx;
    uint64_t used = 0, mapped = 0;
    for (int i = 0; i < c->k.shape.max_seqs; i++) {
        used += (uint64_t)c->seqs[i].used * kvcc_pos_bytes(&c->k.shape);
        mapped += c->seqs[i].mapped;
    }
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->chunks_created);
    bench_emit_as(s, "grow_events", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->grow_events);
    bench_emit(s, "bytes_copied", "B", 0);
    bench_emit(s, "bytes_reserved", "B", (double)(mapped * c->plan.chunk));
    bench_emit(s, "bytes_used", "B", (double)used);
    bench_emit(s, "bytes_mapped_peak", "B", (double)(c->peak_mapped * c->plan.chunk));
    bench_emit(s, "address_space_B", "B", (double)c->plan.reserve * c->k.shape.max_seqs);
    bench_emit(s, "chunk_B", "B", (double)c->plan.chunk);
    bench_emit(s, "map_ms", "ms", (double)c->map_ns * 1e-6);
}

static void vmm_destroy(void *ctx) {
    vmm_ctx *c = ctx;
    if (!c) return;
    for (int i = 0; c->seqs && i < c->k.shape.max_seqs; i++) {
        vseq *q = &c->seqs[i];
        if (q->h) unmap_all(c, q);
        if (q->va) c->d.address_free(q->va, c->plan.reserve);
        free(q->h);
    }
    kvcc_close(&c->k);
    free(c->seqs);
    free(c);
}

static const struct bench_kv_iface vmm_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .cache_types = KVC_CUDA_TYPES,
    .create = vmm_create,
    .reserve = vmm_reserve,
    .store = vmm_store,
    .attend = vmm_attend,
    .release = vmm_release,
    .memory = vmm_memory,
    .counters = vmm_counters,
    .destroy = vmm_destroy,
};

static const bench_module vmm_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "kv",
    .name = "vmm",
    .summary = "device cache grown through CUDA virtual memory: address space reserved once, chunks mapped, no copy",
    .devices = "cuda",
    .options = vmm_options,
    .opts_size = sizeof(vmm_opts),
    .score = cu_score,
    .iface = &vmm_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &vmm_module; }
