/* bench show's table (show.h): bench run's rows and digits, read back from results.json. */
#include "harness/report/compare.h"
#include "harness/report/show.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
        min_reps = n < min_reps ? n : min_reps;
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
