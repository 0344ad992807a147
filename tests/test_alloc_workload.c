/* Allocator scenarios (harness/child/alloc_workload.c) and traces (engines/core/runtime/alloc_trace.c):
 * validation with JSON paths, a tiny scenario end to end with deterministic counts,
 * a trace recorded by `bench generate --trace-alloc` and replayed, and the greedy
 * output of stories260K with every allocator module. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/runtime/alloc_trace.h"
#include "harness/child/alloc_workload.h"
#include "harness/scenario/kind.h"
#include "harness/parent/runner.h"
#include "harness/scenario/scenario.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

static const char *const allocs[] = {"libc", "jemalloc", "mimalloc", "arena", "slab", "buddy"};
enum { N_ALLOCS = 6 };

/* Parses text; returns the number of errors, and asserts that want (if given) is in one of them. */
static int parse_errors(const char *text, const char *want) {
    scenario *s = NULL;
    sc_errors e;
    int rc = sc_parse("t.json", text, NULL, &s, &e);
    int found = !want;
    for (int i = 0; want && i < e.n; i++) found |= strstr(e.v[i], want) != NULL;
    if (!found) {
        for (int i = 0; i < e.n; i++) fprintf(stderr, "  got: %s\n", e.v[i]);
        fail_msg("no error contains \"%s\"", want);
    }
    int n = e.n;
    assert_int_equal(rc, n ? -1 : 0);
    sc_errors_free(&e);
    sc_free(s);
    return n;
}

#define HEAD "{\"kind\": \"allocators\", \"name\": \"t\", \"allocators\": [\"libc\"], \"workloads\": ["

static void test_rejects_bad_fields(void **state) {
    (void)state;
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 1001}]}",
                 "t.json: .workloads[0].ops: 1001 is odd");
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"lifx\", \"size\": 64, \"ops\": 10}]}",
                 "t.json: .workloads[0].pattern: expected one of churn, lifo, fifo, random, prodcon, trace, got \"lifx\"");
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 10, \"live\": 5}]}",
                 ".workloads[0].live: applies to patterns lifo, fifo and random only");
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"lifo\", \"size\": 64, \"sizes\": {\"min\": 1, \"max\": 2}, \"ops\": 10}]}",
                 ".workloads[0]: expected exactly one of \"size\"");
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"random\", \"sizes\": {\"min\": 64, \"max\": 16}, \"ops\": 10}]}",
                 ".workloads[0].sizes.max: 16 is less than min 64");
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 10, \"align\": 24}]}",
                 ".workloads[0].align: 24: expected a power of two");
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 10, \"bogus\": 1}]}",
                 ".workloads[0].bogus: unknown key \"bogus\"");
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"trace\", \"trace\": \"nonexistent.trace\"}]}",
                 ".workloads[0].trace: trace nonexistent.trace:");
    parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 10},"
                      "{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 10}]}",
                 ".workloads[1]: duplicate workload name \"a\"");
    parse_errors("{\"kind\": \"allocators\", \"name\": \"t\", \"allocators\": [\"libc\", \"malloc9\"], \"workloads\": "
                 "[{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 10}]}",
                 ".allocators[1]: unknown alloc \"malloc9\"");
    parse_errors("{\"kind\": \"allocators\", \"name\": \"t\", \"allocators\": [{\"name\": \"libc\", \"options\": "
                 "{\"trim_thresh\": \"1g\"}}], \"workloads\": [{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 10}]}",
                 ".allocators[0]: ");   /* modreg names the unknown option */
    parse_errors("{\"kind\": \"engine\", \"name\": \"t\"}", "t.json: .kind: expected \"allocators\"");
    parse_errors("{\"kind\": \"allocators\", \"name\": \"t\", \"allocators\": [\"libc\"]}", ".workloads: required");
    /* every error is reported, not the first only */
    assert_true(parse_errors(HEAD "{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 0, \"ops\": 3}]}", NULL) >= 2);
}

