/* The http target end to end (harness/child/http_worker.h, harness/scenario/target.h), through
 * bench run on loopback with bench serve as the server:
 *   - launched per repetition: the oracle's greedy ids exactly, as the in-process engine in
 *     the same scenario; TTFT, TPOT and ITL from the client's clock; the server's memory
 *     (peak RSS, faults at load, load time) read from /proc by its pid; results.json valid;
 *   - a serving workload: every request's tokens and arrivals, serve_* metrics and ITL;
 *   - a server left running, measured by its pid, and by latency only;
 *   - the faults, each a bench serve that misbehaves on purpose (--fault, a test hook):
 *     refuses, cuts the stream, sends a malformed event, never becomes ready, dies mid-run:
 *     each a failed repetition with its reason, and the healthy one beside them still ok;
 *   - servers that lie (tests/lib/script_server.h: scripted bytes on loopback): usage of 1e12,
 *     [DONE] alone, more tokens than asked, usage below the tokens that came, text after an
 *     event's JSON, text/html, a redirect, an empty 200, terminal escapes in an error body:
 *     each a failed request of its kind, counted in results.json, the repetition failed; a
 *     server that keeps the connection open after [DONE] is a success;
 *   - the per-request export (timelines/v<V>-r<R>-p<P>-requests.jsonl) of the engine and the http target alike;
 *   - memory "tree": a launched server's two children of known size summed into its figures;
 *   - the scenario's target field validated, every error naming the field; bench serve's usage errors.
 * Every wait is bounded (ready_timeout_s, request_timeout_s, the scenario's timeout_s). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/scenario/scenario.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/script_server.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char model[512], tok[512], oracle[512], dir[512], tmp[512];
    int want[256], n_want;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    *state = f;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) ||
        !tu_shared("oracle/greedy_dog.ids.txt", f->oracle, sizeof(f->oracle))) {
        f->model[0] = 0;
        return 0;
    }
    f->n_want = tu_read_ints(f->oracle, f->want, 256);
    char m[512];
    snprintf(m, sizeof(m), "%s", f->model);
    snprintf(f->dir, sizeof(f->dir), "%s", dirname(m));
    if (!tu_tmpdir(f->tmp, sizeof(f->tmp))) return -1;
    /* bench serve's --fault is a test hook; every process bench run starts inherits this */
    setenv("BENCH_TEST_HOOKS", "1", 1);
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f && f->tmp[0]) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

#define NEED(f) TU_NEED((f)->model[0])

/* The launch of bench serve on this scenario's model, with extra arguments. */
#define SERVE_LAUNCH(extra) "\"launch\": [\"{bench}\", \"serve\", \"--model\", \"{model}\", \"--tokenizer\", \"{tokenizer}\", " \
    "\"--port\", \"{port}\", \"--threads\", \"1\"" extra "]"

/* Writes the scenario (name, then the JSON after the model), runs it, returns results.json
 * (schema-checked; NULL when there is none) and bench run's exit status in *rc. */
static cJSON *run_soft(fx *f, const char *name, int *rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static cJSON *run_soft(fx *f, const char *name, int *rc, const char *fmt, ...) {
    char sc[700], out[700], body[6000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(sc, sizeof(sc), "%s/%s.json", f->tmp, name);
    snprintf(out, sizeof(out), "%s/out_%s", f->tmp, name);
    FILE *o = fopen(sc, "w");
    if (!o) return NULL;
    fprintf(o, "{\"name\": \"%s\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", "
               "\"repetitions\": 1, \"warmup\": 0, \"threads\": 1, \"timeout_s\": 120, %s}", name, f->model, f->tok, body);
    fclose(o);
    /* the scenarios here launch bench serve: the user's leave (docs/reliability.md) */
    *rc = tu_bench(NULL, "run '%s' --out '%s' --allow-read '%s' --allow-launch >'%s.stdout' 2>'%s.log'", sc, out, f->dir, out, out);
    char p[800];
    snprintf(p, sizeof(p), "%s/results.json", out);
    cJSON *doc = hjs_load(p);
    if (!doc) {
        snprintf(p, sizeof(p), "%s.log", out);
        tu_dump_file(p);
        return NULL;
    }
    if (hjs_results_violations(doc)) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

#define run(f, name, rc, ...)                                                                  \
    ({                                                                                         \
        cJSON *d_ = run_soft(f, name, rc, __VA_ARGS__);                                        \
        if (!d_) fail_msg("%s: no valid results.json (bench run exited %d)", name, *(rc));     \
        d_;                                                                                    \
    })

/* The run of the variant whose target label is label. */
static const cJSON *run_of(const cJSON *doc, const char *label) {
    int index = -1;
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(doc, "variants")) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "target");
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(t, "label")->valuestring, label))
            index = cJSON_GetObjectItemCaseSensitive(v, "index")->valueint;
    }
    if (index < 0) fail_msg("no variant with target %s", label);
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(doc, "runs"))
        if (cJSON_GetObjectItemCaseSensitive(r, "variant")->valueint == index) return r;
    fail_msg("no run of %s", label);
    return NULL;
}

