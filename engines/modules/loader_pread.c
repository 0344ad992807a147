/* loader "pread": copies every tensor into one anonymous region with pread(2).
 * The weights become anonymous memory of this process (RssAnon): a second
 * process loading the same model holds a second copy. Options expose the costs
 * the design doc measures: first-touch faults (populate, hugepage) and the page
 * cache itself (direct). */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engines/abi/loader.h"

typedef struct pread_opts {
    uint64_t chunk;
    int direct, populate, hugepage;
} pread_opts;

static const bench_option pread_options[] = {
    BENCH_OPTION_SIZE(pread_opts, chunk, "1m", 4096, 1ll << 30, "bytes per pread call"),
    BENCH_OPTION_BOOL(pread_opts, direct, "0", "O_DIRECT through an aligned bounce buffer (falls back, with a note, where refused)"),
    BENCH_OPTION_BOOL(pread_opts, populate, "0", "MAP_POPULATE the destination: fault it in before reading"),
    BENCH_OPTION_BOOL(pread_opts, hugepage, "0", "madvise(MADV_HUGEPAGE) on the destination (THP in madvise mode)"),
    BENCH_OPTION_END,
};

#define TENSOR_ALIGN 64     /* every tensor starts on a cache line */
#define DIRECT_ALIGN 4096   /* O_DIRECT offset/length/buffer alignment */

typedef struct pread_ctx {
    uint64_t chunk;
    int direct, populate, hugepage;
    const bench_host *host;
    void *region;
    size_t region_bytes;
    uint64_t bytes_read, read_calls, direct_fallbacks;
    uint64_t t_read_ns;
} pread_ctx;

