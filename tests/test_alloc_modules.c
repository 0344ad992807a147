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
#include <pthread.h>
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

/* The alloc modules found on the module path, as the registry loads them: a module dropped
 * into the folder is checked here with no edit to this file. */
static modreg reg;
static void load_registry(void) {
    if (reg.n) return;
    char warn[4096], err[512];
    if (modreg_open_all(tu_module_dir(), &reg, warn, sizeof(warn), err, sizeof(err))) fail_msg("%s", err);
}

static int close_registry(void **state) {
    (void)state;
    modreg_close(&reg);
    return 0;
}

static const modreg_entry *find_alloc(const char *name) {
    load_registry();
    for (int i = 0; i < reg.n; i++)
        if (!strcmp(reg.v[i].mod->family, "alloc") && !strcmp(reg.v[i].mod->name, name)) return &reg.v[i];
    return NULL;
}

/* create with opts "k=v,...", through the host's option filling; returns 0 or the code. */
static int create_with(const bench_module *m, const char *text, void **ctx, char *err, size_t errlen) {
    bench_opts o;
    void *storage = NULL, *filled = NULL;
    *ctx = NULL;
    int rc = modreg_parse_opts(text, &o, &storage, err, errlen);
    if (!rc) rc = modreg_fill_opts(m, &o, &filled, err, errlen);
    if (!rc) rc = ((const bench_alloc_iface *)m->iface)->create(filled, ctx, err, errlen);
    free(storage);
    free(filled);
    return rc;
}

static long rss_pages(void) {
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &size, &resident) != 2) fail_msg("cannot read /proc/self/statm");
    fclose(f);
    return resident;
}

typedef struct mt_arg { const bench_allocator *a; int seed, bad; } mt_arg;

/* One thread's share of the thread-safety contract: its blocks keep their bytes while the
 * other thread allocates and frees. */
static void *mt_worker(void *p) {
    mt_arg *t = p;
    enum { K = 64 };
    unsigned char *blk[K] = {0};
    size_t sz[K] = {0};
    for (int r = 0; r < 4000; r++) {
        int i = (r * 31 + t->seed) % K;
        if (blk[i]) {
            for (size_t j = 0; j < sz[i]; j++)
                if (blk[i][j] != (unsigned char)(t->seed + i)) t->bad++;
            bench_free(t->a, blk[i], sz[i]);
            blk[i] = NULL;
        } else {
            sz[i] = (size_t)(16 + (r * 7) % 2000);
            blk[i] = bench_alloc(t->a, sz[i], 16);
            if (!blk[i]) { t->bad++; continue; }
            memset(blk[i], t->seed + i, sz[i]);
        }
    }
    for (int i = 0; i < K; i++)
        if (blk[i]) bench_free(t->a, blk[i], sz[i]);
    return NULL;
}

/* The allocator contract, for one module: the registration, alignment from 8 to 4096, the
 * bytes kept, statistics that count every call, reuse of freed memory (or, with
 * BENCH_CAP_ALLOC_RESET, of reset memory), and with BENCH_CAP_ALLOC_THREAD_SAFE two threads
 * at once. opts: "k=v,..." to keep the address space small where a module reserves it. */
