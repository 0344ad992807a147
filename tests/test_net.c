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
    assert_int_equal(hc_chunk(&r, c1, strlen(c1), 100), 0);
    assert_int_equal(hc_chunk(&r, c2, strlen(c2), 250), 0);
    assert_int_equal(hc_chunk(&r, c3, strlen(c3), 300), 0);
    assert_int_equal(hc_chunk(&r, "[DONE]", 6, 400), 1);
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

    const char *bad[] = {"{\"choices\": [ {\"text\": ", "[1, 2]", "{\"id\": 3}", "{\"choices\": [{\"tokens\": [\"x\"]}]}",
                         "{\"error\": {\"message\": \"boom\"}}"};
    const int kind[] = {HC_ERR_MALFORMED, HC_ERR_MALFORMED, HC_ERR_MALFORMED, HC_ERR_MALFORMED, HC_ERR_HTTP};
    for (int i = 0; i < 5; i++) {
        memset(&r, 0, sizeof(r));
        assert_int_equal(hc_chunk(&r, bad[i], strlen(bad[i]), 1), -1);
        assert_int_equal(r.err, kind[i]);
        assert_true(r.msg[0] != 0);
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

int main(void) {
    const struct CMUnitTest sse[] = {
        cmocka_unit_test(test_bench_links_no_http_library),
        cmocka_unit_test(test_sse_every_split),
        cmocka_unit_test(test_sse_cut_and_overlong),
        cmocka_unit_test(test_chunk_parse),
        cmocka_unit_test(test_client_no_server),
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