static int pread_open(const void *opts, const bench_host *host, void **out, char *err, size_t errlen) {
    const pread_opts *o = opts;
    pread_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader pread: out of memory");
    c->chunk = o->chunk;
    c->direct = o->direct;
    c->populate = o->populate;
    c->hugepage = o->hugepage;
    if (c->direct) c->chunk = (c->chunk + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
    c->host = host;
    *out = c;
    return 0;
}

/* Reads [off, off+len) of fd into dst, chunk bytes per call. */
static int read_range(pread_ctx *c, int fd, const char *path, uint8_t *dst, uint64_t off, uint64_t len,
                      char *err, size_t errlen) {
    while (len) {
        size_t want = len < c->chunk ? (size_t)len : (size_t)c->chunk;
        ssize_t got = pread(fd, dst, want, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return bench_errf(err, errlen, "%s: read at offset %llu: %s", path, (unsigned long long)off,
                              got < 0 ? strerror(errno) : "unexpected end of file");
        c->read_calls++;
        c->bytes_read += (uint64_t)got;
        dst += got; off += (uint64_t)got; len -= (uint64_t)got;
    }
    return 0;
}

/* O_DIRECT: aligned chunks into a bounce buffer, then the tensor's part copied out. */
static int read_range_direct(pread_ctx *c, int fd, const char *path, uint8_t *bounce, uint8_t *dst,
                             uint64_t off, uint64_t len, char *err, size_t errlen) {
    while (len) {
        uint64_t aoff = off / DIRECT_ALIGN * DIRECT_ALIGN, skip = off - aoff;
        size_t want = (size_t)c->chunk;
        ssize_t got;
        do got = pread(fd, bounce, want, (off_t)aoff); while (got < 0 && errno == EINTR);
        if (got < 0) return bench_errf(err, errlen, "%s: O_DIRECT read at %llu: %s", path, (unsigned long long)aoff, strerror(errno));
        c->read_calls++;
        c->bytes_read += (uint64_t)got;
        if ((uint64_t)got <= skip) return bench_errf(err, errlen, "%s: unexpected end of file at offset %llu", path, (unsigned long long)off);
        uint64_t take = (uint64_t)got - skip;
        if (take > len) take = len;
        memcpy(dst, bounce + skip, (size_t)take);
        dst += take; off += take; len -= take;
    }
    return 0;
}

static size_t slot_bytes(uint64_t nbytes) { return (size_t)((nbytes + TENSOR_ALIGN - 1) / TENSOR_ALIGN * TENSOR_ALIGN); }

static int pread_load(void *ctx, const char *const *files, int n_files, const bench_tensor_ref *t, int n,
                      const void **data, char *err, size_t errlen) {
    pread_ctx *c = ctx;
    /* tensors lie in list order in the region, whatever file they come from */
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        data[i] = (const void *)(uintptr_t)total; /* offset for now; made a pointer below */
        total += slot_bytes(t[i].nbytes);
    }
    if (total == 0) total = TENSOR_ALIGN;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (c->populate && !c->hugepage ? MAP_POPULATE : 0);
    c->region = mmap(NULL, total, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (c->region == MAP_FAILED) {
        c->region = NULL;
        return bench_errc(err, errlen, errno == ENOMEM ? BENCH_ERR_NOMEM : BENCH_ERR_FAIL,
                          "loader pread: cannot reserve %zu bytes for the weights: %s", total, strerror(errno));
    }
    c->region_bytes = total;
    if (c->hugepage) {
        madvise(c->region, total, MADV_HUGEPAGE);
        if (c->populate) madvise(c->region, total, MADV_POPULATE_WRITE);
    }
    bench_name_region(c->host, c->region, total, BENCH_REGION_WEIGHTS);
    for (int i = 0; i < n; i++) data[i] = (uint8_t *)c->region + (uintptr_t)data[i];

    uint8_t *bounce = NULL;
    if (c->direct && posix_memalign((void **)&bounce, DIRECT_ALIGN, (size_t)c->chunk))
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader pread: out of memory for the O_DIRECT buffer");
    int rc = 0;
    for (int f = 0; f < n_files && !rc; f++) {
        int direct = c->direct;
        int fd = bench_open_model_file(c->host, files[f], O_RDONLY | (direct ? O_DIRECT : 0), err, errlen);
        if (fd < 0 && direct) { /* tmpfs and some filesystems refuse O_DIRECT */
            c->direct_fallbacks++;
            bench_logf(c->host, "loader pread: O_DIRECT refused (%s); reading through the page cache", err);
            direct = 0;
            fd = bench_open_model_file(c->host, files[f], O_RDONLY, err, errlen);
        }
        if (fd < 0) { rc = -BENCH_ERR_IO; break; }
        for (int i = 0; i < n && !rc; i++) {
            if (t[i].file != f) continue;
            uint8_t *dst = (uint8_t *)data[i];
            rc = direct ? read_range_direct(c, fd, files[f], bounce, dst, t[i].offset, t[i].nbytes, err, errlen)
                        : read_range(c, fd, files[f], dst, t[i].offset, t[i].nbytes, err, errlen);
        }
        close(fd);
    }
    free(bounce);
    return rc;
}

static void pread_counters(void *ctx, const bench_counter_sink *s) {
    pread_ctx *c = ctx;
    bench_emit(s, "bytes_read", "B", (double)c->bytes_read);
    bench_emit(s, "bytes_copied", "B", (double)c->bytes_read);
    bench_emit_as(s, "read_calls", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->read_calls);
    bench_emit_as(s, "zero_copy_tensors", "count", BENCH_CTR_EXACT, BENCH_BETTER_HIGHER, 0);
    bench_emit(s, "region_bytes", "B", (double)c->region_bytes);
    if (c->direct) bench_emit(s, "direct_fallbacks", "count", (double)c->direct_fallbacks);
}

/* Every tensor lies in the one anonymous region, mapped read-write. */
static int pread_memory_kind(void *ctx, const void *p, size_t len) {
    (void)ctx, (void)p, (void)len;
    return BENCH_LOADER_MEM_PRIVATE;
}

static void pread_close(void *ctx) {
    pread_ctx *c = ctx;
    if (!c) return;
    if (c->region) munmap(c->region, c->region_bytes);
    free(c);
}

static const struct bench_loader_iface pread_iface = {
    .version = BENCH_LOADER_IFACE_VERSION,
    .open = pread_open,
    .load = pread_load,
    .counters = pread_counters,
    .close = pread_close,
    .memory_kind = pread_memory_kind,
};

static const bench_module pread_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "loader",
    .name = "pread",
    .summary = "pread(2) every tensor into one anonymous region (weights become RssAnon)",
    .devices = "cpu",
    .options = pread_options,
    .opts_size = sizeof(pread_opts),
    .iface = &pread_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &pread_module; }
