/* bench serve batching concurrent requests (harness/net/batcher.h) and its /metrics:
 *   - 4 streamed requests at once are decoded together (the "gather" hook holds the first
 *     step until all 4 are in, so the batch does not depend on this machine's speed), and
 *     each gets exactly the ids it gets alone, and the ids a plain greedy loop over the
 *     engine gives (what bench serve gave one request at a time);
 *   - the scheduler really batched: 4 running at once, and as many steps as the longest
 *     request needs, not the sum;
 *   - GET /metrics is Prometheus text 0.0.4 (checked here line by line), and promtool
 *     accepts it where it is installed;
 *   - a client that hangs up, streaming or waiting, cancels its request and the next ones
 *     complete;
 *   - stopping answers the waiting requests 503 while the running streams end with [DONE]
 *     (hs_stop, what bench serve's SIGTERM calls; tests/test_serve_limits.c sends the signal);
 *   - bench serve's --max-batch and --kv-budget: bad values exit 2 naming the option, a
 *     budget in positions or in bytes sizes the KV pool /metrics reports.
 * The server runs in this process on loopback; the clients are raw HTTP/1.0 sockets (a
 * stream then comes unchunked and the server closes after each answer). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engines/core/runtime/engine.h"
#include "engines/core/runtime/sampler.h"
#include "harness/net/server.h"
#include "tests/lib/testutil.h"

enum { BATCH = 4, MAX_IDS = 512 };

typedef struct fx {
    char model[512], tok[512], tmp[512];
    engine *solo;       /* one sequence: the greedy oracle */
    engine *served;     /* BATCH sequences: behind the server */
} fx;

static int make_engine(fx *f, int seqs, engine **out) {
    engine_spec es = {.model_path = f->model, .tokenizer_path = f->tok, .threads = 1, .max_seqs = seqs, .module_dir = tu_module_dir()};
    char err[512];
    if (!engine_create(&es, out, err, sizeof(err))) return 0;
    fprintf(stderr, "engine_create: %s\n", err);
    return -1;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    *state = f;
    signal(SIGPIPE, SIG_IGN);
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) || !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)))
        return 0;
    tu_tmpdir(f->tmp, sizeof(f->tmp));
    return make_engine(f, 1, &f->solo) || make_engine(f, BATCH, &f->served) ? -1 : 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) {
        engine_destroy(f->solo);
        engine_destroy(f->served);
        if (f->tmp[0]) tu_rmtree(f->tmp);
    }
    free(f);
    return 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static hs_server *serve(fx *f, int max_batch, const char *fault) {
    hs_opts o = {.max_batch = max_batch, .fault = fault};
    hs_server *s = NULL;
    char err[256];
    if (hs_start(f->served, &o, &s, err, sizeof(err))) fail_msg("hs_start: %s", err);
    return s;
}

/* ======================================================================
 * An HTTP/1.0 client on a raw socket
 * ====================================================================== */

/* method path with body (NULL: none) sent on a new connection; its socket. */
static int send_req(int port, const char *method, const char *path, const char *body) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 120};    /* a server that never answers fails the test, not the suite */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[4096];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nContent-Length: %zu\r\n\r\n%s", method, path, body ? strlen(body) : 0,
                     body ? body : "");
    assert_true(n > 0 && (size_t)n < sizeof(req));
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    return fd;
}

/* Everything the server sends until it closes; fd is closed. Free it. */
static char *read_to_close(int fd) {
    size_t len = 0, cap = 8192;
    char *b = malloc(cap);
    assert_non_null(b);
    for (ssize_t r; (r = recv(fd, b + len, cap - len - 1, 0)) > 0;) {
        len += (size_t)r;
        if (cap - len < 4096 && !(b = realloc(b, cap *= 2))) fail_msg("out of memory");
    }
    b[len] = 0;
    close(fd);
    return b;
}

