#include "runner.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engines/abi/dtype.h"
#include "engines/abi/module.h"
#include "engines/core/model/model.h"
#include "engines/core/model/model_write.h"
#include "engines/core/synth/synth.h"
#include "harness/scenario/kind.h"
#include "harness/scenario/confine.h"
#include "harness/scenario/events.h"
#include "harness/parent/pagecache.h"
#include "util/ut_fs.h"
#include "util/ut_clock.h"
#include "util/ut_vec.h"

/* a repetition's residency bounds, in % of the model's pages */
#define RN_COLD_MAX_PCT 5.0
#define RN_WARM_MIN_PCT 95.0

_Static_assert(RN_PH_COUNT == EN_MARKS, "an energy mark per phase boundary");

/* Messages are cut to their buffer: a truncated reason is still a reason. */
static void rn_setf(char *dst, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rn_setf(char *dst, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

int64_t rn_now_ns(void) { return ut_now_ns(); }

const char *rn_phase_name(int ph) {
    static const char *n[] = {"start", "load", "prefill", "end"};
    return ph >= 0 && ph < RN_PH_COUNT ? n[ph] : "?";
}

const char *rn_status_name(rn_status s) {
    static const char *n[] = {"pending", "ok", "crash", "exit", "timeout", "oom", "interrupted", "error"};
    return (unsigned)s <= RN_ERROR ? n[s] : "?";
}

/* ---- the model ---- */

/* path resolved once, and the identity of the file there (confine.h): what the parent
 * reads and the workers check. */
static int rn_pin(const char *path, char **resolved, unsigned long long *dev, unsigned long long *ino, char *err, size_t errlen) {
    char rp[PATH_MAX];
    if (!realpath(path, rp)) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    int fd = cf_open_exact(rp, dev, ino, err, errlen);
    if (fd < 0) return -1;
    close(fd);
    free(*resolved);
    if (!(*resolved = strdup(rp))) return bench_errf(err, errlen, "out of memory");
    return 0;
}

static void rn_mark_use(const scenario *s, const char *cache_dir, rn_model_files *mf);

/* The vocabulary a format writes beside the model (model_writer.vocab_path) follows the model
 * from its temporary name to its own: written beside tmp, it is renamed to sit beside path. */
static int rn_rename_vocab(const char *format, const char *tmp, const char *path, char *err, size_t errlen) {
    const model_writer *w = model_writer_find(format);
    char from[PATH_MAX], to[PATH_MAX];
    if (!w || !w->vocab_path) return 0;
    if (w->vocab_path(tmp, from, sizeof(from)) || w->vocab_path(path, to, sizeof(to)))
        return bench_errf(err, errlen, "%s: the vocabulary's path is too long", path);
    if (rename(from, to) && errno != ENOENT) return bench_errf(err, errlen, "%s: rename: %s", to, strerror(errno));
    return 0;
}

int rn_prepare_model(scenario *s, const char *cache_dir, rn_model_files *mf, char *err, size_t errlen) {
    memset(mf, 0, sizeof(*mf));
    if (s->synth && !s->model_path) {
        char path[PATH_MAX], tmp[PATH_MAX + 32];
        if (sc_synth_path(s, cache_dir, path, sizeof(path)))
            return bench_errf(err, errlen, "synth model path too long under %s", cache_dir);
        struct stat st;
        if (stat(path, &st) != 0) {
            if (ut_mkdirs(cache_dir))
                return bench_errf(err, errlen, "%s: cannot create the model cache: %s", cache_dir, strerror(errno));
            /* written under a temporary name and renamed: a concurrent or interrupted run never sees half a model */
            snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
            synth_spec sp = {.shape = s->synth_shape, .dtype = (bench_dtype)bench_dtype_parse(s->synth_dtype),
                             .format = s->synth_format, .seed = s->synth_seed};
            fprintf(stderr, "bench run: generating synth model %s (once; cached)\n", path);
            char e[512];
            if (synth_write(&sp, tmp, e, sizeof(e))) return bench_errf(err, errlen, "synth model: %s", e);
            if (rn_rename_vocab(s->synth_format, tmp, path, err, errlen)) return -1;
            if (rename(tmp, path)) return bench_errf(err, errlen, "%s: rename: %s", path, strerror(errno));
        }
        s->model_path = strdup(path);
        if (!s->model_path) return bench_errf(err, errlen, "out of memory");
        /* a format that keeps its vocabulary beside the model (llama2c): that file is the tokenizer */
        const model_writer *w = model_writer_find(s->synth_format);
        char vocab[PATH_MAX];
        if (!s->tokenizer_path && w && w->vocab_path && !w->vocab_path(path, vocab, sizeof(vocab)) && !stat(vocab, &st) &&
            !(s->tokenizer_path = strdup(vocab)))
            return bench_errf(err, errlen, "out of memory");
    }
    if (rn_pin(s->model_path, &s->model_resolved, &s->model_dev, &s->model_ino, err, errlen) ||
        (s->tokenizer_path && rn_pin(s->tokenizer_path, &s->tokenizer_resolved, &s->tokenizer_dev, &s->tokenizer_ino, err, errlen)))
        return -1;
    model *m = NULL;
    char e[1024];
    if (model_open(s->model_resolved, NULL, &m, e, sizeof(e)) ||
        cf_same_file(s->model_resolved, s->model_dev, s->model_ino, e, sizeof(e))) {
        model_free(m);
        return bench_errf(err, errlen, "%s", e);
    }
    mf->path = calloc((size_t)(m->n_files > 0 ? m->n_files : 1), sizeof(char *));
    if (!mf->path) {
        model_free(m);
        return bench_errf(err, errlen, "out of memory");
    }
    for (int i = 0; i < m->n_files; i++) {
        char *rp = realpath(m->files[i], NULL);
        if (!rp) {
            int ee = errno;
            model_free(m);
            rn_model_files_free(mf);
            return bench_errf(err, errlen, "%s: %s", m->files[i], strerror(ee));
        }
        mf->path[mf->n++] = rp;
    }
    mf->bytes = model_weight_bytes(m);
    model_free(m);
    rn_mark_use(s, cache_dir, mf);
    return 0;
}

/* This run's mark on the model file, and a word when another bench uses it now. */
static void rn_mark_use(const scenario *s, const char *cache_dir, rn_model_files *mf) {
    char dir[PATH_MAX], e[PATH_MAX + 128];
    snprintf(dir, sizeof(dir), "%s/in-use", cache_dir);
    if (mu_enter(dir, s->model_dev, s->model_ino, &mf->use, e, sizeof(e))) {
        fprintf(stderr, "bench: note: cannot mark the model in use (%s): another bench on it would go unnoticed\n", e);
        return;
    }
    int other = mu_other(&mf->use);
    if (other)
        fprintf(stderr, "bench: note: another bench (pid %d) uses %s now: its cold repetitions evict the pages the "
                "warm ones read, and the other way round; run one at a time for page-cache figures\n", other,
                s->model_resolved);
}

void rn_model_files_free(rn_model_files *mf) {
    mu_leave(&mf->use);
    for (int i = 0; i < mf->n; i++) free(mf->path[i]);
    free(mf->path);
    memset(mf, 0, sizeof(*mf));
}

/* ---- the worker's spec ---- */

char *rn_worker_spec(const scenario *s, const sc_variant *v) { return s->kind->worker_spec(s, v); }

static int rn_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int rc = fputs(text, f) < 0;
    rc |= fclose(f) != 0;
    return rc ? -1 : 0;
}

/* ---- one worker process ---- */

static int rn_dup_high(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 10); }

