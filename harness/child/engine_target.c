/* The engine target: see engine_target.h. */
#include "engine_target.h"

#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engines/core/compute/kernels.h"
#include "engines/core/runtime/accuracy.h"
#include "engines/core/compute/kernels_tune.h"
#include "engines/core/runtime/engine.h"
#include "engines/core/runtime/sampler.h"
#include "harness/child/mapguard.h"
#include "util/ut_clock.h"

typedef struct et_state {
    const wt_env *env;
    const ws_engine *s;
    engine_spec es;
    engine *e;
} et_state;

/* err with a code of either sign (an engine call returns -code) */
static int et_fail(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int et_fail(char *err, size_t errlen, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (code < 0) code = -code;
    return code >= BENCH_ERR_FAIL && code <= BENCH_ERR_MAX ? -code : -BENCH_ERR_FAIL;
}

static int et_write(const et_state *t, const bench_event *ev) { return t->env->write(t->env->user, ev); }

static int et_send(const et_state *t, uint32_t type, int ack, int64_t a, int64_t b) {
    return wt_send(t->env, type, ack, 0, a, b, NULL);
}

static void et_emit_as(void *user, const char *name, const char *unit, int cls, int better, double v) {
    wt_counter(((const et_state *)user)->env, name, unit, cls, better, v);
}

static void et_emit(void *user, const char *name, const char *unit, double v) {
    et_emit_as(user, name, unit, BENCH_CTR_UNIT, BENCH_BETTER_NONE, v);
}

static void et_region(void *user, const void *addr, size_t len, const char *name) {
    wt_send(((const et_state *)user)->env, BENCH_EV_REGION, 0, 0, (int64_t)(uintptr_t)addr, (int64_t)len, name);
}

/* The engine's spec from the worker's: the options as the parent checked them, typed (the
 * engine stores them, parsing nothing), and a serving run's sequences and KV memory. */
static int et_engine_spec(const ws_engine *s, engine_spec *es, char *err, size_t errlen) {
    *es = (engine_spec){.model_path = s->model, .tokenizer_path = s->tokenizer, .loader = s->module[0],
                        .kv = s->module[1], .alloc = s->module[2], .threads = s->threads, .max_pos = s->ctx,
                        .module_dir = s->module_dir, .device = s->device, .kernels = s->kernels,
                        .loader_opts = s->opts[0].v, .kv_opts = s->opts[1].v, .alloc_opts = s->opts[2].v,
                        .device_opts = s->device_opts.v, .repack = s->repack ? ENGINE_REPACK_AUTO : ENGINE_REPACK_OFF,
                        .numerics = s->numerics ? ENGINE_NUMERICS_EXACT : ENGINE_NUMERICS_PRODUCTION,
                        .scratch = s->scratch ? ENGINE_SCRATCH_PASS : ENGINE_SCRATCH_KEEP, .ubatch = s->ubatch};
    /* one sequence's prompt: its pass's activations reserved in the load, as bench generate does;
     * a serving run's prompts are not known ahead: a pass of ubatch tokens, the most one takes,
     * as llama.cpp's server reserves its compute buffer for n_ubatch (the engine caps it) */
    if (s->requests) {
        es->reserve_tokens = ENGINE_RESERVE_UBATCH;
        sv_engine_spec(s->requests, es);
    } else if (s->prompt_tokens > 0) {
        es->reserve_tokens = s->prompt_tokens;
    }
    (void)err;
    (void)errlen;
    es->kv_k_type = s->kv_types.k; /* parsed once, by ws_engine_read */
    es->kv_v_type = s->kv_types.v;
    return 0;
}

/* ======================================================================
 * One sequence
 * ====================================================================== */

/* The cache's memory after `tokens` positions of the one sequence (events.h KV_SAMPLE; the
 * fields of a serving run's step, one sequence running). Sent after prefill, then only where
 * the reserve moved and after the last step, so a dynamic cache's growth is seen without an
 * event per token. */
static void et_kv_sample(const et_state *t, const engine_kv_mem *kv, int64_t step, int64_t tokens) {
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
    et_write(t, &ev);
}

/* The workload's prompt ids into ids (cap entries, generate of them left for decoding): the
 * text through the model's tokenizer, or BOS and ids 3, 4, 5... Returns the count, or -code
 * with err. */
static int et_prompt(const ws_engine *s, const model *m, const tokenizer *tok, int *ids, int cap, char *err, size_t errlen) {
    char e[1024];
    int n_prompt;
    if (s->prompt) {
        if (!tok)
            return et_fail(err, errlen, BENCH_ERR_FAIL, "%s has no vocabulary: give the scenario's model a \"tokenizer\", "
                           "or use workload.prompt_tokens", s->model);
        n_prompt = tokenizer_encode(tok, s->prompt, 1, 0, ids, cap - s->generate, e, sizeof(e));
        if (n_prompt < 0) return et_fail(err, errlen, BENCH_ERR_FAIL, "prompt: %s", e);
    } else {
        /* BOS, then ids 3, 4, 5...: a deterministic prompt of the asked length for any vocabulary */
        n_prompt = s->prompt_tokens;
        ids[0] = tok ? tokenizer_bos(tok) : 1;
        for (int i = 1; i < n_prompt; i++) ids[i] = 3 + (i - 1) % (m->cfg.vocab_size > 3 ? m->cfg.vocab_size - 3 : 1);
    }
    if (n_prompt + s->generate > m->cfg.seq_len && s->ctx <= 0)
        return et_fail(err, errlen, BENCH_ERR_FAIL, "prompt %d + generate %d positions exceed the model's context %d: set "
                       "workload.ctx", n_prompt, s->generate, m->cfg.seq_len);
    return n_prompt;
}

int et_accuracy(const ws_engine *s, const char *out_path, char *err, size_t errlen) {
    char e[1024];
    engine_spec es;
    int rc = et_engine_spec(s, &es, err, errlen);
    if (rc) return rc;
    engine_spec ref = acc_reference_spec(&es);
    ref.on_region = NULL;
    /* the prompt's ids from the model's header and vocabulary alone: no weights loaded for it */
    model *m = NULL;
    tokenizer *tok = NULL;
    if (model_open(s->model, s->tokenizer, &m, e, sizeof(e)) ||
        (m->vocab.n && tokenizer_create_ex(&m->vocab, 0, &tok, e, sizeof(e)))) {
        model_free(m);
        return et_fail(err, errlen, BENCH_ERR_INVALID, "accuracy: %s", e);
    }
    int cap = (s->prompt ? (int)strlen(s->prompt) + 8 : s->prompt_tokens) + s->generate;
    int *ids = malloc((size_t)cap * sizeof(int));
    int n_prompt = ids ? et_prompt(s, m, tok, ids, cap, err, errlen) : 0;
    tokenizer_free(tok);
    model_free(m);
    if (!ids) return et_fail(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    if (n_prompt < 0) {
        free(ids);
        return n_prompt;
    }
    acc_figures f;
    rc = acc_measure(&es, &ref, ids, n_prompt, s->generate, &f, e, sizeof(e));
    free(ids);
    if (rc) return et_fail(err, errlen, rc, "%s", e);
    FILE *o = fopen(out_path, "w");
    if (!o) return et_fail(err, errlen, BENCH_ERR_IO, "%s: %s", out_path, strerror(errno));
    /* %.17g: the figures are exact, and the gate compares them as such */
    fprintf(o, "{\"n_pos\": %d, \"kl_mean\": %.17g, \"kl_max\": %.17g, \"top1\": %.17g, \"err_max\": %.17g, \"err_rms\": %.17g}\n",
            f.n_pos, f.kl_mean, f.kl_max, f.top1, f.err_max, f.err_rms);
    if (fclose(o)) return et_fail(err, errlen, BENCH_ERR_IO, "%s: write failed", out_path);
    fprintf(stderr, "bench worker: accuracy over %d positions: KL mean %.3g max %.3g, top-1 %.2f%%\n", f.n_pos, f.kl_mean,
            f.kl_max, 100 * f.top1);
    return 0;
}

/* One sequence: the prompt's prefill, then `generate - 1` decode steps. *produced gets
 * the tokens generated. */
static int et_generate(et_state *t, int64_t *produced, char *err, size_t errlen) {
    const ws_engine *s = t->s;
    engine *e = t->e;
    char msg[1024];
    sampler *smp = NULL;
    int *ids = NULL, rc = 1;
    const model *m = engine_model(e);
    int cap = (s->prompt ? (int)strlen(s->prompt) + 8 : s->prompt_tokens) + s->generate;
    ids = malloc((size_t)cap * sizeof(int));
    smp = sampler_create(m->cfg.vocab_size, (float)s->temperature, (float)s->topp, (uint64_t)s->seed);
    if (!ids || !smp) {
        rc = et_fail(err, errlen, BENCH_ERR_FAIL, "out of memory");
        goto out;
    }
    int n_prompt = et_prompt(s, m, engine_tokenizer(e), ids, cap, err, errlen);
    if (n_prompt < 0) {
        rc = n_prompt;
        goto out;
    }

    float *logits;
    et_send(t, BENCH_EV_PREFILL_START, 0, 0, 0);
    int frc = engine_forward(e, 0, ids, n_prompt, 0, &logits, msg, sizeof(msg));
    if (frc) {
        rc = et_fail(err, errlen, frc, "prefill: %s", msg);
        goto out;
    }
    int n = n_prompt;
    ids[n++] = engine_sample(e, smp, logits);
    if (et_send(t, BENCH_EV_PREFILL_END, 1, n_prompt, ids[n - 1])) goto out;
    engine_kv_mem kv = engine_kv_memory(e);
    et_kv_sample(t, &kv, 0, n_prompt);
    double reserved = kv.reserved;

    /* exactly `generate` tokens: EOS/BOS do not stop a benchmark, so variants do the same work */
    et_send(t, BENCH_EV_DECODE_START, 0, 0, 0);
    /* bench exec --loop: every pass decodes the same positions again, so each does the same work */
    int n_first = n;
    for (int pass = 0; pass < (t->env->loop > 1 ? t->env->loop : 1); pass++) {
        n = n_first;
        for (int k = 1; k < s->generate; k++) {
            if ((frc = engine_forward(e, 0, &ids[n - 1], 1, n - 1, &logits, msg, sizeof(msg)))) {
                rc = et_fail(err, errlen, frc, "decode step %d: %s", k, msg);
                goto out;
            }
            ids[n++] = engine_sample(e, smp, logits);
            et_send(t, BENCH_EV_TOKEN, 0, k, ids[n - 1]);
            if (pass == 0) {
                kv = engine_kv_memory(e);
                if (k == s->generate - 1 || kv.reserved != reserved) et_kv_sample(t, &kv, k, n - 1);
                reserved = kv.reserved;
            }
        }
    }
    et_send(t, BENCH_EV_DECODE_END, 0, 0, 0);
    *produced = n - n_prompt;
    rc = 0;
out:
    sampler_free(smp);
    free(ids);
    return rc;
}

/* ======================================================================
 * The slots
 * ====================================================================== */

/* Test hooks: fail the way a real worker can. The default action is restored
 * first, so a sanitizer build dies by the signal as a release build does. */
static int et_fault(const char *fault) {
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

/* The file the engine parsed from path (id: what it read) is the one bench run checked: the
 * path's before-and-after look cannot see a swap and a swap back inside the engine's load. */
static int et_parsed_checked(const char *path, const char *checked, model_file_id id, char *err, size_t errlen) {
    unsigned long long dev, ino;
    if (!path || !checked || (id.dev == 0 && id.ino == 0)) return 0;
    if (sscanf(checked, "%llu:%llu", &dev, &ino) != 2)
        return et_fail(err, errlen, BENCH_ERR_FAIL, "worker spec: %s: id \"%s\" is not dev:ino", path, checked);
    if (id.dev != dev || id.ino != ino)
        return et_fail(err, errlen, BENCH_ERR_FAIL, "%s is not the file bench run checked (device %llu inode %llu then, the "
                       "engine read device %llu inode %llu): it was replaced while the engine loaded it", path, dev, ino,
                       id.dev, id.ino);
    return 0;
}

static int et_engine_read_checked(const ws_engine *s, const engine *e, char *err, size_t errlen) {
    const model *m = engine_model(e);
    int f = model_find_file(m, s->model);
    int rc = f >= 0 ? et_parsed_checked(s->model, s->model_id, m->file_ids[f], err, errlen) : 0;
    if (rc) return rc;
    return s->tokenizer ? et_parsed_checked(s->tokenizer, s->tokenizer_id, m->vocab.source_id, err, errlen) : 0;
}

/* The Q4_0 and bf16 matrices the engine rearranged at load (engine.h engine_repack), sent at every load, 0
 * where none were, so that a variant that stops repacking shows as a change. Exact: they
 * follow from the file and the kernel family, and no direction is better. */
static void et_repack_counters(const et_state *t) {
    const engine *e = t->e;
    wt_counter(t->env, "weights.repacked_matrices", "count", BENCH_CTR_EXACT, BENCH_BETTER_NONE, engine_repacked_matrices(e));
    wt_counter(t->env, "weights.repacked_bytes", "B", BENCH_CTR_EXACT, BENCH_BETTER_NONE, (double)engine_repacked_bytes(e));
    wt_counter(t->env, "weights.repacked_copied_bytes", "B", BENCH_CTR_EXACT, BENCH_BETTER_NONE,
               (double)engine_repacked_copied_bytes(e));
}

/* Production numerics (engine.h engine_numerics): kernels.numerics_production, 1 where a family
 * that rounds x runs a dtype (the check accepted it), else 0; and for each family checked on the
 * model, kernels.DTYPE.PHASE.FAMILY.{accepted,kl_mean,kl_max,err_rel,top1} and the bound it was held
 * to, llama.cpp's own on the model: .{llama_kl_mean,llama_err_rel,llama_top1}. Shown, not judged:
 * which family competes follows from the tuner's timings, which differ between machines. */
static void et_numerics_counters(const et_state *t) {
    const kt_table *k = engine_kernels_table(t->e);
    int rounds = 0;
    for (int i = 0; k && i < k->n; i++) {
        const kt_entry *e = &k->e[i];
        if (e->acc != KT_ACC_ACCEPTED && e->acc != KT_ACC_REFUSED) continue;
        rounds |= e->acc == KT_ACC_ACCEPTED;
        static const struct { const char *what, *unit; } c[] = {
            {"accepted", "bool"}, {"kl_mean", "nats"}, {"kl_max", "nats"}, {"err_rel", "fraction"}, {"top1", "fraction"},
            {"llama_kl_mean", "nats"}, {"llama_err_rel", "fraction"}, {"llama_top1", "fraction"}};
        const double v[] = {e->acc == KT_ACC_ACCEPTED, e->kl_mean, e->kl_max, e->err_rel, e->top1,
                            e->bound_kl_mean, e->bound_err_rel, e->bound_top1};
        for (size_t w = 0; w < sizeof c / sizeof c[0]; w++) {
            char name[96];
            if (!isfinite(v[w])) continue;  /* a bound not recorded (an older cache line) */
            snprintf(name, sizeof(name), "kernels.%s.%s.%s.%s", bench_dtype_name(e->dt), e->prefill ? "prefill" : "decode",
                     e->acc_family, c[w].what);
            wt_counter(t->env, name, c[w].unit, BENCH_CTR_INFO, BENCH_BETTER_NONE, v[w]);
        }
    }
    wt_counter(t->env, "kernels.numerics_production", "bool", BENCH_CTR_INFO, BENCH_BETTER_NONE, rounds);
}

static int et_prepare(const wt_env *env, void **state, char *err, size_t errlen) {
    et_state *t = calloc(1, sizeof(*t));
    if (!t) return et_fail(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    *state = t;
    t->env = env;
    t->s = env->spec;
    int rc = et_engine_spec(t->s, &t->es, err, errlen);
    if (rc) return rc;
    t->es.on_region = et_region;
    t->es.region_user = t;
    if (et_send(t, BENCH_EV_HELLO, 1, getpid(), 0)) return 1;
    int hook = et_fault(t->s->fault);
    if (hook) return hook;
    et_send(t, BENCH_EV_LOAD_START, 0, 0, 0);
    /* the model and tokenizer are the files bench run checked, before the engine opens
     * them and again once it has (a swap in between is caught at the second look) */
    if ((rc = wt_same_model_files(t->s, err, errlen))) return rc;
    char e[1024];
    int erc = engine_create(&t->es, &t->e, e, sizeof(e));
    if (erc) return et_fail(err, errlen, erc, "%s", e);
    if ((rc = wt_same_model_files(t->s, err, errlen)) || (rc = et_engine_read_checked(t->s, t->e, err, errlen))) return rc;
    if (et_send(t, BENCH_EV_LOAD_END, 1, 0, 0)) return 1;
    et_repack_counters(t);
    et_numerics_counters(t);
    /* test hook: the model truncated under a loader whose tensors are the file's pages (mapguard.h) */
    if ((engine_module_caps(t->e, "loader") & BENCH_CAP_LOADER_MAPS_FILE) && mg_test_truncate(t->s->model) < 0) return 1;
    return 0;
}

static int et_run(void *state, int64_t *produced, char *err, size_t errlen) {
    et_state *t = state;
    const ws_engine *s = t->s;
    if (!s->requests) return et_generate(t, produced, err, errlen);
    sv_sink sink = wt_sink(t->env);
    char e[1024];
    if (sv_serve(t->e, s->requests, s->temperature, s->topp, (uint64_t)s->seed, &sink, e, sizeof(e)))
        return et_fail(err, errlen, BENCH_ERR_FAIL, "serve: %s", e);
    return 0;
}

static int et_collect(void *state, char *err, size_t errlen) {
    (void)err, (void)errlen;
    et_state *t = state;
    bench_counter_sink sink = {.emit = et_emit, .user = t, .emit_as = et_emit_as};
    engine_counters(t->e, &sink);
    /* test hook: a worker that is slow to finish (a timeout, the barrier of many processes) */
    if (t->s->delay_ms > 0) {
        struct timespec d = {.tv_sec = t->s->delay_ms / 1000, .tv_nsec = (long)(t->s->delay_ms % 1000) * 1000000};
        while (nanosleep(&d, &d) && errno == EINTR) {}
    }
    return 0;
}

/* Decode's bound on this machine: a read-only stream, on the run's thread count, over a
 * buffer of the bytes one decode step reads (every matrix and the classifier; of an
 * untied embedding table one row). Measured and sent as counters after DONE, once the
 * parent holds the workload's last snapshot, so neither the timings nor the memory and
 * fault figures see it (only the whole-process ones, ru_maxrss and minflt_total, can);
 * the report divides decode tokens/s by bandwidth.decode_bound_tok_s. */
static void et_after_done(void *state) {
    et_state *t = state;
    const ws_engine *s = t->s;
    if (!s->bandwidth || s->requests || strcmp(engine_device(t->e), "cpu")) return;
    const model *m = engine_model(t->e);
    double per_token = (double)model_weight_bytes(m);
    const model_tensor *emb = model_find(m, "token_embd.weight");
    if (model_find(m, "output.weight") && emb) per_token -= (double)emb->nbytes;
    long nt = s->threads > 0 ? s->threads : sysconf(_SC_NPROCESSORS_ONLN);
    tp_pool *pool = tp_create(nt > 0 ? (int)nt : 1);
    double bw = pool && per_token > 0 ? kn_read_bandwidth(pool, (size_t)per_token, 5) : 0;
    tp_destroy(pool);
    if (bw <= 0) return;
    et_emit(t, "bandwidth.read_gb_s", "GB/s", bw / 1e9);
    et_emit(t, "bandwidth.bytes_per_token", "B", per_token);
    et_emit(t, "bandwidth.decode_bound_tok_s", "tok/s", bw / per_token);
}

static void et_close(void *state) {
    et_state *t = state;
    if (!t) return;
    engine_destroy(t->e);
    free(t);
}

const wt_target_i wt_engine = {
    .name = "engine",
    .in_process = 1,
    .prepare = et_prepare,
    .run = et_run,
    .collect = et_collect,
    .after_done = et_after_done,
    .close = et_close,
};
