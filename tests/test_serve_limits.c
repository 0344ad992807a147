/* bench serve against hostile, slow and unlucky clients (harness/net/server.h):
 *   - a text prompt far longer than the context is refused (400) without being encoded:
 *     the server's memory does not grow with the merges' ~70 bytes a byte of text;
 *     tokenizer_max_text_bytes never refuses a text that fits;
 *   - connections that trickle their headers or body are shut at their deadline, and
 *     /health answers again; connections from one address are capped;
 *   - on SIGTERM the requests waiting for the engine get 503 with a JSON error, the
 *     stream in flight ends with [DONE];
 *   - a model truncated while served with --loader mmap fails the request (500, naming
 *     the file) and the server exits MG_EXIT_CHANGED, saying so in its log.
 * Clients are raw sockets on loopback; every wait is bounded. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engines/core/runtime/engine.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "harness/child/mapguard.h"
#include "harness/net/server.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char model[512], tok[512], tmp[512];
    engine *e;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    *state = f;
    signal(SIGPIPE, SIG_IGN);
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)))
        return 0;
    tu_tmpdir(f->tmp, sizeof(f->tmp));
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
    if (f) {
        engine_destroy(f->e);
        if (f->tmp[0]) tu_rmtree(f->tmp);
    }
    free(f);
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ======================================================================
 * A loopback client on raw sockets
 * ====================================================================== */

