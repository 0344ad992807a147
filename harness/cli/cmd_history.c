/* bench history results/<scenario>: each metric across the runs of a scenario, in
 * commit order, one line per variant, with the steps beyond noise marked. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "commands.h"
#include "harness/cli/cliargs.h"
#include "harness/report/compare.h"
#include "harness/report/plot.h"

static void history_usage(FILE *f) {
    fprintf(f,
            "usage: bench history RESULTS/SCENARIO [--metric NAME]... [--all] [--partial]\n\n"
            "Reads every run in RESULTS/SCENARIO/*/results.json, orders them by the commit time of\n"
            "their git sha (git log; the time the run was written where the commit is unknown), and\n"
            "draws one figure per metric into RESULTS/SCENARIO/history/<metric>.png and .svg: the\n"
            "median of each variant per run, one line per variant, with a ring around each step that\n"
            "`bench compare` would call beyond noise or tolerance (a regression, an improvement or a\n"
            "change). The steps are also listed on stdout.\n\n"
            "  --metric NAME  this metric (repeatable); default: TTFT, TPOT, load time, peak RSS,\n"
            "                 total minor faults, the KV and allocator counters, and every ns/op metric\n"
            "  --all          every metric of the latest run\n"
            "  --partial      also the runs made with --quick or --only, as series of their own\n"
            "                 (\"(partial)\"); left out by default: fewer repetitions or variants\n"
            "                 are not the same measurement\n\n"
            "Several runs of one commit are told apart on the axis by their index and time\n"
            "(\"1a2b3c4 #2 14:05\").\n\n"
            "example:\n  bench history results/ci --metric ttft_ms --metric minflt_total\n");
}

typedef struct hist_run {
    rr_doc d;
    double when;            /* commit time (unix s), or the written time */
    int partial;            /* made with --quick or --only */
    char label[64];         /* the x tic: sha, and index and time when the commit has several runs */
} hist_run;

static int hist_is_partial(const rr_doc *d) { return d->quick || d->only[0]; }

/* x labels: the short sha ("+" when dirty); runs of one commit add "#k HH:MM" so they differ */
static void hist_labels(hist_run *runs, int n) {
    for (int r = 0; r < n; r++) {
        const rr_doc *d = &runs[r].d;
        int same = 0, k = 0;
        for (int q = 0; q < n; q++)
            if (!strcmp(runs[q].d.sha, d->sha) && runs[q].d.dirty == d->dirty) {
                same++;
                if (q <= r) k++;
            }
        char base[32];
        snprintf(base, sizeof(base), "%.7s%s", d->sha[0] ? d->sha : "nogit", d->dirty ? "+" : "");
        /* written is "YYYY-MM-DDTHH:MM:SSZ": the time of day is enough beside the index */
        if (same > 1 && strlen(d->written) >= 16)
            snprintf(runs[r].label, sizeof(runs[r].label), "%s #%d %.5s", base, k, d->written + 11);
        else if (same > 1) snprintf(runs[r].label, sizeof(runs[r].label), "%s #%d", base, k);
        else snprintf(runs[r].label, sizeof(runs[r].label), "%s", base);
    }
}

static double hist_written(const char *iso) {
    struct tm tm = {0};
    if (!strptime(iso, "%Y-%m-%dT%H:%M:%SZ", &tm)) return 0;
    return (double)timegm(&tm);
}

static double hist_commit_time(const char *sha) {
    if (!sha[0] || strspn(sha, "0123456789abcdef") != strlen(sha)) return NAN;
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "git log -1 --format=%%ct %s 2>/dev/null", sha);
    FILE *p = popen(cmd, "r");
    if (!p) return NAN;
    double t = NAN;
    if (fscanf(p, "%lf", &t) != 1) t = NAN;
    pclose(p);
    return t;
}

static int hist_cmp(const void *a, const void *b) {
    const hist_run *x = a, *y = b;
    if (x->when != y->when) return x->when < y->when ? -1 : 1;
    int c = strcmp(x->d.written, y->d.written);
    return c ? c : strcmp(x->d.dir, y->d.dir); /* runs written in the same second: by folder name */
}

static const char *const hist_default[] = {"ttft_ms", "tpot_ms", "load_ms", "peak_rss_mib", "minflt_total",
                                           "mod.kv.allocs", "mod.kv.bytes_reserved", "mod.kv.grow_events",
                                           "mod.alloc.allocs", "mod.engine.scratch_allocs", NULL};

static int hist_has_metric(const hist_run *runs, int n, const char *m) {
    for (int r = 0; r < n; r++)
        for (int v = 0; v < runs[r].d.n; v++)
            if (rr_find(&runs[r].d.v[v], m)) return 1;
    return 0;
}