static void test_variants(void **state) {
    (void)state;
    scenario *s = NULL;
    sc_errors e;
    const char *text = "{\"kind\": \"allocators\", \"name\": \"t\", \"allocators\": [\"libc\", {\"name\": \"libc\", "
                       "\"options\": {\"trim_threshold\": \"64m\"}, \"label\": \"libc-tuned\"}, \"arena\"], \"workloads\": ["
                       "{\"name\": \"a\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 10},"
                       "{\"name\": \"b\", \"pattern\": \"fifo\", \"sizes\": {\"min\": 16, \"max\": 4096}, \"ops\": 10}]}";
    if (sc_parse("t.json", text, NULL, &s, &e)) {
        for (int i = 0; i < e.n; i++) fprintf(stderr, "%s\n", e.v[i]);
        fail();
    }
    assert_non_null(s->aw);
    assert_int_equal(s->n_variants, 6);
    assert_string_equal(s->variants[0].key, "alloc=libc,workload=a");
    assert_string_equal(s->variants[1].key, "alloc=libc-tuned,workload=a");
    assert_string_equal(s->variants[5].key, "alloc=arena,workload=b");
    char err[256];
    assert_int_equal(sc_select(s, "workload=b,alloc=arena", err, sizeof(err)), 0);
    assert_int_equal(sc_n_selected(s), 1);
    assert_true(s->variants[5].selected);
    char *spec = rn_worker_spec(s, &s->variants[1]);
    assert_non_null(spec);
    assert_non_null(strstr(spec, "\"kind\":\t\"alloc_workload\""));
    assert_string_equal(s->kind->name, "allocators");
    /* the options as the parent checked them, typed: 64m as a number of bytes */
    assert_non_null(strstr(spec, "\"trim_threshold\":\t67108864"));
    free(spec);
    sc_free(s);
}

/* The median of a metric of the variant with key, from results.json's summary. */
static int summary_metric(const cJSON *doc, const char *key, const char *metric, double *out) {
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(doc, "summary"), *v;
    cJSON_ArrayForEach(v, sum) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(v, "key");
        if (!cJSON_IsString(k) || strcmp(k->valuestring, key)) continue;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "metrics"), metric);
        const cJSON *med = cJSON_GetObjectItemCaseSensitive(m, "median");
        if (!cJSON_IsNumber(med)) return -1;
        *out = med->valuedouble;
        return 0;
    }
    return -1;
}

static cJSON *read_json(const char *path) {
    char err[512];
    char *buf = ut_slurp(path, SIZE_MAX, NULL, err, sizeof(err));
    cJSON *j = buf ? cJSON_Parse(buf) : NULL;
    free(buf);
    return j;
}

/* Records a trace of stories260K (prefill + decode; --scratch pass, so that each pass's
 * activations are an allocator pair, as an engine without a kept block makes them), runs a
 * tiny scenario of every
 * workload kind on every allocator, and checks the deterministic counts. */
