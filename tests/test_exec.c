/* bench exec and the instructions:callgrind metric, through the bench binary.
 *
 * Choosing the variant and running it in process work on any build ($BENCH_BIN).
 * Memcheck and callgrind cannot run an ASan binary, so those tests take a release
 * bench: $BENCH_RELEASE_BIN, else ./build/bench (which `make test` builds after
 * the ASan build), with its own modules; they skip, saying why, when there is no
 * such binary or no valgrind.
 *   - memcheck: no errors and no definite/indirect leaks for every variant of
 *     scenarios/ci.json;
 *   - two identical runs of a scenario asking for "instructions:callgrind" give
 *     identical instruction counts per phase, which add up to the total, and the
 *     counts reach results.json (schema-valid);
 *   - bench exec --loop 3 decodes three times: 3x the decode instructions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/parent/callgrind.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

typedef struct fx {
    char tmp[512];
    char model[600], tok[600];
    char release[PATH_MAX];     /* a non-sanitizer bench, or "" */
    char release_mods[PATH_MAX + 16];
    char why_no_release[512];
} fx;

/* 1 when the binary was built with AddressSanitizer (valgrind cannot run it). */
static int is_asan(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    static const char needle[] = "__asan_init";
    char buf[65536 + sizeof(needle)];
    size_t keep = 0, n;
    int found = 0;
    while (!found && (n = fread(buf + keep, 1, 65536, f)) > 0) {
        n += keep;
        for (size_t i = 0; i + sizeof(needle) - 1 <= n && !found; i++)
            found = !memcmp(buf + i, needle, sizeof(needle) - 1);
        keep = sizeof(needle) - 1 < n ? sizeof(needle) - 1 : n;
        memmove(buf, buf + n - keep, keep);
    }
    fclose(f);
    return found;
}

static void find_release(fx *f) {
    const char *env = getenv("BENCH_RELEASE_BIN");
    char cand[PATH_MAX];
    if (env && *env) snprintf(cand, sizeof(cand), "%s", env);
    else if (!getcwd(cand, sizeof(cand) - 16)) cand[0] = 0;
    else strcat(cand, "/build/bench");
    char vg[1024];
    if (!tu_on_path("valgrind", vg, sizeof(vg))) {
        snprintf(f->why_no_release, sizeof(f->why_no_release), "valgrind is not installed (scripts/deps.sh)");
    } else if (access(cand, X_OK)) {
        snprintf(f->why_no_release, sizeof(f->why_no_release),
                 "no release bench at %.200s (set BENCH_RELEASE_BIN, or `make` first)", cand);
    } else if (is_asan(cand)) {
        snprintf(f->why_no_release, sizeof(f->why_no_release), "%.200s is an ASan build; valgrind cannot run it", cand);
    } else {
        snprintf(f->release, sizeof(f->release), "%s", cand);
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", cand);
        snprintf(f->release_mods, sizeof(f->release_mods), "%s/modules", dirname(dir));
    }
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok))) {
        free(f);
        *state = NULL; /* every test skips, naming the file */
        return 0;
    }
    if (!tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        return -1;
    }
    /* synth models of scenarios/ci.json go here, not into the tree's results/ */
    char cache[700];
    snprintf(cache, sizeof(cache), "%s/models", f->tmp);
    setenv("BENCH_MODEL_CACHE", cache, 1);
    find_release(f);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

/* A shell command line; returns its exit status (-1: did not exit). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path) {
    char err[256];
    return ut_slurp(path, SIZE_MAX, NULL, err, sizeof(err));
}

/* The stories260K scenario: pread and mmap, a short prompt and 12 tokens, one thread. */
static const char *story_scenario(fx *f, const char *name, const char *metrics) {
    static char path[700];
    snprintf(path, sizeof(path), "%s/%s.json", f->tmp, name);
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    fprintf(o,
            "{\"name\": \"%s\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"},"
            " \"workload\": {\"prompt\": \"The little dog\", \"generate\": 12}, \"cache\": \"warm\","
            " \"repetitions\": 1, \"warmup\": 0, \"threads\": 1, \"matrix\": {\"loader\": [\"pread\", \"mmap\"]}%s%s}",
            name, f->model, f->tok, metrics ? ", \"metrics\": " : "", metrics ? metrics : "");
    fclose(o);
    return path;
}

/* ---- choosing the variant ---- */

