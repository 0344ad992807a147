/* The worker against an http target: see http_worker.h. */
#include "util/ut_clock.h"
#include "http_worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "engines/core/model/model.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "harness/child/scrape.h"
#include "harness/net/httpc.h"
#include "harness/scenario/stats.h"
#include "harness/scenario/target.h"
#include "harness/scenario/worker_spec.h"

static int64_t hw_now(void) { return ut_now_ns(); }

static void hw_sleep_ms(int ms) {
    struct timespec d = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&d, &d) && errno == EINTR) {}
}

typedef struct hw_ctx {
    const sv_sink *sink;
    int inference;
    int64_t t0;                 /* the requests' time zero (SERVE_START) */
    const hc_req *reqs;
    int n_failed, fail_kind[HC_ERR_COUNT];
    int first_failed;           /* the first failed request, -1: none */
    char first_msg[256];
} hw_ctx;

static void hw_send(const sv_sink *k, uint32_t type, int ack, int64_t t, int64_t a, int64_t b, const char *name) {
    bench_event ev = bench_event_make(type, ack, t ? t : hw_now(), a, b, name, NULL, 0);
    k->send(k->user, &ev);
}

static void hw_counter(const sv_sink *k, const char *name, const char *unit, int better, double v) {
    bench_event ev = bench_event_make(BENCH_EV_COUNTER, 0, hw_now(), BENCH_CTR_UNIT, better, name, unit, v);
    k->send(k->user, &ev);
}

/* ======================================================================
 * The requests: the same ids as the engine's worker
 * ====================================================================== */

typedef struct hw_work {
    sv_reqs sv;             /* serving */
    int *ids;               /* inference: (n_prompt) */
    int n_prompt;
    hc_req *reqs;           /* (n) */
    int n;
} hw_work;

static void hw_work_free(hw_work *w) {
    sv_reqs_free(&w->sv);
    free(w->ids);
    free(w->reqs);
    memset(w, 0, sizeof(*w));
}

static int hw_make_work(const ws_engine *p, hw_work *w, char *err, size_t errlen) {
    memset(w, 0, sizeof(*w));
    model *m = NULL;
    tokenizer *tok = NULL;
    char e[768];
    /* the header and vocabulary alone: no weights are read here */
    if (model_open(p->model, p->tokenizer, &m, e, sizeof(e)) || (m->vocab.n && tokenizer_create_ex(&m->vocab, 0, &tok, e, sizeof(e)))) {
        model_free(m);
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s", e);
    }
    int vocab = m->cfg.vocab_size, bos = tok ? tokenizer_bos(tok) : 1, rc = 0;
    if (p->requests) {
        if (sv_make_requests(p->requests, vocab, bos, (uint64_t)p->seed, &w->sv, e, sizeof(e))) {
            rc = bench_errc(err, errlen, BENCH_ERR_INVALID, "%s", e);
            goto out;
        }
        w->n = w->sv.n;
        w->reqs = calloc((size_t)w->n, sizeof(*w->reqs));
        if (!w->reqs) {
            rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int i = 0; i < w->n; i++)
            w->reqs[i] = (hc_req){.prompt = w->sv.r[i].prompt, .n_prompt = w->sv.r[i].n_prompt, .max_tokens = w->sv.r[i].max_new,
                                  .arrival_ns = w->sv.r[i].arrival_ns, .seed = w->sv.r[i].seed};
    } else {
        int cap = (p->prompt ? (int)strlen(p->prompt) + 8 : p->prompt_tokens) + 1;
        w->ids = malloc((size_t)cap * sizeof(int));
        w->reqs = calloc(1, sizeof(*w->reqs));
        if (!w->ids || !w->reqs) {
            rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
            goto out;
        }
        if (p->prompt) {
            if (!tok) {
                rc = bench_errc(err, errlen, BENCH_ERR_INVALID, "%s has no vocabulary: give the scenario's model a \"tokenizer\", "
                                "or use workload.prompt_tokens", p->model);
                goto out;
            }
            w->n_prompt = tokenizer_encode(tok, p->prompt, 1, 0, w->ids, cap, e, sizeof(e));
            if (w->n_prompt < 0) {
                rc = bench_errc(err, errlen, BENCH_ERR_INVALID, "prompt: %s", e);
                goto out;
            }
        } else {
            /* as the engine's worker: BOS, then ids 3, 4, 5 ... */
            w->n_prompt = p->prompt_tokens;
            w->ids[0] = bos;
            for (int i = 1; i < w->n_prompt; i++) w->ids[i] = 3 + (i - 1) % (vocab > 3 ? vocab - 3 : 1);
        }
        w->n = 1;
        w->reqs[0] = (hc_req){.prompt = w->ids, .n_prompt = w->n_prompt, .max_tokens = p->generate, .seed = (uint64_t)p->seed};
    }
out:
    tokenizer_free(tok);
    model_free(m);
    if (rc) hw_work_free(w);
    return rc;
}

