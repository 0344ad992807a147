/* Serving traffic (harness/scenario/traffic.h, harness/child/traffic_gen.h, the scheduler's
 * turns and concurrency cap in engines/core/runtime/sched.h), on the real trace samples
 * of <shared>/thirdparty/traces and stories260K:
 *   - the scenario: a trace's rows become the requests (the window's count), the keys it
 *     replaces are refused, a malformed trace row fails the scenario with the file, the
 *     line and the column, and bench run runs nothing; arrival and sessions errors;
 *   - each format replayed: every request's lengths are the row's scaled and capped, its
 *     scheduled time the row's time / time_scale (checked on the schedule, not a clock);
 *   - Mooncake hash ids: rows with the same leading ids have the same leading tokens,
 *     block by block, and different ids differ;
 *   - end to end (bench run, kv block, token, prealloc): the trace's sharing shows up in
 *     the prefix hits, at least each request's longest common prefix with an earlier one
 *     (token) or its whole blocks (block), none for prealloc; no request is admitted before
 *     its scheduled time;
 *   - sessions: turn u's prompt is turn u-1's prompt and answer plus its own message, it
 *     arrives at least the think time after turn u-1 ended, its prefix hits cover the
 *     conversation so far (kv token), and a turn generates what the same whole prompt
 *     generates alone (greedy: the conversation really is its prompt);
 *   - the concurrency cap: never more requests in flight than the cap.
 * Skips, naming the file, without the shared samples or models. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engines/core/runtime/modreg.h"
#include "engines/core/runtime/sched.h"
#include "harness/child/serve.h"
#include "harness/scenario/confine.h"
#include "harness/scenario/traffic.h"
#include "harness/scenario/worker_spec.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char tmp[512];
    char model[512], tok[512], traces[512], shared[512];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) || !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) ||
        !tu_shared("thirdparty/traces/README.md", f->traces, sizeof(f->traces)) || !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        *state = NULL;
        return 0;
    }
    *strrchr(f->traces, '/') = 0;
    tu_shared("", f->shared, sizeof(f->shared));
    char err[512];
    if (cf_allow(f->shared, err, sizeof(err))) fail_msg("%s", err);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    cf_reset();
    return 0;
}

#define CTX 256

/* The scenario text of a serving run of `requests` (JSON) over the kv choices `kv` (a JSON list). */
static void scenario_text(const fx *f, char *buf, size_t len, const char *requests, const char *kv) {
    snprintf(buf, len, "{\"name\": \"traffic\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", "
                       "\"workload\": {\"ctx\": %d, \"requests\": %s}, \"repetitions\": 1, \"warmup\": 0, \"threads\": 1, "
                       "\"matrix\": {\"kv\": %s}}", f->model, f->tok, CTX, requests, kv);
}

/* Parses a scenario of `requests`; returns it, or NULL with the errors joined into err. */
static scenario *parse(const fx *f, const char *requests, char *err, size_t errlen) {
    char text[8192];
    scenario_text(f, text, sizeof(text), requests, "[\"token\"]");
    scenario *s = NULL;
    sc_errors e = {0};
    err[0] = 0;
    if (sc_parse("t.json", text, tu_module_dir(), &s, &e)) {
        size_t at = 0;
        for (int i = 0; i < e.n && at < errlen; i++) at += (size_t)snprintf(err + at, errlen - at, "%s\n", e.v[i]);
        sc_errors_free(&e);
        return NULL;
    }
    sc_errors_free(&e);
    return s;
}

static scenario *parse_ok(const fx *f, const char *requests) {
    char err[4096];
    scenario *s = parse(f, requests, err, sizeof(err));
    if (!s) fail_msg("%s", err);
    return s;
}

/* Expects the scenario to fail with every string given in one message. */
static void parse_bad(const fx *f, const char *requests, ...) {
    char err[4096];
    scenario *s = parse(f, requests, err, sizeof(err));
    if (s) sc_free(s);
    assert_null(s);
    va_list ap;
    va_start(ap, requests);
    for (const char *want; (want = va_arg(ap, const char *));) {
        if (!strstr(err, want)) fprintf(stderr, "errors \"%s\" lack \"%s\"\n", err, want);
        assert_non_null(strstr(err, want));
    }
    va_end(ap);
}

/* ---- the scenario ---- */

