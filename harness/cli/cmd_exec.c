/* bench exec: one repetition of one variant of a scenario, in this process.
 *
 * No fork, no sampler thread, no pipes: what runs is the worker's own code
 * (worker.h) on the spec `bench run` would have written for the variant, so
 * `perf record`, `perf stat` and valgrind see exactly the benchmarked work and
 * nothing of the harness around it.
 */
#include <cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "harness/cli/cliargs.h"
#include "harness/report/locations.h"
#include "harness/parent/pagecache.h"
#include "harness/parent/runner.h"
#include "harness/scenario/scenario.h"
#include "harness/child/worker.h"
#include "harness/child/mapguard.h"
#include "harness/scenario/kind.h"

static void ex_usage(FILE *f) {
    fprintf(f,
            "usage: bench exec SCENARIO.json [--variant key=val,...] [--kernels NAME] [--loop N] [--callgrind] [--which]\n"
            "                  [--allow-read DIR]... [--allow-launch]\n\n"
            "Runs exactly one repetition of one variant of the scenario in this process: the\n"
            "same code as `bench run`'s workers, with no fork and no sampler thread, so that\n"
            "perf and valgrind can be put in front of it. The phases and their times go to\n"
            "stderr. The model is resolved as `bench run` does (synth models cached under\n"
            "$BENCH_MODEL_CACHE, else $XDG_CACHE_HOME/bench or ~/.cache/bench), and the variant's page-cache state\n"
            "(cold: evicted, warm: read) is set up first.\n\n"
            "  --variant k=v,...  the variant whose axis k (%s) is v, by its label;\n"
            "                     needed unless the scenario has one variant, and must match one\n"
            "  --kernels NAME     run the CPU kernel family NAME instead of the variant's (bench list shows\n"
            "                     those this CPU runs; auto: the best)\n"
            "  --loop N           run the decode phase N times (same positions each pass), to give\n"
            "                     perf a long hot phase to sample\n"
            "  --callgrind        dump callgrind stats at each phase's end (under valgrind\n"
            "                     --tool=callgrind: one output file per phase) and print no timings\n"
            "  --which            print the scenario's name and the variant's key, tab-separated,\n"
            "                     and run nothing (the wrapper scripts name their folders by it)\n"
            "  --allow-read DIR   let the scenario read files under DIR too, as in `bench run`\n"
            "                     (repeatable; or $BENCH_ALLOW_READ=DIR1:DIR2)\n"
            "  --allow-launch     let the variant's http target start the server it launches, as in\n"
            "                     `bench run` (docs/reliability.md)\n\n"
            "examples:\n"
            "  bench exec scenarios/ci.json --variant loader=pread,kv=dynamic\n"
            "  perf record -g -- bench exec scenarios/mmap_vs_pread.json --variant loader=mmap,cache=warm --loop 20\n"
            "  valgrind --tool=massif --pages-as-heap=yes bench exec scenarios/ci.json --variant loader=mmap,kv=prealloc\n"
            "  scripts/perf.sh scenarios/ci.json loader=mmap,kv=prealloc     (and scripts/valgrind.sh)\n", sc_axis_list());
}

/* Every variant's key, one a line, into buf: what the errors offer to choose from. */
static void ex_list(const scenario *s, int only_selected, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < s->n_variants; i++) {
        if (only_selected && !s->variants[i].selected) continue;
        int n = snprintf(buf + used, len - used, "\n  %s", s->variants[i].key);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
}

/* 1 when every key=val of want names v's choice by its label exactly. */
static int ex_labels_match(const scenario *s, const sc_variant *v, const char *want) {
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", want);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return 0;
        *eq = 0;
        int hit = 0;
        for (int a = 0; a < sc_axis_count(); a++)
            if (!strcmp(tok, sc_axis_name(a))) hit = s->axes[a].n && !strcmp(sc_pick(s, v, a)->label, eq + 1);
        if (!hit) return 0;
    }
    return 1;
}

/* The one variant --variant names, or -1 with err listing the candidates. */
static int ex_pick(scenario *s, const char *want, char *err, size_t errlen) {
    char list[4096], e[1024];
    if (!want) {
        if (s->n_variants == 1) return 0;
        ex_list(s, 0, list, sizeof(list));
        snprintf(err, errlen, "%s has %d variants: choose one with --variant, e.g. --variant %s; they are:%s",
                 s->file, s->n_variants, s->variants[0].key, list);
        return -1;
    }
    if (sc_select(s, want, e, sizeof(e))) {
        /* sc_select speaks of --only, the option of bench run that shares its syntax */
        const char *msg = !strncmp(e, "--only", 6) ? e + 6 : e;
        ex_list(s, 0, list, sizeof(list));
        snprintf(err, errlen, "--variant%s%s; the variants are:%s", msg[0] == ':' ? "" : ": ", msg, list);
        return -1;
    }
    if (sc_n_selected(s) > 1) {
        /* kv=prealloc matches every prealloc choice by name; the one labelled so is meant */
        int exact = -1, n_exact = 0;
        for (int i = 0; i < s->n_variants; i++)
            if (s->variants[i].selected && ex_labels_match(s, &s->variants[i], want)) exact = i, n_exact++;
        if (n_exact == 1) return exact;
        ex_list(s, 1, list, sizeof(list));
        snprintf(err, errlen, "--variant %s matches %d variants; name one of them fully:%s", want, sc_n_selected(s), list);
        return -1;
    }
    for (int i = 0; i < s->n_variants; i++)
        if (s->variants[i].selected) return i;
    snprintf(err, errlen, "--variant %s: no variant", want);
    return -1;
}