static int rn_spawn(const scenario *s, const rn_opts *o, rn_proc *p, const char *spec_path) {
    int ev[2] = {-1, -1}, ack[2] = {-1, -1}, go[2] = {-1, -1};
    if (pipe2(ev, O_CLOEXEC) || pipe2(ack, O_CLOEXEC) || pipe2(go, O_CLOEXEC)) {
        rn_setf(p->reason, sizeof(p->reason), "pipe: %s", strerror(errno));
        goto fail;
    }
    int logfd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (logfd < 0) {
        rn_setf(p->reason, sizeof(p->reason), "%s: %s", p->log_path, strerror(errno));
        goto fail;
    }
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        rn_setf(p->reason, sizeof(p->reason), "fork: %s", strerror(errno));
        close(logfd);
        goto fail;
    }
    if (pid == 0) {
        /* Its own process group: a Ctrl-C on the terminal reaches bench only,
         * which then stops the workers itself and records why. */
        setpgid(0, 0);
        /* dies with bench run (a SIGKILL of it left workers running under PID 1); the
         * parent may have died before the signal was asked for */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(127);
        int e = rn_dup_high(ev[1]), a = rn_dup_high(ack[0]), l = rn_dup_high(logfd);
        if (e < 0 || a < 0 || l < 0 || dup2(e, 3) < 0 || dup2(a, 4) < 0 || dup2(l, 2) < 0 || dup2(l, 1) < 0) _exit(127);
        char b;
        /* wait until the parent has opened the perf counters on this pid */
        if (read(go[0], &b, 1) != 1) _exit(127);
        char *argv[] = {(char *)"bench", (char *)"worker", (char *)"--spec", (char *)spec_path,
                        (char *)"--events", (char *)"3", (char *)"--ack", (char *)"4", NULL};
        /* where refused (a seccomp policy), the worker runs randomized: its figures are still its own */
        int pers = o->keep_aslr ? -1 : personality(0xffffffff);
        if (pers != -1) personality((unsigned long)pers | ADDR_NO_RANDOMIZE);
        execv(o->worker_exe, argv);
        dprintf(2, "bench run: cannot exec %s: %s\n", o->worker_exe, strerror(errno));
        _exit(127);
    }
    close(logfd);
    close(ev[1]);
    close(ack[0]);
    close(go[0]);
    p->pid = pid;
    mc_read(pid, &p->memcg);
    p->ev_fd = ev[0];
    p->ack_fd = ack[1];
    p->t_spawn = rn_now_ns();
    if (s->metrics & SC_M_PERF) {
        pe_open(&p->perf, pid);
        p->perf_opened = 1;
    }
    if (write(go[1], "g", 1) != 1) { /* the child died already: its exit status will say why */ }
    close(go[1]);
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (ev[i] >= 0) close(ev[i]);
        if (ack[i] >= 0) close(ack[i]);
        if (go[i] >= 0) close(go[i]);
    }
    p->status = RN_ERROR;
    p->ev_fd = p->ack_fd = -1;
    p->eof = p->reaped = 1;
    return -1;
}