/* ======================================================================
 * The server's process
 * ====================================================================== */

/* A loopback port free now (the kernel's pick), for a server bench launches. */
static int hw_free_port(char *err, size_t errlen) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || getsockname(fd, (struct sockaddr *)&sa, &len)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return bench_errf(err, errlen, "no free loopback port: %s", strerror(e));
    }
    close(fd);
    return ntohs(sa.sin_port);
}

/* Starts argv; returns once it has exec'd (or failed to): its pid, or -1 with err. */
static pid_t hw_spawn(char **argv, char *err, size_t errlen) {
    int sync[2];
    if (pipe2(sync, O_CLOEXEC)) return bench_errf(err, errlen, "pipe: %s", strerror(errno)), -1;
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        close(sync[0]);
        close(sync[1]);
        return bench_errf(err, errlen, "fork: %s", strerror(errno)), -1;
    }
    if (pid == 0) {
        /* dies with the worker, which dies with bench run; holds none of the worker's pipes */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(127);
        int s = sync[1];
        if (s != 5 && dup2(s, 5) < 0) _exit(127);
        fcntl(5, F_SETFD, FD_CLOEXEC);
        close_range(6, ~0u, 0);
        close_range(3, 4, 0);
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[0], argv);
        int e = errno;
        if (write(5, &e, sizeof(e)) != (ssize_t)sizeof(e)) {}
        _exit(127);
    }
    close(sync[1]);
    int e = 0;
    ssize_t r;
    while ((r = read(sync[0], &e, sizeof(e))) < 0 && errno == EINTR) {}
    close(sync[0]);
    if (r == (ssize_t)sizeof(e)) {
        waitpid(pid, NULL, 0);
        return bench_errf(err, errlen, "launch: cannot run %s: %s", argv[0], strerror(e)), -1;
    }
    return pid;
}

/* How a child ended, in words. */
static void hw_status_text(int st, char *buf, size_t len) {
    if (WIFSIGNALED(st)) snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else snprintf(buf, len, "exit code %d", WEXITSTATUS(st));
}

/* 1 when the server has exited (its status in why), 0 while it runs. */
static int hw_exited(pid_t pid, char *why, size_t len) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r != pid) return 0;
    hw_status_text(st, why, len);
    return 1;
}