static void test_exec_variant_choice(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    char out[700], err[700];
    snprintf(out, sizeof(out), "%s/which.out", f->tmp);
    snprintf(err, sizeof(err), "%s/which.err", f->tmp);

    /* two of ci.json's four variants are pread: not one, so an error that lists them */
    assert_int_equal(tu_bench(out, "exec scenarios/ci.json --variant loader=pread 2>'%s'", err), 2);
    char *e = slurp(err);
    assert_non_null(e);
    assert_non_null(strstr(e, "matches 2 variants"));
    assert_non_null(strstr(e, "loader=pread,kv=prealloc"));
    assert_non_null(strstr(e, "loader=pread,kv=dynamic"));
    assert_null(strstr(e, "loader=mmap,kv=prealloc"));
    free(e);

    /* no --variant on a scenario of 4: the error lists all 4 */
    assert_int_equal(tu_bench(out, "exec scenarios/ci.json 2>'%s'", err), 2);
    e = slurp(err);
    assert_non_null(e);
    assert_non_null(strstr(e, "has 4 variants"));
    assert_non_null(strstr(e, "loader=mmap,kv=dynamic"));
    free(e);

    /* a value the scenario does not have: named, with what there is */
    assert_int_equal(tu_bench(out, "exec scenarios/ci.json --variant loader=mmpa 2>'%s'", err), 2);
    e = slurp(err);
    assert_non_null(e);
    assert_non_null(strstr(e, "\"mmpa\""));
    assert_non_null(strstr(e, "have: pread, mmap"));
    free(e);

    /* --which: the scenario's name and the one variant's key, nothing run */
    assert_int_equal(tu_bench(out, "exec scenarios/ci.json --variant kv=dynamic,loader=mmap --which 2>'%s'", err), 0);
    char *o = slurp(out);
    assert_non_null(o);
    assert_string_equal(o, "ci\tloader=mmap,kv=dynamic\n");
    free(o);
}

/* One repetition in process: every phase, the modules' counters, exit 0. */
static void test_exec_runs_one_variant(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    const char *sc = story_scenario(f, "story", NULL);
    char err[700];
    snprintf(err, sizeof(err), "%s/exec.err", f->tmp);
    assert_int_equal(tu_bench("/dev/null", "exec '%s' --variant loader=pread 2>'%s'", sc, err), 0);
    char *e = slurp(err);
    assert_non_null(e);
    assert_non_null(strstr(e, "variant 0 (loader=pread)"));
    const char *want[] = {"load_end", "prefill_end", "decode_end", "loader.bytes_read", "done"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!strstr(e, want[i])) fprintf(stderr, "missing \"%s\" in:\n%s\n", want[i], e);
        assert_non_null(strstr(e, want[i]));
    }
    free(e);
    /* --loop needs a count */
    assert_int_equal(tu_bench("/dev/null", "exec '%s' --variant loader=pread --loop 0 2>/dev/null", sc), 2);
}

/* "instructions:callgrind" with more than one thread would count spinning: refused. */
static void test_callgrind_needs_one_thread(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    char path[700], err[700];
    snprintf(path, sizeof(path), "%s/threads2.json", f->tmp);
    snprintf(err, sizeof(err), "%s/threads2.err", f->tmp);
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"t2\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 2},"
               " \"cache\": \"warm\", \"threads\": 2, \"metrics\": [\"instructions:callgrind\"]}", f->model);
    fclose(o);
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s/t2' 2>'%s'", path, f->tmp, err), 2);
    char *e = slurp(err);
    assert_non_null(e);
    assert_non_null(strstr(e, ".threads: \"instructions:callgrind\" needs threads 1"));
    free(e);
}

/* ---- under valgrind: the release binary ---- */

