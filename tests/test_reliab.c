/* Reliability (docs/reliability.md): what bench does when its inputs and its
 * machine turn hostile, shown on real runs.
 *   - every input the fuzzers ever crashed on (fuzz/regress/<target>/), replayed
 *     through the fuzz targets' own code under ASan+UBSan: a clean error now;
 *   - the committed seeds parse (the fuzzers start from valid files);
 *   - a full disk while results are written (injected ENOSPC): a clear error, the
 *     last results.json intact and holding the finished repetitions, exit 1;
 *   - the model truncated under a mapped run (SIGBUS): bench run records the run
 *     as failed with that cause and goes on; bench generate and bench exec print one
 *     line naming the file and exit 4;
 *   - every Nth allocation refused inside each allocator module: the engine reports
 *     it and frees what it had (LSan checks the frees at exit);
 *   - a scenario (or a results.json) cannot run commands: a variant label in
 *     backquotes reaches gnuplot harmless, and a module name cannot leave the module
 *     directory;
 *   - a scenario cannot make bench read outside the allowed folders (a symlink beside
 *     it is followed first): run, exec and plan refuse it, --allow-read allows it.
 * Faults come from test hooks (BENCH_TEST_HOOKS=1, see mapguard.h, alloc_fault.h,
 * results.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines/core/model/model.h"
#include "engines/core/runtime/engine.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "fuzz/targets.h"
#include "harness/child/mapguard.h"
#include "harness/report/plot.h"
#include "tests/lib/harness_jsonschema.h"
#include "engines/abi/module.h"
#include "engines/abi/loader.h"
#include "engines/core/runtime/modreg.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char tmp[512];
    char model[600];        /* a private copy: the tests truncate it */
    char src[512], tok[512];
} fx;

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int rc = 0;
    if (!a || !b) rc = -1;
    char buf[65536];
    size_t n;
    while (!rc && (n = fread(buf, 1, sizeof(buf), a)) > 0)
        if (fwrite(buf, 1, n, b) != n) rc = -1;
    if (a) fclose(a);
    if (b && fclose(b)) rc = -1;
    return rc;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f || !tu_shared("models/stories260K.bin", f->src, sizeof(f->src)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) || !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        return -1;
    }
    snprintf(f->model, sizeof(f->model), "%s/model.bin", f->tmp);
    setenv("BENCH_TEST_HOOKS", "1", 1);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

/* A fresh copy of stories260K (the previous test may have truncated it). */
static void fresh_model(fx *f) {
    assert_int_equal(copy_file(f->src, f->model), 0);
}

static const char *scenario_file(fx *f, const char *name, const char *body) {
    static char path[700];
    snprintf(path, sizeof(path), "%s/%s.json", f->tmp, name);
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"%s\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, %s}", name, f->model, f->tok, body);
    fclose(o);
    return path;
}

static char *slurp(const char *path) {
    size_t n;
    char err[256];
    return rr_slurp(path, &n, err, sizeof(err));
}

static const char *str_at(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* ---- fuzz regressions and seeds ---- */

typedef int (*fzt_fn)(const uint8_t *, size_t, char *, size_t);

static int scenario_target(const uint8_t *d, size_t n, char *err, size_t errlen) {
    return fzt_scenario(d, n, tu_module_dir(), err, errlen);
}

static const struct { const char *name; fzt_fn fn; } targets[] = {
    {"fuzz_gguf", fzt_gguf}, {"fuzz_llama2c", fzt_llama2c}, {"fuzz_safetensors", fzt_safetensors},
    {"fuzz_scenario", scenario_target}, {"fuzz_results", fzt_results}, {"fuzz_pretok", fzt_pretok},
    {"fuzz_kernels", fzt_kernels}, {"fuzz_trace", fzt_trace}, {"fuzz_sse", fzt_sse}, {"fuzz_prom", fzt_prom},
};

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Runs every file of dir/<target>/ through its target; want_ok: the parser must accept
 * it (seeds), else reject it with a message holding the .expect file's text. Returns
 * the number of inputs. */
static int replay(const char *dir, int want_ok) {
    int total = 0;
    for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
        char d[600];
        snprintf(d, sizeof(d), "%s/%s", dir, targets[t].name);
        DIR *dp = opendir(d);
        if (!dp) continue;
        struct dirent *de;
        while ((de = readdir(dp))) {
            if (de->d_name[0] == '.' || has_suffix(de->d_name, ".expect")) continue;
            char p[1200], ep[1300], err[1024] = "";
            snprintf(p, sizeof(p), "%s/%s", d, de->d_name);
            size_t n;
            char *data = rr_slurp(p, &n, err, sizeof(err));
            assert_non_null(data);
            err[0] = 0;
            int rc = targets[t].fn((const uint8_t *)data, n, err, sizeof(err));
            free(data);
            if (rc) fail_msg("%s: rejected without a message", p);
            if (want_ok && err[0]) fail_msg("seed %s does not parse: %s", p, err);
            if (!want_ok) {
                snprintf(ep, sizeof(ep), "%s.expect", p);
                char *want = slurp(ep);
                if (!want) fail_msg("%s: no %s saying what the error must hold", p, ep);
                if (!strstr(err, want)) fail_msg("%s: error \"%s\" does not hold \"%s\"", p, err, want);
                free(want);
            }
            total++;
        }
        closedir(dp);
    }
    return total;
}

static void test_fuzz_regressions(void **state) {
    (void)state;
    int n = replay("fuzz/regress", 0);
    fprintf(stderr, "replayed %d crash inputs\n", n);
    assert_true(n >= 1);
}

static void test_fuzz_seeds_parse(void **state) {
    (void)state;
    /* the scenario seeds name modules (CUDA ones too) that not every machine has: not replayed here */
    int n = 0;
    for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
        if (!strcmp(targets[t].name, "fuzz_scenario")) continue;
        char d[600];
        snprintf(d, sizeof(d), "fuzz/corpus/%s", targets[t].name);
        DIR *dp = opendir(d);
        assert_non_null(dp);
        struct dirent *de;
        while ((de = readdir(dp))) {
            if (de->d_name[0] == '.') continue;
            char p[1200], err[1024] = "";
            snprintf(p, sizeof(p), "%s/%s", d, de->d_name);
            size_t len;
            char *data = rr_slurp(p, &len, err, sizeof(err));
            assert_non_null(data);
            err[0] = 0;
            assert_int_equal(targets[t].fn((const uint8_t *)data, len, err, sizeof(err)), 0);
            if (err[0]) fail_msg("seed %s does not parse: %s", p, err);
            free(data);
            n++;
        }
        closedir(dp);
    }
    assert_true(n >= 8);
}

