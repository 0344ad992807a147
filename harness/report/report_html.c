/* report.html: a results directory on one self-contained page: the figures (base64 PNG),
 * the summary table (bench run's rows, then every other metric in groups), the
 * environment and the scenario. plot.c draws the figures and calls it last. */
#include "harness/report/report_html.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/report/compare.h"
#include "harness/report/figures.h"
#include "harness/report/results.h"

void rh_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void pl_base64(FILE *f, const unsigned char *p, size_t n) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        fputc(t[v >> 18 & 63], f);
        fputc(t[v >> 12 & 63], f);
        fputc(i + 1 < n ? t[v >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? t[v & 63] : '=', f);
    }
}

static const char *const pl_captions[] = {
    "Resident memory over time of the first counted repetition of each variant: anonymous and file-backed pages, "
    "the named regions (weights, KV, scratch) at each phase boundary, and the phase marks.",
    "Time to first token and time per output token: mean with the 95% bootstrap CI of the mean, and the median.",
    "Distribution of the inter-token latencies of every counted repetition (empirical CDF).",
    "Minor and major page faults in each phase (median over repetitions). A major fault is one that waited for I/O: "
    "pages of a mapped file read from disk. read() and pread() read without faulting, so their disk reads do not "
    "show here.",
    "Allocator cost per operation, per workload and allocator (median).",
    "KV cache bytes reserved, resident, live and wasted against the tokens in the cache.",
};

/* The groups report.html folds the metrics outside the terminal table into, by key prefix
 * (the first that matches; "" matches all). */
static const struct {
    const char *prefix, *title;
} pl_groups[] = {
    {"mod.kv.", "KV cache module's counters"},
    {"mod.loader.", "loader module's counters"},
    {"mod.alloc.", "allocator module's counters"},
    {"mod.aw.", "allocator workload"},
    {"mod.weights.", "weights rearranged at load (repack)"},
    {"mod.", "other modules' counters"},
    {"minflt_", "minor page faults"},
    {"majflt_", "major page faults"},
    {"perf_", "perf events"},
    {"region_", "memory by region"},
    {"itl_", "inter-token latency"},
    {"serve_", "serving"},
    {"", "other figures"},
    {NULL, NULL},
};

static int pl_group_of(const char *metric) {
    for (int g = 0; pl_groups[g].title; g++)
        if (!strncmp(metric, pl_groups[g].prefix, strlen(pl_groups[g].prefix))) return g;
    return -1; /* not reached: "" matches */
}

/* report.html's title, description, status, date and commit */
static void pl_html_head(FILE *f, const rr_doc *d) {
    const char *desc = rm_description(d);
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>bench: ");
    rh_text(f, d->scenario);
    fprintf(f, "</title>\n<style>\nbody{font-family:sans-serif;margin:1.5em;max-width:1200px}"
               "table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:2px 6px}"
               "td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#eee}"
               "figure{margin:1em 0}img{max-width:100%%;border:1px solid #ddd}pre{background:#f6f6f6;padding:.5em;"
               "white-space:pre-wrap;overflow-wrap:anywhere;font-size:0.8em}\n</style></head>\n<body data-images=\"pending\">\n<h1>");
    rh_text(f, d->scenario);
    fprintf(f, "</h1>\n<p>");
    if (desc) rh_text(f, desc);
    /* every field is results.json's, which anyone may have written: escaped, as the rest */
    fprintf(f, "</p>\n<p>status <b>");
    rh_text(f, d->status[0] ? d->status : "?");
    fprintf(f, "</b>, written ");
    rh_text(f, d->written);
    if (d->sha[0]) {
        char sha[13];
        snprintf(sha, sizeof(sha), "%.12s", d->sha);
        fprintf(f, ", git <code>");
        rh_text(f, sha);
        fprintf(f, "</code>%s", d->dirty ? " (dirty)" : "");
    }
    fprintf(f, "</p>\n");
}

