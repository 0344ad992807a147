/* bench show RESULTS_DIR: the summary table of a results directory. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "harness/cli/cliargs.h"
#include "harness/report/show.h"

static void show_usage(FILE *f) {
    fprintf(f,
            "usage: bench show RESULTS_DIR [--all]\n"
            "       bench show results/SCENARIO       (its runs, newest first)\n\n"
            "Prints the summary table of a results directory (or a results.json) as `bench run` prints\n"
            "it at its end: a column per variant, median ± half the 95%% CI of the mean of each metric,\n"
            "the repetitions counted, what they can show, and a warning when the machine was busy.\n"
            "Works on a finished run, an interrupted one and a merge of shards (`bench merge`).\n"
            "  --all    every metric of the summary, not only the table's rows\n\n"
            "Exit status: 0 done; 2 bad arguments or unreadable results.\n\n"
            "example:\n  bench show results/mmap_vs_pread/20261122T223136Z-ce47ebd\n");
}

int cmd_show(int argc, char **argv) {
    const char *dir = NULL;
    int all = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            show_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--all")) {
            all = 1;
        } else if (argv[i][0] != '-' && !dir) {
            dir = argv[i];
        } else {
            static const char *const known[] = {"--all", "--help", NULL};
            return cli_bad_arg(stderr, "show", argv[i], known);
        }
    }
    if (!dir) {
        fprintf(stderr, "bench show: which results directory?\n\n");
        show_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    rr_doc d;
    char err[1024], e2[1024];
    if (rr_load(dir, &d, err, sizeof(err))) {
        /* a scenario's folder holds runs, not a run: list them */
        struct stat st;
        char rj[4200];
        snprintf(rj, sizeof(rj), "%s/results.json", dir);
        int listed = !stat(dir, &st) && S_ISDIR(st.st_mode) && stat(rj, &st) ? sh_list_runs(stdout, dir, e2, sizeof(e2)) : 0;
        if (listed > 0) return 0;
        cli_say("show", "%s", listed < 0 ? e2 : err);
        return CLI_EXIT_USAGE;
    }
    sh_print(stdout, &d, all);
    rr_free(&d);
    return 0;
}