static int status_of(const char *resp) {
    int st = 0;
    return sscanf(resp, "HTTP/1.%*d %d", &st) == 1 ? st : 0;
}

static const char *body_of(const char *resp) {
    const char *p = strstr(resp, "\r\n\r\n");
    return p ? p + 4 : "";
}

/* GET path's body (status 200 asserted). Free it. */
static char *get_body(int port, const char *path) {
    char *resp = read_to_close(send_req(port, "GET", path, NULL));
    if (status_of(resp) != 200) fail_msg("GET %s: %s", path, resp);
    char *body = strdup(body_of(resp));
    free(resp);
    return body;
}

/* The number /health reports as key. */
static int health(int port, const char *key) {
    char *body = get_body(port, "/health");
    cJSON *j = cJSON_Parse(body);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    int n = cJSON_IsNumber(v) ? v->valueint : -1;
    cJSON_Delete(j);
    free(body);
    return n;
}

/* The value of the sample "name value" in a /metrics text; fails when absent. */
static double metric(const char *text, const char *name) {
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, name, nl) && p[nl] == ' ') return strtod(p + nl + 1, NULL);
    fail_msg("/metrics has no sample %s", name);
    return -1;
}

static double metric_now(int port, const char *name) {
    char *text = get_body(port, "/metrics");
    double v = metric(text, name);
    free(text);
    return v;
}

/* The ids of one choice's "tokens" appended to ids[*n]. */
static void take_tokens(const cJSON *choice, int *ids, int *n) {
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(choice, "tokens")) {
        assert_true(*n < MAX_IDS);
        ids[(*n)++] = t->valueint;
    }
}

/* The ids an answer carries, streamed (its events' "tokens") or not; *done: a stream ended
 * with [DONE] (or an answer was whole). Returns the count. */
static int ids_of(const char *body, int *ids, int *done) {
    int n = 0;
    *done = 0;
    if (body[0] == '{') {
        cJSON *j = cJSON_Parse(body);
        *done = j != NULL;
        take_tokens(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0), ids, &n);
        cJSON_Delete(j);
        return n;
    }
    for (const char *p = strstr(body, "data: "); p; p = strstr(p + 6, "data: ")) {
        if (!strncmp(p + 6, "[DONE]", 6)) *done = 1;
        const char *end = strstr(p, "\n\n");
        cJSON *j = cJSON_ParseWithLength(p + 6, end ? (size_t)(end - p - 6) : strlen(p + 6));
        if (j) take_tokens(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0), ids, &n);
        cJSON_Delete(j);
    }
    return n;
}

/* ======================================================================
 * The requests
 * ====================================================================== */

typedef struct job {
    int port;
    int prompt[8], n_prompt, max_tokens;
    int ids[MAX_IDS], n_ids, done, status;
} job;

static const job requests[BATCH] = {
    {.prompt = {1, 400, 300}, .n_prompt = 3, .max_tokens = 20},
    {.prompt = {1, 5, 6, 7, 8}, .n_prompt = 5, .max_tokens = 28},
    {.prompt = {1, 100}, .n_prompt = 2, .max_tokens = 36},
    {.prompt = {1, 250, 251, 252, 253, 254, 255}, .n_prompt = 7, .max_tokens = 44},
};

/* Sends j (greedy, streamed, ignore_eos) and keeps its ids. */
static void *run_job(void *arg) {
    job *j = arg;
    char body[512];
    int n = snprintf(body, sizeof(body), "{\"prompt\": [");
    for (int i = 0; i < j->n_prompt; i++) n += snprintf(body + n, sizeof(body) - (size_t)n, "%s%d", i ? ", " : "", j->prompt[i]);
    snprintf(body + n, sizeof(body) - (size_t)n, "], \"max_tokens\": %d, \"temperature\": 0, \"stream\": true, \"ignore_eos\": true}",
             j->max_tokens);
    char *resp = read_to_close(send_req(j->port, "POST", "/v1/completions", body));
    j->status = status_of(resp);
    j->n_ids = ids_of(body_of(resp), j->ids, &j->done);
    free(resp);
    return NULL;
}

