/* Scenario files: one test per validation rule, each checking that the error
 * names the JSON path and says what was expected; plus the matrix expansion,
 * the defaults and --only. Module names and options are checked against the
 * modules of $BENCH_MODULE_PATH. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines/core/runtime/modreg.h"
#include "util/ut_fs.h"
#include "harness/parent/runner.h"
#include "harness/scenario/confine.h"
#include "harness/scenario/scenario.h"
#include "harness/scenario/target.h"
#include "harness/scenario/worker_spec.h"
#include "tests/lib/testutil.h"

static char model_path[512];

/* Replaces every MODEL in tmpl with the shared model's path. */
static char *subst(const char *tmpl) {
    if (strstr(tmpl, "MODEL")) TU_NEED(model_path[0]);
    size_t n = strlen(tmpl) + 1;
    for (const char *p = strstr(tmpl, "MODEL"); p; p = strstr(p + 5, "MODEL")) n += strlen(model_path);
    char *out = malloc(n), *o = out;
    for (const char *p = tmpl; *p;) {
        if (!strncmp(p, "MODEL", 5)) {
            o += sprintf(o, "%s", model_path);
            p += 5;
        } else {
            *o++ = *p++;
        }
    }
    *o = 0;
    return out;
}

static scenario *parse_ok(const char *tmpl) {
    char *text = subst(tmpl);
    scenario *s = NULL;
    sc_errors e;
    int rc = sc_parse("t.json", text, tu_module_dir(), &s, &e);
    for (int i = 0; i < e.n; i++) fprintf(stderr, "unexpected: %s\n", e.v[i]);
    sc_errors_free(&e);
    free(text);
    assert_int_equal(rc, 0);
    assert_non_null(s);
    return s;
}

/* Parses tmpl, expects failure, and that some error line contains each of the
 * NULL-terminated substrings (all in one line). Returns the number of errors. */
static int parse_fails(const char *tmpl, ...) {
    char *text = subst(tmpl);
    scenario *s = NULL;
    sc_errors e;
    int rc = sc_parse("t.json", text, tu_module_dir(), &s, &e);
    free(text);
    assert_int_equal(rc, -1);
    assert_null(s);
    assert_true(e.n > 0);
    int found = 0;
    for (int i = 0; i < e.n && !found; i++) {
        va_list ap;
        va_start(ap, tmpl);
        int all = 1;
        for (const char *want = va_arg(ap, const char *); want; want = va_arg(ap, const char *))
            if (!strstr(e.v[i], want)) all = 0;
        va_end(ap);
        found = all;
    }
    if (!found)
        for (int i = 0; i < e.n; i++) fprintf(stderr, "got: %s\n", e.v[i]);
    int n = e.n;
    /* every message starts with the file's name */
    for (int i = 0; i < e.n; i++) assert_true(!strncmp(e.v[i], "t.json: ", 8));
    sc_errors_free(&e);
    assert_true(found);
    return n;
}

#define BASE "\"name\": \"t\", \"model\": \"MODEL\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}"

static int setup(void **state) {
    (void)state;
    /* without the model, the tests that name it skip (subst) and the others run */
    if (!tu_shared("models/stories260K.bin", model_path, sizeof(model_path))) model_path[0] = 0;
    return 0;
}

static void test_minimal_defaults(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\"}");
    assert_int_equal(s->repetitions, 3);
    assert_int_equal(s->warmup, 1);
    assert_int_equal(s->processes, 1);
    assert_true(s->sample_ms == 5 && s->timeout_s == 300);
    assert_int_equal(s->metrics, SC_M_ALL & ~SC_M_PSS);
    assert_int_equal(s->n_variants, 1);
    assert_string_equal(s->variants[0].key, "default");
    assert_string_equal(sc_pick(s, &s->variants[0], SC_AX_LOADER)->name, "mmap");
    assert_string_equal(sc_pick(s, &s->variants[0], SC_AX_KV)->name, "prealloc");
    assert_string_equal(sc_pick(s, &s->variants[0], SC_AX_ALLOC)->name, "libc");
    assert_int_equal(sc_pick(s, &s->variants[0], SC_AX_CACHE)->ival, SC_CACHE_WARM);
    sc_free(s);
}

static void test_matrix_expansion_order(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"matrix\": {\"loader\": [\"pread\", {\"name\": \"mmap\", \"options\": "
                           "{\"populate\": true, \"mode\": \"private\"}}], \"cache\": [\"cold\", \"warm\"],"
                           " \"fixed\": {\"kv\": \"dynamic\", \"threads\": 1}}}");
    assert_int_equal(s->n_variants, 4);
    assert_string_equal(s->variants[0].key, "loader=pread,cache=cold");
    assert_string_equal(s->variants[1].key, "loader=pread,cache=warm");
    assert_string_equal(s->variants[2].key, "loader=mmap:populate=1,mode=private,cache=cold");
    assert_string_equal(sc_pick(s, &s->variants[3], SC_AX_LOADER)->opts, "populate=1,mode=private");
    assert_string_equal(sc_pick(s, &s->variants[3], SC_AX_KV)->name, "dynamic");
    assert_int_equal(sc_pick(s, &s->variants[3], SC_AX_THREADS)->ival, 1);
    sc_free(s);
}

static void test_not_json(void **state) {
    (void)state;
    parse_fails("{\n  \"name\": \"t\",\n  \"model\": oops\n}", "line 3", "not valid JSON", NULL);
}

static void test_top_level_not_object(void **state) {
    (void)state;
    parse_fails("[1, 2]", ".: expected an object, got an array", NULL);
}

static void test_unknown_key(void **state) {
    (void)state;
    parse_fails("{" BASE ", \"cache\": \"warm\", \"repetitons\": 3}", ".repetitons: unknown key \"repetitons\"",
                "allowed: name", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [{\"name\": \"mmap\", \"opts\": {}}]}}",
                ".matrix.loader[0].opts: unknown key", NULL);
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, "
                "\"generate\": 4, \"temp\": 1}}", ".workload.temp: unknown key", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"fixed\": {\"laoder\": \"mmap\"}}}",
                ".matrix.fixed.laoder: unknown key", NULL);
}

static void test_duplicate_key(void **state) {
    (void)state;
    parse_fails("{" BASE ", \"cache\": \"warm\", \"warmup\": 1, \"warmup\": 2}", ".warmup: duplicate key", NULL);
}

static void test_required_fields(void **state) {
    (void)state;
    parse_fails("{\"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}",
                ".name: required", NULL);
    parse_fails("{\"name\": \"t\", \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}",
                ".model: required", NULL);
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\"}", ".workload: required", NULL);
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4}}",
                ".workload.generate: required", NULL);
}

static void test_wrong_type(void **state) {
    (void)state;
    parse_fails("{" BASE ", \"cache\": \"warm\", \"repetitions\": \"3\"}", ".repetitions: expected an integer, got a string", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"repetitions\": 2.5}", ".repetitions: expected an integer, got a fraction", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"description\": 7}", ".description: expected a string", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": \"mmap\"}}", ".matrix.loader: expected a list",
                "matrix.fixed", NULL);
}

static void test_out_of_range(void **state) {
    (void)state;
    parse_fails("{" BASE ", \"cache\": \"warm\", \"repetitions\": 0}", ".repetitions: 0 is out of range: expected 1 ..", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"processes\": 65}", ".processes: 65 is out of range", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"timeout_s\": 0}", ".timeout_s: 0 is out of range: expected more than 0", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"sample_ms\": -1}", ".sample_ms: -1 is out of range", NULL);
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, "
                "\"generate\": 4, \"topp\": 0}}", ".workload.topp: 0 is out of range", NULL);
}

static void test_name_charset(void **state) {
    (void)state;
    parse_fails("{\"name\": \"../x y\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, "
                "\"generate\": 4}}", ".name: \"../x y\": expected letters, digits", NULL);
}

static void test_prompt_exactly_one(void **state) {
    (void)state;
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"prompt\": \"hi\", "
                "\"prompt_tokens\": 4, \"generate\": 4}}", ".workload: expected exactly one of \"prompt\"", NULL);
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"generate\": 4}}",
                ".workload: expected exactly one of \"prompt\"", NULL);
}

static void test_ctx_too_small(void **state) {
    (void)state;
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 40, "
                "\"generate\": 40, \"ctx\": 64}}", ".workload.ctx: 64 positions cannot hold", NULL);
}

/* ---- workload.requests ---- */

/* A serving scenario whose workload.requests is REQ (the rest of the object's text). */
#define SERVE(REQ) "{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"requests\": {" REQ "}}}"
#define REQ_MIN "\"count\": 8, \"prompt_len\": {\"fixed\": 16}, \"output_len\": {\"fixed\": 8}, \"kv_budget\": {\"tokens\": 512}"