/* One figure; prints the steps. Returns 0, or -1 with err. */
/* draw = 0: the steps are listed and the script written, gnuplot is not run. */
static int hist_plot(const hist_run *runs, int n, const char *metric, const char *outdir, int draw, char *err,
                     size_t errlen) {
    /* the variants: every key any run has, first-seen order */
    const char *keys[64], *labels[64];
    int nk = 0;
    for (int r = 0; r < n; r++)
        for (int v = 0; v < runs[r].d.n && nk < 64; v++) {
            int seen = 0;
            for (int k = 0; k < nk; k++) seen |= !strcmp(keys[k], runs[r].d.v[v].key);
            if (!seen) keys[nk] = runs[r].d.v[v].key, labels[nk++] = runs[r].d.v[v].label;
        }
    char stem[200];
    snprintf(stem, sizeof(stem), "%s", metric);
    for (char *c = stem; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) *c = '_';
    char path[4700];
    snprintf(path, sizeof(path), "%s/%s.gp", outdir, stem);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    const char *unit = "";
    int from_zero = 0;  /* bytes or a count: the axis starts at 0, so a change shows at its true size */
    cmp_opts o = {.threshold = 0.05};
    fprintf(f, "# %s across runs: written by bench history\n", metric);
    /* series: each variant, and again over the partial runs when they are drawn */
    int any_partial = 0;
    for (int r = 0; r < n; r++) any_partial |= runs[r].partial;
    int ns = nk * (any_partial ? 2 : 1);
    for (int sidx = 0; sidx < ns; sidx++) {
        int k = sidx % nk, part = sidx / nk;
        fprintf(f, "$v%d << EOD\n# run median step\n", sidx);
        const rm_metric *prev = NULL;
        int prev_r = 0;
        for (int r = 0; r < n; r++) {
            if (runs[r].partial != part) continue;
            const rm_variant *v = rr_find_variant(&runs[r].d, keys[k]);
            const rm_metric *s = rr_find(v, metric);
            if (!s || !s->n) continue;
            if (s->unit[0]) unit = s->unit;
            mc_decl dc = s->declared ? s->decl : mc_legacy(metric, s->unit);
            from_zero |= dc.cls == MC_BYTES || dc.cls == MC_COUNT;
            cmp_row row;
            cmp_metric(s, s, metric, s->unit, &o, &row); /* row.b: the median */
            int step = 0;
            if (prev) {
                cmp_row c;
                cmp_metric(prev, s, metric, s->unit, &o, &c);
                step = c.verdict == CMP_REGRESSED || c.verdict == CMP_IMPROVED || c.verdict == CMP_CHANGED;
                if (step)
                    printf("%-28s %-24s%s %s -> %s: %.4g -> %.4g %s (%s, %s)\n", metric, labels[k], part ? " (partial)" : "",
                           runs[prev_r].label, runs[r].label, c.a, c.b, s->unit, cmp_verdict_name(c.verdict), c.test);
            }
            fprintf(f, "%d %.9g %s\n", r, row.b, step ? "1" : "0");
            prev = s;
            prev_r = r;
        }
        fprintf(f, "EOD\n");
    }
    fprintf(f, "do for [fmt in \"png svg\"] {\n  if (fmt eq \"png\") {\n");
    const char *term;
    pl_gnuplot_found(&term);
    /* the key goes below, one row an entry: beside the plot, long variant names squeezed it
     * and pushed the title off the left edge */
    int h = 520 + 20 * ns;
    fprintf(f, "    set terminal %s size 1000,%d noenhanced\n", term, h);
    fprintf(f, "    set output \"%s.png\"\n  } else {\n    set terminal svg size 1000,%d noenhanced dynamic background \"white\"\n"
               "    set output \"%s.svg\"\n  }\n",
            stem, h, stem);
    fprintf(f, "  set title ");
    char title[512];
    snprintf(title, sizeof(title), "%s: %s across %d runs, by commit time (rings: a step beyond noise or tolerance)",
             runs[0].d.scenario, metric, n);
    pl_quote(f, title);
    fprintf(f, "\n  set xlabel \"run (git sha)\"\n  set ylabel ");
    char yl[160];
    snprintf(yl, sizeof(yl), "%s (%s)", metric, unit[0] ? unit : "value");
    pl_quote(f, yl);
    /* the key: each entry's swatch, then its label (gnuplot's default put the swatch after
     * the label, so in a row it sat between two labels) */
    fprintf(f, "\n  set grid\n  set key below reverse Left\n  set xrange [-0.5:%d.5]\n", n - 1);
    /* memory and counts from 0: autoscaled, a 0.2 MiB change of 40 MiB filled the height like a cliff */
    if (from_zero) fprintf(f, "  set yrange [0:*]\n");
    fprintf(f, "  set xtics rotate by -30 (");
    for (int r = 0; r < n; r++) {
        fprintf(f, "%s", r ? ", " : "");
        pl_quote(f, runs[r].label);
        fprintf(f, " %d", r);
    }
    fprintf(f, ")\n  plot ");
    for (int sidx = 0; sidx < ns; sidx++) {
        int k = sidx % nk, part = sidx / nk;
        char title[200];
        snprintf(title, sizeof(title), "%s%s", labels[k], part ? " (partial: --quick/--only)" : "");
        /* the partial series: the variant's colour, dashed, open markers */
        fprintf(f, "%s$v%d using 1:2 with linespoints lw 2 %s lc %d title ", sidx ? ", " : "", sidx,
                part ? "dt 2 pt 6" : "pt 7", k + 1);
        pl_quote(f, title);
        fprintf(f, ", $v%d using 1:($3 > 0 ? $2 : NaN) with points pt 6 ps 3 lw 2 lc %d notitle", sidx, k + 1);
    }
    fprintf(f, "\n  set output\n}\n");
    if (fclose(f)) {
        snprintf(err, errlen, "%s: write error", path);
        return -1;
    }
    return draw ? pl_run_gnuplot(path, err, errlen) : 0;
}

