/* bench worker: one repetition of one variant, in a process of its own.
 *
 * `bench run` forks and execs it with a spec file and two pipes (events.h):
 *     bench worker --spec specs/v0.json --events 3 --ack 4
 * Run by hand, without --events, it prints its phases on stderr: the way to
 * look at one variant under perf or valgrind:
 *     perf stat -e page-faults bench worker --spec results/<...>/specs/v0.json
 */
#include <cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "harness/child/engine_target.h"
#include "harness/child/targets.h"
#include "harness/scenario/events.h"
#include "harness/scenario/worker_spec.h"
#include "harness/child/worker.h"
#include "util/ut_clock.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define WK_HAVE_CALLGRIND 1
#endif
#endif
#ifndef WK_HAVE_CALLGRIND
#define WK_HAVE_CALLGRIND 0
#endif

/* the spec, as worker_spec.h types it (one table of its fields for the writer and this reader) */
typedef ws_engine wk_spec;

typedef struct wk_ctx {
    int ev_fd, ack_fd;
    int64_t t0;             /* HELLO, for the human-readable mode */
    int loop, callgrind;    /* worker_opts */
    const char *accuracy_out;
} wk_ctx;

int worker_has_callgrind(void) { return WK_HAVE_CALLGRIND; }

/* Under `valgrind --tool=callgrind` each dump closes one phase's file (harness/parent/callgrind.h
 * reads them; the exit writes the last one, "end"). Outside valgrind a client request
 * costs a few instructions. */
static void wk_callgrind_mark(uint32_t type) {
#if WK_HAVE_CALLGRIND
    if (type == BENCH_EV_HELLO) CALLGRIND_DUMP_STATS_AT("start");
    else if (type == BENCH_EV_LOAD_END) CALLGRIND_DUMP_STATS_AT("load");
    else if (type == BENCH_EV_PREFILL_END) CALLGRIND_DUMP_STATS_AT("prefill");
    else if (type == BENCH_EV_DECODE_END) CALLGRIND_DUMP_STATS_AT("decode");
#else
    (void)type;
#endif
}

static const char *wk_type_name(uint32_t t) {
    static const char *n[] = {"?", "hello", "load_start", "load_end", "prefill_start", "prefill_end",
                              "decode_start", "token", "decode_end", "counter", "done", "error", "region",
                              "serve_start", "kv_sample", "request", "serve_end", "req_tokens", "target", "req_token", "req_fail",
                              "scrape", "req_end"};
    return t <= BENCH_EV_REQ_END ? n[t] : "?";
}

/* Writes one event; with BENCH_EV_ACK, waits until the parent has taken its snapshot.
 * Without the events pipe it prints the phases on stderr (not the per-token ones). */
static int wk_write(wk_ctx *c, const bench_event *ev) {
    uint32_t type = ev->type;
    if (c->callgrind) {
        wk_callgrind_mark(type);
        /* printing a time costs a time-dependent number of instructions */
        if (c->ev_fd < 0) return 0;
    }
    if (c->ev_fd < 0) {
        if (type == BENCH_EV_TOKEN || type == BENCH_EV_KV_SAMPLE || type == BENCH_EV_REQUEST || type == BENCH_EV_REQ_TOKEN ||
            type == BENCH_EV_REQ_TOKENS || type == BENCH_EV_REQ_END)
            return 0;
        fprintf(stderr, "%9.3f ms  %-13s", (double)(ev->t_ns - c->t0) * 1e-6, wk_type_name(type));
        if (type == BENCH_EV_COUNTER) fprintf(stderr, " %s = %g %s", ev->name, ev->value, ev->unit);
        if (type == BENCH_EV_PREFILL_END) fprintf(stderr, " %lld prompt tokens", (long long)ev->a);
        if (type == BENCH_EV_SERVE_START) fprintf(stderr, " %lld requests", (long long)ev->a);
        if (type == BENCH_EV_SERVE_END) fprintf(stderr, " after %lld scheduler steps", (long long)ev->a);
        if (type == BENCH_EV_ERROR) fprintf(stderr, " %s", ev->name);
        if (type == BENCH_EV_REGION) fprintf(stderr, " %s: %lld bytes at %#llx", ev->name, (long long)ev->b, (unsigned long long)ev->a);
        fputc('\n', stderr);
        return 0;
    }
    ssize_t w;
    while ((w = write(c->ev_fd, ev, sizeof(*ev))) < 0 && errno == EINTR) {}
    if (w != (ssize_t)sizeof(*ev)) return -1;
    if (ev->flags & BENCH_EV_ACK) {
        char byte;
        ssize_t r;
        while ((r = read(c->ack_fd, &byte, 1)) < 0 && errno == EINTR) {}
        if (r != 1) return -1;     /* the parent is gone */
    }
    return 0;
}

/* Sends one event stamped now; with ack, waits until the parent has taken its snapshot. */
static int wk_send(wk_ctx *c, uint32_t type, int ack, int64_t a, int64_t b, const char *name, const char *unit,
                   double value) {
    bench_event ev = bench_event_make(type, ack, ut_now_ns(), a, b, name, unit, value);
    return wk_write(c, &ev);
}

