/* The runner: expands a scenario into repetitions, runs each in fresh
 * `bench worker` processes and records what they did.
 *
 * Order: the warm-up repetitions of every variant, then repetition 1 of every
 * variant, repetition 2 of every variant... (A B A B, never A A B B), so drift
 * of the machine spreads over all variants alike.
 *
 * One repetition:
 *   1. page cache: cold evicts the model files, warm reads them; mincore then
 *      gives the residency, which must be <= 5% (cold) or >= 95% (warm), else
 *      the repetition is marked invalid, with the reason, and left out of the
 *      statistics;
 *   2. `processes` workers are forked; each waits on a pipe until the parent has
 *      opened its perf counters, then execs `bench worker`;
 *   3. a poll loop reads the workers' events (events.h), samples
 *      /proc/<pid>/status (+ smaps_rollup) every sample_ms, and at each phase
 *      boundary reads smaps, faults and perf counters before acking;
 *   4. wait4 gives the exit status and rusage. A crash, a non-zero exit, a
 *      timeout or a SIGKILL that bench did not send (the OOM killer) is
 *      recorded with its cause; the run goes on unless fail_fast.
 */
#ifndef BENCH_RUNNER_H
#define BENCH_RUNNER_H

#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "harness/parent/sysload.h"
#include "harness/parent/energy.h"
#include "harness/parent/perfev.h"
#include "harness/parent/memcg.h"
#include "harness/parent/modeluse.h"
#include "harness/parent/procmem.h"
#include "harness/parent/proctree.h"
#include "harness/scenario/scenario.h"
#include "harness/parent/accuracy_run.h"
#include "harness/parent/callgrind.h"

enum { RN_PH_START, RN_PH_LOAD, RN_PH_PREFILL, RN_PH_END, RN_PH_COUNT };
const char *rn_phase_name(int ph);          /* "start", "load", "prefill", "end" */

/* What a worker process ended as. */
typedef enum rn_status {
    RN_PENDING = 0,
    RN_OK,
    RN_CRASH,           /* died of a signal, or a sanitizer report */
    RN_EXIT,            /* exited non-zero */
    RN_TIMEOUT,         /* killed by bench after timeout_s */
    RN_OOM,             /* SIGKILL that bench did not send */
    RN_INTERRUPTED,     /* killed by bench on Ctrl-C */
    RN_ERROR,           /* bench could not start it, or it broke the protocol */
} rn_status;
const char *rn_status_name(rn_status s);

typedef struct rn_sample {
    int64_t t_ns;                               /* CLOCK_MONOTONIC */
    int64_t rss, hwm, anon, file, shmem, pss;   /* KiB; pss -1 when not sampled */
} rn_sample;

typedef struct rn_snap {
    int taken;
    int64_t t_ns;
    pm_status st;
    int64_t pss_kib;                /* -1: unavailable */
    int has_smaps;
    pm_smaps smaps;
    int has_faults;
    uint64_t minflt, majflt;        /* /proc/<pid>/stat, cumulative */
    int perf_ok[PE_MAX];
    uint64_t perf[PE_MAX];          /* cumulative */
} rn_snap;

/* A serving run's scheduler step (events.h: KV_SAMPLE). */
typedef struct rn_kv_sample {
    int64_t t_ns, step, tokens;             /* tokens: positions run so far */
    int64_t reserved, live, cached, wasted; /* B, engine.h: engine_kv_memory */
    int running, batch, waiting;
} rn_kv_sample;

/* A serving run's finished request (events.h: REQUEST). */
typedef struct rn_request {
    int64_t id, n_out;
    int64_t arrival_ns, admit_ns, first_ns, end_ns;     /* CLOCK_MONOTONIC */
    int64_t n_prompt, prefix_reused, prefilled, preemptions, waited;
    int64_t turn, session;      /* a conversation's turn (0: the first) and the conversation */
    int64_t *tok_ns;            /* (n_tok) its tokens' times (REQ_TOKENS); NULL without */
    int n_tok;
} rn_request;