static const cJSON *proc0(const cJSON *run) { return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(run, "processes"), 0); }

static double pmetric(const cJSON *p, const char *name) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "metrics"), name);
    if (!cJSON_IsNumber(m)) fail_msg("no metric %s", name);
    return m->valuedouble;
}

static int has_metric(const cJSON *p, const char *name) {
    return cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "metrics"), name));
}

/* The per-request export of a run (its variant and repetition, process 0), every line
 * parsed and checked for the fields every target writes; the lines' count. */
static int load_requests(fx *f, const char *name, const cJSON *run, const char *target, cJSON **lines, int max) {
    char p[800];
    snprintf(p, sizeof(p), "%s/out_%s/timelines/v%d-r%d-p0-requests.jsonl", f->tmp, name,
             cJSON_GetObjectItemCaseSensitive(run, "variant")->valueint, cJSON_GetObjectItemCaseSensitive(run, "repetition")->valueint);
    FILE *j = fopen(p, "r");
    if (!j) fail_msg("%s: no per-request export", p);
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    static const char *const num[] = {"id", "arrival_ms", "sent_ms", "end_ms", "prompt_tokens", "output_tokens"};
    while (getline(&line, &cap, j) > 0) {
        cJSON *x = cJSON_Parse(line);
        if (!x) fail_msg("%s: line %d is not JSON: %s", p, n + 1, line);
        for (size_t k = 0; k < sizeof(num) / sizeof(num[0]); k++)
            if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(x, num[k]))) fail_msg("%s: line %d has no number %s", p, n + 1, num[k]);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(x, "target")->valuestring, target);
        assert_non_null(cJSON_GetObjectItemCaseSensitive(x, "failure"));
        assert_non_null(cJSON_GetObjectItemCaseSensitive(x, "output_tokens_reported"));
        assert_non_null(cJSON_GetObjectItemCaseSensitive(x, "prompt_tokens_reported"));
        if (n < max) lines[n] = x;
        else cJSON_Delete(x);
        n++;
    }
    free(line);
    fclose(j);
    return n;
}

static double jnum(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v)) fail_msg("no number %s", k);
    return v->valuedouble;
}

/* A request that succeeded: its token times run from its first token to its end, in order. */
static void expect_token_times(const cJSON *x, int n_tok) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(x, "token_ms");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(x, "failure")));
    assert_int_equal(cJSON_GetArraySize(t), n_tok);
    assert_float_equal(cJSON_GetArrayItem(t, 0)->valuedouble, jnum(x, "first_token_ms"), 1e-9);
    for (int k = 1; k < n_tok; k++) assert_true(cJSON_GetArrayItem(t, k)->valuedouble >= cJSON_GetArrayItem(t, k - 1)->valuedouble);
    assert_true(jnum(x, "end_ms") >= cJSON_GetArrayItem(t, n_tok - 1)->valuedouble);
    assert_true(jnum(x, "first_token_ms") >= jnum(x, "sent_ms") && jnum(x, "sent_ms") >= jnum(x, "arrival_ms"));
}

static void expect_oracle_ids(fx *f, const cJSON *p, const char *what) {
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "tokens"), "id");
    int n = cJSON_GetArraySize(ids);
    assert_int_equal(n, f->n_want - 5);
    for (int i = 0; i < n; i++) {
        int got = cJSON_GetArrayItem(ids, i)->valueint;
        if (got != f->want[5 + i]) fail_msg("%s: id %d is %d, the oracle has %d", what, i, got, f->want[5 + i]);
    }
}

