/* Reliability, the slow part (make test-slow; CI runs it after make test):
 *   - 50 bench runs interrupted by SIGINT or SIGTERM at pseudo-random points (a
 *     fixed seed: the same points every time): results.json, when there is one, is
 *     always valid against the schema and holds every finished repetition (one per
 *     timeline file, which each finished repetition leaves);
 *   - a worker under a memory limit (ulimit -v) that refuses its model's memory:
 *     recorded as oom, with the refused allocation in the reason, the other variants
 *     going on. The limit applies to bench and its workers alike, so this runs the
 *     release build (ASan's shadow memory does not fit under any useful limit).
 * docs/reliability.md has the figures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char tmp[512];
    char model[512], tok[512];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f || !tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) || !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        return -1;
    }
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

static const char *str_at(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Timelines (timelines/vV-rR-pP.csv, not the -kv.csv, -server.csv or -requests.jsonl beside
 * them): one per finished repetition, written as it finishes, before results.json. */
static int count_finished(const char *out) {
    char d[800];
    snprintf(d, sizeof(d), "%s/timelines", out);
    DIR *dp = opendir(d);
    if (!dp) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        int v, r, p, end = 0;
        n += sscanf(de->d_name, "v%d-r%d-p%d.csv%n", &v, &r, &p, &end) == 3 && end && !de->d_name[end];
    }
    closedir(dp);
    return n;
}

static void test_interrupt_loop(void **state) {
    fx *f = *state;
    char sc[700];
    snprintf(sc, sizeof(sc), "%s/int.json", f->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    /* 2 variants x 20 repetitions of ~0.1-0.3 s each: long enough that every signal lands mid-run */
    fprintf(o, "{\"name\": \"int\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"},"
               " \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, \"cache\": \"warm\", \"repetitions\": 20,"
               " \"warmup\": 1, \"matrix\": {\"loader\": [\"pread\", \"mmap\"]}, \"test_hooks\": {\"delay_ms\": 60}}",
            f->model, f->tok);
    fclose(o);
    cJSON *schema = hjs_load("docs/results-schema.json");
    assert_non_null(schema);
    const char *bin = getenv("BENCH_BIN");
    uint64_t seed = 17;
    int with_results = 0, runs_total = 0, early = 0;
    for (int it = 0; it < 50; it++) {
        char out[700], results[800];
        snprintf(out, sizeof(out), "%s/out%d", f->tmp, it);
        snprintf(results, sizeof(results), "%s/results.json", out);
        int sig = it % 2 ? SIGTERM : SIGINT;
        /* 0 .. 2.5 s: from the start, or (every other pair of runs) from the first results.json,
         * so that half the runs surely have repetitions to keep, however slow the machine */
        long delay_us = (long)(splitmix(&seed) % 2500000);
        int after_first = it % 4 >= 2;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int dn = open("/dev/null", O_WRONLY);
            dup2(dn, 1);
            dup2(dn, 2);
            execl(bin ? bin : "build/asan/bench", "bench", "run", sc, "--out", out, (char *)NULL);
            _exit(127);
        }
        struct stat st;
        if (after_first) {
            for (int i = 0; i < 1200 && stat(results, &st) != 0; i++) usleep(50000);
            if (stat(results, &st) != 0) fail_msg("run %d: no results.json after 60 s", it);
        }
        usleep((useconds_t)delay_us);
        kill(pid, sig);
        int ws;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        int logs = count_finished(out);
        if (stat(results, &st) != 0) {
            /* no repetition finished */
            if (logs > 0) fail_msg("run %d: %d repetitions finished, no results.json", it, logs);
            early++;
            continue;
        }
        /* bench's own handler ran: exit 130 (or 0 when the run ended first) */
        assert_true(WIFEXITED(ws));
        if (WEXITSTATUS(ws) != 130 && WEXITSTATUS(ws) != 0) fail_msg("run %d: exit status %d", it, WEXITSTATUS(ws));
        cJSON *doc = hjs_load(results);
        if (!doc) fail_msg("run %d: %s does not parse", it, results);
        char err[2048];
        int bad = hjs_validate(schema, doc, err, sizeof(err));
        if (bad) fail_msg("run %d: %s: %d schema violations:\n%s", it, results, bad, err);
        assert_string_equal(str_at(doc, "status"), WEXITSTATUS(ws) ? "interrupted" : "complete");
        const cJSON *runs = cJSON_GetObjectItemCaseSensitive(doc, "runs"), *r;
        int n = cJSON_GetArraySize(runs), k = 0;
        /* every finished repetition is here */
        if (n != logs) fail_msg("run %d: %d repetitions recorded, %d finished", it, n, logs);
        cJSON_ArrayForEach(r, runs) {
            /* in the order they ran: variant 0, 1, 0, 1, ... rep 0, 0, 1, 1, ... */
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "variant"), *rep = cJSON_GetObjectItemCaseSensitive(r, "repetition");
            assert_int_equal(v->valueint, k % 2);
            assert_int_equal(rep->valueint, k / 2);
            assert_string_equal(str_at(r, "status"), "ok");
            k++;
        }
        cJSON_Delete(doc);
        DIR *dp = opendir(out);
        struct dirent *de;
        while (dp && (de = readdir(dp))) if (strstr(de->d_name, ".tmp.")) fail_msg("run %d: left behind %s", it, de->d_name);
        if (dp) closedir(dp);
        with_results++;
        runs_total += n;
    }
    cJSON_Delete(schema);
    fprintf(stderr, "50 interruptions: %d left a results.json (%d repetitions, every one checked), %d came before any finished\n",
            with_results, runs_total, early);
    /* half the runs were signalled after a first repetition was kept */
    assert_true(with_results >= 25);
}

