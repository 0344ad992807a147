/* Figures by gnuplot, and report.html. See plot.h for what each figure shows. */
#include "harness/report/plot.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/report/figures.h"
#include "harness/report/report_html.h"
#include "harness/report/results.h"
#include "harness/scenario/stats.h"
#include "util/ut_vec.h"

extern char **environ;


/* ---- gnuplot ---- */

static const char *pl_gnuplot_bin(void) {
    const char *g = getenv("BENCH_GNUPLOT");
    return g && *g ? g : "gnuplot";
}

/* Runs gnuplot with args in dir (NULL: here), its stderr to errfile (NULL: inherited). */
static int pl_spawn(const char *const *args, const char *dir, const char *errfile) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 1);
        if (errfile) {
            int e = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (e >= 0) dup2(e, 2);
        } else if (fd >= 0) {
            dup2(fd, 2);
        }
        if (dir && chdir(dir)) _exit(127);
        execvp(args[0], (char *const *)args);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int pl_gnuplot_found(const char **png_term) {
    static int cached = -1;
    static const char *term = "pngcairo";
    if (cached < 0) {
        const char *g = pl_gnuplot_bin();
        const char *probe[] = {g, "-e", "set terminal pngcairo", NULL};
        int rc = pl_spawn(probe, NULL, NULL);
        if (rc == 0) {
            cached = 1;
        } else {
            const char *probe2[] = {g, "-e", "set terminal png", NULL};
            cached = pl_spawn(probe2, NULL, NULL) == 0;
            term = "png";
        }
    }
    if (png_term) *png_term = term;
    return cached;
}

int pl_run_gnuplot(const char *script, char *err, size_t errlen) {
    char dir[4096], errfile[4200];
    snprintf(dir, sizeof(dir), "%s", script);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : script;
    if (slash) *slash = 0;
    else snprintf(dir, sizeof(dir), ".");
    snprintf(errfile, sizeof(errfile), "%s/%s.log", dir, base);
    const char *args[] = {pl_gnuplot_bin(), base, NULL};
    int rc = pl_spawn(args, dir, errfile);
    if (rc) {
        snprintf(err, errlen, "gnuplot %s failed (exit %d); its messages are in %s", script, rc, errfile);
        return -1;
    }
    unlink(errfile);
    return 0;
}

void pl_quote(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('"', f);
}

/* Opens the script of one figure; the plot commands follow, then pl_end. */
static FILE *pl_begin(const char *plots, const char *name, char *path, size_t len) {
    snprintf(path, len, "%s/%s.gp", plots, name);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fprintf(f, "# %s: written by bench plot; run `gnuplot %s.gp` in this folder to redraw\n", name, name);
    return f;
}

/* The plot commands are in body; renders them once per terminal. */
static int pl_end(FILE *f, const char *name, const char *body, int w, int h, const char *png_term) {
    fprintf(f, "do for [fmt in \"png svg\"] {\n");
    fprintf(f, "  if (fmt eq \"png\") {\n");
    if (!strcmp(png_term, "pngcairo"))
        fprintf(f, "    set terminal pngcairo size %d,%d font \"Sans,9\" noenhanced\n", w, h);
    else fprintf(f, "    set terminal png size %d,%d noenhanced\n", w, h);
    fprintf(f, "    set output \"%s.png\"\n  } else {\n", name);
    fprintf(f, "    set terminal svg size %d,%d font \"Sans,9\" noenhanced dynamic background \"white\"\n", w, h);
    fprintf(f, "    set output \"%s.svg\"\n  }\n", name);
    fputs(body, f);
    fprintf(f, "  set output\n}\n");
    return fclose(f) ? -1 : 0;
}

static void pl_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, " %.9g", x);
    else fputs(" NaN", f);
}


/* The first process of the first counted run of a variant. */
static const rm_proc *pl_first_proc(const rr_doc *d, const rm_variant *v) {
    const rm_run *runs[1];
    if (rr_counted_runs(d, v, runs, 1) < 1 || runs[0]->nproc < 1) return NULL;
    return &runs[0]->procs[0];
}

/* The first counted run of a variant, or NULL. */
static const rm_run *pl_first_run(const rr_doc *d, const rm_variant *v) {
    const rm_run *runs[1];
    return rr_counted_runs(d, v, runs, 1) < 1 ? NULL : runs[0];
}

/* A run's energy timeline (energy_report.h) where it has a number to draw: the machine's watts
 * or the GPUs' memory; NULL otherwise. */
static const rm_cols *pl_energy(const rm_run *r) {
    const rm_col *t = r ? rm_col_of(&r->energy, "t_ms") : NULL;
    if (!t || t->n < 2) return NULL;
    static const char *const cols[] = {"watts", "gpu_used_mib", "gpu_proc_mib"};
    for (int c = 0; c < 3; c++) {
        const rm_col *x = rm_col_of(&r->energy, cols[c]);
        for (int k = 0; x && k < x->n; k++)
            if (isfinite(x->v[k])) return &r->energy;
    }
    return NULL;
}

/* The energy timeline's block, $en<i>: t_s, W, GPU used MiB, the workers' GPU MiB. */
static void pl_energy_data(FILE *f, int i, const rm_cols *en) {
    const rm_col *t = rm_col_of(en, "t_ms"), *w = rm_col_of(en, "watts"), *gu = rm_col_of(en, "gpu_used_mib"),
                 *gp = rm_col_of(en, "gpu_proc_mib");
    fprintf(f, "$en%d << EOD\n# t_s W gpu_used_MiB gpu_workers_MiB\n", i);
    for (int k = 0; k < t->n; k++) {
        pl_num(f, t->v[k] / 1000);
        pl_num(f, rm_at(w, k));
        pl_num(f, rm_at(gu, k));
        pl_num(f, rm_at(gp, k));
        fputc('\n', f);
    }
    fprintf(f, "EOD\n");
}

/* The energy series of panel i, on the RSS panel's time axis: watts on the right axis (each
 * value over the interval that ends at its point: fsteps), the GPUs' memory in MiB beside RSS. */