static void alloc_contract(const modreg_entry *e, const char *opts) {
    const bench_module *m = e->mod;
    const bench_alloc_iface *ai = m->iface;
    assert_int_equal(ai->version, BENCH_ALLOC_IFACE_VERSION);
    assert_non_null(m->summary);
    assert_non_null(strstr(m->devices, "cpu"));
    for (const bench_option *o = m->options; o && o->name; o++) assert_non_null(o->def);
    char err[256] = "";
    void *ctx = NULL;
    if (create_with(m, opts, &ctx, err, sizeof(err))) fail_msg("alloc_%s: create: %s", m->name, err);
    bench_allocator a = {ai, ctx};
    enum { N = 300 };
    void *p[N];
    size_t sz[N];
    for (int i = 0; i < N; i++) {
        sz[i] = (size_t)(1 + (i * 7919) % (i % 10 == 9 ? 200000 : 3000));
        size_t align = (size_t)8 << (i % 10);   /* 8 .. 4096 */
        p[i] = bench_alloc(&a, sz[i], align);
        if (!p[i]) fail_msg("alloc_%s: %zu bytes aligned %zu: NULL", m->name, sz[i], align);
        if ((uintptr_t)p[i] % align) fail_msg("alloc_%s: %p is not aligned to %zu", m->name, p[i], align);
        memset(p[i], i & 0xff, sz[i]);
    }
    for (int i = 0; i < N; i++) {
        if (((unsigned char *)p[i])[0] != (i & 0xff) || ((unsigned char *)p[i])[sz[i] - 1] != (i & 0xff))
            fail_msg("alloc_%s: block %d lost its bytes", m->name, i);
        bench_free(&a, p[i], sz[i]);
    }
    bench_free(&a, NULL, 0);
    counters c = {0};
    if (ai->counters) {
        bench_counter_sink sink = {.emit = sink_emit, .user = &c};
        ai->counters(ctx, &sink);
        double v;
        if (!counter(&c, "allocs", &v) || (long)v != N) fail_msg("alloc_%s: counter allocs is not %d", m->name, N);
        if (!counter(&c, "frees", &v) || (long)v != N) fail_msg("alloc_%s: counter frees is not %d", m->name, N);
        if (!(m->caps & BENCH_CAP_ALLOC_RESET) && (!counter(&c, "bytes_live", &v) || v != 0))
            fail_msg("alloc_%s: bytes_live is not 0 after every block was freed", m->name);
        if (!counter(&c, "bytes_peak", &v) || !(v > 0)) fail_msg("alloc_%s: no bytes_peak", m->name);
    }
    /* reuse: 1 GiB of 1 MiB blocks, each touched and then freed (or reset), must not grow
     * the resident set by anything like 1 GiB (256 MiB of slack covers ASan's quarantine) */
    long rss0 = rss_pages();
    for (int i = 0; i < 1024; i++) {
        unsigned char *b = bench_alloc(&a, 1u << 20, 64);
        if (!b) fail_msg("alloc_%s: 1 MiB block %d: NULL", m->name, i);
        for (size_t o = 0; o < (1u << 20); o += 4096) b[o] = (unsigned char)i;
        if (m->caps & BENCH_CAP_ALLOC_RESET) ai->reset(ctx);
        else bench_free(&a, b, 1u << 20);
    }
    long grown = (rss_pages() - rss0) * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
    if (grown > 384) fail_msg("alloc_%s: 1 GiB allocated and freed in 1 MiB blocks grew RSS by %ld MiB: freed memory is not reused",
                              m->name, grown);
    if (m->caps & BENCH_CAP_ALLOC_THREAD_SAFE) {
        pthread_t th[2];
        mt_arg arg[2] = {{&a, 1, 0}, {&a, 2, 0}};
        for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, mt_worker, &arg[i]), 0);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        if (arg[0].bad || arg[1].bad) fail_msg("alloc_%s declares thread-safe, but two threads lost %d bytes", m->name,
                                                arg[0].bad + arg[1].bad);
    }
    ai->destroy(ctx);
    ai->destroy(NULL);
}

/* Every alloc module found passes the contract. */
static void test_every_alloc_module_passes_the_contract(void **s) {
    (void)s;
    load_registry();
    int n = 0;
    for (int i = 0; i < reg.n; i++) {
        const modreg_entry *e = &reg.v[i];
        if (strcmp(e->mod->family, "alloc")) continue;
        /* a module that reserves address space gets a small region: the contract is not about size */
        char opts[256] = "";
        for (const bench_option *o = e->mod->options; o && o->name; o++)
            if (!strcmp(o->name, "region") && o->type == BENCH_OPT_SIZE) snprintf(opts, sizeof(opts), "region=64m");
        print_message("alloc_%s (%s)\n", e->mod->name, e->path);
        alloc_contract(e, opts);
        n++;
    }
    assert_true(n >= 6);    /* the six of engines/modules at least */
}

