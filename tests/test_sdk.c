/* The SDK as a module author meets it (docs/modules.md): `make install` into a temporary
 * prefix, examples/module-skeleton copied out of the tree and built there against the
 * installed headers through pkg-config alone, then the installed bench lists it with its
 * options, runs it, and the conformance suite (the KV contract, the stories260K oracle on
 * every loader, the k256 set) passes on it with no test naming it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testutil.h"

typedef struct fx { char tmp[512], prefix[700], skel[700], repo[4096]; } fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f || !tu_tmpdir(f->tmp, sizeof(f->tmp)) || !getcwd(f->repo, sizeof(f->repo))) { free(f); return -1; }
    snprintf(f->prefix, sizeof(f->prefix), "%s/prefix", f->tmp);
    snprintf(f->skel, sizeof(f->skel), "%s/my-module", f->tmp);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    tu_rmtree(f->tmp);
    free(f);
    return 0;
}

/* Runs a shell command line (make's variables from an enclosing `make test` cleared, so the
 * inner make is a user's own); returns its exit status, its output in log. */
static int sh(const fx *f, const char *log, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(const fx *f, const char *log, const char *fmt, ...) {
    char body[8192], cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "cd '%s' && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS sh -c '%s' >'%s' 2>&1", f->repo, body, log);
    int rc = system(cmd);
    if (!WIFEXITED(rc) || WEXITSTATUS(rc)) {
        char tail[600];
        snprintf(tail, sizeof(tail), "tail -30 '%s' >&2", log);
        if (system(tail)) {}
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int has(const char *path, const char *needle) {
    FILE *fp = fopen(path, "r");
    if (!fp) return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof(line), fp)) found = strstr(line, needle) != NULL;
    fclose(fp);
    return found;
}

static void test_out_of_tree_module_builds_and_passes_conformance(void **state) {
    fx *f = *state;
    struct stat st;
    if (stat("build/bench", &st)) {
        fprintf(stderr, "skip: build/bench (the release build, make all) is missing\n");
        skip();
    }
    if (system("command -v pkg-config >/dev/null 2>&1")) {
        fprintf(stderr, "skip: pkg-config is not installed (scripts/deps.sh installs it)\n");
        skip();
    }
    char log[800], out[800];
    snprintf(log, sizeof(log), "%s/log", f->tmp);
    /* 1. the SDK into a fresh prefix, with DESTDIR staging as a packager does */
    assert_int_equal(sh(f, log, "make -s install PREFIX=%s DESTDIR=%s/stage", f->prefix, f->tmp), 0);
    char staged[1400];
    snprintf(staged, sizeof(staged), "%s/stage%s/include/bench/kv.h", f->tmp, f->prefix);
    assert_int_equal(stat(staged, &st), 0);
    assert_int_equal(sh(f, log, "make -s install PREFIX=%s", f->prefix), 0);
    /* 2. the skeleton, outside the tree, built from the installed SDK alone */
    assert_int_equal(sh(f, log, "cp -r examples/module-skeleton %s && make -C %s clean && make -C %s PKG_CONFIG_PATH=%s/lib/pkgconfig",
                        f->skel, f->skel, f->skel, f->prefix), 0);
    char so[800];
    snprintf(so, sizeof(so), "%s/kv_skeleton.so", f->skel);
    assert_int_equal(stat(so, &st), 0);
    char moddir[1500], path[3000];
    snprintf(moddir, sizeof(moddir), "%s/lib/bench/modules", f->prefix);
    snprintf(path, sizeof(path), "%s:%s", f->skel, moddir);
    /* 3. the installed bench finds it beside its own modules, with its options */
    snprintf(out, sizeof(out), "%s/list", f->tmp);
    assert_int_equal(sh(f, out, "BENCH_MODULE_PATH=%s %s/bin/bench list", path, f->prefix), 0);
    assert_true(has(out, "skeleton   example out-of-tree module"));
    assert_true(has(out, "max_seqs        int 1..4096"));
    assert_true(has(out, "prealloc"));
    /* 4. the conformance suite on it, and on nothing else: no test names it */
    char model[512], tok[512];
    int shared = tu_shared("models/stories260K.bin", model, sizeof(model)) && tu_shared("models/tok512.bin", tok, sizeof(tok));
    const char *bin_dir = getenv("BENCH_BIN");
    char tests[4096];
    snprintf(tests, sizeof(tests), "%s", bin_dir ? bin_dir : "build/asan/bench");
    char *slash = strrchr(tests, '/');
    if (slash) snprintf(slash, sizeof(tests) - (size_t)(slash - tests), "/tests");
    snprintf(out, sizeof(out), "%s/contract", f->tmp);
    assert_int_equal(sh(f, out, "BENCH_MODULE_PATH=%s BENCH_CONFORMANCE=kv=skeleton %s/test_kv_contract", path, tests), 0);
    assert_true(has(out, "kv skeleton, f32 K / f32 V: store/attend/memory"));
    if (!shared) {
        fprintf(stderr, "skip: the oracle and k256 parts need the shared models (missing %s)\n", tu_missing());
        skip();
    }
    snprintf(out, sizeof(out), "%s/oracle", f->tmp);
    assert_int_equal(sh(f, out, "BENCH_MODULE_PATH=%s BENCH_CONFORMANCE=kv=skeleton BENCH_TEST_FILTER=test_llama2c_every_loader_and_kv "
                                "%s/test_engine", path, tests), 0);
    assert_true(has(out, "[  PASSED  ] 1 test(s)."));
    snprintf(out, sizeof(out), "%s/k256", f->tmp);
    assert_int_equal(sh(f, out, "BENCH_MODULE_PATH=%s BENCH_CONFORMANCE=kv=skeleton BENCH_TEST_FILTER=test_k256_every_type "
                                "%s/test_k256", path, tests), 0);
    assert_true(has(out, "[  PASSED  ] 1 test(s)."));
    /* 5. and a user runs it: the same greedy ids as the built-in prealloc with an f32 cache, the
     * one type the skeleton stores, which the default (f16) falls back to for it */
    char a[800], b[800];
    snprintf(a, sizeof(a), "%s/ids-skeleton", f->tmp);
    snprintf(b, sizeof(b), "%s/ids-prealloc", f->tmp);
    const char *gen = "BENCH_MODULE_PATH=%s %s/bin/bench generate --model %s --tokenizer %s --prompt \"The little dog\" "
                      "--steps 120 --ids --quiet --kv %s";
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), gen, path, f->prefix, model, tok, "skeleton");
    assert_int_equal(sh(f, a, "%s", cmd), 0);
    snprintf(cmd, sizeof(cmd), gen, path, f->prefix, model, tok, "prealloc --cache-type f32");
    assert_int_equal(sh(f, b, "%s", cmd), 0);
    snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
    assert_int_equal(system(cmd), 0);
}

