/* The KV interface's contract, for every kv module found on the module path (tu_modules:
 * none is named here, so a module dropped into a module folder is checked with no edit):
 *   - the registration: capabilities and slots agree (modreg.c refused it otherwise), f32 is
 *     among its cache types;
 *   - store and attend against a float64 reference, prefill-shaped (n > 1) and decode-shaped
 *     (n = 1), on three sequences interleaved;
 *   - the memory slot: used is exactly the stored positions' bytes, reserved covers it,
 *     wasted and cached are inside it, and release gives the positions back;
 *   - reserve past the context is refused with a message, and leaves the sequence usable;
 *   - with BENCH_CAP_KV_PREFIX_SHARE, a released prefix is attached to a new sequence and
 *     attends as if stored; with BENCH_CAP_KV_FORK, two forked sequences diverge
 *     (copy-on-write) and each attends over its own positions;
 *   - all of it in every cache type the module declares (kv.h cache_types), K and V alike and
 *     one mixed pair, with the K/V data first rounded to the type by the core's own
 *     conversion (kn_quant_row), so that the float64 reference sees what the cache holds;
 *     a head size the type cannot hold (q8_0 with 20) is refused with BENCH_ERR_REFUSED.
 * BENCH_CONFORMANCE=kv=NAME narrows the list (the SDK test runs it on an out-of-tree module).
 * The checks are tests/lib/kv_contract.h's, which test_kv_types also runs on a module compiled
 * with its made-up element type. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/lib/kv_contract.h"

static void test_every_kv_module_keeps_the_contract(void **state) {
    (void)state;
    const char *const *kvs;
    int nk = tu_modules("kv", &kvs);
    for (int k = 0; k < nk; k++) kvt_contract(kvs[k]);
}

/* The shared pool is a declared capability, not an option's name: with a host budget in
 * bench_kv_shape.pool_bytes, every module declaring BENCH_CAP_KV_SHARED_POOL sizes its pool
 * from it (reserved within one block of the budget), and one that does not declare it is
 * never handed one. */
static void test_shared_pool_is_a_capability(void **state) {
    (void)state;
    const char *const *kvs;
    int nk = tu_modules("kv", &kvs), pooled = 0;
    for (int k = 0; k < nk; k++) {
        bench_kv_shape s = contract_shapes[0];
        kvt t;
        kvt_must_open(&t, kvs[k], &s, "");
        int has = !!(t.ent.mod->caps & BENCH_CAP_KV_SHARED_POOL);
        kvt_close(&t);
        if (!has) continue;
        pooled++;
        const size_t tb = kvt_token_bytes(&s);
        s.pool_bytes = 100 * tb + tb / 2;
        kvt_must_open(&t, kvs[k], &s, "");
        bench_kv_memory m = mem_of(&t);
        if (m.reserved > s.pool_bytes || m.reserved + 64 * tb < s.pool_bytes)
            fail_msg("kv %s: a host budget of %llu bytes gave a pool of %llu", kvs[k], (unsigned long long)s.pool_bytes,
                     (unsigned long long)m.reserved);
        kvt_close(&t);
    }
    print_message("%d kv module(s) with a shared pool\n", pooled);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kv_module_keeps_the_contract),
        cmocka_unit_test(test_shared_pool_is_a_capability),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
