/* bench run: a scenario from file to results directory and table. */
#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "harness/cli/cliargs.h"
#include "harness/report/escape.h"
#include "harness/report/locations.h"
#include "harness/parent/outlock.h"
#include "harness/parent/perfev.h"
#include "harness/report/plot.h"
#include "harness/report/results.h"
#include "harness/parent/runner.h"
#include "harness/scenario/kind.h"
#include "harness/scenario/scenario.h"
#include "harness/scenario/shard.h"
#include "util/ut_fs.h"

static volatile sig_atomic_t run_interrupted;

static void run_on_signal(int sig) {
    (void)sig;
    run_interrupted = 1;
}

static void run_usage(FILE *f) {
    fprintf(f,
            "usage: bench run SCENARIO.json [--out DIR [--force]] [--only key=val,...] [--repeat N] [--quick]\n"
            "                 [--device cpu|cuda] [--json] [--fail-fast] [--shard i/N] [--allow-read DIR]...\n"
            "                 [--allow-launch]\n\n"
            "Runs every variant of a scenario's matrix, each repetition in a fresh `bench worker`\n"
            "process, interleaved (A B A B ...). Measures load time, TTFT, TPOT, inter-token latency,\n"
            "RSS/PSS timelines and per-region memory (weights, KV, scratch, model file), faults per\n"
            "phase, perf counters and the modules' counters; then prints a table of medians with\n"
            "95%% confidence intervals and writes results.json, results.csv and timelines/.\n\n"
            "  --out DIR        write the results into DIR (default RESULTS/<scenario>/<UTC time>-<commit>,\n"
            "                   RESULTS below); a folder that holds a run is refused\n"
            "  --force          with --out: empty the folder's earlier run first\n"
            "  --only k=v,...   run only the variants whose axis k (%s)\n"
            "                   is v (a label or a name: repack=false); several values of one key are alternatives\n"
            "  --repeat N       N measured repetitions instead of the scenario's\n"
            "  --quick          1 repetition, no warm-up: a smoke test, not a measurement\n"
            "  --device D       run every variant on device D (in place of the scenario's device axis):\n"
            "                   the loader and kv names then mean the modules built for D\n"
            "  --json           print the summary as JSON on stdout instead of the table\n"
            "  --fail-fast      stop at the first failed repetition\n"
            "  --aslr           run the workers with address-space randomization as the system has it; by\n"
            "                   default it is off for them, since where the libraries land moves the\n"
            "                   file-backed RSS by up to half a MiB from run to run (environment.worker_aslr)\n"
            "  --shard i/N      run shard i (0-based) of N: its part of the variants x repetitions that\n"
            "                   `bench plan --shards N` shows, with its own warm-ups; results.json records\n"
            "                   the shard and this machine; `bench merge` joins the shards (docs/cluster.md)\n"
            "  --allow-read DIR let the scenario read files under DIR too (repeatable; for scripts:\n"
            "                   $BENCH_ALLOW_READ=DIR1:DIR2). The model, tokenizer, lengths and trace files\n"
            "                   a scenario names must resolve (symlinks and .. followed) under its own\n"
            "                   folder or the current directory (neither counts when it holds ~), or\n"
            "                   the model cache; else nothing runs (docs/scenarios.md)\n"
            "  --allow-launch   let the scenario start the programs its http targets launch\n"
            "                   (target.http.launch; `bench plan` lists them). Without it, or a line\n"
            "                   for each in ~/.config/bench/allow-launch, nothing runs\n"
            "                   (docs/reliability.md)\n\n"
            "Exit status: 0 all repetitions ok; 1 some failed or were invalid (see results.json);\n"
            "2 bad arguments or scenario; 130 interrupted (the finished repetitions are written).\n\n"
            "Where things go, from any directory:\n"
            "  RESULTS      $BENCH_RESULTS, else the results/ folder of the checkout bench was built in\n"
            "  model cache  synth models are generated once into $BENCH_MODEL_CACHE, else\n"
            "               $XDG_CACHE_HOME/bench, else ~/.cache/bench\n"
            "  commit       results.json records the commit bench was built from\n\n"
            "examples:\n"
            "  bench run scenarios/mmap_vs_pread.json\n"
            "  bench run scenarios/mmap_vs_pread.json --only loader=mmap,cache=warm --repeat 10\n"
            "  bench run scenarios/ci.json --quick --json > summary.json\n"
            "  bench run scenarios/kv_prealloc_vs_dynamic.json --device cuda\n", sc_axis_list());
}

