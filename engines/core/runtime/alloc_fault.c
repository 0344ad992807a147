/* An allocator that fails every Nth call (alloc_fault.h). */
#include "engines/core/runtime/alloc_fault.h"

#include <stdlib.h>
#include <string.h>

static void *af_alloc(void *ctx, size_t size, size_t align) {
    af_state *st = ctx;
    st->calls++;
    if (st->every && st->calls % st->every == 0) {
        st->failed++;
        return NULL;
    }
    return st->inner.iface->alloc(st->inner.ctx, size, align);
}

static void af_free(void *ctx, void *p, size_t size) {
    af_state *st = ctx;
    st->inner.iface->free(st->inner.ctx, p, size);
}

/* create/destroy belong to the inner allocator's owner: never called through the wrapper */
static const struct bench_alloc_iface af_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .alloc = af_alloc,
    .free = af_free,
};

void af_wrap(af_state *st, const bench_allocator *inner, uint64_t every) {
    st->inner = *inner;
    st->every = every;
    st->calls = st->failed = 0;
    st->self = (bench_allocator){&af_iface, st};
}

uint64_t af_every_from_env(void) {
    const char *hooks = getenv("BENCH_TEST_HOOKS"), *n = getenv("BENCH_TEST_ALLOC_FAIL_EVERY");
    if (!hooks || strcmp(hooks, "1") || !n || !*n) return 0;
    char *end;
    unsigned long long v = strtoull(n, &end, 10);
    return *end ? 0 : (uint64_t)v;
}
