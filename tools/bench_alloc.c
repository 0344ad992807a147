/* A quick allocator microbenchmark, not part of the test suite: ns per alloc+free pair
 * through the alloc module vtable (as the engine calls it), one allocator and one
 * workload per process.
 *
 *   make tools
 *   GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 build/tools/bench_alloc MODULE.so WORKLOAD
 *
 * Workloads: churn64 (alloc 64 B, free it), lifo4k (1000 x 4 KiB allocated, then freed
 * newest first), mixed (1000 slots; each op frees a random slot and refills it with a
 * size from a power law over 16 B..64 KiB). The arena's free is a no-op: it is reset
 * every 1000 pairs instead, and the reset is inside the timing.
 * Prints: workload, ns per pair, minor faults per pair. Warm-up: one untimed pass. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engines/abi/alloc.h"
#include "util/ut_clock.h"

static double now_s(void) { return (double)ut_now_ns() * 1e-9; }
static long minflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

enum { SLOTS = 1000 };

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s MODULE.so churn64|lifo4k|mixed\n", argv[0]); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    bench_module_init_fn init = (bench_module_init_fn)(uintptr_t)dlsym(h, BENCH_MODULE_INIT_SYMBOL);
    const bench_module *m = init();
    const bench_alloc_iface *ai = m->iface;
    char err[256];
    void *ctx;
    bench_opts opts = {0, NULL};
    if (ai->create(&opts, &ctx, err, sizeof(err))) { fprintf(stderr, "%s\n", err); return 1; }
    void *(*al)(void *, size_t, size_t) = ai->alloc;
    void (*fr)(void *, void *, size_t) = ai->free;
    void (*reset)(void *) = ai->reset;
    const char *w = argv[2];
    static void *slot[SLOTS];
    static size_t slot_sz[SLOTS];
    size_t n_sizes = 1 << 16;
    size_t *sizes = malloc(n_sizes * sizeof(*sizes));
    uint32_t *idx = malloc(n_sizes * sizeof(*idx));
    for (size_t i = 0; i < n_sizes; i++) {
        unsigned lg = 4 + (unsigned)(next() % 13);   /* 16 B .. 64 KiB, uniform in log2 */
        size_t b = (size_t)1 << lg;
        sizes[i] = b + next() % b;
        if (sizes[i] > 65536) sizes[i] = 65536;
        idx[i] = (uint32_t)(next() % SLOTS);
    }
    long pairs = !strcmp(w, "churn64") ? 20000000 : !strcmp(w, "lifo4k") ? 200000 : 4000000;
    double t = 0;
    long f0 = 0;
    for (int pass = 0; pass < 2; pass++) {   /* pass 0 warms up */
        f0 = minflt();
        double t0 = now_s();
        if (!strcmp(w, "churn64")) {
            for (long i = 0; i < pairs; i++) {
                void *p = al(ctx, 64, 16);
                *(volatile char *)p = 1;
                fr(ctx, p, 64);
                if (reset && (i % SLOTS) == SLOTS - 1) reset(ctx);
            }
        } else if (!strcmp(w, "lifo4k")) {
            for (long r = 0; r < pairs / SLOTS; r++) {
                for (int i = 0; i < SLOTS; i++) { slot[i] = al(ctx, 4096, 16); *(volatile char *)slot[i] = 1; }
                for (int i = SLOTS - 1; i >= 0; i--) { fr(ctx, slot[i], 4096); slot[i] = NULL; }
                if (reset) reset(ctx);
            }
        } else {
            for (long i = 0; i < pairs; i++) {
                size_t k = idx[i & (n_sizes - 1)], s = sizes[i & (n_sizes - 1)];
                if (slot[k]) fr(ctx, slot[k], slot_sz[k]);
                slot[k] = al(ctx, s, 16);
                *(volatile char *)slot[k] = 1;
                slot_sz[k] = s;
                if (reset && (i % SLOTS) == SLOTS - 1) {
                    reset(ctx);
                    memset(slot, 0, sizeof(slot));
                }
            }
        }
        t = now_s() - t0;
    }
    long faults = minflt() - f0;
    for (int k = 0; k < SLOTS; k++) if (slot[k] && !reset) fr(ctx, slot[k], slot_sz[k]);
    printf("%s %s ns_per_pair=%.2f minflt_per_pair=%.4f\n", m->name, w, t * 1e9 / (double)pairs, (double)faults / (double)pairs);
    ai->destroy(ctx);
    free(sizes);
    free(idx);
    return 0;
}