int cmd_exec(int argc, char **argv) {
    const char *file = NULL, *want = NULL;
    worker_opts wo = {.loop = 1};
    int which = 0, allow_launch = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { ex_usage(stdout); return 0; }
        else if (!strcmp(a, "--variant") && v) want = argv[++i];
        else if (!strcmp(a, "--allow-read") && v) {
            if (cli_allow_read("exec", argv[++i])) return CLI_EXIT_USAGE;
        }
        else if (!strcmp(a, "--loop") && v) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 1000000) {
                fprintf(stderr, "bench exec: --loop %s: expected a count >= 1\n", argv[i]);
                return 2;
            }
            wo.loop = (int)n;
        }
        else if (!strcmp(a, "--callgrind")) wo.callgrind = 1;
        else if (!strcmp(a, "--kernels") && v) wo.kernels = argv[++i];
        else if (!strcmp(a, "--which")) which = 1;
        else if (!strcmp(a, "--allow-launch")) allow_launch = 1;
        else if (a[0] != '-' && !file) file = a;
        else {
            static const char *const known[] = {"--variant", "--loop", "--callgrind", "--which", "--allow-read",
                                                "--allow-launch", "--help", NULL};
            return cli_bad_arg(stderr, "exec", a, known);
        }
    }
    if (!file) {
        fprintf(stderr, "bench exec: which scenario? (e.g. bench exec scenarios/ci.json --variant loader=mmap,kv=prealloc)\n\n");
        ex_usage(stderr);
        return 2;
    }
    if (wo.callgrind && !worker_has_callgrind()) {
        fprintf(stderr, "bench exec: --callgrind: this bench was built without <valgrind/callgrind.h> "
                        "(the valgrind package has it: scripts/deps.sh)\n");
        return 2;
    }
    scenario *s = NULL;
    sc_errors errs;
    cli_allow_model_cache();
    if (sc_load(file, NULL, &s, &errs)) {
        for (int i = 0; i < errs.n; i++) fprintf(stderr, "%s\n", errs.v[i]);
        fprintf(stderr, "bench exec: %d error%s in %s; nothing was run\n", errs.n, errs.n == 1 ? "" : "s", file);
        sc_errors_free(&errs);
        return 2;
    }
    int rc = 2;
    char err[8192];
    char *spec = NULL;
    rn_model_files mf = {0};
    int vi = ex_pick(s, want, err, sizeof(err));
    if (vi < 0) {
        fprintf(stderr, "bench exec: %s\n", err);
        goto out;
    }
    const sc_variant *v = &s->variants[vi];
    if (which) {
        printf("%s\t%s\n", s->name, v->key);
        rc = 0;
        goto out;
    }
    /* the launch gate asks about this variant's target alone */
    for (int i = 0; i < s->n_variants; i++) s->variants[i].selected = i == vi;
    if ((rc = cli_launch_gate("exec", s, allow_launch))) goto out;
    rc = 1;
    char cache[PATH_MAX];
    const char *cache_why;
    loc_model_cache(cache, sizeof(cache), &cache_why);
    /* an allocator scenario has no model: nothing to prepare, nothing to evict */
    if (s->kind->needs_model && rn_prepare_model(s, cache, &mf, err, sizeof(err))) {
        fprintf(stderr, "bench exec: %s: %s\n", file, err);
        goto out;
    }
    /* the page cache as bench run leaves it before a repetition (not measured here) */
    int cold = sc_pick(s, v, SC_AX_CACHE)->ival == SC_CACHE_COLD;
    for (int i = 0; i < mf.n; i++) {
        if (cold ? pc_evict(mf.path[i], err, sizeof(err)) : pc_warm_reread(mf.path[i], err, sizeof(err))) {
            fprintf(stderr, "bench exec: %s\n", err);
            goto out;
        }
    }
    spec = rn_worker_spec(s, v);
    if (!spec) {
        fprintf(stderr, "bench exec: out of memory\n");
        goto out;
    }
    if (!wo.callgrind)
        fprintf(stderr, "bench exec: %s: variant %d (%s), cache %s%s\n", s->name, vi, v->key, cold ? "cold" : "warm",
                wo.loop > 1 ? ", decode looped" : "");
    /* a mapped model truncated or rewritten while it runs: one line naming it, exit MG_EXIT_CHANGED */
    mg_install("bench exec", 0);
    cJSON *spec_json = cJSON_Parse(spec);
    rc = s->kind->worker(spec_json, file, -1, -1, &wo);
    cJSON_Delete(spec_json);
out:
    free(spec);
    rn_model_files_free(&mf);
    sc_free(s);
    return rc;
}