static void pl_energy_plot(FILE *b, int i, const rm_cols *en) {
    const rm_col *w = rm_col_of(en, "watts"), *gu = rm_col_of(en, "gpu_used_mib"), *gp = rm_col_of(en, "gpu_proc_mib");
    int has_w = 0;
    for (int k = 0; w && k < w->n; k++) has_w |= isfinite(w->v[k]);
    if (has_w)
        fprintf(b, ", $en%d using 1:2 axes x1y2 with fsteps lw 1.2 lc rgb \"#ff7f0e\" title \"power (W, machine; right axis)\"", i);
    if (gu) fprintf(b, ", $en%d using 1:3 with lines lw 1.5 dt 4 lc rgb \"#9467bd\" title \"GPU memory used\"", i);
    if (gp) fprintf(b, ", $en%d using 1:4 with lines lw 1.5 dt 5 lc rgb \"#8c564b\" title \"GPU memory, workers\"", i);
}

/* The timeline's standard columns, drawn by name; any other is a per-region column. */
static int pl_std_col(const char *n) {
    return !strcmp(n, "t_ms") || !strcmp(n, "rss_kib") || !strcmp(n, "anon_kib") || !strcmp(n, "file_kib") ||
           !strcmp(n, "hwm_kib") || !strcmp(n, "shmem_kib") || !strcmp(n, "pss_kib");
}

/* ---- figure: RSS over time ---- */

/* The server's /metrics series (an http target's metrics block) a panel draws: those with a
 * finite value, each over its own peak, so that a ratio, a queue and a byte count share the
 * right axis. */
static int pl_server_col(const rm_cols *sm, int c, double *peak) {
    const rm_col *x = &sm->c[c];
    int any = 0;
    *peak = 0;
    for (int k = 0; strcmp(x->name, "t_ms") && k < x->n; k++)
        if (isfinite(x->v[k])) {
            any = 1;
            if (fabs(x->v[k]) > *peak) *peak = fabs(x->v[k]);
        }
    return any;
}

/* Writes $smI (t_s, then each drawn series over its peak) and sets the right axis; the count drawn. */
static int pl_server_data(FILE *f, FILE *b, const rm_proc *p, int i) {
    const rm_cols *sm = &p->server;
    const rm_col *t = rm_col_of(sm, "t_ms");
    int drawn = 0;
    double pk;
    for (int c = 0; t && c < sm->n; c++) drawn += pl_server_col(sm, c, &pk);
    if (drawn) {
        fprintf(f, "$sm%d << EOD\n", i);
        for (int k = 0; k < t->n; k++) {
            pl_num(f, t->v[k] / 1000);
            for (int c = 0; c < sm->n; c++)
                if (pl_server_col(sm, c, &pk)) pl_num(f, pk > 0 ? rm_at(&sm->c[c], k) / pk : rm_at(&sm->c[c], k));
            fputc('\n', f);
        }
        fprintf(f, "EOD\n");
        fprintf(b, "  set y2range [0:1.32]\n  set y2tics 0.25 nomirror\n  set ytics nomirror\n"
                   "  set y2label \"server's /metrics, each over its peak\"\n");
    } else {
        fprintf(b, "  unset y2tics\n  unset y2label\n  set ytics mirror\n");
    }
    return drawn;
}

/* The plot clauses of $smI, after the RSS curves. */
static void pl_server_plot(FILE *b, const rm_proc *p, int i) {
    static const char *const cols[] = {"#9467bd", "#ff7f0e", "#2ca02c", "#8c564b", "#e377c2", "#17becf"};
    const rm_cols *sm = &p->server;
    double pk;
    for (int c = 0, col = 2; c < sm->n; c++) {
        if (!pl_server_col(sm, c, &pk)) continue;
        char title[200];
        snprintf(title, sizeof(title), "%s (peak %.4g)", sm->c[c].name, pk);
        fprintf(b, ", $sm%d using 1:%d axes x1y2 with linespoints lw 1.5 pt 7 ps 0.5 lc rgb \"%s\" title ", i, col, cols[(col - 2) % 6]);
        pl_quote(b, title);
        col++;
    }
}

static int pl_is_region(const char *n) { return strncmp(n, "other_", 6) != 0; }