typedef struct run_ctx {
    rs_input in;
    int tty;
    int64_t t0;
    char err[1024];
    rm_model model;         /* the results, grown by one record a repetition (rmodel.h) */
    int write_failures;     /* results.json writes that failed (a full disk): the run's exit status says so */
} run_ctx;

/* The repetitions finished and not yet in the model, appended (each once), the summaries made
 * again, and results.json written (when it changed). 0, or -1 with c->err. */
static int run_record(run_ctx *c, const rn_result *res) {
    while (c->model.n_runs < res->n_runs)
        if (rs_append_run(&c->in, c->model.n_runs)) {
            snprintf(c->err, sizeof(c->err), "out of memory recording repetition %d", c->model.n_runs + 1);
            return -1;
        }
    if (rs_summarize(&c->in)) {
        snprintf(c->err, sizeof(c->err), "out of memory summarizing the repetitions");
        return -1;
    }
    if (!rs_write(&c->in, c->err, sizeof(c->err))) return 0;
    c->write_failures++;
    return -1;
}

/* Test hook (BENCH_TEST_HOOKS=1 BENCH_TEST_INTERRUPT_AFTER=K): the run is interrupted, as by
 * Ctrl-C, once K repetitions are done; 0: no hook. */
static int run_interrupt_after(void) {
    const char *hooks = getenv("BENCH_TEST_HOOKS"), *k = getenv("BENCH_TEST_INTERRUPT_AFTER");
    return hooks && !strcmp(hooks, "1") && k ? atoi(k) : 0;
}

static void run_progress(void *user, const rn_run *r, int done, int total) {
    run_ctx *c = user;
    /* the last repetition's write says "complete": when nothing follows it (no accuracy or
     * callgrind pass, no interruption), the closing write finds the file already current */
    c->in.status = done == total ? "complete" : "running";
    if (rs_write_timelines(&c->in, done - 1, c->err, sizeof(c->err)))
        fprintf(stderr, "\nbench run: %s\n", c->err);
    /* results.json after every repetition: a crash of bench itself still leaves the finished ones;
     * the first failure in full; the run goes on (space may come back), the exit status will say it */
    int failures = c->write_failures;
    if (run_record(c, c->in.res) && failures == 0) fprintf(stderr, "\nbench run: %s\n", c->err);
    if (done == run_interrupt_after()) run_interrupted = 1;
    if (!c->tty) return;
    double el = (double)(rn_now_ns() - c->t0) * 1e-9, eta = done ? el / done * (total - done) : 0;
    /* the label is anyone's (a scenario's): its control characters escaped as the table does */
    char raw[128], label[512];
    rs_variant_label(c->in.s, r->variant, raw, sizeof(raw));
    es_term(label, sizeof(label), raw);
    fprintf(stderr, "\r\033[K[%d/%d] %s %s%d %s%s  elapsed %d:%02d  ETA %d:%02d", done, total, label,
            r->warmup ? "warm-up " : "rep ", r->warmup ? r->rep + 1 : r->rep - c->in.s->warmup + 1,
            rn_status_name(r->status), r->cache_ok ? "" : " (invalid)", (int)el / 60, (int)el % 60,
            (int)eta / 60, (int)eta % 60);
    if (done == total) fputc('\n', stderr);
}

typedef struct run_shard {
    sh_plan plan;
    int index;
} run_shard;

static int run_keep(void *user, int variant, int rep) {
    const run_shard *sh = user;
    return sh_keeps(&sh->plan, sh->index, variant, rep);
}

typedef struct run_args {
    const char *file, *out, *only, *device, *shard_arg;
    int repeat, quick, json, fail_fast, force, allow_launch, aslr;
} run_args;