static void test_launched_oracle(void **state) {
    fx *f = *state;
    NEED(f);
    int rc;
    cJSON *doc = run(f, "oracle", &rc,
                     "\"workload\": {\"prompt\": \"The little dog\", \"generate\": %d, \"temperature\": 0}, "
                     "\"metrics\": [\"smaps\", \"tokens\"], "
                     "\"matrix\": {\"target\": [\"engine\", {\"label\": \"serve\", \"http\": {\"url\": \"http://127.0.0.1:{port}\", "
                     SERVE_LAUNCH("") ", \"ready_timeout_s\": 60, \"request_timeout_s\": 60}}]}",
                     f->n_want - 5);
    assert_int_equal(rc, 0);
    const cJSON *eng = proc0(run_of(doc, "engine")), *srv = proc0(run_of(doc, "serve"));
    expect_oracle_ids(f, eng, "in process");
    expect_oracle_ids(f, srv, "http target");
    /* the client's clock: TTFT, TPOT, ITL, as the engine's */
    assert_true(pmetric(srv, "ttft_ms") > 0);
    assert_true(pmetric(srv, "tpot_ms") >= 0);
    assert_true(pmetric(srv, "itl_p99_ms") >= pmetric(srv, "itl_p50_ms"));
    assert_int_equal(pmetric(srv, "mod.http.requests_failed"), 0);
    /* the server's memory, by its pid: launched, loaded, faulted in, its peak */
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(srv, "http");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(h, "memory")->valuestring, "launched");
    int spid = cJSON_GetObjectItemCaseSensitive(h, "server_pid")->valueint;
    assert_true(spid > 0);
    assert_int_not_equal(spid, cJSON_GetObjectItemCaseSensitive(srv, "pid")->valueint);
    assert_true(pmetric(srv, "load_ms") > 0);
    assert_true(pmetric(srv, "peak_rss_mib") > 1);
    assert_true(pmetric(srv, "minflt_load") > 0);
    assert_true(has_metric(srv, "minflt_workload") && !has_metric(eng, "minflt_workload"));
    /* the model file's pages are mapped by the server, as the engine's worker maps them */
    assert_true(pmetric(srv, "region_model_file_rss_end_mib") > 0);
    /* the RSS/PSS split of the server (PSS from its smaps_rollup, reopened after sh's exec) */
    assert_true(pmetric(srv, "pss_end_mib") > 0);
    assert_true(pmetric(srv, "anon_end_mib") > 0 && pmetric(srv, "file_end_mib") > 0);
    const cJSON *reqs = cJSON_GetObjectItemCaseSensitive(h, "requests");
    assert_int_equal(cJSON_GetArraySize(reqs), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(reqs, 0), "tokens_ms")), f->n_want - 5);
    /* one sequence, one line on either target: its lengths are results.json's, its first token the TTFT's */
    const char *labels[] = {"engine", "serve"}, *targets[] = {"engine", "http"};
    for (int k = 0; k < 2; k++) {
        const cJSON *p = proc0(run_of(doc, labels[k]));
        cJSON *x = NULL;
        assert_int_equal(load_requests(f, "oracle", run_of(doc, labels[k]), targets[k], &x, 1), 1);
        assert_int_equal(jnum(x, "output_tokens"), f->n_want - 5);
        assert_int_equal(jnum(x, "output_tokens_reported"), f->n_want - 5);
        assert_int_equal(jnum(x, "prompt_tokens"), cJSON_GetObjectItemCaseSensitive(p, "prompt_tokens")->valueint);
        assert_int_equal(jnum(x, "prompt_tokens_reported"), jnum(x, "prompt_tokens"));
        expect_token_times(x, f->n_want - 5);
        assert_float_equal(jnum(x, "first_token_ms") - jnum(x, "sent_ms"), pmetric(p, "ttft_ms"), 0.01);
        cJSON_Delete(x);
    }
    cJSON_Delete(doc);
}

/* The per-request export of a serving run: a line per request, its fields results.json's. */
static void expect_serving_requests(fx *f, const cJSON *doc, const char *label, const char *target) {
    const cJSON *run = run_of(doc, label), *p = proc0(run);
    const cJSON *sreq = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "serve"), "requests");
    int n = (int)pmetric(p, "serve_requests");
    cJSON *x[16] = {0};
    assert_true(n >= 1 && n <= 16);
    assert_int_equal(load_requests(f, "serving", run, target, x, 16), n);
    double out = 0, prompt = 0;
    for (int i = 0; i < n; i++) {
        /* in the order results.json's columns have them: the order they ended */
        assert_int_equal(jnum(x[i], "id"), cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sreq, "id"), i)->valueint);
        int n_out = (int)jnum(x[i], "output_tokens");
        assert_int_equal(n_out, cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sreq, "output_tokens"), i)->valueint);
        assert_int_equal(jnum(x[i], "output_tokens_reported"), n_out);
        assert_int_equal(jnum(x[i], "prompt_tokens"), cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sreq, "prompt_tokens"), i)->valueint);
        assert_int_equal(jnum(x[i], "prompt_tokens_reported"), jnum(x[i], "prompt_tokens"));
        expect_token_times(x[i], n_out);
        double ttft = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sreq, "ttft_ms"), i)->valuedouble;
        assert_float_equal(jnum(x[i], "first_token_ms") - jnum(x[i], "arrival_ms"), ttft, 0.01);
        out += n_out;
        prompt += jnum(x[i], "prompt_tokens");
        cJSON_Delete(x[i]);
    }
    assert_float_equal(out, pmetric(p, "serve_output_tokens"), 0);
    assert_float_equal(prompt, pmetric(p, "serve_prompt_tokens"), 0);
}