static void test_memcheck_ci_variants(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    if (!f->release[0]) {
        fprintf(stderr, "skipped: %s\n", f->why_no_release);
        skip();
    }
    static const char *variants[] = {"loader=pread,kv=prealloc", "loader=pread,kv=dynamic", "loader=mmap,kv=prealloc",
                                     "loader=mmap,kv=dynamic"};
    /* the synth model first, outside valgrind (generating it is not what is checked) */
    assert_int_equal(sh("BENCH_MODULE_PATH='%s' '%s' exec scenarios/ci.json --variant %s 2>/dev/null", f->release_mods,
                        f->release, variants[0]), 0);
    for (int i = 0; i < 4; i++) {
        char log[700];
        snprintf(log, sizeof(log), "%s/memcheck%d.log", f->tmp, i);
        int rc = sh("BENCH_MODULE_PATH='%s' valgrind --quiet --error-exitcode=99 --leak-check=full "
                    "--errors-for-leak-kinds=definite,indirect --log-file='%s' '%s' exec scenarios/ci.json --variant %s "
                    "2>/dev/null",
                    f->release_mods, log, f->release, variants[i]);
        if (rc) {
            char *l = slurp(log);
            fprintf(stderr, "memcheck on %s: exit %d\n%s\n", variants[i], rc, l ? l : "");
            free(l);
        }
        assert_int_equal(rc, 0);
    }
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static double instr(const cJSON *summary_variant, const char *name) {
    const cJSON *m = get(get(summary_variant, "metrics"), name);
    assert_non_null(m);
    assert_string_equal(get(m, "unit")->valuestring, "count");
    assert_int_equal(get(m, "n")->valueint, 1);
    return get(m, "median")->valuedouble;
}

static void test_instructions_identical_twice(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    if (!f->release[0]) {
        fprintf(stderr, "skipped: %s\n", f->why_no_release);
        skip();
    }
    const char *sc = story_scenario(f, "instr", "[\"timeline\", \"instructions:callgrind\"]");
    cJSON *doc[2];
    for (int k = 0; k < 2; k++) {
        char out[700];
        snprintf(out, sizeof(out), "%s/instr_run%d", f->tmp, k);       /* the same length: the same path work */
        assert_int_equal(sh("BENCH_MODULE_PATH='%s' '%s' run '%s' --out '%s' >/dev/null 2>&1", f->release_mods,
                            f->release, sc, out), 0);
        char p[800];
        snprintf(p, sizeof(p), "%s/results.json", out);
        doc[k] = hjs_load(p);
        assert_non_null(doc[k]);
    }
    assert_int_equal(hjs_results_violations(doc[0]), 0);

    static const char *names[] = {"instructions_load", "instructions_prefill", "instructions_decode", "instructions_total"};
    const cJSON *s0 = get(doc[0], "summary"), *s1 = get(doc[1], "summary");
    assert_int_equal(cJSON_GetArraySize(s0), 2);
    for (int v = 0; v < 2; v++) {
        const cJSON *a = cJSON_GetArrayItem(s0, v), *b = cJSON_GetArrayItem(s1, v);
        for (int k = 0; k < 4; k++) {
            double x = instr(a, names[k]), y = instr(b, names[k]);
            if (x != y) fprintf(stderr, "%s %s: %.0f then %.0f\n", get(a, "key")->valuestring, names[k], x, y);
            assert_true(x == y);
            assert_true(x > 1000);
        }
        /* the raw record: the phases add up to the whole process */
        const cJSON *ins = get(get(cJSON_GetArrayItem(get(doc[0], "variants"), v), "callgrind"), "instructions");
        assert_non_null(ins);
        double sum = 0;
        for (int ph = 0; ph < CG_PH_COUNT; ph++) {
            const cJSON *n = get(ins, cg_phase_name(ph));
            assert_non_null(n);
            sum += n->valuedouble;
        }
        assert_true(sum == get(ins, "total")->valuedouble);
        assert_true(instr(a, "instructions_total") == sum);
    }
    cJSON_Delete(doc[0]);
    cJSON_Delete(doc[1]);
}

/* bench exec --callgrind under callgrind: --loop 3 is three decodes of the same positions. */
static void test_exec_loop_decodes_n_times(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    if (!f->release[0]) {
        fprintf(stderr, "skipped: %s\n", f->why_no_release);
        skip();
    }
    const char *sc = story_scenario(f, "loop", NULL);
    uint64_t decode[2];
    for (int k = 0; k < 2; k++) {
        char out[700];
        snprintf(out, sizeof(out), "%s/loop%d.cg", f->tmp, k);
        assert_int_equal(sh("BENCH_MODULE_PATH='%s' valgrind --tool=callgrind --callgrind-out-file='%s' '%s' exec '%s' "
                            "--variant loader=mmap --callgrind --loop %d >/dev/null 2>&1",
                            f->release_mods, out, f->release, sc, k ? 3 : 1), 0);
        cg_counts c;
        char err[512];
        if (cg_parse(out, &c, err, sizeof(err))) fprintf(stderr, "%s\n", err);
        assert_int_equal(c.ok, 1);
        decode[k] = c.ir[CG_PH_DECODE];
    }
    double ratio = (double)decode[1] / (double)decode[0];
    fprintf(stderr, "decode instructions: loop 1 %llu, loop 3 %llu (x%.4f)\n", (unsigned long long)decode[0],
            (unsigned long long)decode[1], ratio);
    assert_true(ratio > 2.97 && ratio < 3.03);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_variant_choice),
        cmocka_unit_test(test_exec_runs_one_variant),
        cmocka_unit_test(test_callgrind_needs_one_thread),
        cmocka_unit_test(test_memcheck_ci_variants),
        cmocka_unit_test(test_instructions_identical_twice),
        cmocka_unit_test(test_exec_loop_decodes_n_times),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
