/* harness/net: the SSE parser on byte strings (every split, line ends, comments, malformed
 * and overlong events), the client's reading of completion chunks, bench serve's server on
 * loopback (every endpoint, streaming, a JSON 400 for each malformed request, the oracle's
 * greedy ids through the client), and the client's failures, each from a server that
 * misbehaves on purpose (refuses, cuts the stream, sends a malformed event, never answers,
 * is not there). Every socket wait has a time-out; ports are ephemeral. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <cJSON.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engines/core/runtime/engine.h"
#include "harness/net/httpc.h"
#include "harness/net/server.h"
#include "harness/net/sse.h"
#include "tests/lib/script_server.h"
#include "tests/lib/testutil.h"

/* ======================================================================
 * SSE, on byte strings
 * ====================================================================== */

typedef struct evlog {
    char buf[4096];
    int n;
} evlog;

static int ev_add(void *user, const char *data, size_t len) {
    evlog *l = user;
    assert_int_equal(strlen(data), len);
    size_t at = strlen(l->buf);
    snprintf(l->buf + at, sizeof(l->buf) - at, "[%s]", data);
    l->n++;
    return 0;
}

/* The events of text fed in pieces of `step` bytes. */
static int sse_run(const char *text, size_t step, evlog *l, int *pending) {
    sse_parser p;
    sse_init(&p);
    memset(l, 0, sizeof(*l));
    size_t n = strlen(text);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i += step) rc = sse_feed(&p, text + i, i + step <= n ? step : n - i, ev_add, l);
    *pending = sse_pending(&p);
    sse_free(&p);
    return rc;
}

/* bench links neither libcurl nor libmicrohttpd (harness/net/netlib.h loads them at first use):
 * linked, they were mapped into every worker and doubled a small model's worker RSS. The other
 * tests here use both through bench, so the loaded path is the one they check. */
static void test_bench_links_no_http_library(void **state) {
    (void)state;
    const char *bin = getenv("BENCH_BIN");
    char cmd[1200], line[512];
    snprintf(cmd, sizeof(cmd), "ldd '%s' 2>&1", bin ? bin : "build/asan/bench");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int lines = 0;
    while (fgets(line, sizeof(line), p)) {
        lines++;
        if (strstr(line, "libcurl") || strstr(line, "libmicrohttpd")) fail_msg("bench links %s", line);
    }
    int st = pclose(p);
    if (st != 0 || lines < 2) fail_msg("ldd %s failed (status %d, %d lines)", bin ? bin : "build/asan/bench", st, lines);
}

static void test_sse_every_split(void **state) {
    (void)state;
    const char *text = ": keep-alive\r\n"
                       "data: {\"a\": 1}\r\n\r\n"
                       "event: x\nid: 7\ndata:two\ndata: lines\n\n"
                       "data: [DONE]\r\r"
                       "retry: 5\n\n";
    const char *want = "[{\"a\": 1}][two\nlines][[DONE]]";
    for (size_t step = 1; step <= strlen(text); step++) {
        evlog l;
        int pending;
        assert_int_equal(sse_run(text, step, &l, &pending), 0);
        if (strcmp(l.buf, want)) fail_msg("pieces of %zu bytes: got %s, want %s", step, l.buf, want);
        assert_int_equal(pending, 0);
    }
}

static void test_sse_cut_and_overlong(void **state) {
    (void)state;
    evlog l;
    int pending;
    /* a stream cut mid-event: not dispatched, and said so */
    assert_int_equal(sse_run("data: 1\n\ndata: {\"cho", 3, &l, &pending), 0);
    assert_string_equal(l.buf, "[1]");
    assert_int_equal(pending, 1);
    assert_int_equal(sse_run("data: 1\n\ndata: 2\n", 5, &l, &pending), 0);
    assert_int_equal(pending, 1);
    /* a line past the limit is refused, not buffered without end */
    size_t big = SSE_MAX_EVENT + 16;
    char *t = malloc(big + 1);
    assert_non_null(t);
    memcpy(t, "data: ", 6);
    memset(t + 6, 'x', big - 6);
    t[big] = 0;
    sse_parser p;
    sse_init(&p);
    assert_int_equal(sse_feed(&p, t, big, ev_add, &l), -1);
    assert_int_equal(sse_feed(&p, "\n\n", 2, ev_add, &l), -1);     /* and stays failed */
    sse_free(&p);
    free(t);
}