/* every figure drawn, inline (base64 PNG), and why one was skipped; or why there are none */
static void pl_html_figures(FILE *f, const rr_doc *d, const char *plots, int have_gnuplot) {
    fprintf(f, "<h2>Figures</h2>\n");
    int figs = 0;
    for (int k = 0; pl_figure_name(k); k++) {
        char png[4400];
        snprintf(png, sizeof(png), "%s/%s.png", plots, pl_figure_name(k));
        size_t n;
        char e2[256];
        struct stat st;
        if (stat(png, &st)) {
            char skipped[4400];
            snprintf(skipped, sizeof(skipped), "%s/%s.skipped", plots, pl_figure_name(k));
            char *why = stat(skipped, &st) ? NULL : rr_slurp(skipped, &n, e2, sizeof(e2));
            if (why) {
                fprintf(f, "<p id=\"skipped-%s\"><code>plots/%s.png</code>: ", pl_figure_name(k), pl_figure_name(k));
                rh_text(f, why);
                fprintf(f, "</p>\n");
                free(why);
            }
            continue;
        }
        char *data = rr_slurp(png, &n, e2, sizeof(e2));
        if (!data) continue;
        fprintf(f, "<figure id=\"fig-%s\"><img alt=\"%s\" src=\"data:image/png;base64,", pl_figure_name(k),
                pl_figure_name(k));
        pl_base64(f, (const unsigned char *)data, n);
        fprintf(f, "\"><figcaption>%s", pl_captions[k]);
        /* the RSS figure has a panel per variant, at most PL_MAX_PANELS of them: say when some are left out */
        if (k == 0 && d->n > PL_MAX_PANELS)
            fprintf(f, " <b>Only the first %d of the %d variants are drawn</b> (a panel each); every variant's "
                       "timeline is in <code>timelines/</code>.", PL_MAX_PANELS, d->n);
        fprintf(f, " (<code>plots/%s.svg</code>, <code>.png</code>)</figcaption></figure>\n", pl_figure_name(k));
        free(data);
        figs++;
    }
    /* why there are none: gnuplot only when it is the reason */
    int counted = 0;
    for (int i = 0; i < d->n; i++) counted += d->v[i].counted;
    if (!figs && !have_gnuplot)
        fprintf(f, "<p>No figures: gnuplot was not found when this report was written "
                   "(install gnuplot-nox, then <code>bench plot DIR</code>).</p>\n");
    else if (!figs && !counted)
        fprintf(f, "<p>No figures: no repetition was counted (the run was interrupted before one finished, or "
                   "every one failed), so there is nothing to draw.</p>\n");
    else if (!figs)
        fprintf(f, "<p>No figures: none of them had data in these results.</p>\n");
}

/* the summary, as the terminal table prints it: its names and units, its digits, the
 * table's rows first and in its order, then every other metric under its key */