/* ---- a full disk ---- */

static void test_enospc_keeps_last_results(void **state) {
    fx *f = *state;
    fresh_model(f);
    const char *sc = scenario_file(f, "enospc", "\"workload\": {\"prompt_tokens\": 4, \"generate\": 2}, \"cache\": \"warm\","
                                   " \"repetitions\": 4, \"warmup\": 0");
    char out2[700], log[800], results[800];
    snprintf(out2, sizeof(out2), "%s/out_enospc", f->tmp);
    snprintf(log, sizeof(log), "%s/enospc.log", f->tmp);
    snprintf(results, sizeof(results), "%s/results.json", out2);
    /* the disk fills after 5 files: the first repetition's are written, a later one's are not */
    setenv("BENCH_TEST_ENOSPC_AFTER", "5", 1);
    int rc = tu_bench("/dev/null", "run '%s' --out '%s' 2>'%s'", sc, out2, log);
    unsetenv("BENCH_TEST_ENOSPC_AFTER");
    assert_int_equal(rc, 1);
    char *msg = slurp(log);
    assert_non_null(msg);
    if (!strstr(msg, "No space left on device") || !strstr(msg, "nothing was replaced") || !strstr(msg, results))
        fail_msg("unclear disk-full error:\n%s", msg);
    /* the closing line says how many repetitions the kept file holds */
    const char *hold = strstr(msg, "it holds ");
    assert_non_null(hold);
    int held = -1, done = -1;
    assert_int_equal(sscanf(hold, "it holds %d of the %d", &held, &done), 2);
    free(msg);
    assert_int_equal(done, 4);
    assert_true(held >= 1 && held < 4);
    cJSON *doc = hjs_load(results);
    assert_non_null(doc);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "runs")), held);
    assert_string_equal(str_at(doc, "status"), "running");  /* the partial run, as last recorded */
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(doc, "runs")) assert_string_equal(str_at(r, "status"), "ok");
    assert_int_equal(hjs_results_violations(doc), 0);
    cJSON_Delete(doc);
    /* no temporary file left behind */
    DIR *dp = opendir(out2);
    assert_non_null(dp);
    struct dirent *de;
    while ((de = readdir(dp))) if (strstr(de->d_name, ".tmp.")) fail_msg("left behind: %s/%s", out2, de->d_name);
    closedir(dp);

    /* full from the start: nothing recorded, and bench says so */
    char out3[700];
    snprintf(out3, sizeof(out3), "%s/out_enospc0", f->tmp);
    snprintf(results, sizeof(results), "%s/results.json", out3);
    setenv("BENCH_TEST_ENOSPC_AFTER", "0", 1);
    rc = tu_bench("/dev/null", "run '%s' --out '%s' --repeat 1 2>'%s'", sc, out3, log);
    unsetenv("BENCH_TEST_ENOSPC_AFTER");
    assert_int_equal(rc, 1);
    msg = slurp(log);
    assert_non_null(msg);
    if (!strstr(msg, "results.json could not be written: none of the 1 repetitions done is recorded"))
        fail_msg("unclear disk-full error:\n%s", msg);
    free(msg);
    struct stat st;
    assert_int_not_equal(stat(results, &st), 0);
}

/* ---- the model truncated under a mapping ---- */

static void test_sigbus_run_recorded(void **state) {
    fx *f = *state;
    fresh_model(f);
    const char *sc = scenario_file(f, "sigbus", "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, \"cache\": \"warm\","
                                   " \"repetitions\": 1, \"warmup\": 0, \"matrix\": {\"loader\": [\"mmap\", \"pread\"]}");
    char out[700], results[800];
    snprintf(out, sizeof(out), "%s/out_sigbus", f->tmp);
    snprintf(results, sizeof(results), "%s/results.json", out);
    /* the mmap worker cuts the file to 4 KiB once loaded: its first forward faults */
    setenv("BENCH_TEST_TRUNCATE_MODEL", "4096", 1);
    int rc = tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", sc, out);
    unsetenv("BENCH_TEST_TRUNCATE_MODEL");
    assert_int_equal(rc, 1);
    cJSON *doc = hjs_load(results);
    assert_non_null(doc);
    assert_string_equal(str_at(doc, "status"), "complete");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(doc, "runs");
    assert_int_equal(cJSON_GetArraySize(runs), 2);
    const cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, 0), "processes"), 0);
    assert_string_equal(str_at(p0, "status"), "crash");
    const char *why = str_at(p0, "reason");
    if (!strstr(why, "SIGBUS") || !strstr(why, "changed under the mapping") || !strstr(why, f->model))
        fail_msg("the mmap run's cause does not say the model changed under it: %s", why);
    /* the next variant still ran: the file is short now, and its load says so */
    const cJSON *p1 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, 1), "processes"), 0);
    assert_string_equal(str_at(p1, "status"), "exit");
    if (!strstr(str_at(p1, "reason"), f->model)) fail_msg("the pread run's reason does not name the model: %s", str_at(p1, "reason"));
    assert_int_equal(hjs_results_violations(doc), 0);
    cJSON_Delete(doc);
}

static void test_sigbus_generate_one_line(void **state) {
    fx *f = *state;
    fresh_model(f);
    char log[800];
    snprintf(log, sizeof(log), "%s/gen.log", f->tmp);
    setenv("BENCH_TEST_TRUNCATE_MODEL", "4096", 1);
    int rc = tu_bench("/dev/null", "generate --model '%s' --tokenizer '%s' --loader mmap --steps 4 --threads 1 2>'%s'",
                      f->model, f->tok, log);
    unsetenv("BENCH_TEST_TRUNCATE_MODEL");
    assert_int_equal(rc, MG_EXIT_CHANGED);
    char *msg = slurp(log);
    assert_non_null(msg);
    if (count_lines(msg) != 1 || strncmp(msg, "bench generate: ", 16) || !strstr(msg, f->model) ||
        !strstr(msg, "changed under the mapping"))
        fail_msg("expected one line naming %s, got:\n%s", f->model, msg);
    free(msg);
}