static int pl_fig_rss(const rr_doc *d, FILE *f, FILE *b, int *h) {
    int panels = 0;
    double ymax = 0;
    /* every region any variant named, the well-known ones first, so a region keeps its marker across panels */
    char names[8][32];
    int nn = 0;
    static const char *const known[] = {"weights", "model_file", "kv", "scratch"};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < d->n; i++) {
            const rm_proc *p = pl_first_proc(d, &d->v[i]);
            for (int h = 0; p && h < p->nph; h++)
                for (int g = 0; g < p->ph[h].n; g++) {
                    const char *rn = p->ph[h].r[g].name;
                    int isknown = 0, seen = 0;
                    for (int q = 0; q < 4; q++) isknown |= !strcmp(known[q], rn);
                    if (!pl_is_region(rn) || (pass == 0) != isknown) continue;
                    for (int q = 0; q < nn; q++) seen |= !strcmp(names[q], rn);
                    if (!seen && nn < 8) snprintf(names[nn++], sizeof(names[0]), "%s", rn);
                }
        }
    for (int i = 0; i < d->n; i++) {
        const rm_proc *p = pl_first_proc(d, &d->v[i]);
        const rm_col *rss = p ? rm_col_of(&p->timeline, "rss_kib") : NULL;
        for (int k = 0; rss && k < rss->n; k++)
            if (isfinite(rss->v[k]) && rss->v[k] / 1024 > ymax) ymax = rss->v[k] / 1024;
        /* the GPUs' memory shares the MiB axis */
        const rm_cols *en = pl_energy(pl_first_run(d, &d->v[i]));
        const rm_col *gu = en ? rm_col_of(en, "gpu_used_mib") : NULL;
        for (int k = 0; gu && k < gu->n; k++)
            if (isfinite(gu->v[k]) && gu->v[k] > ymax) ymax = gu->v[k];
    }
    /* headroom above the highest RSS for the phase labels, so no label sits on a curve or a marker */
    fprintf(b, "  set yrange [0:%g]\n", ymax > 0 ? ymax * 1.32 : 1);
    for (int i = 0; i < d->n && panels < PL_MAX_PANELS; i++) {
        const rm_proc *p = pl_first_proc(d, &d->v[i]);
        const rm_cols *tl = p ? &p->timeline : NULL;
        const rm_col *t = rm_col_of(tl, "t_ms");
        if (!t || t->n < 2) continue;
        /* the standard columns, then any per-region column a newer timeline has */
        fprintf(f, "$tl%d << EOD\n# t_s rss anon file (MiB)", i);
        for (int c = 0; c < tl->n; c++)
            if (!pl_std_col(tl->c[c].name)) fprintf(f, " %s", tl->c[c].name);
        fputc('\n', f);
        const rm_col *rss = rm_col_of(tl, "rss_kib"), *an = rm_col_of(tl, "anon_kib"), *fi = rm_col_of(tl, "file_kib");
        for (int k = 0; k < t->n; k++) {
            pl_num(f, t->v[k] / 1000);
            pl_num(f, rm_at(rss, k) / 1024);
            pl_num(f, rm_at(an, k) / 1024);
            pl_num(f, rm_at(fi, k) / 1024);
            for (int c = 0; c < tl->n; c++)
                if (!pl_std_col(tl->c[c].name)) pl_num(f, rm_at(&tl->c[c], k) / 1024);
            fputc('\n', f);
        }
        fprintf(f, "EOD\n");
        /* the named regions' resident MiB at each phase boundary, in the same columns in every panel */
        fprintf(f, "$rg%d << EOD\n", i);
        for (int h = 0; h < p->nph; h++) {
            pl_num(f, p->ph[h].t_ms / 1000);
            for (int q = 0; q < nn; q++) {
                const rm_region *g = rm_region_of(&p->ph[h], names[q]);
                pl_num(f, g ? g->rss_kib / 1024 : NAN);
            }
            fputc('\n', f);
        }
        fprintf(f, "EOD\n");

        const rm_cols *en = pl_energy(pl_first_run(d, &d->v[i]));
        if (en) pl_energy_data(f, i, en);
        if (en) fprintf(b, "  set ytics nomirror\n  set y2tics\n  set y2label \"W\"\n  set y2range [0:*]\n");
        else fprintf(b, "  set ytics mirror\n  unset y2tics\n  unset y2label\n");
        fprintf(b, "  unset arrow\n  unset label\n  set title ");
        pl_quote(b, d->v[i].label);
        fprintf(b, "\n");
        pl_server_data(f, b, p, i);
        static const char *const marks[] = {"loaded", "first token", "last token"};
        const double at[] = {p->ev_load_end, p->ev_prefill_end, p->ev_decode_end};
        for (int m = 0; m < 3; m++) {
            double x = at[m];
            if (!isfinite(x)) continue;
            fprintf(b, "  set arrow from %.6g, graph 0 to %.6g, graph 1 nohead dt 2 lc rgb \"gray40\"\n", x / 1000, x / 1000);
            /* the last mark's label goes left of its line: to the right it would run into the
             * end-of-run markers and off the panel */
            fprintf(b, "  set label \"%s\" at %.6g, graph %.2f %s textcolor rgb \"gray30\"\n", marks[m], x / 1000,
                    0.95 - 0.07 * m, m == 2 ? "right offset -0.3,0" : "left offset 0.3,0");
        }
        fprintf(b, "  plot $tl%d using 1:2 with lines lw 2 lc rgb \"black\" title \"RSS\", "
                   "'' using 1:3 with lines lw 1.5 lc rgb \"#d62728\" title \"anonymous\", "
                   "'' using 1:4 with lines lw 1.5 lc rgb \"#1f77b4\" title \"file-backed\"",
                i);
        int extra = 0;
        for (int c = 0; c < tl->n; c++)
            if (!pl_std_col(tl->c[c].name))
                fprintf(b, ", '' using 1:%d with lines lw 1 dt 3 title \"%s\"", 5 + extra++, tl->c[c].name);
        pl_server_plot(b, p, i);
        static const char *const pts[] = {"5", "7", "9", "11", "13", "4", "6", "8"};
        static const char *const cols[] = {"#2ca02c", "#17becf", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"};
        for (int q = 0; q < nn; q++) {
            /* only the regions this variant has: pread has no model_file map, mmap no weights copy */
            int has = 0;
            for (int h = 0; h < p->nph; h++) {
                const rm_region *g = rm_region_of(&p->ph[h], names[q]);
                has |= g && isfinite(g->rss_kib);
            }
            if (!has) continue;
            fprintf(b, ", $rg%d using 1:%d with points pt %s ps 1.4 lc rgb \"%s\" title \"%s (at phase ends)\"", i, q + 2,
                    pts[q], cols[q], names[q]);
        }
        if (en) pl_energy_plot(b, i, en);
        fprintf(b, "\n");
        panels++;
    }
    if (!panels) return 0;
    /* the header goes before the panels, so it is written last into its own place */
    *h = 80 + 240 * panels;
    return panels;
}

/* ---- figure: TTFT and TPOT ---- */