static void rn_take_sample(const scenario *s, rn_proc *p, int64_t now) {
    pm_status st;
    pt_sum tree;
    if (!p->t_hello || p->eof) return;
    /* memory "tree": the sums over the server's tree in place of its own figures (proctree.h) */
    if (p->tree ? pt_sample(p->tree, (s->metrics & SC_M_PSS) != 0, &tree) : pm_read_status(&p->pm, &st)) return;
    if (p->tree) st = tree.st;
    if (UT_VEC_RESERVE(p->tl, p->cap_tl, p->n_tl + 1)) return;
    rn_sample *x = &p->tl[p->n_tl++];
    x->t_ns = now;
    x->rss = st.vm_rss;
    x->hwm = st.vm_hwm;
    x->anon = st.rss_anon;
    x->file = st.rss_file;
    x->shmem = st.rss_shmem;
    x->pss = -1;
    if (p->tree) x->pss = tree.pss_kib;
    else if (s->metrics & SC_M_PSS) pm_read_pss(&p->pm, &x->pss);
}

/* The pid whose memory is read: the worker's, or the http target's server (0: none). */
static pid_t rn_mem_pid(const rn_proc *p) { return p->mem_source ? p->mem_pid : p->pid; }

static void rn_snapshot(const scenario *s, const rn_model_files *mf, rn_proc *p, int ph) {
    rn_snap *sn = &p->snap[ph];
    memset(sn, 0, sizeof(*sn));
    sn->taken = 1;
    sn->t_ns = rn_now_ns();
    sn->pss_kib = -1;
    pid_t mp = rn_mem_pid(p);
    if (!mp || pm_read_status(&p->pm, &sn->st)) sn->st.vm_rss = -1;
    if (mp) pm_read_pss(&p->pm, &sn->pss_kib);
    if (mp && (s->metrics & SC_M_SMAPS))
        sn->has_smaps = pm_read_smaps(mp, (const char *const *)mf->path, mf->n, p->ranges, p->n_ranges, &sn->smaps) == 0;
    sn->has_faults = mp && pm_read_faults(mp, &sn->minflt, &sn->majflt) == 0;
    for (int i = 0; p->perf_opened && i < p->perf.n; i++) sn->perf_ok[i] = pe_read(&p->perf, i, &sn->perf[i]) == 0;
    pt_sum tree;
    if (p->tree && !pt_sample(p->tree, 1, &tree)) {
        /* memory "tree": RSS, PSS and faults summed over the server's tree; smaps stays the server's */
        sn->st = tree.st;
        sn->pss_kib = tree.pss_kib;
        sn->minflt = tree.minflt;
        sn->majflt = tree.majflt;
        sn->has_faults = 1;
    }
    /* the timeline gets the boundary too, so its curve passes through the snapshot */
    if ((s->metrics & SC_M_TIMELINE) && sn->st.vm_rss >= 0) rn_take_sample(s, p, sn->t_ns);
}

static int rn_push_token(rn_proc *p, int64_t t, int64_t id) {
    if (ut_vec_reserve_par(&p->cap_tok, (size_t)p->n_tok + 1, 2, (void *[]){&p->tok_ns, &p->tok_id},
                           (size_t[]){sizeof(*p->tok_ns), sizeof(*p->tok_id)}))
        return -1;
    p->tok_ns[p->n_tok] = t;
    p->tok_id[p->n_tok++] = (int32_t)id;
    return 0;
}

/* A read of the server's /metrics: a failure, or one series' value. */
static void rn_scrape_event(rn_scrape *c, const bench_event *ev) {
    if (ev->a < 0) {
        if (!c->n_failed++) snprintf(c->first_failure, sizeof(c->first_failure), "%.*s", (int)sizeof(ev->name) - 1, ev->name);
        return;
    }
    int i = (int)ev->a;
    if (i >= (int)(sizeof(c->series) / sizeof(c->series[0])) || i > c->n_series || UT_VEC_RESERVE(c->v, c->cap, c->n + 1)) return;
    if (i == c->n_series) snprintf(c->series[c->n_series++], sizeof(c->series[0]), "%.*s", (int)sizeof(c->series[0]) - 1, ev->name);
    if (ev->b == BENCH_SCR_DECLARE) return;
    if (i == 0) c->n_reads++;
    c->v[c->n++] = (rn_scrape_sample){.t_ns = ev->t_ns, .series = i, .how = (int)ev->b, .value = ev->value};
}