/* SIGTERM, then SIGKILL after stop_s. */
static void hw_stop(pid_t pid, double stop_s) {
    char why[128];
    if (pid <= 0 || hw_exited(pid, why, sizeof(why))) return;
    kill(pid, SIGTERM);
    int64_t deadline = hw_now() + (int64_t)(stop_s * 1e9);
    while (hw_now() < deadline) {
        if (hw_exited(pid, why, sizeof(why))) return;
        hw_sleep_ms(10);
    }
    fprintf(stderr, "bench worker: the server (pid %d) did not stop within %g s of SIGTERM: SIGKILL\n", (int)pid, stop_s);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Polls url until it answers 200. Returns 0, or -1 with err. */
static int hw_wait_ready(pid_t pid, const char *url, double timeout_s, char *err, size_t errlen) {
    int64_t deadline = hw_now() + (int64_t)(timeout_s * 1e9);
    char last[400] = "no answer yet", why[128];
    for (;;) {
        if (pid > 0 && hw_exited(pid, why, sizeof(why)))
            return bench_errf(err, errlen, "the server exited before it was ready (%s): see its output in this log", why);
        long status = 0;
        char e[300];
        double left = (double)(deadline - hw_now()) * 1e-9;
        if (left <= 0) break;
        if (hc_get(url, left < 2 ? left : 2, &status, e, sizeof(e)) == 0) {
            if (status == 200) return 0;
            snprintf(last, sizeof(last), "HTTP %ld", status);
        } else {
            snprintf(last, sizeof(last), "%s", e);
        }
        if (hw_now() >= deadline) break;
        hw_sleep_ms(50);
    }
    return bench_errf(err, errlen, "the server was not ready at %s within ready_timeout_s (%g s); last: %s", url, timeout_s, last);
}

/* ======================================================================
 * The requests' results as events
 * ====================================================================== */

/* Every request's figures, ok or failed, for the per-request export (events.h REQ_END). */
static void hw_req_end(const hw_ctx *c, int i, const hc_result *r) {
    bench_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = BENCH_EV_REQ_END;
    ev.t_ns = r->end_ns ? r->end_ns : hw_now();
    ev.a = i;
    ev.b = r->err;
    ev.x[BENCH_RE_ARRIVAL_NS] = c->t0 + c->reqs[i].arrival_ns;
    ev.x[BENCH_RE_SENT_NS] = r->sent_ns;
    ev.x[BENCH_RE_FIRST_NS] = r->first_ns;
    ev.x[BENCH_RE_PROMPT] = c->reqs[i].n_prompt;
    ev.x[BENCH_RE_PROMPT_REPORTED] = r->usage_prompt;
    ev.x[BENCH_RE_OUTPUT] = r->n_tokens;
    ev.x[BENCH_RE_OUTPUT_REPORTED] = r->usage_completion;
    ev.x[BENCH_RE_HTTP_STATUS] = r->http_status;
    c->sink->send(c->sink->user, &ev);
}

static void hw_on_done(void *user, int i, const hc_result *r) {
    hw_ctx *c = user;
    const sv_sink *k = c->sink;
    /* the ids line up with the arrivals when each event carried one (bench serve, llama-server) */
    int aligned = r->n_ids == r->n_arrivals;
    for (int a = 0; a < r->n_arrivals; a++)
        hw_send(k, BENCH_EV_REQ_TOKEN, 0, r->arrival_ns[a], i, aligned ? r->ids[a] : -1, NULL);
    hw_req_end(c, i, r);
    if (r->err) {
        c->n_failed++;
        c->fail_kind[r->err]++;
        if (c->first_failed < 0) {
            c->first_failed = i;
            snprintf(c->first_msg, sizeof(c->first_msg), "%s", r->msg);
        }
        hw_send(k, BENCH_EV_REQ_FAIL, 0, r->end_ns, i, r->err, r->msg);
        return;
    }
    /* hc_verify held usage to the tokens that came (at least one), so it is the output length */
    int n_out = r->usage_completion >= 0 ? r->usage_completion : r->n_tokens;
    if (c->inference) {
        hw_send(k, BENCH_EV_PREFILL_START, 0, r->sent_ns, 0, 0, NULL);
        if (!r->first_ns) return;
        hw_send(k, BENCH_EV_PREFILL_END, 0, r->first_ns, c->reqs[i].n_prompt, r->n_ids ? r->ids[0] : -1, NULL);
        hw_send(k, BENCH_EV_DECODE_START, 0, r->first_ns, 0, 0, NULL);
        for (int t = 1; t < r->n_tokens; t++) {
            int64_t at = t < r->n_arrivals ? r->arrival_ns[t] : r->arrival_ns[r->n_arrivals - 1];
            hw_send(k, BENCH_EV_TOKEN, 0, at, t, t < r->n_ids ? r->ids[t] : -1, NULL);
        }
        hw_send(k, BENCH_EV_DECODE_END, 0, r->end_ns, 0, 0, NULL);
        return;
    }
    bench_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = BENCH_EV_REQUEST;
    ev.t_ns = r->end_ns;
    ev.a = i;
    ev.b = n_out;
    ev.x[BENCH_RQ_ARRIVAL_NS] = c->t0 + c->reqs[i].arrival_ns;
    ev.x[BENCH_RQ_ADMIT_NS] = r->sent_ns;
    ev.x[BENCH_RQ_FIRST_NS] = r->first_ns;      /* a request without a token failed (no_tokens) */
    ev.x[BENCH_RQ_PROMPT] = c->reqs[i].n_prompt;
    ev.x[BENCH_RQ_PREFILLED] = c->reqs[i].n_prompt;
    k->send(k->user, &ev);
}

/* Token gaps of every request, for the ITL counters. */
static void hw_itl_counters(const sv_sink *k, const hc_result *res, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += res[i].n_arrivals > 1 ? (size_t)res[i].n_arrivals - 1 : 0;
    if (!total) return;
    double *g = malloc(total * sizeof(*g));
    if (!g) return;
    size_t at = 0;
    for (int i = 0; i < n; i++)
        for (int a = 1; a < res[i].n_arrivals; a++) g[at++] = (double)(res[i].arrival_ns[a] - res[i].arrival_ns[a - 1]) * 1e-6;
    st_sort(g, (int)at);
    hw_counter(k, "http.itl_p50_ms", "ms", BENCH_BETTER_LOWER, st_quantile_sorted(g, (int)at, 0.5));
    hw_counter(k, "http.itl_p99_ms", "ms", BENCH_BETTER_LOWER, st_quantile_sorted(g, (int)at, 0.99));
    hw_counter(k, "http.itl_max_ms", "ms", BENCH_BETTER_LOWER, g[at - 1]);
    free(g);
}

/* ======================================================================
 * The slots (wtarget.h)
 * ====================================================================== */

typedef struct hw_state {
    const wt_env *env;
    sv_sink sink;
    const tg_http *h;       /* the spec's settings */
    hw_work w;
    hc_result *res;
    char *url, *health, **argv;
    int nargv;
    pid_t pid;              /* a launched server; 0: none (not launched, or stopped and reaped) */
    char port[16];          /* a launched server's port; "": none */
    scr_scraper *scr;       /* the target's "metrics" block read while it serves (scrape.h); NULL: none */
    hw_ctx c;
} hw_state;

/* The worker's messages name the target they came from. */
static int hw_fail(int rc, char *err, size_t errlen) {
    if (rc >= 0) return rc;
    char m[1024];
    snprintf(m, sizeof(m), "%s", err);
    snprintf(err, errlen, "http: %s", m);
    return rc;
}

/* The url with its placeholders filled, the health url, the launch argv. */
static int hw_expand(hw_state *t, char *err, size_t errlen) {
    const ws_engine *p = t->env->spec;
    char *port = t->port;
    if (t->h->launch) {
        int pt = hw_free_port(err, errlen);
        if (pt < 0) return -BENCH_ERR_FAIL;
        snprintf(t->port, sizeof(t->port), "%d", pt);
    }
    char exe[PATH_MAX];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[el > 0 ? el : 0] = 0;
    const char *keys[] = {"port", "bench", "model", "tokenizer"}, *vals[] = {port, exe, p->model, p->tokenizer ? p->tokenizer : ""};
    t->url = tg_expand(t->h->url, keys, vals, 1);
    size_t hl = t->url ? strlen(t->url) + strlen(t->h->health) + 1 : 0;
    t->health = t->url ? malloc(hl) : NULL;
    if (!t->url || !t->health) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    /* base URL + health path, without a doubled slash */
    size_t ul = strlen(t->url);
    while (ul && t->url[ul - 1] == '/') ul--;
    snprintf(t->health, hl, "%.*s%s", (int)ul, t->url, t->h->health);
    if (!t->h->launch) return 0;
    int n = 0;
    while (t->h->launch[n]) n++;
    t->argv = calloc((size_t)n + 1, sizeof(char *));
    if (!t->argv) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    for (; t->nargv < n; t->nargv++)
        if (!(t->argv[t->nargv] = tg_expand(t->h->launch[t->nargv], keys, vals, 4)))
            return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    fprintf(stderr, "bench worker: launching the server:");
    for (int i = 0; i < n; i++) fprintf(stderr, " %s", t->argv[i]);
    fputc('\n', stderr);
    return 0;
}

/* The server started (launched) or found (pid), and ready: TARGET, HELLO [ack], LOAD_START,
 * LOAD_END [ack] when /health answers. */
static int hw_prepare_in(hw_state *t, char *err, size_t errlen) {
    const ws_engine *p = t->env->spec;
    const sv_sink *k = &t->sink;
    int rc;
    if ((rc = wt_same_model_files(p, err, errlen))) return rc;
    if (!(t->h = p->target_http)) return bench_errf(err, errlen, "worker spec: an http target without its settings (target_http)");
    if (hw_make_work(p, &t->w, err, errlen)) return -BENCH_ERR_INVALID;
    if ((rc = hw_expand(t, err, errlen))) return rc;
    int64_t t_spawn = hw_now();
    if (t->argv && (t->pid = hw_spawn(t->argv, err, errlen)) < 0) {
        t->pid = 0;
        return -BENCH_ERR_FAIL;
    }
    hw_send(k, BENCH_EV_TARGET, 0, 0, t->pid ? t->pid : t->h->pid,
            t->pid ? BENCH_TGT_LAUNCHED : t->h->pid ? BENCH_TGT_PID : BENCH_TGT_LATENCY, t->h->memory_tree ? "tree" : NULL);
    if (t->h->pid && kill(t->h->pid, 0) && errno == ESRCH) return bench_errf(err, errlen, "target.http.pid %d: no such process", t->h->pid);
    hw_send(k, BENCH_EV_HELLO, 1, t_spawn, getpid(), 0, NULL);
    hw_send(k, BENCH_EV_LOAD_START, 0, t_spawn, 0, 0, NULL);
    double ready_s = t->h->launch ? t->h->ready_timeout_s : (t->h->ready_timeout_s < 10 ? t->h->ready_timeout_s : 10);
    if (hw_wait_ready(t->pid, t->health, ready_s, err, errlen)) return -BENCH_ERR_FAIL;
    hw_send(k, BENCH_EV_LOAD_END, 1, 0, 0, 0, NULL);
    if (scr_start(&t->h->metrics, t->url, t->port, k, &t->scr, err, errlen)) return -BENCH_ERR_INVALID;
    return 0;
}

static int hw_prepare(const wt_env *env, void **state, char *err, size_t errlen) {
    hw_state *t = calloc(1, sizeof(*t));
    if (!t) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "http: out of memory");
    *state = t;
    t->env = env;
    t->sink = wt_sink(env);
    return hw_fail(hw_prepare_in(t, err, errlen), err, errlen);
}