static void test_scenario_keys(void **state) {
    fx *f = *state;
    TU_NEED(f);
    char rq[2048];
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/BurstGPT_1.head400.csv\", \"format\": \"burstgpt\", \"requests\": 50, "
                             "\"length_scale\": 0.05, \"max_prompt\": 64, \"max_output\": 16}, \"kv_budget\": {\"tokens\": 2048}}", f->traces);
    scenario *s = parse_ok(f, rq);
    assert_int_equal(s->requests->count, 50);
    assert_non_null(s->requests->traffic);
    assert_int_equal(s->requests->traffic->trace->n, 50);
    assert_true(s->requests->prompt_len.hi <= 64 && s->requests->output_len.hi <= 16);
    sc_free(s);
    /* an arrival given with a trace replaces its timestamps: "all", or a process */
    static const char *const arrivals[] = {"\"all\"", "{\"process\": \"constant\", \"rate\": 4}"};
    for (int a = 0; a < 2; a++) {
        snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/BurstGPT_1.head400.csv\", \"format\": \"burstgpt\", \"requests\": 5, "
                                 "\"length_scale\": 0.05, \"max_prompt\": 64, \"max_output\": 16}, \"arrival\": %s, "
                                 "\"kv_budget\": {\"tokens\": 2048}}", f->traces, arrivals[a]);
        s = parse_ok(f, rq);
        sv_reqs r;
        char err[256];
        assert_int_equal(sv_make_requests(s->requests, 512, 1, 5, &r, err, sizeof(err)), 0);
        for (int i = 0; i < r.n; i++) assert_int_equal(r.r[i].arrival_ns, a ? 250000000ll * (i + 1) : 0);
        sv_reqs_free(&r);
        sc_free(s);
    }
    /* the keys a trace replaces */
    snprintf(rq, sizeof(rq), "{\"count\": 4, \"trace\": {\"file\": \"%s/BurstGPT_1.head400.csv\", \"format\": \"burstgpt\"}, "
                             "\"kv_budget\": {\"tokens\": 2048}}", f->traces);
    parse_bad(f, rq, "t.json: .workload.requests.count: not with \"trace\"", NULL);
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/BurstGPT_1.head400.csv\", \"format\": \"burst\"}, \"kv_budget\": {\"tokens\": 2048}}",
             f->traces);
    parse_bad(f, rq, ".workload.requests.trace.format: unknown format burst", "mooncake, azure, burstgpt, sharegpt", NULL);
    /* a trace longer than the context, unscaled */
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/conversation_trace.head2000.jsonl\", \"format\": \"mooncake\", \"requests\": 3}, "
                             "\"kv_budget\": {\"tokens\": 2048}}", f->traces);
    parse_bad(f, rq, ".workload.ctx: 256 positions cannot hold the longest request", NULL);
    /* arrival processes */
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"arrival\": {\"process\": \"gamma\", \"burstiness\": 0.5}}",
              ".workload.requests.arrival.rate: required", NULL);
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"arrival\": {\"process\": \"poisson\", \"rate\": 2, \"burstiness\": 0.5}}",
              ".workload.requests.arrival.burstiness: only with \"process\": \"gamma\"", NULL);
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"arrival\": {\"process\": \"bursty\", \"rate\": 2}}",
              ".workload.requests.arrival.process: unknown process \"bursty\"", NULL);
    /* sessions: the conversation must fit the context */
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 40}, \"output_len\": {\"fixed\": 40}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"sessions\": {\"turns\": {\"fixed\": 4}, \"think_ms\": {\"fixed\": 0}}}",
              ".workload.ctx: 256 positions cannot hold the longest request: 319 positions", NULL);
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"sessions\": {\"turns\": {\"uniform\": [3, 2]}, \"think_ms\": {\"fixed\": 0}}}",
              ".workload.requests.sessions.turns.uniform: [3, 2]", NULL);
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"concurrency\": 0}",
              ".workload.requests.concurrency: expected an integer 1 .. 100000, got 0", NULL);
}

/* A malformed row: the scenario fails naming the file, the line and the column, and bench
 * run runs nothing (no results folder). */
static void test_malformed_trace_runs_nothing(void **state) {
    fx *f = *state;
    TU_NEED(f);
    char bad[700], rq[2048], e[512];
    if (cf_allow(f->tmp, e, sizeof(e))) fail_msg("%s", e);
    snprintf(bad, sizeof(bad), "%s/bad.csv", f->tmp);
    FILE *o = fopen(bad, "w");
    assert_non_null(o);
    fputs("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n"
          "2023-11-16 18:17:04.0319600,3180,x8\r\n", o);
    fclose(o);
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s\", \"format\": \"azure\", \"length_scale\": 0.01}, \"kv_budget\": {\"tokens\": 2048}}", bad);
    char where[800];
    snprintf(where, sizeof(where), "%s:3:34: column \"GeneratedTokens\" (field 3): expected an integer", bad);
    parse_bad(f, rq, ".workload.requests.trace.file", where, "got \"x8\"", NULL);
    char sc[700], out[700], text[8192], log[700];
    snprintf(sc, sizeof(sc), "%s/bad_trace.json", f->tmp);
    snprintf(out, sizeof(out), "%s/out_bad", f->tmp);
    snprintf(log, sizeof(log), "%s/bad_trace.log", f->tmp);
    scenario_text(f, text, sizeof(text), rq, "[\"token\"]");
    o = fopen(sc, "w");
    assert_non_null(o);
    fputs(text, o);
    fclose(o);
    assert_int_not_equal(tu_bench(NULL, "run '%s' --out '%s' --allow-read '%s' --allow-read '%s' 2>'%s'", sc, out, f->shared, f->tmp,
                                  log), 0);
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0);
    FILE *l = fopen(log, "r");
    assert_non_null(l);
    char msg[4096];
    size_t n = fread(msg, 1, sizeof(msg) - 1, l);
    msg[n] = 0;
    fclose(l);
    assert_non_null(strstr(msg, where));
    assert_non_null(strstr(msg, "nothing was run"));
}

/* ---- the requests of each format ---- */

static void check_replay(const fx *f, const char *file, const char *format, double ls, int mp, int mo, double tscale) {
    char rq[2048], path[700];
    snprintf(path, sizeof(path), "%s/%s", f->traces, file);
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s\", \"format\": \"%s\", \"requests\": 200, \"length_scale\": %g, "
                             "\"max_prompt\": %d, \"max_output\": %d, \"time_scale\": %g}, \"kv_budget\": {\"tokens\": 4096}}",
             path, format, ls, mp, mo, tscale);
    scenario *s = parse_ok(f, rq);
    /* the rows as read directly */
    tr_trace *t = NULL;
    char err[1024];
    tr_window w = {.max_requests = 200};
    assert_int_equal(tr_read(path, (tr_format)tr_format_from_name(format), &w, &t, err, sizeof(err)), 0);
    sv_reqs r;
    assert_int_equal(sv_make_requests(s->requests, 512, 1, 5, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, t->n);
    for (int i = 0; i < r.n; i++) {
        long long in = llround(t->r[i].input * ls), out = llround(t->r[i].output * ls);
        in = in < 1 ? 1 : in > mp ? mp : in;
        out = out < 1 ? 1 : out > mo ? mo : out;
        assert_int_equal(r.r[i].n_prompt, in);
        assert_int_equal(r.r[i].max_new, out);
        assert_int_equal(r.r[i].prompt[0], 1);
        /* the schedule: the row's time over the time scale, to the ns */
        double want = t->timed ? t->r[i].t_s / tscale : 0;
        assert_true(fabs((double)r.r[i].arrival_ns * 1e-9 - want) <= 1e-9);
    }
    sv_reqs_free(&r);
    tr_free(t);
    sc_free(s);
}