static void rn_event(rn_proc *p, const bench_event *ev) {
    int ph = -1;
    switch ((bench_ev_type)ev->type) {
    case BENCH_EV_HELLO:
        p->t_hello = ev->t_ns;
        /* opened now, after exec: a smaps fd opened before would show the pre-exec memory */
        if (!rn_mem_pid(p) || pm_open(&p->pm, rn_mem_pid(p))) pm_close(&p->pm);
        ph = RN_PH_START;
        break;
    case BENCH_EV_LOAD_START: p->t_load_start = ev->t_ns; break;
    case BENCH_EV_LOAD_END:
        p->t_load_end = ev->t_ns;
        ph = RN_PH_LOAD;
        /* an http target's server may have exec'd again since HELLO (sh -c "exec ..."): an
         * smaps_rollup fd holds the mm it was opened on, so it is opened again on the server's */
        if (p->mem_source && rn_mem_pid(p)) {
            pm_close(&p->pm);
            if (pm_open(&p->pm, rn_mem_pid(p))) pm_close(&p->pm);
        }
        break;
    case BENCH_EV_PREFILL_START: p->t_prefill_start = ev->t_ns; break;
    case BENCH_EV_PREFILL_END:
        p->t_prefill_end = ev->t_ns;
        p->n_prompt = (int)ev->a;
        rn_push_token(p, ev->t_ns, ev->b);
        ph = RN_PH_PREFILL;
        break;
    case BENCH_EV_DECODE_START: p->t_decode_start = ev->t_ns; break;
    case BENCH_EV_TOKEN: rn_push_token(p, ev->t_ns, ev->b); break;
    case BENCH_EV_DECODE_END: p->t_decode_end = ev->t_ns; break;
    case BENCH_EV_COUNTER: {
        if (UT_VEC_RESERVE(p->counters, p->cap_counters, p->n_counters + 1)) break;
        rn_counter *c = &p->counters[p->n_counters++];
        snprintf(c->name, sizeof(c->name), "%.*s", (int)sizeof(c->name) - 1, ev->name);
        snprintf(c->unit, sizeof(c->unit), "%.*s", (int)sizeof(ev->unit) - 1, ev->unit);
        c->value = ev->value;
        c->cls = (int)ev->a;
        c->better = ev->b > 0 ? 1 : ev->b < 0 ? -1 : 0;
        break;
    }
    case BENCH_EV_DONE: p->t_done = ev->t_ns; ph = RN_PH_END; break;
    case BENCH_EV_REGION: {
        if (UT_VEC_RESERVE(p->ranges, p->cap_ranges, p->n_ranges + 1)) break;
        pm_range *g = &p->ranges[p->n_ranges++];
        g->start = (uint64_t)ev->a;
        g->end = (uint64_t)ev->a + (uint64_t)ev->b;
        /* "bench:weights" -> "weights", as smaps names them "[anon:bench:weights]" */
        const char *nm = strncmp(ev->name, "bench:", 6) ? ev->name : ev->name + 6;
        snprintf(g->name, sizeof(g->name), "%.31s", nm);
        break;
    }
    case BENCH_EV_SERVE_START:
        p->t_serve_start = ev->t_ns;
        p->n_requests_planned = (int)ev->a;
        break;
    case BENCH_EV_SERVE_END: p->t_serve_end = ev->t_ns; break;
    case BENCH_EV_KV_SAMPLE: {
        if (UT_VEC_RESERVE(p->kvs, p->cap_kvs, p->n_kvs + 1)) break;
        const int64_t *x = ev->x;
        p->kvs[p->n_kvs++] = (rn_kv_sample){
            .t_ns = ev->t_ns, .step = ev->a, .tokens = ev->b, .reserved = x[BENCH_KVS_RESERVED], .live = x[BENCH_KVS_LIVE],
            .cached = x[BENCH_KVS_CACHED],
            .wasted = x[BENCH_KVS_WASTED], .running = (int)x[BENCH_KVS_RUNNING], .batch = (int)x[BENCH_KVS_BATCH],
            .waiting = (int)x[BENCH_KVS_WAITING]};
        break;
    }
    case BENCH_EV_REQUEST: {
        if (UT_VEC_RESERVE(p->reqs, p->cap_reqs, p->n_reqs + 1)) break;
        const int64_t *x = ev->x;
        p->reqs[p->n_reqs++] = (rn_request){
            .id = ev->a, .n_out = ev->b, .arrival_ns = x[BENCH_RQ_ARRIVAL_NS], .admit_ns = x[BENCH_RQ_ADMIT_NS],
            .first_ns = x[BENCH_RQ_FIRST_NS], .end_ns = ev->t_ns, .n_prompt = x[BENCH_RQ_PROMPT],
            .prefix_reused = x[BENCH_RQ_PREFIX_REUSED], .prefilled = x[BENCH_RQ_PREFILLED],
            .preemptions = x[BENCH_RQ_PREEMPTIONS], .waited = x[BENCH_RQ_WAITED], .turn = x[BENCH_RQ_TURN],
            .session = x[BENCH_RQ_SESSION]};
        break;
    }
    case BENCH_EV_REQ_TOKENS: {
        /* the tokens of the request just reported, in order */
        rn_request *r = p->n_reqs ? &p->reqs[p->n_reqs - 1] : NULL;
        int m = (int)ev->x[0];
        if (!r || r->id != ev->a || ev->b != r->n_tok || m < 1 || m > BENCH_REQ_TOKENS_PER_EVENT || r->n_tok + m > r->n_out) break;
        int64_t *n = realloc(r->tok_ns, (size_t)(r->n_tok + m) * sizeof(*n));
        if (!n) break;
        memcpy(n + r->n_tok, ev->x + 1, (size_t)m * sizeof(*n));
        r->tok_ns = n;
        r->n_tok += m;
        break;
    }
    case BENCH_EV_TARGET:
        p->mem_source = (int)ev->b + 1;
        p->mem_pid = ev->b == BENCH_TGT_LATENCY ? 0 : (pid_t)ev->a;
        if (p->mem_pid && !strcmp(ev->name, "tree") && !p->tree) p->tree = pt_create(p->mem_pid);
        break;
    case BENCH_EV_REQ_TOKEN: {
        if (p->n_rtok == p->cap_rtok) {
            int cap = p->cap_rtok ? p->cap_rtok * 2 : 1024;
            rn_req_token *n = realloc(p->rtok, (size_t)cap * sizeof(*n));
            if (!n) break;
            p->rtok = n;
            p->cap_rtok = cap;
        }
        p->rtok[p->n_rtok++] = (rn_req_token){.req = ev->a, .id = ev->b, .t_ns = ev->t_ns};
        break;
    }
    case BENCH_EV_REQ_FAIL: {
        rn_req_fail *n = realloc(p->rfail, (size_t)(p->n_rfail + 1) * sizeof(*n));
        if (!n) break;
        p->rfail = n;
        rn_req_fail *f = &n[p->n_rfail++];
        f->req = ev->a;
        f->kind = ev->b;
        snprintf(f->msg, sizeof(f->msg), "%.*s", (int)sizeof(ev->name) - 1, ev->name);
        break;
    }
    case BENCH_EV_SCRAPE: rn_scrape_event(&p->scrape, ev); break;
    case BENCH_EV_REQ_END: {
        if (UT_VEC_RESERVE(p->rend, p->cap_rend, p->n_rend + 1)) break;
        const int64_t *x = ev->x;
        p->rend[p->n_rend++] = (rn_req_end){
            .req = ev->a, .kind = ev->b, .arrival_ns = x[BENCH_RE_ARRIVAL_NS], .sent_ns = x[BENCH_RE_SENT_NS],
            .first_ns = x[BENCH_RE_FIRST_NS], .end_ns = ev->t_ns, .prompt = x[BENCH_RE_PROMPT],
            .prompt_reported = x[BENCH_RE_PROMPT_REPORTED], .output = x[BENCH_RE_OUTPUT],
            .output_reported = x[BENCH_RE_OUTPUT_REPORTED], .http_status = x[BENCH_RE_HTTP_STATUS]};
        break;
    }
    case BENCH_EV_ERROR:
        rn_setf(p->reason, sizeof(p->reason), "worker: %.*s", (int)sizeof(ev->name) - 1, ev->name);
        p->err_code = (int)ev->a;
        break;
    default:
        rn_setf(p->reason, sizeof(p->reason), "worker sent an unknown event type %u", ev->type);
        break;
    }
    if (ph >= 0 && (ev->flags & BENCH_EV_ACK)) p->waiting = ph;
}