/* The command line into a: -1 to go on, or the exit status to return now (0 for --help). */
static int run_parse(int argc, char **argv, run_args *a) {
    *a = (run_args){0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { run_usage(stdout); return 0; }
        else if (!strcmp(arg, "--out") && v) a->out = argv[++i];
        else if (!strcmp(arg, "--only") && v) a->only = argv[++i];
        else if (!strcmp(arg, "--device") && v) a->device = argv[++i];
        else if (!strcmp(arg, "--shard") && v) a->shard_arg = argv[++i];
        else if (!strcmp(arg, "--allow-read") && v) {
            if (cli_allow_read("run", argv[++i])) return CLI_EXIT_USAGE;
        }
        else if (!strcmp(arg, "--repeat") && v) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 100000) {
                fprintf(stderr, "bench run: --repeat %s: expected a count >= 1\n", argv[i]);
                return 2;
            }
            a->repeat = (int)n;
        }
        else if (!strcmp(arg, "--quick")) a->quick = 1;
        else if (!strcmp(arg, "--json")) a->json = 1;
        else if (!strcmp(arg, "--fail-fast")) a->fail_fast = 1;
        else if (!strcmp(arg, "--force")) a->force = 1;
        else if (!strcmp(arg, "--allow-launch")) a->allow_launch = 1;
        else if (!strcmp(arg, "--aslr")) a->aslr = 1;
        else if (arg[0] != '-' && !a->file) a->file = arg;
        else {
            static const char *const known[] = {"--out", "--only", "--repeat", "--quick", "--device", "--json",
                                                "--fail-fast", "--force", "--shard", "--allow-read", "--allow-launch",
                                                "--aslr", "--help", NULL};
            return cli_bad_arg(stderr, "run", arg, known);
        }
    }
    if (!a->file) {
        fprintf(stderr, "bench run: which scenario? (e.g. bench run scenarios/mmap_vs_pread.json)\n\n");
        run_usage(stderr);
        return 2;
    }
    return -1;
}

/* The results folder into dir: --out (locked, what a killed run left removed, prepared by
 * loc_prepare_out), or a new one named by the time and the commit. 0, or the exit status
 * with the message printed. The lock stays held in *lock_fd (*locked: it was tried). */
static int run_results_dir(const run_args *a, const scenario *s, const run_shard *sh, int n_shards, char *dir,
                           size_t dirlen, int *lock_fd, int *locked) {
    char err[1024];
    if (a->out) {
        snprintf(dir, dirlen, "%s", a->out);
        /* before the model is made: a refusal should cost nothing; and before --force
         * empties the folder, so that it cannot empty one another run is writing to */
        struct stat dst;
        if (!stat(dir, &dst) && S_ISDIR(dst.st_mode)) {
            int lk = ol_lock(dir, lock_fd, err, sizeof(err));
            if (lk < 0) {
                fprintf(stderr, "bench run: %s\n", err);
                return 2;
            }
            if (lk > 0) fprintf(stderr, "bench run: note: %s\n", err);
            *locked = 1;
            int stale = ol_clean_stale(dir);
            if (stale) fprintf(stderr, "bench run: removed %d temporary file%s left in %s by a run that was killed\n", stale, stale == 1 ? "" : "s", dir);
        }
        if (loc_prepare_out(dir, a->force, err, sizeof(err))) {
            fprintf(stderr, "bench run: %s\n", err);
            return 2;
        }
    } else {
        if (a->force) {
            fprintf(stderr, "bench run: --force empties the folder given by --out; without --out each run gets a new folder\n");
            return 2;
        }
        char stamp[32], sha[64], root[PATH_MAX];
        const char *why;
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        loc_commit_short(sha, sizeof(sha));
        loc_results_root(root, sizeof(root), &why);
        if (!strncmp(why, "the current directory", 21)) fprintf(stderr, "bench run: note: results under ./results: %s\n", why);
        int w = a->shard_arg ? snprintf(dir, dirlen, "%s/%s/%s-%s-shard%dof%d", root, s->name, stamp, sha, sh->index, n_shards)
                             : snprintf(dir, dirlen, "%s/%s/%s-%s", root, s->name, stamp, sha);
        if (w >= (int)dirlen) {
            fprintf(stderr, "bench run: results folder name too long under %s\n", root);
            return 1;
        }
    }
    return 0;
}