/* A connection to 127.0.0.1:port from src (NULL: any loopback address); -1 when refused. */
static int tcp_connect(int port, const char *src) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct timeval tv = {.tv_sec = 60};     /* no read hangs the suite */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (src) {
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
            close(fd);
            return -1;
        }
    }
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Sends one request (Connection: close) without waiting for the answer; the socket, or -1. */
static int http_send(int port, const char *method, const char *path, const char *body) {
    int fd = tcp_connect(port, NULL);
    if (fd < 0) return -1;
    size_t bl = body ? strlen(body) : 0;
    char head[512];
    int hl = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", method, path, bl);
    if (send_all(fd, head, (size_t)hl) || (bl && send_all(fd, body, bl))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Everything until the server closes fd (which is closed here); free it. */
static char *read_all(int fd) {
    size_t n = 0, cap = 4096;
    char *b = malloc(cap);
    assert_non_null(b);
    ssize_t r;
    while ((r = recv(fd, b + n, cap - n - 1, 0)) > 0) {
        n += (size_t)r;
        if (cap - n < 2048) {
            char *q = realloc(b, cap *= 2);
            assert_non_null(q);
            b = q;
        }
    }
    b[n] = 0;
    close(fd);
    return b;
}

/* Reads the answer to its end (the server closes); the status, or 0 when none came. *body
 * (when asked; free it) gets what follows the headers. */
static int http_read(int fd, char **body) {
    char *b = read_all(fd);
    int status = 0;
    if (sscanf(b, "HTTP/1.%*d %d", &status) != 1) status = 0;
    const char *s = strstr(b, "\r\n\r\n");
    if (body) {
        *body = strdup(s ? s + 4 : "");
        assert_non_null(*body);
    }
    free(b);
    return status;
}

static int http_do(int port, const char *method, const char *path, const char *body, char **resp) {
    int fd = http_send(port, method, path, body);
    if (fd < 0) {
        if (resp) *resp = NULL;
        return 0;
    }
    return http_read(fd, resp);
}

/* 1 when the server closed fd (end of stream or reset), 0 when it is still open after ms. */
static int closed_by_server(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) return 0;
    char c[256];
    ssize_t r = recv(fd, c, sizeof(c), MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* The error object of an OpenAI-style error body, checked for its shape. */
static void expect_error(const char *body, int code, const char *needle) {
    cJSON *j = cJSON_Parse(body ? body : "");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message"), *t = cJSON_GetObjectItemCaseSensitive(e, "type"),
                *c = cJSON_GetObjectItemCaseSensitive(e, "code");
    if (!cJSON_IsString(m) || !cJSON_IsString(t) || !cJSON_IsNumber(c) || c->valueint != code || !strstr(m->valuestring, needle))
        fail_msg("expected {\"error\": {\"message\" with \"%s\", \"type\", \"code\": %d}}, got: %s", needle, code, body ? body : "(none)");
    cJSON_Delete(j);
}

static hs_server *start(fx *f, hs_opts o) {
    hs_server *s = NULL;
    char err[256];
    if (hs_start(f->e, &o, &s, err, sizeof(err))) fail_msg("hs_start: %s", err);
    return s;
}

/* ======================================================================
 * The prompt's bound
 * ====================================================================== */

static long vm_hwm_kib(void) {
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (fp && fgets(line, sizeof(line), fp))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (fp) fclose(fp);
    return kib;
}

/* The 6.8 MB prompt: before, encoding it whole took seconds and ~0.5 GB of merge
 * state to answer 400; now it is refused on its length. The server runs in this process,
 * so its peak RSS is this process's. */
static void test_huge_prompt_refused_unencoded(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    const char *unit = "The little dog ran to the park and saw a big red ball. ";
    size_t ul = strlen(unit), reps = 6800000 / ul, pre = strlen("{\"prompt\": \"");
    char *body = malloc(pre + reps * ul + 64);
    assert_non_null(body);
    memcpy(body, "{\"prompt\": \"", pre);
    for (size_t i = 0; i < reps; i++) memcpy(body + pre + i * ul, unit, ul);
    snprintf(body + pre + reps * ul, 64, "\", \"max_tokens\": 16}");
    hs_server *s = start(f, (hs_opts){.port = 0});
    long before = vm_hwm_kib();
    char *resp = NULL;
    int st = http_do(hs_port(s), "POST", "/v1/completions", body, &resp);
    long grew_mib = (vm_hwm_kib() - before) / 1024;
    if (st != 400) fail_msg("status %d, want 400: %s", st, resp ? resp : "");
    expect_error(resp, 400, "exceed the context");
    free(resp);
    /* the body (8 MiB at most, grown by doubling) and its parsed copy; not the merges' state */
    if (grew_mib > 128) fail_msg("the server's peak RSS grew by %ld MiB for one refused prompt", grew_mib);
    /* the server still serves */
    assert_int_equal(http_do(hs_port(s), "POST", "/v1/completions", "{\"prompt\": \"The little dog\", \"max_tokens\": 4}", &resp), 200);
    free(resp);
    hs_stop(s);
    free(body);
}

/* The bound is an upper bound: every text that encodes to n ids is no longer than
 * tokenizer_max_text_bytes(n), and tokenizer_encode's early check refuses none that fits. */
static void test_text_bound_never_refuses_a_fit(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    const tokenizer *t = engine_tokenizer(f->e);
    char spaces[600], marks[900], mixed[1200];
    memset(spaces, ' ', sizeof(spaces) - 1);
    spaces[sizeof(spaces) - 1] = 0;
    marks[0] = 0;
    for (int i = 0; i < 290; i++) strcat(marks, "\xe2\x96\x81");     /* U+2581: 3 bytes that become one space */
    unsigned x = 12345;
    for (size_t i = 0; i + 1 < sizeof(mixed); i++) {       /* printable, spaces and stray high bytes */
        x = x * 1103515245u + 12345u;
        unsigned c = (x >> 16) % 100;
        mixed[i] = (char)(c < 70 ? 'a' + c % 26 : c < 85 ? ' ' : 0x80 + c);
    }
    mixed[sizeof(mixed) - 1] = 0;
    const char *texts[] = {"The little dog", "a", spaces, marks, mixed, "h\xc3\xa9llo w\xc3\xb6rld \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82"};
    static int ids[4096];
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        char err[256];
        int n = tokenizer_encode(t, texts[i], 0, 0, ids, 4096, err, sizeof(err));
        if (n < 1) fail_msg("text %zu: %s", i, err);
        if (strlen(texts[i]) > tokenizer_max_text_bytes(t, n))
            fail_msg("text %zu: %zu bytes encode to %d ids, but the bound for %d ids is %zu bytes", i, strlen(texts[i]), n, n,
                     tokenizer_max_text_bytes(t, n));
        assert_int_equal(tokenizer_encode(t, texts[i], 0, 0, ids, n, err, sizeof(err)), n);
        assert_int_equal(tokenizer_encode(t, texts[i], 0, 0, ids, n - 1, err, sizeof(err)), -TOK_ERR_TOO_MANY);
        assert_non_null(strstr(err, "needs more than"));
    }
    assert_int_equal(tokenizer_max_text_bytes(t, 0), 0);
}

/* ======================================================================
 * Slow clients
 * ====================================================================== */

#define TRICKLERS 16

/* Connections that send their headers one byte at a time, forever: before, MHD's idle
 * timer restarted at every byte, they held every slot, and /health was refused. */
static void test_trickled_headers_are_cut(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f, (hs_opts){.port = 0, .header_timeout_s = 1, .max_connections = TRICKLERS, .max_per_ip = 64});
    int port = hs_port(s), fd[TRICKLERS], open_now = 0;
    for (int i = 0; i < TRICKLERS; i++) {
        fd[i] = tcp_connect(port, NULL);
        assert_true(fd[i] >= 0);
        assert_int_equal(send_all(fd[i], "GET /health HTTP/1.1\r\n", 22), 0);
    }
    /* trickle a header byte on every connection each 100 ms; ask /health now and then */
    int health = 0, cut = 0;
    double end = now_s() + 60;
    for (int round = 0; now_s() < end && (!health || cut < TRICKLERS); round++) {
        cut = 0;
        for (int i = 0; i < TRICKLERS; i++)
            if (send(fd[i], "X", 1, MSG_NOSIGNAL) != 1 || closed_by_server(fd[i], 0)) cut++;
        if (round % 5 == 4 && !health) {
            char *resp = NULL;
            health = http_do(port, "GET", "/health", NULL, &resp) == 200;
            free(resp);
        }
        nap_ms(100);
    }
    for (int i = 0; i < TRICKLERS; i++) open_now += !closed_by_server(fd[i], 0), close(fd[i]);
    hs_stop(s);
    if (!health || cut < TRICKLERS)
        fail_msg("after 60 s of trickling: /health %s, %d of %d trickling connections shut (%d still open)",
                 health ? "answered" : "never answered", cut, TRICKLERS, open_now);
}

/* A body that trickles is shut at the body deadline, though every byte restarts MHD's idle timer. */
static void test_trickled_body_is_cut(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    hs_server *s = start(f, (hs_opts){.port = 0, .header_timeout_s = 30, .body_timeout_s = 1});
    int fd = tcp_connect(hs_port(s), NULL);
    assert_true(fd >= 0);
    const char *head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"prompt\": \"";
    assert_int_equal(send_all(fd, head, strlen(head)), 0);
    int cut = 0, sent = 0;
    for (double end = now_s() + 60; !cut && now_s() < end; sent++) {
        cut = send(fd, "a", 1, MSG_NOSIGNAL) != 1 || closed_by_server(fd, 100);
    }
    close(fd);
    hs_stop(s);
    if (!cut) fail_msg("a body trickled for 60 s (%d bytes) was not shut", sent);
}

/* One address holds at most max_per_ip connections; others still get in. */
static void test_per_address_cap(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    enum { CAP = 4, TRIES = 12 };
    hs_server *s = start(f, (hs_opts){.port = 0, .header_timeout_s = 60, .max_per_ip = CAP});
    int port = hs_port(s), fd[TRIES];
    for (int i = 0; i < TRIES; i++) {
        fd[i] = tcp_connect(port, "127.0.0.2");
        if (fd[i] < 0) {
            for (int k = 0; k < i; k++) close(fd[k]);
            hs_stop(s);
            fprintf(stderr, "skip: cannot connect from 127.0.0.2 (no loopback alias here)\n");
            skip();
        }
    }
    /* the refused ones are closed as MHD accepts them; wait (bounded) until it has */
    int closed = 0;
    for (double end = now_s() + 30; closed < TRIES - CAP && now_s() < end; nap_ms(100)) {
        closed = 0;
        for (int i = 0; i < TRIES; i++) closed += closed_by_server(fd[i], 0);
    }
    nap_ms(300);        /* any wrongly closed would show by now */
    closed = 0;
    for (int i = 0; i < TRIES; i++) closed += closed_by_server(fd[i], 0);
    char *resp = NULL;
    int st = http_do(port, "GET", "/health", NULL, &resp);      /* from 127.0.0.1: its own count */
    for (int i = 0; i < TRIES; i++) close(fd[i]);
    hs_stop(s);
    assert_int_equal(closed, TRIES - CAP);
    assert_int_equal(st, 200);
    free(resp);
}

/* ======================================================================
 * bench serve, the command: SIGTERM and the model truncated
 * ====================================================================== */

typedef struct srv {
    pid_t pid;
    int port;
    char log[700];
} srv;

/* Starts $BENCH_BIN serve with args (a NULL-terminated list after "serve"); waits for its port. */
static void srv_start(fx *f, srv *v, const char *name, const char *const *args) {
    char pf[700];
    snprintf(pf, sizeof(pf), "%s/%s.port", f->tmp, name);
    snprintf(v->log, sizeof(v->log), "%s/%s.log", f->tmp, name);
    unlink(pf);
    const char *argv[32] = {getenv("BENCH_BIN"), "serve", "--port", "0", "--port-file", pf, "--threads", "1"};
    int n = 8;
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    assert_non_null(argv[0]);
    v->pid = fork();
    assert_true(v->pid >= 0);
    if (v->pid == 0) {
        int lfd = open(v->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (lfd >= 0) dup2(lfd, 2);
        setenv("BENCH_TEST_HOOKS", "1", 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    v->port = 0;
    for (double end = now_s() + 120; !v->port && now_s() < end; nap_ms(100)) {
        FILE *fp = fopen(pf, "r");
        if (fp && fscanf(fp, "%d", &v->port) != 1) v->port = 0;
        if (fp) fclose(fp);
        if (waitpid(v->pid, NULL, WNOHANG) == v->pid) fail_msg("bench serve %s exited before listening (see %s)", name, v->log);
    }
    if (!v->port) {
        kill(v->pid, SIGKILL);
        waitpid(v->pid, NULL, 0);
        fail_msg("bench serve %s did not listen within 120 s", name);
    }
}

/* Its exit status (waits at most 60 s, then kills it and fails). */
static int srv_wait(srv *v) {
    int st = 0;
    for (double end = now_s() + 60; now_s() < end; nap_ms(50))
        if (waitpid(v->pid, &st, WNOHANG) == v->pid) return st;
    kill(v->pid, SIGKILL);
    waitpid(v->pid, &st, 0);
    fail_msg("bench serve did not exit within 60 s");
    return st;
}

static char *slurp(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *b = calloc(1, 1 << 16);
    if (b) fread(b, 1, (1 << 16) - 1, fp);
    fclose(fp);
    return b;
}

/* The number /health reports as key ("waiting", "running"), or -1. */
static int health_count(int port, const char *key) {
    char *resp = NULL;
    int v = -1;
    if (http_do(port, "GET", "/health", NULL, &resp) == 200) {
        cJSON *j = cJSON_Parse(resp);
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, key);
        if (cJSON_IsNumber(n)) v = n->valueint;
        cJSON_Delete(j);
    }
    free(resp);
    return v;
}

/* SIGTERM with one stream running and three requests waiting their turn: before, the
 * waiting ones were closed with no answer. */
static void test_sigterm_answers_waiting(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    enum { WAITING = 3 };
    srv v;
    const char *args[] = {"--model", f->model, "--tokenizer", f->tok, "--fault", "slow", NULL};
    srv_start(f, &v, "sigterm", args);
    /* the stream (HTTP/1.0: not chunked) holds the engine, 50 ms a token (--fault slow) */
    int a = tcp_connect(v.port, NULL);
    assert_true(a >= 0);
    const char *sbody = "{\"prompt\": \"The little dog\", \"max_tokens\": 400, \"stream\": true, \"ignore_eos\": true}";
    char req[512];
    int rl = snprintf(req, sizeof(req), "POST /v1/completions HTTP/1.0\r\nContent-Length: %zu\r\n\r\n%s", strlen(sbody), sbody);
    assert_int_equal(send_all(a, req, (size_t)rl), 0);
    char first[256];
    assert_true(recv(a, first, sizeof(first), 0) > 0);
    int fd[WAITING];
    for (int i = 0; i < WAITING; i++) {
        fd[i] = http_send(v.port, "POST", "/v1/completions", "{\"prompt\": \"The\", \"max_tokens\": 4}");
        assert_true(fd[i] >= 0);
    }
    int waiting = -1;
    for (double end = now_s() + 60; waiting != WAITING && now_s() < end; nap_ms(50)) waiting = health_count(v.port, "waiting");
    assert_int_equal(waiting, WAITING);
    assert_int_equal(kill(v.pid, SIGTERM), 0);
    for (int i = 0; i < WAITING; i++) {
        char *resp = NULL;
        int st = http_read(fd[i], &resp);
        if (st != 503) fail_msg("waiting request %d: status %d, want 503: %s", i, st, resp ? resp : "(nothing)");
        expect_error(resp, 503, "stopping");
        free(resp);
    }
    char *stream = read_all(a);
    int rc = srv_wait(&v);
    if (!strstr(stream, "data: [DONE]")) fail_msg("the stream in flight did not end with [DONE]: ...%s", stream + (strlen(stream) > 300 ? strlen(stream) - 300 : 0));
    free(stream);
    assert_true(WIFEXITED(rc));
    assert_int_equal(WEXITSTATUS(rc), 0);
}

/* A copy of the model truncated while served from its mapping: before, SIGBUS killed the
 * server (exit 135, nothing in its log, no answer). */
static void test_truncated_model_fails_request(void **state) {
    fx *f = *state;
    TU_NEED(f->e);
    char copy[700], cmd[2000];
    snprintf(copy, sizeof(copy), "%s/model-copy.bin", f->tmp);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", f->model, copy);
    assert_int_equal(system(cmd), 0);
    srv v;
    const char *args[] = {"--model", copy, "--tokenizer", f->tok, "--loader", "mmap", NULL};
    srv_start(f, &v, "sigbus", args);
    assert_int_equal(health_count(v.port, "running"), 0);
    assert_int_equal(truncate(copy, 4096), 0);
    char *resp = NULL;
    int st = http_do(v.port, "POST", "/v1/completions", "{\"prompt\": \"The little dog\", \"max_tokens\": 4}", &resp);
    if (st != 500) fail_msg("status %d, want 500: %s", st, resp ? resp : "(nothing)");
    expect_error(resp, 500, "changed under the mapping");
    assert_non_null(strstr(resp, copy));
    free(resp);
    int rc = srv_wait(&v);
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != MG_EXIT_CHANGED)
        fail_msg("bench serve ended with %s %d, want exit %d", WIFEXITED(rc) ? "exit" : "signal",
                 WIFEXITED(rc) ? WEXITSTATUS(rc) : WTERMSIG(rc), MG_EXIT_CHANGED);
    char *log = slurp(v.log), want[800];
    assert_non_null(log);
    snprintf(want, sizeof(want), "bench serve: %s changed under the mapping", copy);
    if (!strstr(log, want)) fail_msg("the log lacks \"%s\":\n%s", want, log);
    free(log);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_prompt_refused_unencoded),
        cmocka_unit_test(test_text_bound_never_refuses_a_fit),
        cmocka_unit_test(test_trickled_headers_are_cut),
        cmocka_unit_test(test_trickled_body_is_cut),
        cmocka_unit_test(test_per_address_cap),
        cmocka_unit_test(test_sigterm_answers_waiting),
        cmocka_unit_test(test_truncated_model_fails_request),
    };
    return cmocka_run_group_tests_name("serve_limits", tests, setup, teardown);
}