static int pl_fig_latency(const rr_doc *d, FILE *f, FILE *b) {
    int rows = 0;
    /* per panel: whether any variant has a value, and the top of its whiskers, so that the
     * y range holds every CI (autoscale cut them) and a panel without data is not drawn
     * (generate: 1 has no TPOT: gnuplot fails on "all points y value undefined") */
    static const char *const ms[] = {"ttft_ms", "tpot_ms"};
    int has[2] = {0, 0};
    double top[2] = {0, 0};
    fprintf(f, "$lat << EOD\n# x label ttft_mean lo hi median tpot_mean lo hi median (ms)\n");
    for (int i = 0; i < d->n; i++) {
        const rm_variant *v = &d->v[i];
        if (!rr_summary_metric(v, "ttft_ms") && !rr_summary_metric(v, "tpot_ms")) continue;
        fprintf(f, "%d ", i);
        pl_quote(f, v->label);
        for (int k = 0; k < 2; k++) {
            static const char *const st[] = {"mean", "ci_lo", "ci_hi", "median"};
            for (int q = 0; q < 4; q++) {
                double x = rr_summary_num(v, ms[k], st[q]);
                pl_num(f, x);
                if (isfinite(x)) {
                    has[k] = 1;
                    top[k] = fmax(top[k], x);
                }
            }
        }
        fputc('\n', f);
        rows++;
    }
    fprintf(f, "EOD\n");
    if (!rows || !(has[0] || has[1])) return 0;
    fprintf(b, "  set multiplot layout 1,%d title \"%s: latency per variant (bars: mean with 95%% CI of the mean; dots: median)\"\n",
            has[0] + has[1], d->scenario);
    /* the key below the panel, not on the tallest bar nor under the title */
    fprintf(b, "  set style fill solid 0.45 border -1\n  set boxwidth 0.6\n  set xtics rotate by -30 noenhanced\n"
               "  set grid ytics\n  set key outside bottom center horizontal reverse Left\n  set xrange [-0.7:%d.7]\n",
            d->n - 1);
    static const char *const title[] = {"time to first token", "time per output token (decode)"};
    static const char *const ylabel[] = {"TTFT (ms)", "TPOT (ms)"};
    static const char *const colour[] = {"#1f77b4", "#ff7f0e"};
    for (int k = 0; k < 2; k++) {
        if (!has[k]) continue;
        int c = 3 + 4 * k; /* the mean's column; lo, hi, median follow */
        fprintf(b, "  set title \"%s\"\n  set ylabel \"%s\"\n  set yrange [0:%.6g]\n", title[k], ylabel[k],
                top[k] > 0 ? top[k] * 1.08 : 1);
        fprintf(b, "  plot $lat using 1:%d:xtic(2) with boxes lc rgb \"%s\" title \"mean\", "
                   "'' using 1:%d:%d:%d with yerrorbars pt 0 lw 1.5 lc rgb \"black\" title \"95%% CI\", "
                   "'' using 1:%d with points pt 7 ps 1 lc rgb \"#d62728\" title \"median\"\n",
                c, colour[k], c, c + 1, c + 2, c + 3);
    }
    fprintf(b, "  unset multiplot\n");
    return 1;
}

/* ---- figure: inter-token latency distributions ---- */

static int pl_cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int pl_fig_itl(const rr_doc *d, FILE *f, FILE *b) {
    int drawn = 0;
    double lo = INFINITY, hi = 0;
    char *plot = NULL;
    size_t plen = 0;
    FILE *pf = open_memstream(&plot, &plen);
    if (!pf) return -1;
    for (int i = 0; i < d->n; i++) {
        const rm_run *runs[256];
        int nr = rr_counted_runs(d, &d->v[i], runs, 256);
        double *x = NULL;
        int n = 0, cap = 0;
        for (int r = 0; r < nr; r++) {
            for (int pi = 0; pi < runs[r]->nproc; pi++) {
                const rm_col *t = &runs[r]->procs[pi].tokens;
                for (int k = 1; k < t->n; k++) {
                    if (UT_VEC_RESERVE(x, cap, n + 1)) {
                        free(x);
                        fclose(pf);
                        free(plot);
                        return -1;
                    }
                    x[n++] = t->v[k] - t->v[k - 1];
                }
            }
        }
        if (n) {
            qsort(x, (size_t)n, sizeof(double), pl_cmp_dbl);
            fprintf(f, "$itl%d << EOD\n", i);
            for (int k = 0; k < n; k++) fprintf(f, "%.9g %.9g\n", x[k], (double)(k + 1) / n);
            fprintf(f, "EOD\n");
            if (x[0] > 0 && x[0] < lo) lo = x[0];
            if (x[n - 1] > hi) hi = x[n - 1];
            fprintf(pf, "%s$itl%d using 1:2 with steps lw 2 title ", drawn ? ", " : "", i);
            char t[256];
            snprintf(t, sizeof(t), "%s (%d tokens)", d->v[i].label, n);
            pl_quote(pf, t);
            drawn++;
        }
        free(x);
    }
    fclose(pf);
    if (drawn) {
        fprintf(b, "  set title \"%s: inter-token latency distribution (decode; all counted repetitions)\"\n", d->scenario);
        fprintf(b, "  set xlabel \"inter-token latency (ms)%s\"\n  set ylabel \"fraction of tokens <= x\"\n",
                hi > 20 * lo ? ", log scale" : "");
        if (hi > 20 * lo) fprintf(b, "  set logscale x\n");
        fprintf(b, "  set yrange [0:1.02]\n  set grid\n  set key bottom right\n  plot %s\n", plot);
    }
    free(plot);
    return drawn > 0;
}

/* ---- figure: page faults per phase ---- */

static void pl_skip_note(const rr_doc *d, const char *name, const char *why);

