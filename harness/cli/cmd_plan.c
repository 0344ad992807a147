/* bench plan SCENARIO --shards N: how a sharded run splits the matrix (harness/scenario/shard.h). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "harness/cli/cliargs.h"
#include "harness/report/results.h"
#include "harness/scenario/launch.h"
#include "harness/scenario/scenario.h"
#include "harness/scenario/shard.h"

static void plan_usage(FILE *f) {
    fprintf(f,
            "usage: bench plan SCENARIO.json --shards N [--only key=val,...] [--repeat N] [--quick]\n"
            "                  [--device cpu|cuda] [--allow-read DIR]... [--allow-launch] [--out FILE]\n\n"
            "Splits the scenario's matrix, variants x repetitions, into N shards for N machines and\n"
            "prints the plan as JSON: every shard's cells (variant, repetition), its warm-ups and the\n"
            "`bench run ... --shard i/N` line that runs it. The split is deterministic (the same on every\n"
            "machine), balanced (shards differ by at most one cell) and keeps the variants interleaved\n"
            "inside each shard (A B A B): the unsharded run order cut into contiguous pieces.\n"
            "--only, --repeat, --quick and --device mean what they mean to `bench run`, and must be given\n"
            "to every shard's `bench run` alike.\n\n"
            "  --shards N   the number of shards (machines, or Slurm array tasks)\n"
            "  --out FILE   write the plan to FILE instead of stdout\n"
            "  --allow-read DIR  let the scenario read files under DIR too, as in `bench run`; each\n"
            "               shard's command line carries it\n"
            "  --allow-launch  the shards' command lines carry --allow-launch: the programs the\n"
            "               scenario starts (an http target's launch), which the plan lists under\n"
            "               \"launches\" with whether your allow-list allows each (docs/reliability.md)\n\n"
            "Exit status: 0 done; 2 bad arguments or scenario, or more shards than cells.\n\n"
            "examples:\n"
            "  bench plan scenarios/mmap_vs_pread.json --shards 3\n"
            "  sbatch --array=0-2 scripts/slurm/bench-array.sbatch scenarios/mmap_vs_pread.json  (docs/cluster.md)\n");
}

/* "launches" in the plan: each program the scenario would start, its argv as written and
 * what allows it ("--allow-launch", "allow-list", or false); a note on stderr for each that
 * nothing allows, since every shard's bench run would refuse it. 0, or -1 with err. */
static int plan_launches(const scenario *s, cJSON *plan, int allow_launch, char *err, size_t errlen) {
    ln_set set;
    if (ln_collect(s, &set, err, errlen)) return -1;
    cJSON *arr = cJSON_AddArrayToObject(plan, "launches");
    int rc = arr ? 0 : -1;
    for (int i = 0; i < set.n && !rc; i++) {
        char why[1024], line[2048];
        int listed = ln_listed(&set, i, why, sizeof(why));
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            rc = -1;
            break;
        }
        cJSON *argv = cJSON_AddArrayToObject(o, "argv");
        rc |= !argv || !cJSON_AddStringToObject(o, "target", set.v[i].target);
        for (int w = 0; !rc && set.v[i].http->launch[w]; w++)
            rc |= !cJSON_AddItemToArray(argv, cJSON_CreateString(set.v[i].http->launch[w]));
        const char *by = allow_launch ? "--allow-launch" : listed == 1 ? "allow-list" : NULL;
        rc |= by ? !cJSON_AddStringToObject(o, "allowed_by", by) : !cJSON_AddFalseToObject(o, "allowed_by");
        ln_argv_line(line, sizeof(line), set.v[i].http->launch);
        if (!by)
            fprintf(stderr, "bench plan: target %s starts %s: every shard's bench run needs --allow-launch "
                    "(bench plan --allow-launch puts it in their command lines) or an allow-list line%s%s\n",
                    set.v[i].target, line, listed < 0 ? "; " : "", listed < 0 ? why : "");
    }
    ln_free(&set);
    if (rc) snprintf(err, errlen, "out of memory");
    return rc;
}

