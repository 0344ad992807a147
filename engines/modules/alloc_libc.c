/* alloc "libc": glibc malloc as the baseline every other allocator is compared with.
 * Counts what passes through it; the timing of each call is optional because
 * two clock reads cost more than a cached malloc/free pair. */
#include <malloc.h>

#include "common/alloc_mod.h"

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
    BENCH_OPTION_ALLOC_TIMING(libc_opts),
    BENCH_OPTION_END,
};

static int libc_create(const void *opts, void **out, char *err, size_t errlen) {
    const libc_opts *o = opts;
    uint64_t trim = o->trim_threshold, mmap_thr = o->mmap_threshold;
    alloc_mod *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "alloc libc: out of memory");
    c->timing = o->timing;
    if (trim) mallopt(M_TRIM_THRESHOLD, (int)(trim > 0x7fffffff ? 0x7fffffff : trim));
    if (mmap_thr) mallopt(M_MMAP_THRESHOLD, (int)mmap_thr);
    *out = c;
    return 0;
}

static void *libc_op_alloc(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = NULL;
    return posix_memalign(&p, align, size) ? NULL : p;
}
static void libc_op_free(void *ctx, void *p, size_t size) {
    (void)ctx, (void)size;
    free(p);
}
static const alloc_mod_ops libc_ops = {.alloc = libc_op_alloc, .free = libc_op_free, .counts = 1};

static void *libc_alloc(void *ctx, size_t size, size_t align) { return alloc_mod_alloc(ctx, &libc_ops, size, align); }
static void libc_free(void *ctx, void *p, size_t size) { alloc_mod_free(ctx, &libc_ops, p, size); }

static void libc_counters(void *ctx, const bench_counter_sink *s) {
    alloc_mod *c = ctx;
    alloc_mod_emit_counts(s, &c->counted);
    alloc_mod_emit_time(c, s);
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