/* Reads what is in the pipe; sets eof at end of file. */
static void rn_read_events(rn_proc *p) {
    unsigned char buf[sizeof(bench_event) * 64];
    for (;;) {
        memcpy(buf, p->carry, p->carry_len);
        ssize_t r = read(p->ev_fd, buf + p->carry_len, sizeof(buf) - p->carry_len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0 || errno != EAGAIN) p->eof = 1;
            return;
        }
        size_t len = p->carry_len + (size_t)r, off = 0;
        for (; off + sizeof(bench_event) <= len; off += sizeof(bench_event)) {
            bench_event ev;
            memcpy(&ev, buf + off, sizeof(ev));
            rn_event(p, &ev);
        }
        p->carry_len = len - off;
        memcpy(p->carry, buf + off, p->carry_len);
        if ((size_t)r < sizeof(buf) - p->carry_len) return;     /* drained */
    }
}

/* The last non-empty line of the worker's stderr, for a failure's reason. */
static void rn_log_tail(const char *path, char *out, size_t len, int *sanitizer) {
    out[0] = 0;
    *sanitizer = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "Sanitizer") || strstr(line, "runtime error:")) {
            if (!*sanitizer) {
                line[strcspn(line, "\n")] = 0;
                rn_setf(out, len, "%s", line);
            }
            *sanitizer = 1;
            continue;
        }
        size_t n = strcspn(line, "\n");
        line[n] = 0;
        if (n && !*sanitizer) rn_setf(out, len, "%s", line);
    }
    fclose(f);
}

/* A SIGKILL bench did not send: the kernel's OOM killer where the worker's memory cgroup
 * counted one meanwhile, something else where it counted none, a guess where there is no
 * cgroup to read (a chroot without /sys/fs/cgroup). */
static void rn_sigkill_reason(rn_proc *p) {
    int64_t now = mc_oom_kills(&p->memcg);
    char limit[64] = "no limit";
    if (p->memcg.limit) snprintf(limit, sizeof(limit), "limit %.1f MiB", (double)p->memcg.limit / 1048576.0);
    if (now > p->memcg.oom_kills) {
        p->status = RN_OOM;
        rn_setf(p->reason, sizeof(p->reason), "killed by the kernel's OOM killer: memory cgroup %s (%s) counted %lld OOM kill(s) "
                "during the repetition", p->memcg.dir, limit, (long long)(now - p->memcg.oom_kills));
    } else if (now >= 0) {
        p->status = RN_CRASH;
        rn_setf(p->reason, sizeof(p->reason), "killed by a SIGKILL that bench did not send, and not by the OOM killer (memory "
                "cgroup %s counted none): another process sent it", p->memcg.dir);
    } else {
        p->status = RN_OOM;
        rn_setf(p->reason, sizeof(p->reason), "killed by a SIGKILL that bench did not send: most likely the kernel's OOM killer "
                "(no memory cgroup to confirm it; see dmesg)");
    }
}

