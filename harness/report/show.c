/* bench show's table (show.h): bench run's rows and digits, read back from results.json. */
#include "harness/report/show.h"

#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/escape.h"
#include "harness/report/results.h"

static const cJSON *sh_get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static void sh_row(FILE *f, const rr_doc *d, const char *metric, const char *title, int titlew, int colw) {
    const char *unit = "";
    for (int i = 0; i < d->n && !*unit; i++) {
        const cJSON *u = sh_get(rr_summary_metric(&d->v[i], metric), "unit");
        if (cJSON_IsString(u)) unit = u->valuestring;
    }
    char name[512], safe[512];
    snprintf(name, sizeof(name), *unit ? "%s (%s)" : "%s", title, unit);
    fprintf(f, "%-*s", titlew, es_term(safe, sizeof(safe), name));
    for (int i = 0; i < d->n; i++) {
        char cell[96] = "-";
        if (rr_summary_metric(&d->v[i], metric)) {
            double med = rr_summary_num(&d->v[i], metric, "median"), n = rr_summary_num(&d->v[i], metric, "n");
            double lo = rr_summary_num(&d->v[i], metric, "ci_lo"), hi = rr_summary_num(&d->v[i], metric, "ci_hi");
            rs_fmt_value(cell, sizeof(cell), med, isfinite(lo) && isfinite(hi) ? (hi - lo) / 2 : 0, isfinite(n) ? (int)n : 0,
                         unit);
        }
        fprintf(f, "%*s", colw + (strstr(cell, "±") ? 1 : 0), cell);
    }
    fputc('\n', f);
}

void sh_print(FILE *f, const rr_doc *d, int all) {
    const cJSON *status = sh_get(d->root, "status");
    char scen[256], lab[256];
    fprintf(f, "%s: median ± half the 95%% CI of the mean over the counted repetitions (%s, written %s)\n",
            es_term(scen, sizeof(scen), d->scenario), cJSON_IsString(status) ? status->valuestring : "status unknown",
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
        const cJSON *rc = sh_get(d->v[i].summary, "repetitions_counted");
        int n = cJSON_IsNumber(rc) ? rc->valueint : 0;
        min_reps = n < min_reps ? n : min_reps;
        fprintf(f, "%*d", colw, n);
    }
    fputc('\n', f);
    /* bench run's rows, in its order and with its titles (sub-rows indented as there) */
    int shown = 0, others = 0;
    for (int rank = 0; rs_metric_title_at(rank); rank++) {
        const char *metric = NULL;
        for (int i = 0; i < d->n && !metric; i++) {
            const cJSON *m;
            cJSON_ArrayForEach(m, sh_get(d->v[i].summary, "metrics")) if (rs_metric_rank(m->string) == rank) {
                metric = m->string;
                break;
            }
        }
        if (!metric) continue;
        sh_row(f, d, metric, rs_metric_title_at(rank), titlew, colw);
        shown++;
    }
    /* every other metric of any variant, once, under its key */
    for (int i = 0; i < d->n; i++) {
        const cJSON *m;
        cJSON_ArrayForEach(m, sh_get(d->v[i].summary, "metrics")) {
            if (rs_metric_rank(m->string) >= 0) continue;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) seen = rr_summary_metric(&d->v[j], m->string) != NULL;
            if (seen) continue;
            others++;
            if (all) sh_row(f, d, m->string, m->string, titlew, colw);
        }
    }
    if (others && !all) fprintf(f, "(%d more metric%s: bench show --all %s)\n", others, others == 1 ? "" : "s", d->dir);
    (void)shown;
    char note[512];
    rs_repetitions_note(note, sizeof(note), min_reps == INT_MAX ? 0 : min_reps);
    rs_print_folded(f, note);
    rs_busy_note_json(note, sizeof(note), sh_get(d->root, "runs"));
    if (note[0]) rs_print_folded(f, note);
}