static void test_requests_parsed(void **state) {
    (void)state;
    TU_NEED(model_path[0]); /* before the allocations below, which a skip would leak */
    char dir[512], lens[600], err[1024];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    assert_int_equal(cf_allow(dir, err, sizeof(err)), 0);    /* "t.json" has no folder of its own */
    snprintf(lens, sizeof(lens), "%s/lens.txt", dir);
    FILE *f = fopen(lens, "w");
    assert_non_null(f);
    fputs("12 7\n30\n", f);
    fclose(f);
    char *text = malloc(4096);
    snprintf(text, 4096, "{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"ctx\": 256, "
             "\"temperature\": 0.5, \"requests\": {\"count\": 64, \"prompt_len\": {\"uniform\": [32, 128]}, "
             "\"output_len\": {\"file\": \"%s\"}, \"shared_prefix\": {\"tokens\": 64, \"fraction\": 0.75}, "
             "\"arrival\": {\"poisson_rate\": 20}, \"kv_budget\": {\"bytes\": \"8m\"}, "
             "\"targets\": {\"ttft_ms\": 500, \"tpot_ms\": 50}, \"seed\": 7, \"max_batch\": 16, \"reserve_output\": 0.5, "
             "\"stop_at_eos\": false}}, "
             "\"matrix\": {\"kv\": [\"block\", \"token\", \"prealloc\"]}}", lens);
    scenario *s = parse_ok(text);
    free(text);
    const sc_requests *r = s->requests;
    assert_non_null(r);
    assert_int_equal(r->count, 64);
    assert_int_equal(r->prompt_len.kind, SC_DIST_UNIFORM);
    assert_true(r->prompt_len.lo == 32 && r->prompt_len.hi == 128);
    assert_int_equal(r->output_len.kind, SC_DIST_FILE);
    assert_int_equal(r->output_len.n_values, 3);
    assert_true(r->output_len.values[0] == 12 && r->output_len.values[1] == 7 && r->output_len.values[2] == 30);
    assert_true(r->output_len.lo == 7 && r->output_len.hi == 30);
    assert_true(r->prefix_tokens == 64 && r->prefix_fraction == 0.75);
    assert_true(r->poisson_rate == 20);
    assert_true(r->kv_budget_bytes == 8u << 20 && r->kv_budget_tokens == 0);
    assert_true(r->ttft_ms == 500 && r->tpot_ms == 50);
    assert_true(r->seed == 7 && r->max_batch == 16 && !r->stop_at_eos && r->reserve_output == 0.5);
    assert_int_equal(s->n_variants, 3);
    sc_free(s);

    /* the defaults: all at once, no prefix, no targets, seed 1, stop at EOS */
    s = parse_ok(SERVE(REQ_MIN));
    r = s->requests;
    assert_true(r->poisson_rate == 0 && r->prefix_tokens == 0 && r->ttft_ms == 0 && r->tpot_ms == 0);
    assert_true(r->seed == 1 && r->max_batch == 0 && r->stop_at_eos && r->kv_budget_tokens == 512 && r->reserve_output == 0);
    assert_int_equal(r->prompt_len.kind, SC_DIST_FIXED);
    sc_free(s);
    cf_reset();
    tu_rmtree(dir);
}

static void test_requests_errors(void **state) {
    (void)state;
    /* one sequence's fields do not go with requests */
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"generate\": 4, \"requests\": {"
                REQ_MIN "}}}", ".workload.generate: not with \"requests\"", NULL);
    parse_fails(SERVE(REQ_MIN ", \"cuont\": 3"), ".workload.requests.cuont: unknown key", "allowed: count", NULL);
    parse_fails(SERVE("\"prompt_len\": {\"fixed\": 16}, \"output_len\": {\"fixed\": 8}, \"kv_budget\": {\"tokens\": 512}"),
                ".workload.requests.count: required", NULL);
    parse_fails(SERVE("\"count\": 8, \"prompt_len\": {\"fixed\": 16}, \"output_len\": {\"fixed\": 8}"),
                ".workload.requests.kv_budget: required", NULL);
    parse_fails(SERVE("\"count\": 8, \"prompt_len\": {\"fixed\": 16}, \"output_len\": {\"fixed\": 8}, "
                      "\"kv_budget\": {\"tokens\": 512, \"bytes\": 4096}"),
                ".workload.requests.kv_budget: expected {\"bytes\": SIZE} or {\"tokens\": N} (exactly one)", NULL);
    parse_fails(SERVE("\"count\": 8, \"prompt_len\": {\"fixed\": 16}, \"output_len\": {\"fixed\": 8}, "
                      "\"kv_budget\": {\"bytes\": \"8 MB\"}"),
                ".workload.requests.kv_budget.bytes: expected a size in bytes", "\"8 MB\"", NULL);
    parse_fails(SERVE("\"count\": 8, \"output_len\": {\"fixed\": 8}, \"kv_budget\": {\"tokens\": 512}"),
                ".workload.requests.prompt_len: required", "uniform", NULL);
    parse_fails(SERVE("\"count\": 8, \"prompt_len\": {\"uniform\": [64, 32]}, \"output_len\": {\"fixed\": 8}, "
                      "\"kv_budget\": {\"tokens\": 512}"),
                ".workload.requests.prompt_len.uniform: [64, 32]: expected LO <= HI", NULL);
    parse_fails(SERVE("\"count\": 8, \"prompt_len\": {\"uniform\": [0, 32]}, \"output_len\": {\"fixed\": 8}, "
                      "\"kv_budget\": {\"tokens\": 512}"),
                ".workload.requests.prompt_len.uniform[0]: 0 is out of range", NULL);
    parse_fails(SERVE("\"count\": 8, \"prompt_len\": {\"fixed\": 16, \"uniform\": [1, 2]}, \"output_len\": {\"fixed\": 8}, "
                      "\"kv_budget\": {\"tokens\": 512}"),
                ".workload.requests.prompt_len: expected one of {\"fixed\": N}", NULL);
    parse_fails(SERVE("\"count\": 8, \"prompt_len\": {\"normal\": 16}, \"output_len\": {\"fixed\": 8}, "
                      "\"kv_budget\": {\"tokens\": 512}"),
                ".workload.requests.prompt_len.normal: unknown key", "allowed: fixed, uniform, file", NULL);
    parse_fails(SERVE("\"count\": 8, \"prompt_len\": {\"fixed\": 16}, \"output_len\": {\"file\": \"nonexistent/lens\"}, "
                      "\"kv_budget\": {\"tokens\": 512}"),
                ".workload.requests.output_len.file: nonexistent/lens: No such file", NULL);
    parse_fails(SERVE(REQ_MIN ", \"shared_prefix\": {\"tokens\": 32, \"fraction\": 1.5}"),
                ".workload.requests.shared_prefix.fraction: 1.5 is out of range", NULL);
    parse_fails(SERVE(REQ_MIN ", \"shared_prefix\": {\"tokens\": 32}"),
                ".workload.requests.shared_prefix.fraction: required", NULL);
    parse_fails(SERVE(REQ_MIN ", \"arrival\": \"burst\""), ".workload.requests.arrival: unknown arrival \"burst\"", NULL);
    parse_fails(SERVE(REQ_MIN ", \"arrival\": {\"poisson_rate\": 0}"),
                ".workload.requests.arrival.poisson_rate: 0 is out of range: expected 0.001 .. 1e+09", NULL);
    parse_fails(SERVE(REQ_MIN ", \"arrival\": {\"poisson_rate\": 1e-300}"),
                ".workload.requests.arrival.poisson_rate: 1e-300 is out of range: expected 0.001 .. 1e+09", NULL);
    parse_fails(SERVE(REQ_MIN ", \"arrival\": {}"), ".workload.requests.arrival.poisson_rate: required", NULL);
    parse_fails(SERVE(REQ_MIN ", \"targets\": {}"), ".workload.requests.targets: empty", NULL);
    parse_fails(SERVE(REQ_MIN ", \"targets\": {\"ttft\": 5}"), ".workload.requests.targets.ttft: unknown key", NULL);
    parse_fails(SERVE(REQ_MIN ", \"stop_at_eos\": 1"), ".workload.requests.stop_at_eos: expected true or false", NULL);
    parse_fails(SERVE(REQ_MIN ", \"reserve_output\": 1.5"), ".workload.requests.reserve_output: 1.5 is out of range", NULL);
    /* the longest request must fit the context: 32 + 100 + 8 - 1 = 139 > 128 */
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"ctx\": 128, \"requests\": {"
                "\"count\": 8, \"prompt_len\": {\"uniform\": [1, 100]}, \"output_len\": {\"fixed\": 8}, \"kv_budget\": "
                "{\"tokens\": 512}, \"shared_prefix\": {\"tokens\": 32, \"fraction\": 0.5}}}}",
                ".workload.ctx: 128 positions cannot hold the longest request", "= 139", NULL);
    /* the budget sizes the pool of every variant: a pool option beside it is a clash */
    parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"warm\", \"workload\": {\"requests\": {" REQ_MIN "}}, "
                "\"matrix\": {\"kv\": [\"prealloc\", {\"name\": \"block\", \"options\": {\"pool_tokens\": 64}}]}}",
                ".workload.requests.kv_budget: kv choice \"block:pool_tokens=64\"", "pool_tokens=64", NULL);
}

static void test_requests_length_file_errors(void **state) {
    (void)state;
    char dir[512], lens[600], text[1024], err[1024];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    /* "t.json" has no folder of its own: the temp folder is allowed as --allow-read would */
    assert_int_equal(cf_allow(dir, err, sizeof(err)), 0);
    snprintf(lens, sizeof(lens), "%s/lens.txt", dir);
    FILE *f = fopen(lens, "w");
    assert_non_null(f);
    fputs("12\n7 x9\n", f);
    fclose(f);
    snprintf(text, sizeof(text), SERVE("\"count\": 8, \"prompt_len\": {\"file\": \"%s\"}, \"output_len\": {\"fixed\": 8}, "
                                       "\"kv_budget\": {\"tokens\": 512}"), lens);
    parse_fails(text, ".workload.requests.prompt_len.file: ", "lens.txt:2: expected an integer 1 .. 1048576, got \"x9\"", NULL);
    f = fopen(lens, "w");
    assert_non_null(f);
    fclose(f);
    parse_fails(text, ".workload.requests.prompt_len.file: ", "no lengths in the file", NULL);
    cf_reset();
    tu_rmtree(dir);
}