static void rn_reap(rn_proc *p, double timeout_s) {
    if (p->reaped) return;
    int st = 0;
    while (wait4(p->pid, &st, 0, &p->ru) < 0 && errno == EINTR) {}
    p->wstatus = st;
    p->reaped = 1;
    pm_close(&p->pm);
    char tail[400], why[512];
    int san;
    rn_log_tail(p->log_path, tail, sizeof(tail), &san);
    if (p->killed_by_us == RN_TIMEOUT || p->killed_by_us == RN_INTERRUPTED) {
        p->status = (rn_status)p->killed_by_us;
        if (p->status == RN_TIMEOUT)
            rn_setf(p->reason, sizeof(p->reason), "killed after the scenario's timeout_s (%g s)", timeout_s);
        else
            rn_setf(p->reason, sizeof(p->reason), "stopped by Ctrl-C");
        return;
    }
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        if (sig == SIGKILL) {
            rn_sigkill_reason(p);
        } else {
            p->status = RN_CRASH;
            rn_setf(why, sizeof(why), "signal %d (%s)%s%s", sig, strsignal(sig), tail[0] ? ": " : "", tail);
            rn_setf(p->reason, sizeof(p->reason), "%s", why);
        }
    } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
        p->status = san ? RN_CRASH : RN_EXIT;
        if (san || !p->reason[0])
            rn_setf(p->reason, sizeof(p->reason), "exit code %d%s%s", WEXITSTATUS(st), tail[0] ? ": " : "", tail);
        else {
            rn_setf(why, sizeof(why), "exit code %d: %s", WEXITSTATUS(st), p->reason);
            rn_setf(p->reason, sizeof(p->reason), "%s", why);
        }
        /* A memory limit that refuses instead of killing (ulimit -v, RLIMIT_AS): the
         * worker reports the failed allocation, with its code, and exits. That is the same
         * cause as an OOM kill, and is recorded as one. */
        if (!san && p->err_code == BENCH_ERR_NOMEM) {
            p->status = RN_OOM;
            rn_setf(why, sizeof(why), "out of memory (an allocation was refused: a memory limit such as ulimit -v, "
                    "or the machine's memory): %s", p->reason);
            rn_setf(p->reason, sizeof(p->reason), "%s", why);
        }
    } else if (!p->t_done) {
        p->status = RN_ERROR;
        rn_setf(p->reason, sizeof(p->reason), "exited with status 0 before DONE");
    } else {
        p->status = RN_OK;
    }
}

static void rn_kill(rn_proc *p, rn_status why) {
    if (p->reaped || p->pid <= 0) return;
    if (!p->killed_by_us) p->killed_by_us = (int)why;
    kill(p->pid, SIGKILL);
}

/* Acks a boundary once every live worker of the repetition has reached it. */
static void rn_barrier(const scenario *s, const rn_model_files *mf, rn_run *run) {
    int ph = INT_MAX;
    for (int i = 0; i < run->nproc; i++) {
        rn_proc *p = &run->procs[i];
        if (p->eof || p->killed_by_us) continue;
        if (p->waiting < 0) return;
        if (p->waiting < ph) ph = p->waiting;
    }
    if (ph == INT_MAX) return;
    en_run_mark(&run->energy, ph, rn_now_ns());
    for (int i = 0; i < run->nproc; i++) {
        rn_proc *p = &run->procs[i];
        if (p->eof || p->killed_by_us || p->waiting != ph) continue;
        rn_snapshot(s, mf, p, ph);
    }
    for (int i = 0; i < run->nproc; i++) {
        rn_proc *p = &run->procs[i];
        if (p->eof || p->killed_by_us || p->waiting != ph) continue;
        p->waiting = -1;
        if (write(p->ack_fd, "a", 1) != 1) { /* the worker is gone; its EOF follows */ }
    }
}

/* ---- one repetition ---- */

static void rn_run_free(rn_run *run) {
    for (int i = 0; i < run->nproc; i++) {
        rn_proc *p = &run->procs[i];
        free(p->tok_ns);
        free(p->tok_id);
        free(p->counters);
        free(p->ranges);
        free(p->tl);
        free(p->kvs);
        for (int k = 0; k < p->n_reqs; k++) free(p->reqs[k].tok_ns);
        free(p->reqs);
        free(p->rtok);
        free(p->rfail);
        free(p->scrape.v);
        free(p->rend);
        pt_free(p->tree);
    }
    en_run_free(&run->energy);
    free(run->procs);
    run->procs = NULL;
    run->nproc = 0;
}