static void test_sigbus_exec_one_line(void **state) {
    fx *f = *state;
    fresh_model(f);
    const char *sc = scenario_file(f, "sigbus_exec", "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, \"cache\": \"warm\","
                                   " \"matrix\": {\"loader\": [\"mmap\"]}, \"threads\": 1");
    char log[800];
    snprintf(log, sizeof(log), "%s/exec.log", f->tmp);
    setenv("BENCH_TEST_TRUNCATE_MODEL", "4096", 1);
    int rc = tu_bench("/dev/null", "exec '%s' 2>'%s'", sc, log);
    unsetenv("BENCH_TEST_TRUNCATE_MODEL");
    assert_int_equal(rc, MG_EXIT_CHANGED);
    char *msg = slurp(log);
    assert_non_null(msg);
    /* bench exec's own banner line first, then the one line about the file */
    const char *line = strstr(msg, "bench exec: /");
    if (!line || !strstr(line, f->model) || !strstr(line, "changed under the mapping") || count_lines(line) != 1)
        fail_msg("expected one line naming %s, got:\n%s", f->model, msg);
    free(msg);
}

/* loader mmap verify=1: a model replaced (renamed over) during the run does not fault,
 * the run reads the old file; verify says so after the run, and counts it. */
static void emit_changed(void *user, const char *name, const char *unit, double v) {
    (void)unit;
    if (!strcmp(name, "loader.files_changed")) *(double *)user = v;
}

static void test_mmap_verify_sees_replaced_model(void **state) {
    fx *f = *state;
    fresh_model(f);
    bench_opt vo[] = {{.key = "verify", .value = "1"}};
    engine_spec s = {.model_path = f->model, .tokenizer_path = f->tok, .loader = "mmap", .kv = "prealloc", .threads = 1,
                     .module_dir = tu_module_dir(), .loader_opts = {1, vo}};
    char err[1024], other[700];
    engine *e = NULL;
    assert_int_equal(engine_create(&s, &e, err, sizeof(err)), 0);
    double changed = -1;
    bench_counter_sink sink = {.emit = emit_changed, .user = &changed};
    /* nothing changed yet: a fresh engine's check finds nothing (then the check is spent) */
    engine *e2 = NULL;
    assert_int_equal(engine_create(&s, &e2, err, sizeof(err)), 0);
    engine_counters(e2, &sink);
    assert_true(changed == 0);
    engine_destroy(e2);
    /* a new copy renamed over the path, as a download or a convert would */
    snprintf(other, sizeof(other), "%s/model.new", f->tmp);
    assert_int_equal(copy_file(f->src, other), 0);
    assert_int_equal(rename(other, f->model), 0);
    int ids[4] = {1, 5, 6, 7};
    float *logits;
    assert_int_equal(engine_forward(e, 0, ids, 4, 0, &logits, err, sizeof(err)), 0);
    changed = -1;
    engine_counters(e, &sink);
    assert_true(changed == 1);
    engine_destroy(e);
}

/* ---- refused allocations ---- */

static void emit_calls(void *user, const char *name, const char *unit, double v) {
    (void)unit;
    if (!strcmp(name, "engine.alloc_fault_calls")) *(double *)user = v;
}

/* create, prefill 4 tokens, 3 decode steps, destroy. Returns 0, or -1 with err set. */
static int engine_pass(fx *f, const char *alloc, const char *kv, double *calls, char *err, size_t errlen) {
    engine_spec s = {.model_path = f->src, .tokenizer_path = f->tok, .loader = "pread", .kv = kv, .alloc = alloc,
                     .threads = 1, .module_dir = tu_module_dir()};
    engine *e = NULL;
    err[0] = 0;
    if (engine_create(&s, &e, err, errlen)) return -1;
    int ids[8] = {1, 5, 6, 7}, rc = 0;
    float *logits;
    if (engine_forward(e, 0, ids, 4, 0, &logits, err, errlen)) rc = -1;
    for (int k = 0; !rc && k < 3; k++)
        if (engine_forward(e, 0, &ids[3 + k], 1, 4 + k, &logits, err, errlen)) rc = -1;
        else ids[4 + k] = 9 + k;
    bench_counter_sink sink = {.emit = emit_calls, .user = calls};
    if (calls) engine_counters(e, &sink);
    engine_destroy(e);
    return rc;
}

static void test_alloc_failure_every_n(void **state) {
    fx *f = *state;
    /* every alloc and kv module found (tu_modules): every kv module on the first allocator,
     * and the caches of one sequence each (no shared pool) on every other */
    const char *const *allocs, *const *kvs;
    int n_alloc = tu_modules("alloc", &allocs), n_kv = tu_modules("kv", &kvs);
    int cases = 0;
    for (int a = 0; a < n_alloc; a++)
        for (int k = 0; k < n_kv; k++) {
            if (a && (tu_module_caps("kv", kvs[k]) & BENCH_CAP_KV_SHARED_POOL)) continue;
            char err[1024];
            double calls = -1;
            /* a period no run reaches: counts the calls, fails none */
            setenv("BENCH_TEST_ALLOC_FAIL_EVERY", "1000000000", 1);
            if (engine_pass(f, allocs[a], kvs[k], &calls, err, sizeof(err)))
                fail_msg("%s/%s without failures: %s", allocs[a], kvs[k], err);
            assert_true(calls >= 3);    /* KV memory and one scratch block per forward at least */
            for (int n = 1; n <= (int)calls; n++) {
                char every[16];
                snprintf(every, sizeof(every), "%d", n);
                setenv("BENCH_TEST_ALLOC_FAIL_EVERY", every, 1);
                /* call n is refused: the pass must fail and say so (LSan checks the frees at exit) */
                if (!engine_pass(f, allocs[a], kvs[k], NULL, err, sizeof(err)))
                    fail_msg("%s/%s: allocation %d of %.0f refused, yet the engine reported nothing", allocs[a], kvs[k], n, calls);
                if (!strstr(err, "allocate") && !strstr(err, "memory") && !strstr(err, "cannot grow"))
                    fail_msg("%s/%s: allocation %d refused: unclear error \"%s\"", allocs[a], kvs[k], n, err);
                cases++;
            }
        }
    unsetenv("BENCH_TEST_ALLOC_FAIL_EVERY");
    fprintf(stderr, "refused allocations: %d cases\n", cases);
}

/* ---- no commands from scenario files ---- */