/* Every request, each one's events as it ends (hw_on_done). */
static int hw_run(void *state, int64_t *produced, char *err, size_t errlen) {
    hw_state *t = state;
    const ws_engine *p = t->env->spec;
    const sv_sink *k = &t->sink;
    t->res = calloc((size_t)t->w.n, sizeof(*t->res));
    if (!t->res) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "http: out of memory");
    t->c = (hw_ctx){.sink = k, .inference = !p->requests, .reqs = t->w.reqs, .first_failed = -1};
    const tg_http *h = t->h;
    int conc = h->concurrency ? h->concurrency : p->requests && p->requests->max_batch > 0 ? p->requests->max_batch : 0;
    hc_opts o = {.url = t->url, .model = h->model, .timeout_s = h->request_timeout_s, .concurrency = conc,
                 .temperature = p->temperature, .topp = p->topp,
                 .ignore_eos = p->requests ? h->ignore_eos && !p->requests->stop_at_eos : h->ignore_eos,
                 .on_done = hw_on_done, .user = &t->c};
    t->c.t0 = hw_now();
    if (p->requests) hw_send(k, BENCH_EV_SERVE_START, 0, t->c.t0, t->w.n, 0, NULL);
    if (hc_run(&o, t->w.reqs, t->w.n, t->res, err, errlen)) return hw_fail(-BENCH_ERR_FAIL, err, errlen);
    scr_stop(t->scr);   /* its last read is the load's end */
    t->scr = NULL;
    if (p->requests) hw_send(k, BENCH_EV_SERVE_END, 0, 0, 0, 0, NULL);
    *produced = t->res[0].n_tokens;
    return 0;
}

