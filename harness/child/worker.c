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

#include "engines/core/runtime/engine.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/runtime/accuracy.h"
#include "engines/core/runtime/modreg.h"
#include "engines/core/runtime/sampler.h"
#include "harness/spec/confine.h"
#include "harness/spec/events.h"
#include "harness/child/serve.h"
#include "harness/child/http_worker.h"
#include "harness/spec/worker_spec.h"
#include "harness/child/worker.h"
#include "harness/child/mapguard.h"
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
                              "serve_start", "kv_sample", "request", "serve_end", "target", "req_token", "req_fail"};
    return t <= BENCH_EV_REQ_FAIL ? n[t] : "?";
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
        if (type == BENCH_EV_TOKEN || type == BENCH_EV_KV_SAMPLE || type == BENCH_EV_REQUEST || type == BENCH_EV_REQ_TOKEN) return 0;
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

/* The serving run's events (harness/child/serve.h), stamped by the scheduler. */
static void wk_serve_event(void *user, const bench_event *ev) { wk_write(user, ev); }

/* a counter's class and direction travel in a and b (events.h) */
static void wk_emit_as(void *user, const char *name, const char *unit, int cls, int better, double v) {
    wk_send(user, BENCH_EV_COUNTER, 0, cls, better, name, unit, v);
}

static void wk_emit(void *user, const char *name, const char *unit, double v) {
    wk_emit_as(user, name, unit, BENCH_CTR_UNIT, BENCH_BETTER_NONE, v);
}