static void test_scenario_cannot_run_commands(void **state) {
    fx *f = *state;
    fresh_model(f);
    char mark[700], mark2[700], out[700], cmd_label[1600];
    snprintf(mark, sizeof(mark), "%s/MARK", f->tmp);
    snprintf(mark2, sizeof(mark2), "%s/MARK2", f->tmp);
    /* a module name that climbs out of the module directory is refused before any dlopen */
    char log[800];
    snprintf(log, sizeof(log), "%s/mod.log", f->tmp);
    assert_int_not_equal(tu_bench("/dev/null", "generate --model '%s' --tokenizer '%s' --loader ../loader_mmap --steps 2 2>'%s'",
                                  f->model, f->tok, log), 0);
    char *msg = slurp(log);
    assert_non_null(msg);
    if (!strstr(msg, "not a module name")) fail_msg("unclear error for a module name with '/': %s", msg);
    free(msg);

    unsetenv("BENCH_GNUPLOT");
    if (!pl_gnuplot_found(NULL)) {
        setenv("BENCH_GNUPLOT", "/nonexistent/gnuplot", 1);
        fprintf(stderr, "skip: gnuplot not installed (scripts/deps.sh installs gnuplot-nox): the label check needs it\n");
        skip();
    }
    /* gnuplot runs `...` even inside double quotes: a label that would create MARK */
    snprintf(cmd_label, sizeof(cmd_label), "\"workload\": {\"prompt_tokens\": 4, \"generate\": 2}, \"cache\": \"warm\","
             " \"repetitions\": 1, \"warmup\": 0, \"matrix\": {\"loader\": [{\"name\": \"mmap\", \"label\": \"a`touch %s`\\\"b\"},"
             " \"pread\"]}", mark);
    const char *sc = scenario_file(f, "nocmd", cmd_label);
    snprintf(out, sizeof(out), "%s/out_nocmd", f->tmp);
    int rc = tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", sc, out);
    struct stat st;
    assert_int_equal(rc, 0);
    char gp[800];
    snprintf(gp, sizeof(gp), "%s/plots/latency.gp", out);
    assert_int_equal(stat(gp, &st), 0);     /* the figures were drawn */
    if (stat(mark, &st) == 0) fail_msg("a variant label ran a command through gnuplot");
    /* a results.json written by someone else: the scenario name closes gnuplot's string */
    char res[800];
    snprintf(res, sizeof(res), "%s/results.json", out);
    cJSON *doc = hjs_load(res);
    assert_non_null(doc);
    char evil[1600];
    snprintf(evil, sizeof(evil), "x\"; system(\"touch %s\"); #", mark2);
    cJSON *scn = cJSON_GetObjectItemCaseSensitive(doc, "scenario");
    cJSON_ReplaceItemInObjectCaseSensitive(scn, "name", cJSON_CreateString(evil));
    assert_int_equal(hjs_save(res, doc), 0);
    cJSON_Delete(doc);
    assert_int_equal(tu_bench("/dev/null", "plot '%s' 2>/dev/null", out), 0);
    setenv("BENCH_GNUPLOT", "/nonexistent/gnuplot", 1);
    if (stat(mark2, &st) == 0) fail_msg("a scenario name in results.json ran a command through gnuplot");
}

/* ---- read paths: a scenario reads only under the allowed folders ---- */

static void expect_in(const char *log, const char *want) {
    char *msg = slurp(log);
    assert_non_null(msg);
    if (!strstr(msg, want)) fail_msg("no \"%s\" in:\n%s", want, msg);
    free(msg);
}

/* A relative folder in $BENCH_MODULE_PATH (".", set once in a shell profile) would load the
 * kv_*.so of any folder one cd's into: every command refuses it, naming the entry, before
 * any module is opened; absolute folders work as before. */
static void test_module_path_relative_refused(void **state) {
    fx *f = *state;
    char log[800], good[1024];
    snprintf(log, sizeof(log), "%s/modpath.log", f->tmp);
    snprintf(good, sizeof(good), "%s", tu_module_dir());
    static const char *const bad[] = {".", "mods:/usr/lib", "/usr/lib::./x"};
    static const char *const named[] = {"folder 1, \".\"", "folder 1, \"mods\"", "folder 3, \"./x\""};
    for (int i = 0; i < 3; i++) {
        setenv("BENCH_MODULE_PATH", bad[i], 1);
        int rc = tu_bench("/dev/null", "list 2>'%s'", log);
        expect_in(log, named[i]);
        expect_in(log, "is relative");
        assert_int_equal(rc, 2);
    }
    setenv("BENCH_MODULE_PATH", good, 1);
    assert_int_equal(tu_bench("/dev/null", "list 2>'%s'", log), 0);
}

/* A scenario whose model is a symlink, beside it, to a file elsewhere: bench run, exec
 * and plan refuse it before anything runs, with one line naming the scenario, the JSON
 * path, the resolved file, the roots and the flag; --allow-read lets it run. */
static void test_scenario_read_paths_confined(void **state) {
    fx *f = *state;
    char dir[PATH_MAX], scen[PATH_MAX + 16], secret[PATH_MAX + 16], model[PATH_MAX + 32], link[PATH_MAX + 32],
        sfile[PATH_MAX + 32], out[PATH_MAX + 32], log[PATH_MAX + 32], want[6 * PATH_MAX];
    assert_non_null(realpath(f->tmp, dir));
    snprintf(scen, sizeof(scen), "%s/scen", dir);
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    assert_int_equal(mkdir(scen, 0755), 0);
    assert_int_equal(mkdir(secret, 0755), 0);
    snprintf(model, sizeof(model), "%s/model.bin", secret);
    assert_int_equal(copy_file(f->src, model), 0);
    snprintf(link, sizeof(link), "%s/model.bin", scen);
    assert_int_equal(symlink(model, link), 0);
    snprintf(sfile, sizeof(sfile), "%s/s.json", scen);
    FILE *o = fopen(sfile, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"confined\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", "
               "\"repetitions\": 1, \"warmup\": 0, \"workload\": {\"prompt_tokens\": 4, \"generate\": 2}}", link, f->tok);
    fclose(o);
    snprintf(out, sizeof(out), "%s/out", dir);
    snprintf(log, sizeof(log), "%s/confined.log", dir);

    static const char *const how[] = {"run '%s' --out '%s' 2>'%s'", "exec '%s' 2>'%s'", "plan '%s' --shards 2 2>'%s'"};
    for (int i = 0; i < 3; i++) {
        int rc = i == 0 ? tu_bench("/dev/null", how[0], sfile, out, log) : tu_bench("/dev/null", how[i], sfile, log);
        assert_int_equal(rc, 2);
        snprintf(want, sizeof(want), "%s: .model.path: %s resolves to %s, outside the folders a scenario may read from (%s "
                 "(the scenario's folder)", sfile, link, model, scen);
        expect_in(log, want);
        snprintf(want, sizeof(want), "nothing was read. To allow it: --allow-read %s, or BENCH_ALLOW_READ=%s\n", secret, secret);
        expect_in(log, want);
    }
    expect_in(log, "bench plan: 1 error in");
    struct stat st;
    if (stat(out, &st) == 0) fail_msg("a refused scenario made its results folder %s", out);

    /* the flag: the run goes ahead, and a plan's shard command lines carry it */
    if (tu_bench("/dev/null", "run '%s' --out '%s' --allow-read '%s' 2>'%s'", sfile, out, secret, log) != 0) {
        char *msg = slurp(log);
        fail_msg("--allow-read %s did not let the run go: %s", secret, msg ? msg : "");
    }
    char res[PATH_MAX + 64];
    snprintf(res, sizeof(res), "%s/results.json", out);
    assert_int_equal(stat(res, &st), 0);
    snprintf(res, sizeof(res), "%s/plan.out", dir);
    assert_int_equal(tu_bench(res, "plan '%s' --shards 1 --allow-read '%s' 2>'%s'", sfile, secret, log), 0);
    snprintf(want, sizeof(want), "--allow-read %s", secret);
    expect_in(res, want);
}