/* ======================================================================
 * The client's reading of completion chunks
 * ====================================================================== */

static void test_chunk_parse(void **state) {
    (void)state;
    hc_result r;
    memset(&r, 0, sizeof(r));
    r.usage_prompt = r.usage_completion = -1;
    const char *c1 = "{\"choices\": [{\"text\": \" a\", \"tokens\": [17], \"finish_reason\": null}]}";
    const char *c2 = "{\"choices\": [{\"text\": \"b\", \"finish_reason\": \"length\"}]}";
    const char *c3 = "{\"choices\": [], \"usage\": {\"prompt_tokens\": 4, \"completion_tokens\": 2}}";
    assert_int_equal(hc_chunk(&r, c1, strlen(c1), 100, 16), 0);
    assert_int_equal(hc_chunk(&r, c2, strlen(c2), 250, 16), 0);
    assert_int_equal(hc_chunk(&r, c3, strlen(c3), 300, 16), 0);
    assert_int_equal(hc_chunk(&r, "[DONE]", 6, 400, 16), 1);
    assert_int_equal(hc_verify(&r), 0);
    assert_int_equal(r.err, HC_OK);
    assert_int_equal(r.n_tokens, 2);
    assert_int_equal(r.n_arrivals, 2);
    assert_int_equal(r.first_ns, 100);
    assert_int_equal(r.arrival_ns[1], 250);
    assert_int_equal(r.n_ids, 1);
    assert_int_equal(r.ids[0], 17);
    assert_int_equal(r.usage_prompt, 4);
    assert_int_equal(r.usage_completion, 2);
    assert_string_equal(r.finish, "length");
    hc_results_free(&r, 1);

    /* each refused as its kind, with a message; max_tokens 4 */
    struct { const char *event, *kind; } bad[] = {
        {"{\"choices\": [ {\"text\": ", "malformed"},
        {"[1, 2]", "malformed"},
        {"{\"id\": 3}", "malformed"},
        {"{\"choices\": [{\"tokens\": [\"x\"]}]}", "malformed"},
        {"{\"choices\": [{\"tokens\": [1.5]}]}", "malformed"},
        {"{\"choices\": [{\"tokens\": {\"a\": 1}}]}", "malformed"},
        {"{\"choices\": [{\"text\": 7}]}", "malformed"},
        {"{\"error\": {\"message\": \"boom\"}}", "http"},
        /* the JSON parse must reach the event's end: text after the object is not an event */
        {"{\"choices\": [{\"text\": \"a\"}]} GARBAGE ]]]", "malformed"},
        {"{\"choices\": []}{\"choices\": []}", "malformed"},
        /* usage: a whole number from 0 to max_tokens, never a saturated int */
        {"{\"usage\": {\"completion_tokens\": 1e12}}", "too_many_tokens"},
        {"{\"usage\": {\"completion_tokens\": 1e300}}", "too_many_tokens"},
        {"{\"usage\": {\"completion_tokens\": 5}}", "too_many_tokens"},
        {"{\"usage\": {\"completion_tokens\": 2.5}}", "malformed"},
        {"{\"usage\": {\"completion_tokens\": -1}}", "malformed"},
        {"{\"usage\": {\"completion_tokens\": \"3\"}}", "malformed"},
        {"{\"usage\": {\"prompt_tokens\": 1e300}}", "malformed"},
        /* more tokens in one event than were asked for */
        {"{\"choices\": [{\"tokens\": [1, 2, 3, 4, 5]}]}", "too_many_tokens"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&r, 0, sizeof(r));
        r.usage_prompt = r.usage_completion = -1;
        int rc = hc_chunk(&r, bad[i].event, strlen(bad[i].event), 1, 4);
        if (rc != -1 || strcmp(hc_err_name(r.err), bad[i].kind) || !r.msg[0])
            fail_msg("%s: rc %d, kind %s (%s), want %s", bad[i].event, rc, hc_err_name(r.err), r.msg, bad[i].kind);
        assert_int_equal(r.n_tokens, 0);
        hc_results_free(&r, 1);
    }
    /* trailing blanks are JSON's own */
    memset(&r, 0, sizeof(r));
    r.usage_prompt = r.usage_completion = -1;
    const char *blanks = "{\"choices\": [{\"text\": \"a\"}]} \r\n\t";
    assert_int_equal(hc_chunk(&r, blanks, strlen(blanks), 1, 4), 0);
    assert_int_equal(r.n_tokens, 1);
    hc_results_free(&r, 1);
}