static int pl_fig_faults(const rr_doc *d, FILE *f, FILE *b) {
    static const char *const phases[] = {"load", "prefill", "decode"};
    /* an allocator run has no load, prefill or decode: its faults per operation are its own metric */
    for (int i = 0; i < d->n; i++)
        if (rr_summary_metric(&d->v[i], "mod.aw.ns_per_op")) {
            pl_skip_note(d, "faults", "Not drawn: an allocator run has no inference phases (load, prefill, decode); "
                                      "its faults are the table's minor faults per op (mod.aw.minflt_per_op).");
            return 0;
        }
    int any = 0;
    double majmax = 0;
    for (int kind = 0; kind < 2; kind++) {
        fprintf(f, "$%s << EOD\n", kind ? "maj" : "min");
        for (int p = 0; p < 3; p++) {
            fprintf(f, "%s", phases[p]);
            for (int i = 0; i < d->n; i++) {
                char m[64];
                snprintf(m, sizeof(m), "%s_%s", kind ? "majflt" : "minflt", phases[p]);
                double x = rr_summary_num(&d->v[i], m, "median");
                any |= isfinite(x);
                if (kind && x > majmax) majmax = x;
                /* a log axis cannot draw 0: it is left out, and the title says so */
                pl_num(f, !kind && x == 0 ? NAN : x);
            }
            fputc('\n', f);
        }
        fprintf(f, "EOD\n");
    }
    if (!any) return 0;
    fprintf(b, "  set multiplot layout 1,2 title \"%s: page faults per phase (median over repetitions)\"\n", d->scenario);
    fprintf(b, "  set style data histograms\n  set style histogram clustered gap 1\n  set style fill solid 0.6 border -1\n"
               "  set grid ytics\n  set key outside bottom center horizontal reverse Left\n  unset xlabel\n");
    for (int kind = 0; kind < 2; kind++) {
        if (kind) fprintf(b, "  unset logscale y\n  set yrange [0:%g]\n", majmax > 0 ? majmax * 1.15 : 1);
        else fprintf(b, "  set logscale y\n  set yrange [0.8:*]\n");
        /* A major fault is a page fault that waited for I/O (a page of an mmap'd file not in
         * the page cache); read() and pread() fill their buffers without faulting, so a
         * pread/cold run reads the whole model from disk with ~0 major faults. */
        fprintf(b, "  set title \"%s\"\n  set ylabel \"%s faults (count%s)\"\n",
                kind ? "major faults: page faults that waited for I/O\\n(reads by read/pread are not faults)"
                     : "minor faults (log scale; 0 not drawn)",
                kind ? "major" : "minor", kind ? "" : ", log");
        /* an all-zero panel says so, not an empty frame */
        if (kind && !(majmax > 0)) fprintf(b, "  set label 1 \"none: no major fault in any phase\" at graph 0.5, graph 0.5 center\n");
        fprintf(b, "  plot ");
        for (int i = 0; i < d->n; i++) {
            fprintf(b, "%s$%s using %d%s title ", i ? ", " : "", kind ? "maj" : "min", i + 2, i ? "" : ":xtic(1)");
            /* beside the major faults, what each variant read from disk: pread's reads are no faults */
            double mib = rr_summary_num(&d->v[i], "disk_read_mib", "median");
            if (kind && isfinite(mib)) {
                char t[400];
                snprintf(t, sizeof(t), "%s (read from disk: %.3g MiB)", d->v[i].label, mib);
                pl_quote(b, t);
            } else {
                pl_quote(b, d->v[i].label);
            }
        }
        fprintf(b, "\n");
        if (kind && !(majmax > 0)) fprintf(b, "  unset label 1\n");
    }
    fprintf(b, "  unset multiplot\n");
    return 1;
}

/* ---- figure: allocator ns/op ---- */

/* The value of axis `axis` in a variant key ("alloc=libc,workload=churn64") into out; 0 when absent. */
static int pl_key_axis(const char *key, const char *axis, char *out, size_t len) {
    size_t al = strlen(axis);
    for (const char *p = key; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, axis, al) || p[al] != '=') continue;
        const char *v = p + al + 1;
        snprintf(out, len, "%.*s", (int)strcspn(v, ","), v);
        return 1;
    }
    return 0;
}

/* Index of name in names (adding it when new and there is room); -1 when full. */
static int pl_intern(char names[][64], int *n, int max, const char *name) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], name)) return i;
    if (*n == max) return -1;
    snprintf(names[*n], 64, "%s", name);
    return (*n)++;
}

/* An allocator scenario (harness/child/alloc_workload.h): one variant per allocator x workload.
 * Panel 1: ns per op (mean over the timed pass; median over repetitions, bars min..max),
 * log scale, since the cells span 4 ns to 500 us. Panel 2: each allocator relative to the
 * first one (libc in the shipped scenario), the table's "x" column. */
static int pl_fig_alloc(const rr_doc *d, FILE *f, FILE *b) {
    enum { MAXW = 32, MAXA = 12 };
    char work[MAXW][64], alloc[MAXA][64], buf[64];
    int nw = 0, na = 0;
    double med[MAXW][MAXA], lo[MAXW][MAXA], hi[MAXW][MAXA];
    for (int w = 0; w < MAXW; w++)
        for (int k = 0; k < MAXA; k++) med[w][k] = lo[w][k] = hi[w][k] = NAN;
    for (int i = 0; i < d->n; i++) {
        const rm_variant *v = &d->v[i];
        double m = rr_summary_num(v, "mod.aw.ns_per_op", "median");
        if (!isfinite(m) || !pl_key_axis(v->key, "workload", buf, sizeof(buf))) continue;
        int w = pl_intern(work, &nw, MAXW, buf);
        /* the allocator's label: the key's alloc value, or the variant label's first part */
        if (!pl_key_axis(v->key, "alloc", buf, sizeof(buf))) snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(v->label, "/"), v->label);
        /* a merge of several machine types (rmodel.h): one bar per allocator and type */
        char mt[64], full[160];
        if (pl_key_axis(v->key, "machine", mt, sizeof(mt))) {
            snprintf(full, sizeof(full), "%s @ %s", buf, mt);
            snprintf(buf, sizeof(buf), "%.63s", full);
        }
        int k = pl_intern(alloc, &na, MAXA, buf);
        if (w < 0 || k < 0) continue;
        med[w][k] = m;
        lo[w][k] = rr_summary_num(v, "mod.aw.ns_per_op", "min");
        hi[w][k] = rr_summary_num(v, "mod.aw.ns_per_op", "max");
    }
    if (!nw || !na) return 0;
    fprintf(f, "$ns << EOD\n# workload, then per allocator: median min max (ns/op), median relative to %s\n", alloc[0]);
    for (int w = 0; w < nw; w++) {
        pl_quote(f, work[w]);
        for (int k = 0; k < na; k++) {
            pl_num(f, med[w][k]);
            pl_num(f, lo[w][k]);
            pl_num(f, hi[w][k]);
            pl_num(f, med[w][0] > 0 ? med[w][k] / med[w][0] : NAN);
        }
        fputc('\n', f);
    }
    fprintf(f, "EOD\n");
    fprintf(b, "  set multiplot layout 2,1 title \"%s: allocator cost per operation (op = one alloc or one free; "
               "median over repetitions)\"\n", d->scenario);
    fprintf(b, "  set style data histograms\n  set style fill solid 0.6 border -1\n  set grid ytics\n"
               "  set logscale y\n  set xtics rotate by -30\n  set key outside right\n");
    fprintf(b, "  set style histogram errorbars gap 1 lw 1\n  set title \"ns per op (bars: min .. max)\"\n"
               "  set ylabel \"ns/op (log)\"\n  plot ");
    for (int k = 0; k < na; k++) {
        fprintf(b, "%s$ns using %d:%d:%d%s title ", k ? ", " : "", 2 + 4 * k, 3 + 4 * k, 4 + 4 * k, k ? "" : ":xtic(1)");
        pl_quote(b, alloc[k]);
    }
    fprintf(b, "\n  set style histogram clustered gap 1\n  set title \"relative to %s (1 = as fast; below 1 is faster)\"\n"
               "  set ylabel \"x %s (log)\"\n  plot ", alloc[0], alloc[0]);
    for (int k = 0; k < na; k++) {
        fprintf(b, "%s$ns using %d%s title ", k ? ", " : "", 5 + 4 * k, k ? "" : ":xtic(1)");
        pl_quote(b, alloc[k]);
    }
    fprintf(b, ", 1 with lines lc rgb \"black\" dt 2 notitle\n  unset multiplot\n  unset logscale y\n");
    return 2;
}

