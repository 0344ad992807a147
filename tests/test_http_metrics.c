/* The http target's "metrics" block (harness/scenario/target_metrics.h, harness/child/scrape.h,
 * harness/report/scrape_report.h), through bench run on loopback:
 *   - bench serve launched, "preset": "bench" and two series of its own: every read has every
 *     series; the first read comes before any request (no prompt tokens yet), the last after
 *     all of them (every prompt token admitted); peak and mean in results.json and its metrics,
 *     the reads in timelines/ as CSV;
 *   - the llama-server preset on llama-server's body (tests/fixtures/prom/llama-server.txt)
 *     served by a scripted server (tests/lib/script_server.h) at the block's url, while bench
 *     serve answers the requests: the fixture's values exactly;
 *   - reads that fail (a body that is not the format): counted with the parser's reason, the
 *     repetition still ok;
 *   - a real llama-server when one is on PATH (skipped, naming it, when not);
 *   - the block validated, every error naming the field.
 * Every wait is bounded (ready_timeout_s, request_timeout_s, the scenario's timeout_s). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/scenario/scenario.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/script_server.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

typedef struct fx {
    char model[512], tok[512], dir[512], tmp[512];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    *state = f;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) || !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok))) {
        f->model[0] = 0;
        return 0;
    }
    char m[512];
    snprintf(m, sizeof(m), "%s", f->model);
    snprintf(f->dir, sizeof(f->dir), "%s", dirname(m));
    return tu_tmpdir(f->tmp, sizeof(f->tmp)) ? 0 : -1;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f && f->tmp[0]) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

#define NEED(f) TU_NEED((f)->model[0])

#define SERVE_HTTP "\"url\": \"http://127.0.0.1:{port}\", \"launch\": [\"{bench}\", \"serve\", \"--model\", \"{model}\", " \
    "\"--tokenizer\", \"{tokenizer}\", \"--port\", \"{port}\", \"--threads\", \"1\", \"--ctx\", \"96\"], " \
    "\"ready_timeout_s\": 60, \"request_timeout_s\": 60, \"concurrency\": 2"

/* A serving workload of 6 requests on bench serve, with the metrics block given; returns
 * results.json (schema-checked) and the run's folder in out. */
static cJSON *run_metrics(fx *f, const char *name, const char *block, char *out, size_t outlen) {
    char sc[700];
    snprintf(sc, sizeof(sc), "%s/%s.json", f->tmp, name);
    snprintf(out, outlen, "%s/out_%s", f->tmp, name);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"%s\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", \"repetitions\": 1, "
               "\"warmup\": 0, \"threads\": 1, \"timeout_s\": 120, \"workload\": {\"ctx\": 96, \"requests\": {\"count\": 6, "
               "\"prompt_len\": {\"uniform\": [4, 20]}, \"output_len\": {\"uniform\": [16, 32]}, \"kv_budget\": {\"tokens\": 500}, "
               "\"seed\": 9}}, \"target\": {\"label\": \"serve\", \"http\": {" SERVE_HTTP ", \"metrics\": %s}}}",
            name, f->model, f->tok, block);
    fclose(o);
    int rc = tu_bench(NULL, "run '%s' --out '%s' --allow-read '%s' --allow-launch >'%s.stdout' 2>'%s.log'", sc, out, f->dir, out, out);
    char p[800];
    snprintf(p, sizeof(p), "%s/results.json", out);
    cJSON *doc = hjs_load(p);
    if (!doc || hjs_results_violations(doc)) {
        snprintf(p, sizeof(p), "%s.log", out);
        tu_dump_file(p);
        fail_msg("%s: bench run exited %d; results.json %s", name, rc, doc ? "breaks the schema (above)" : "missing");
    }
    if (rc != 0) fail_msg("%s: bench run exited %d", name, rc);
    return doc;
}

static const cJSON *get(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v) fail_msg("no \"%s\"", k);
    return v;
}

static const cJSON *proc0(const cJSON *doc) {
    return cJSON_GetArrayItem(get(cJSON_GetArrayItem(get(doc, "runs"), 0), "processes"), 0);
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    if (!cJSON_IsNumber(v)) fail_msg("\"%s\" is not a number", k);
    return v->valuedouble;
}

/* ======================================================================
 * bench serve's own series
 * ====================================================================== */