/* The answer after [DONE], against itself: a token at least, usage that agrees. */
static void test_verify(void **state) {
    (void)state;
    struct { const char *events[4]; const char *kind; int usage; } cases[] = {
        {{NULL}, "no_tokens", -1},
        {{"{\"choices\": [], \"usage\": {\"completion_tokens\": 3}}"}, "no_tokens", 3},
        /* text only: an event may carry several tokens, never less than one */
        {{"{\"choices\": [{\"text\": \"a\"}]}", "{\"choices\": [{\"text\": \"b\"}]}",
          "{\"choices\": [], \"usage\": {\"completion_tokens\": 3}}"}, "ok", 3},
        {{"{\"choices\": [{\"text\": \"a\"}]}", "{\"choices\": [{\"text\": \"b\"}]}",
          "{\"choices\": [], \"usage\": {\"completion_tokens\": 1}}"}, "usage_mismatch", 1},
        /* ids: the count is exact */
        {{"{\"choices\": [{\"tokens\": [4]}]}", "{\"choices\": [{\"tokens\": [5, 6]}]}",
          "{\"choices\": [], \"usage\": {\"completion_tokens\": 3}}"}, "ok", 3},
        {{"{\"choices\": [{\"tokens\": [4]}]}", "{\"choices\": [{\"tokens\": [5]}]}",
          "{\"choices\": [], \"usage\": {\"completion_tokens\": 3}}"}, "usage_mismatch", 3},
        /* no usage: nothing to compare */
        {{"{\"choices\": [{\"text\": \"a\"}]}"}, "ok", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hc_result r;
        memset(&r, 0, sizeof(r));
        r.usage_prompt = r.usage_completion = -1;
        for (int e = 0; e < 4 && cases[i].events[e]; e++)
            assert_int_equal(hc_chunk(&r, cases[i].events[e], strlen(cases[i].events[e]), e + 1, 16), 0);
        assert_int_equal(hc_chunk(&r, "[DONE]", 6, 9, 16), 1);
        hc_verify(&r);
        if (strcmp(hc_err_name(r.err), cases[i].kind)) fail_msg("case %zu: %s (%s), want %s", i, hc_err_name(r.err), r.msg, cases[i].kind);
        assert_int_equal(r.usage_completion, cases[i].usage);
        hc_results_free(&r, 1);
    }
}

/* ======================================================================
 * bench serve's server on loopback
 * ====================================================================== */

typedef struct fx {
    char model[512], tok[512], oracle[512];
    int want[256], n_want;
    engine *e;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    *state = f;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) ||
        !tu_shared("oracle/greedy_dog.ids.txt", f->oracle, sizeof(f->oracle)))
        return 0;
    f->n_want = tu_read_ints(f->oracle, f->want, 256);
    engine_spec es = {.model_path = f->model, .tokenizer_path = f->tok, .threads = 1, .max_seqs = 1,
                      .module_dir = tu_module_dir()};
    char err[512];
    if (engine_create(&es, &f->e, err, sizeof(err))) {
        fprintf(stderr, "engine_create: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) engine_destroy(f->e);
    free(f);
    return 0;
}

/* A body from a request: GET when body is NULL, else POST of body. Returns the status. */
typedef struct buf {
    char *p;
    size_t n;
} buf;

static size_t buf_add(char *d, size_t size, size_t nm, void *user) {
    buf *b = user;
    size_t n = size * nm;
    char *q = realloc(b->p, b->n + n + 1);
    if (!q) return 0;
    memcpy(q + b->n, d, n);
    b->p = q;
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

static long fetch(int port, const char *path, const char *method, const char *body, buf *out) {
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    CURL *h = curl_easy_init();
    assert_non_null(h);
    memset(out, 0, sizeof(*out));
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_add);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    if (method) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    return status;
}

static hs_server *start(fx *f, const char *fault) {
    hs_server *s = NULL;
    char err[256];
    hs_opts o = {.port = 0, .model_name = "stories", .fault = fault};
    if (hs_start(f->e, &o, &s, err, sizeof(err))) fail_msg("hs_start: %s", err);
    assert_true(hs_port(s) > 0);
    return s;
}

static void test_serve_endpoints(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f, NULL);
    int port = hs_port(s);
    buf b;
    assert_int_equal(fetch(port, "/health", NULL, NULL, &b), 200);
    assert_non_null(strstr(b.p, "\"ok\""));
    free(b.p);
    assert_int_equal(fetch(port, "/v1/models", NULL, NULL, &b), 200);
    cJSON *j = cJSON_Parse(b.p);
    free(b.p);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "id")->valuestring, "stories");
    cJSON_Delete(j);

    /* not streamed: the text prompt, greedy: the oracle's first tokens after the prompt */
    assert_int_equal(fetch(port, "/v1/completions", NULL, "{\"prompt\": \"The little dog\", \"max_tokens\": 6, \"temperature\": 0, "
                                                          "\"ignore_eos\": true}", &b), 200);
    j = cJSON_Parse(b.p);
    free(b.p);
    assert_non_null(j);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), *toks = cJSON_GetObjectItem(ch, "tokens");
    assert_int_equal(cJSON_GetArraySize(toks), 6);
    for (int i = 0; i < 6; i++) assert_int_equal(cJSON_GetArrayItem(toks, i)->valueint, f->want[5 + i]);
    assert_string_equal(cJSON_GetObjectItem(ch, "finish_reason")->valuestring, "length");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "prompt_tokens")->valueint, 5);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens")->valueint, 6);
    assert_true(strlen(cJSON_GetObjectItem(ch, "text")->valuestring) > 0);
    cJSON_Delete(j);

    /* streamed, by hand: one event a token, usage, [DONE] */
    assert_int_equal(fetch(port, "/v1/completions", NULL, "{\"prompt\": [1, 291, 376], \"max_tokens\": 3, \"temperature\": 0, "
                                                          "\"stream\": true, \"stream_options\": {\"include_usage\": true}}", &b), 200);
    int events = 0;
    for (const char *p = b.p; (p = strstr(p, "data: ")); p += 6) events++;
    assert_int_equal(events, 3 + 1 + 1);
    assert_non_null(strstr(b.p, "\"completion_tokens\":3"));
    assert_non_null(strstr(b.p, "data: [DONE]\n\n"));
    free(b.p);
    hs_stop(s);
}