/* A prefix with a space installs an SDK the skeleton builds against (bench.pc quotes its
 * include folder); one with a quote or a ':' is refused before anything is built or copied,
 * naming the character, where it used to half install and then fail in the shell. */
static void test_install_prefix_spaces_and_quotes(void **state) {
    fx *f = *state;
    struct stat st;
    if (stat("build/bench", &st) || system("command -v pkg-config >/dev/null 2>&1")) {
        fprintf(stderr, "skip: build/bench (make all) or pkg-config is missing\n");
        skip();
    }
    char cmd[16384], log[800], prefix[800], skel[800], so[900];
    snprintf(log, sizeof(log), "%s/log2", f->tmp);
    snprintf(prefix, sizeof(prefix), "%s/with space/pre fix", f->tmp);
    snprintf(skel, sizeof(skel), "%s/skel dir", f->tmp);
    const char *clean = "env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS";
    snprintf(cmd, sizeof(cmd), "cd '%s' && %s make -s install PREFIX=\"%s\" >'%s' 2>&1", f->repo, clean, prefix, log);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "cp -r '%s/examples/module-skeleton' \"%s\" && %s make -C \"%s\" clean >/dev/null && "
             "%s make -C \"%s\" PKG_CONFIG_PATH=\"%s/lib/pkgconfig\" >'%s' 2>&1", f->repo, skel, clean, skel, clean, skel, prefix, log);
    int rc = system(cmd);
    if (rc) {
        snprintf(cmd, sizeof(cmd), "cat '%s' >&2", log);
        if (system(cmd)) {}
    }
    assert_int_equal(rc, 0);
    snprintf(so, sizeof(so), "%s/kv_skeleton.so", skel);
    assert_int_equal(stat(so, &st), 0);
    static const char *const bad[] = {"it's", "a:b", "back\\slash"};
    for (int i = 0; i < 3; i++) {
        snprintf(prefix, sizeof(prefix), "%s/%s", f->tmp, bad[i]);
        /* the prefix inside double quotes: the shell passes ' and : as they are */
        snprintf(cmd, sizeof(cmd), "cd '%s' && %s make install PREFIX=\"%s\" >'%s' 2>&1", f->repo, clean, prefix, log);
        assert_int_not_equal(system(cmd), 0);
        assert_true(has(log, "may not hold a quote, backtick, backslash or ':'"));
        assert_true(has(log, "nothing was installed"));
        assert_int_not_equal(stat(prefix, &st), 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_of_tree_module_builds_and_passes_conformance),
        cmocka_unit_test(test_install_prefix_spaces_and_quotes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