static void test_bench_preset(void **state) {
    fx *f = *state;
    NEED(f);
    char out[700];
    cJSON *doc = run_metrics(f, "bench", "{\"preset\": \"bench\", \"period_s\": 0.05, \"series\": [\"bench:prompt_tokens_total\", "
                                         "\"bench:kv_cache_reserved_bytes\"]}", out, sizeof(out));
    const cJSON *p = proc0(doc), *sm = get(p, "server_metrics"), *ser = get(sm, "series"), *tl = get(sm, "timeline");
    int reads = (int)num(sm, "reads");
    assert_true(reads >= 2);    /* one when the server was ready, one after the last request */
    assert_int_equal(num(sm, "failed"), 0);
    static const char *const names[] = {"bench:kv_cache_usage_ratio", "bench:requests_running", "bench:requests_waiting",
                                        "bench:kv_cache_used_bytes", "bench:prompt_tokens_total", "bench:kv_cache_reserved_bytes"};
    assert_int_equal(cJSON_GetArraySize(ser), 6);
    const cJSON *m = get(p, "metrics");
    for (int i = 0; i < 6; i++) {
        const cJSON *s = get(ser, names[i]);
        assert_int_equal(num(s, "samples"), reads);
        assert_int_equal(num(s, "absent"), 0);
        assert_true(num(s, "peak") >= num(s, "mean"));
        assert_int_equal(cJSON_GetArraySize(get(tl, names[i])), reads);
        char k[160];
        snprintf(k, sizeof(k), "server.%s.peak", names[i]);
        assert_true(num(m, k) == num(s, "peak"));
        snprintf(k, sizeof(k), "server.%s.mean", names[i]);
        assert_true(num(m, k) == num(s, "mean"));
    }
    assert_int_equal(num(m, "server.scrapes_failed"), 0);
    /* the KV cache the server reserved, read from outside */
    assert_true(num(get(ser, "bench:kv_cache_reserved_bytes"), "peak") > 0);
    /* the first read before any request, the last after every one was admitted */
    const cJSON *pt = get(tl, "bench:prompt_tokens_total");
    const cJSON *sreq = get(get(p, "serve"), "requests");
    double prompts = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, get(sreq, "prompt_tokens")) prompts += it->valuedouble;
    assert_true(prompts > 0);
    assert_true(cJSON_GetArrayItem(pt, 0)->valuedouble == 0);
    assert_true(cJSON_GetArrayItem(pt, reads - 1)->valuedouble == prompts);
    /* the reads in time order, within the repetition */
    const cJSON *t = get(tl, "t_ms");
    for (int i = 1; i < reads; i++) assert_true(cJSON_GetArrayItem(t, i)->valuedouble > cJSON_GetArrayItem(t, i - 1)->valuedouble);
    /* the same rows as CSV beside the RSS timeline: a header and one line a read */
    char path[800], err[256];
    snprintf(path, sizeof(path), "%s/timelines/v0-r0-p0-server.csv", out);
    size_t len;
    char *csv = ut_slurp(path, 1 << 20, &len, err, sizeof(err));
    if (!csv) fail_msg("%s", err);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += csv[i] == '\n';
    assert_int_equal(lines, reads + 1);
    assert_true(!strncmp(csv, "t_ms,bench:kv_cache_usage_ratio,bench:requests_running,", 55));
    free(csv);
    cJSON_Delete(doc);
}

/* ======================================================================
 * llama-server's body, served by a script
 * ====================================================================== */

/* A script server answering every GET with body as Prometheus text; NULL on failure. */
static ss_server *serve_body(const char *body, size_t n) {
    char *reply = NULL;
    size_t len = 0;
    ss_append(&reply, &len, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %zu\r\n"
                            "Connection: close\r\n\r\n%.*s", n, (int)n, body);
    ss_server *s = ss_start(reply, len, 0);
    free(reply);
    return s;
}