/* ---- files that are not regular ---- */

/* A FIFO as the model, the tokenizer, or a safetensors folder's tokenizer.json:
 * refused at once, naming the path and what it is. Opening a FIFO to read blocks
 * until a writer comes, and bench did that before checking the kind of file, so
 * each of these blocked forever (the alarm fails the test instead). */
static void test_fifo_refused(void **state) {
    fx *f = *state;
    char fifo[700], log[700], st_dir[700], tj[800], want[1000];
    snprintf(fifo, sizeof(fifo), "%s/fifo.bin", f->tmp);
    snprintf(log, sizeof(log), "%s/fifo.log", f->tmp);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    snprintf(want, sizeof(want), "%s: is a FIFO, expected a regular file", fifo);
    alarm(300);
    assert_int_not_equal(tu_bench("/dev/null", "model info '%s' 2>'%s'", fifo, log), 0);
    expect_in(log, want);
    assert_int_not_equal(tu_bench("/dev/null", "generate --model '%s' --tokenizer '%s' --steps 2 2>'%s'", fifo, f->tok, log), 0);
    expect_in(log, want);
    fresh_model(f);
    assert_int_not_equal(tu_bench("/dev/null", "generate --model '%s' --tokenizer '%s' --steps 2 2>'%s'", f->model, fifo, log), 0);
    expect_in(log, want);
    /* bench run: the parent opens the model before any worker */
    const char *sc = scenario_file(f, "fifo", "\"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, "
                                              "\"workload\": {\"prompt_tokens\": 4, \"generate\": 2}");
    char scen2[800], out[800];
    snprintf(scen2, sizeof(scen2), "%s/fifo_model.json", f->tmp);
    snprintf(out, sizeof(out), "%s/fifo_out", f->tmp);
    char *body = slurp(sc);
    assert_non_null(body);
    FILE *o = fopen(scen2, "w");
    assert_non_null(o);
    char *at = strstr(body, f->model);
    assert_non_null(at);
    fprintf(o, "%.*s%s%s", (int)(at - body), body, fifo, at + strlen(f->model));
    fclose(o);
    free(body);
    assert_int_not_equal(tu_bench("/dev/null", "run '%s' --out '%s' --allow-read '%s' 2>'%s'", scen2, out, f->tmp, log), 0);
    expect_in(log, want);
    /* a safetensors folder whose tokenizer.json is a FIFO */
    snprintf(st_dir, sizeof(st_dir), "%s/st", f->tmp);
    assert_int_equal(tu_bench("/dev/null", "model synth --shape tiny --format safetensors -o '%s' 2>'%s'", st_dir, log), 0);
    snprintf(tj, sizeof(tj), "%s/tokenizer.json", st_dir);
    assert_int_equal(unlink(tj), 0);
    assert_int_equal(mkfifo(tj, 0644), 0);
    snprintf(want, sizeof(want), "%s: is a FIFO, expected a regular file", tj);
    assert_int_not_equal(tu_bench("/dev/null", "model info '%s' 2>'%s'", st_dir, log), 0);
    expect_in(log, want);
    assert_int_not_equal(tu_bench("/dev/null", "tokenize --model '%s' --text hi 2>'%s'", st_dir, log), 0);
    expect_in(log, want);
    alarm(0);
}

/* ---- the results folder: one run at a time, and what killed runs leave ---- */

/* A second bench run on a folder a run is writing to is refused, naming the holder's
 * pid, before --force can empty it (it used to empty the folder under the first run).
 * The test holds the lock itself, as a running bench run would (flock on the folder). */