static void test_serving_workload(void **state) {
    fx *f = *state;
    NEED(f);
    int rc;
    cJSON *doc = run(f, "serving", &rc,
                     "\"workload\": {\"ctx\": 96, \"requests\": {\"count\": 5, \"prompt_len\": {\"uniform\": [4, 20]}, "
                     "\"output_len\": {\"uniform\": [4, 16]}, \"kv_budget\": {\"tokens\": 500}, \"seed\": 9}}, "
                     "\"matrix\": {\"target\": [\"engine\", {\"label\": \"serve\", \"http\": {\"url\": \"http://127.0.0.1:{port}\", "
                     SERVE_LAUNCH(", \"--ctx\", \"96\"") ", \"ready_timeout_s\": 60, \"request_timeout_s\": 60, \"concurrency\": 3}}]}");
    assert_int_equal(rc, 0);
    const cJSON *p = proc0(run_of(doc, "serve"));
    assert_int_equal(pmetric(p, "serve_requests"), 5);
    assert_true(pmetric(p, "serve_ttft_p50_ms") > 0);
    assert_true(pmetric(p, "serve_itl_p99_ms") >= pmetric(p, "serve_itl_p50_ms"));
    /* each request's arrivals: as many as the tokens it reports */
    const cJSON *sreq = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "serve"), "requests");
    const cJSON *sid = cJSON_GetObjectItemCaseSensitive(sreq, "id"), *sout = cJSON_GetObjectItemCaseSensitive(sreq, "output_tokens");
    const cJSON *hreq = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "http"), "requests");
    assert_int_equal(cJSON_GetArraySize(sid), 5);
    assert_int_equal(cJSON_GetArraySize(hreq), 5);
    int total = 0, arrivals = 0;
    for (int i = 0; i < 5; i++) total += cJSON_GetArrayItem(sout, i)->valueint;
    const cJSON *r;
    cJSON_ArrayForEach(r, hreq) arrivals += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "tokens_ms"));
    assert_int_equal(arrivals, total);
    assert_int_equal(pmetric(p, "serve_output_tokens"), total);
    expect_serving_requests(f, doc, "engine", "engine");
    expect_serving_requests(f, doc, "serve", "http");
    cJSON_Delete(doc);
}

/* bench serve started here, left running: measured by its pid, then by latency only. */
static void test_running_server(void **state) {
    fx *f = *state;
    NEED(f);
    char pf[700];
    snprintf(pf, sizeof(pf), "%s/port", f->tmp);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);      /* never outlives the test */
        const char *bin = getenv("BENCH_BIN");
        execl(bin ? bin : "build/asan/bench", "bench", "serve", "--model", f->model, "--tokenizer", f->tok, "--port", "0",
              "--port-file", pf, "--threads", "1", (char *)NULL);
        _exit(127);
    }
    int port = 0;
    for (int i = 0; i < 600 && !port; i++) {   /* 60 s at most */
        FILE *p = fopen(pf, "r");
        if (p) {
            if (fscanf(p, "%d", &port) != 1) port = 0;
            fclose(p);
        }
        if (!port) {
            struct timespec d = {0, 100000000};
            nanosleep(&d, NULL);
        }
    }
    if (!port) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("bench serve wrote no port to %s", pf);
    }
    int rc;
    cJSON *doc = run_soft(f, "bypid", &rc,
                     "\"workload\": {\"prompt_tokens\": 8, \"generate\": 12}, "
                     "\"matrix\": {\"target\": [{\"label\": \"pid\", \"http\": {\"url\": \"http://127.0.0.1:%d\", \"pid\": %d}}, "
                     "{\"label\": \"latency\", \"http\": {\"url\": \"http://127.0.0.1:%d\"}}]}", port, (int)pid, port);
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!doc) fail_msg("bypid: no valid results.json (bench run exited %d)", rc);
    assert_int_equal(rc, 0);
    const cJSON *bp = proc0(run_of(doc, "pid")), *lat = proc0(run_of(doc, "latency"));
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(bp, "http");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(h, "memory")->valuestring, "pid");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(h, "server_pid")->valueint, pid);
    assert_true(pmetric(bp, "peak_rss_mib") > 1);
    assert_true(pmetric(bp, "ttft_ms") > 0);
    h = cJSON_GetObjectItemCaseSensitive(lat, "http");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(h, "memory")->valuestring, "latency-only");
    assert_false(has_metric(lat, "peak_rss_mib"));
    assert_true(pmetric(lat, "ttft_ms") > 0);
    assert_int_equal(pmetric(lat, "decode_tok_s") > 0, 1);
    /* bench serve stops cleanly on SIGTERM */
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cJSON_Delete(doc);
}