/* ---- memory limit ---- */

static void test_memory_limit_recorded_as_oom(void **state) {
    fx *f = *state;
    struct stat st;
    if (stat("build/bench", &st) || stat("build/modules/loader_pread.so", &st)) {
        fprintf(stderr, "skip: build/bench and build/modules (the release build, make all) are missing\n");
        skip();
    }
    char big[700], sc[700], out[700], log[700];
    snprintf(big, sizeof(big), "%s/big.gguf", f->tmp);
    /* 219 MB of f16 weights against a 150 MB address-space limit; bench itself needs < 120 MB */
    char cmd[2400];
    snprintf(cmd, sizeof(cmd), "BENCH_MODULE_PATH=\"$PWD/build/modules\" build/bench model synth --shape llama-110m --dtype f16 "
             "--format gguf -o '%s' >/dev/null 2>&1", big);
    assert_int_equal(system(cmd), 0);
    snprintf(sc, sizeof(sc), "%s/oom.json", f->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"oom\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 2},"
               " \"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, \"matrix\": {\"loader\": [\"pread\", \"mmap\"]}}", big);
    fclose(o);
    snprintf(out, sizeof(out), "%s/out_oom", f->tmp);
    snprintf(log, sizeof(log), "%s/oom.log", f->tmp);
    snprintf(cmd, sizeof(cmd), "ulimit -v 150000 && BENCH_MODULE_PATH=\"$PWD/build/modules\" build/bench run '%s' --out '%s' >/dev/null 2>'%s'",
             sc, out, log);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc));
    assert_int_equal(WEXITSTATUS(rc), 1);
    char results[800];
    snprintf(results, sizeof(results), "%s/results.json", out);
    cJSON *doc = hjs_load(results);
    assert_non_null(doc);
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(doc, "runs"), *r;
    assert_int_equal(cJSON_GetArraySize(runs), 2);
    cJSON_ArrayForEach(r, runs) {
        const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "processes"), 0);
        assert_string_equal(str_at(r, "status"), "oom");
        assert_string_equal(str_at(p, "status"), "oom");
        if (!strstr(str_at(p, "reason"), "out of memory") || !strstr(str_at(p, "reason"), "Cannot allocate memory"))
            fail_msg("unclear oom reason: %s", str_at(p, "reason"));
    }
    cJSON_Delete(doc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interrupt_loop),
        cmocka_unit_test(test_memory_limit_recorded_as_oom),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
