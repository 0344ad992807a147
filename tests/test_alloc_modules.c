/* The alloc modules as the driver sees them: dlopen each from $BENCH_MODULE_PATH,
 * check the registration, allocate and free through the vtable, read the counters.
 *
 * jemalloc's shared library needs surplus static TLS to be dlopen'ed (see
 * alloc_jemalloc.c), which glibc sizes at process start: main() re-executes this
 * test once with GLIBC_TUNABLES set when it is missing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engines/abi/kv.h"

#include <dirent.h>
#include <libgen.h>

#include "engines/abi/alloc.h"
#include "engines/core/runtime/modreg.h"
#include "tests/lib/testutil.h"

#define TLS_TUNABLE "glibc.rtld.optional_static_tls=16384"

typedef struct counters { char names[32][32]; double v[32]; int n; } counters;

static void sink_emit(void *user, const char *name, const char *unit, double value) {
    (void)unit;
    counters *c = user;
    if (c->n < 32) {
        snprintf(c->names[c->n], sizeof(c->names[0]), "%s", name);
        c->v[c->n++] = value;
    }
}

static int counter(const counters *c, const char *name, double *out) {
    for (int i = c->n - 1; i >= 0; i--)
        if (!strcmp(c->names[i], name)) { *out = c->v[i]; return 1; }
    return 0;
}

static void *open_module(const char *name, const bench_module **out) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/alloc_%s.so", tu_module_dir(), name);
    if (access(path, R_OK)) {
        print_message("alloc_%s: %s not built, skipped\n", name, path);
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) fail_msg("dlopen %s: %s", path, dlerror());
    bench_module_init_fn init = (bench_module_init_fn)(uintptr_t)dlsym(h, BENCH_MODULE_INIT_SYMBOL);
    if (!init) fail_msg("%s: no %s", path, BENCH_MODULE_INIT_SYMBOL);
    const bench_module *m = init();
    assert_non_null(m);
    if (m->api_version != BENCH_MODULE_API_VERSION)
        fail_msg("%s: api_version %u, driver %u", path, m->api_version, BENCH_MODULE_API_VERSION);
    assert_string_equal(m->family, "alloc");
    assert_string_equal(m->name, name);
    assert_non_null(m->summary);
    assert_string_equal(m->devices, "cpu");
    for (const bench_option_desc *o = m->options; o && o->name; o++) assert_non_null(o->def);
    *out = m;
    return h;
}

/* Allocates a mix of sizes and alignments, fills, checks, frees; counters must agree. */
static void exercise(const char *name, const bench_opt *opt, int n_opt) {
    const bench_module *m = NULL;
    void *h = open_module(name, &m);
    if (!h) skip();
    const bench_alloc_iface *ai = m->iface;
    assert_int_equal(ai->version, BENCH_ALLOC_IFACE_VERSION);
    assert_non_null(ai->create);
    assert_non_null(ai->alloc);
    assert_non_null(ai->free);
    assert_non_null(ai->destroy);
    bench_opts opts = {n_opt, opt};
    char err[256] = "";
    void *ctx = NULL;
    if (ai->create(&opts, &ctx, err, sizeof(err))) fail_msg("alloc_%s: create: %s", name, err);
    bench_allocator a = {ai, ctx};
    enum { N = 300 };
    void *p[N];
    size_t sz[N];
    for (int i = 0; i < N; i++) {
        sz[i] = (size_t)(1 + (i * 7919) % (i % 10 == 9 ? 200000 : 3000));
        size_t align = (size_t)8 << (i % 10);   /* 8 .. 4096 */
        p[i] = bench_alloc(&a, sz[i], align);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % align, 0);
        memset(p[i], i & 0xff, sz[i]);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(((unsigned char *)p[i])[sz[i] - 1], i & 0xff);
        bench_free(&a, p[i], sz[i]);
    }
    bench_free(&a, NULL, 0);
    counters c = {0};
    if (ai->counters) {
        bench_counter_sink sink = {.emit = sink_emit, .user = &c};
        ai->counters(ctx, &sink);
        double v;
        assert_true(counter(&c, "allocs", &v));
        assert_int_equal((long)v, N);
        assert_true(counter(&c, "frees", &v));
        assert_int_equal((long)v, N);
        if (strcmp(name, "arena")) {   /* the arena's blocks stay live until reset */
            assert_true(counter(&c, "bytes_live", &v));
            assert_int_equal((long)v, 0);
        }
        assert_true(counter(&c, "bytes_peak", &v));
        assert_true(v > 0);
    }
    if (ai->reset) {
        ai->reset(ctx);
        assert_non_null(bench_alloc(&a, 64, 64));
        ai->reset(ctx);
    }
    ai->destroy(ctx);
    ai->destroy(NULL);
    /* Modules stay loaded: under ASan their frames must still symbolize at exit. */
}

static void test_arena(void **s) { (void)s; exercise("arena", (bench_opt[]){{"chunk", "64k"}}, 1); }
static void test_arena_nogrow(void **s) {
    (void)s;
    const bench_module *m = NULL;
    void *h = open_module("arena", &m);
    if (!h) skip();
    const bench_alloc_iface *ai = m->iface;
    bench_opt o[] = {{"chunk", "8k"}, {"grow", "0"}};
    bench_opts opts = {2, o};
    void *ctx = NULL;
    char err[256];
    assert_int_equal(ai->create(&opts, &ctx, err, sizeof(err)), 0);
    int n = 0;
    while (ai->alloc(ctx, 1000, 16)) n++;
    assert_true(n >= 7 && n <= 8);
    ai->reset(ctx);
    assert_non_null(ai->alloc(ctx, 1000, 16));
    ai->destroy(ctx);
}
static void test_slab(void **s) { (void)s; exercise("slab", (bench_opt[]){{"region", "64m"}}, 1); }
static void test_buddy(void **s) { (void)s; exercise("buddy", (bench_opt[]){{"region", "64m"}, {"min_block", "32"}}, 2); }
static void test_jemalloc(void **s) { (void)s; exercise("jemalloc", NULL, 0); }
static void test_mimalloc(void **s) { (void)s; exercise("mimalloc", NULL, 0); }
static void test_libc(void **s) { (void)s; exercise("libc", NULL, 0); }