static void test_each_format(void **state) {
    fx *f = *state;
    TU_NEED(f);
    check_replay(f, "conversation_trace.head2000.jsonl", "mooncake", 1.0 / 64, 200, 30, 10);
    check_replay(f, "synthetic_trace.head2000.jsonl", "mooncake", 1.0 / 128, 150, 30, 100);
    check_replay(f, "AzureLLMInferenceTrace_code.csv", "azure", 0.05, 200, 40, 2);
    check_replay(f, "AzureLLMInferenceTrace_conv.csv", "azure", 0.1, 200, 40, 1);
    check_replay(f, "BurstGPT_1.head400.csv", "burstgpt", 0.1, 200, 40, 1000);
    check_replay(f, "sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "sharegpt", 0.05, 200, 40, 1);
}

/* The longest common prefix of request i with any earlier request. */
static int lcp_earlier(const sv_reqs *r, int i) {
    int best = 0;
    for (int j = 0; j < i; j++) {
        int k = 0, m = r->r[i].n_prompt < r->r[j].n_prompt ? r->r[i].n_prompt : r->r[j].n_prompt;
        while (k < m && r->r[i].prompt[k] == r->r[j].prompt[k]) k++;
        best = k > best ? k : best;
    }
    return best;
}

static void test_hash_ids_are_blocks(void **state) {
    fx *f = *state;
    TU_NEED(f);
    char rq[2048];
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/conversation_trace.head2000.jsonl\", \"format\": \"mooncake\", \"requests\": 60, "
                             "\"length_scale\": 0.03125, \"max_prompt\": 200, \"max_output\": 8}, \"kv_budget\": {\"tokens\": 4096}}",
             f->traces);
    scenario *s = parse_ok(f, rq);
    const tr_trace *t = s->requests->traffic->trace;
    assert_int_equal(tf_block_tokens(t, 0.03125), 16);
    sv_reqs r;
    char err[512];
    assert_int_equal(sv_make_requests(s->requests, 512, 1, 5, &r, err, sizeof(err)), 0);
    int shared_pairs = 0;
    for (int i = 0; i < r.n; i++)
        for (int j = 0; j < i; j++) {
            const tr_req *a = &t->r[i], *b = &t->r[j];
            int same = 0;
            while (same < a->n_hash && same < b->n_hash && t->hash[a->hash_at + (size_t)same] == t->hash[b->hash_at + (size_t)same]) same++;
            int m = r.r[i].n_prompt < r.r[j].n_prompt ? r.r[i].n_prompt : r.r[j].n_prompt;
            int k = 0;
            while (k < m && r.r[i].prompt[k] == r.r[j].prompt[k]) k++;
            /* equal ids: equal tokens as far as both prompts go */
            int want = same * 16 < m ? same * 16 : m;
            assert_true(k >= want);
            /* the first different id: the tokens differ within its block (BOS aside) */
            if (same * 16 < m && same < a->n_hash && same < b->n_hash) assert_true(k < (same + 1) * 16);
            shared_pairs += same > 0;
        }
    assert_true(shared_pairs > 100);    /* id 0 starts most conversation rows */
    sv_reqs_free(&r);
    sc_free(s);
}

/* A Mooncake trace of rows far longer than max_prompt: the hash ids past the blocks the
 * capped prompt reaches are dropped as read (they were all carried into the worker spec:
 * 1,000 rows of 2^24 tokens made a 218 MB spec); the prompts are what they were. */
