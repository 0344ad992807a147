/* loader "mmap": maps each model file and uses the tensors in place (zero copy).
 * The weights are file pages (RssFile): shared with the page cache and with
 * every other process that maps the file MAP_SHARED. A tensor whose offset is
 * misaligned for its dtype is copied into an aligned buffer, and counted. */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/loader.h"

/* tests/test_abi.c builds this file as another module too ("mapped"): the host must treat it
 * as it treats mmap, by its capability, not its name */
#ifndef LOADER_MMAP_NAME
#define LOADER_MMAP_NAME "mmap"
#endif

typedef struct mmap_opts {
    int mode, populate, touch, huge, advice, mlock, verify;
} mmap_opts;

enum { MODE_SHARED, MODE_PRIVATE };
/* in the order of the advice option's choices */
static const int mmap_advice[] = {-1, MADV_WILLNEED, MADV_SEQUENTIAL, MADV_RANDOM, MADV_HUGEPAGE};

static const bench_option mmap_options[] = {
    BENCH_OPTION_ENUM(mmap_opts, mode, "shared", "shared|private", "MAP_SHARED or MAP_PRIVATE"),
    BENCH_OPTION_BOOL(mmap_opts, populate, "0", "MAP_POPULATE: fault every page in at map time"),
    BENCH_OPTION_BOOL(mmap_opts, touch, "1", "read a byte of every page at load, so that the first prefill pays no first-touch cost (0: pages left to first use)"),
    BENCH_OPTION_BOOL(mmap_opts, huge, "1", "map each file at a 2 MiB boundary with MADV_HUGEPAGE, so that pages read in at load are 2 MiB folios mapped by one entry each (0: the kernel's placement, 4 KiB pages unless the page cache already holds large folios)"),
    BENCH_OPTION_ENUM(mmap_opts, advice, "none", "none|willneed|sequential|random|hugepage", "madvise hint on each mapping"),
    BENCH_OPTION_BOOL(mmap_opts, mlock, "0", "mlock the mappings (needs RLIMIT_MEMLOCK)"),
    BENCH_OPTION_BOOL(mmap_opts, verify, "0", "after the run, check each file's size, mtime and inode against load time"),
    BENCH_OPTION_END,
};

typedef struct mapping {
    void *addr;
    size_t len;
    char *path;             /* verify=1: the file, and what it was at load time */
    struct stat st;
} mapping;

typedef struct mmap_ctx {
    int shared, populate, touch, huge, mlock_, verify;
    int changed, reported;  /* verify=1: files found changed; whether that was said */
    int advice;             /* MADV_* or -1 */
    const bench_host *host;
    mapping *maps;
    int n_maps;
    void **copies;          /* aligned copies of misaligned tensors */
    int n_copies;
    uint64_t bytes_mapped, zero_copy, bytes_copied;
    uint64_t huge_bytes;    /* of bytes_mapped, mapped by 2 MiB entries after load (smaps) */
} mmap_ctx;

static int mmap_open(const void *opts, const bench_host *host, void **out, char *err, size_t errlen) {
    const mmap_opts *o = opts;
    mmap_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader mmap: out of memory");
    c->shared = o->mode == MODE_SHARED;
    c->populate = o->populate;
    c->touch = o->touch;
    c->huge = o->huge;
    c->mlock_ = o->mlock;
    c->verify = o->verify;
    c->advice = mmap_advice[o->advice];
    c->host = host;
    *out = c;
    return 0;
}

/* huge=1. Decode reads every weight once a token, through one page-table entry per page: on a
 * 2-vCPU AMD EPYC family 26 KVM guest, f32 llama-110m decoded at 88 tokens/s (84..92) from a
 * file the page cache held in small folios and at 118 (109..125) from a copy held in 2 MiB
 * folios, 6 interleaved pairs; llama.cpp's mmap of the same two files: 85 and 114
 * (docs/PERFORMANCE.md). A file's pages land in 2 MiB folios when a fault on a mapping with
 * MADV_HUGEPAGE reads them in (its readahead allocates at PMD order), and a folio is mapped by
 * one PMD entry only where the virtual address and the file offset agree modulo 2 MiB, hence
 * the aligned placement. Read in cold by a load (6.18, ext4), llama-110m q4_0 had 56.6 of
 * 61.7 MB in 2 MiB pages with huge=1 and 18.9 MB with huge=0. Pages already cached in small
 * folios (as a write leaves them) stay small: the counter huge_bytes says what came of it. */