static void test_serve_bad_requests(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f, NULL);
    int port = hs_port(s);
    struct { const char *body, *needle; } bad[] = {
        {"{not json", "not a JSON object"},
        {"[1, 2]", "not a JSON object"},
        {"{\"max_tokens\": 4}", "prompt: expected a string or an array"},
        {"{\"prompt\": []}", "prompt: expected 1 to"},
        {"{\"prompt\": [1, 512]}", "prompt[1]: expected a token id from 0 to 511"},
        {"{\"prompt\": [[1, 2]]}", "prompt[0]"},
        {"{\"prompt\": [1], \"max_tokens\": 0}", "max_tokens: expected a whole number from 1"},
        {"{\"prompt\": [1], \"max_tokens\": 2.5}", "max_tokens"},
        {"{\"prompt\": [1], \"temperature\": -1}", "temperature"},
        {"{\"prompt\": [1], \"top_p\": 0}", "top_p"},
        {"{\"prompt\": [1], \"stream\": \"yes\"}", "stream: expected true or false"},
        {"{\"prompt\": [1], \"stream_options\": 3}", "stream_options"},
        {"{\"prompt\": [1, 2, 3], \"max_tokens\": 512}", "exceed the context"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        buf b;
        long st = fetch(port, "/v1/completions", NULL, bad[i].body, &b);
        if (st != 400) fail_msg("%s: status %ld, want 400: %s", bad[i].body, st, b.p ? b.p : "");
        cJSON *j = cJSON_Parse(b.p);
        cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message");
        if (!cJSON_IsString(m) || !strstr(m->valuestring, bad[i].needle))
            fail_msg("%s: error %s lacks \"%s\"", bad[i].body, b.p, bad[i].needle);
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")->valueint, 400);
        cJSON_Delete(j);
        free(b.p);
    }
    buf b;
    assert_int_equal(fetch(port, "/v1/completions", NULL, NULL, &b), 405);
    free(b.p);
    assert_int_equal(fetch(port, "/nope", NULL, NULL, &b), 404);
    assert_non_null(strstr(b.p, "no such endpoint"));
    free(b.p);
    assert_int_equal(fetch(port, "/health", "DELETE", NULL, &b), 405);
    free(b.p);
    hs_stop(s);
}