static void test_model_missing(void **state) {
    (void)state;
    parse_fails("{\"name\": \"t\", \"model\": \"nonexistent/m.gguf\", \"cache\": \"warm\", \"workload\": "
                "{\"prompt_tokens\": 4, \"generate\": 4}}", ".model: model not found: nonexistent/m.gguf", "synth", NULL);
    parse_fails("{\"name\": \"t\", \"model\": {\"path\": \"MODEL\", \"tokenizer\": \"nonexistent/tok.bin\"}, \"cache\": "
                "\"warm\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}", ".model.tokenizer: tokenizer not found", NULL);
}

static void test_model_forms(void **state) {
    (void)state;
    parse_fails("{\"name\": \"t\", \"model\": {\"path\": \"MODEL\", \"synth\": {\"shape\": \"tiny\"}}, \"cache\": \"warm\", "
                "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}", ".model: expected exactly one of \"path\" and \"synth\"", NULL);
    parse_fails("{\"name\": \"t\", \"model\": 3, \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}",
                ".model: expected a path or an object", NULL);
}

static void test_synth_spec(void **state) {
    (void)state;
    scenario *s = parse_ok("{\"name\": \"t\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"seed\": 7}}, \"cache\": \"warm\", "
                           "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}");
    assert_true(s->synth);
    char p[256];
    assert_int_equal(sc_synth_path(s, "results/models", p, sizeof(p)), 0);
    assert_string_equal(p, "results/models/tiny-f32-s7.gguf");
    sc_free(s);
    /* the ending is the format's (model_writers): .bin for llama2c, none for safetensors' folder */
    s = parse_ok("{\"name\": \"t\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"format\": \"llama2c\"}}, \"cache\": \"warm\", "
                 "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}");
    assert_int_equal(sc_synth_path(s, "results/models", p, sizeof(p)), 0);
    assert_string_equal(p, "results/models/tiny-f32-s1.bin");
    sc_free(s);
    s = parse_ok("{\"name\": \"t\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"format\": \"safetensors\", \"dtype\": \"bf16\"}}, "
                 "\"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}");
    assert_int_equal(sc_synth_path(s, "results/models", p, sizeof(p)), 0);
    assert_string_equal(p, "results/models/tiny-bf16-s1");
    sc_free(s);
    parse_fails("{\"name\": \"t\", \"model\": {\"synth\": {\"shape\": \"huge-9t\"}}, \"cache\": \"warm\", "
                "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}", ".model.synth.shape: unknown shape \"huge-9t\" (have: ", NULL);
    parse_fails("{\"name\": \"t\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"dtype\": \"f8\"}}, \"cache\": \"warm\", "
                "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}", ".model.synth.dtype: unknown dtype \"f8\"", NULL);
    parse_fails("{\"name\": \"t\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"format\": \"onnx\"}}, \"cache\": \"warm\", "
                "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}", ".model.synth.format: unknown format \"onnx\" (have: gguf, safetensors, llama2c)", NULL);
    parse_fails("{\"name\": \"t\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"format\": \"safetensors\", \"dtype\": \"q8_0\"}}, "
                "\"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}",
                ".model.synth: format safetensors holds f32, f16 and bf16, not q8_0", NULL);
    parse_fails("{\"name\": \"t\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"format\": \"llama2c\", \"dtype\": \"f16\"}}, "
                "\"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}", ".model.synth: format llama2c holds f32 only", NULL);
}

static void test_unknown_module(void **state) {
    (void)state;
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [\"pread\", \"mmpa\"]}}",
                ".matrix.loader[1]: unknown loader \"mmpa\" (have: ", "mmap", "pread", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"fixed\": {\"kv\": \"paged\"}}}",
                ".matrix.fixed.kv: unknown kv \"paged\" (have: ", NULL);
}

static void test_module_options(void **state) {
    (void)state;
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [{\"name\": \"mmap\", \"options\": {\"advise\": \"random\"}}]}}",
                ".matrix.loader[0]: loader mmap: unknown option \"advise\" (have: ", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [{\"name\": \"mmap\", \"options\": {\"advice\": \"bogus\"}}]}}",
                ".matrix.loader[0]: loader mmap: option advice=bogus: expected one of", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [{\"name\": \"pread\", \"options\": {\"chunk\": [1]}}]}}",
                ".matrix.loader[0].options.chunk: expected a boolean, number or string", NULL);
}

static void test_cache_rules(void **state) {
    (void)state;
    parse_fails("{" BASE "}", ".cache: required: \"cold\" or \"warm\"", NULL);
    parse_fails("{" BASE ", \"cache\": \"lukewarm\"}", ".cache: expected \"cold\" or \"warm\", got \"lukewarm\"", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"cache\": [\"cold\"]}}", ".matrix.cache: cache is given twice", NULL);
}

static void test_axis_list_rules(void **state) {
    (void)state;
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": []}}", ".matrix.loader: empty list", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [\"mmap\", \"mmap\"]}}",
                ".matrix.loader[1]: duplicate choice \"mmap\"", "label", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"kv\": [\"prealloc\"], \"fixed\": {\"kv\": \"dynamic\"}}}",
                ".matrix.fixed.kv: kv is given twice", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"threads\": [1, -2]}}", ".matrix.threads[1]: -2 is out of range", NULL);
}

static void test_metrics_rules(void **state) {
    (void)state;
    parse_fails("{" BASE ", \"cache\": \"warm\", \"metrics\": [\"timeline\", \"cycles\"]}",
                ".metrics[1]: expected one of timeline, pss, smaps, perf, tokens, instructions:callgrind, bandwidth, accuracy, got \"cycles\"", NULL);
    /* instruction counts are deterministic with one thread only */
    parse_fails("{" BASE ", \"cache\": \"warm\", \"metrics\": [\"instructions:callgrind\"]}",
                ".threads: \"instructions:callgrind\" needs threads 1", "got 0", NULL);
    scenario *cg = parse_ok("{" BASE ", \"cache\": \"warm\", \"threads\": 1, \"metrics\": [\"instructions:callgrind\"]}");
    assert_int_equal(cg->metrics, SC_M_CALLGRIND);
    sc_free(cg);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"metrics\": [\"pss\"]}", ".metrics: \"pss\" is sampled with the timeline", NULL);
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\", \"metrics\": [\"timeline\", \"perf\"]}");
    assert_int_equal(s->metrics, SC_M_TIMELINE | SC_M_PERF);
    sc_free(s);
    s = parse_ok("{" BASE ", \"cache\": \"warm\", \"metrics\": [\"bandwidth\"]}");
    assert_int_equal(s->metrics, SC_M_BANDWIDTH);
    sc_free(s);
}

/* The kv_cache axis: "f16" by default (production's cache; the default brings no accuracy
 * metric, a chosen cheaper type does), K and V alike or apart (q8_0/f16), crossed like any
 * axis, labelled for tables, carried to the worker; a type no module stores, or a malformed
 * one, is a validation error naming the field. */
static void test_kv_cache_axis(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\"}");
    assert_string_equal(sc_pick(s, &s->variants[0], SC_AX_KV_CACHE)->name, "f16");
    assert_false(s->metrics & SC_M_ACCURACY);
    sc_free(s);
    s = parse_ok("{" BASE ", \"cache\": \"warm\", \"kv_cache\": \"f32\"}");
    assert_string_equal(sc_pick(s, &s->variants[0], SC_AX_KV_CACHE)->name, "f32");
    assert_false(s->metrics & SC_M_ACCURACY);
    sc_free(s);
    s = parse_ok("{" BASE ", \"cache\": \"warm\", \"kv_cache\": \"f16\"}");
    assert_true(s->metrics & SC_M_ACCURACY);
    sc_free(s);
    s = parse_ok("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"kv_cache\": [\"f16\", \"q8_0/f16\", \"bf16/bf16\"]}}");
    assert_int_equal(s->n_variants, 3);
    assert_string_equal(sc_pick(s, &s->variants[1], SC_AX_KV_CACHE)->name, "q8_0/f16");
    assert_string_equal(sc_pick(s, &s->variants[1], SC_AX_KV_CACHE)->label, "k:q8_0,v:f16");
    assert_string_equal(sc_pick(s, &s->variants[2], SC_AX_KV_CACHE)->name, "bf16");
    char *spec = rn_worker_spec(s, &s->variants[1]);
    assert_non_null(spec);
    assert_non_null(strstr(spec, "\"kv_cache\":\t\"q8_0/f16\"") ? spec : strstr(spec, "\"kv_cache\": \"q8_0/f16\""));
    free(spec);
    sc_free(s);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"kv_cache\": \"q6_k\"}",
                ".kv_cache: expected a KV cache type (f32, f16, bf16, q8_0, q4_0, or K/V as q8_0/f16), got \"q6_k\"", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"kv_cache\": [\"f16\", 8]}}",
                ".matrix.kv_cache[1]: expected a KV cache type", "got a number", NULL);
}

/* The kernels axis: "auto" by default, a list crosses like any axis, an unknown family
 * names the known ones, and the worker spec carries the choice. */
static void test_kernels_axis(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\"}");
    assert_string_equal(sc_pick(s, &s->variants[0], SC_AX_KERNELS)->name, "auto");
    sc_free(s);
    s = parse_ok("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"kernels\": [\"portable\", \"auto\"]}}");
    assert_int_equal(s->n_variants, 2);
    assert_string_equal(s->variants[0].key, "kernels=portable");
    assert_string_equal(s->variants[1].key, "kernels=auto");
    char *spec = rn_worker_spec(s, &s->variants[0]);
    assert_non_null(spec);
    const char *kk = strstr(spec, "\"kernels\"");
    assert_non_null(kk);
    kk += strlen("\"kernels\"");
    while (*kk == ':' || *kk == ' ' || *kk == '\t') kk++;
    assert_true(!strncmp(kk, "\"portable\"", 10));
    free(spec);
    sc_free(s);
    s = parse_ok("{" BASE ", \"cache\": \"warm\", \"kernels\": \"portable\"}");
    assert_string_equal(sc_pick(s, &s->variants[0], SC_AX_KERNELS)->name, "portable");
    sc_free(s);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"kernels\": [\"portable\", \"avx9\"]}}",
                ".matrix.kernels[1]: expected a kernel family (auto, vnni, avx512-bf16, amx, avx512, avx512-wide, avx2-int8, avx2, portable", "\"avx9\"", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"kernels\": 3}", ".kernels: expected a kernel family", "got a number", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"kernels\": \"portable\", \"matrix\": {\"kernels\": [\"auto\"]}}",
                "kernels is given twice", NULL);
}