int cmd_history(int argc, char **argv) {
    const char *dir = NULL;
    /* room for the arguments or the default list, whichever is longer */
    const char **metrics = calloc((size_t)argc + sizeof(hist_default) / sizeof(hist_default[0]), sizeof(*metrics));
    int nm = 0, all = 0, rc = 2, n = 0, partial = 0, left_out = 0;
    hist_run *runs = NULL;
    char err[8192];
    if (!metrics) return 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            history_usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(argv[i], "--metric") && i + 1 < argc) metrics[nm++] = argv[++i];
        else if (!strcmp(argv[i], "--all")) all = 1;
        else if (!strcmp(argv[i], "--partial")) partial = 1;
        else if (argv[i][0] != '-' && !dir) dir = argv[i];
        else {
            static const char *const known[] = {"--metric", "--all", "--partial", "--help", NULL};
            cli_bad_arg(stderr, "history", argv[i], known);
            goto out;
        }
    }
    if (!dir) {
        fprintf(stderr, "bench history: which scenario's results? (e.g. bench history results/ci)\n");
        goto out;
    }
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "bench history: %s: %s\n", dir, strerror(errno));
        goto out;
    }
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        char p[4400], rj[4500];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        snprintf(rj, sizeof(rj), "%s/results.json", p);
        struct stat st;
        if (stat(rj, &st)) continue;
        hist_run *nr = realloc(runs, sizeof(*runs) * (size_t)(n + 1));
        if (!nr) break;
        runs = nr;
        if (rr_load(p, &runs[n].d, err, sizeof(err))) {
            cli_say("history", "skipping %s", err);
            continue;
        }
        runs[n].partial = hist_is_partial(&runs[n].d);
        if (runs[n].partial && !partial) {
            rr_free(&runs[n].d);
            left_out++;
            continue;
        }
        double t = hist_commit_time(runs[n].d.sha);
        runs[n].when = isfinite(t) ? t : hist_written(runs[n].d.written);
        n++;
    }
    closedir(dp);
    if (left_out)
        fprintf(stderr, "bench history: left out %d run%s made with --quick or --only (--partial draws them as series of "
                        "their own)\n", left_out, left_out == 1 ? "" : "s");
    if (!n) {
        fprintf(stderr, "bench history: no results.json under %s/*/\n", dir);
        goto out;
    }
    qsort(runs, (size_t)n, sizeof(*runs), hist_cmp);
    hist_labels(runs, n);
    if (!pl_gnuplot_found(NULL)) {
        fprintf(stderr, "bench history: gnuplot not found (install gnuplot-nox); the steps are listed, nothing is drawn\n");
    }
    char outdir[4200];
    snprintf(outdir, sizeof(outdir), "%s/history", dir);
    if (mkdir(outdir, 0777) && errno != EEXIST) {
        fprintf(stderr, "bench history: cannot create %s: %s\n", outdir, strerror(errno));
        goto out;
    }
    if (all) {
        const rr_doc *last = &runs[n - 1].d;
        for (int v = 0; v < last->n; v++)
            for (int j = 0; j < last->v[v].n; j++) {
                int seen = 0;
                for (int q = 0; q < nm; q++) seen |= !strcmp(metrics[q], last->v[v].m[j].name);
                if (seen) continue;
                const char **nmv = realloc(metrics, sizeof(*metrics) * (size_t)(nm + 2));
                if (!nmv) goto out;
                metrics = nmv;
                metrics[nm++] = last->v[v].m[j].name;
            }
    } else if (!nm) {
        for (int q = 0; hist_default[q]; q++)
            if (hist_has_metric(runs, n, hist_default[q])) metrics[nm++] = hist_default[q];
    }
    rc = 0;
    int drawn = 0;
    for (int q = 0; q < nm; q++) {
        if (!hist_has_metric(runs, n, metrics[q])) {
            fprintf(stderr, "bench history: no run has metric %s\n", metrics[q]);
            rc = 2;
            continue;
        }
        int draw = pl_gnuplot_found(NULL);
        if (hist_plot(runs, n, metrics[q], outdir, draw, err, sizeof(err))) {
            cli_say("history", "%s", err);
            rc = 1;
            continue;
        }
        drawn += draw;
    }
    cli_say("history", "%d run%s of %s, %d figure%s in %s", n, n == 1 ? "" : "s", runs[0].d.scenario, drawn,
            drawn == 1 ? "" : "s", outdir);
out:
    for (int i = 0; i < n; i++) rr_free(&runs[i].d);
    free(runs);
    free(metrics);
    return rc;
}