static void rn_cache(const scenario *s, const rn_model_files *mf, const sc_variant *v, rn_run *run) {
    int cold = sc_pick(s, v, SC_AX_CACHE)->ival == SC_CACHE_COLD;
    char err[512];
    run->cache_ok = 1;
    /* warm: evicted, then read, before every repetition. What filled the page cache decides
     * how the file's pages fault in under mmap (the folios that writing the model, a cold
     * repetition's faults or read(2) leave differ), so reading the pages found in place would
     * make warm mean something else after each of them (pagecache.h). */
    for (int i = 0; i < mf->n; i++) {
        if ((cold ? pc_evict : pc_warm_reread)(mf->path[i], err, sizeof(err))) {
            run->cache_ok = 0;
            rn_setf(run->invalid_reason, sizeof(run->invalid_reason), "%s: %s", cold ? "cold" : "warm", err);
            return;
        }
    }
    for (int i = 0; i < mf->n; i++) {
        uint64_t r, t;
        if (pc_residency(mf->path[i], &r, &t, err, sizeof(err))) {
            run->cache_ok = 0;
            rn_setf(run->invalid_reason, sizeof(run->invalid_reason), "residency: %s", err);
            return;
        }
        run->resident_pages += r;
        run->total_pages += t;
    }
    double pct = run->total_pages ? 100.0 * (double)run->resident_pages / (double)run->total_pages : 0;
    int other = (cold && pct > RN_COLD_MAX_PCT) || (!cold && pct < RN_WARM_MIN_PCT) ? mu_other(&mf->use) : 0;
    if (other) {
        /* another bench's reads or evictions, not this machine's memory, moved the pages */
        run->cache_ok = 0;
        rn_setf(run->invalid_reason, sizeof(run->invalid_reason),
                 "%s cache: %.1f%% of the model's pages resident (want %s %.0f%%), and another bench (pid %d) uses "
                 "the model file now: run one at a time", cold ? "cold" : "warm", pct, cold ? "<=" : ">=",
                 cold ? RN_COLD_MAX_PCT : RN_WARM_MIN_PCT, other);
    } else if (cold && pct > RN_COLD_MAX_PCT) {
        run->cache_ok = 0;
        rn_setf(run->invalid_reason, sizeof(run->invalid_reason),
                 "cold cache: %.1f%% of the model's pages still resident after POSIX_FADV_DONTNEED (want <= %.0f%%); "
                 "another process may map the file", pct, RN_COLD_MAX_PCT);
    } else if (!cold && pct < RN_WARM_MIN_PCT) {
        run->cache_ok = 0;
        rn_setf(run->invalid_reason, sizeof(run->invalid_reason),
                 "warm cache: only %.1f%% of the model's pages resident after reading it (want >= %.0f%%); "
                 "is memory short?", pct, RN_WARM_MIN_PCT);
    }
}

static int rn_one(const scenario *s, const rn_model_files *mf, const rn_opts *o, rn_run *run, const char *spec_path) {
    const sc_variant *v = &s->variants[run->variant];
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    run->wall_start_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
    sl_read(&run->load_start);
    int64_t t0 = rn_now_ns();
    rn_cache(s, mf, v, run);
    run->nproc = s->processes;
    run->procs = calloc((size_t)run->nproc, sizeof(*run->procs));
    if (!run->procs) return -1;
    for (int i = 0; i < run->nproc; i++) {
        rn_proc *p = &run->procs[i];
        p->waiting = -1;
        p->ev_fd = p->ack_fd = -1;
        p->pm.status_fd = p->pm.rollup_fd = -1;
        snprintf(p->log_path, sizeof(p->log_path), "%s/logs/v%d-r%d-p%d.log", o->out_dir, run->variant, run->rep, i);
        rn_spawn(s, o, p, spec_path);
        en_run_pid(&run->energy, p->pid);
    }
    int64_t interval = (s->metrics & SC_M_TIMELINE) && s->sample_ms > 0 ? (int64_t)(s->sample_ms * 1e6) : 0;
    int64_t deadline = rn_now_ns() + (int64_t)(s->timeout_s * 1e9);
    int64_t next_sample = rn_now_ns();
    struct pollfd *pfd = calloc((size_t)run->nproc, sizeof(*pfd));
    int *who = calloc((size_t)run->nproc, sizeof(*who));
    if (!pfd || !who) {
        for (int i = 0; i < run->nproc; i++) rn_kill(&run->procs[i], RN_ERROR);
    }
    for (;;) {
        int live = 0;
        for (int i = 0; i < run->nproc; i++) live += !run->procs[i].reaped;
        if (!live) break;
        int64_t now = rn_now_ns();
        if (o->interrupted && *o->interrupted)
            for (int i = 0; i < run->nproc; i++) rn_kill(&run->procs[i], RN_INTERRUPTED);
        if (now >= deadline)
            for (int i = 0; i < run->nproc; i++) rn_kill(&run->procs[i], RN_TIMEOUT);
        if (interval && now >= next_sample) {
            /* none after a worker's DONE: what it does then (the bandwidth bound) is not the workload */
            for (int i = 0; i < run->nproc; i++)
                if (!run->procs[i].snap[RN_PH_END].taken) rn_take_sample(s, &run->procs[i], now);
            en_run_sample(&run->energy, now);
            next_sample += interval;
            if (next_sample <= now) next_sample = now + interval;
        }
        int n = 0;
        for (int i = 0; pfd && i < run->nproc; i++) {
            rn_proc *p = &run->procs[i];
            if (p->eof) continue;
            pfd[n].fd = p->ev_fd;
            pfd[n].events = POLLIN;
            who[n++] = i;
        }
        int64_t wake = deadline;
        if (interval && next_sample < wake) wake = next_sample;
        int64_t wait_ns = wake - now;
        if (wait_ns < 0) wait_ns = 0;
        /* a killed worker is reaped once its pipe reports EOF; one that never had a pipe is reaped here */
        if (n == 0) {
            for (int i = 0; i < run->nproc; i++) rn_reap(&run->procs[i], s->timeout_s);
            continue;
        }
        struct timespec ts = {.tv_sec = wait_ns / 1000000000, .tv_nsec = wait_ns % 1000000000};
        int r = ppoll(pfd, (nfds_t)n, &ts, NULL);
        if (r < 0 && errno != EINTR) break;
        for (int k = 0; r > 0 && k < n; k++) {
            if (!pfd[k].revents) continue;
            rn_proc *p = &run->procs[who[k]];
            rn_read_events(p);
            if (p->eof) {
                close(p->ev_fd);
                p->ev_fd = -1;
                rn_reap(p, s->timeout_s);
            }
        }
        rn_barrier(s, mf, run);
    }
    free(pfd);
    free(who);
    run->status = RN_OK;
    for (int i = 0; i < run->nproc; i++) {
        rn_proc *p = &run->procs[i];
        if (p->ev_fd >= 0) close(p->ev_fd);
        if (p->ack_fd >= 0) close(p->ack_fd);
        p->ev_fd = p->ack_fd = -1;
        if (p->perf_opened) pe_close(&p->perf);
        pm_close(&p->pm);
        if (p->status != RN_OK && run->status == RN_OK) run->status = p->status;
    }
    run->seconds = (double)(rn_now_ns() - t0) * 1e-9;
    sl_read(&run->load_end);
    return 0;
}