static void test_out_locked(void **state) {
    fx *f = *state;
    fresh_model(f);
    char out[700], log[700], res[800], want[200];
    snprintf(out, sizeof(out), "%s/locked", f->tmp);
    snprintf(log, sizeof(log), "%s/locked.log", f->tmp);
    snprintf(res, sizeof(res), "%s/results.json", out);
    const char *sc = scenario_file(f, "locked", "\"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, "
                                                "\"workload\": {\"prompt_tokens\": 4, \"generate\": 2}");
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s' 2>'%s'", sc, out, log), 0);
    int d = open(out, O_RDONLY | O_DIRECTORY);
    assert_true(d >= 0);
    assert_int_equal(flock(d, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s' --force 2>'%s'", sc, out, log), 2);
    snprintf(want, sizeof(want), "another bench run (pid %d) is writing to this folder", (int)getpid());
    expect_in(log, want);
    struct stat st;
    if (stat(res, &st)) fail_msg("a refused --force run emptied %s", out);
    close(d); /* released: the run goes ahead */
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s' --force 2>'%s'", sc, out, log), 0);
    /* a file system that cannot lock a folder (NFS): the run goes on, unlocked, and says so */
    setenv("BENCH_TEST_FLOCK_ERRNO", "95", 1);
    int rc = tu_bench("/dev/null", "run '%s' --out '%s' --force 2>'%s'", sc, out, log);
    unsetenv("BENCH_TEST_FLOCK_ERRNO");
    assert_int_equal(rc, 0);
    expect_in(log, "the folder cannot be locked here (Operation not supported); running without the lock");
}

/* A run killed before its first results.json left only results.json.tmp.PID: the
 * folder was refused ever after ("not empty and holds no results.json"). Temporary
 * files of dead pids are removed at the next run into the folder. */
static void test_stale_tmp_removed(void **state) {
    fx *f = *state;
    fresh_model(f);
    pid_t dead = fork();
    assert_true(dead >= 0);
    if (dead == 0) _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    char out[700], log[700], tmpf[800], live[800];
    snprintf(out, sizeof(out), "%s/stale", f->tmp);
    snprintf(log, sizeof(log), "%s/stale.log", f->tmp);
    assert_int_equal(mkdir(out, 0755), 0);
    snprintf(tmpf, sizeof(tmpf), "%s/results.json.tmp.%d", out, (int)dead);
    FILE *o = fopen(tmpf, "w");
    assert_non_null(o);
    fputs("{\"half\": ", o);
    fclose(o);
    const char *sc = scenario_file(f, "stale", "\"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, "
                                               "\"workload\": {\"prompt_tokens\": 4, \"generate\": 2}");
    if (tu_bench("/dev/null", "run '%s' --out '%s' 2>'%s'", sc, out, log)) {
        char *msg = slurp(log);
        fail_msg("a folder holding only a dead run's temporary file was refused: %s", msg ? msg : "");
    }
    expect_in(log, "removed 1 temporary file left in");
    struct stat st;
    if (!stat(tmpf, &st)) fail_msg("%s is still there", tmpf);
    /* a live pid's file is not touched (only the test's own pid is surely alive) */
    snprintf(live, sizeof(live), "%s/results.json.tmp.%d", out, (int)getpid());
    o = fopen(live, "w");
    assert_non_null(o);
    fclose(o);
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s' --force 2>'%s'", sc, out, log), 0);
    char *msg = slurp(log);
    assert_null(strstr(msg, "removed"));
    free(msg);
}

/* The pid of a child of parent, or -1. */
static pid_t child_of(pid_t parent) {
    DIR *d = opendir("/proc");
    pid_t found = -1;
    for (struct dirent *e; d && found < 0 && (e = readdir(d));) {
        char path[300], buf[512];
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *rp = strrchr(buf, ')');
        int ppid;
        char st;
        if (rp && sscanf(rp + 1, " %c %d", &st, &ppid) == 2 && ppid == parent) found = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

static int alive(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* SIGKILL of bench run: its worker dies with it (it kept running under PID 1). */
static void test_worker_dies_with_parent(void **state) {
    fx *f = *state;
    fresh_model(f);
    char out[700];
    snprintf(out, sizeof(out), "%s/orphan", f->tmp);
    /* the worker sleeps 120 s (test hook) once loaded: it is surely there when bench run is killed */
    const char *sc = scenario_file(f, "orphan", "\"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, "
                                                "\"workload\": {\"prompt_tokens\": 4, \"generate\": 2}, \"test_hooks\": {\"delay_ms\": 120000}");
    const char *bin = getenv("BENCH_BIN");
    pid_t run = fork();
    assert_true(run >= 0);
    if (run == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 1);
        dup2(dn, 2);
        execl(bin ? bin : "build/asan/bench", "bench", "run", sc, "--out", out, (char *)NULL);
        _exit(127);
    }
    pid_t w = -1;
    for (int i = 0; i < 1200 && w < 0; i++) {
        w = child_of(run);
        if (w < 0) usleep(50000);
    }
    if (w < 0) {
        kill(run, SIGKILL);
        waitpid(run, NULL, 0);
        fail_msg("bench run started no worker in 60 s");
    }
    kill(run, SIGKILL);
    assert_int_equal(waitpid(run, NULL, 0), run);
    int i = 0;
    for (; i < 600 && alive(w); i++) usleep(50000);
    if (alive(w)) {
        kill(w, SIGKILL);
        fail_msg("the worker %d outlived bench run by 30 s", (int)w);
    }
}

/* bench plan's command lines are pasted into shells (docs/cluster.md): a word holding
 * a ' closed the quoting, and a folder named a'$(touch X)'b ran touch. The command, run
 * by sh with bench replaced by a function that prints its arguments, must give back
 * every word as it was, and run nothing. */
static void test_plan_command_quoting(void **state) {
    fx *f = *state;
    fresh_model(f);
    char hostile[1600], pwned[700], plan[700], outf[700], cmd[12000];
    snprintf(pwned, sizeof(pwned), "%s/pwned", f->tmp);
    snprintf(hostile, sizeof(hostile), "%s/a'$(touch pwned)'b \"c\" `touch pwned` \\e", f->tmp); /* run from f->tmp */
    assert_int_equal(mkdir(hostile, 0755), 0);
    const char *sc = scenario_file(f, "plan", "\"cache\": \"warm\", \"repetitions\": 2, \"warmup\": 0, "
                                              "\"workload\": {\"prompt_tokens\": 4, \"generate\": 2}");
    snprintf(plan, sizeof(plan), "%s/plan.json", f->tmp);
    const char *bin = getenv("BENCH_BIN");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        execl(bin ? bin : "build/asan/bench", "bench", "plan", sc, "--shards", "1", "--allow-read", hostile, "--out", plan, (char *)NULL);
        _exit(127);
    }
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    cJSON *j = hjs_load(plan);
    assert_non_null(j);
    const cJSON *sh = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "plan"), 0);
    const char *command = str_at(sh, "command");
    assert_true(!strncmp(command, "bench run ", 10));
    snprintf(outf, sizeof(outf), "%s/plan.args", f->tmp);
    FILE *o = fopen(outf, "w");
    assert_non_null(o);
    fclose(o);
    /* the command as a shell reads it: bench() prints one argument per line */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(outf, O_WRONLY | O_TRUNC);
        dup2(fd, 1);
        if (chdir(f->tmp)) _exit(127);
        snprintf(cmd, sizeof(cmd), "bench() { printf '%%s\\n' \"$@\"; }; %s", command);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    struct stat st;
    if (!stat(pwned, &st)) fail_msg("pasting the plan's command into a shell ran a command: %s", command);
    char *args = slurp(outf);
    assert_non_null(args);
    char want[1700];
    snprintf(want, sizeof(want), "\n--allow-read\n%s\n", hostile);
    if (!strstr(args, want)) fail_msg("the shell read the command as:\n%s\nexpected the folder %s as one word", args, hostile);
    free(args);
    cJSON_Delete(j);
}

/* Whether some file in dir holds want. */
static int dir_holds(const char *dir, const char *want) {
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[1200];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        char *t = slurp(p);
        found = t && strstr(t, want);
        free(t);
    }
    if (d) closedir(d);
    return found;
}

/* The model replaced after bench run checked it (a rename over the path, as a swap of
 * a symlink would do): every worker that loads afterwards refuses it, naming the file,
 * instead of reading whatever is there now. Before, the workers reopened the path and
 * ran on the new file. */