#define MMAP_HUGE_ALIGN ((size_t)2 << 20)

/* touch=1 (the default): one read per page, from user space, at load. Without it the first
 * forward pass maps the file into the process page by page (a minor fault each; a cold file is
 * read in then), and MAP_POPULATE alone does not cover it everywhere: it fills the guest's page
 * tables, not a shadow-paging hypervisor's, and on such a guest (perf: pvm_* in the kernel;
 * 2-vCPU AMD EPYC family 26) the first prefill still paid ~1.5 us a page inside the GEMM (f32
 * llama-110m, 16 prompt tokens: TTFT 150-200 ms with or without populate, 27-31 ms touched).
 * llama.cpp maps with MAP_POPULATE by default, so its load pays this too. touch=0 keeps the
 * deferral, what mmap_vs_pread's lazy variant measures. */
typedef struct mmap_touch_job {
    const uint8_t *p;
    size_t len, page;
} mmap_touch_job;

/* Task t of n: the t-th of n slices of whole pages, on the engine's threads where the host
 * lends them (its parallel_for), as the engine touches what pread copied. */
static void mmap_touch_task(void *arg, int t, int n) {
    const mmap_touch_job *j = arg;
    const size_t pages = (j->len + j->page - 1) / j->page;
    const size_t p0 = pages * (size_t)t / (size_t)n, p1 = pages * (size_t)(t + 1) / (size_t)n;
    if (p0 < p1) (void)bench_touch_pages(j->p + p0 * j->page, (p1 < pages ? p1 * j->page : j->len) - p0 * j->page, j->page);
}

static void mmap_touch(const bench_host *host, const void *p, size_t len) {
    const long page = sysconf(_SC_PAGESIZE);
    mmap_touch_job j = {p, len, page > 0 ? (size_t)page : 4096};
    if (host && host->parallel_for && host->n_threads > 1) host->parallel_for(host->pool, mmap_touch_task, &j, host->n_threads);
    else mmap_touch_task(&j, 0, 1);
}

/* A mapping of len bytes of fd at a 2 MiB boundary: a reservation 2 MiB longer, the file
 * mapped over its aligned part, the slack given back. MAP_FAILED as mmap's. */
static void *mmap_aligned(size_t len, int flags, int fd) {
    uint8_t *r = mmap(NULL, len + MMAP_HUGE_ALIGN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) return MAP_FAILED;
    uint8_t *a = (uint8_t *)(((uintptr_t)r + MMAP_HUGE_ALIGN - 1) & ~(uintptr_t)(MMAP_HUGE_ALIGN - 1));
    void *p = mmap(a, len, PROT_READ, flags | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        munmap(r, len + MMAP_HUGE_ALIGN);
        errno = e;
        return MAP_FAILED;
    }
    const size_t end = ((size_t)(a - r) + len + 4095) & ~(size_t)4095; /* the file mapping's page-rounded end */
    if (a > r) munmap(r, (size_t)(a - r));
    if (end < len + MMAP_HUGE_ALIGN) munmap(r + end, len + MMAP_HUGE_ALIGN - end);
    return p;
}

/* Bytes of the mapping that starts at addr mapped by PMD entries, from /proc/self/smaps
 * (FilePmdMapped, or AnonHugePages where mode=private pages were copied); 0 where smaps
 * cannot be read. */
static uint64_t mmap_pmd_bytes(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int in = 0;
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            if (in) break;
            in = lo == (unsigned long)(uintptr_t)addr;
            continue;
        }
        unsigned long long v;
        if (in && (sscanf(line, "FilePmdMapped: %llu kB", &v) == 1 || sscanf(line, "AnonHugePages: %llu kB", &v) == 1))
            kib += v;
    }
    fclose(f);
    return kib * 1024u;
}

