/* /metrics reads, the report's half: see scrape_report.h. */
#include "scrape_report.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/escape.h"
#include "harness/scenario/events.h"

/* One series' figures over the values read (absent reads left out). */
typedef struct sr_fig {
    double peak, sum;
    int n, absent, fallback;
} sr_fig;

static void sr_figures(const rn_scrape *c, int series, sr_fig *f) {
    memset(f, 0, sizeof(*f));
    f->peak = -INFINITY;
    for (int i = 0; i < c->n; i++) {
        const rn_scrape_sample *x = &c->v[i];
        if (x->series != series) continue;
        if (x->how == BENCH_SCR_ABSENT || !isfinite(x->value)) {
            f->absent++;
            continue;
        }
        f->fallback |= x->how == BENCH_SCR_FALLBACK;
        if (x->value > f->peak) f->peak = x->value;
        f->sum += x->value;
        f->n++;
    }
}

void sr_metrics(const rn_proc *p, mt_bag *b) {
    const rn_scrape *c = &p->scrape;
    if (!c->n_series && !c->n_failed) return;
    char name[160];
    for (int s = 0; s < c->n_series; s++) {
        sr_fig f;
        sr_figures(c, s, &f);
        if (!f.n) continue;     /* never read: no figure rather than a made-up 0 */
        snprintf(name, sizeof(name), "server.%s.peak", c->series[s]);
        mt_add(b, name, "", MT_INFO, f.peak);
        snprintf(name, sizeof(name), "server.%s.mean", c->series[s]);
        mt_add(b, name, "", MT_INFO, f.sum / f.n);
    }
    mt_add(b, "server.scrapes_failed", "count", MT_INFO_LO, c->n_failed);
}

/* The reads as rows: row r's first sample is rows[r] (series 0 opens a read). Returns the count. */
static int sr_rows(const rn_scrape *c, int *rows) {
    int n = 0;
    for (int i = 0; i < c->n; i++)
        if (c->v[i].series == 0) rows[n++] = i;
    return n;
}

/* The value of series s in the read starting at sample `at`; NaN when absent. */
static double sr_cell(const rn_scrape *c, int at, int s) {
    for (int i = at; i < c->n && (i == at || c->v[i].series != 0); i++)
        if (c->v[i].series == s) return c->v[i].how == BENCH_SCR_ABSENT ? NAN : c->v[i].value;
    return NAN;
}

cJSON *sr_proc_json(const rn_proc *p, int64_t t0) {
    const rn_scrape *c = &p->scrape;
    if (!c->n_series && !c->n_failed) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "reads", c->n_reads);
    cJSON_AddNumberToObject(o, "failed", c->n_failed);
    if (c->n_failed) cJSON_AddStringToObject(o, "first_failure", c->first_failure);
    cJSON *ser = cJSON_AddObjectToObject(o, "series");
    for (int s = 0; s < c->n_series; s++) {
        sr_fig f;
        sr_figures(c, s, &f);
        cJSON *e = cJSON_AddObjectToObject(ser, c->series[s]);
        if (f.n) {
            cJSON_AddNumberToObject(e, "peak", f.peak);
            cJSON_AddNumberToObject(e, "mean", f.sum / f.n);
        } else {
            cJSON_AddNullToObject(e, "peak");
            cJSON_AddNullToObject(e, "mean");
        }
        cJSON_AddNumberToObject(e, "samples", f.n);
        cJSON_AddNumberToObject(e, "absent", f.absent);
        if (f.fallback) cJSON_AddBoolToObject(e, "fallback", 1);
    }
    int *rows = c->n ? malloc((size_t)c->n * sizeof(*rows)) : NULL;
    int nr = rows ? sr_rows(c, rows) : 0;
    cJSON *tl = cJSON_AddObjectToObject(o, "timeline");
    for (int s = -1; nr && s < c->n_series; s++) {
        cJSON *col = cJSON_AddArrayToObject(tl, s < 0 ? "t_ms" : c->series[s]);
        for (int r = 0; r < nr; r++) {
            double v = s < 0 ? (double)(c->v[rows[r]].t_ns - t0) * 1e-6 : sr_cell(c, rows[r], s);
            cJSON_AddItemToArray(col, isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull());
        }
    }
    free(rows);
    return o;
}

char *sr_timeline_csv(const rn_proc *p, int64_t t0, size_t *len) {
    const rn_scrape *c = &p->scrape;
    if (!c->n) return NULL;
    int *rows = malloc((size_t)c->n * sizeof(*rows));
    char *text = NULL;
    FILE *f = rows ? open_memstream(&text, len) : NULL;
    if (!f) {
        free(rows);
        return NULL;
    }
    int nr = sr_rows(c, rows);
    fputs("t_ms", f);
    for (int s = 0; s < c->n_series; s++) {
        fputc(',', f);
        es_csv(f, c->series[s], 0);     /* a name with labels holds quotes and commas */
    }
    fputc('\n', f);
    for (int r = 0; r < nr; r++) {
        fprintf(f, "%.3f", (double)(c->v[rows[r]].t_ns - t0) * 1e-6);
        for (int s = 0; s < c->n_series; s++) {
            double v = sr_cell(c, rows[r], s);
            if (isfinite(v)) fprintf(f, ",%.17g", v);
            else fputc(',', f);
        }
        fputc('\n', f);
    }
    free(rows);
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}