/* An http target's token arrival (events.h: REQ_TOKEN) and failed request (REQ_FAIL). */
typedef struct rn_req_token {
    int64_t req, id, t_ns;
} rn_req_token;

typedef struct rn_req_fail {
    int64_t req, kind;      /* kind: harness/net/httpc.h HC_ERR_* */
    char msg[224];          /* as the event carries it (events.h) */
} rn_req_fail;

/* An http target's reads of the server's /metrics (events.h SCRAPE, harness/child/scrape.h). */
typedef struct rn_scrape_sample {
    int64_t t_ns;
    int series;             /* index into rn_scrape.series */
    int how;                /* BENCH_SCR_* */
    double value;           /* NaN when absent */
} rn_scrape_sample;

typedef struct rn_scrape {
    int n_series;
    char series[16][96];    /* the block's series in order (TM_MAX_SERIES, harness/scenario/target_metrics.h) */
    int n, cap;
    rn_scrape_sample *v;    /* (n) every series of every read, in order */
    int n_reads, n_failed;  /* reads that answered, and that failed */
    char first_failure[224];
} rn_scrape;
/* An http target's request as it ended, ok or failed (events.h: REQ_END). */
typedef struct rn_req_end {
    int64_t req, kind;                          /* kind: HC_OK or HC_ERR_* (harness/net/httpc.h) */
    int64_t arrival_ns, sent_ns, first_ns, end_ns;  /* CLOCK_MONOTONIC; sent_ns, first_ns 0: never */
    int64_t prompt, prompt_reported, output, output_reported;  /* tokens counted, and the server's usage (-1: none) */
    int64_t http_status;                        /* 0: no answer */
} rn_req_end;

typedef struct rn_counter {
    char name[96], unit[16];
    double value;
    int cls, better;        /* as the module declared them (BENCH_CTR_*, BENCH_BETTER_*: engines/abi/module.h) */
} rn_counter;

typedef struct rn_proc {
    pid_t pid;
    int ev_fd, ack_fd;
    pm_proc pm;
    pe_set perf;
    int perf_opened;
    /* events, CLOCK_MONOTONIC ns; 0 = not seen */
    int64_t t_spawn, t_hello, t_load_start, t_load_end, t_prefill_start, t_prefill_end;
    int64_t t_decode_start, t_decode_end, t_done;
    int n_prompt;
    int n_tok, cap_tok;
    int64_t *tok_ns;                /* (n_tok) [0]: first token (prefill end), then each decoded token */
    int32_t *tok_id;                /* (n_tok) */
    int n_counters, cap_counters;
    rn_counter *counters;           /* (n_counters) the modules' own */
    int n_ranges, cap_ranges;
    pm_range *ranges;               /* (n_ranges) regions the worker reported by address */
    int n_tl, cap_tl;
    rn_sample *tl;                  /* (n_tl) the timeline */
    /* a serving run (harness/child/serve.h); t_serve_start 0: not one */
    int64_t t_serve_start, t_serve_end;
    int n_requests_planned;
    int n_kvs, cap_kvs;
    rn_kv_sample *kvs;              /* (n_kvs) one per scheduler step */
    int n_reqs, cap_reqs;
    rn_request *reqs;               /* (n_reqs) in the order they finished */
    /* an http target (events.h TARGET): the memory read is the server's, mem_pid, not the
     * worker's; mem_source BENCH_TGT_* + 1 (0: the worker's own, not an http run) */
    pid_t mem_pid;
    int mem_source;
    int n_rtok, cap_rtok;
    rn_req_token *rtok;             /* (n_rtok) every token's arrival, request by request */
    int n_rfail;
    rn_req_fail *rfail;             /* (n_rfail) */
    rn_scrape scrape;               /* the target's "metrics" block; n_series 0: none */
    pt_tree *tree;                  /* memory "tree" (proctree.h): the server's tree, summed; NULL: not asked */
    int n_rend, cap_rend;
    rn_req_end *rend;               /* (n_rend) every request, in the order they ended */
    rn_snap snap[RN_PH_COUNT];
    int waiting;                    /* phase whose ack it waits for, or -1 */
    int eof, reaped, killed_by_us;
    int wstatus;
    mc_state memcg;                 /* its memory cgroup at spawn: an unsent SIGKILL is an OOM kill if its count grew */
    struct rusage ru;
    rn_status status;
    char reason[512];
    int err_code;                   /* the code of the worker's ERROR event (BENCH_ERR_*), 0: none */
    char log_path[512];             /* its stderr */
    /* partial event bytes between reads */
    size_t carry_len;
    unsigned char carry[512];
} rn_proc;