static int mmap_load(void *ctx, const char *const *files, int n_files, const bench_tensor_ref *t, int n,
                     const void **data, char *err, size_t errlen) {
    mmap_ctx *c = ctx;
    c->maps = calloc((size_t)n_files, sizeof(*c->maps));
    c->copies = calloc((size_t)(n ? n : 1), sizeof(*c->copies));
    if (!c->maps || !c->copies) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader mmap: out of memory");
    for (int f = 0; f < n_files; f++) {
        int fd = bench_open_model_file(c->host, files[f], O_RDONLY, err, errlen);
        if (fd < 0) return -BENCH_ERR_IO;
        struct stat st;
        if (fstat(fd, &st) || st.st_size == 0) {
            int e = errno;
            close(fd);
            return bench_errf(err, errlen, "%s: %s", files[f], st.st_size == 0 ? "empty file" : strerror(e));
        }
        int flags = (c->shared ? MAP_SHARED : MAP_PRIVATE) | (c->populate ? MAP_POPULATE : 0);
        const int huge = c->huge && (size_t)st.st_size >= MMAP_HUGE_ALIGN; /* a smaller file has no 2 MiB page */
        void *p = huge ? mmap_aligned((size_t)st.st_size, flags, fd) : mmap(NULL, (size_t)st.st_size, PROT_READ, flags, fd, 0);
        close(fd); /* the mapping keeps the file */
        if (p == MAP_FAILED) return bench_errc(err, errlen, errno == ENOMEM ? BENCH_ERR_NOMEM : BENCH_ERR_IO, "%s: mmap of %lld bytes: %s", files[f], (long long)st.st_size, strerror(errno));
        c->maps[f] = (mapping){p, (size_t)st.st_size, NULL, st};
        if (c->verify && !(c->maps[f].path = strdup(files[f]))) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader mmap: out of memory");
        c->n_maps = f + 1;
        c->bytes_mapped += (uint64_t)st.st_size;
        if (huge && madvise(p, (size_t)st.st_size, MADV_HUGEPAGE))
            bench_logf(c->host, "loader mmap: %s: madvise(MADV_HUGEPAGE): %s (continuing with small pages)", files[f], strerror(errno));
        if (c->advice >= 0 && madvise(p, (size_t)st.st_size, c->advice))
            bench_logf(c->host, "loader mmap: %s: madvise: %s (continuing)", files[f], strerror(errno));
        if (c->mlock_ && mlock(p, (size_t)st.st_size))
            return bench_errf(err, errlen, "%s: mlock of %lld bytes: %s (raise RLIMIT_MEMLOCK, or drop mlock=1)",
                              files[f], (long long)st.st_size, strerror(errno));
        if (c->touch) mmap_touch(c->host, p, (size_t)st.st_size);
        c->huge_bytes += mmap_pmd_bytes(p);
    }
    for (int i = 0; i < n; i++) {
        const mapping *m = &c->maps[t[i].file];
        if (t[i].offset > m->len || t[i].nbytes > m->len - t[i].offset)
            return bench_errf(err, errlen, "%s: tensor %s [%llu, +%llu) lies past the end of the file (%zu bytes)",
                              files[t[i].file], t[i].name, (unsigned long long)t[i].offset,
                              (unsigned long long)t[i].nbytes, m->len);
        const uint8_t *p = (const uint8_t *)m->addr + t[i].offset;
        if ((uintptr_t)p % bench_dtype_align(t[i].dtype) == 0) {
            data[i] = p;
            c->zero_copy++;
            continue;
        }
        void *copy = NULL;
        if (posix_memalign(&copy, 64, (size_t)t[i].nbytes ? (size_t)t[i].nbytes : 64))
            return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader mmap: out of memory copying misaligned tensor %s", t[i].name);
        memcpy(copy, p, (size_t)t[i].nbytes);
        c->copies[c->n_copies++] = copy;
        c->bytes_copied += t[i].nbytes;
        data[i] = copy;
    }
    return 0;
}