/* Each fault a failed repetition with its reason; the healthy server's repetition is ok. */
static void test_faults(void **state) {
    fx *f = *state;
    NEED(f);
    int rc;
#define FAULTY(label, fault, extra)                                                                                   \
    "{\"label\": \"" label "\", \"http\": {\"url\": \"http://127.0.0.1:{port}\", " SERVE_LAUNCH(", \"--fault\", \"" fault "\"")   \
    ", \"request_timeout_s\": 30, \"stop_timeout_s\": 5" extra "}}"
    cJSON *doc = run(f, "faults", &rc,
                     "\"workload\": {\"prompt_tokens\": 8, \"generate\": 12}, "
                     "\"matrix\": {\"target\": [{\"label\": \"ok\", \"http\": {\"url\": \"http://127.0.0.1:{port}\", "
                     SERVE_LAUNCH("") ", \"ready_timeout_s\": 60}}, "
                     FAULTY("refuse", "refuse", ", \"ready_timeout_s\": 60") ", "
                     FAULTY("close", "close-early", ", \"ready_timeout_s\": 60") ", "
                     FAULTY("malformed", "malformed", ", \"ready_timeout_s\": 60") ", "
                     FAULTY("never", "never-ready", ", \"ready_timeout_s\": 3") ", "
                     FAULTY("die", "die", ", \"ready_timeout_s\": 60") "]}");
#undef FAULTY
    assert_int_equal(rc, 1);    /* some repetitions failed */
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(run_of(doc, "ok"), "status")->valuestring, "ok");
    struct { const char *label, *needle, *kind; } want[] = {
        {"refuse", "HTTP 503", "http"},
        {"close", "after 2 tokens", "closed"},
        {"malformed", "malformed event", "malformed"},
        {"never", "not ready", NULL},
        {"die", "the server exited during the run (exit code 7)", NULL},
    };
    for (int i = 0; i < 5; i++) {
        const cJSON *r = run_of(doc, want[i].label), *p = proc0(r);
        const char *st = cJSON_GetObjectItemCaseSensitive(r, "status")->valuestring;
        const char *why = cJSON_GetObjectItemCaseSensitive(p, "reason")->valuestring;
        if (!strcmp(st, "ok") || !strstr(why, want[i].needle))
            fail_msg("%s: status %s, reason \"%s\" (want a failure naming \"%s\")", want[i].label, st, why, want[i].needle);
        if (!want[i].kind) continue;
        /* the failed request itself is recorded, with its kind */
        const cJSON *failed = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "http"), "failed");
        assert_int_equal(cJSON_GetArraySize(failed), 1);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(failed, 0), "kind")->valuestring, want[i].kind);
    }
    cJSON_Delete(doc);
}

/* Servers that lie, each scripted on loopback: every lie a failed request of its kind in
 * results.json, the repetition failed with the kind in its reason; the truthful ones ok. */
#define SSE_HEAD "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
#define TEXT_EVENT "data: {\"choices\": [{\"index\": 0, \"text\": \"a\"}]}\n\n"
#define USAGE_EVENT(n) "data: {\"choices\": [], \"usage\": {\"prompt_tokens\": 8, \"completion_tokens\": " n "}}\n\n"
#define DONE_EVENT "data: [DONE]\n\n"
#define TEXT4 TEXT_EVENT TEXT_EVENT TEXT_EVENT TEXT_EVENT

typedef struct liar {
    const char *label, *kind, *needle;  /* kind NULL: a truthful server, the repetition ok */
    int hold;
    char *reply;
    size_t len;
    ss_server *s;
} liar;