/* Reports a failure and its code (BENCH_ERR_*, or the -code an engine call returned): the
 * parent decides what the repetition's status is by the code, not the words. */
static int wk_failc(wk_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int wk_failc(wk_ctx *c, int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (code < 0) code = -code;
    if (code < BENCH_ERR_FAIL || code > BENCH_ERR_MAX) code = BENCH_ERR_FAIL;
    fprintf(stderr, "bench worker: %s\n", msg);
    if (c->ev_fd >= 0) {
        /* the event holds the message's first 223 bytes; the log above has it whole */
        bench_event ev = bench_event_make(BENCH_EV_ERROR, 0, ut_now_ns(), code, 0, NULL, NULL, 0);
        snprintf(ev.name, sizeof(ev.name), "%.*s", (int)sizeof(ev.name) - 1, msg);
        wk_write(c, &ev);
    }
    return 1;
}
#define wk_fail(c, ...) wk_failc(c, BENCH_ERR_FAIL, __VA_ARGS__)

/* ---- the spec ---- */

/* The spec (parsed once by the caller) into s, whose strings point into it. */
static int wk_read_spec(const cJSON *j, const char *path, wk_spec *s, char *err, size_t errlen) {
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "%s: not a worker spec (a JSON object written by bench run)", path);
        return -1;
    }
    char rerr[512];
    if (ws_engine_read(j, s, rerr, sizeof(rerr))) {
        snprintf(err, errlen, "%s: %s", path, rerr);
        ws_engine_free(s);
        return -1;
    }
    if (!s->model || (!s->requests && (s->generate < 1 || (!s->prompt && s->prompt_tokens < 1)))) {
        snprintf(err, errlen, "%s: the spec needs model, and requests or generate >= 1 and prompt or prompt_tokens >= 1", path);
        ws_engine_free(s);
        return -1;
    }
    return 0;
}

int worker_fail(int ev_fd, const char *msg) {
    wk_ctx c = {.ev_fd = ev_fd, .ack_fd = -1};
    return wk_fail(&c, "%s", msg);
}

static int wk_run(wk_ctx c, wk_spec s);

int worker_engine(const cJSON *spec, const char *spec_name, int ev_fd, int ack_fd, const worker_opts *o) {
    wk_ctx c = {.ev_fd = ev_fd, .ack_fd = ack_fd, .loop = o ? o->loop : 0, .callgrind = o ? o->callgrind : 0,
                .accuracy_out = o ? o->accuracy_out : NULL};
    char err[1024];
    wk_spec s;
    if (wk_read_spec(spec, spec_name, &s, err, sizeof(err))) return wk_fail(&c, "%s", err);
    if (o && o->kernels) s.kernels = o->kernels;
    int rc = wk_run(c, s);
    ws_engine_free(&s);
    return rc;
}

/* The target's events, through the pipe (or stderr, run by hand). */
static int wk_target_write(void *user, const bench_event *ev) { return wk_write(user, ev); }

/* The repetition itself, shared by bench worker and bench exec (worker_engine): the spec's
 * target (harness/child/targets.h) prepared, run and collected, DONE, then closed. s points
 * into the caller's spec JSON. */
static int wk_run(wk_ctx c, wk_spec s) {
    char err[1024];
    const wt_target_i *t = wt_find(s.target ? s.target : "engine");
    if (!t) {
        char names[256];
        wt_names(names, sizeof(names));
        return wk_failc(&c, BENCH_ERR_INVALID, "worker spec: unknown target \"%s\" (have: %s)", s.target, names);
    }
    if (c.accuracy_out) {
        /* the files bench run checked, as for a timed repetition */
        int rc = wt_same_model_files(&s, err, sizeof(err));
        if (!rc && !t->in_process) return wk_fail(&c, "the accuracy pass measures the engine in process, not an %s target", t->name);
        if (!rc && s.requests) return wk_fail(&c, "the accuracy pass measures inference workloads, not serving");
        if (!rc) rc = et_accuracy(&s, c.accuracy_out, err, sizeof(err));
        return rc ? wk_failc(&c, rc, "%s", err) : 0;
    }
    c.t0 = ut_now_ns();
    wt_env env = {.spec = &s, .write = wk_target_write, .user = &c, .loop = c.loop};
    void *state = NULL;
    int64_t produced = 0;
    int rc = t->prepare(&env, &state, err, sizeof(err));
    if (!rc) rc = t->run(state, &produced, err, sizeof(err));
    if (!rc) rc = t->collect(state, err, sizeof(err));
    if (!rc && wk_send(&c, BENCH_EV_DONE, 1, produced, 0, NULL, NULL, 0)) rc = 1;
    if (!rc && t->after_done) t->after_done(state);
    /* closed before the ERROR: a launched server is stopped before the parent hears why */
    t->close(state);
    return rc < 0 ? wk_failc(&c, rc, "%s", err) : rc;
}