/* The int at offset off of variant v's worker spec as the worker reads it back, and in *written
 * whether the spec's text has key at all. */
static int spec_int(const scenario *s, int v, size_t off, const char *key, int *written) {
    char *text = sc_engine_worker_spec(s, &s->variants[v]);
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    ws_engine r;
    char err[256];
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), 0);
    const int value = *(const int *)((const char *)&r + off);
    *written = cJSON_GetObjectItemCaseSensitive(j, key) != NULL;
    ws_engine_free(&r);
    cJSON_Delete(j);
    free(text);
    return value;
}

/* The worker spec's repack for variant i of s, as the worker reads it back. */
static int spec_repack(const scenario *s, int i) {
    int written;
    const int repack = spec_int(s, i, offsetof(ws_engine, repack), "repack", &written);
    /* written only when false: the default variants' specs are as they were before the field */
    assert_int_equal(written, !repack);
    return repack;
}

/* The repack field: a boolean, true by default, and then in no variant's name (results and
 * baselines from before it keep theirs); false, fixed or crossed, names the variant and reaches
 * the worker as repack false; --only takes its value or its label; anything but a boolean is
 * refused with the field's path. */
static void test_repack_axis(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\"}");
    assert_int_equal(sc_pick(s, &s->variants[0], SC_AX_REPACK)->ival, 1);
    assert_false(sc_axis_shown(s, SC_AX_REPACK));
    assert_string_equal(s->variants[0].key, "default");
    assert_int_equal(spec_repack(s, 0), 1);
    sc_free(s);
    s = parse_ok("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [\"pread\", \"mmap\"]}, \"repack\": true}");
    assert_string_equal(s->variants[1].key, "loader=mmap");
    sc_free(s);
    /* false, at the top level or in matrix.fixed: one variant, named by it */
    static const char *const fixed_false[] = {
        "{" BASE ", \"cache\": \"warm\", \"repack\": false}",
        "{" BASE ", \"cache\": \"warm\", \"matrix\": {\"fixed\": {\"repack\": false}}}",
    };
    for (int i = 0; i < 2; i++) {
        s = parse_ok(fixed_false[i]);
        assert_int_equal(s->n_variants, 1);
        assert_true(sc_axis_shown(s, SC_AX_REPACK));
        assert_string_equal(sc_pick(s, &s->variants[0], SC_AX_REPACK)->name, "false");
        assert_string_equal(s->variants[0].key, "repack=no-repack");
        assert_int_equal(spec_repack(s, 0), 0);
        sc_free(s);
    }
    /* an axis: crossed like any, the last varying fastest */
    s = parse_ok("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [\"pread\"], \"repack\": [true, false]}}");
    assert_int_equal(s->n_variants, 2);
    assert_string_equal(s->variants[0].key, "loader=pread,repack=repack");
    assert_string_equal(s->variants[1].key, "loader=pread,repack=no-repack");
    assert_string_equal(sc_pick(s, &s->variants[1], SC_AX_REPACK)->label, "no-repack");
    assert_int_equal(spec_repack(s, 0), 1);
    assert_int_equal(spec_repack(s, 1), 0);
    char err[256];
    assert_int_equal(sc_select(s, "repack=false", err, sizeof(err)), 0);
    assert_true(!s->variants[0].selected && s->variants[1].selected);
    assert_int_equal(sc_select(s, "repack=repack", err, sizeof(err)), 0);
    assert_true(s->variants[0].selected && !s->variants[1].selected);
    sc_free(s);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"repack\": \"yes\"}",
                "t.json: .repack: expected true (rearrange Q4_0 weights at load", "or false (keep the file's layout), got \"yes\"",
                NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"repack\": 0}", ".repack: expected true", "got a number", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"repack\": [true, \"false\"]}}",
                ".matrix.repack[1]: expected true", "got \"false\"", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"fixed\": {\"repack\": null}}}",
                ".matrix.fixed.repack: expected true", "got null", NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"repack\": false}}", ".matrix.repack: expected a list of choices",
                NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"repack\": [false, false]}}", ".matrix.repack[1]: duplicate choice",
                NULL);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"repack\": false, \"matrix\": {\"repack\": [true]}}", "repack is given twice",
                NULL);
}

/* The scratch field: "keep" by default and then in no variant's name and not in the worker's
 * spec; "pass" names the variant and reaches the worker as 1; another value is refused with
 * the field's path and the two it takes. */
static void test_scratch_axis(void **state) {
    (void)state;
    for (int pass = 0; pass < 2; pass++) {
        scenario *s = parse_ok(pass ? "{" BASE ", \"cache\": \"warm\", \"matrix\": {\"scratch\": [\"keep\", \"pass\"]}}"
                                    : "{" BASE ", \"cache\": \"warm\"}");
        assert_int_equal(s->n_variants, 1 + pass);
        for (int i = 0; i < s->n_variants; i++) {
            int written;
            assert_int_equal(spec_int(s, i, offsetof(ws_engine, scratch), "scratch", &written), i);
            assert_int_equal(written, i);
        }
        assert_string_equal(s->variants[pass].key, pass ? "scratch=pass" : "default");
        sc_free(s);
    }
    parse_fails("{" BASE ", \"cache\": \"warm\", \"scratch\": \"kept\"}",
                "t.json: .scratch: expected \"keep\" (the forward pass's activations", "\"pass\" (a block", "got \"kept\"", NULL);
}

/* The ubatch field: absent by default, then in no variant's name and not in the worker's spec
 * (the engine's 512); named, it is carried to the worker as given; below 32 it is refused
 * with the field's path. */
static void test_ubatch_axis(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"ubatch\": [512, 64]}}");
    assert_int_equal(s->n_variants, 2);
    const int want[2] = {512, 64};
    int written;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(spec_int(s, i, offsetof(ws_engine, ubatch), "ubatch", &written), want[i]);
        assert_int_equal(written, i); /* 512 is the default: not written */
    }
    assert_string_equal(s->variants[1].key, "ubatch=64");
    sc_free(s);
    s = parse_ok("{" BASE ", \"cache\": \"warm\"}");
    assert_int_equal(spec_int(s, 0, offsetof(ws_engine, ubatch), "ubatch", &written), 512);
    assert_int_equal(written, 0);
    sc_free(s);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"ubatch\": 16}", "t.json: .ubatch:", "32", NULL);
}

static void test_test_hooks_need_env(void **state) {
    (void)state;
    unsetenv("BENCH_TEST_HOOKS");
    parse_fails("{" BASE ", \"cache\": \"warm\", \"test_hooks\": {\"fault\": \"segv\"}}",
                ".test_hooks: accepted only when BENCH_TEST_HOOKS=1", NULL);
    setenv("BENCH_TEST_HOOKS", "1", 1);
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\", \"test_hooks\": {\"fault\": \"segv\", \"delay_ms\": 5}}");
    assert_string_equal(s->fault, "segv");
    assert_int_equal(s->delay_ms, 5);
    sc_free(s);
    parse_fails("{" BASE ", \"cache\": \"warm\", \"test_hooks\": {\"fault\": \"melt\"}}", ".test_hooks.fault: unknown fault \"melt\"", NULL);
    unsetenv("BENCH_TEST_HOOKS");
}

static void test_every_error_reported(void **state) {
    (void)state;
    int n = parse_fails("{\"name\": \"t\", \"model\": \"MODEL\", \"cache\": \"cold\", \"bogus\": 1, \"repetitions\": 0,"
                        " \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, \"matrix\": {\"loader\": [\"mmpa\"]}}",
                        ".bogus: unknown key", NULL);
    assert_true(n >= 3);
}