static void pl_html_summary(FILE *f, const rr_doc *d) {
    fprintf(f, "<h2>Summary</h2>\n<p>Median over the counted repetitions &plusmn; half the 95%% confidence interval "
               "of the mean.</p>\n<table id=\"summary\">\n<tr><th>metric</th>");
    for (int i = 0; i < d->n; i++) {
        fprintf(f, "<th>");
        rh_text(f, d->v[i].label);
        fprintf(f, "</th>");
    }
    fprintf(f, "</tr>\n<tr><td>repetitions counted</td>");
    int min_reps = INT_MAX;
    for (int i = 0; i < d->n; i++) {
        int n = d->v[i].counted;
        /* a variant whose every repetition failed says so in its own line: the note
         * speaks of the ones that counted */
        if (n > 0) min_reps = n < min_reps ? n : min_reps;
        fprintf(f, "<td class=\"n\">%d</td>", n);
    }
    fprintf(f, "</tr>\n");
    /* every metric of any variant (mmap's model file map is not among pread's), once */
    int all = 0;
    for (int i = 0; i < d->n; i++) all += d->v[i].n;
    const rm_metric **uniq = calloc((size_t)(all ? all : 1), sizeof(*uniq)), **order = calloc((size_t)(all ? all : 1), sizeof(*order));
    int nu = 0, nm = 0;
    if (uniq && order) {
        for (int i = 0; i < d->n; i++)
            for (int k = 0; k < d->v[i].n; k++) {
                const rm_metric *m = &d->v[i].m[k];
                int seen = !m->summarized;
                for (int q = 0; q < nu && !seen; q++) seen = !strcmp(uniq[q]->name, m->name);
                if (!seen) uniq[nu++] = m;
            }
        /* rows of the terminal table in its order, then the rest in first-seen order */
        for (int rank = 0; rs_metric_title_at(rank); rank++)
            for (int q = 0; q < nu; q++)
                if (rs_metric_rank(uniq[q]->name) == rank) order[nm++] = uniq[q];
        /* the rest by group, each in first-seen order */
        for (int gr = 0; pl_groups[gr].title; gr++)
            for (int q = 0; q < nu; q++)
                if (rs_metric_rank(uniq[q]->name) < 0 && pl_group_of(uniq[q]->name) == gr) order[nm++] = uniq[q];
    }
    free(uniq);
    int named = 0, group = -1;
    while (named < nm && rs_metric_rank(order[named]->name) >= 0) named++;
    for (int k = 0; k < nm; k++) {
        const rm_metric *m = order[k];
        if (k == named) {
            /* the table's rows stay in view; the other metrics fold away under their groups */
            fprintf(f, "</table>\n<details id=\"more-metrics\"><summary>%d more metrics, by group, under their "
                       "results.json keys</summary>\n<table id=\"summary-more\">\n<tr><th>metric</th>",
                    nm - named);
            for (int i = 0; i < d->n; i++) {
                fprintf(f, "<th>");
                rh_text(f, d->v[i].label);
                fprintf(f, "</th>");
            }
            fprintf(f, "</tr>\n");
        }
        if (k >= named && pl_group_of(m->name) != group) {
            group = pl_group_of(m->name);
            int in = 0;
            for (int q = k; q < nm && pl_group_of(order[q]->name) == group; q++) in++;
            fprintf(f, "<tr class=\"group\"><th colspan=\"%d\" style=\"text-align:left\">%s (%d)</th></tr>\n", d->n + 1,
                    pl_groups[group].title, in);
        }
        const char *unit = m->unit;
        const char *title = rs_metric_title(m->name);
        fprintf(f, "<tr%s><td title=\"", title ? "" : " class=\"extra\"");
        rh_text(f, m->name);
        fprintf(f, "\">");
        rh_text(f, title ? title : m->name);
        if (*unit) {
            fprintf(f, " (");
            rh_text(f, unit);
            fprintf(f, ")");
        }
        fprintf(f, "</td>");
        for (int i = 0; i < d->n; i++) {
            const rm_metric *x = rr_summary_metric(&d->v[i], m->name);
            char cell[96] = "-";
            if (x)
                rs_fmt_value(cell, sizeof(cell), x->st.median,
                             isfinite(x->st.ci_lo) && isfinite(x->st.ci_hi) ? (x->st.ci_hi - x->st.ci_lo) / 2 : 0, x->st.n, unit);
            fprintf(f, "<td class=\"n\" data-metric=\"");
            rh_text(f, m->name);
            fprintf(f, "\" data-variant=\"");
            rh_text(f, d->v[i].key);
            fprintf(f, "\">");
            rh_text(f, cell);
            fprintf(f, "</td>");
        }
        fprintf(f, "</tr>\n");
    }
    free(order);
    fprintf(f, "</table>\n%s", named < nm ? "</details>\n" : "");
    if (d->n) {
        char note[512];
        rs_repetitions_note(note, sizeof(note), min_reps == INT_MAX ? 0 : min_reps, cmp_reps_to_compare(d));
        fprintf(f, "<p id=\"repetitions-note\">");
        rh_text(f, note);
        fprintf(f, "</p>\n");
    }
    char busy[512];
    rm_busy_note(d, busy, sizeof(busy));
    if (busy[0]) {
        fprintf(f, "<p id=\"busy-machine\" style=\"color:#a00\"><b>");
        rh_text(f, busy);
        fprintf(f, "</b></p>\n");
    }
}

/* the environment and the scenario as written, and the script that reports decoded images */
static void pl_html_tail(FILE *f, const rr_doc *d) {
    char *envs = rm_environment_text(d), *scs = rm_scenario_text(d);
    fprintf(f, "<h2>Environment</h2>\n<pre id=\"environment\">");
    rh_text(f, envs ? envs : "(none)");
    fprintf(f, "</pre>\n<h2>Scenario</h2>\n<pre id=\"scenario\">");
    rh_text(f, scs ? scs : "(none)");
    fprintf(f, "</pre>\n");
    free(envs);
    free(scs);
    /* lets a headless browser (and the test) see that every figure decoded */
    fprintf(f, "<script>\nwindow.addEventListener('load', function () {\n"
               "  var imgs = document.images, ok = 0;\n"
               "  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;\n"
               "  document.body.setAttribute('data-images', ok + '/' + imgs.length);\n"
               "  document.body.setAttribute('data-images-ok', ok === imgs.length && ok > 0 ? 'yes' : 'no');\n"
               "});\n</script>\n</body></html>\n");
}

int rh_write(const rr_doc *d, const char *plots, int have_gnuplot, char *err, size_t errlen) {
    char path[4300], tmp[4400];
    snprintf(path, sizeof(path), "%s/report.html", d->dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    pl_html_head(f, d);
    pl_html_figures(f, d, plots, have_gnuplot);
    pl_html_summary(f, d);
    pl_html_tail(f, d);
    if (fclose(f)) {
        snprintf(err, errlen, "%s: write error", tmp);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
