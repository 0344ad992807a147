/* bench plot RESULTS_DIR: the figures and report.html of a finished run. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "harness/cli/cliargs.h"
#include "harness/report/plot.h"

static void plot_usage(FILE *f) {
    fprintf(f,
            "usage: bench plot RESULTS_DIR\n\n"
            "Draws the figures of a `bench run` (its results.json) with gnuplot into RESULTS_DIR/plots/,\n"
            "as PNG (pngcairo) and SVG, with the gnuplot script of each beside it:\n"
            "  rss_timeline  RSS over time per variant (anonymous, file-backed, named regions, phase marks)\n"
            "  latency       TTFT and TPOT per variant, mean with 95%% CI, median\n"
            "  itl           inter-token latency distributions\n"
            "  faults        minor and major page faults per phase\n"
            "  alloc         allocator ns/op per workload (results with ns/op metrics)\n"
            "  kv            KV bytes reserved, resident, live and wasted against tokens\n"
            "and writes RESULTS_DIR/report.html: one self-contained page with the figures, the summary\n"
            "table, the environment and the scenario. `bench run` calls this at its end.\n"
            "gnuplot is found on PATH, or named by $BENCH_GNUPLOT. Without it only report.html is written.\n\n"
            "Exit status: 0 done; 1 gnuplot failed; 2 bad arguments or unreadable results.\n\n"
            "example:\n  bench plot results/mmap_vs_pread/20261122T223136Z-ce47ebd\n");
}

int cmd_plot(int argc, char **argv) {
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            plot_usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !dir) {
            dir = argv[i];
        } else {
            fprintf(stderr, "bench plot: unknown argument \"%s\"\n\n", argv[i]);
            plot_usage(stderr);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "bench plot: which results directory?\n\n");
        plot_usage(stderr);
        return 2;
    }
    rr_doc d;
    char err[1024];
    if (rr_load(dir, &d, err, sizeof(err))) {
        cli_say("plot", "%s", err);
        return 2;
    }
    const char *term;
    int found = pl_gnuplot_found(&term), n = 0;
    if (!found) fprintf(stderr, "bench plot: gnuplot not found (install gnuplot-nox); writing report.html without figures\n");
    else if (strcmp(term, "pngcairo")) fprintf(stderr, "bench plot: gnuplot has no pngcairo terminal; using png\n");
    int rc = pl_results(&d, &n, err, sizeof(err));
    if (rc) cli_say("plot", "%s", err);
    else fprintf(stderr, "bench plot: %d figure%s in %s/plots, report in %s/report.html\n", n, n == 1 ? "" : "s", d.dir, d.dir);
    rr_free(&d);
    return rc ? 1 : 0;
}