static void test_lying_servers(void **state) {
    fx *f = *state;
    NEED(f);
    liar l[] = {
        {"usage_1e12", "too_many_tokens", "1e+12", 0, NULL, 0, NULL},
        {"done_only", "no_tokens", "no token came before [DONE]", 0, NULL, 0, NULL},
        {"tokens_160", "too_many_tokens", "more than the 12 tokens asked for", 0, NULL, 0, NULL},
        {"usage_low", "usage_mismatch", "usage.completion_tokens is 2, but 4 events", 0, NULL, 0, NULL},
        {"garbage", "malformed", "text after the JSON object", 0, NULL, 0, NULL},
        {"html", "content_type", "text/html", 0, NULL, 0, NULL},
        {"redirect", "redirect", "a redirect to http://elsewhere.invalid/", 0, NULL, 0, NULL},
        {"empty", "closed", "ended before [DONE]", 0, NULL, 0, NULL},
        {"escapes", "http", "HTTP 500: \\x1b[31mboom\\x07", 0, NULL, 0, NULL},
        {"keep_open", NULL, NULL, 1, NULL, 0, NULL},
        {"merged", NULL, NULL, 0, NULL, 0, NULL},
    };
    const char *script[] = {
        SSE_HEAD TEXT4 USAGE_EVENT("1e12") DONE_EVENT,
        SSE_HEAD DONE_EVENT,
        NULL,       /* 160 events, made below */
        SSE_HEAD TEXT4 USAGE_EVENT("2") DONE_EVENT,
        SSE_HEAD "data: {\"choices\": [{\"text\": \"a\"}]} GARBAGE ]]]\n\n" DONE_EVENT,
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<html>" TEXT4 DONE_EVENT,
        "HTTP/1.1 302 Found\r\nLocation: http://elsewhere.invalid/v1/completions\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 500 Oops\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n\x1b[31mboom\x07\x1b[0m",
        /* a complete answer, then the connection held open (SS_HOLD_S at most, past request_timeout_s) */
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" TEXT4 USAGE_EVENT("4") DONE_EVENT,
        /* 4 text events that the server says were 6 tokens: a merge, allowed */
        SSE_HEAD TEXT4 USAGE_EVENT("6") DONE_EVENT,
    };
    enum { N = sizeof(l) / sizeof(l[0]) };
    _Static_assert(sizeof(script) / sizeof(script[0]) == N, "a script per server");
    char targets[6000] = "";
    size_t at = 0;
    for (int i = 0; i < N; i++) {
        if (script[i]) ss_append(&l[i].reply, &l[i].len, "%s", script[i]);
        else {
            ss_append(&l[i].reply, &l[i].len, "%s", SSE_HEAD);
            for (int k = 0; k < 160; k++) ss_append(&l[i].reply, &l[i].len, "%s", TEXT_EVENT);
            ss_append(&l[i].reply, &l[i].len, "%s", DONE_EVENT);
        }
        l[i].s = ss_start(l[i].reply, l[i].len, l[i].hold);
        assert_non_null(l[i].s);
        at += (size_t)snprintf(targets + at, sizeof(targets) - at, "%s{\"label\": \"%s\", \"http\": {\"url\": \"http://127.0.0.1:%d\", "
                               "\"ready_timeout_s\": 30, \"request_timeout_s\": 20}}", i ? ", " : "", l[i].label, ss_port(l[i].s));
    }
    int rc;
    cJSON *doc = run_soft(f, "liars", &rc, "\"workload\": {\"prompt_tokens\": 8, \"generate\": 12}, \"matrix\": {\"target\": [%s]}",
                          targets);
    for (int i = 0; i < N; i++) {
        ss_stop(l[i].s);
        free(l[i].reply);
    }
    if (!doc) fail_msg("liars: no valid results.json (bench run exited %d)", rc);
    assert_int_equal(rc, 1);    /* some repetitions failed */
    for (int i = 0; i < N; i++) {
        const cJSON *r = run_of(doc, l[i].label), *p = proc0(r);
        const char *st = cJSON_GetObjectItemCaseSensitive(r, "status")->valuestring;
        const char *why = cJSON_GetObjectItemCaseSensitive(p, "reason")->valuestring;
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(p, "http");
        const cJSON *failed = cJSON_GetObjectItemCaseSensitive(h, "failed"), *by = cJSON_GetObjectItemCaseSensitive(h, "failed_by_kind");
        /* the one request's line, failed or not, with its kind */
        cJSON *x = NULL;
        assert_int_equal(load_requests(f, "liars", r, "http", &x, 1), 1);
        const cJSON *fk = cJSON_GetObjectItemCaseSensitive(x, "failure");
        if (l[i].kind ? !cJSON_IsString(fk) || strcmp(fk->valuestring, l[i].kind) : !cJSON_IsNull(fk))
            fail_msg("%s: requests.jsonl failure %s, want %s", l[i].label, cJSON_IsString(fk) ? fk->valuestring : "null",
                     l[i].kind ? l[i].kind : "null");
        if (l[i].kind && !strstr(cJSON_GetObjectItemCaseSensitive(x, "message")->valuestring, l[i].needle))
            fail_msg("%s: requests.jsonl message lacks \"%s\"", l[i].label, l[i].needle);
        cJSON_Delete(x);
        if (!l[i].kind) {
            if (strcmp(st, "ok") || cJSON_GetArraySize(failed)) fail_msg("%s: status %s (%s), want ok", l[i].label, st, why);
            continue;
        }
        char kinds[64];
        snprintf(kinds, sizeof(kinds), "(1 %s)", l[i].kind);
        if (!strcmp(st, "ok") || !strstr(why, kinds))
            fail_msg("%s: status %s, reason \"%s\" (want a failure naming %s)", l[i].label, st, why, kinds);
        assert_int_equal(cJSON_GetArraySize(failed), 1);
        const cJSON *f0 = cJSON_GetArrayItem(failed, 0);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(f0, "kind")->valuestring, l[i].kind);
        const char *msg = cJSON_GetObjectItemCaseSensitive(f0, "message")->valuestring;
        if (!strstr(msg, l[i].needle)) fail_msg("%s: message \"%s\" lacks \"%s\"", l[i].label, msg, l[i].needle);
        /* counted under its kind, and under no other */
        int total = 0;
        const cJSON *k;
        cJSON_ArrayForEach(k, by) total += k->valueint;
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(by, l[i].kind)->valueint, 1);
        assert_int_equal(total, 1);
    }
    /* what bench run printed, on either stream, holds no terminal escape from the server:
     * the summary's line "escapes: 1 failed ... HTTP 500: \\x1b[31mboom\\x07..." */
    for (int k = 0; k < 2; k++) {
        char log[800];
        snprintf(log, sizeof(log), "%s/out_liars.%s", f->tmp, k ? "log" : "stdout");
        FILE *lf = fopen(log, "r");
        assert_non_null(lf);
        int c, esc = 0, boom = 0;
        char line[4096];
        while (fgets(line, sizeof(line), lf)) {
            boom += strstr(line, "boom") != NULL;
            for (const char *q = line; (c = (unsigned char)*q); q++) esc += c == 0x1b || c == 0x07;
        }
        fclose(lf);
        if (esc) fail_msg("%s: %d raw escape bytes", log, esc);
        if (!k) assert_true(boom > 0);   /* the summary (stdout) names the failure, escaped */
    }
    cJSON_Delete(doc);
}

/* The memory holder test_memory_tree launches (this binary, "--hold MIB FIFO"): touches MIB
 * MiB of its own, says so on FIFO, and waits until its parent (the server) dies, 120 s at most. */
static int hold_main(const char *mib_text, const char *fifo) {
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) return 1;
    size_t n = (size_t)atoi(mib_text) << 20;
    char *m = n ? mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (m == MAP_FAILED) return 1;
    memset(m, 1, n);
    FILE *o = fopen(fifo, "w");
    if (!o) return 1;
    fputs("touched\n", o);
    fclose(o);
    alarm(120);
    for (;;) pause();
}

