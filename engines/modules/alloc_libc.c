/* alloc "libc": glibc malloc as the baseline every other allocator is compared with.
 * Counts what passes through it; the timing of each call is optional because
 * two clock reads cost more than a cached malloc/free pair. */
#include <malloc.h>
#include <time.h>

#include "engines/abi/alloc.h"
#include "util/ut_clock.h"

/* tests/test_abi.c builds this file as another module too ("libc2"): the host must treat it
 * as thread-safe by its capability, not its name */
#ifndef ALLOC_LIBC_NAME
#define ALLOC_LIBC_NAME "libc"
#endif

typedef struct libc_opts {
    uint64_t trim_threshold, mmap_threshold;
    int timing;
} libc_opts;

static const bench_option libc_options[] = {
    BENCH_OPTION_SIZE(libc_opts, trim_threshold, "0", 0, 1ll << 46, "M_TRIM_THRESHOLD (0: glibc's default); heap trimming makes every step refault"),
    /* glibc caps M_MMAP_THRESHOLD at HEAP_MAX/2 (32 MiB on 64-bit) and ignores a larger one */
    BENCH_OPTION_SIZE(libc_opts, mmap_threshold, "0", 0, 32ll << 20, "M_MMAP_THRESHOLD (0: glibc's default, 128 KiB rising with freed "
                      "sizes; at most 32m, glibc's limit); blocks above it are mmap'd and unmapped (faults) every time"),
    BENCH_OPTION_BOOL(libc_opts, timing, "0", "time every call with clock_gettime (costs ~2x20 ns per call)"),
    BENCH_OPTION_END,
};

typedef struct libc_ctx {
    int timing;
    uint64_t allocs, frees, bytes_live, bytes_peak, ns;
} libc_ctx;

static uint64_t now_ns(void) { return (uint64_t)ut_now_ns(); }

static int libc_create(const void *opts, void **out, char *err, size_t errlen) {
    const libc_opts *o = opts;
    uint64_t trim = o->trim_threshold, mmap_thr = o->mmap_threshold;
    int timing = o->timing;
    libc_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc libc: out of memory");
    c->timing = timing;
    if (trim) mallopt(M_TRIM_THRESHOLD, (int)(trim > 0x7fffffff ? 0x7fffffff : trim));
    if (mmap_thr) mallopt(M_MMAP_THRESHOLD, (int)mmap_thr);
    *out = c;
    return 0;
}

/* The counts every call makes (the module's counters). */
static inline void libc_count_alloc(libc_ctx *c, size_t size) {
    c->allocs++;
    c->bytes_live += size;
    if (c->bytes_live > c->bytes_peak) c->bytes_peak = c->bytes_live;
}

/* The timed variants are out of line, so an untimed call (the default) pays one test of
 * c->timing, and a free is a tail call into the allocator. */
__attribute__((noinline, cold)) static void *libc_alloc_timed(libc_ctx *c, size_t size, size_t align) {
    uint64_t t0 = now_ns();
    void *p = NULL;
    if (posix_memalign(&p, align, size)) p = NULL;
    c->ns += now_ns() - t0;
    if (p) libc_count_alloc(c, size);
    return p;
}

static void *libc_alloc(void *ctx, size_t size, size_t align) {
    libc_ctx *c = ctx;
    if (__builtin_expect(c->timing, 0)) return libc_alloc_timed(c, size, align);
    void *p = NULL;
    if (posix_memalign(&p, align, size)) p = NULL;
    if (p) libc_count_alloc(c, size);
    return p;
}

__attribute__((noinline, cold)) static void libc_free_timed(libc_ctx *c, void *p) {
    uint64_t t0 = now_ns();
    free(p);
    c->ns += now_ns() - t0;
}

static void libc_free(void *ctx, void *p, size_t size) {
    libc_ctx *c = ctx;
    if (!p) return;
    c->frees++;
    c->bytes_live -= size;
    if (__builtin_expect(c->timing, 0)) {
        libc_free_timed(c, p);
        return;
    }
    free(p);
}

static void libc_counters(void *ctx, const bench_counter_sink *s) {
    libc_ctx *c = ctx;
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->allocs);
    bench_emit_as(s, "frees", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->frees);
    bench_emit(s, "bytes_live", "B", (double)c->bytes_live);
    bench_emit(s, "bytes_peak", "B", (double)c->bytes_peak);
    if (c->timing) bench_emit(s, "time_in_alloc", "ns", (double)c->ns);
}

static void libc_destroy(void *ctx) { free(ctx); }

static const struct bench_alloc_iface libc_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .create = libc_create,
    .alloc = libc_alloc,
    .free = libc_free,
    .reset = NULL, /* malloc cannot drop everything at once */
    .counters = libc_counters,
    .destroy = libc_destroy,
};

static const bench_module libc_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "alloc",
    .name = ALLOC_LIBC_NAME,
    .summary = "glibc malloc/free (posix_memalign), the baseline",
    .devices = "cpu",
    .caps = BENCH_CAP_ALLOC_THREAD_SAFE,
    .options = libc_options,
    .opts_size = sizeof(libc_opts),
    .score = NULL,
    .iface = &libc_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &libc_module; }