/* ---- figure: KV bytes against tokens ---- */

/* A serving run's KV memory and concurrency over time, one colour per variant: the
 * scheduler's samples (harness/child/serve.h), not the phase boundaries. 0 when no variant served. */
static int pl_fig_kv_serve(const rr_doc *d, FILE *f, FILE *b) {
    static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
    static const char *const cols[] = {"reserved_bytes", "live_bytes", "cached_bytes", "wasted_bytes", "running", "waiting"};
    char *mem = NULL, *conc = NULL;
    size_t mlen = 0, clen = 0;
    FILE *mf = open_memstream(&mem, &mlen), *cf = open_memstream(&conc, &clen);
    int drawn = 0;
    double ymax = 0, xmax = 0;
    for (int i = 0; mf && cf && i < d->n && drawn < PL_MAX_PANELS; i++) {
        const rm_proc *p = pl_first_proc(d, &d->v[i]);
        const rm_cols *tl = p ? &p->serve_kv : NULL;
        const rm_col *t = rm_col_of(tl, "t_ms");
        double t0 = p ? p->serve_start_ms : NAN;
        if (!t || t->n < 1 || !isfinite(t0)) continue;
        fprintf(f, "$sv%d << EOD\n# s_since_start reserved live cached wasted (MiB) running waiting\n", i);
        for (int k = 0; k < t->n; k++) {
            pl_num(f, (t->v[k] - t0) / 1000);
            for (int c = 0; c < 6; c++) {
                double v = rm_at(rm_col_of(tl, cols[c]), k);
                if (c < 4 && v / 1048576 > ymax) ymax = v / 1048576;
                xmax = fmax(xmax, (t->v[k] - t0) / 1000);
                pl_num(f, c < 4 ? v / 1048576 : v);
            }
            fputc('\n', f);
        }
        fprintf(f, "EOD\n");
        const char *c = colors[drawn % 8], *sep = drawn ? ", " : "";
        /* one panel per variant: four series each, over three or more variants, would overlap
         * past reading; the panels share the time axis and the MiB scale */
        char title[512];
        snprintf(title, sizeof(title), "%s: KV bytes reserved; live (running sequences); prefix cache (kept for reuse); "
                 "wasted (taken, holding nothing)", d->v[i].label);
        fprintf(mf, "  set title ");
        pl_quote(mf, title);
        fprintf(mf, "\n  set ylabel \"MiB\"\n");
        fprintf(mf, "  plot $sv%d using 1:2 with steps lw 1.5 lc rgb \"black\" title \"reserved\", "
                    "'' using 1:3 with steps lw 2.5 lc rgb \"#2ca02c\" title \"live\", "
                    "'' using 1:4 with steps lw 1.5 dt 3 lc rgb \"#1f77b4\" title \"prefix cache\", "
                    "'' using 1:5 with steps lw 1.5 dt 2 lc rgb \"#d62728\" title \"wasted\"\n",
                i);
        fprintf(cf, "%s$sv%d using 1:6 with steps lw 2 lc rgb \"%s\" title \"%s running\", "
                    "'' using 1:7 with steps lw 1.5 dt 2 lc rgb \"%s\" title \"%s waiting\"",
                sep, i, c, d->v[i].label, c, d->v[i].label);
        drawn++;
    }
    if (mf) fclose(mf);
    if (cf) fclose(cf);
    if (drawn) {
        fprintf(b, "  set multiplot layout %d,1 title \"%s: KV cache memory and concurrency over the serving run "
                   "(first counted repetition, sampled after every scheduler step)\"\n", drawn + 1, d->scenario);
        fprintf(b, "  set xlabel \"time since the scheduler started (s)\"\n  set grid\n  set key outside right\n");
        fprintf(b, "  set xrange [0:%g]\n  set yrange [0:%g]\n%s", xmax > 0 ? xmax * 1.02 : 1, ymax > 0 ? ymax * 1.08 : 1, mem);
        fprintf(b, "  set yrange [0:*]\n  set title \"requests holding a sequence (running) and queued for room (waiting)\"\n"
                   "  set ylabel \"requests\"\n  plot %s\n  unset multiplot\n", conc);
    }
    free(mem);
    free(conc);
    return drawn ? drawn + 1 : 0;
}

/* s with gnuplot's double-quote specials escaped */
static void pl_gp_escape(char *out, size_t len, const char *s) {
    size_t o = 0;
    for (; *s && o + 2 < len; s++) {
        if (*s == '"' || *s == '\\') out[o++] = '\\';
        out[o++] = *s;
    }
    out[o] = 0;
}

/* plots/NAME.skipped: why a figure was not drawn, for report.html to say */
static void pl_skip_note(const rr_doc *d, const char *name, const char *why) {
    char path[4400];
    snprintf(path, sizeof(path), "%s/plots/%s.skipped", d->dir, name);
    FILE *o = fopen(path, "w");
    if (!o) return;
    fputs(why, o);
    fclose(o);
}