static void wk_region(void *user, const void *addr, size_t len, const char *name) {
    wk_send(user, BENCH_EV_REGION, 0, (int64_t)(uintptr_t)addr, (int64_t)len, name, NULL, 0);
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
    if (c->ev_fd >= 0) wk_send(c, BENCH_EV_ERROR, 0, code, 0, msg, NULL, 0);
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

/* Test hooks: fail the way a real worker can. The default action is restored
 * first, so a sanitizer build dies by the signal as a release build does. */
static int wk_fault(const char *fault) {
    if (!fault || !strcmp(fault, "none")) return 0;
    if (!strcmp(fault, "segv")) {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    } else if (!strcmp(fault, "exit3")) {
        fprintf(stderr, "bench worker: test hook: exit 3\n");
        return 3;
    } else if (!strcmp(fault, "hang")) {
        for (;;) pause();
    } else if (!strcmp(fault, "sigkill")) {
        raise(SIGKILL);
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

/* One sequence: the prompt's prefill, then `generate - 1` decode steps. *produced gets
 * the tokens generated. Returns 0, or 1 after reporting the failure. */
/* The cache's memory after `tokens` positions of the one sequence (events.h KV_SAMPLE; the
 * fields of a serving run's step, one sequence running). Sent after prefill, then only where
 * the reserve moved and after the last step, so a dynamic cache's growth is seen without an
 * event per token. */
static void wk_kv_sample(wk_ctx *c, const engine_kv_mem *kv, int64_t step, int64_t tokens) {
    bench_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = BENCH_EV_KV_SAMPLE;
    ev.t_ns = ut_now_ns();
    ev.a = step;
    ev.b = tokens;
    ev.x[BENCH_KVS_RESERVED] = (int64_t)kv->reserved;
    ev.x[BENCH_KVS_LIVE] = (int64_t)kv->live;
    ev.x[BENCH_KVS_CACHED] = (int64_t)kv->cached;
    ev.x[BENCH_KVS_WASTED] = (int64_t)kv->wasted;
    ev.x[BENCH_KVS_RUNNING] = 1;
    ev.x[BENCH_KVS_BATCH] = 1;
    wk_write(c, &ev);
}

/* The workload's prompt ids into ids (cap entries, generate of them left for decoding): the
 * text through the model's tokenizer, or BOS and ids 3, 4, 5... Returns the count, or -1
 * reported. */
static int wk_prompt(wk_ctx *c, const wk_spec *s, const model *m, const tokenizer *tok, int *ids, int cap) {
    char err[1024];
    int n_prompt;
    if (s->prompt) {
        if (!tok) {
            wk_fail(c, "%s has no vocabulary: give the scenario's model a \"tokenizer\", or use workload.prompt_tokens", s->model);
            return -1;
        }
        n_prompt = tokenizer_encode(tok, s->prompt, 1, 0, ids, cap - s->generate, err, sizeof(err));
        if (n_prompt < 0) {
            wk_fail(c, "prompt: %s", err);
            return -1;
        }
    } else {
        /* BOS, then ids 3, 4, 5...: a deterministic prompt of the asked length for any vocabulary */
        n_prompt = s->prompt_tokens;
        ids[0] = tok ? tokenizer_bos(tok) : 1;
        for (int i = 1; i < n_prompt; i++) ids[i] = 3 + (i - 1) % (m->cfg.vocab_size > 3 ? m->cfg.vocab_size - 3 : 1);
    }
    if (n_prompt + s->generate > m->cfg.seq_len && s->ctx <= 0) {
        wk_fail(c, "prompt %d + generate %d positions exceed the model's context %d: set workload.ctx", n_prompt,
                s->generate, m->cfg.seq_len);
        return -1;
    }
    return n_prompt;
}

/* The accuracy pass (worker_opts.accuracy_out): untimed, no events. The variant's logits at
 * the workload's positions against the reference's (engines/core/runtime/accuracy.h), written
 * to the file as one JSON object: {"n_pos", "kl_mean", "kl_max", "top1", "err_max", "err_rms"}. */
static int wk_accuracy(wk_ctx *c, const wk_spec *s, const engine_spec *es, const char *out_path) {
    char err[1024];
    engine_spec ref = acc_reference_spec(es);
    ref.on_region = NULL;
    engine_spec var = *es;
    var.on_region = NULL;
    /* the prompt's ids from the model's header and vocabulary alone: no weights loaded for it */
    model *m = NULL;
    tokenizer *tok = NULL;
    if (model_open(s->model, s->tokenizer, &m, err, sizeof(err)) ||
        (m->vocab.n && tokenizer_create_ex(&m->vocab, 0, &tok, err, sizeof(err)))) {
        model_free(m);
        return wk_failc(c, BENCH_ERR_INVALID, "accuracy: %s", err);
    }
    int cap = (s->prompt ? (int)strlen(s->prompt) + 8 : s->prompt_tokens) + s->generate;
    int *ids = malloc((size_t)cap * sizeof(int));
    int n_prompt = ids ? wk_prompt(c, s, m, tok, ids, cap) : -1;
    tokenizer_free(tok);
    model_free(m);
    if (!ids) return wk_failc(c, BENCH_ERR_NOMEM, "out of memory");
    if (n_prompt < 0) {
        free(ids);
        return 1;
    }
    acc_figures f;
    int rc = acc_measure(&var, &ref, ids, n_prompt, s->generate, &f, err, sizeof(err));
    free(ids);
    if (rc) return wk_failc(c, rc, "%s", err);
    FILE *o = fopen(out_path, "w");
    if (!o) return wk_failc(c, BENCH_ERR_IO, "%s: %s", out_path, strerror(errno));
    /* %.17g: the figures are exact, and the gate compares them as such */
    fprintf(o, "{\"n_pos\": %d, \"kl_mean\": %.17g, \"kl_max\": %.17g, \"top1\": %.17g, \"err_max\": %.17g, \"err_rms\": %.17g}\n",
            f.n_pos, f.kl_mean, f.kl_max, f.top1, f.err_max, f.err_rms);
    if (fclose(o)) return wk_failc(c, BENCH_ERR_IO, "%s: write failed", out_path);
    fprintf(stderr, "bench worker: accuracy over %d positions: KL mean %.3g max %.3g, top-1 %.2f%%\n", f.n_pos, f.kl_mean,
            f.kl_max, 100 * f.top1);
    return 0;
}

static int wk_generate(wk_ctx *c, const wk_spec *s, engine *e, int64_t *produced) {
    char err[1024];
    sampler *smp = NULL;
    int *ids = NULL, rc = 1;
    const model *m = engine_model(e);
    int cap = (s->prompt ? (int)strlen(s->prompt) + 8 : s->prompt_tokens) + s->generate;
    ids = malloc((size_t)cap * sizeof(int));
    smp = sampler_create(m->cfg.vocab_size, (float)s->temperature, (float)s->topp, (uint64_t)s->seed);
    if (!ids || !smp) {
        wk_fail(c, "out of memory");
        goto out;
    }
    int n_prompt = wk_prompt(c, s, engine_model(e), engine_tokenizer(e), ids, cap);
    if (n_prompt < 0) goto out;

    float *logits;
    wk_send(c, BENCH_EV_PREFILL_START, 0, 0, 0, NULL, NULL, 0);
    int frc = engine_forward(e, 0, ids, n_prompt, 0, &logits, err, sizeof(err));
    if (frc) {
        wk_failc(c, frc, "prefill: %s", err);
        goto out;
    }
    int n = n_prompt;
    ids[n++] = engine_sample(e, smp, logits);
    if (wk_send(c, BENCH_EV_PREFILL_END, 1, n_prompt, ids[n - 1], NULL, NULL, 0)) goto out;
    engine_kv_mem kv = engine_kv_memory(e);
    wk_kv_sample(c, &kv, 0, n_prompt);
    double reserved = kv.reserved;

    /* exactly `generate` tokens: EOS/BOS do not stop a benchmark, so variants do the same work */
    wk_send(c, BENCH_EV_DECODE_START, 0, 0, 0, NULL, NULL, 0);
    /* bench exec --loop: every pass decodes the same positions again, so each does the same work */
    int n_first = n;
    for (int pass = 0; pass < (c->loop > 1 ? c->loop : 1); pass++) {
        n = n_first;
        for (int k = 1; k < s->generate; k++) {
            if ((frc = engine_forward(e, 0, &ids[n - 1], 1, n - 1, &logits, err, sizeof(err)))) {
                wk_failc(c, frc, "decode step %d: %s", k, err);
                goto out;
            }
            ids[n++] = engine_sample(e, smp, logits);
            wk_send(c, BENCH_EV_TOKEN, 0, k, ids[n - 1], NULL, NULL, 0);
            if (pass == 0) {
                kv = engine_kv_memory(e);
                if (k == s->generate - 1 || kv.reserved != reserved) wk_kv_sample(c, &kv, k, n - 1);
                reserved = kv.reserved;
            }
        }
    }
    wk_send(c, BENCH_EV_DECODE_END, 0, 0, 0, NULL, NULL, 0);
    *produced = n - n_prompt;
    rc = 0;
out:
    sampler_free(smp);
    free(ids);
    return rc;
}

/* Decode's bound on this machine: a read-only stream, on the run's thread count, over a
 * buffer of the bytes one decode step reads (every matrix and the classifier; of an
 * untied embedding table one row). Measured and sent as counters after DONE, once the
 * parent holds the workload's last snapshot, so neither the timings nor the memory and
 * fault figures see it (only the whole-process ones, ru_maxrss and minflt_total, can);
 * the report divides decode tokens/s by bandwidth.decode_bound_tok_s. */
static void wk_bandwidth(wk_ctx *c, const wk_spec *s, engine *e) {
    const model *m = engine_model(e);
    double per_token = (double)model_weight_bytes(m);
    const model_tensor *emb = model_find(m, "token_embd.weight");
    if (model_find(m, "output.weight") && emb) per_token -= (double)emb->nbytes;
    long nt = s->threads > 0 ? s->threads : sysconf(_SC_NPROCESSORS_ONLN);
    tp_pool *pool = tp_create(nt > 0 ? (int)nt : 1);
    double bw = pool && per_token > 0 ? kn_read_bandwidth(pool, (size_t)per_token, 5) : 0;
    tp_destroy(pool);
    if (bw <= 0) return;
    wk_emit(c, "bandwidth.read_gb_s", "GB/s", bw / 1e9);
    wk_emit(c, "bandwidth.bytes_per_token", "B", per_token);
    wk_emit(c, "bandwidth.decode_bound_tok_s", "tok/s", bw / per_token);
}

/* path is still the file bench run read (id "dev:ino"; NULL: nothing to check). */
/* The spec's "dev:ino" of a file bench run checked (confine.h). */
static int wk_parse_id(wk_ctx *c, const char *path, const char *id, unsigned long long *dev, unsigned long long *ino) {
    if (sscanf(id, "%llu:%llu", dev, ino) != 2) return wk_fail(c, "worker spec: %s: id \"%s\" is not dev:ino", path, id);
    return 0;
}

static int wk_same_file(wk_ctx *c, const char *path, const char *id) {
    unsigned long long dev, ino;
    char err[1024];
    if (!path || !id) return 0;
    if (wk_parse_id(c, path, id, &dev, &ino)) return -1;
    if (cf_same_file(path, dev, ino, err, sizeof(err))) return wk_fail(c, "%s", err);
    return 0;
}

/* The file the engine parsed from path (id: what it read) is the one bench run checked: the
 * path's before-and-after look cannot see a swap and a swap back inside the engine's load. */
static int wk_parsed_checked(wk_ctx *c, const char *path, const char *checked, model_file_id id) {
    unsigned long long dev, ino;
    if (!path || !checked || (id.dev == 0 && id.ino == 0)) return 0;
    if (wk_parse_id(c, path, checked, &dev, &ino)) return -1;
    if (id.dev != dev || id.ino != ino)
        return wk_fail(c, "%s is not the file bench run checked (device %llu inode %llu then, the engine read device %llu inode "
                       "%llu): it was replaced while the engine loaded it", path, dev, ino, id.dev, id.ino);
    return 0;
}

static int wk_engine_read_checked(wk_ctx *c, const wk_spec *s, const engine *e) {
    const model *m = engine_model(e);
    int f = model_find_file(m, s->model);
    if (f >= 0 && wk_parsed_checked(c, s->model, s->model_id, m->file_ids[f])) return -1;
    return s->tokenizer ? wk_parsed_checked(c, s->tokenizer, s->tokenizer_id, m->vocab.source_id) : 0;
}

/* The Q4_0 matrices the engine rearranged at load (engine.h engine_repack), sent at every load, 0
 * where none were, so that a variant that stops repacking shows as a change. Exact: they
 * follow from the file and the kernel family, and no direction is better. */
static void wk_repack_counters(wk_ctx *c, const engine *e) {
    wk_emit_as(c, "weights.repacked_matrices", "count", BENCH_CTR_EXACT, BENCH_BETTER_NONE, engine_repacked_matrices(e));
    wk_emit_as(c, "weights.repacked_bytes", "B", BENCH_CTR_EXACT, BENCH_BETTER_NONE, (double)engine_repacked_bytes(e));
    wk_emit_as(c, "weights.repacked_copied_bytes", "B", BENCH_CTR_EXACT, BENCH_BETTER_NONE,
               (double)engine_repacked_copied_bytes(e));
}

/* The repetition itself, shared by bench worker and bench exec (worker_engine). s points into the
 * caller's spec JSON; c and s are copies, so the body reads as it did inline. */
static int wk_run(wk_ctx c, wk_spec s) {
    char err[1024];
    engine *e = NULL;
    int rc = 1;
    /* the options as the parent checked them, typed: the engine stores them, parsing nothing */
    engine_spec es = {.model_path = s.model, .tokenizer_path = s.tokenizer, .loader = s.module[0],
                      .kv = s.module[1], .alloc = s.module[2], .threads = s.threads, .max_pos = s.ctx,
                      .module_dir = s.module_dir, .on_region = wk_region, .region_user = &c, .device = s.device,
                      .kernels = s.kernels, .loader_opts = s.opts[0].v, .kv_opts = s.opts[1].v, .alloc_opts = s.opts[2].v,
                      .device_opts = s.device_opts.v, .repack = s.repack ? ENGINE_REPACK_AUTO : ENGINE_REPACK_OFF};
    /* a serving run: sequences and KV memory for its requests */
    if (s.requests) sv_engine_spec(s.requests, &es);
    es.kv_k_type = s.kv_types.k;       /* parsed once, by ws_engine_read */
    es.kv_v_type = s.kv_types.v;

    if (c.accuracy_out) {
        /* the files bench run checked, as for a timed repetition */
        if (wk_same_file(&c, s.model, s.model_id) || wk_same_file(&c, s.tokenizer, s.tokenizer_id)) goto out;
        rc = s.http ? wk_fail(&c, "the accuracy pass measures the engine in process, not an http target") :
             s.requests ? wk_fail(&c, "the accuracy pass measures inference workloads, not serving") :
                          wk_accuracy(&c, &s, &es, c.accuracy_out);
        goto out;
    }
    c.t0 = ut_now_ns();
    if (s.http) {
        /* an http target: the server runs the workload, and sends its own HELLO (http_worker.h) */
        if (wk_same_file(&c, s.model, s.model_id) || wk_same_file(&c, s.tokenizer, s.tokenizer_id)) goto out;
        hw_params hp = {.http = s.http, .model = s.model, .tokenizer = s.tokenizer, .requests = s.requests, .prompt = s.prompt,
                        .prompt_tokens = s.prompt_tokens, .generate = s.generate, .temperature = s.temperature,
                        .topp = s.topp, .seed = (uint64_t)s.seed};
        sv_sink hs = {.send = wk_serve_event, .user = &c};
        int code;
        rc = hw_run(&hp, &hs, &code, err, sizeof(err)) ? wk_failc(&c, code, "http: %s", err) : 0;
        goto out;
    }
    if (wk_send(&c, BENCH_EV_HELLO, 1, getpid(), 0, NULL, NULL, 0)) goto out;
    int hook = wk_fault(s.fault);
    if (hook) {
        rc = hook;
        goto out;
    }

    wk_send(&c, BENCH_EV_LOAD_START, 0, 0, 0, NULL, NULL, 0);
    /* the model and tokenizer are the files bench run checked, before the engine opens
     * them and again once it has (a swap in between is caught at the second look) */
    if (wk_same_file(&c, s.model, s.model_id) || wk_same_file(&c, s.tokenizer, s.tokenizer_id)) goto out;
    int erc = engine_create(&es, &e, err, sizeof(err));
    if (erc) {
        wk_failc(&c, erc, "%s", err);
        goto out;
    }
    if (wk_same_file(&c, s.model, s.model_id) || wk_same_file(&c, s.tokenizer, s.tokenizer_id) ||
        wk_engine_read_checked(&c, &s, e))
        goto out;
    if (wk_send(&c, BENCH_EV_LOAD_END, 1, 0, 0, NULL, NULL, 0)) goto out;
    wk_repack_counters(&c, e);
    /* test hook: the model truncated under a loader whose tensors are the file's pages (mapguard.h) */
    if ((engine_module_caps(e, "loader") & BENCH_CAP_LOADER_MAPS_FILE) && mg_test_truncate(s.model) < 0) goto out;

    int64_t produced = 0;
    if (s.requests) {
        sv_sink sink = {.send = wk_serve_event, .user = &c};
        if (sv_serve(e, s.requests, s.temperature, s.topp, (uint64_t)s.seed, &sink, err, sizeof(err))) {
            wk_fail(&c, "serve: %s", err);
            goto out;
        }
    } else if (wk_generate(&c, &s, e, &produced)) {
        goto out;
    }
    bench_counter_sink sink = {.emit = wk_emit, .user = &c, .emit_as = wk_emit_as};
    engine_counters(e, &sink);
    if (s.delay_ms > 0) {
        struct timespec d = {.tv_sec = s.delay_ms / 1000, .tv_nsec = (long)(s.delay_ms % 1000) * 1000000};
        while (nanosleep(&d, &d) && errno == EINTR) {}
    }
    if (wk_send(&c, BENCH_EV_DONE, 1, produced, 0, NULL, NULL, 0)) goto out;
    /* after DONE, whose snapshot the parent has taken (the ack): the bound's buffer, as large
     * as the weights, is in none of the workload's figures (peak and end RSS, decode faults) */
    if (s.bandwidth && !s.requests && strcmp(engine_device(e), "cpu") == 0) wk_bandwidth(&c, &s, e);
    rc = 0;
out:
    engine_destroy(e);
    return rc;
}