/* The client against bench serve: the oracle's ids exactly, token by token, with their times. */
static void test_client_oracle(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f, NULL);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", hs_port(s));
    /* the oracle: BOS and the prompt's 4 ids, then 196 generated; two requests at once */
    hc_req q[2] = {{.prompt = f->want, .n_prompt = 5, .max_tokens = f->n_want - 5},
                   {.prompt = f->want, .n_prompt = 5, .max_tokens = 8}};
    hc_result r[2];
    hc_opts o = {.url = url, .timeout_s = 60, .temperature = 0, .ignore_eos = 1};
    char err[256];
    assert_int_equal(hc_run(&o, q, 2, r, err, sizeof(err)), 0);
    for (int k = 0; k < 2; k++) {
        if (r[k].err) fail_msg("request %d: %s", k, r[k].msg);
        assert_int_equal(r[k].n_ids, q[k].max_tokens);
        assert_int_equal(r[k].n_arrivals, q[k].max_tokens);
        assert_int_equal(r[k].usage_completion, q[k].max_tokens);
        assert_int_equal(r[k].usage_prompt, 5);
        for (int i = 0; i < r[k].n_ids; i++)
            if (r[k].ids[i] != f->want[5 + i]) fail_msg("request %d: id %d is %d, the oracle has %d", k, i, r[k].ids[i], f->want[5 + i]);
        assert_true(r[k].sent_ns > 0 && r[k].first_ns >= r[k].sent_ns && r[k].end_ns >= r[k].first_ns);
        for (int i = 1; i < r[k].n_arrivals; i++) assert_true(r[k].arrival_ns[i] >= r[k].arrival_ns[i - 1]);
        assert_string_equal(r[k].finish, "length");
    }
    hc_results_free(r, 2);
    hs_stop(s);
}

/* One request to a server with fault; its result's kind must be want. */
static void expect_fault(fx *f, const char *fault, int want, const char *needle) {
    hs_server *s = start(f, fault);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", hs_port(s));
    hc_req q = {.prompt = f->want, .n_prompt = 5, .max_tokens = 10};
    hc_result r;
    hc_opts o = {.url = url, .timeout_s = 30, .ignore_eos = 1};
    char err[256];
    assert_int_equal(hc_run(&o, &q, 1, &r, err, sizeof(err)), 0);
    if (r.err != want) fail_msg("fault %s: got %s (%s), want %s", fault, hc_err_name(r.err), r.msg, hc_err_name(want));
    if (!strstr(r.msg, needle)) fail_msg("fault %s: message \"%s\" lacks \"%s\"", fault, r.msg, needle);
    hc_results_free(&r, 1);
    hs_stop(s);
}