/* memory "tree": a launched server with two children of 32 and 48 MiB touched (sh forks them,
 * then execs bench serve in its own pid): the figures are the three processes' sums, each
 * listed; the same server measured alone ("process") holds far less. */
static void test_memory_tree(void **state) {
    fx *f = *state;
    NEED(f);
    char self[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    assert_true(sl > 0);
    self[sl] = 0;
    /* the server starts once both children have touched their memory (sh's read, a builtin:
     * no other process in the tree), so every snapshot from the load on sees all of it */
    char fifo[2][600];
    for (int i = 0; i < 2; i++) {
        snprintf(fifo[i], sizeof(fifo[i]), "%s/held%d", f->tmp, i);
        unlink(fifo[i]);
        assert_int_equal(mkfifo(fifo[i], 0600), 0);
    }
#define TREE_TARGET(label, memory)                                                                                      \
    "{\"label\": \"" label "\", \"http\": {\"url\": \"http://127.0.0.1:{port}\", \"memory\": \"" memory "\", "              \
    "\"launch\": [\"/bin/sh\", \"-c\", \"'%s' --hold 32 '%s' & '%s' --hold 48 '%s' & read a < '%s' && read b < '%s' && "      \
    "exec '{bench}' serve --model '{model}' --tokenizer '{tokenizer}' --port {port} --threads 1\"], "                        \
    "\"ready_timeout_s\": 60, \"request_timeout_s\": 60}}"
    int rc;
    cJSON *doc = run(f, "tree", &rc, "\"workload\": {\"prompt_tokens\": 8, \"generate\": 12}, \"metrics\": [\"pss\", \"timeline\"], "
                     "\"matrix\": {\"target\": [" TREE_TARGET("tree", "tree") ", " TREE_TARGET("alone", "process") "]}",
                     self, fifo[0], self, fifo[1], fifo[0], fifo[1], self, fifo[0], self, fifo[1], fifo[0], fifo[1]);
#undef TREE_TARGET
    assert_int_equal(rc, 0);
    const cJSON *p = proc0(run_of(doc, "tree")), *alone = proc0(run_of(doc, "alone"));
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(p, "http"), *tree = cJSON_GetObjectItemCaseSensitive(h, "tree");
    assert_non_null(tree);
    assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(alone, "http"), "tree"));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(tree, "root")->valueint, cJSON_GetObjectItemCaseSensitive(h, "server_pid")->valueint);
    /* the server and its two children, the server first */
    const cJSON *procs = cJSON_GetObjectItemCaseSensitive(tree, "processes");
    assert_int_equal(cJSON_GetArraySize(procs), 3);
    const cJSON *root = cJSON_GetArrayItem(procs, 0);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(root, "pid")->valueint, cJSON_GetObjectItemCaseSensitive(tree, "root")->valueint);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(root, "comm")->valuestring, "bench");
    /* each child's own touched pages, in its RSS and whole in its PSS (neither knows which is which) */
    double rss[2], pss[2];
    for (int i = 0; i < 2; i++) {
        rss[i] = jnum(cJSON_GetArrayItem(procs, i + 1), "peak_rss_kib");
        pss[i] = jnum(cJSON_GetArrayItem(procs, i + 1), "peak_pss_kib");
    }
    fprintf(stderr, "memory tree: children peak RSS %.0f, %.0f KiB, PSS %.0f, %.0f KiB; tree peak RSS %.0f, PSS %.0f KiB; "
            "the server alone %.1f MiB\n", rss[0], rss[1], pss[0], pss[1], jnum(tree, "peak_rss_kib"), jnum(tree, "peak_pss_kib"),
            pmetric(alone, "peak_rss_mib"));
    assert_true(fmin(rss[0], rss[1]) >= 32 * 1024.0 && fmax(rss[0], rss[1]) >= 48 * 1024.0);
    assert_true(fmin(pss[0], pss[1]) >= 32 * 1024.0 && fmax(pss[0], pss[1]) >= 48 * 1024.0);
    /* the tree's peak is the three together; the server alone is well below the children's 80 MiB */
    double sum = (32 + 48) * 1024.0;
    assert_true(jnum(tree, "peak_rss_kib") >= sum);
    assert_true(jnum(tree, "peak_pss_kib") >= sum);
    assert_true(pmetric(p, "peak_rss_mib") >= 80);
    assert_true(pmetric(p, "pss_end_mib") >= 80);
    assert_true(pmetric(p, "rss_end_mib") >= 80);
    assert_true(pmetric(alone, "peak_rss_mib") < pmetric(p, "peak_rss_mib") - 70);
    /* the tree's faults, summed as its memory is: the children's pages faulted in after the start */
    assert_true(has_metric(p, "minflt_workload"));
    cJSON_Delete(doc);
}