static void test_end_to_end_and_trace(void **state) {
    (void)state;
    char model[512], tok[512], dir[512], path[1200], trace[1024], sc[1024], out[1024];
    if (!tu_shared("models/stories260K.bin", model, sizeof(model)) || !tu_shared("models/tok512.bin", tok, sizeof(tok))) {
        skip();
        return;
    }
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(trace, sizeof(trace), "%s/fwd.trace", dir);
    assert_int_equal(tu_bench("/dev/null", "generate --model '%s' --tokenizer '%s' --prompt 'The little dog' --steps 24 "
                              "--threads 1 --quiet --ids --alloc slab --scratch pass --trace-alloc '%s' 2>/dev/null", model, tok, trace), 0);
    at_trace t;
    char err[512];
    assert_int_equal(at_load(trace, &t, err, sizeof(err)), 0);
    /* the KV cache, one prefill and 19..23 decode steps, each one scratch pair; all freed at the end */
    assert_true(t.calls >= 2 + 2 * 20);
    assert_int_equal(t.calls % 2, 0);
    assert_int_equal(t.live_at_end, 0);
    assert_true(t.peak_live > 0);

    snprintf(sc, sizeof(sc), "%s/tiny.json", dir);
    FILE *f = fopen(sc, "w");
    assert_non_null(f);
    fprintf(f, "{\"kind\": \"allocators\", \"name\": \"tiny\", \"repetitions\": 1, \"warmup\": 0, \"timeout_s\": 60,\n"
               " \"allocators\": [\"libc\", \"jemalloc\", \"mimalloc\", \"arena\", \"slab\", \"buddy\"],\n"
               " \"workloads\": [\n"
               "  {\"name\": \"churn64\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 2000},\n"
               "  {\"name\": \"lifo\", \"pattern\": \"lifo\", \"size\": 256, \"live\": 100, \"ops\": 1000},\n"
               "  {\"name\": \"fifo\", \"pattern\": \"fifo\", \"size\": 4096, \"live\": 30, \"ops\": 1000},\n"
               "  {\"name\": \"random\", \"pattern\": \"random\", \"sizes\": {\"min\": 16, \"max\": 65536}, \"live\": 40, \"ops\": 600},\n"
               "  {\"name\": \"pc\", \"pattern\": \"prodcon\", \"size\": 64, \"ops\": 2000},\n"
               "  {\"name\": \"trace\", \"pattern\": \"trace\", \"trace\": \"%s\", \"rounds\": 3}]}\n", trace);
    fclose(f);
    snprintf(out, sizeof(out), "%s/out", dir);
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", sc, out), 0);
    snprintf(path, sizeof(path), "%s/results.json", out);
    cJSON *doc = read_json(path);
    assert_non_null(doc);
    static const char *const wl[] = {"churn64", "lifo", "fifo", "random", "pc", "trace"};
    const double ops[] = {2000, 1000, 1000, 600, 2000, 3.0 * (double)t.calls};
    /* the most bytes live at once, where the workload makes it deterministic */
    const double peak[] = {64, 100 * 256, 30 * 4096, -1, -1, (double)t.peak_live};
    for (int a = 0; a < N_ALLOCS; a++)
        for (int w = 0; w < 6; w++) {
            char key[128];
            double v;
            snprintf(key, sizeof(key), "alloc=%s,workload=%s", allocs[a], wl[w]);
            if (summary_metric(doc, key, "mod.aw.ops", &v)) fail_msg("%s: no mod.aw.ops in results.json", key);
            if (v != ops[w]) fail_msg("%s: ops %.0f, want %.0f", key, v, ops[w]);
            assert_int_equal(summary_metric(doc, key, "mod.aw.ns_op_p50", &v), 0);
            assert_true(v >= 0);
            /* the driver's floor is measured in every worker, and the net figures come with it */
            double raw, floor, net;
            assert_int_equal(summary_metric(doc, key, "mod.aw.ns_per_op", &raw), 0);
            assert_int_equal(summary_metric(doc, key, "mod.aw.floor_ns_per_op", &floor), 0);
            assert_true(floor > 0);
            assert_int_equal(summary_metric(doc, key, "mod.aw.net_ns_per_op", &net), 0);
            assert_int_equal(summary_metric(doc, key, "mod.aw.net_ns_op_p50", &v), 0);
            assert_int_equal(summary_metric(doc, key, "mod.aw.minflt_per_op", &v), 0);
            assert_int_equal(summary_metric(doc, key, "mod.aw.fragmentation", &v), 0);
            if (peak[w] < 0) continue;
            assert_int_equal(summary_metric(doc, key, "mod.aw.peak_live_bytes", &v), 0);
            if (v != peak[w]) fail_msg("%s: peak live %.0f B, want %.0f", key, v, peak[w]);
        }
    /* the slab's LIFO rounds of 100 x 256 B stay in its thread cache once warm: the
     * refills are the first round's carving only, whatever the number of rounds */
    double refills;
    assert_int_equal(summary_metric(doc, "alloc=slab,workload=lifo", "mod.alloc.central_refills", &refills), 0);
    assert_true(refills >= 1 && refills <= 4);
    cJSON_Delete(doc);
    snprintf(path, sizeof(path), "%s/results.csv", out);
    f = fopen(path, "r");
    assert_non_null(f);
    fclose(f);
    at_trace_free(&t);
    tu_rmtree(dir);
}