static void test_arena_nogrow(void **s) {
    (void)s;
    const modreg_entry *e = find_alloc("arena");
    if (!e) skip();
    const bench_alloc_iface *ai = e->mod->iface;
    void *ctx = NULL;
    char err[256];
    assert_int_equal(create_with(e->mod, "chunk=8k,grow=0", &ctx, err, sizeof(err)), 0);
    int n = 0;
    while (ai->alloc(ctx, 1000, 16)) n++;
    assert_true(n >= 7 && n <= 8);
    ai->reset(ctx);
    assert_non_null(ai->alloc(ctx, 1000, 16));
    ai->destroy(ctx);
}

/* Bad options are refused with a message naming the module and the option: by the host,
 * from the typed table (type, range), or by the module for what the table cannot say. */
static void test_bad_options(void **s) {
    (void)s;
    struct { const char *mod, *opts, *want; } bad[] = {
        {"arena", "chunk=lots", "alloc arena: option chunk=lots: expected a size"},
        {"arena", "grow=maybe", "alloc arena: option grow=maybe: expected a bool"},
        {"slab", "region=1x", "alloc slab: option region=1x: expected a size"},
        {"slab", "region=4k", "alloc slab: option region=4k: expected a size (e.g. 4096, 64k, 1m) in 65536..70368744177664"},
        {"buddy", "cache=65", "alloc buddy: option cache=65: expected a whole number in 0..64"},
        {"buddy", "region=0", "alloc buddy: option region=0: expected a size"},
        {"buddy", "min_block=48", "alloc buddy: option min_block=48: expected a power of two"},
        {"jemalloc", "dirty_decay_ms=soon", "alloc jemalloc: option dirty_decay_ms=soon: expected a whole number in -1.."},
        {"libc", "mmap_threshold=64m", "alloc libc: option mmap_threshold=64m: expected a size (e.g. 4096, 64k, 1m) in 0..33554432"},
        {"libc", "colour=blue", "alloc libc: unknown option \"colour\" (have: trim_threshold, mmap_threshold, timing)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const modreg_entry *e = find_alloc(bad[i].mod);
        if (!e) continue;
        void *ctx = NULL;
        char err[256] = "";
        assert_true(create_with(e->mod, bad[i].opts, &ctx, err, sizeof(err)) < 0);
        assert_null(ctx);
        if (!strstr(err, bad[i].want)) fail_msg("unclear error for %s %s: %s (want %s)", bad[i].mod, bad[i].opts, err, bad[i].want);
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
    assert_true(modreg_load(dir, "kv", "badver", &e, err, sizeof(err)) < 0);
    char want[160];     /* the range this bench takes moves with kv.h */
    if (BENCH_KV_IFACE_MIN_VERSION == BENCH_KV_IFACE_VERSION)
        snprintf(want, sizeof(want), "kv_badver.so: kv interface version 99, this bench takes %u: rebuild the module",
                 (unsigned)BENCH_KV_IFACE_VERSION);
    else
        snprintf(want, sizeof(want), "kv_badver.so: kv interface version 99, this bench takes %u..%u: rebuild the module",
                 (unsigned)BENCH_KV_IFACE_MIN_VERSION, (unsigned)BENCH_KV_IFACE_VERSION);
    if (!strstr(err, want))
        fail_msg("unclear error: %s", err);
    assert_true(modreg_load(dir, "alloc", "badver", &e, err, sizeof(err)) < 0);
    char want1[160];
    snprintf(want1, sizeof(want1), "alloc_badver.so: alloc interface version 99, this bench takes %u: rebuild the module",
             (unsigned)BENCH_ALLOC_IFACE_VERSION);
    if (!strstr(err, want1))
        fail_msg("unclear error: %s", err);
    /* bench list and the scenario checks skip it with the same reason */
    modreg r;
    char warn[8192];
    assert_int_equal(modreg_open_all(dir, &r, warn, sizeof(warn), err, sizeof(err)), 0);
    for (int i = 0; i < r.n; i++) assert_string_not_equal(r.v[i].mod->name, "badver");
    assert_non_null(strstr(warn, "kv interface version 99"));
    assert_non_null(strstr(warn, "alloc interface version 99"));
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
        cmocka_unit_test(test_every_alloc_module_passes_the_contract),
        cmocka_unit_test(test_arena_nogrow),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_iface_version_checked_at_load),
        cmocka_unit_test(test_modules_export_only_init),
    };
    return cmocka_run_group_tests(tests, NULL, close_registry);
}