int cmd_plan(int argc, char **argv) {
    const char *file = NULL, *out = NULL, *only = NULL, *device = NULL;
    int shards = 0, repeat = 0, quick = 0, allow_launch = 0;
    char run_cmd[8192] = "bench run";
    int full = 0; /* the command line did not fit in run_cmd */
    const char *allow[32];
    int n_allow = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { plan_usage(stdout); return 0; }
        else if (!strcmp(a, "--out") && v) out = argv[++i];
        else if (!strcmp(a, "--only") && v) only = argv[++i];
        else if (!strcmp(a, "--device") && v) device = argv[++i];
        else if (!strcmp(a, "--allow-read") && v) {
            if (cli_allow_read("plan", argv[++i])) return CLI_EXIT_USAGE;
            if (n_allow < 32) allow[n_allow++] = argv[i];
        }
        else if ((!strcmp(a, "--shards") || !strcmp(a, "--repeat")) && v) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 100000) {
                fprintf(stderr, "bench plan: %s %s: expected a count from 1 to 100000\n", a, argv[i]);
                return 2;
            }
            *(a[2] == 's' ? &shards : &repeat) = (int)n;
        }
        else if (!strcmp(a, "--quick")) quick = 1;
        else if (!strcmp(a, "--allow-launch")) allow_launch = 1;
        else if (a[0] != '-' && !file) file = a;
        else {
            static const char *const known[] = {"--out", "--only", "--device", "--shards", "--repeat", "--quick", "--allow-read",
                                                "--allow-launch", "--help", NULL};
            return cli_bad_arg(stderr, "plan", a, known);
        }
    }
    if (!file || !shards) {
        fprintf(stderr, "bench plan: %s\n\n", !file ? "which scenario?" : "how many shards? (--shards N)");
        plan_usage(stderr);
        return 2;
    }
    scenario *s = NULL;
    sc_errors errs;
    cli_allow_model_cache();
    if (sc_load_on(file, NULL, device, &s, &errs)) {
        for (int i = 0; i < errs.n; i++) fprintf(stderr, "%s\n", errs.v[i]);
        fprintf(stderr, "bench plan: %d error%s in %s\n", errs.n, errs.n == 1 ? "" : "s", file);
        sc_errors_free(&errs);
        return 2;
    }
    int rc = 2;
    char err[1024];
    sh_plan p = {0};
    cJSON *j = NULL;
    char *text = NULL;
    if (repeat) s->repetitions = repeat;
    if (quick) {
        s->repetitions = 1;
        s->warmup = 0;
    }
    if (sc_select(s, only, err, sizeof(err)) || sh_plan_make(s, shards, &p, err, sizeof(err))) {
        fprintf(stderr, "bench plan: %s\n", err);
        goto out;
    }
    /* the command line of each shard: what was given here, less --shards and --out */
    ln_append_word(run_cmd, sizeof(run_cmd), file, &full);
    if (only) { ln_append_word(run_cmd, sizeof(run_cmd), "--only", &full); ln_append_word(run_cmd, sizeof(run_cmd), only, &full); }
    if (device) { ln_append_word(run_cmd, sizeof(run_cmd), "--device", &full); ln_append_word(run_cmd, sizeof(run_cmd), device, &full); }
    if (repeat) {
        char n[16];
        snprintf(n, sizeof(n), "%d", repeat);
        ln_append_word(run_cmd, sizeof(run_cmd), "--repeat", &full);
        ln_append_word(run_cmd, sizeof(run_cmd), n, &full);
    }
    if (quick) ln_append_word(run_cmd, sizeof(run_cmd), "--quick", &full);
    if (allow_launch) ln_append_word(run_cmd, sizeof(run_cmd), "--allow-launch", &full);
    for (int i = 0; i < n_allow; i++) {
        ln_append_word(run_cmd, sizeof(run_cmd), "--allow-read", &full);
        ln_append_word(run_cmd, sizeof(run_cmd), allow[i], &full);
    }
    if (full) {
        fprintf(stderr, "bench plan: the shards' command line is longer than %zu bytes\n", sizeof(run_cmd) - 1);
        goto out;
    }
    j = sh_plan_json(s, &p, run_cmd);
    if (j && plan_launches(s, j, allow_launch, err, sizeof(err))) {
        fprintf(stderr, "bench plan: %s\n", err);
        goto out;
    }
    text = j ? cJSON_Print(j) : NULL;
    if (!text) {
        fprintf(stderr, "bench plan: out of memory\n");
        goto out;
    }
    if (out) {
        size_t len = strlen(text);
        text[len] = '\n';       /* cJSON_Print's buffer ends in NUL: room for the newline */
        if (rs_write_atomic(out, text, len + 1, err, sizeof(err))) {
            fprintf(stderr, "bench plan: %s\n", err);
            goto out;
        }
        fprintf(stderr, "bench plan: %s: %d cells in %d shards -> %s\n", s->name, p.n_cells, p.n_shards, out);
    } else {
        printf("%s\n", text);
    }
    rc = 0;
out:
    free(text);
    cJSON_Delete(j);
    sh_plan_free(&p);
    sc_free(s);
    return rc;
}