static int pl_fig_kv(const rr_doc *d, FILE *f, FILE *b) {
    /* a serving run has a timeline per scheduler step: that is the figure */
    int served = pl_fig_kv_serve(d, f, b);
    if (served) return served;
    int drawn = 0, with_data = 0, timeline_style = 0;
    /* variants whose series are identical are drawn once under all their names: four
     * identical lines would only hide each other */
    struct { char *data; size_t len; char labels[512]; int steps; } grp[PL_MAX_PANELS];
    int ng = 0;
    static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
    char *plot = NULL;
    size_t plen = 0;
    FILE *pf = open_memstream(&plot, &plen);
    if (!pf) return -1;
    for (int i = 0; i < d->n && ng < PL_MAX_PANELS; i++) {
        const rm_proc *p = pl_first_proc(d, &d->v[i]);
        double used = rm_counter(p, "kv.bytes_used"), reserved_end = rm_counter(p, "kv.bytes_reserved");
        if (!isfinite(used) || !p->nph) continue;
        double prompt = p->prompt_tokens;
        int ntok = p->tokens.n;
        if (!isfinite(prompt)) prompt = 0;
        /* positions in the cache: the prompt, then every decoded token but the last, which is never fed back */
        double pos_end = prompt + (ntok > 0 ? ntok - 1 : 0);
        double per_pos = pos_end > 0 ? used / pos_end : NAN;
        static const char *const phn[] = {"load", "prefill", "end"};
        double tok[3] = {0, prompt, pos_end};
        char *blk = NULL;
        size_t blen = 0;
        FILE *outer = f;
        f = open_memstream(&blk, &blen);
        if (!f) {
            f = outer;
            continue;
        }
        /* the worker's samples where the reserve moved (a dynamic cache's steps), when it sent them */
        const rm_col *tt = rm_col_of(&p->kv, "tokens");
        int nt = tt ? tt->n : 0;
        for (int k = 0; k < nt; k++) {
            double res = rm_at(rm_col_of(&p->kv, "reserved_bytes"), k) / 1048576;
            double live = rm_at(rm_col_of(&p->kv, "live_bytes"), k) / 1048576;
            fprintf(f, "%g", rm_at(tt, k));
            pl_num(f, res);
            pl_num(f, NAN);
            pl_num(f, live);
            pl_num(f, res - live);
            fputc('\n', f);
        }
        for (int k = 0; k < 3 && !nt; k++) {
            const rm_region *kv = rm_region_of(rm_phase_of(p, phn[k]), "kv");
            double res = kv ? kv->size_kib / 1024 : NAN, rss = kv ? kv->rss_kib / 1024 : NAN;
            if (k == 2 && !isfinite(res) && isfinite(reserved_end)) res = reserved_end / 1048576;
            double live = per_pos * tok[k] / 1048576;
            fprintf(f, "%g", tok[k]);
            pl_num(f, res);
            pl_num(f, rss);
            pl_num(f, live);
            pl_num(f, isfinite(res) ? res - live : NAN);
            fputc('\n', f);
        }
        fclose(f);
        f = outer;
        with_data++;
        int steps = nt > 0, same = -1;
        for (int g2 = 0; g2 < ng && same < 0; g2++)
            if (grp[g2].steps == steps && grp[g2].len == blen && !memcmp(grp[g2].data, blk, blen)) same = g2;
        if (same >= 0) {
            size_t l = strlen(grp[same].labels);
            snprintf(grp[same].labels + l, sizeof(grp[same].labels) - l, ", %s", d->v[i].label);
            free(blk);
            continue;
        }
        grp[ng].data = blk;
        grp[ng].len = blen;
        grp[ng].steps = steps;
        snprintf(grp[ng].labels, sizeof(grp[ng].labels), "%s", d->v[i].label);
        ng++;
    }
    for (int g2 = 0; g2 < ng; g2++) {
        fprintf(f, "$kv%d << EOD\n# tokens reserved resident live wasted (MiB)\n", g2);
        fwrite(grp[g2].data, 1, grp[g2].len, f);
        fprintf(f, "EOD\n");
        const char *c = colors[drawn % 8];
        const char *sep = drawn ? ", " : "";
        char lab[600];
        pl_gp_escape(lab, sizeof(lab), grp[g2].labels);
        /* with the worker's samples the reserve is known at every step where it moved: steps; measured
         * only at the phase boundaries, points, since a line would invent what happened between */
        if (grp[g2].steps)
            /* wasted is the gap between the two curves: sampled only where the reserve moved, as a
             * curve of its own it would be a step function it is not */
            fprintf(pf, "%s$kv%d using 1:2 with steps lw 2 lc rgb \"%s\" title \"%s reserved\", "
                        "'' using 1:4 with lines lw 1.5 dt 2 lc rgb \"%s\" title \"%s live\"",
                    sep, g2, c, lab, c, lab);
        else
            fprintf(pf, "%s$kv%d using 1:2 with points ps 1.6 pt 7 lc rgb \"%s\" title \"%s reserved\", "
                        "'' using 1:3 with points ps 1.6 pt 6 lc rgb \"%s\" title \"%s resident\", "
                        "'' using 1:4 with linespoints lw 1.5 dt 2 pt 5 lc rgb \"%s\" title \"%s live\", "
                        "'' using 1:5 with points ps 1.6 pt 9 lc rgb \"%s\" title \"%s wasted\"",
                    sep, g2, c, lab, c, lab, c, lab, c, lab);
        timeline_style |= grp[g2].steps;
        free(grp[g2].data);
        drawn++;
    }
    fclose(pf);
    if (drawn == 1 && with_data > 1) {
        /* nothing differs between the variants: a figure would show one line and say nothing */
        pl_skip_note(d, "kv", "Not drawn: every variant's KV cache held the same bytes at every token "
                              "(the variants differ in something else), so there was nothing to compare.");
        drawn = 0;
    } else if (drawn) {
        fprintf(b, "  set title \"%s: KV cache memory against tokens (first counted repetition)\\n%s\"\n", d->scenario,
                timeline_style ? "reserved: the cache's bytes; live: bytes holding positions; the gap between them is wasted"
                               : "reserved: the cache's bytes; live: bytes holding positions; wasted = reserved - live; "
                                 "resident: its RSS");
        fprintf(b, "  set xlabel \"tokens in the cache\"\n  set ylabel \"MiB\"\n  set grid\n  set yrange [0:*]\n"
                   "  set key outside right\n  plot %s\n",
                plot);
    }
    free(plot);
    return drawn > 0;
}

/* ---- all figures ---- */

typedef int (*pl_fig_fn)(const rr_doc *d, FILE *data, FILE *body);