/* What bench serve gave one request at a time: prefill, then one position a forward pass, argmax. */
static int greedy_oracle(engine *e, const job *j, int *ids) {
    char err[256];
    float *logits;
    sampler *smp = sampler_create(engine_model(e)->cfg.vocab_size, 0, 1, 0);
    assert_non_null(smp);
    engine_reset(e, 0);
    if (engine_forward(e, 0, j->prompt, j->n_prompt, 0, &logits, err, sizeof(err))) fail_msg("engine_forward: %s", err);
    for (int k = 0; k < j->max_tokens; k++) {
        ids[k] = engine_sample(e, smp, logits);
        if (k + 1 < j->max_tokens && engine_forward(e, 0, &ids[k], 1, j->n_prompt + k, &logits, err, sizeof(err)))
            fail_msg("engine_forward: %s", err);
    }
    sampler_free(smp);
    return j->max_tokens;
}

static void expect_ids(const char *what, int r, const int *got, int n_got, const int *want, int n_want) {
    if (n_got != n_want) fail_msg("%s, request %d: %d ids, want %d", what, r, n_got, n_want);
    for (int k = 0; k < n_want; k++)
        if (got[k] != want[k]) fail_msg("%s, request %d: id %d is %d, want %d", what, r, k, got[k], want[k]);
}

/* ======================================================================
 * The tests
 * ====================================================================== */

/* 4 requests at once: batched in one decode from the first step, each with its lone ids. */
static void test_batched_ids_equal_alone(void **state) {
    fx *f = *state;
    TU_NEED(f->served);
    hs_server *s = serve(f, BATCH, "gather");
    job together[BATCH], alone[BATCH];
    pthread_t th[BATCH];
    for (int i = 0; i < BATCH; i++) {
        together[i] = requests[i];
        together[i].port = hs_port(s);
        assert_int_equal(pthread_create(&th[i], NULL, run_job, &together[i]), 0);
    }
    for (int i = 0; i < BATCH; i++) pthread_join(th[i], NULL);
    /* batched: all 4 ran at once, and the steps were the longest request's, not the sum of all */
    char *text = get_body(hs_port(s), "/metrics");
    int longest = 0, decoded = 0, made = 0;
    for (int i = 0; i < BATCH; i++) {
        longest = requests[i].max_tokens > longest ? requests[i].max_tokens : longest;
        decoded += requests[i].max_tokens - 1;      /* the first token of each comes from its prefill */
        made += requests[i].max_tokens;
    }
    assert_int_equal((int)metric(text, "bench:requests_running_max"), BATCH);
    assert_int_equal((int)metric(text, "bench:engine_steps_total"), longest - 1);
    assert_int_equal((int)metric(text, "bench:decode_tokens_total"), decoded);
    assert_int_equal((int)metric(text, "bench:generation_tokens_total"), made);
    assert_int_equal((int)metric(text, "bench:request_success_total"), BATCH);
    free(text);
    for (int i = 0; i < BATCH; i++) {       /* the same requests one at a time */
        alone[i] = requests[i];
        alone[i].port = hs_port(s);
        run_job(&alone[i]);
    }
    hs_stop(s);
    for (int i = 0; i < BATCH; i++) {
        int want[MAX_IDS], n_want = greedy_oracle(f->solo, &requests[i], want);
        if (together[i].status != 200 || !together[i].done) fail_msg("request %d: status %d, [DONE] %d", i, together[i].status, together[i].done);
        expect_ids("alone", i, alone[i].ids, alone[i].n_ids, want, n_want);
        expect_ids("batched", i, together[i].ids, together[i].n_ids, want, n_want);
    }
}

/* ---- /metrics: the exposition format, checked line by line ---- */