/* verify=1: a file truncated under the mapping faults (SIGBUS); one replaced by a
 * rename, or rewritten in place to the same length, does not, and the run read what is
 * no longer at that path. Checked once, after the run, and said on stderr. */
static void mmap_verify(mmap_ctx *c) {
    if (!c->verify || c->reported) return;
    c->reported = 1;
    for (int i = 0; i < c->n_maps; i++) {
        const mapping *m = &c->maps[i];
        struct stat now;
        const char *why = NULL;
        if (stat(m->path, &now)) why = strerror(errno);
        else if (now.st_dev != m->st.st_dev || now.st_ino != m->st.st_ino) why = "replaced by another file";
        else if (now.st_size != m->st.st_size) why = "its size changed";
        else if (now.st_mtim.tv_sec != m->st.st_mtim.tv_sec || now.st_mtim.tv_nsec != m->st.st_mtim.tv_nsec)
            why = "modified (mtime changed)";
        if (!why) continue;
        c->changed++;
        fprintf(stderr, "loader mmap: verify: %s changed during the run: %s (loaded: %lld bytes)\n", m->path, why,
                (long long)m->st.st_size);
    }
}

static void mmap_counters(void *ctx, const bench_counter_sink *s) {
    mmap_ctx *c = ctx;
    mmap_verify(c);
    if (c->verify) bench_emit(s, "files_changed", "count", (double)c->changed);
    bench_emit(s, "bytes_mapped", "B", (double)c->bytes_mapped);
    bench_emit_as(s, "zero_copy_tensors", "count", BENCH_CTR_EXACT, BENCH_BETTER_HIGHER, (double)c->zero_copy);
    bench_emit_as(s, "copied_tensors", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->n_copies);
    bench_emit(s, "bytes_copied", "B", (double)c->bytes_copied);
    /* how much of the weights decode reads through 2 MiB entries: the page cache's folio sizes
     * decide it as much as huge=1 does, so it is measured, not assumed */
    bench_emit(s, "huge_bytes", "B", (double)c->huge_bytes);
}

/* A tensor in a file's mapping is the file's pages, mapped read-only: shared with the page
 * cache (mode=shared), or this process's own until written (mode=private). A misaligned
 * tensor's aligned copy is this process's heap. */
static int mmap_memory_kind(void *ctx, const void *p, size_t len) {
    const mmap_ctx *c = ctx;
    const uintptr_t at = (uintptr_t)p;
    for (int i = 0; i < c->n_maps; i++) {
        const uintptr_t lo = (uintptr_t)c->maps[i].addr;
        if (at >= lo && at - lo < c->maps[i].len && len <= c->maps[i].len - (at - lo))
            return c->shared ? BENCH_LOADER_MEM_SHARED : BENCH_LOADER_MEM_PRIVATE_RO;
    }
    for (int i = 0; i < c->n_copies; i++)
        if (c->copies[i] == p) return BENCH_LOADER_MEM_PRIVATE;
    return BENCH_LOADER_MEM_UNKNOWN;
}

static void mmap_close(void *ctx) {
    mmap_ctx *c = ctx;
    if (!c) return;
    mmap_verify(c);
    for (int i = 0; i < c->n_maps; i++) {
        if (c->maps[i].addr) munmap(c->maps[i].addr, c->maps[i].len);
        free(c->maps[i].path);
    }
    for (int i = 0; i < c->n_copies; i++) free(c->copies[i]);
    free(c->maps);
    free(c->copies);
    free(c);
}

static const struct bench_loader_iface mmap_iface = {
    .version = BENCH_LOADER_IFACE_VERSION,
    .open = mmap_open,
    .load = mmap_load,
    .counters = mmap_counters,
    .close = mmap_close,
    .memory_kind = mmap_memory_kind,
};

static const bench_module mmap_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "loader",
    .name = LOADER_MMAP_NAME,
    .summary = "mmap(2) each file and use tensors in place (weights are file pages, RssFile)",
    .devices = "cpu",
    .caps = BENCH_CAP_LOADER_MAPS_FILE,
    .options = mmap_options,
    .opts_size = sizeof(mmap_opts),
    .iface = &mmap_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &mmap_module; }