static void test_hash_ids_bounded_by_max_prompt(void **state) {
    fx *f = *state;
    TU_NEED(f);
    char path[700], err[512], rq[2048];
    snprintf(path, sizeof(path), "%s/long.jsonl", f->tmp);
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    enum { ROWS = 100, INPUT = 1 << 20, IDS = INPUT / TR_MOONCAKE_BLOCK };  /* 2048 ids a row: ~1.3 MB in all */
    for (int i = 0; i < ROWS; i++) {
        fprintf(o, "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": 4, \"hash_ids\": [", i * 10, INPUT);
        for (int k = 0; k < IDS; k++) fprintf(o, "%s%d", k ? "," : "", k < 3 ? k : i * IDS + k);
        fputs("]}\n", o);
    }
    fclose(o);
    assert_int_equal(cf_allow(f->tmp, err, sizeof(err)), 0);
    /* 0.125: 64 tokens an id; 200 tokens reach ceil(200 / 64) = 4 ids */
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s\", \"format\": \"mooncake\", \"length_scale\": 0.125, \"max_prompt\": 200, "
                             "\"max_output\": 8}, \"kv_budget\": {\"tokens\": 4096}}", path);
    assert_int_equal(tf_hash_needed(200, 0.125), 4);
    scenario *s = parse_ok(f, rq);
    const tr_trace *t = s->requests->traffic->trace;
    assert_int_equal(t->n, ROWS);
    assert_int_equal(t->n_hash, (size_t)ROWS * 4);
    for (int i = 0; i < ROWS; i++) {
        assert_int_equal(t->r[i].n_hash, 4);
        assert_int_equal(t->hash[t->r[i].hash_at + 3], i * IDS + 3);     /* the first ones, in order */
    }
    /* the prompts: capped, and block 3 (tokens 192 ..) the id kept for it */
    sv_reqs r;
    assert_int_equal(sv_make_requests(s->requests, 512, 1, 5, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, ROWS);
    for (int i = 0; i < ROWS; i++) assert_int_equal(r.r[i].n_prompt, 200);
    assert_memory_equal(r.r[0].prompt, r.r[1].prompt, 192 * sizeof(int));     /* ids 0, 1, 2 shared */
    assert_memory_not_equal(r.r[0].prompt + 192, r.r[1].prompt + 192, 8 * sizeof(int));
    sv_reqs_free(&r);
    /* the worker spec: the bound holds, and it is small (the ids of every block made ~1.3 MB) */
    cJSON *spec = cJSON_CreateObject();
    sv_spec_add(spec, s);
    char *text = cJSON_Print(spec);
    assert_non_null(text);
    size_t bytes = strlen(text);
    assert_true(bytes <= tf_trace_spec_bytes(t));
    assert_true(bytes < 64 * 1024);
    free(text);
    cJSON_Delete(spec);
    sc_free(s);
    /* the bound's count: each id at most 17 digits and ", " */
    tr_trace big = {.n = 1, .n_hash = 3, .hash = (int64_t[]){0, 123, (int64_t)1 << 53}};
    assert_int_equal(tf_trace_spec_bytes(&big), 1024 + 56 + 3 + 5 + 18);
}

/* A replay time past TR_MAX_SECONDS once divided by time_scale fails the scenario (it
 * overflowed the worker's int64 ns); at the bound itself it parses. */
static void test_scaled_time_bounded(void **state) {
    fx *f = *state;
    TU_NEED(f);
    char rq[2048];
    /* BurstGPT's first 400 rows span 37,269 s: at time_scale 1e-5, 3.7e9 s */
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/BurstGPT_1.head400.csv\", \"format\": \"burstgpt\", \"time_scale\": 1e-5, "
                             "\"length_scale\": 0.05, \"max_prompt\": 64, \"max_output\": 16}, \"kv_budget\": {\"tokens\": 2048}}", f->traces);
    parse_bad(f, rq, ".workload.requests.trace.time_scale: 1e-05: the row at ", "BurstGPT_1.head400.csv:401", "would arrive 3.7269e+09 s in",
              "expected at most 1e+09 s", NULL);
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/BurstGPT_1.head400.csv\", \"format\": \"burstgpt\", \"time_scale\": 1e-4, "
                             "\"length_scale\": 0.05, \"max_prompt\": 64, \"max_output\": 16}, \"kv_budget\": {\"tokens\": 2048}}", f->traces);
    sc_free(parse_ok(f, rq));
}

/* ---- end to end ---- */

/* Runs the scenario of `requests` over kv; returns results.json. */
static cJSON *run(const fx *f, const char *name, const char *requests, const char *kv) {
    char sc[700], out[700], text[8192];
    snprintf(sc, sizeof(sc), "%s/%s.json", f->tmp, name);
    snprintf(out, sizeof(out), "%s/out_%s", f->tmp, name);
    scenario_text(f, text, sizeof(text), requests, kv);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fputs(text, o);
    fclose(o);
    assert_int_equal(tu_bench(NULL, "run '%s' --out '%s' --allow-read '%s' >/dev/null 2>&1", sc, out, f->shared), 0);
    char p[800];
    snprintf(p, sizeof(p), "%s/results.json", out);
    cJSON *doc = hjs_load(p);
    assert_non_null(doc);
    assert_int_equal(hjs_results_violations(doc), 0);
    /* the per-request export is there, a line per request */
    snprintf(p, sizeof(p), "%s/timelines/v0-r0-p0-requests.jsonl", out);
    FILE *j = fopen(p, "r");
    assert_non_null(j);
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof(line), j)) {
        cJSON *x = cJSON_Parse(line);
        assert_non_null(x);
        /* every token's time: as many as tokens, the first the first token's, in order */
        const cJSON *first = cJSON_GetObjectItemCaseSensitive(x, "first_token_ms"), *tok = cJSON_GetObjectItemCaseSensitive(x, "token_ms");
        const cJSON *n_out = cJSON_GetObjectItemCaseSensitive(x, "output_tokens"), *end = cJSON_GetObjectItemCaseSensitive(x, "end_ms");
        assert_true(cJSON_IsNumber(first) && cJSON_IsArray(tok) && cJSON_IsNumber(n_out) && cJSON_IsNumber(end));
        assert_int_equal(cJSON_GetArraySize(tok), (int)n_out->valuedouble);
        assert_float_equal(cJSON_GetArrayItem(tok, 0)->valuedouble, first->valuedouble, 1e-9);
        assert_float_equal(cJSON_GetArrayItem(tok, cJSON_GetArraySize(tok) - 1)->valuedouble, end->valuedouble, 1e-9);
        for (int k = 1; k < cJSON_GetArraySize(tok); k++)
            assert_true(cJSON_GetArrayItem(tok, k)->valuedouble >= cJSON_GetArrayItem(tok, k - 1)->valuedouble);
        cJSON_Delete(x);
        lines++;
    }
    fclose(j);
    assert_true(lines > 0);
    return doc;
}