static void test_llama_preset_fixture(void **state) {
    fx *f = *state;
    NEED(f);
    char err[256], block[300], out[700];
    size_t n;
    char *body = ut_slurp("tests/fixtures/prom/llama-server.txt", 1 << 20, &n, err, sizeof(err));
    if (!body) fail_msg("%s", err);
    ss_server *s = serve_body(body, n);
    free(body);
    assert_non_null(s);
    snprintf(block, sizeof(block), "{\"preset\": \"llama-server\", \"period_s\": 0.05, \"url\": \"http://127.0.0.1:%d/metrics\"}",
             ss_port(s));
    cJSON *doc = run_metrics(f, "llama", block, out, sizeof(out));
    int answered = ss_answered(s);
    ss_stop(s);
    const cJSON *sm = get(proc0(doc), "server_metrics"), *ser = get(sm, "series");
    int reads = (int)num(sm, "reads");
    assert_true(reads >= 2);
    assert_int_equal(answered, reads);
    assert_int_equal(num(sm, "failed"), 0);
    static const struct { const char *name; double v; } want[] = {
        {"llamacpp:kv_cache_usage_ratio", 0.171875}, {"llamacpp:requests_processing", 3}, {"llamacpp:requests_deferred", 1}};
    assert_int_equal(cJSON_GetArraySize(ser), 3);
    for (int i = 0; i < 3; i++) {
        const cJSON *e = get(ser, want[i].name);
        assert_true(num(e, "peak") == want[i].v);
        assert_true(num(e, "mean") == want[i].v);
        assert_int_equal(num(e, "samples"), reads);
    }
    cJSON_Delete(doc);
}

/* Reads that fail are counted with their reason; the requests' repetition is still a success. */
static void test_failed_reads(void **state) {
    fx *f = *state;
    NEED(f);
    static const char bad[] = "llamacpp:requests_processing 1\nllamacpp:kv_cache_usage_ratio one\n";
    ss_server *s = serve_body(bad, sizeof(bad) - 1);
    assert_non_null(s);
    char block[300], out[700];
    snprintf(block, sizeof(block), "{\"preset\": \"llama-server\", \"period_s\": 0.05, \"url\": \"http://127.0.0.1:%d/metrics\"}",
             ss_port(s));
    cJSON *doc = run_metrics(f, "failing", block, out, sizeof(out));
    ss_stop(s);
    const cJSON *p = proc0(doc), *sm = get(p, "server_metrics");
    assert_int_equal(num(sm, "reads"), 0);
    assert_true(num(sm, "failed") >= 2);
    assert_non_null(strstr(get(sm, "first_failure")->valuestring,
                           "/metrics: line 2: llamacpp:kv_cache_usage_ratio: expected a number (e.g. 1, -2.5e-3, NaN, +Inf), got \"one\""));
    assert_true(num(get(p, "metrics"), "server.scrapes_failed") == num(sm, "failed"));
    /* no figure made up for a series never read */
    const cJSON *rp = get(get(sm, "series"), "llamacpp:requests_processing");
    assert_true(cJSON_IsNull(get(rp, "peak")) && cJSON_IsNull(get(rp, "mean")));
    assert_int_equal(num(rp, "samples"), 0);
    assert_null(cJSON_GetObjectItemCaseSensitive(get(p, "metrics"), "server.llamacpp:requests_processing.peak"));
    assert_int_equal(get(cJSON_GetArrayItem(get(doc, "runs"), 0), "status")->valuestring[0], 'o');
    cJSON_Delete(doc);
}

/* ======================================================================
 * A real llama-server, where one is installed
 * ====================================================================== */

static void test_llama_server_real(void **state) {
    fx *f = *state;
    char exe[1024], gguf[512];
    if (!tu_on_path("llama-server", exe, sizeof(exe))) {
        fprintf(stderr, "skip: llama-server is not on PATH\n");
        skip();
    }
    const char *g = getenv("BENCH_LLAMA_GGUF");
    if (!g && !tu_shared("models/tiny.gguf", gguf, sizeof(gguf))) {
        fprintf(stderr, "skip: llama-server is on PATH, but no GGUF model for it (BENCH_LLAMA_GGUF, or $BENCH_SHARED/models/tiny.gguf)\n");
        skip();
    }
    snprintf(gguf, sizeof(gguf), "%s", g ? g : gguf);
    char sc[700], out[700], p[800];
    snprintf(sc, sizeof(sc), "%s/llama_real.json", f->tmp);
    snprintf(out, sizeof(out), "%s/out_llama_real", f->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"llama_real\", \"model\": {\"path\": \"%s\"}, \"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, "
               "\"timeout_s\": 300, \"workload\": {\"prompt_tokens\": 8, \"generate\": 16}, \"target\": {\"label\": \"llama\", "
               "\"http\": {\"url\": \"http://127.0.0.1:{port}\", \"launch\": [\"llama-server\", \"-m\", \"{model}\", \"--port\", "
               "\"{port}\", \"--metrics\"], \"ready_timeout_s\": 240, \"metrics\": {\"preset\": \"llama-server\", \"period_s\": 0.1}}}}",
            gguf);
    fclose(o);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", gguf);
    int rc = tu_bench(NULL, "run '%s' --out '%s' --allow-read '%s' --allow-launch >'%s.stdout' 2>'%s.log'", sc, out, dirname(dir), out,
                      out);
    assert_int_equal(rc, 0);
    snprintf(p, sizeof(p), "%s/results.json", out);
    cJSON *doc = hjs_load(p);
    assert_non_null(doc);
    const cJSON *sm = get(proc0(doc), "server_metrics");
    assert_true(num(sm, "reads") >= 2);
    /* every llama-server with --metrics has these two; kv_cache_usage_ratio only the older ones */
    assert_true(num(get(get(sm, "series"), "llamacpp:requests_processing"), "samples") >= 2);
    assert_true(num(get(get(sm, "series"), "llamacpp:requests_deferred"), "samples") >= 2);
    cJSON_Delete(doc);
}