static void test_client_faults(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    expect_fault(f, "refuse", HC_ERR_HTTP, "HTTP 503");
    expect_fault(f, "close-early", HC_ERR_CLOSED, "after 2 tokens");
    expect_fault(f, "malformed", HC_ERR_MALFORMED, "malformed");
    /* never ready: /health says 503 */
    hs_server *s = start(f, "never-ready");
    char url[64], err[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/health", hs_port(s));
    long st = 0;
    assert_int_equal(hc_get(url, 5, &st, err, sizeof(err)), 0);
    assert_int_equal(st, 503);
    hs_stop(s);
}

/* No server: a port nobody listens on, and one that accepts and never answers. */
static void test_client_no_server(void **state) {
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    int ids[2] = {1, 5};
    hc_req q = {.prompt = ids, .n_prompt = 2, .max_tokens = 3};
    hc_result r;
    char url[64], err[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    hc_opts o = {.url = url, .timeout_s = 1};
    /* bound, not listening: refused */
    assert_int_equal(hc_run(&o, &q, 1, &r, err, sizeof(err)), 0);
    assert_int_equal(r.err, HC_ERR_CONNECT);
    hc_results_free(&r, 1);
    /* listening, never accepting: the connection completes in the backlog and nothing answers */
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(hc_run(&o, &q, 1, &r, err, sizeof(err)), 0);
    if (r.err != HC_ERR_TIMEOUT) fail_msg("got %s (%s), want timeout", hc_err_name(r.err), r.msg);
    hc_results_free(&r, 1);
    close(fd);
}

/* ======================================================================
 * The client against servers that lie (tests/lib/script_server.h)
 * ====================================================================== */

#define SSE_HEAD "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
#define TEXT_EVENT "data: {\"choices\": [{\"index\": 0, \"text\": \"a\", \"finish_reason\": null}]}\n\n"
#define USAGE_EVENT(n) "data: {\"choices\": [], \"usage\": {\"prompt_tokens\": 2, \"completion_tokens\": " n "}}\n\n"
#define DONE_EVENT "data: [DONE]\n\n"

/* One request of max_tokens to a server answering reply (held open with hold); its result. */
static hc_result scripted(const char *reply, size_t len, int hold, int max_tokens, double timeout_s) {
    ss_server *s = ss_start(reply, len, hold);
    assert_non_null(s);
    char url[64], err[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ss_port(s));
    int ids[2] = {1, 5};
    hc_req q = {.prompt = ids, .n_prompt = 2, .max_tokens = max_tokens};
    hc_opts o = {.url = url, .timeout_s = timeout_s};
    hc_result r;
    if (hc_run(&o, &q, 1, &r, err, sizeof(err))) fail_msg("hc_run: %s", err);
    ss_stop(s);
    return r;
}

/* The request's failure must be kind, its message holding needle. */
static void expect_scripted(const char *what, const char *reply, size_t len, int max_tokens, const char *kind, const char *needle) {
    hc_result r = scripted(reply, len, 0, max_tokens, 30);
    if (strcmp(hc_err_name(r.err), kind) || !strstr(r.msg, needle))
        fail_msg("%s: got %s (%s), want %s naming \"%s\"", what, hc_err_name(r.err), r.msg, kind, needle);
    hc_results_free(&r, 1);
}
#define EXPECT(what, reply, max, kind, needle) expect_scripted(what, reply, sizeof(reply) - 1, max, kind, needle)

/* usage.completion_tokens is believed only when it is a whole number within max_tokens that
 * agrees with the tokens that came: no rate of 1e12 tok/s, no INT_MAX. */
static void test_client_usage_checked(void **state) {
    (void)state;
    EXPECT("1e12", SSE_HEAD TEXT_EVENT TEXT_EVENT USAGE_EVENT("1e12") DONE_EVENT, 16, "too_many_tokens", "1e+12");
    EXPECT("1e300", SSE_HEAD TEXT_EVENT TEXT_EVENT USAGE_EVENT("1e300") DONE_EVENT, 16, "too_many_tokens", "max_tokens");
    EXPECT("fewer than came", SSE_HEAD TEXT_EVENT TEXT_EVENT TEXT_EVENT USAGE_EVENT("2") DONE_EVENT, 16, "usage_mismatch",
           "3 events carried tokens");
    EXPECT("fraction", SSE_HEAD TEXT_EVENT USAGE_EVENT("1.5") DONE_EVENT, 16, "malformed", "usage.completion_tokens");
    /* a text event may carry several tokens: more usage than events is a server's merge */
    hc_result r = scripted(SSE_HEAD TEXT_EVENT TEXT_EVENT USAGE_EVENT("5") DONE_EVENT, sizeof(SSE_HEAD TEXT_EVENT TEXT_EVENT
                           USAGE_EVENT("5") DONE_EVENT) - 1, 0, 16, 30);
    if (r.err) fail_msg("merged tokens: %s (%s)", hc_err_name(r.err), r.msg);
    assert_int_equal(r.n_tokens, 2);
    assert_int_equal(r.usage_completion, 5);
    hc_results_free(&r, 1);
}

/* A stream of only [DONE] is no answer: no token, no TTFT. */
static void test_client_no_tokens(void **state) {
    (void)state;
    EXPECT("only [DONE]", SSE_HEAD DONE_EVENT, 16, "no_tokens", "no token");
    EXPECT("usage, no token", SSE_HEAD USAGE_EVENT("4") DONE_EVENT, 16, "no_tokens", "no token");
}

/* More tokens than max_tokens, streamed: refused at the first one too many, not read to the end. */
static void test_client_too_many_tokens(void **state) {
    (void)state;
    for (int n = 160; n <= 64000; n = n == 160 ? 64000 : 64001) {
        char *reply = NULL;
        size_t len = 0;
        ss_append(&reply, &len, "%s", SSE_HEAD);
        for (int i = 0; i < n; i++) ss_append(&reply, &len, "%s", TEXT_EVENT);
        ss_append(&reply, &len, "%s", DONE_EVENT);
        hc_result r = scripted(reply, len, 0, 16, 30);
        free(reply);
        if (r.err != HC_ERR_TOO_MANY_TOKENS || !strstr(r.msg, "16 tokens asked for"))
            fail_msg("%d tokens for 16: %s (%s)", n, hc_err_name(r.err), r.msg);
        assert_int_equal(r.n_tokens, 16);
        hc_results_free(&r, 1);
    }
}

/* What is not an event stream is refused by name: text after an event's JSON, another
 * Content-Type, a redirect (with its Location), an empty 200 or a stream without [DONE]. */
static void test_client_not_a_stream(void **state) {
    (void)state;
    EXPECT("garbage", SSE_HEAD "data: {\"choices\": [{\"text\": \"a\"}]} GARBAGE ]]]\n\n" DONE_EVENT, 16, "malformed",
           "text after the JSON object: GARBAGE ]]]");
    EXPECT("html", "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<html>" TEXT_EVENT DONE_EVENT, 16,
           "content_type", "text/html, not text/event-stream");
    EXPECT("json", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" TEXT_EVENT DONE_EVENT, 16,
           "content_type", "application/json");
    EXPECT("no type", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" TEXT_EVENT DONE_EVENT, 16, "content_type", "missing");
    EXPECT("charset", "HTTP/1.1 200 OK\r\nContent-Type: Text/Event-Stream; charset=utf-8\r\nConnection: close\r\n\r\n"
           "data: {\"choices\": [{\"text\": \"a\"}]} GARBAGE\n\n", 16, "malformed", "GARBAGE");   /* the type passed */
    EXPECT("redirect", "HTTP/1.1 302 Found\r\nLocation: http://elsewhere.invalid/v1/completions\r\nContent-Length: 0\r\n\r\n",
           16, "redirect", "HTTP 302, a redirect to http://elsewhere.invalid/v1/completions");
    EXPECT("redirect with a body", "HTTP/1.1 307 Temporary Redirect\r\nLocation: /v2\r\nContent-Length: 5\r\n\r\nmoved",
           16, "redirect", "HTTP 307, a redirect to http://127.0.0.1:");
    EXPECT("empty 200", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n", 16, "closed",
           "ended before [DONE], after 0 tokens");
    EXPECT("no [DONE]", SSE_HEAD TEXT_EVENT TEXT_EVENT, 16, "closed", "ended before [DONE], after 2 tokens");
}

/* [DONE] ends the request: a server that keeps the connection open after it is not waited for. */
static void test_client_done_keep_open(void **state) {
    (void)state;
    static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" TEXT_EVENT TEXT_EVENT USAGE_EVENT("2")
        DONE_EVENT;
    /* held open SS_HOLD_S (60 s) at most, past the request's 20 s: the old client timed out */
    hc_result r = scripted(reply, sizeof(reply) - 1, 1, 16, 20);
    if (r.err) fail_msg("[DONE] then held open: %s (%s)", hc_err_name(r.err), r.msg);
    assert_int_equal(r.n_tokens, 2);
    assert_int_equal(r.usage_completion, 2);
    hc_results_free(&r, 1);
}

/* A time-out below a millisecond is still a time-out (curl's 0 is "none"). */
static void test_client_small_timeout(void **state) {
    (void)state;
    /* a server that reads the request and never answers, for SS_HOLD_S at most */
    hc_result r = scripted(NULL, 0, 1, 16, 0.0004);
    if (r.err != HC_ERR_TIMEOUT) fail_msg("timeout_s 0.0004: %s (%s), want timeout", hc_err_name(r.err), r.msg);
    hc_results_free(&r, 1);
}

/* A server's text in a message is cut and escaped: no terminal escape reaches the summary. */
static void test_client_escapes_server_text(void **state) {
    (void)state;
    char *reply = NULL;
    size_t len = 0;
    ss_append(&reply, &len, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                            "\x1b[2J\x1b]0;owned\x07\xc2\x9b" "31m ");
    for (int i = 0; i < 5000; i++) ss_append(&reply, &len, "A");
    hc_result r = scripted(reply, len, 0, 16, 30);
    free(reply);
    assert_int_equal(r.err, HC_ERR_HTTP);
    if (!strstr(r.msg, "HTTP 503: \\x1b[2J\\x1b]0;owned\\x07\\xc2\\x9b31m AAA")) fail_msg("not escaped: %s", r.msg);
    for (const unsigned char *p = (const unsigned char *)r.msg; *p; p++)
        if (*p < 0x20 || *p == 0x7f) fail_msg("a control byte 0x%02x in the message: %s", *p, r.msg);
    assert_true(strlen(r.msg) < 200);
    hc_results_free(&r, 1);
    /* an error event's message and a Location too */
    EXPECT("error event", SSE_HEAD "data: {\"error\": {\"message\": \"\\u001b[31mred\"}}\n\n", 16, "http", "\\x1b[31mred");
    EXPECT("location", "HTTP/1.1 301 Moved\r\nLocation: http://h/\x1b[5mx\r\nContent-Length: 0\r\n\r\n", 16, "redirect",
           "a redirect to http");
}

int main(void) {
    const struct CMUnitTest sse[] = {
        cmocka_unit_test(test_bench_links_no_http_library),
        cmocka_unit_test(test_sse_every_split),
        cmocka_unit_test(test_sse_cut_and_overlong),
        cmocka_unit_test(test_chunk_parse),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_client_no_server),
        cmocka_unit_test(test_client_usage_checked),
        cmocka_unit_test(test_client_no_tokens),
        cmocka_unit_test(test_client_too_many_tokens),
        cmocka_unit_test(test_client_not_a_stream),
        cmocka_unit_test(test_client_done_keep_open),
        cmocka_unit_test(test_client_small_timeout),
        cmocka_unit_test(test_client_escapes_server_text),
    };
    const struct CMUnitTest server[] = {
        cmocka_unit_test(test_serve_endpoints),
        cmocka_unit_test(test_serve_bad_requests),
        cmocka_unit_test(test_client_oracle),
        cmocka_unit_test(test_client_faults),
    };
    int rc = cmocka_run_group_tests_name("sse and client", sse, NULL, NULL);
    rc |= cmocka_run_group_tests_name("bench serve", server, setup, teardown);
    curl_global_cleanup();
    return rc;
}