/* After the repetitions: the summary, results.json, the table (or --json), the figures, and
 * the exit status (130 interrupted, 1 a failed repetition or write, else 0). */
static int run_finish(const run_args *a, const scenario *s, run_ctx *ctx, const rn_result *res, const char *dir) {
    if (ctx->tty && res->n_runs < res->total_planned) fputc('\n', stderr);
    ctx->in.status = res->interrupted ? "interrupted" : res->stopped ? "stopped" : "complete";
    if (run_record(ctx, res)) fprintf(stderr, "bench run: %s\n", ctx->err);
    if (a->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "scenario", s->name);
        cJSON_AddStringToObject(j, "results_dir", dir);
        cJSON_AddStringToObject(j, "status", ctx->in.status);
        cJSON_AddItemToObject(j, "summary", rm_summary_json(&ctx->model));
        char *text = cJSON_Print(j);
        if (text) printf("%s\n", text);
        free(text);
        cJSON_Delete(j);
    } else {
        s->kind->table(stdout, &ctx->in, &ctx->model);
    }
    fflush(stdout);
    int bad = 0;
    for (int i = 0; i < res->n_runs; i++) bad += res->runs[i].status != RN_OK || !res->runs[i].cache_ok;
    pl_after_run(&ctx->model);
    fprintf(stderr, "bench run: %d of %d repetitions done%s; results in %s\n", res->n_runs, res->total_planned,
            res->interrupted ? " (interrupted)" : res->stopped ? " (stopped by --fail-fast)" : "", dir);
    int rc = res->interrupted ? 130 : bad ? 1 : 0;
    if (ctx->write_failures) {
        int written_runs = ctx->model.written_runs;
        if (written_runs)
            fprintf(stderr, "bench run: %d write%s of %s/results.json failed; it holds %d of the %d repetitions done\n",
                    ctx->write_failures, ctx->write_failures == 1 ? "" : "s", dir, written_runs, res->n_runs);
        else
            fprintf(stderr, "bench run: %s/results.json could not be written: none of the %d repetitions done is recorded\n",
                    dir, res->n_runs);
        if (!rc) rc = 1;
    }
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_args a;
    int prc = run_parse(argc, argv, &a);
    if (prc >= 0) return prc;
    int n_shards = 0;
    run_shard sh = {.index = -1};
    int lock_fd = -1, locked = 0; /* the results folder's lock, held until the end (outlock.h); locked: tried */
    char err[1024];
    if (a.shard_arg && sh_parse(a.shard_arg, &sh.index, &n_shards, err, sizeof(err))) {
        fprintf(stderr, "bench run: %s\n", err);
        return 2;
    }
    scenario *s = NULL;
    sc_errors errs;
    cli_allow_model_cache();
    if (sc_load_on(a.file, NULL, a.device, &s, &errs)) {
        for (int i = 0; i < errs.n; i++) fprintf(stderr, "%s\n", errs.v[i]);
        fprintf(stderr, "bench run: %d error%s in %s; nothing was run\n", errs.n, errs.n == 1 ? "" : "s", a.file);
        sc_errors_free(&errs);
        return 2;
    }
    int rc = 1;
    rn_model_files mf = {0};
    rn_result res = {0};
    cJSON *env = NULL, *shard_json = NULL;
    run_ctx ctx = {0};
    if (a.repeat) s->repetitions = a.repeat;
    if (a.quick) {
        s->repetitions = 1;
        s->warmup = 0;
    }
    if (sc_select(s, a.only, err, sizeof(err))) {
        fprintf(stderr, "bench run: %s\n", err);
        rc = 2;
        goto out;
    }
    if (a.shard_arg) {
        if (sh_plan_make(s, n_shards, &sh.plan, err, sizeof(err))) {
            fprintf(stderr, "bench run: --shard %s: %s\n", a.shard_arg, err);
            rc = 2;
            goto out;
        }
        /* the variants with no cell here are not this shard's: no spec, warm-up, summary or callgrind */
        for (int vi = 0; vi < s->n_variants; vi++)
            if (!sh_variant_cells(&sh.plan, sh.index, vi)) s->variants[vi].selected = 0;
        shard_json = sh_shard_json(&sh.plan, sh.index);
    }
    /* before any folder, model or process is made: a refusal leaves nothing behind */
    if ((rc = cli_launch_gate("run", s, a.allow_launch))) goto out;
    rc = 1;
    char dir[PATH_MAX];
    int drc = run_results_dir(&a, s, &sh, n_shards, dir, sizeof(dir), &lock_fd, &locked);
    if (drc) {
        rc = drc;
        goto out;
    }
    char cache[PATH_MAX];
    const char *cache_why;
    loc_model_cache(cache, sizeof(cache), &cache_why);
    /* an allocator scenario has no model */
    if (s->kind->needs_model && rn_prepare_model(s, cache, &mf, err, sizeof(err))) {
        fprintf(stderr, "bench run: %s: %s\n", a.file, err);
        goto out;
    }
    if (ut_mkdirs(dir)) {
        fprintf(stderr, "bench run: cannot create %s: %s\n", dir, strerror(errno));
        goto out;
    }
    if (!locked) {
        int lk = ol_lock(dir, &lock_fd, err, sizeof(err));
        if (lk < 0) {
            fprintf(stderr, "bench run: %s\n", err);
            rc = 2;
            goto out;
        }
        if (lk > 0) fprintf(stderr, "bench run: note: %s\n", err);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        fprintf(stderr, "bench run: cannot find my own executable (/proc/self/exe): %s\n", strerror(errno));
        goto out;
    }
    exe[n] = 0;
    env = rs_environment();
    if (env) cJSON_AddBoolToObject(env, "worker_aslr", a.aslr);

    snprintf(ctx.model.dir, sizeof(ctx.model.dir), "%s", dir);
    snprintf(ctx.model.file, sizeof(ctx.model.file), "%s/results.json", dir);
    ctx.tty = isatty(2);
    ctx.t0 = rn_now_ns();
    ctx.in = (rs_input){.s = s, .mf = &mf, .res = &res, .status = "running", .dir = dir, .only = a.only,
                        .repeat_override = a.repeat, .quick = a.quick, .env = env, .shard = shard_json,
                        .model = &ctx.model};
    rn_opts o = {.worker_exe = exe, .out_dir = dir, .fail_fast = a.fail_fast, .keep_aslr = a.aslr, .interrupted = &run_interrupted,
                 .on_run = run_progress, .user = &ctx, .keep = a.shard_arg ? run_keep : NULL, .keep_user = &sh};
    if (a.shard_arg)
        fprintf(stderr, "bench run: shard %d of %d: %d of the plan's %d cells\n", sh.index, n_shards,
                sh.plan.start[sh.index + 1] - sh.plan.start[sh.index], sh.plan.n_cells);
    fprintf(stderr, "bench run: %s: %d variant%s x %d repetition%s (+%d warm-up) x %d process%s -> %s\n", s->name,
            sc_n_selected(s), sc_n_selected(s) == 1 ? "" : "s", s->repetitions, s->repetitions == 1 ? "" : "s",
            s->warmup, s->processes, s->processes == 1 ? "" : "es", dir);

    struct sigaction sa = {.sa_handler = run_on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    /* no SA_RESTART: the runner's poll returns at once on Ctrl-C */
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int xrc = rn_execute(s, &mf, &o, &res, err, sizeof(err));
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (xrc) {
        fprintf(stderr, "bench run: %s\n", err);
        goto out;
    }
    rc = run_finish(&a, s, &ctx, &res, dir);
out:
    if (lock_fd >= 0) close(lock_fd);
    cJSON_Delete(shard_json);
    sh_plan_free(&sh.plan);
    cJSON_Delete(env);
    rm_free(&ctx.model);
    rn_result_free(&res);
    rn_model_files_free(&mf);
    sc_free(s);
    pe_library_fini();
    return rc;
}