static void test_only_selects(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"matrix\": {\"loader\": [\"pread\", \"mmap\"], \"cache\": [\"cold\", \"warm\"]}}");
    char err[256];
    assert_int_equal(sc_select(s, "loader=mmap,cache=warm", err, sizeof(err)), 0);
    assert_int_equal(sc_n_selected(s), 1);
    assert_true(s->variants[3].selected);
    assert_int_equal(sc_select(s, "cache=cold,cache=warm,loader=pread", err, sizeof(err)), 0);
    assert_int_equal(sc_n_selected(s), 2);
    assert_int_equal(sc_select(s, "laoder=mmap", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown key \"laoder\""));
    assert_int_equal(sc_select(s, "loader=mmpa", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "no choice \"mmpa\" in this scenario (have: pread, mmap)"));
    sc_free(s);
}

/* ---- read paths: confined to the allowed folders (harness/scenario/confine.h) ---- */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Writes tmpl (MODEL substituted, then one %s: arg) to file and loads it; returns the
 * errors joined by newlines ("" when it loaded), for strstr. */
static char *load_errors(const char *file, const char *tmpl, const char *arg) {
    char *t = subst(tmpl), text[4096];
    snprintf(text, sizeof(text), t, arg);
    free(t);
    write_text(file, text);
    scenario *s = NULL;
    sc_errors e;
    int rc = sc_load(file, tu_module_dir(), &s, &e);
    size_t n = 1;
    for (int i = 0; i < e.n; i++) n += strlen(e.v[i]) + 1;
    char *all = calloc(1, n);
    assert_non_null(all);
    for (int i = 0; i < e.n; i++) strcat(strcat(all, e.v[i]), "\n");
    assert_int_equal(rc, e.n ? -1 : 0);
    sc_free(s);
    sc_errors_free(&e);
    return all;
}

static void expect_refused(const char *errs, const char *file, const char *jpath, const char *resolved, const char *dir) {
    char want[2048];
    snprintf(want, sizeof(want), "%s: %s: ", file, jpath);
    if (!strstr(errs, want)) fail_msg("no error at %s: %s", want, errs);
    snprintf(want, sizeof(want), "resolves to %s, outside the folders a scenario may read from (", resolved);
    if (!strstr(errs, want)) fail_msg("no \"%s\" in: %s", want, errs);
    snprintf(want, sizeof(want), "; nothing was read. To allow it: --allow-read %s, or BENCH_ALLOW_READ=%s", dir, dir);
    if (!strstr(errs, want)) fail_msg("no \"%s\" in: %s", want, errs);
    if (!strstr(errs, "(the scenario's folder)")) fail_msg("the roots are not listed: %s", errs);
    /* refused before it was looked at: no "not found", no line of the file */
    if (strstr(errs, "No such file") || strstr(errs, "not found") || strstr(errs, "expected an integer"))
        fail_msg("a refused path was read: %s", errs);
}

static void test_read_paths_confined(void **state) {
    (void)state;
    TU_NEED(model_path[0]);
    char tmp[512], dir[PATH_MAX], scen[PATH_MAX + 16], out[PATH_MAX + 16], file[PATH_MAX + 32], p[PATH_MAX + 64],
        link[PATH_MAX + 64];
    assert_non_null(tu_tmpdir(tmp, sizeof(tmp)));
    assert_non_null(realpath(tmp, dir));    /* the messages name resolved paths */
    snprintf(scen, sizeof(scen), "%s/scen", dir);
    snprintf(out, sizeof(out), "%s/outside", dir);
    assert_int_equal(mkdir(scen, 0755), 0);
    assert_int_equal(mkdir(out, 0755), 0);
    snprintf(file, sizeof(file), "%s/s.json", scen);
    snprintf(p, sizeof(p), "%s/lens.txt", scen);
    write_text(p, "16 12\n");
    snprintf(p, sizeof(p), "%s/lens.txt", out);
    write_text(p, "16\nsecret-bytes\n");
    const char *lens = SERVE("\"count\": 8, \"prompt_len\": {\"file\": \"%s\"}, \"output_len\": {\"fixed\": 8}, "
                             "\"kv_budget\": {\"tokens\": 512}");
    const char *jp = ".workload.requests.prompt_len.file";
    char *e;

    /* inside the scenario's folder: read */
    snprintf(p, sizeof(p), "%s/lens.txt", scen);
    e = load_errors(file, lens, p);
    if (e[0]) fail_msg("a file beside the scenario was refused: %s", e);
    free(e);
    /* outside it, named plainly */
    snprintf(p, sizeof(p), "%s/lens.txt", out);
    e = load_errors(file, lens, p);
    expect_refused(e, file, jp, p, out);
    free(e);
    /* through a symlink inside the scenario's folder */
    snprintf(link, sizeof(link), "%s/link.txt", scen);
    assert_int_equal(symlink(p, link), 0);
    e = load_errors(file, lens, link);
    expect_refused(e, file, jp, p, out);
    free(e);
    /* through .. */
    snprintf(link, sizeof(link), "%s/../outside/lens.txt", scen);
    e = load_errors(file, lens, link);
    expect_refused(e, file, jp, p, out);
    free(e);
    /* a missing file outside is refused too, and so is a dangling link to one: the
     * answer never says what exists there */
    snprintf(p, sizeof(p), "%s/none.txt", out);
    e = load_errors(file, lens, p);
    expect_refused(e, file, jp, p, out);
    free(e);
    snprintf(link, sizeof(link), "%s/dangling.txt", scen);
    assert_int_equal(symlink(p, link), 0);
    e = load_errors(file, lens, link);
    expect_refused(e, file, jp, p, out);
    free(e);
    /* a symlink loop cannot be resolved: refused, not read */
    snprintf(link, sizeof(link), "%s/loop.txt", scen);
    assert_int_equal(symlink(link, link), 0);
    e = load_errors(file, lens, link);
    if (!strstr(e, "loop.txt: cannot be resolved")) fail_msg("a symlink loop: %s", e);
    free(e);
    /* the model and the tokenizer: their own JSON paths */
    snprintf(p, sizeof(p), "%s/m.gguf", out);
    e = load_errors(file, "{\"name\": \"t\", \"model\": {\"path\": \"%s\"}, \"cache\": \"warm\", \"workload\": "
                          "{\"prompt_tokens\": 4, \"generate\": 4}}", p);
    expect_refused(e, file, ".model.path", p, out);
    free(e);
    e = load_errors(file, "{\"name\": \"t\", \"model\": \"%s\", \"cache\": \"warm\", \"workload\": "
                          "{\"prompt_tokens\": 4, \"generate\": 4}}", p);
    expect_refused(e, file, ".model", p, out);
    free(e);
    snprintf(p, sizeof(p), "%s/tok.bin", out);
    e = load_errors(file, "{\"name\": \"t\", \"model\": {\"path\": \"MODEL\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", "
                          "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}}", p);
    expect_refused(e, file, ".model.tokenizer", p, out);
    free(e);
    /* an allocator scenario's trace */
    snprintf(p, sizeof(p), "%s/x.trace", out);
    e = load_errors(file, "{\"kind\": \"allocators\", \"name\": \"t\", \"allocators\": [\"libc\"], \"workloads\": "
                          "[{\"name\": \"a\", \"pattern\": \"trace\", \"trace\": \"%s\"}]}", p);
    expect_refused(e, file, ".workloads[0].trace", p, out);
    free(e);
    /* a safetensors folder beside the scenario whose config.json links outside */
    snprintf(p, sizeof(p), "%s/st", scen);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(link, sizeof(link), "%s/st/config.json", scen);
    snprintf(p, sizeof(p), "%s/lens.txt", out);
    assert_int_equal(symlink(p, link), 0);
    snprintf(link, sizeof(link), "%s/st", scen);
    e = load_errors(file, "{\"name\": \"t\", \"model\": \"%s\", \"cache\": \"warm\", \"workload\": "
                          "{\"prompt_tokens\": 4, \"generate\": 4}}", link);
    expect_refused(e, file, ".model", p, out);
    if (!strstr(e, "/st/config.json resolves to")) fail_msg("the link is not named: %s", e);
    free(e);

    /* a scenario in the home directory does not open it to itself: a folder that holds
     * $HOME is no root unless named */
    const char *h = getenv("HOME");
    char *home = h ? strdup(h) : NULL;
    setenv("HOME", scen, 1);
    snprintf(p, sizeof(p), "%s/lens.txt", scen);
    e = load_errors(file, lens, p);
    if (!strstr(e, "outside the folders a scenario may read from") || strstr(e, "(the scenario's folder)"))
        fail_msg("the home directory counted as the scenario's folder: %s", e);
    free(e);
    snprintf(p, sizeof(p), "%s/st", scen);
    setenv("HOME", p, 1);   /* below the scenario's folder: that folder holds it */
    snprintf(p, sizeof(p), "%s/lens.txt", scen);
    e = load_errors(file, lens, p);
    if (!strstr(e, "outside the folders a scenario may read from")) fail_msg("a folder holding $HOME counted: %s", e);
    free(e);
    if (home) setenv("HOME", home, 1);
    else unsetenv("HOME");
    free(home);

    /* --allow-read (cf_allow) lets the file be read: its second line is then an error of its own */
    snprintf(p, sizeof(p), "%s/lens.txt", out);
    char err[PATH_MAX + 256];
    assert_int_equal(cf_allow(out, err, sizeof(err)), 0);
    e = load_errors(file, lens, p);
    if (!strstr(e, "lens.txt:2: expected an integer")) fail_msg("--allow-read did not allow it: %s", e);
    free(e);
    cf_reset();
    e = load_errors(file, lens, p);
    expect_refused(e, file, jp, p, out);
    free(e);
    assert_int_equal(cf_allow("/nonexistent/dir", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--allow-read /nonexistent/dir: No such file"));
    /* ... and so does $BENCH_ALLOW_READ, one folder of a colon-separated list */
    const char *old = getenv("BENCH_ALLOW_READ");
    char *keep = old ? strdup(old) : NULL, env[2 * PATH_MAX];
    snprintf(env, sizeof(env), "/nonexistent:%s:%s", out, old ? old : "");
    setenv("BENCH_ALLOW_READ", env, 1);
    e = load_errors(file, lens, p);
    if (!strstr(e, "lens.txt:2: expected an integer")) fail_msg("BENCH_ALLOW_READ did not allow it: %s", e);
    free(e);
    if (keep) setenv("BENCH_ALLOW_READ", keep, 1);
    else unsetenv("BENCH_ALLOW_READ");
    free(keep);
    tu_rmtree(dir);
}

/* The shipped scenarios need no flag and no variable (make run, .ci/run): their traces
 * are under scenarios/, their models synth specs. Some cannot load here for reasons of
 * their own (a CUDA device, jemalloc's static TLS), but none for a path; make run's
 * and CI's load. */
static void test_shipped_scenarios_need_no_flag(void **state) {
    (void)state;
    const char *old = getenv("BENCH_ALLOW_READ");
    char *keep = old ? strdup(old) : NULL;
    unsetenv("BENCH_ALLOW_READ");
    glob_t g;
    assert_int_equal(glob("scenarios/*.json", 0, NULL, &g), 0);
    assert_true(g.gl_pathc >= 8);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *file = g.gl_pathv[i];
        scenario *s = NULL;
        sc_errors e;
        int rc = sc_load(file, tu_module_dir(), &s, &e);
        for (int k = 0; k < e.n; k++)
            if (strstr(e.v[k], "outside the folders")) fail_msg("a shipped scenario needs a flag: %s", e.v[k]);
        if (!strcmp(file, "scenarios/mmap_vs_pread.json") || !strcmp(file, "scenarios/ci.json")) {
            for (int k = 0; k < e.n; k++) fprintf(stderr, "%s\n", e.v[k]);
            assert_int_equal(rc, 0);
        }
        sc_free(s);
        sc_errors_free(&e);
    }
    globfree(&g);
    if (keep) setenv("BENCH_ALLOW_READ", keep, 1);
    free(keep);
}

/* Each shipped scenario says in its description what it runs: the synth shape, the weights'
 * dtype, and every KV cache type (the default, f16, where it names none). */
static void test_shipped_scenarios_say_what_they_run(void **state) {
    (void)state;
    glob_t g;
    assert_int_equal(glob("scenarios/*.json", 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char err[256];
        char *text = ut_slurp(g.gl_pathv[i], 1 << 20, NULL, err, sizeof err);
        assert_non_null(text);
        cJSON *j = cJSON_Parse(text);
        assert_non_null(j);
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "description");
        const cJSON *synth = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "model"), "synth");
        if (synth) {
            assert_true(cJSON_IsString(d));
            const char *want[16];
            int n = 0;
            want[n++] = cJSON_GetObjectItemCaseSensitive(synth, "shape")->valuestring;
            want[n++] = cJSON_GetObjectItemCaseSensitive(synth, "dtype")->valuestring;
            const cJSON *mx = cJSON_GetObjectItemCaseSensitive(j, "matrix");
            const cJSON *kc = cJSON_GetObjectItemCaseSensitive(j, "kv_cache");
            if (!kc) kc = cJSON_GetObjectItemCaseSensitive(mx, "kv_cache");
            if (!kc) kc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(mx, "fixed"), "kv_cache");
            if (!kc) want[n++] = "f16";
            else if (cJSON_IsString(kc)) want[n++] = kc->valuestring;
            else for (const cJSON *it = kc ? kc->child : NULL; it && n < 16; it = it->next) want[n++] = it->valuestring;
            for (int k = 0; k < n; k++)
                if (!strcasestr(d->valuestring, want[k]))
                    fail_msg("%s: the description does not say \"%s\"", g.gl_pathv[i], want[k]);
        }
        cJSON_Delete(j);
        free(text);
    }
    globfree(&g);
}