/* The requests table of variant v's (only) process: column col, row i. */
static double col(const cJSON *doc, int v, const char *name, int i) {
    const cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "runs"), v);
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "processes"), 0);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "serve"), "requests"), name);
    const cJSON *x = cJSON_GetArrayItem(c, i);
    if (!cJSON_IsNumber(x)) fail_msg("variant %d: no requests.%s[%d]", v, name, i);
    return x->valuedouble;
}

static int n_rows(const cJSON *doc, int v) {
    const cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "runs"), v);
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "processes"), 0);
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "serve"), "requests"), "id"));
}

static double start_ms(const cJSON *doc, int v) {
    const cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "runs"), v);
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "processes"), 0);
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "serve"), "start_ms")->valuedouble;
}

static void test_trace_prefix_hits(void **state) {
    fx *f = *state;
    TU_NEED(f);
    char rq[2048];
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/conversation_trace.head2000.jsonl\", \"format\": \"mooncake\", \"requests\": 24, "
                             "\"length_scale\": 0.03125, \"max_prompt\": 160, \"max_output\": 8, \"time_scale\": 100}, "
                             "\"kv_budget\": {\"tokens\": 8192}, \"stop_at_eos\": false}", f->traces);
    scenario *s = parse_ok(f, rq);
    sv_reqs r;
    char err[512];
    assert_int_equal(sv_make_requests(s->requests, 512, 1, 5, &r, err, sizeof(err)), 0);
    cJSON *doc = run(f, "mooncake", rq, "[{\"name\": \"block\", \"options\": {\"block_size\": 16}}, \"token\", \"prealloc\"]");
    int any = 0;
    for (int v = 0; v < 3; v++) {
        assert_int_equal(n_rows(doc, v), r.n);
        double t0 = start_ms(doc, v);
        for (int k = 0; k < r.n; k++) {
            int i = (int)col(doc, v, "id", k);
            int lcp = lcp_earlier(&r, i), n = r.r[i].n_prompt;
            int can = lcp < n - 1 ? lcp : n - 1;   /* one position is always computed, for the logits */
            double reused = col(doc, v, "prefix_reused", k);
            if (v == 0) assert_true(reused >= (can / 16) * 16);
            if (v == 1) assert_true(reused >= can);
            if (v == 2) assert_true(reused == 0);
            any += v < 2 && can >= 16;
            /* the schedule is honoured: arrival at the row's time over the scale, never admitted earlier */
            double want = (double)r.r[i].arrival_ns * 1e-6;
            double d = col(doc, v, "arrival_ms", k) - t0 - want;
            assert_true(d > -0.01 && d < 100);      /* the scheduler starts just after SERVE_START */
            assert_true(col(doc, v, "admit_ms", k) >= col(doc, v, "arrival_ms", k));
        }
    }
    assert_true(any > 10);
    cJSON_Delete(doc);
    sv_reqs_free(&r);
    sc_free(s);
}

/* Wall-clock: a light replay of the Azure code trace at twice its pace (its first 1.5 s,
 * lengths cut to a few tokens): no request is admitted before its scheduled time, and
 * each within the stated tolerance of 1 s after it (a generous bound for a busy 2-core
 * machine under ASan: the scheduler sleeps until the next arrival and admits it at once). */
static void test_timestamps_honoured(void **state) {
    fx *f = *state;
    TU_NEED(f);
    char rq[2048];
    snprintf(rq, sizeof(rq), "{\"trace\": {\"file\": \"%s/AzureLLMInferenceTrace_code.csv\", \"format\": \"azure\", \"seconds\": 1.5, "
                             "\"time_scale\": 2, \"length_scale\": 0.005, \"max_prompt\": 24, \"max_output\": 4}, "
                             "\"kv_budget\": {\"tokens\": 4096}, \"stop_at_eos\": false}", f->traces);
    scenario *s = parse_ok(f, rq);
    sv_reqs r;
    char err[512];
    assert_int_equal(sv_make_requests(s->requests, 512, 1, 5, &r, err, sizeof(err)), 0);
    assert_true(r.n >= 8);
    /* 18:17:03.9799600 -> 18:17:05.3790470: 1.399087 s, replayed twice as fast */
    assert_int_equal(r.r[r.n - 1].arrival_ns, 699543500);
    cJSON *doc = run(f, "azure_pace", rq, "[\"token\"]");
    double t0 = start_ms(doc, 0);
    for (int k = 0; k < n_rows(doc, 0); k++) {
        int i = (int)col(doc, 0, "id", k);
        double due = t0 + (double)r.r[i].arrival_ns * 1e-6, admit = col(doc, 0, "admit_ms", k);
        assert_true(admit >= due - 0.01);
        assert_true(admit - due < 1000);
    }
    cJSON_Delete(doc);
    sv_reqs_free(&r);
    sc_free(s);
}