int rn_execute(const scenario *s, const rn_model_files *mf, const rn_opts *o, rn_result *res, char *err, size_t errlen) {
    memset(res, 0, sizeof(*res));
    /* before the timed repetitions: a missing valgrind must not waste them */
    if ((s->metrics & SC_M_CALLGRIND) && cg_available(err, errlen)) return -1;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/logs", o->out_dir);
    if (ut_mkdirs(path)) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    snprintf(path, sizeof(path), "%s/specs", o->out_dir);
    if (ut_mkdirs(path)) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    /* one spec file per variant: `bench worker --spec FILE` reruns it by hand (perf, valgrind) */
    for (int i = 0; i < s->n_variants; i++) {
        if (!s->variants[i].selected) continue;
        char *spec = rn_worker_spec(s, &s->variants[i]);
        snprintf(path, sizeof(path), "%s/specs/v%d.json", o->out_dir, i);
        int bad = !spec || rn_write_file(path, spec);
        free(spec);
        if (bad) return bench_errf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    }
    int reps = s->warmup + s->repetitions;
    for (int rep = 0; rep < reps; rep++)
        for (int vi = 0; vi < s->n_variants; vi++)
            res->total_planned += s->variants[vi].selected && (!o->keep || o->keep(o->keep_user, vi, rep));
    res->runs = calloc((size_t)(res->total_planned > 0 ? res->total_planned : 1), sizeof(*res->runs));
    if (!res->runs) return bench_errf(err, errlen, "out of memory");
    res->cap_runs = res->total_planned;
    /* once for the run: NVML's start-up is slow, and a counter is read against its last value */
    if (!(res->energy = en_open(NULL, NULL))) return bench_errf(err, errlen, "out of memory");
    /* a worker that dies between events must not kill bench with SIGPIPE on the ack */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    for (int rep = 0; rep < reps && !res->interrupted && !res->stopped; rep++) {
        for (int vi = 0; vi < s->n_variants; vi++) {
            if (!s->variants[vi].selected || (o->keep && !o->keep(o->keep_user, vi, rep))) continue;
            if (o->interrupted && *o->interrupted) {
                res->interrupted = 1;
                break;
            }
            rn_run *run = &res->runs[res->n_runs];
            run->variant = vi;
            run->rep = rep;
            run->warmup = rep < s->warmup;
            en_run_begin(&run->energy, res->energy);
            snprintf(path, sizeof(path), "%s/specs/v%d.json", o->out_dir, vi);
            if (rn_one(s, mf, o, run, path)) {
                sigaction(SIGPIPE, &old, NULL);
                return bench_errf(err, errlen, "out of memory");
            }
            int stop = o->interrupted && *o->interrupted;
            /* an interrupted repetition is not a result: drop it; one that finished just
             * before the signal is (docs/reliability.md: no finished repetition is lost) */
            if (run->status == RN_INTERRUPTED || (stop && run->status != RN_OK)) {
                res->interrupted = 1;
                rn_run_free(run);
                memset(run, 0, sizeof(*run));
                break;
            }
            /* a worker that said nothing leaves no log: 16 empty files per run hid the ones that matter */
            for (int pi = 0; pi < run->nproc; pi++) {
                struct stat st;
                rn_proc *p = &run->procs[pi];
                if (p->log_path[0] && !stat(p->log_path, &st) && st.st_size == 0 && !unlink(p->log_path)) p->log_path[0] = 0;
            }
            res->n_runs++;
            if (o->on_run) o->on_run(o->user, run, res->n_runs, res->total_planned);
            if (stop) {
                res->interrupted = 1;
                break;
            }
            if (o->fail_fast && run->status != RN_OK) {
                res->stopped = 1;
                break;
            }
        }
    }
    sigaction(SIGPIPE, &old, NULL);
    snprintf(path, sizeof(path), "%s/logs", o->out_dir);
    rmdir(path); /* only when every log was empty */
    /* instruction counts are deterministic: one more repetition per variant, after the timed ones */
    if ((s->metrics & SC_M_CALLGRIND) && !res->interrupted && !res->stopped &&
        cg_run_variants(s, o->worker_exe, o->out_dir, o->interrupted, &res->cg))
        return bench_errf(err, errlen, "out of memory");
    /* so are the accuracy figures: one untimed pass per variant, after the timed ones */
    if ((s->metrics & SC_M_ACCURACY) && !res->interrupted && !res->stopped &&
        ar_run_variants(s, o->worker_exe, o->out_dir, o->interrupted, &res->acc))
        return bench_errf(err, errlen, "out of memory");
    return 0;
}

void rn_result_free(rn_result *res) {
    for (int r = 0; r < res->n_runs; r++) rn_run_free(&res->runs[r]);
    free(res->runs);
    free(res->cg);
    free(res->acc);
    en_close(res->energy);
    memset(res, 0, sizeof(*res));
}
