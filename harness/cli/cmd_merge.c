/* bench merge DIR...: the shards of a sharded run joined into one results directory. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "harness/cli/cliargs.h"
#include "harness/report/merge.h"
#include "harness/report/results.h"

static void merge_usage(FILE *f) {
    fprintf(f,
            "usage: bench merge DIR... [--out DIR] [--allow-scenarios] [--allow-builds] [--partial]\n\n"
            "Joins the results of `bench run --shard i/N` (one results directory per shard; a DIR may\n"
            "also be a folder of them, as the Slurm array writes) into one results.json and results.csv.\n"
            "Each record keeps its shard and its machine's environment. Statistics are grouped by\n"
            "machine type (CPU model and flags, compute kernels, GPUs) and never mix two types: the\n"
            "summary has one entry per variant and machine type, and `bench plot` draws one series per\n"
            "variant and machine type.\n\n"
            "Refused, with the inputs and the field named: runs of different scenarios or builds; shards\n"
            "of different plans; a shard given twice on one machine type; a missing or unfinished shard.\n\n"
            "  --out DIR           the merged results directory (default results/<scenario>/<UTC time>-merged)\n"
            "  --allow-scenarios   merge runs of different scenarios (variants matched by key)\n"
            "  --allow-builds      merge runs of different builds (git commit, compiler, flags)\n"
            "  --partial           merge what is there when shards are missing or did not finish\n\n"
            "Exit status: 0 merged; 1 the inputs were refused or could not be read or written; 2 bad arguments.\n\n"
            "examples:\n"
            "  bench merge results/mmap_vs_pread/slurm-1234/shards --out results/mmap_vs_pread/slurm-1234/merged\n"
            "  bench merge hostA/results/x hostB/results/x && bench plot results/x/<time>-merged\n");
}

int cmd_merge(int argc, char **argv) {
    const char *out = NULL;
    mg_opts o = {0};
    const char **in = calloc((size_t)argc, sizeof(*in));
    int n = 0, rc = 2;
    rm_model doc = {0};
    if (!in) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            merge_usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(a, "--allow-scenarios")) o.allow_scenarios = 1;
        else if (!strcmp(a, "--allow-builds")) o.allow_builds = 1;
        else if (!strcmp(a, "--partial")) o.partial = 1;
        else if (a[0] != '-') in[n++] = a;
        else {
            static const char *const known[] = {"--out", "--allow-scenarios", "--allow-builds", "--partial", "--help", NULL};
            cli_bad_arg(stderr, "merge", a, known);
            goto out;
        }
    }
    if (!n) {
        fprintf(stderr, "bench merge: which results directories?\n\n");
        merge_usage(stderr);
        goto out;
    }
    char err[8192];
    rc = 1;
    mg_info info;
    if (mg_merge(in, n, &o, &doc, &info, err, sizeof(err))) {
        cli_say("merge", "%s\nbench merge: nothing was written", err);
        goto out;
    }
    char dir[PATH_MAX];
    if (out) {
        snprintf(dir, sizeof(dir), "%s", out);
    } else {
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        snprintf(dir, sizeof(dir), "results/%s/%s-merged", doc.scenario[0] ? doc.scenario : "merged", stamp);
    }
    if (mg_write(&doc, dir, err, sizeof(err))) {
        cli_say("merge", "%s", err);
        goto out;
    }
    fprintf(stderr, "bench merge: %d input%s, %d shard%s, %d record%s, %d machine type%s -> %s "
                    "(bench plot %s draws its figures)\n",
            info.inputs, info.inputs == 1 ? "" : "s", info.shards, info.shards == 1 ? "" : "s", doc.n_runs,
            doc.n_runs == 1 ? "" : "s", info.machine_types, info.machine_types == 1 ? "" : "s", dir, dir);
    rc = 0;
out:
    rm_free(&doc);
    free(in);
    return rc;
}
