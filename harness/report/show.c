/* bench show's table (show.h): bench run's rows and digits, read back from results.json. */
#include "harness/report/compare.h"
#include "harness/report/show.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/report/escape.h"
#include "harness/report/results.h"

static void sh_row(FILE *f, const rr_doc *d, const char *metric, const char *title, int titlew, int colw) {
    const char *unit = "";
    for (int i = 0; i < d->n && !*unit; i++) {
        const rm_metric *m = rr_summary_metric(&d->v[i], metric);
        if (m) unit = m->unit;
    }
    char name[512], safe[512];
    snprintf(name, sizeof(name), *unit ? "%s (%s)" : "%s", title, unit);
    fprintf(f, "%-*s", titlew, es_term(safe, sizeof(safe), name));
    for (int i = 0; i < d->n; i++) {
        char cell[96] = "-";
        const rm_metric *m = rr_summary_metric(&d->v[i], metric);
        if (m) {
            const st_summary *st = &m->st;
            rs_fmt_value(cell, sizeof(cell), st->median, isfinite(st->ci_lo) && isfinite(st->ci_hi) ? (st->ci_hi - st->ci_lo) / 2 : 0,
                         st->n, unit);
        }
        fprintf(f, "%*s", colw + (strstr(cell, "±") ? 1 : 0), cell);
    }
    fputc('\n', f);
}

void sh_print(FILE *f, const rr_doc *d, int all) {
    char scen[256], lab[256];
    fprintf(f, "%s: median ± half the 95%% CI of the mean over the counted repetitions (%s, written %s)\n",
            es_term(scen, sizeof(scen), d->scenario), d->status[0] ? d->status : "status unknown",
            d->written[0] ? d->written : "at an unknown time");
    if (!d->n) {
        fprintf(f, "(no variant has a summary or a counted repetition)\n");
        return;
    }
    int colw = 14, titlew = 32;
    for (int i = 0; i < d->n; i++) {
        int w = (int)strlen(es_term(lab, sizeof(lab), d->v[i].label)) + 2;
        colw = w > colw ? w : colw;
    }
    colw = colw > 40 ? 40 : colw;
    fprintf(f, "%-*s", titlew, "metric");
    for (int i = 0; i < d->n; i++) fprintf(f, "%*.*s", colw, colw - 2, es_term(lab, sizeof(lab), d->v[i].label));
    fputc('\n', f);
    fprintf(f, "%-*s", titlew, "repetitions counted");
    int min_reps = INT_MAX;
    for (int i = 0; i < d->n; i++) {
        int n = d->v[i].counted;
        /* a variant whose every repetition failed says so in its own line: the note
         * speaks of the ones that counted */
        if (n > 0) min_reps = n < min_reps ? n : min_reps;
        fprintf(f, "%*d", colw, n);
    }
    fputc('\n', f);
    /* bench run's rows, in its order and with its titles (sub-rows indented as there) */
    int shown = 0, others = 0;
    for (int rank = 0; rs_metric_title_at(rank); rank++) {
        const char *metric = NULL;
        for (int i = 0; i < d->n && !metric; i++)
            for (int k = 0; k < d->v[i].n && !metric; k++)
                if (d->v[i].m[k].summarized && rs_metric_rank(d->v[i].m[k].name) == rank) metric = d->v[i].m[k].name;
        if (!metric) continue;
        sh_row(f, d, metric, rs_metric_title_at(rank), titlew, colw);
        shown++;
    }
    /* every other metric of any variant, once, under its key */
    for (int i = 0; i < d->n; i++) {
        for (int k = 0; k < d->v[i].n; k++) {
            const rm_metric *m = &d->v[i].m[k];
            if (!m->summarized || rs_metric_rank(m->name) >= 0) continue;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) seen = rr_summary_metric(&d->v[j], m->name) != NULL;
            if (seen) continue;
            others++;
            if (all) sh_row(f, d, m->name, m->name, titlew, colw);
        }
    }
    if (others && !all) fprintf(f, "(%d more metric%s: bench show --all %s)\n", others, others == 1 ? "" : "s", d->dir);
    (void)shown;
    char note[512];
    rs_repetitions_note(note, sizeof(note), min_reps == INT_MAX ? 0 : min_reps, cmp_reps_to_compare(d));
    rs_print_folded(f, note);
    rm_busy_note(d, note, sizeof(note));
    if (note[0]) rs_print_folded(f, note);
}

/* ---- a scenario's folder: its runs ---- */

typedef struct sh_run_line {
    char name[256];
    char line[512];
    char written[32];
} sh_run_line;

static int sh_newest_first(const void *a, const void *b) {
    const sh_run_line *x = a, *y = b;
    int c = strcmp(y->written, x->written);
    return c ? c : strcmp(y->name, x->name);
}

/* One run's line, from its results.json; 0, or -1 when it has none or it cannot be read. */
static int sh_run_line_of(const char *dir, const char *name, sh_run_line *out) {
    char path[PATH_MAX + 300], err[512];
    snprintf(path, sizeof(path), "%s/%s/results.json", dir, name);
    rr_doc d;
    if (access(path, R_OK) || rr_load(path, &d, err, sizeof(err))) return -1;
    int counted = INT_MAX;
    for (int i = 0; i < d.n; i++) counted = d.v[i].counted < counted ? d.v[i].counted : counted;
    char n[256], st[64], wr[64];
    es_term(n, sizeof(n), name);
    es_term(st, sizeof(st), d.status);
    es_term(wr, sizeof(wr), d.written);
    snprintf(out->name, sizeof(out->name), "%s", name);
    snprintf(out->written, sizeof(out->written), "%s", d.written ? d.written : "");
    snprintf(out->line, sizeof(out->line), "  %-40s %-11s %2d variant%s x %d repetition%s  %s", n, st, d.n, d.n == 1 ? " " : "s",
             counted == INT_MAX ? 0 : counted, counted == 1 ? " " : "s", wr[0] ? wr : "(not written)");
    rr_free(&d);
    return 0;
}

int sh_list_runs(FILE *f, const char *dir, char *err, size_t errlen) {
    DIR *dd = opendir(dir);
    if (!dd) return snprintf(err, errlen, "%s: %s", dir, strerror(errno)), -1;
    int n = 0, cap = 0;
    sh_run_line *v = NULL;
    for (struct dirent *de; (de = readdir(dd));) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            sh_run_line *g = realloc(v, sizeof(*v) * (size_t)(cap = cap ? 2 * cap : 16));
            if (!g) {
                free(v);
                closedir(dd);
                return snprintf(err, errlen, "out of memory"), -1;
            }
            v = g;
        }
        n += !sh_run_line_of(dir, de->d_name, &v[n]);
    }
    closedir(dd);
    if (n) qsort(v, (size_t)n, sizeof(*v), sh_newest_first);
    if (n) {
        char d[PATH_MAX];
        fprintf(f, "%s holds %d run%s, newest first (bench show %s/RUN shows one):\n", es_term(d, sizeof(d), dir), n,
                n == 1 ? "" : "s", d);
    }
    for (int i = 0; i < n; i++) fprintf(f, "%s\n", v[i].line);
    free(v);
    return n;
}