static void test_model_swapped_refused(void **state) {
    fx *f = *state;
    fresh_model(f);
    char out[700], logs[800], other[700];
    snprintf(out, sizeof(out), "%s/swapped", f->tmp);
    snprintf(logs, sizeof(logs), "%s/logs", out);
    snprintf(other, sizeof(other), "%s/other.bin", f->tmp);
    /* 2 repetitions, each held 2 s after its decode: the swap lands before the second loads */
    const char *sc = scenario_file(f, "swapped", "\"cache\": \"warm\", \"repetitions\": 2, \"warmup\": 0, "
                                                 "\"workload\": {\"prompt_tokens\": 4, \"generate\": 2}, \"test_hooks\": {\"delay_ms\": 2000}");
    const char *bin = getenv("BENCH_BIN");
    pid_t run = fork();
    assert_true(run >= 0);
    if (run == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 1);
        dup2(dn, 2);
        execl(bin ? bin : "build/asan/bench", "bench", "run", sc, "--out", out, (char *)NULL);
        _exit(127);
    }
    pid_t w = -1;
    for (int i = 0; i < 1200 && w < 0; i++) {
        w = child_of(run);
        if (w < 0) usleep(50000);
    }
    if (w < 0) {
        kill(run, SIGKILL);
        waitpid(run, NULL, 0);
        fail_msg("bench run started no worker in 60 s");
    }
    /* the same bytes, another file: only its identity differs */
    assert_int_equal(copy_file(f->src, other), 0);
    assert_int_equal(rename(other, f->model), 0);
    int ws;
    assert_int_equal(waitpid(run, &ws, 0), run);
    char want[800];
    snprintf(want, sizeof(want), "%s is not the file bench run checked", f->model);
    if (!dir_holds(logs, want)) fail_msg("no worker log in %s says \"%s\": the workers read the replaced file", logs, want);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
}

/* A swap and a swap back, both inside one engine load, pass the worker's look at the path
 * before and after: the loader itself must refuse to read a file other than the one parsed.
 * Each CPU loader, through the host's open_file (the engine's: model_reopen_file). */
typedef struct host_with_model {
    bench_host host;    /* first: the loader's host pointer is the struct's */
    const model *m;
} host_with_model;

static int reopen_for(const bench_host *h, const char *path, int flags, char *err, size_t errlen) {
    return model_reopen_file(((const host_with_model *)h)->m, path, flags, err, errlen);
}

static int load_with(const char *loader, const model *m, const bench_host *host, char *err, size_t errlen) {
    modreg_entry me = {0};
    if (modreg_load(tu_module_dir(), "loader", loader, &me, err, errlen)) fail_msg("%s", err);
    const struct bench_loader_iface *li = me.mod->iface;
    void *opts = NULL, *ctx = NULL;
    bench_opts none = {0};
    if (modreg_fill_opts(me.mod, &none, &opts, err, errlen)) fail_msg("%s", err);
    bench_tensor_ref *refs = calloc((size_t)m->n_tensors, sizeof(*refs));
    const void **data = calloc((size_t)m->n_tensors, sizeof(*data));
    assert_non_null(refs);
    assert_non_null(data);
    for (int i = 0; i < m->n_tensors; i++)
        refs[i] = (bench_tensor_ref){m->tensors[i].name, m->tensors[i].dtype, m->tensors[i].file, m->tensors[i].offset,
                                     m->tensors[i].nbytes};
    int rc = li->open(opts, host, &ctx, err, errlen);
    if (!rc) rc = li->load(ctx, (const char *const *)m->files, m->n_files, refs, m->n_tensors, data, err, errlen);
    li->close(ctx);
    free(refs);
    free(data);
    free(opts);
    modreg_entry_close(&me);
    return rc;
}

static void test_loader_refuses_file_swapped_after_parse(void **state) {
    fx *f = *state;
    fresh_model(f);
    model *m = NULL;
    char err[1024], other[700];
    if (model_open(f->model, NULL, &m, err, sizeof(err))) fail_msg("%s", err);
    host_with_model hm = {.host = {.open_file = reopen_for}, .m = m};
    static const char *const loaders[] = {"mmap", "pread"};
    for (int i = 0; i < 2; i++)
        if (load_with(loaders[i], m, &hm.host, err, sizeof(err))) fail_msg("loader %s, file unchanged: %s", loaders[i], err);
    /* the same bytes, another file: only its identity differs, so only the check can tell */
    snprintf(other, sizeof(other), "%s/other.bin", f->tmp);
    assert_int_equal(copy_file(f->src, other), 0);
    assert_int_equal(rename(other, f->model), 0);
    char want[800];
    snprintf(want, sizeof(want), "%s is not the file the model was read from", f->model);
    for (int i = 0; i < 2; i++) {
        err[0] = 0;
        assert_int_not_equal(load_with(loaders[i], m, &hm.host, err, sizeof(err)), 0);
        if (!strstr(err, want) || !strstr(err, "replaced since")) fail_msg("loader %s: \"%s\", expected \"%s ...\"", loaders[i], err, want);
    }
    model_free(m);
}

/* ---- numbers that are not finite ---- */

