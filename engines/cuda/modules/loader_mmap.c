/* loader "mmap" on CUDA: each file is mmap'd and page-locked in place with
 * cudaHostRegister (read-only where the GPU supports it, so a MAP_SHARED mapping of the
 * page cache can be registered), then each tensor goes to the device with one
 * cudaMemcpyAsync straight from the mapping: no staging copy on the host. Registering
 * faults every page in and pins it, which the load time shows (register_ms). The
 * mappings are unregistered and unmapped once the weights are on the device.
 * register=0 copies from the unregistered mapping (the driver stages it).
 * Counters: engines/cuda/ld_cuda.h, and registered_bytes, register_ms, register_fallbacks. */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engines/cuda/cu_util.h"
#include "engines/cuda/ld_cuda.h"

typedef struct mmap_opts {
    int mode, populate, touch, advice, reg;
} mmap_opts;

/* in the order of the advice option's choices */
static const int mmap_advice[] = {-1, MADV_WILLNEED, MADV_SEQUENTIAL, MADV_RANDOM, MADV_HUGEPAGE};

static const bench_option mmap_options[] = {
    BENCH_OPTION_ENUM(mmap_opts, mode, "shared", "shared|private", "MAP_SHARED or MAP_PRIVATE"),
    BENCH_OPTION_BOOL(mmap_opts, populate, "0", "MAP_POPULATE: fault every page in at map time"),
    /* the CPU loader's option, so that one scenario names both: here the copy to the device
     * reads every page at load whatever it says */
    BENCH_OPTION_BOOL(mmap_opts, touch, "1", "the CPU loader's; on cuda every page is read at load by the copy to the device, either way"),
    BENCH_OPTION_ENUM(mmap_opts, advice, "none", "none|willneed|sequential|random|hugepage", "madvise hint on each mapping"),
    {"register", BENCH_OPT_BOOL, offsetof(mmap_opts, reg), "1", 0, 0, NULL,
     "cudaHostRegister each mapping (0: copy from pageable memory)", 0},
    BENCH_OPTION_END,
};

typedef struct map_ctx {
    ldc l;
    int shared, populate, advice, reg;
    uint64_t registered_bytes, register_ns, register_fallbacks, mapped_bytes;
} map_ctx;

static int map_open(const void *opts, const bench_host *host, void **out, char *err, size_t errlen) {
    const mmap_opts *o = opts;
    map_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader mmap: out of memory");
    if (ldc_init(&c->l, "loader mmap", host, err, errlen)) goto fail;
    c->populate = o->populate;
    c->reg = o->reg;
    c->shared = o->mode == 0;
    c->advice = mmap_advice[o->advice];
    *out = c;
    return 0;
fail:
    free(c);
    return -1;
}

typedef struct mapping {
    void *addr;
    size_t len;
    int registered;
} mapping;

static int map_load(void *ctx, const char *const *files, int n_files, const bench_tensor_ref *t, int n,
                    const void **data, char *err, size_t errlen) {
    map_ctx *c = ctx;
    if (ldc_begin(&c->l, files, n_files, t, n, data, err, errlen)) return -1;
    mapping *maps = calloc((size_t)(n_files > 0 ? n_files : 1), sizeof(*maps));
    if (!maps) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader mmap: out of memory");
    int dev = 0, ro = 0, rc = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, dev))
        ro = 0;
    cudaGetLastError();
    for (int f = 0; f < n_files && !rc; f++) {
        size_t len = (size_t)c->l.file_bytes[f];
        if (!len) continue;
        int flags = (c->shared ? MAP_SHARED : MAP_PRIVATE) | (c->populate ? MAP_POPULATE : 0);
        void *p = mmap(NULL, len, PROT_READ, flags, c->l.fds[f], 0);
        if (p == MAP_FAILED) {
            rc = bench_errf(err, errlen, "%s: mmap of %zu bytes: %s", files[f], len, strerror(errno));
            break;
        }
        maps[f] = (mapping){p, len, 0};
        c->mapped_bytes += len;
        if (c->advice >= 0 && madvise(p, len, c->advice))
            bench_logf(c->l.host, "loader mmap: %s: madvise: %s (continuing)", files[f], strerror(errno));
        if (!c->reg) continue;
        uint64_t t0 = cu_now_ns();
        /* PROT_READ memory can be pinned only read-only; without the flag, copy unpinned */
        size_t page = (size_t)sysconf(_SC_PAGESIZE), whole = (len + page - 1) / page * page; /* the mapping's pages */
        cudaError_t e = ro ? cudaHostRegister(p, whole, cudaHostRegisterReadOnly) : cudaErrorNotSupported;
        c->register_ns += cu_now_ns() - t0;
        if (e == cudaSuccess) {
            maps[f].registered = 1;
            c->registered_bytes += len;
        } else {
            if (ro) cudaGetLastError();
            c->register_fallbacks++;
            bench_logf(c->l.host, "loader mmap: %s: cudaHostRegister: %s; copying from pageable memory", files[f],
                    ro ? cudaGetErrorString(e) : "this GPU cannot register read-only memory");
        }
    }
    c->l.pinned_bytes = c->registered_bytes;
    for (int i = 0; i < n && !rc; i++) {
        if (!t[i].nbytes) continue;
        cudaError_t e = cudaMemcpyAsync((uint8_t *)c->l.dev + c->l.dst[i], (const uint8_t *)maps[t[i].file].addr + t[i].offset,
                                        (size_t)t[i].nbytes, cudaMemcpyHostToDevice, (cudaStream_t)c->l.stream);
        if (e != cudaSuccess) rc = cu_fail(err, errlen, "loader mmap: cudaMemcpyAsync", e);
        else c->l.h2d_bytes += t[i].nbytes;
    }
    c->l.bytes_read = c->l.h2d_bytes; /* the page cache's pages, read by the copies */
    if (ldc_end(&c->l, rc ? NULL : err, rc ? 0 : errlen) && !rc) rc = -1;
    for (int f = 0; f < n_files; f++) {
        if (maps[f].registered) cudaHostUnregister(maps[f].addr);
        if (maps[f].addr) munmap(maps[f].addr, maps[f].len);
    }
    free(maps);
    return rc;
}

static void map_counters(void *ctx, const bench_counter_sink *s) {
    map_ctx *c = ctx;
    ldc_counters(&c->l, s);
    bench_emit(s, "bytes_mapped", "B", (double)c->mapped_bytes);
    bench_emit(s, "registered_bytes", "B", (double)c->registered_bytes);
    bench_emit(s, "register_ms", "ms", (double)c->register_ns * 1e-6);
    bench_emit(s, "register_fallbacks", "count", (double)c->register_fallbacks);
}

static void map_close(void *ctx) {
    map_ctx *c = ctx;
    if (!c) return;
    ldc_close(&c->l);
    free(c);
}

static const struct bench_loader_iface map_iface = {
    .version = BENCH_LOADER_IFACE_VERSION,
    .open = map_open,
    .load = map_load,
    .counters = map_counters,
    .close = map_close,
};

static const bench_module map_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "loader",
    .name = "mmap",
    .summary = "mmap + cudaHostRegister (read-only) of each file, then cudaMemcpyAsync from the mapping to the device",
    .devices = "cuda",
    .caps = BENCH_CAP_LOADER_MAPS_FILE,
    .options = mmap_options,
    .opts_size = sizeof(mmap_opts),
    .score = cu_score,
    .iface = &map_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &map_module; }