/* 1 when name is a valid metric name: [a-zA-Z_:][a-zA-Z0-9_:]*. */
static int valid_name(const char *p, size_t n) {
    if (!n || (p[0] >= '0' && p[0] <= '9')) return 0;
    for (size_t i = 0; i < n; i++)
        if (!(p[i] == '_' || p[i] == ':' || (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')))
            return 0;
    return 1;
}

typedef struct family {
    char name[128], type[256];
    int helped;
    double last_bucket;     /* histogram: the last cumulative count, buckets must not decrease */
    double inf;             /* histogram: the +Inf bucket, which _count must equal */
} family;

/* The family a sample belongs to: its name, less _bucket/_sum/_count for a histogram's. */
static family *family_of(family *fams, int n, const char *name, size_t len, const char **suffix) {
    static const char *const sfx[] = {"_bucket", "_sum", "_count", ""};
    for (int k = 0; k < 4; k++) {
        size_t sl = strlen(sfx[k]);
        if (len < sl || strncmp(name + len - sl, sfx[k], sl)) continue;
        for (int i = 0; i < n; i++)
            if (strlen(fams[i].name) == len - sl && !strncmp(fams[i].name, name, len - sl) && (!sl || !strcmp(fams[i].type, "histogram"))) {
                *suffix = sfx[k];
                return &fams[i];
            }
    }
    return NULL;
}

static void check_sample(family *fams, int n_fams, const char *line) {
    size_t len = strcspn(line, "{ ");
    if (!valid_name(line, len)) fail_msg("bad metric name: %s", line);
    const char *suffix = "";
    family *fm = family_of(fams, n_fams, line, len, &suffix);
    if (!fm || !fm->helped) fail_msg("a sample before its # HELP and # TYPE: %s", line);
    const char *v = strchr(line + len, ' ');
    char *end;
    double x = v ? strtod(v + 1, &end) : 0;
    if (!v || end == v + 1 || (*end && *end != '\n')) fail_msg("a sample without a number: %s", line);
    if (!strcmp(fm->type, "counter") && (len < 6 || strncmp(line + len - 6, "_total", 6) || x < 0)) fail_msg("a counter not named _total, or below 0: %s", line);
    if (!strcmp(suffix, "_bucket")) {
        if (line[len] != '{' || strncmp(line + len, "{le=\"", 5)) fail_msg("a bucket without le: %s", line);
        if (x < fm->last_bucket) fail_msg("buckets must be cumulative: %s", line);
        fm->last_bucket = x;
        if (!strncmp(line + len, "{le=\"+Inf\"}", 11)) fm->inf = x;
    } else if (line[len] == '{' && (strcmp(fm->type, "gauge") || !strstr(line, "=\"") || !strstr(line, "\"} "))) {
        fail_msg("labels other than a gauge's {name=\"value\"}: %s", line);
    }
    if (!strcmp(suffix, "_count") && x != fm->inf) fail_msg("_count %g differs from the +Inf bucket %g: %s", x, fm->inf, line);
}

/* Checks text as Prometheus' text format 0.0.4; returns the number of families. */
static int check_exposition(const char *text) {
    static family fams[64];
    int n = 0;
    memset(fams, 0, sizeof(fams));
    char *copy = strdup(text), *save = NULL;
    assert_non_null(copy);
    assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');   /* the last line ends too */
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[128], rest[256];
        if (sscanf(line, "# HELP %127s %255[^\n]", name, rest) == 2) {
            assert_true(n < 64);
            snprintf(fams[n].name, sizeof(fams[n].name), "%s", name);
            fams[n++].helped = 1;
        } else if (sscanf(line, "# TYPE %127s %255s", name, rest) == 2) {
            if (!n || strcmp(fams[n - 1].name, name)) fail_msg("# TYPE %s not right after its # HELP", name);
            if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram")) fail_msg("unknown type: %s", line);
            snprintf(fams[n - 1].type, sizeof(fams[n - 1].type), "%s", rest);
        } else if (line[0] == '#') {
            fail_msg("a comment that is neither HELP nor TYPE: %s", line);
        } else {
            check_sample(fams, n, line);
        }
    }
    free(copy);
    return n;
}

/* GET /metrics after some traffic: its content type, every line, the series the docs name. */
static void test_metrics_format(void **state) {
    fx *f = *state;
    TU_NEED(f->served);
    hs_server *s = serve(f, BATCH, NULL);
    job j = requests[1];
    j.port = hs_port(s);
    run_job(&j);
    assert_int_equal(j.status, 200);
    char *resp = read_to_close(send_req(hs_port(s), "GET", "/metrics", NULL));
    assert_int_equal(status_of(resp), 200);
    if (!strstr(resp, "Content-Type: text/plain; version=0.0.4")) fail_msg("the content type is not Prometheus text 0.0.4: %s", resp);
    const char *text = body_of(resp);
    assert_true(check_exposition(text) >= 20);
    static const char *const series[] = {"bench:requests_running", "bench:requests_waiting", "bench:kv_cache_usage_ratio",
        "bench:kv_cache_used_bytes", "bench:kv_cache_reserved_bytes", "bench:kv_cache_cached_bytes", "bench:prefix_cache_hits_total",
        "bench:num_preemptions_total", "bench:time_to_first_token_seconds_count", "bench:time_per_output_token_seconds_count"};
    for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++) metric(text, series[i]);
    assert_int_equal((int)metric(text, "bench:prompt_tokens_total"), requests[1].n_prompt);
    assert_int_equal((int)metric(text, "bench:generation_tokens_total"), requests[1].max_tokens);
    assert_int_equal((int)metric(text, "bench:time_to_first_token_seconds_count"), 1);
    assert_true(metric(text, "bench:kv_cache_reserved_bytes") > 0);
    free(resp);
    /* the 404 names it among the endpoints */
    resp = read_to_close(send_req(hs_port(s), "GET", "/nope", NULL));
    assert_int_equal(status_of(resp), 404);
    assert_non_null(strstr(resp, "/metrics"));
    free(resp);
    hs_stop(s);
}

/* promtool (Debian's prometheus package) on the same text. Its linter discourages the colon
 * that llama-server's and vLLM's names use (llamacpp:..., vllm:...), exit 3 with "should not
 * contain ':'"; any other complaint, or a parse error (exit 1), fails. */
static void test_metrics_promtool(void **state) {
    fx *f = *state;
    TU_NEED(f->served);
    char promtool[1024];
    if (!tu_on_path("promtool", promtool, sizeof(promtool))) {
        fprintf(stderr, "skip: promtool not found (Debian: apt-get install prometheus)\n");
        skip();
    }
    hs_server *s = serve(f, BATCH, NULL);
    job j = requests[0];
    j.port = hs_port(s);
    run_job(&j);
    char *text = get_body(hs_port(s), "/metrics");
    hs_stop(s);
    char in[700], out[700], cmd[2600];
    snprintf(in, sizeof(in), "%s/metrics.txt", f->tmp);
    snprintf(out, sizeof(out), "%s/promtool.txt", f->tmp);
    FILE *fp = fopen(in, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    free(text);
    snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s' > '%s' 2>&1", promtool, in, out);
    int st = system(cmd), rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    fp = fopen(out, "r");
    assert_non_null(fp);
    char line[512];
    while (fgets(line, sizeof(line), fp))
        if (!strstr(line, "should not contain ':'")) fail_msg("promtool check metrics (exit %d): %s", rc, line);
    fclose(fp);
    if (rc != 0 && rc != 3) fail_msg("promtool check metrics exited %d", rc);
}

/* One at a time, 50 ms a step ("slow"): a stream cut after its first token and a request cut
 * while it waits both cancel; the next request runs at once, not after 400 tokens. */
static void test_disconnect_frees_slot(void **state) {
    fx *f = *state;
    TU_NEED(f->served);
    hs_server *s = serve(f, 1, "slow");
    int port = hs_port(s);
    int a = send_req(port, "POST", "/v1/completions", "{\"prompt\": [1, 5], \"max_tokens\": 400, \"stream\": true, \"ignore_eos\": true}");
    char first[512];
    assert_true(recv(a, first, sizeof(first), 0) > 0);
    int c = send_req(port, "POST", "/v1/completions", "{\"prompt\": [1, 6], \"max_tokens\": 400, \"ignore_eos\": true}");
    for (int tries = 0; health(port, "waiting") != 1; tries++) {
        if (tries > 1200) fail_msg("the second request never waited");
        sleep_ms(50);
    }
    close(c);       /* hung up while waiting: no token will be written to find out; the server looks */
    for (int tries = 0; metric_now(port, "bench:request_cancelled_total") < 1; tries++) {
        if (tries > 1200) fail_msg("the waiting request hung up and was not cancelled");
        sleep_ms(50);
    }
    close(a);       /* hung up mid-stream */
    char *resp = read_to_close(send_req(port, "POST", "/v1/completions", "{\"prompt\": [1, 7], \"max_tokens\": 4, \"ignore_eos\": true}"));
    int ids[MAX_IDS], done;
    assert_int_equal(status_of(resp), 200);
    assert_int_equal(ids_of(body_of(resp), ids, &done), 4);
    free(resp);
    char *text = get_body(port, "/metrics");
    assert_int_equal((int)metric(text, "bench:request_cancelled_total"), 2);
    assert_int_equal((int)metric(text, "bench:request_success_total"), 1);
    assert_true(metric(text, "bench:generation_tokens_total") < 400);     /* the stream stopped early */
    assert_int_equal((int)metric(text, "bench:requests_running"), 0);
    free(text);
    hs_stop(s);
}

static void *stop_server(void *arg) {
    hs_stop(arg);
    return NULL;
}

/* Two streams running, three requests waiting: stopping answers the three 503, and the two
 * streams end at their next token with [DONE]. */
static void test_stop_answers_waiting(void **state) {
    fx *f = *state;
    TU_NEED(f->served);
    enum { RUNNING = 2, WAITING = 3 };
    hs_server *s = serve(f, RUNNING, "slow");
    int port = hs_port(s), run[RUNNING], wait[WAITING];
    for (int i = 0; i < RUNNING; i++) {
        run[i] = send_req(port, "POST", "/v1/completions", "{\"prompt\": [1, 9], \"max_tokens\": 400, \"stream\": true, \"ignore_eos\": true}");
        char first[256];
        assert_true(recv(run[i], first, sizeof(first), 0) > 0);
    }
    for (int i = 0; i < WAITING; i++) wait[i] = send_req(port, "POST", "/v1/completions", "{\"prompt\": [1, 9], \"max_tokens\": 4}");
    /* both counts as the engine thread publishes them after a step: polled together, since the
     * first event a stream received may be its headers, before the step that admits it */
    for (int tries = 0; health(port, "waiting") != WAITING || health(port, "running") != RUNNING; tries++) {
        if (tries > 1200)
            fail_msg("never %d running and %d waiting (last: %d running, %d waiting)", RUNNING, WAITING,
                     health(port, "running"), health(port, "waiting"));
        sleep_ms(50);
    }
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stop_server, s), 0);
    for (int i = 0; i < WAITING; i++) {
        char *resp = read_to_close(wait[i]);
        if (status_of(resp) != 503 || !strstr(resp, "stopping")) fail_msg("waiting request %d: %s", i, resp);
        free(resp);
    }
    for (int i = 0; i < RUNNING; i++) {
        char *rest = read_to_close(run[i]);     /* its headers and first event were read above */
        if (!strstr(rest, "\"finish_reason\":\"length\"") || !strstr(rest, "data: [DONE]\n\n"))
            fail_msg("stream %d did not end with its finish and [DONE]: %s", i, rest);
        free(rest);
    }
    pthread_join(th, NULL);
}