/* Writes one float at the start of a tensor of an f32 model file. */
static void poke_tensor(const char *path, const char *name, float v) {
    model *m = NULL;
    char err[1024];
    if (model_open(path, NULL, &m, err, sizeof(err))) fail_msg("%s", err);
    const model_tensor *t = model_find(m, name);
    assert_non_null(t);
    assert_int_equal(t->dtype, BENCH_F32);
    FILE *f = fopen(m->files[t->file], "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, (long)t->offset, SEEK_SET), 0);
    assert_int_equal(fwrite(&v, 4, 1, f), 1);
    assert_int_equal(fclose(f), 0);
    model_free(m);
}

/* NaN in a norm generated token 0 forever, exit 0. The logits are checked once per
 * forward: bench generate fails at the first one, naming the position and the layer
 * whose output first stopped being finite. */
static void test_nan_weight_fails_the_run(void **state) {
    fx *f = *state;
    char path[700], log[700];
    snprintf(path, sizeof(path), "%s/nan.gguf", f->tmp);
    snprintf(log, sizeof(log), "%s/nan.log", f->tmp);
    assert_int_equal(tu_bench("/dev/null", "model synth --shape tiny --dtype f32 --format gguf -o '%s' 2>'%s'", path, log), 0);
    assert_int_equal(tu_bench("/dev/null", "generate --model '%s' --prompt-tokens 4 --steps 8 2>'%s'", path, log), 0);
    poke_tensor(path, "blk.1.ffn_norm.weight", NAN);
    assert_int_not_equal(tu_bench("/dev/null", "generate --model '%s' --prompt-tokens 4 --steps 8 2>'%s'", path, log), 0);
    expect_in(log, "the logits at position 3 of sequence 0 are not finite");
    expect_in(log, "the first non-finite values come from layer 1 (blk.1.*)");
    /* Inf in the embedding: named as such */
    assert_int_equal(tu_bench("/dev/null", "model synth --shape tiny --dtype f32 --format gguf -o '%s' 2>'%s'", path, log), 0);
    poke_tensor(path, "token_embd.weight", INFINITY); /* row 0: token 0 */
    assert_int_not_equal(tu_bench("/dev/null", "generate --model '%s' --prompt-tokens 4 --steps 8 2>'%s'", path, log), 0);
    /* the synthetic prompt is BOS then 3, 4, 5: token 0 may not be in it; then the
     * first generated token is (every other logit is a NaN after the Inf) */
    expect_in(log, "are not finite");
}

/* bench model info --check reads every weight and names the tensors holding NaN or
 * Inf; bench model convert --dtype q4_0 (and q8_0) refuses a NaN block, naming the
 * tensor and the block, where it wrote zeros before. */
static void test_nan_weight_check_and_convert(void **state) {
    fx *f = *state;
    char path[700], log[700], outp[800], q[800];
    snprintf(path, sizeof(path), "%s/nanchk.gguf", f->tmp);
    snprintf(log, sizeof(log), "%s/nanchk.log", f->tmp);
    snprintf(outp, sizeof(outp), "%s/nanchk.out", f->tmp);
    snprintf(q, sizeof(q), "%s/nanchk-q4.gguf", f->tmp);
    assert_int_equal(tu_bench("/dev/null", "model synth --shape tiny --dtype f32 --format gguf -o '%s' 2>'%s'", path, log), 0);
    assert_int_equal(tu_bench(outp, "model info '%s' --check 2>'%s'", path, log), 0);
    expect_in(outp, "every weight finite");
    /* element 0 of row 0 of blk.2.attn_q.weight: block 0 */
    poke_tensor(path, "blk.2.attn_q.weight", NAN);
    assert_int_equal(tu_bench(outp, "model info '%s' --check 2>'%s'", path, log), 1);
    expect_in(outp, "tensor blk.2.attn_q.weight (f32): row 0, element 0 is nan");
    expect_in(outp, "1 of 47 tensors hold NaN or Inf");
    assert_int_equal(tu_bench("/dev/null", "model convert '%s' '%s' --dtype q4_0 2>'%s'", path, q, log), 1);
    expect_in(log, "tensor blk.2.attn_q.weight: block 0 (row 0, elements 0..31) holds NaN or Inf (element 0); q4_0 would not keep it: refused");
    struct stat st;
    if (!stat(q, &st)) fail_msg("a refused conversion left %s", q);
    /* to f16 the NaN is kept as NaN: converted */
    snprintf(q, sizeof(q), "%s/nanchk-f16.gguf", f->tmp);
    assert_int_equal(tu_bench("/dev/null", "model convert '%s' '%s' --dtype f16 2>'%s'", path, q, log), 0);
}

/* ---- messages ---- */

/* Each refusal names the option and its real limit: --ctx and --steps past 2^24 said
 * "expected a whole number >= 1"; --threads took up to 1e9; a prompt longer than
 * --steps said "the text needs more than 2 tokens" without naming --steps. */
static void test_generate_limits_named(void **state) {
    fx *f = *state;
    fresh_model(f);
    char log[700];
    snprintf(log, sizeof(log), "%s/limits.log", f->tmp);
    static const struct { const char *args, *want; } c[] = {
        {"--ctx 2147483647", "--ctx 2147483647: expected a whole number from 1 to 16777216 (2^24 positions"},
        {"--steps 2147483647", "--steps 2147483647: expected a whole number from 1 to 16777216"},
        {"--ctx 0", "--ctx 0: expected a whole number from 1 to 16777216"},
        {"--threads 1000000000", "--threads 1000000000: expected a whole number from 1 to 1024 (one pool thread each"},
        {"--prompt Hi --steps 1", "--steps 1: the prompt needs more than 2 tokens, and --steps counts the prompt's positions too; raise --steps"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        assert_int_equal(tu_bench("/dev/null", "generate --model '%s' --tokenizer '%s' %s 2>'%s'", f->model, f->tok, c[i].args, log), 2 - (i == 4));
        expect_in(log, c[i].want);
    }
}

/* ---- sizes against the documented limits ---- */

static void test_scenario_size_limit(void **state) {
    fx *f = *state;
    char log[800];
    snprintf(log, sizeof(log), "%s/zero.log", f->tmp);
    /* an endless file: refused at 16 MiB, not read until memory runs out */
    assert_int_equal(tu_bench("/dev/null", "run /dev/zero 2>'%s'", log), 2);
    char *msg = slurp(log);
    assert_non_null(msg);
    if (!strstr(msg, "/dev/zero: larger than 16 MiB")) fail_msg("unclear error: %s", msg);
    free(msg);
}

int main(int argc, char **argv) {
    (void)argc;
    /* the jemalloc module wants static TLS set aside at start (as test_alloc_modules does) */
    const char *t = getenv("GLIBC_TUNABLES");
    if (!t || !strstr(t, "optional_static_tls")) {
        char buf[1024];
        snprintf(buf, sizeof(buf), "%s%sglibc.rtld.optional_static_tls=16384", t ? t : "", t && *t ? ":" : "");
        setenv("GLIBC_TUNABLES", buf, 1);
        execv("/proc/self/exe", argv);
        perror("test_reliab: re-exec with GLIBC_TUNABLES");
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_fuzz_seeds_parse),
        cmocka_unit_test(test_enospc_keeps_last_results),
        cmocka_unit_test(test_sigbus_run_recorded),
        cmocka_unit_test(test_sigbus_generate_one_line),
        cmocka_unit_test(test_sigbus_exec_one_line),
        cmocka_unit_test(test_mmap_verify_sees_replaced_model),
        cmocka_unit_test(test_alloc_failure_every_n),
        cmocka_unit_test(test_scenario_cannot_run_commands),
        cmocka_unit_test(test_module_path_relative_refused),
        cmocka_unit_test(test_scenario_size_limit),
        cmocka_unit_test(test_scenario_read_paths_confined),
        cmocka_unit_test(test_fifo_refused),
        cmocka_unit_test(test_out_locked),
        cmocka_unit_test(test_stale_tmp_removed),
        cmocka_unit_test(test_worker_dies_with_parent),
        cmocka_unit_test(test_plan_command_quoting),
        cmocka_unit_test(test_model_swapped_refused),
        cmocka_unit_test(test_loader_refuses_file_swapped_after_parse),
        cmocka_unit_test(test_nan_weight_fails_the_run),
        cmocka_unit_test(test_nan_weight_check_and_convert),
        cmocka_unit_test(test_generate_limits_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