/* The target field's errors, each naming its path. */
static void test_target_validation(void **state) {
    fx *f = *state;
    NEED(f);
    struct { const char *target, *needle; } bad[] = {
        {"\"nginx\"", ".target: unknown target \"nginx\""},
        {"{\"http\": {}}", ".target.http.url: required"},
        {"{\"http\": {\"url\": \"ftp://x\"}}", ".target.http.url: expected a URL starting http://"},
        {"{\"http\": {\"url\": \"http://127.0.0.1:{port}\"}}", "{port} is a free port bench picks"},
        {"{\"http\": {\"url\": \"http://h\", \"launch\": [\"x\"], \"pid\": 5}}", ".target.http.pid: a launched server's pid"},
        {"{\"http\": {\"url\": \"http://h\", \"pid\": -2}}", ".target.http.pid: expected a process id"},
        {"{\"http\": {\"url\": \"http://h\", \"launch\": []}}", ".target.http.launch: expected a non-empty list of words"},
        {"{\"http\": {\"url\": \"http://h\", \"launch\": \"x\"}}", ".target.http.launch: expected the command as a list of words"},
        {"{\"http\": {\"url\": \"http://h\", \"ready_timeout_s\": 0}}", ".target.http.ready_timeout_s: expected seconds"},
        {"{\"http\": {\"url\": \"http://h\", \"health\": \"health\"}}", ".target.http.health: expected a path"},
        {"{\"http\": {\"url\": \"http://h\", \"ignore_eos\": 1}}", ".target.http.ignore_eos: expected true or false"},
        {"{\"http\": {\"url\": \"http://h\", \"concurency\": 1}}", ".target.http.concurency: unknown key"},
        {"{\"label\": \"a b\", \"http\": {\"url\": \"http://h\"}}", ".target.label: expected a name"},
        {"{\"labl\": \"x\", \"http\": {\"url\": \"http://h\"}}", ".target.labl: unknown key"},
        {"{\"http\": {\"url\": \"http://h\", \"pid\": 5, \"memory\": \"all\"}}", ".target.http.memory: expected \"process\""},
        {"{\"http\": {\"url\": \"http://h\", \"memory\": \"tree\"}}", ".target.http.memory: \"tree\" sums the server's process tree"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[2048];
        snprintf(text, sizeof(text), "{\"name\": \"t\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", "
                 "\"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, \"target\": %s}", f->model, f->tok, bad[i].target);
        scenario *s = NULL;
        sc_errors errs = {0};
        assert_int_equal(sc_parse("t.json", text, tu_module_dir(), &s, &errs), -1);
        int found = 0;
        for (int k = 0; k < errs.n; k++) found |= strstr(errs.v[k], bad[i].needle) != NULL;
        if (!found) fail_msg("target %s: no error naming \"%s\" (first: %s)", bad[i].target, bad[i].needle, errs.n ? errs.v[0] : "none");
        sc_errors_free(&errs);
        sc_free(s);
    }
}

/* bench serve's own command line: usage errors exit 2, a model it cannot load 1, each with a line. */
static void test_serve_cli(void **state) {
    fx *f = *state;
    char out[700];
    snprintf(out, sizeof(out), "%s/serve_cli.txt", f->tmp[0] ? f->tmp : "/tmp");
    assert_int_equal(tu_bench(NULL, "serve --port 1 2>/dev/null"), 2);                  /* no --model */
    assert_int_equal(tu_bench(NULL, "serve --model x --port 70000 2>/dev/null"), 2);
    assert_int_equal(tu_bench(NULL, "serve --model x --prot 8080 2>/dev/null"), 2);
    if (f->model[0]) {   /* the model loads, the address does not */
        assert_int_equal(tu_bench(NULL, "serve --model '%s' --tokenizer '%s' --host nowhere --port 0 2>'%s'", f->model, f->tok, out), 1);
        FILE *h = fopen(out, "r");
        char l[1024] = "";
        assert_non_null(h);
        while (fgets(l, sizeof(l), h) && !strstr(l, "host")) {}
        fclose(h);
        if (!strstr(l, "host \"nowhere\": expected a dotted IPv4 address")) fail_msg("unclear error: %s", l);
    }
    assert_int_equal(tu_bench(NULL, "serve --model /nonexistent/m.gguf --port 0 2>'%s'", out), 1);
    FILE *e = fopen(out, "r");
    assert_non_null(e);
    char line[1024] = "";
    if (!fgets(line, sizeof(line), e)) line[0] = 0;
    fclose(e);
    if (!strstr(line, "bench serve: ") || !strstr(line, "/nonexistent/m.gguf")) fail_msg("unclear error: %s", line);
    assert_int_equal(tu_bench(NULL, "serve --help >/dev/null"), 0);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--hold")) return hold_main(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target_validation),
        cmocka_unit_test(test_serve_cli),
        cmocka_unit_test(test_launched_oracle),
        cmocka_unit_test(test_serving_workload),
        cmocka_unit_test(test_running_server),
        cmocka_unit_test(test_faults),
        cmocka_unit_test(test_lying_servers),
        cmocka_unit_test(test_memory_tree),
    };
    return cmocka_run_group_tests_name("http target", tests, setup, teardown);
}