/* ---- the command's options ---- */

extern char **environ;

/* bench serve with extra args (NULL-terminated), on a free port; its pid, *port set. */
static pid_t spawn_serve(fx *f, const char *const *extra, int *port) {
    char pf[700];
    snprintf(pf, sizeof(pf), "%s/serve.port", f->tmp);
    unlink(pf);
    const char *argv[24] = {getenv("BENCH_BIN"), "serve", "--model", f->model, "--tokenizer", f->tok, "--port", "0", "--port-file", pf};
    int n = 10;
    while (*extra && n < 23) argv[n++] = *extra++;
    assert_non_null(argv[0]);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, environ), 0);
    *port = 0;
    for (int tries = 0; !*port; tries++) {      /* the port file appears whole (renamed) once it listens */
        FILE *fp = fopen(pf, "r");
        if (fp && fscanf(fp, "%d", port) != 1) *port = 0;
        if (fp) fclose(fp);
        if (tries > 2400 || waitpid(pid, NULL, WNOHANG) == pid) fail_msg("bench serve did not start listening");
        if (!*port) sleep_ms(50);
    }
    return pid;
}

static int stop_serve(pid_t pid) {
    int st = -1;
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The KV pool of kv block under --kv-budget in positions and in bytes; its blocks counted. */
static double pool_bytes(fx *f, const char *budget) {
    /* f32 named: the positions are counted against the fixture engine's (f32) bytes a position */
    const char *extra[] = {"--kv", "block", "--kv-budget", budget, "--cache-type", "f32", "--max-batch", "2", "--threads", "1", NULL};
    int port;
    pid_t pid = spawn_serve(f, extra, &port);
    char *text = get_body(port, "/metrics");
    double reserved = metric(text, "bench:kv_cache_reserved_bytes");
    check_exposition(text);
    double total = metric(text, "bench:kv_cache_blocks{state=\"total\"}");
    assert_true(total > 0 && metric(text, "bench:kv_cache_blocks{state=\"free\"}") == total);
    free(text);
    assert_int_equal(stop_serve(pid), 0);
    return reserved;
}

static void test_serve_options(void **state) {
    fx *f = *state;
    TU_NEED(f->served);
    char log[700], *text;
    snprintf(log, sizeof(log), "%s/options.txt", f->tmp);
    static const struct { const char *args, *needle; } bad[] = {
        {"--kv-budget 12q", "--kv-budget 12q: expected positions"},
        {"--kv-budget -5", "--kv-budget -5: expected positions"},
        {"--max-batch 0", "--max-batch 0: expected a whole number from 1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(tu_bench(NULL, "serve --model '%s' %s 2>'%s'", f->model, bad[i].args, log), 2);
        FILE *fp = fopen(log, "r");
        assert_non_null(fp);
        text = calloc(1, 4096);
        assert_non_null(text);
        fread(text, 1, 4095, fp);
        fclose(fp);
        if (!strstr(text, bad[i].needle)) fail_msg("%s: want \"%s\", got: %s", bad[i].args, bad[i].needle, text);
        free(text);
    }
    double per_position = (double)engine_kv_token_bytes(f->served);
    assert_true(pool_bytes(f, "1024") == 1024 * per_position);
    double mib = pool_bytes(f, "1MiB");
    assert_true(mib > 0 && mib <= 1048576);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_ids_equal_alone),
        cmocka_unit_test(test_metrics_format),
        cmocka_unit_test(test_metrics_promtool),
        cmocka_unit_test(test_disconnect_frees_slot),
        cmocka_unit_test(test_stop_answers_waiting),
        cmocka_unit_test(test_serve_options),
    };
    return cmocka_run_group_tests_name("serve_batch", tests, setup, teardown);
}