static void test_sessions(void **state) {
    fx *f = *state;
    TU_NEED(f);
    const char *rq = "{\"count\": 4, \"prompt_len\": {\"uniform\": [6, 14]}, \"output_len\": {\"uniform\": [4, 10]}, "
                     "\"sessions\": {\"turns\": {\"uniform\": [2, 4]}, \"think_ms\": {\"uniform\": [0, 30]}}, "
                     "\"arrival\": {\"process\": \"gamma\", \"rate\": 40, \"burstiness\": 0.5}, "
                     "\"kv_budget\": {\"tokens\": 4096}, \"stop_at_eos\": false, \"seed\": 3}";
    scenario *s = parse_ok(f, rq);
    sv_reqs r;
    char err[512];
    assert_int_equal(sv_make_requests(s->requests, 512, 1, 5, &r, err, sizeof(err)), 0);
    cJSON *doc = run(f, "sessions", rq, "[\"token\"]");
    int n = n_rows(doc, 0);
    assert_int_equal(n, r.n);
    assert_true(n > 4);
    /* rows by request */
    int *row = malloc((size_t)n * sizeof(int));
    assert_non_null(row);
    for (int k = 0; k < n; k++) row[(int)col(doc, 0, "id", k)] = k;
    int turns = 0;
    for (int i = 0; i < n; i++) {
        int k = row[i];
        assert_int_equal((int)col(doc, 0, "turn", k), r.turn[i]);
        assert_int_equal((int)col(doc, 0, "session", k), r.session[i]);
        if (!r.r[i].follows) {
            assert_int_equal((int)col(doc, 0, "prompt_tokens", k), r.r[i].n_prompt);
            continue;
        }
        int p = row[r.r[i].follows - 1];
        double had = col(doc, 0, "prompt_tokens", p) + col(doc, 0, "output_tokens", p);
        /* the whole conversation so far, then its own message */
        assert_int_equal((int)col(doc, 0, "prompt_tokens", k), (int)had + r.r[i].n_prompt);
        /* sent the think time after the previous answer ended (to the export's 1 us) */
        assert_true(col(doc, 0, "arrival_ms", k) - col(doc, 0, "end_ms", p) >= (double)r.r[i].think_ns * 1e-6 - 1e-3);
        /* the conversation so far is in the prefix cache (its last token was never fed back) */
        assert_true(col(doc, 0, "prefix_reused", k) >= had - 1);
        turns++;
    }
    assert_true(turns >= 4);
    free(row);
    cJSON_Delete(doc);
    sv_reqs_free(&r);
    sc_free(s);
}

static void test_concurrency_cap(void **state) {
    fx *f = *state;
    TU_NEED(f);
    const char *rq = "{\"count\": 10, \"prompt_len\": {\"uniform\": [8, 24]}, \"output_len\": {\"uniform\": [4, 12]}, "
                     "\"arrival\": \"all\", \"concurrency\": 3, \"kv_budget\": {\"tokens\": 4096}, \"stop_at_eos\": false}";
    cJSON *doc = run(f, "closed", rq, "[\"token\"]");
    int n = n_rows(doc, 0);
    assert_int_equal(n, 10);
    int delayed = 0;
    for (int a = 0; a < n; a++) {
        /* requests in flight at each arrival: sent at or before it, finished after it */
        double t = col(doc, 0, "arrival_ms", a);
        int in = 0;
        for (int b = 0; b < n; b++) in += col(doc, 0, "arrival_ms", b) <= t && col(doc, 0, "end_ms", b) > t;
        assert_true(in <= 3);
        delayed += t > start_ms(doc, 0) + 1.0;
    }
    assert_true(delayed >= 7);      /* all due at 0: all but 3 wait for a slot */
    cJSON_Delete(doc);
}

/* ---- a turn's prompt is the conversation: greedy, it generates what the same prompt
 * generates alone ---- */

static engine *open_engine(const fx *f, int max_seqs) {
    bench_opts o = {0};
    void *storage = NULL;
    char err[512];
    if (modreg_parse_opts("", &o, &storage, err, sizeof(err))) fail_msg("%s", err);
    engine_spec spec = {.model_path = f->model, .tokenizer_path = f->tok, .kv = "token", .kv_opts = o, .threads = 1,
                        .max_seqs = max_seqs, .kv_budget_tokens = 2048, .max_pos = CTX, .module_dir = tu_module_dir()};
    engine *e = NULL;
    int rc = engine_create(&spec, &e, err, sizeof(err));
    free(storage);
    if (rc) fail_msg("%s", err);
    return e;
}

static void test_turn_is_the_conversation(void **state) {
    fx *f = *state;
    TU_NEED(f);
    int ia[] = {1, 403, 407, 385, 292}, ib[] = {450, 217, 203};
    int na = 5, nb = 3;
    engine *e = open_engine(f, 2);
    sched_req rq[2] = {{.prompt = ia, .n_prompt = na, .max_new = 6, .seed = 1},
                       {.prompt = ib, .n_prompt = nb, .max_new = 6, .seed = 2, .follows = 1, .think_ns = 1000000}};
    sched_opts o = {.eos = -1, .temperature = 0};
    sched *s = NULL;
    char err[512];
    assert_int_equal(sched_create(e, rq, 2, &o, &s, err, sizeof(err)), 0);
    assert_int_equal(sched_run(s, err, sizeof(err)), 0);
    int n0, n1;
    const int *o0 = sched_output(s, 0, &n0), *o1 = sched_output(s, 1, &n1);
    assert_int_equal(n0, 6);
    assert_int_equal(n1, 6);
    /* the same whole prompt, alone */
    int whole[32], nw = 0;
    for (int i = 0; i < na; i++) whole[nw++] = ia[i];
    for (int i = 0; i < n0; i++) whole[nw++] = o0[i];
    for (int i = 0; i < nb; i++) whole[nw++] = ib[i];
    int got[6];
    memcpy(got, o1, sizeof(got));
    sched_destroy(s);
    engine_destroy(e);
    e = open_engine(f, 1);
    sched_req alone = {.prompt = whole, .n_prompt = nw, .max_new = 6, .seed = 2};
    assert_int_equal(sched_create(e, &alone, 1, &o, &s, err, sizeof(err)), 0);
    assert_int_equal(sched_run(s, err, sizeof(err)), 0);
    int n2;
    const int *o2 = sched_output(s, 0, &n2);
    assert_int_equal(n2, 6);
    assert_memory_equal(got, o2, sizeof(got));
    sched_destroy(s);
    /* a turn must follow an earlier request */
    sched_req loop[2] = {{.prompt = ia, .n_prompt = na, .max_new = 2, .follows = 2}, {.prompt = ib, .n_prompt = nb, .max_new = 2}};
    assert_int_equal(sched_create(e, loop, 2, &o, &s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "request 0 follows 1"));
    engine_destroy(e);
}