static void test_missing_file(void **state) {
    (void)state;
    scenario *s;
    sc_errors e;
    assert_int_equal(sc_load("/nonexistent/x.json", NULL, &s, &e), -1);
    assert_int_equal(e.n, 1);
    assert_non_null(strstr(e.v[0], "/nonexistent/x.json: cannot open"));
    sc_errors_free(&e);
}

/* An http target's settings are parsed once, typed, at the scenario: the worker spec carries
 * them as tg_to_json writes them and the worker reads back the same values (defaults written,
 * the preset named and expanded on both sides), and a spec edited by hand is checked as a
 * scenario is. */
static void test_worker_spec_target_typed(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\", \"target\": {\"label\": \"srv\", \"http\": {\"url\": \"http://127.0.0.1:{port}\", "
                           "\"launch\": [\"{bench}\", \"serve\", \"--port\", \"{port}\"], \"request_timeout_s\": 7.5, "
                           "\"metrics\": {\"preset\": \"vllm\", \"series\": [\"x:y{a=\\\"b\\\"}\"], \"period_s\": 0.25}}}}");
    const sc_choice *ch = &s->axes[SC_AX_TARGET].v[0];
    assert_non_null(ch->http);
    assert_string_equal(ch->http->health, "/health");                      /* defaults applied at parse */
    assert_true(ch->http->ready_timeout_s == 120 && ch->http->request_timeout_s == 7.5 && ch->http->ignore_eos == 1);
    assert_int_equal(ch->http->metrics.n, 5);                               /* vllm's 4, then the block's own */
    assert_int_equal(tm_preset_series(&ch->http->metrics), 4);
    assert_string_equal(ch->http->metrics.s[0].fallback, "vllm:gpu_cache_usage_perc");
    char *text = sc_engine_worker_spec(s, &s->variants[0]);
    cJSON *j = cJSON_Parse(text);
    ws_engine r;
    char err[512];
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), 0);
    const tg_http *a = ch->http, *b = r.target_http;
    assert_non_null(b);
    assert_string_equal(r.target, "http");
    assert_string_equal(b->url, a->url);
    assert_string_equal(b->health, a->health);
    for (int i = 0; i < 5; i++) assert_string_equal(b->launch[i] ? b->launch[i] : "(end)", a->launch[i] ? a->launch[i] : "(end)");
    assert_true(b->ready_timeout_s == a->ready_timeout_s && b->request_timeout_s == 7.5 && b->stop_timeout_s == a->stop_timeout_s);
    assert_true(b->pid == 0 && b->concurrency == 0 && b->ignore_eos == 1 && b->memory_tree == 0 && b->model == NULL);
    assert_true(b->metrics.n == 5 && tm_preset_series(&b->metrics) == 4 && b->metrics.preset == a->metrics.preset && b->metrics.period_s == 0.25);
    for (int i = 0; i < 5; i++) {
        assert_string_equal(b->metrics.s[i].name, a->metrics.s[i].name);
        assert_true((b->metrics.s[i].fallback == NULL) == (a->metrics.s[i].fallback == NULL));
    }
    ws_engine_free(&r);
    /* a spec edited by hand: the scenario's checks, the first error named */
    cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "target_http");
    assert_non_null(h);
    cJSON_ReplaceItemInObjectCaseSensitive(h, "stop_timeout_s", cJSON_CreateNumber(0));
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "target_http: target.http.stop_timeout_s: expected seconds"));
    ws_engine_free(&r);
    cJSON_Delete(j);
    free(text);
    sc_free(s);
}

/* The worker spec: what the parent writes, the worker reads back field for field through
 * the same table; an absent field reads as the table's default. */
static void test_worker_spec_round_trip(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [\"pread\"]}}");
    ws_engine w, r;
    ws_engine_fill(&w, s, &s->variants[0]);
    char *text = sc_engine_worker_spec(s, &s->variants[0]);
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    char err[256];
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), 0);
    assert_string_equal(r.model, w.model);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(r.module[i], w.module[i]);
        assert_int_equal(r.opts[i].v.n, w.opts[i].v.n);
    }
    assert_string_equal(r.module[0], "pread");
    assert_string_equal(r.device, w.device);
    assert_string_equal(r.kernels, w.kernels);
    assert_string_equal(r.kv_cache, w.kv_cache);
    assert_int_equal(r.repack, w.repack);
    assert_string_equal(r.module_dir, w.module_dir);
    assert_true(r.threads == w.threads && r.ctx == w.ctx && r.bandwidth == w.bandwidth);
    assert_true(r.prompt == NULL && r.prompt_tokens == 4 && r.generate == 4);
    assert_true(r.seed == 42 && r.topp == s->topp && r.temperature == s->temperature);
    assert_null(r.requests);
    /* one sequence: no "requests"; prompt_tokens, not prompt */
    assert_null(cJSON_GetObjectItemCaseSensitive(j, "requests"));
    assert_null(cJSON_GetObjectItemCaseSensitive(j, "prompt"));
    ws_engine_free(&r);
    cJSON_Delete(j);
    free(text);
    /* an empty spec: the table's defaults (the sampler's seed and top-p) */
    j = cJSON_Parse("{}");
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), 0);
    assert_true(r.seed == 42 && r.topp == 0.9 && r.temperature == 0 && r.threads == 0);
    assert_null(r.model);
    ws_engine_free(&r);
    cJSON_Delete(j);
    sc_free(s);
    /* a serving spec carries its requests, and no prompt or generate */
    s = parse_ok(SERVE(REQ_MIN));
    text = sc_engine_worker_spec(s, &s->variants[0]);
    j = cJSON_Parse(text);
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), 0);
    assert_non_null(r.requests);
    assert_int_equal(r.requests->count, 8);
    assert_null(cJSON_GetObjectItemCaseSensitive(j, "generate"));
    ws_engine_free(&r);
    cJSON_Delete(j);
    free(text);
    sc_free(s);
}