/* Bad options are refused with a message naming the module and the option. */
static void test_bad_options(void **s) {
    (void)s;
    struct { const char *mod, *key, *val; } bad[] = {
        {"arena", "chunk", "lots"}, {"arena", "grow", "maybe"}, {"slab", "region", "1x"},
        {"buddy", "min_block", "48"}, {"buddy", "region", "0"}, {"jemalloc", "dirty_decay_ms", "soon"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const bench_module *m = NULL;
        if (!open_module(bad[i].mod, &m)) continue;
        const bench_alloc_iface *ai = m->iface;
        bench_opt o = {bad[i].key, bad[i].val};
        bench_opts opts = {1, &o};
        void *ctx = NULL;
        char err[256] = "";
        assert_int_equal(ai->create(&opts, &ctx, err, sizeof(err)), -1);
        assert_null(ctx);
        if (!strstr(err, bad[i].mod) || !strstr(err, bad[i].key)) fail_msg("unclear error for %s %s=%s: %s", bad[i].mod, bad[i].key, bad[i].val, err);
    }
}

/* A module whose family interface version is outside what this bench takes is refused when it
 * loads, with both numbers (tests/modules/badver.c, built as <family>_badver.so). */
static void test_iface_version_checked_at_load(void **state) {
    (void)state;
    char dir[4096], mods[4096];
    snprintf(mods, sizeof(mods), "%s", tu_module_dir());
    snprintf(dir, sizeof(dir), "%s/test-modules", dirname(mods));
    modreg_entry e;
    char err[1024];
    assert_int_equal(modreg_load(dir, "kv", "badver", &e, err, sizeof(err)), -1);
    char want[160];     /* the range this bench takes moves with kv.h (version 3: attn_f16) */
    snprintf(want, sizeof(want), "kv_badver.so: kv interface version 99, this bench takes %u..%u: rebuild the module",
             (unsigned)BENCH_KV_IFACE_MIN_VERSION, (unsigned)BENCH_KV_IFACE_VERSION);
    if (!strstr(err, want))
        fail_msg("unclear error: %s", err);
    assert_int_equal(modreg_load(dir, "alloc", "badver", &e, err, sizeof(err)), -1);
    if (!strstr(err, "alloc_badver.so: alloc interface version 99, this bench takes 1: rebuild the module"))
        fail_msg("unclear error: %s", err);
    /* bench list and the scenario checks skip it with the same reason */
    modreg r;
    char warn[4096];
    assert_int_equal(modreg_open_all(dir, &r, warn, sizeof(warn), err, sizeof(err)), 0);
    assert_int_equal(r.n, 0);
    assert_non_null(strstr(warn, "kv interface version 99"));
    modreg_close(&r);
}

/* Every module built exports its init symbol and nothing else (-fvisibility=hidden,
 * BENCH_MODULE_EXPORT): `nm -D --defined-only`, less the linker's own _-names. */
static void test_modules_export_only_init(void **state) {
    (void)state;
    const char *top = tu_module_dir();
    const char *subs[] = {"", "/cuda"};
    int seen = 0;
    for (int s = 0; s < 2; s++) {
        char d[4096];
        snprintf(d, sizeof(d), "%s%s", top, subs[s]);
        DIR *dh = opendir(d);
        if (!dh) continue;
        struct dirent *de;
        while ((de = readdir(dh))) {
            size_t n = strlen(de->d_name);
            if (n < 4 || strcmp(de->d_name + n - 3, ".so")) continue;
            char cmd[8400], line[512];
            snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s/%s' 2>&1", d, de->d_name);
            FILE *p = popen(cmd, "r");
            assert_non_null(p);
            int init = 0;
            while (fgets(line, sizeof(line), p)) {
                char addr[64], type[8], name[400] = "";
                if (sscanf(line, "%63s %7s %399s", addr, type, name) != 3) fail_msg("%s: nm: %s", de->d_name, line);
                if (name[0] == '_') continue;
                if (!strcmp(name, BENCH_MODULE_INIT_SYMBOL)) init++;
                else fail_msg("%s/%s exports %s", d, de->d_name, name);
            }
            assert_int_equal(pclose(p), 0);
            assert_int_equal(init, 1);
            seen++;
        }
        closedir(dh);
    }
    assert_true(seen >= 12);    /* the CPU modules at least */
}

int main(int argc, char **argv) {
    (void)argc;
    const char *t = getenv("GLIBC_TUNABLES");
    if (!t || !strstr(t, "optional_static_tls")) {
        char buf[1024];
        snprintf(buf, sizeof(buf), "%s%s%s", t ? t : "", t && *t ? ":" : "", TLS_TUNABLE);
        setenv("GLIBC_TUNABLES", buf, 1);
        execv("/proc/self/exe", argv);
        perror("test_alloc_modules: re-exec with GLIBC_TUNABLES");   /* go on: jemalloc will fail to load */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_arena_nogrow),
        cmocka_unit_test(test_slab),
        cmocka_unit_test(test_buddy),
        cmocka_unit_test(test_jemalloc),
        cmocka_unit_test(test_mimalloc),
        cmocka_unit_test(test_libc),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_iface_version_checked_at_load),
        cmocka_unit_test(test_modules_export_only_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