/* bench sweep end to end: the table per rate and variant, the knee's points, and the
 * refusals (no sweep block, bad rates, no targets). Verdicts and figures depend on the
 * machine's speed, so only their form is checked here (tests/test_sweep.c checks them on
 * a stand-in engine). */
/* A whole text file into buf (len bytes at most, NUL-terminated); fails the test if it is missing. */
static void read_text(const char *path, char *buf, size_t len) {
    FILE *c = fopen(path, "r");
    assert_non_null(c);
    size_t n = fread(buf, 1, len - 1, c);
    buf[n] = 0;
    fclose(c);
}

static void test_sweep_command(void **state) {
    fx *f = *state;
    TU_NEED(f);
    const char *rq = "{\"count\": 12, \"prompt_len\": {\"uniform\": [8, 24]}, \"output_len\": {\"fixed\": 6}, "
                     "\"kv_budget\": {\"tokens\": 4096}, \"stop_at_eos\": false, \"targets\": {\"ttft_ms\": 500}, "
                     "\"sweep\": {\"rates\": [20, 200], \"concurrency\": [2], \"knee\": {\"lo\": 20, \"hi\": 200, \"points\": 3, \"max_repetitions\": 1}, "
                     "\"warmup_requests\": 2, \"min_requests\": 5}}";
    char sc[700], out[700], text[8192], p[800];
    snprintf(sc, sizeof(sc), "%s/sweep.json", f->tmp);
    snprintf(out, sizeof(out), "%s/out_sweep", f->tmp);
    scenario_text(f, text, sizeof(text), rq, "[\"token\", \"prealloc\"]");
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fputs(text, o);
    fclose(o);
    assert_int_equal(tu_bench(NULL, "sweep '%s' --out '%s' --allow-read '%s' --only kv=token --repeat 1 >/dev/null 2>&1", sc, out,
                              f->shared), 0);
    snprintf(p, sizeof(p), "%s/sweep.csv", out);
    FILE *c = fopen(p, "r");
    assert_non_null(c);
    char line[2048];
    int rows = 0;
    assert_non_null(fgets(line, sizeof(line), c));
    assert_non_null(strstr(line, "rate_rps,variant,repetitions,valid,req_s"));
    int valid[2] = {-1, -1};
    while (fgets(line, sizeof(line), c)) {
        assert_true(!strncmp(line, rows ? "200,token,1," : "20,token,1,", rows ? 12 : 11));
        assert_true(strstr(line, ",VALID,") || strstr(line, ",INVALID,"));
        if (rows < 2) valid[rows] = strstr(line, ",VALID,") != NULL;
        rows++;
    }
    fclose(c);
    assert_int_equal(rows, 2);
    /* the figure's data carries each point's verdict in its 10th column, and the script
     * rings the INVALID ones */
    snprintf(p, sizeof(p), "%s/sweep-v0.dat", out);
    c = fopen(p, "r");
    assert_non_null(c);
    for (int i = 0; i < 2; i++) {
        double col[10];
        assert_non_null(fgets(line, sizeof(line), c));
        assert_int_equal(sscanf(line, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &col[0], &col[1], &col[2], &col[3], &col[4],
                                &col[5], &col[6], &col[7], &col[8], &col[9]), 10);
        assert_true(col[0] == (i ? 200 : 20));
        assert_int_equal((int)col[9], valid[i]);
    }
    fclose(c);
    snprintf(p, sizeof(p), "%s/sweep.gp", out);
    read_text(p, text, sizeof(text));
    assert_non_null(strstr(text, "using 1:($10 > 0 ? 1/0 : $6) with points"));
    assert_non_null(strstr(text, "title 'INVALID'"));
    /* the closed loop: one row per cap, never more requests in flight than it */
    snprintf(p, sizeof(p), "%s/sweep-concurrency.csv", out);
    c = fopen(p, "r");
    assert_non_null(c);
    assert_non_null(fgets(line, sizeof(line), c));
    assert_non_null(strstr(line, "concurrency,variant,repetitions,valid"));
    assert_non_null(fgets(line, sizeof(line), c));
    assert_true(!strncmp(line, "2,token,1,", 10));
    assert_null(fgets(line, sizeof(line), c));
    fclose(c);
    snprintf(p, sizeof(p), "%s/points/c2/scenario.json", out);
    cJSON *pt = hjs_load(p);
    assert_non_null(pt);
    const cJSON *prq = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pt, "workload"), "requests");
    assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(prq, "concurrency")->valuedouble, 2);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(prq, "arrival")->valuestring, "all");
    cJSON_Delete(pt);
    snprintf(p, sizeof(p), "%s/knee.csv", out);
    c = fopen(p, "r");
    assert_non_null(c);
    rows = 0;
    int knee = 0;
    while (fgets(line, sizeof(line), c)) {
        if (rows) assert_true(!strncmp(line, "kv=token,", 9));
        knee += strstr(line, ",knee,") != NULL;
        rows++;
    }
    fclose(c);
    assert_true(rows >= 4 && rows <= 5);    /* the header, lo, hi, at most one more, the knee */
    assert_int_equal(knee, 1);
    /* a scenario without a sweep block */
    const char *plain = "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}}";
    scenario_text(f, text, sizeof(text), plain, "[\"token\"]");
    o = fopen(sc, "w");
    assert_non_null(o);
    fputs(text, o);
    fclose(o);
    snprintf(p, sizeof(p), "%s/sweep.log", f->tmp);
    assert_int_equal(tu_bench(NULL, "sweep '%s' --out '%s' --allow-read '%s' >/dev/null 2>'%s'", sc, out, f->shared, p), 1);
    read_text(p, text, sizeof(text));
    assert_non_null(strstr(text, ".workload.requests.sweep: required by bench sweep"));
    /* sweep without targets */
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"sweep\": {\"rates\": [1, 2]}}",
              ".workload.requests.sweep: needs \"targets\"", NULL);
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"targets\": {\"ttft_ms\": 5}, \"sweep\": {\"rates\": [2, 1]}}",
              ".workload.requests.sweep.rates: [1]: 1: expected more than the previous one, 2 (ascending)", NULL);
}