/* ======================================================================
 * The block's validation
 * ====================================================================== */

static void test_block_validation(void **state) {
    fx *f = *state;
    NEED(f);
    struct { const char *block, *needle; } bad[] = {
        {"{\"preset\": \"tgi\"}", ".target.http.metrics.preset: unknown preset \"tgi\" (have: \"llama-server\", \"vllm\", \"sglang\", \"bench\")"},
        {"{\"preset\": \"bench\", \"periode_s\": 1}", ".target.http.metrics.periode_s: unknown key \"periode_s\" (allowed: url, period_s, preset, series)"},
        {"{\"preset\": \"bench\", \"period_s\": 0.01}", ".target.http.metrics.period_s: expected seconds between two reads"},
        {"{\"preset\": \"bench\", \"url\": \"/metrics\"}", ".target.http.metrics.url: expected a URL starting http://"},
        {"{\"series\": [\"9lives\"]}", ".target.http.metrics.series[0]: expected a metric name"},
        {"{\"series\": [\"a{b=\\\"c\\\"\"]}", ".target.http.metrics.series[0]: expected a metric name"},
        {"{\"series\": \"vllm:num_requests_running\"}", ".target.http.metrics.series: expected a list of series names"},
        {"{\"series\": []}", ".target.http.metrics.series: expected at least one series name"},
        {"{\"period_s\": 1}", ".target.http.metrics: expected \"preset\""},
        {"\"bench\"", ".target.http.metrics: expected an object"},
        {"{\"preset\": \"vllm\", \"series\": [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\"]}",
         ".target.http.metrics: 17 series, more than 16"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[2048];
        snprintf(text, sizeof(text), "{\"name\": \"t\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", "
                 "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, \"target\": {\"http\": {\"url\": \"http://h\", \"metrics\": %s}}}",
                 f->model, f->tok, bad[i].block);
        scenario *s = NULL;
        sc_errors errs = {0};
        assert_int_equal(sc_parse("t.json", text, tu_module_dir(), &s, &errs), -1);
        int found = 0;
        for (int k = 0; k < errs.n; k++) found |= strstr(errs.v[k], bad[i].needle) != NULL;
        if (!found) fail_msg("metrics %s: no error naming \"%s\" (first: %s)", bad[i].block, bad[i].needle, errs.n ? errs.v[0] : "none");
        sc_errors_free(&errs);
        sc_free(s);
    }
    /* and a good one passes, labels and all */
    char text[2048];
    snprintf(text, sizeof(text), "{\"name\": \"t\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", "
             "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, \"target\": {\"http\": {\"url\": \"http://h\", \"metrics\": "
             "{\"preset\": \"sglang\", \"series\": [\"bench:kv_cache_blocks{state=\\\"free\\\"}\"], \"period_s\": 2}}}}", f->model, f->tok);
    scenario *s = NULL;
    sc_errors errs = {0};
    int rc = sc_parse("t.json", text, tu_module_dir(), &s, &errs);
    if (rc) fail_msg("a good block refused: %s", errs.n ? errs.v[0] : "?");
    sc_errors_free(&errs);
    sc_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_validation), cmocka_unit_test(test_bench_preset), cmocka_unit_test(test_llama_preset_fixture),
        cmocka_unit_test(test_failed_reads),     cmocka_unit_test(test_llama_server_real),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