static void test_trace_rejects_corrupt(void **state) {
    (void)state;
    char dir[512], p[1024], err[512];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(p, sizeof(p), "%s/bad.trace", dir);
    static const struct { const char *text, *want; } cases[] = {
        {"a 0 64 16\n", "line 1: expected \"# bench-alloc-trace 1\""},
        {"# bench-alloc-trace 1\na 0 64 24\n", "line 2"},
        {"# bench-alloc-trace 1\na 1 64 16\n", "alloc id 1, expected 0"},
        {"# bench-alloc-trace 1\na 0 64 16\nf 0\nf 0\n", "already freed"},
        {"# bench-alloc-trace 1\nf 3\n", "not allocated yet"},
        {"# bench-alloc-trace 1\nx\n", "expected a line"},
        {"# bench-alloc-trace 1\n", "no alloc or free line"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(cases[i].text, f);
        fclose(f);
        at_trace t;
        assert_int_equal(at_load(p, &t, err, sizeof(err)), -1);
        if (!strstr(err, cases[i].want)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].want);
    }
    tu_rmtree(dir);
}

/* bench exec runs one allocator variant in-process (for perf and valgrind): no model to
 * prepare, the worker's counters on stderr, the floor among them. */
static void test_exec_one_variant(void **state) {
    (void)state;
    char dir[512], sc[1024], out[1024], err[1024];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(sc, sizeof(sc), "%s/one.json", dir);
    FILE *f = fopen(sc, "w");
    assert_non_null(f);
    fputs("{\"kind\": \"allocators\", \"name\": \"one\", \"allocators\": [\"arena\", \"slab\"],\n"
          " \"workloads\": [{\"name\": \"churn64\", \"pattern\": \"churn\", \"size\": 64, \"ops\": 2000}]}\n", f);
    fclose(f);
    snprintf(out, sizeof(out), "%s/out.txt", dir);
    snprintf(err, sizeof(err), "%s/err.txt", dir);
    assert_int_equal(tu_bench(out, "exec '%s' --variant alloc=arena 2>'%s'", sc, err), 0);
    f = fopen(err, "r");
    assert_non_null(f);
    char line[512];
    int ops = 0, floor = 0, resets = 0;
    while (fgets(line, sizeof(line), f)) {
        ops |= strstr(line, "aw.ops = 2000 count") != NULL;
        floor |= strstr(line, "aw.floor_ns_per_op = ") != NULL;
        /* churn resets the arena once per 32 pairs: the warm-up (2000 ops, capped at the
         * workload's) and the timed pass each make 31 full batches and one of 8 pairs */
        resets |= strstr(line, "alloc.resets = 64 count") != NULL;
    }
    fclose(f);
    if (!ops || !floor || !resets) fail_msg("bench exec: missing counters (ops %d, floor %d, resets %d); see %s", ops, floor, resets, err);
    tu_rmtree(dir);
}

/* The greedy ids of stories260K on "The little dog" are the oracle's with every allocator. */
static void test_greedy_every_allocator(void **state) {
    (void)state;
    char model[512], tok[512], oracle[512], dir[512], out[1024];
    if (!tu_shared("models/stories260K.bin", model, sizeof(model)) || !tu_shared("models/tok512.bin", tok, sizeof(tok)) ||
        !tu_shared("oracle/greedy_dog.ids.txt", oracle, sizeof(oracle))) {
        skip();
        return;
    }
    static int want[1024], got[1024];
    int n_want = tu_read_ints(oracle, want, 1024);
    assert_true(n_want > 10);
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(out, sizeof(out), "%s/ids.txt", dir);
    for (int a = 0; a < N_ALLOCS; a++) {
        /* --steps counts positions; the ids printed are BOS then one per position */
        assert_int_equal(tu_bench(out, "generate --model '%s' --tokenizer '%s' --prompt 'The little dog' --steps %d "
                                  "--threads 1 --ids --quiet --alloc %s 2>/dev/null", model, tok, n_want - 1, allocs[a]), 0);
        int n = tu_read_ints(out, got, 1024);
        if (n != n_want) fail_msg("alloc %s: %d ids, the oracle has %d", allocs[a], n, n_want);
        for (int i = 0; i < n; i++)
            if (got[i] != want[i]) fail_msg("alloc %s: id %d is %d, the oracle's is %d", allocs[a], i, got[i], want[i]);
    }
    tu_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejects_bad_fields),
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_trace_rejects_corrupt),
        cmocka_unit_test(test_end_to_end_and_trace),
        cmocka_unit_test(test_exec_one_variant),
        cmocka_unit_test(test_greedy_every_allocator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