/* The value at option `name`'s offset of a filled options struct (the test reads the module's
 * own table for the offset). */
static const void *opt_slot(const bench_module *m, const void *filled, const char *name) {
    for (const bench_option *d = m->options; d && d->name; d++)
        if (!strcmp(d->name, name)) return (const char *)filled + d->offset;
    fail_msg("%s %s has no option %s", m->family, m->name, name);
    return NULL;
}

/* Options travel once: the parent checks the scenario's options against each module's table
 * and the worker spec carries them typed (a size as a number, a bool as true, an enum's choice
 * by name); the worker's typed values fill the module's struct with no text parsed. */
static void test_worker_spec_typed_options(void **state) {
    (void)state;
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [{\"name\": \"pread\", \"options\": "
                           "{\"chunk\": \"64k\", \"direct\": true}}, {\"name\": \"mmap\", \"options\": {\"mode\": \"private\", "
                           "\"populate\": 1}}], \"fixed\": {\"kv\": {\"name\": \"dynamic\", \"options\": {\"step\": 16}}, "
                           "\"alloc\": {\"name\": \"arena\", \"options\": {\"chunk\": \"1m\"}}}}}");
    char *text = sc_engine_worker_spec(s, &s->variants[0]);
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(j, "loader_opts");
    assert_true(cJSON_IsObject(lo));
    const cJSON *chunk = cJSON_GetObjectItemCaseSensitive(lo, "chunk");
    assert_true(cJSON_IsNumber(chunk) && chunk->valuedouble == 65536);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lo, "direct")));
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "kv_opts"), "step");
    assert_true(cJSON_IsNumber(step) && step->valuedouble == 16);
    const cJSON *ac = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "alloc_opts"), "chunk");
    assert_true(cJSON_IsNumber(ac) && ac->valuedouble == 1048576);
    ws_engine r;
    char err[512];
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), 0);
    assert_int_equal(r.opts[0].v.n, 2);
    assert_int_equal(r.opts[0].v.v[0].kind, BENCH_OPTV_NUM);
    assert_int_equal(r.opts[0].v.v[1].kind, BENCH_OPTV_BOOL);
    /* the worker's side: the typed values into pread's struct */
    modreg_entry e;
    void *filled;
    assert_int_equal(modreg_load(tu_module_dir(), "loader", "pread", &e, err, sizeof(err)), 0);
    assert_int_equal(modreg_fill_opts(e.mod, &r.opts[0].v, &filled, err, sizeof(err)), 0);
    assert_true(*(const uint64_t *)opt_slot(e.mod, filled, "chunk") == 65536);
    assert_int_equal(*(const int *)opt_slot(e.mod, filled, "direct"), 1);
    free(filled);
    modreg_entry_close(&e);
    ws_engine_free(&r);
    cJSON_Delete(j);
    free(text);
    /* an enum travels as its choice's name, a bool given as 1 as true */
    text = sc_engine_worker_spec(s, &s->variants[1]);
    j = cJSON_Parse(text);
    lo = cJSON_GetObjectItemCaseSensitive(j, "loader_opts");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(lo, "mode")->valuestring, "private");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lo, "populate")));
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), 0);
    assert_int_equal(modreg_load(tu_module_dir(), "loader", "mmap", &e, err, sizeof(err)), 0);
    assert_int_equal(modreg_fill_opts(e.mod, &r.opts[0].v, &filled, err, sizeof(err)), 0);
    assert_int_equal(*(const int *)opt_slot(e.mod, filled, "mode"), 1);    /* shared|private */
    assert_int_equal(*(const int *)opt_slot(e.mod, filled, "populate"), 1);
    free(filled);
    modreg_entry_close(&e);
    ws_engine_free(&r);
    cJSON_Delete(j);
    free(text);
    sc_free(s);
}

/* Reads spec text, expecting ws_engine_read to refuse it with msg. */
static void spec_refused(const char *spec, const char *msg) {
    cJSON *j = cJSON_Parse(spec);
    assert_non_null(j);
    ws_engine r;
    char err[512];
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), -1);
    if (!strstr(err, msg)) fail_msg("got \"%s\", want \"%s\"", err, msg);
    ws_engine_free(&r);
    cJSON_Delete(j);
}

/* Fills pread's struct from a spec's loader_opts, expecting the host to refuse it with msg:
 * a value of the wrong type is not parsed as text, nor coerced. */
static void typed_refused(const char *spec, const char *msg) {
    cJSON *j = cJSON_Parse(spec);
    ws_engine r;
    char err[512];
    assert_int_equal(ws_engine_read(j, &r, err, sizeof(err)), 0);
    modreg_entry e;
    void *filled = NULL;
    assert_int_equal(modreg_load(tu_module_dir(), "loader", "pread", &e, err, sizeof(err)), 0);
    assert_true(modreg_fill_opts(e.mod, &r.opts[0].v, &filled, err, sizeof(err)) < 0);
    assert_null(filled);
    if (!strstr(err, msg)) fail_msg("got \"%s\", want \"%s\"", err, msg);
    modreg_entry_close(&e);
    ws_engine_free(&r);
    cJSON_Delete(j);
}

/* A worker spec whose options are not typed values, or not of the option's type, is refused
 * with the field, the option and what was expected. */
static void test_worker_spec_bad_option_type(void **state) {
    (void)state;
    spec_refused("{\"loader_opts\": \"chunk=64k\"}", "worker spec: loader_opts: expected an object {\"option\": value}");
    spec_refused("{\"kv_opts\": {\"step\": [1]}}", "worker spec: kv_opts.step: expected a boolean, a whole number or a string, got an array");
    spec_refused("{\"alloc_opts\": {\"chunk\": 1.5}}", "worker spec: alloc_opts.chunk: expected a boolean, a whole number or a string");
    spec_refused("{\"device_opts\": {\"gpu\": 1e300}}", "worker spec: device_opts.gpu: expected a boolean, a whole number");
    typed_refused("{\"loader_opts\": {\"chunk\": \"64k\"}}", "loader pread: option chunk=\"64k\": expected a size (a whole number >= 0)");
    typed_refused("{\"loader_opts\": {\"direct\": 1}}", "loader pread: option direct=1: expected a boolean (true or false)");
    typed_refused("{\"loader_opts\": {\"chunk\": -4096}}", "loader pread: option chunk=-4096: expected a size");
    typed_refused("{\"loader_opts\": {\"chnk\": 4096}}", "loader pread: unknown option \"chnk\" (have: chunk");
}

/* A module of an unranged size option: a value past 2^53, which a JSON number does not hold
 * exactly, is refused by the parent rather than rounded on its way to the worker. */
typedef struct big_opts { uint64_t bytes; } big_opts;
static const bench_option big_options[] = {
    BENCH_OPTION_SIZE(big_opts, bytes, "0", 0, 0, "any size"),
    BENCH_OPTION_END,
};
static void test_typed_options_exact(void **state) {
    (void)state;
    const bench_module m = {.api_version = BENCH_MODULE_API_VERSION, .family = "kv", .name = "big", .options = big_options,
                            .opts_size = sizeof(big_opts)};
    bench_opt given[] = {{.key = "bytes", .value = "8388608g"}};   /* 2^53 */
    bench_opts in = {1, given}, out;
    void *mem;
    char err[512];
    assert_int_equal(modreg_type_opts(&m, &in, &out, &mem, err, sizeof(err)), 0);
    assert_int_equal(out.n, 1);
    assert_true(out.v[0].kind == BENCH_OPTV_NUM && out.v[0].num == BENCH_OPTV_NUM_MAX);
    assert_string_equal(out.v[0].key, "bytes");
    free(mem);
    given[0].value = "9007199254740993";
    assert_true(modreg_type_opts(&m, &in, &out, &mem, err, sizeof(err)) < 0);
    assert_null(mem);
    assert_non_null(strstr(err, "kv big: option bytes: expected a whole number of at most 2^53"));
}

/* The parent dlopens each module once however many choices and devices name it: three
 * loader choices of two modules, three kv choices of two, and the default allocator are
 * five modules, five loads (they were seven, one per choice). */