static int pl_fig_rss_fn(const rr_doc *d, FILE *data, FILE *body) {
    int h = 0;
    char *inner = NULL;
    size_t len = 0;
    FILE *ib = open_memstream(&inner, &len);
    if (!ib) return -1;
    int panels = pl_fig_rss(d, data, ib, &h);
    fclose(ib);
    if (panels > 0) {
        char some[96] = "";
        if (panels < d->n) snprintf(some, sizeof(some), "; the first %d of %d variants", panels, d->n);
        fprintf(body, "  set multiplot layout %d,1 title \"%s: resident memory over time (first counted repetition%s)\"\n",
                panels, d->scenario, some);
        fprintf(body, "  set xlabel \"time since the worker started (s)\"\n  set ylabel \"MiB\"\n"
                      "  set grid\n  set key outside right\n%s  unset multiplot\n",
                inner);
    }
    free(inner);
    return panels;
}

/* gnuplot runs the text between backquotes as a shell command, even inside double
 * quotes, and a quote, backslash or newline ends the string a name is printed in. The
 * figures print names from results.json (variant labels from the scenario, series,
 * counters), which anyone may have written: each such character becomes a harmless one. */
static void pl_defang_str(char *s) {
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '`' || c == '"') *s = '\'';
        else if (c == '\\') *s = '/';
        else if (c < 0x20 || c == 0x7f) *s = ' ';
    }
}

static void pl_defang_json(cJSON *j) {
    for (; j; j = j->next) {
        pl_defang_str(j->string);
        if (cJSON_IsString(j)) pl_defang_str(j->valuestring);
        pl_defang_json(j->child);
    }
}

static void pl_defang(rr_doc *d) {
    pl_defang_json(d->root);
    pl_defang_json(d->head);
    for (int r = 0; r < d->n_runs; r++)
        for (int pi = 0; pi < d->runs[r].nproc; pi++) {
            const rm_cols *cs[] = {&d->runs[r].procs[pi].timeline, &d->runs[r].procs[pi].serve_kv};
            for (int c = 0; c < 2; c++)
                for (int k = 0; k < cs[c]->n; k++) pl_defang_str(cs[c]->c[k].name);
            for (int h = 0; h < d->runs[r].procs[pi].nph; h++)
                for (int g = 0; g < d->runs[r].procs[pi].ph[h].n; g++) pl_defang_str(d->runs[r].procs[pi].ph[h].r[g].name);
        }
    char *head[] = {d->scenario, d->status, d->written, d->sha, d->only};
    for (size_t k = 0; k < sizeof(head) / sizeof(head[0]); k++) pl_defang_str(head[k]);
    for (int i = 0; i < d->n; i++) {
        pl_defang_str(d->v[i].key);
        pl_defang_str(d->v[i].label);
    }
    for (int i = 0; i < d->n; i++)
        for (int k = 0; k < d->v[i].n; k++) {
            pl_defang_str(d->v[i].m[k].name);
            pl_defang_str(d->v[i].m[k].unit);
        }
}

int pl_results(rr_doc *d, int *n_figures, char *err, size_t errlen) {
    pl_defang(d);
    static const pl_fig_fn figs[] = {pl_fig_rss_fn, pl_fig_latency, pl_fig_itl, pl_fig_faults, pl_fig_alloc, pl_fig_kv};
    char plots[4200];
    snprintf(plots, sizeof(plots), "%s/plots", d->dir);
    *n_figures = 0;
    const char *term;
    int have_gnuplot = pl_gnuplot_found(&term);
    if (have_gnuplot) {
        if (mkdir(plots, 0777) && errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s: %s", plots, strerror(errno));
            return -1;
        }
        for (int k = 0; pl_figure_name(k); k++) {
            char path[4400], png[4400], svg[4400];
            snprintf(png, sizeof(png), "%s/%s.png", plots, pl_figure_name(k));
            snprintf(svg, sizeof(svg), "%s/%s.svg", plots, pl_figure_name(k));
            /* a figure whose data vanished must not survive from an earlier plot */
            unlink(png);
            unlink(svg);
            char skipped[4400];
            snprintf(skipped, sizeof(skipped), "%s/%s.skipped", plots, pl_figure_name(k));
            unlink(skipped);
            char *body = NULL;
            size_t blen = 0;
            FILE *bf = open_memstream(&body, &blen);
            FILE *f = bf ? pl_begin(plots, pl_figure_name(k), path, sizeof(path)) : NULL;
            if (!f) {
                if (bf) fclose(bf);
                free(body);
                snprintf(err, errlen, "%s/%s.gp: %s", plots, pl_figure_name(k), strerror(errno));
                return -1;
            }
            int got = figs[k](d, f, bf);
            fclose(bf);
            int h = 520;
            if (k == 0 && got > 0) h = 80 + 250 * got;
            /* the two-panel figures: serving KV, allocators */
            if ((!strcmp(pl_figure_name(k), "kv") || !strcmp(pl_figure_name(k), "alloc")) && got > 1) h = 860;
            /* serving KV: one panel per variant, then the concurrency panel */
            if (!strcmp(pl_figure_name(k), "kv") && got > 2) h = 80 + 260 * got;
            if (got < 0 || pl_end(f, pl_figure_name(k), body, 1000, h, term)) {
                free(body);
                snprintf(err, errlen, "%s: out of memory or write error", path);
                return -1;
            }
            free(body);
            if (got == 0) {
                unlink(path);
                continue;
            }
            if (pl_run_gnuplot(path, err, errlen)) return -1;
            (*n_figures)++;
        }
    }
    return rh_write(d, plots, have_gnuplot, err, errlen);
}

int pl_after_run(rr_doc *d) {
    const char *term;
    if (!pl_gnuplot_found(&term)) {
        fprintf(stderr, "bench run: gnuplot not found, so no figures (install gnuplot-nox, then: bench plot %s)\n", d->dir);
        return 0;
    }
    char err[1024];
    int n = 0, rc = pl_results(d, &n, err, sizeof(err));
    if (rc) fprintf(stderr, "bench run: figures: %s\n", err);
    else fprintf(stderr, "bench run: %d figure%s in %s/plots, report in %s/report.html\n", n, n == 1 ? "" : "s", d->dir, d->dir);
    return rc;
}