typedef struct rn_run {
    int variant;                    /* index into scenario.variants */
    int rep;                        /* 0-based, warm-up repetitions first */
    int warmup;                     /* 1: left out of the statistics */
    int64_t wall_start_ms;          /* unix time */
    double seconds;                 /* wall time of the repetition */
    int cache_ok;                   /* residency within bounds */
    uint64_t resident_pages, total_pages;
    char invalid_reason[512];       /* "" when valid */
    rn_status status;               /* RN_OK when every process is */
    int nproc;
    rn_proc *procs;                 /* (nproc) */
    sl_snap load_start, load_end;   /* the machine's load around the repetition (sysload.h) */
    en_run energy;                  /* the machine's energy at each boundary, and its timeline (energy.h) */
} rn_run;

typedef struct rn_model_files {
    int n;
    char **path;                    /* canonical (realpath) paths: what smaps prints */
    uint64_t bytes;                 /* weights bytes of the model */
    mu_mark use;                    /* this run's mark on the model file (modeluse.h) */
} rn_model_files;

typedef struct rn_opts {
    const char *worker_exe;         /* the `bench` binary to exec */
    const char *out_dir;            /* run directory: specs/ and logs/ go there */
    int fail_fast;
    /* 1: the workers' address space randomized as the system does; 0 (bench run's default):
     * not (ADDR_NO_RANDOMIZE), since where the libraries land moves the file-backed RSS that
     * fault-around maps by up to half a MiB from run to run, a change no variant made */
    int keep_aslr;
    volatile sig_atomic_t *interrupted;     /* set by a SIGINT handler; NULL: none */
    /* called after every repetition (may be NULL): progress lines, incremental results */
    void (*on_run)(void *user, const rn_run *run, int done, int total);
    void *user;
    /* (optional) 1 when repetition rep of variant runs here; NULL: all of them. A shard of a
     * sharded run (harness/scenario/shard.h) keeps its own cells and their warm-ups. */
    int (*keep)(void *user, int variant, int rep);
    void *keep_user;
} rn_opts;

typedef struct rn_result {
    int n_runs, cap_runs;
    rn_run *runs;
    int interrupted;                /* Ctrl-C stopped it */
    int stopped;                    /* --fail-fast stopped it */
    int total_planned;
    cg_counts *cg;                  /* (scenario n_variants) instructions:callgrind; NULL when not asked */
    ar_figures *acc;                /* (scenario n_variants) the accuracy pass; NULL when not asked */
    en_reader *energy;              /* the energy sources, open for the run (energy.h) */
} rn_result;

/* Makes the model ready: a synth spec is generated into cache_dir (once) and
 * s->model_path set; then the model's headers are read for its files. Leaves this run's
 * mark on the model file in cache_dir/in-use (modeluse.h), and says on stderr when another
 * bench uses the same file now. */
int rn_prepare_model(scenario *s, const char *cache_dir, rn_model_files *mf, char *err, size_t errlen);
void rn_model_files_free(rn_model_files *mf);

/* Runs every selected variant x repetition. Returns 0, or -1 with err when
 * nothing could run at all (a failed repetition is not an error). */
int rn_execute(const scenario *s, const rn_model_files *mf, const rn_opts *o, rn_result *res,
               char *err, size_t errlen);
void rn_result_free(rn_result *res);

/* The worker spec (JSON text) of one variant; the caller frees it. */
char *rn_worker_spec(const scenario *s, const sc_variant *v);

int64_t rn_now_ns(void);

#endif