static void test_parent_loads_each_module_once(void **state) {
    (void)state;
    unsigned long before = modreg_dlopens();
    scenario *s = parse_ok("{" BASE ", \"cache\": \"warm\", \"matrix\": {\"loader\": [{\"name\": \"pread\", \"options\": "
                           "{\"chunk\": \"64k\"}}, {\"name\": \"pread\", \"options\": {\"chunk\": \"128k\"}}, \"mmap\"], "
                           "\"kv\": [\"prealloc\", \"dynamic\", {\"name\": \"dynamic\", \"options\": {\"step\": 16}}]}}");
    assert_int_equal(s->n_variants, 9);
    assert_int_equal(modreg_dlopens() - before, 5);
    /* and keeps none of them past the parse: the choices hold their typed options */
    assert_null(s->mods);
    assert_true(sc_pick(s, &s->variants[3], SC_AX_LOADER)->typed.v[0].num == 131072);
    sc_free(s);
}

/* ---- issue 39: files the parser reads, checked and opened at once ---- */

/* Runs $BENCH_BIN with argv (argv[0] ignored), stdout and stderr into out; kills it after
 * limit_s s (a hang fails the test instead of blocking the suite). Returns its exit status,
 * or -1 when it had to be killed. */
static int run_bounded(const char *out, int limit_s, char **argv) {
    const char *bin = getenv("BENCH_BIN");
    argv[0] = (char *)(bin ? bin : "build/asan/bench");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (!pid) {
        FILE *o = freopen(out, "w", stdout);
        if (!o || dup2(fileno(stdout), 2) < 0) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    for (int waited_ms = 0; waited_ms < limit_s * 1000; waited_ms += 50) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static char *slurp_text(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* A FIFO as a lengths file or a trace: bench plan and bench run said nothing and waited
 * for a writer forever (fopen blocks on a FIFO); now both refuse it at once, by name. */
static void test_fifo_inputs_refused(void **state) {
    (void)state;
    TU_NEED(model_path[0]);
    char tmp[512], dir[PATH_MAX], fifo[PATH_MAX + 16], scen[PATH_MAX + 16], out[PATH_MAX + 16], res[PATH_MAX + 16];
    assert_non_null(tu_tmpdir(tmp, sizeof(tmp)));
    assert_non_null(realpath(tmp, dir));
    snprintf(fifo, sizeof(fifo), "%s/pipe", dir);
    snprintf(scen, sizeof(scen), "%s/s.json", dir);
    snprintf(out, sizeof(out), "%s/out.txt", dir);
    snprintf(res, sizeof(res), "%s/res", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char mdir[512];
    snprintf(mdir, sizeof(mdir), "%s", model_path);
    *strrchr(mdir, '/') = 0;
    static const char *const reqs[] = {
        SERVE("\"count\": 8, \"prompt_len\": {\"file\": \"%s\"}, \"output_len\": {\"fixed\": 8}, \"kv_budget\": {\"tokens\": 512}"),
        SERVE("\"trace\": {\"file\": \"%s\", \"format\": \"burstgpt\", \"requests\": 4}, \"kv_budget\": {\"tokens\": 512}"),
    };
    static const char *const where[] = {".workload.requests.prompt_len.file", ".workload.requests.trace.file"};
    for (int k = 0; k < 2; k++) {
        char *t = subst(reqs[k]), text[4096];
        snprintf(text, sizeof(text), t, fifo);
        free(t);
        write_text(scen, text);
        char want[2 * PATH_MAX + 256];
        snprintf(want, sizeof(want), "%s: %s: %s: is a FIFO, expected a regular file", scen, where[k], fifo);
        char *plan[] = {NULL, "plan", scen, "--shards", "1", "--allow-read", mdir, NULL};
        char *run[] = {NULL, "run", scen, "--out", res, "--allow-read", mdir, NULL};
        char **cmds[] = {plan, run};
        for (int c = 0; c < 2; c++) {
            int rc = run_bounded(out, 120, cmds[c]);
            char *e = slurp_text(out);
            if (rc < 0) fail_msg("bench %s hung on a FIFO as %s", cmds[c][1], where[k]);
            if (rc == 0 || !strstr(e, want)) fail_msg("bench %s exit %d, no \"%s\" in: %s", cmds[c][1], rc, want, e);
            free(e);
        }
    }
    tu_rmtree(tmp);
}

/* The open half of cf_open_checked, deterministically: what the race would plant between
 * the check and the open (a symlink, another file under the name) is refused, and so is
 * what is not a regular file. */
static void test_open_identical_refuses(void **state) {
    (void)state;
    char tmp[512], dir[PATH_MAX], a[PATH_MAX + 8], b[PATH_MAX + 8], l[PATH_MAX + 8], d[PATH_MAX + 8], err[2048];
    assert_non_null(tu_tmpdir(tmp, sizeof(tmp)));
    assert_non_null(realpath(tmp, dir));
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    snprintf(l, sizeof(l), "%s/l", dir);
    snprintf(d, sizeof(d), "%s/d", dir);
    write_text(a, "1 2\n");
    write_text(b, "secret\n");
    struct stat sa, sb;
    assert_int_equal(stat(a, &sa), 0);
    assert_int_equal(stat(b, &sb), 0);
    /* the file checked: opened, blocking */
    int fd = cf_open_identical("a", a, (unsigned long long)sa.st_dev, (unsigned long long)sa.st_ino, err, sizeof(err));
    if (fd < 0) fail_msg("%s", err);
    assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
    close(fd);
    /* another file where the checked one was */
    assert_int_equal(rename(b, a), 0);
    assert_int_equal(cf_open_identical("a", a, (unsigned long long)sa.st_dev, (unsigned long long)sa.st_ino, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "is not the file that was checked"));
    assert_non_null(strstr(err, "not read"));
    /* a symlink to the very file checked: still refused (a link is what a swap plants) */
    assert_int_equal(symlink(a, l), 0);
    assert_int_equal(cf_open_identical("l", l, (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "a symlink appeared"));
    assert_int_equal(mkdir(d, 0700), 0);
    /* not a regular file: a folder, a FIFO (at once, not waiting for a writer) */
    struct stat sd;
    assert_int_equal(stat(d, &sd), 0);
    assert_int_equal(cf_open_identical("d", d, (unsigned long long)sd.st_dev, (unsigned long long)sd.st_ino, err, sizeof(err)), -1);
    assert_string_equal(err, "d: is a directory, expected a regular file");
    /* cf_open_checked, the whole: outside the roots (the current directory does not hold
     * tmp), then inside once tmp is allowed */
    if (!getenv("BENCH_ALLOW_READ")) {
        assert_int_equal(cf_open_checked(NULL, a, "a test file", err, sizeof(err)), -1);
        assert_non_null(strstr(err, "outside the folders a scenario may read from"));
    }
    assert_int_equal(cf_allow(dir, err, sizeof(err)), 0);
    char fifo[PATH_MAX + 8];
    snprintf(fifo, sizeof(fifo), "%s/p", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(cf_open_checked(NULL, fifo, "a test file", err, sizeof(err)), -1);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof(want), "%s: is a FIFO, expected a regular file (a test file)", fifo);
    assert_string_equal(err, want);
    fd = cf_open_checked(NULL, a, "a test file", err, sizeof(err));
    if (fd < 0) fail_msg("%s", err);
    char buf[16] = "";
    assert_int_equal(read(fd, buf, sizeof(buf) - 1), 7);
    assert_string_equal(buf, "secret\n");
    close(fd);
    fd = cf_open_checked(NULL, l, "a test file", err, sizeof(err));    /* a link is resolved, then checked */
    if (fd < 0) fail_msg("%s", err);
    close(fd);
    snprintf(want, sizeof(want), "%s/none", dir);
    assert_int_equal(cf_open_checked(NULL, want, "a test file", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "No such file or directory (a test file)"));
    cf_reset();
    tu_rmtree(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_defaults),
        cmocka_unit_test(test_matrix_expansion_order),
        cmocka_unit_test(test_not_json),
        cmocka_unit_test(test_top_level_not_object),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_required_fields),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_name_charset),
        cmocka_unit_test(test_prompt_exactly_one),
        cmocka_unit_test(test_ctx_too_small),
        cmocka_unit_test(test_requests_parsed),
        cmocka_unit_test(test_requests_errors),
        cmocka_unit_test(test_requests_length_file_errors),
        cmocka_unit_test(test_model_missing),
        cmocka_unit_test(test_model_forms),
        cmocka_unit_test(test_synth_spec),
        cmocka_unit_test(test_unknown_module),
        cmocka_unit_test(test_module_options),
        cmocka_unit_test(test_cache_rules),
        cmocka_unit_test(test_axis_list_rules),
        cmocka_unit_test(test_metrics_rules),
        cmocka_unit_test(test_kernels_axis),
        cmocka_unit_test(test_kv_cache_axis),
        cmocka_unit_test(test_repack_axis),
        cmocka_unit_test(test_scratch_axis),
        cmocka_unit_test(test_ubatch_axis),
        cmocka_unit_test(test_test_hooks_need_env),
        cmocka_unit_test(test_every_error_reported),
        cmocka_unit_test(test_only_selects),
        cmocka_unit_test(test_shipped_scenarios_say_what_they_run),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_read_paths_confined),
        cmocka_unit_test(test_shipped_scenarios_need_no_flag),
        cmocka_unit_test(test_worker_spec_round_trip),
        cmocka_unit_test(test_worker_spec_target_typed),
        cmocka_unit_test(test_worker_spec_typed_options),
        cmocka_unit_test(test_worker_spec_bad_option_type),
        cmocka_unit_test(test_typed_options_exact),
        cmocka_unit_test(test_parent_loads_each_module_once),
        cmocka_unit_test(test_fifo_inputs_refused),
        cmocka_unit_test(test_open_identical_refuses),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