/* bench sweep's --rates, --concurrency and --knee take the scenario's bounds and messages:
 * 10,000 rates were cut to the first 32 without a word, inf failed inside bench run ("got
 * null"), 1e-300 with an arrival of -2^63 ns. Each is refused before anything runs. */
static void test_sweep_points_bounded(void **state) {
    fx *f = *state;
    TU_NEED(f);
    const char *rq = "{\"count\": 12, \"prompt_len\": {\"fixed\": 8}, \"output_len\": {\"fixed\": 6}, \"kv_budget\": {\"tokens\": 4096}, "
                     "\"targets\": {\"ttft_ms\": 500}, \"sweep\": {\"rates\": [20, 200]}}";
    char sc[700], out[700], text[8192], log[800];
    snprintf(sc, sizeof(sc), "%s/points.json", f->tmp);
    snprintf(out, sizeof(out), "%s/out_points", f->tmp);
    snprintf(log, sizeof(log), "%s/points.log", f->tmp);
    scenario_text(f, text, sizeof(text), rq, "[\"token\"]");
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fputs(text, o);
    fclose(o);
    /* 10,000 rates: through a file, past the length of tu_bench's command line */
    char many[800];
    snprintf(many, sizeof(many), "%s/many.txt", f->tmp);
    o = fopen(many, "w");
    assert_non_null(o);
    for (int i = 1; i <= 10000; i++) fprintf(o, "%s%d", i > 1 ? "," : "", i);
    fclose(o);
    char many_arg[900];
    snprintf(many_arg, sizeof(many_arg), "\"$(cat '%s')\"", many);
    const struct { const char *flag, *arg, *want; } bad[] = {
        {"--rates", many_arg, "--rates: 10000 rates: expected at most 32"},
        {"--rates", "'1,inf'", "--rates: entry 2, \"inf\": expected a rate 0.001 .. 1e+06 requests/s"},
        {"--rates", "'nan'", "--rates: entry 1, \"nan\": expected a rate 0.001"},
        {"--rates", "'1e-300'", "--rates: entry 1, \"1e-300\": expected a rate 0.001"},
        {"--rates", "'2,1'", "--rates: entry 2, \"1\": expected more than the previous one, 2"},
        {"--rates", "'1,,2'", "--rates: entry 2, \"\": expected a number"},
        {"--concurrency", "'1.5'", "--concurrency: entry 1, \"1.5\": expected a whole number of requests in flight, 1 .. 100000"},
        {"--knee", "'0:inf'", "--knee 0:inf: entry 1, \"0\": expected a rate 0.001"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(tu_bench(NULL, "sweep '%s' --out '%s' --allow-read '%s' %s %s >/dev/null 2>'%s'", sc, out, f->shared, bad[i].flag,
                                  bad[i].arg, log), 2);
        read_text(log, text, sizeof(text));
        if (!strstr(text, bad[i].want)) fail_msg("%s %.40s: no \"%s\" in: %s", bad[i].flag, bad[i].arg, bad[i].want, text);
    }
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0);   /* nothing ran */
    /* the scenario's lists: the same bounds */
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"targets\": {\"ttft_ms\": 5}, \"sweep\": {\"rates\": [1e-300, 1]}}",
              ".workload.requests.sweep.rates: [0]: 1e-300: expected a rate 0.001 .. 1e+06 requests/s", NULL);
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"targets\": {\"ttft_ms\": 5}, \"sweep\": {\"rates\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,"
                 "25,26,27,28,29,30,31,32,33]}}",
              ".workload.requests.sweep.rates: 33 entries: expected a list of 1 .. 32 rates", NULL);
    parse_bad(f, "{\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 4}, \"kv_budget\": {\"tokens\": 512}, "
                 "\"arrival\": {\"process\": \"poisson\", \"rate\": 1e-300}}",
              ".workload.requests.arrival.rate: expected a number 0.001 .. 1e+09, got 1e-300", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scenario_keys),
        cmocka_unit_test(test_malformed_trace_runs_nothing),
        cmocka_unit_test(test_each_format),
        cmocka_unit_test(test_hash_ids_are_blocks),
        cmocka_unit_test(test_hash_ids_bounded_by_max_prompt),
        cmocka_unit_test(test_scaled_time_bounded),
        cmocka_unit_test(test_trace_prefix_hits),
        cmocka_unit_test(test_timestamps_honoured),
        cmocka_unit_test(test_sessions),
        cmocka_unit_test(test_concurrency_cap),
        cmocka_unit_test(test_turn_is_the_conversation),
        cmocka_unit_test(test_sweep_command),
        cmocka_unit_test(test_sweep_points_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