/* The counters, then the verdict: a server that died, or any failed request, fails the run. */
static int hw_collect(void *state, char *err, size_t errlen) {
    hw_state *t = state;
    const sv_sink *k = &t->sink;
    hw_ctx *c = &t->c;
    hw_itl_counters(k, t->res, t->w.n);
    hw_counter(k, "http.requests_failed", "count", BENCH_BETTER_LOWER, c->n_failed);
    for (int e = 1; e < HC_ERR_COUNT; e++) {
        char name[64];
        snprintf(name, sizeof(name), "http.failed_%s", hc_err_name(e));
        if (c->fail_kind[e]) hw_counter(k, name, "count", BENCH_BETTER_LOWER, c->fail_kind[e]);
    }
    char why[128];
    /* a request that failed may be the first sign of a server that died: its exit, a moment
     * after its sockets closed, is the cause to report (3 s at most) */
    int died = t->pid && hw_exited(t->pid, why, sizeof(why));
    for (int i = 0; t->pid && c->n_failed && !died && i < 300; i++) {
        hw_sleep_ms(10);
        died = hw_exited(t->pid, why, sizeof(why));
    }
    if (died) {
        t->pid = 0;
        return bench_errf(err, errlen, "http: the server exited during the run (%s)%s%s", why,
                          c->n_failed ? "; first failed request: " : "", c->n_failed ? c->first_msg : "");
    }
    if (!c->n_failed) return 0;
    char kinds[256] = "";
    for (int e = 1; e < HC_ERR_COUNT; e++)
        if (c->fail_kind[e])
            snprintf(kinds + strlen(kinds), sizeof(kinds) - strlen(kinds), "%s%d %s", kinds[0] ? ", " : "", c->fail_kind[e],
                     hc_err_name(e));
    return bench_errf(err, errlen, "http: %d of %d requests failed (%s); request %d: %s", c->n_failed, t->w.n, kinds,
                      c->first_failed, c->first_msg);
}

static void hw_close(void *state) {
    hw_state *t = state;
    if (!t) return;
    scr_stop(t->scr);
    if (t->pid) hw_stop(t->pid, t->h->stop_timeout_s);
    for (int i = 0; t->argv && i < t->nargv; i++) free(t->argv[i]);
    free(t->argv);
    if (t->res) hc_results_free(t->res, t->w.n);
    free(t->res);
    free(t->url);
    free(t->health);
    hw_work_free(&t->w);
    free(t);
}

const wt_target_i wt_http = {
    .name = "http",
    .in_process = 0,
    .prepare = hw_prepare,
    .run = hw_run,
    .collect = hw_collect,
    .after_done = NULL,     /* no work after the end snapshot */
    .close = hw_close,
};
