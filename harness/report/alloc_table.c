/* Allocator workloads, the report's half: the tables bench run prints. See alloc_table.h. */
#include "alloc_table.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "harness/report/escape.h"

static const rm_metric *aw_find(const rm_model *sum, int variant, const char *name) {
    for (int i = 0; i < sum->n; i++) {
        if (sum->v[i].variant != variant) continue;
        for (int k = 0; k < sum->v[i].n; k++)
            if (!strcmp(sum->v[i].m[k].name, name) && sum->v[i].m[k].st.n) return &sum->v[i].m[k];
    }
    return NULL;
}

typedef struct aw_row {
    const char *metric, *title, *fmt;
    double scale;
    int ratio;      /* print x vs the baseline */
} aw_row;

void aw_print_table(FILE *f, const rs_input *in, const rm_model *sum) {
    const scenario *s = in->s;
    const sc_axis *al = &s->axes[SC_AX_ALLOC], *wl = &s->axes[SC_AX_WORKLOAD];
    int base = 0;
    for (int i = 0; i < al->n; i++)
        if (!strcmp(al->v[i].label, "libc")) {
            base = i;
            break;
        }
    static const aw_row rows[] = {
        {"mod.aw.ns_per_op", "ns per op, raw (mean over the timed pass; op = one alloc or one free)", "%.2f", 1, 1},
        {"mod.aw.ns_op_p50", "ns per op, raw, p50 of 64-op batches, clock cost removed", "%.2f", 1, 1},
        {"mod.aw.ns_op_p99", "ns per op, raw, p99 of 64-op batches", "%.2f", 1, 1},
        {"mod.aw.floor_ns_per_op", "driver floor: ns per op of the same passes on the null allocator (mean)", "%.2f", 1, 0},
        {"mod.aw.net_ns_per_op", "ns per op net of the floor (raw mean less floor mean)", "%.2f", 1, 1},
        {"mod.aw.net_ns_op_p50", "ns per op net of the floor, p50 (raw p50 less floor p50)", "%.2f", 1, 1},
        {"mod.aw.net_ns_op_p99", "ns per op net of the floor, p99 (raw p99 less floor p99)", "%.2f", 1, 1},
        {"mod.aw.minflt_per_op", "minor faults per op (timed pass)", "%.4f", 1, 0},
        {"mod.aw.sys_ms", "system time, ms (timed pass)", "%.1f", 1, 0},
        {"mod.aw.fragmentation", "fragmentation: RSS growth at peak / bytes live at peak", "%.2f", 1, 0},
        {"peak_rss_mib", "peak RSS of the worker, MiB", "%.1f", 1, 0},
    };
    int cw = 16;
    for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++) {
        const aw_row *row = &rows[ri];
        char t[256]; /* labels are the scenario's: control characters escaped (escape.h) */
        fprintf(f, "\n%s (median of %d)%s%s%s\n", row->title, s->repetitions, row->ratio ? "; x: relative to " : "",
                row->ratio ? es_term(t, sizeof(t), al->v[base].label) : "", row->ratio ? " = 1.00x" : "");
        fprintf(f, "%-14s", "workload");
        for (int a = 0; a < al->n; a++) fprintf(f, " %*.*s", cw, cw, es_term(t, sizeof(t), al->v[a].label));
        fputc('\n', f);
        for (int wi = 0; wi < wl->n; wi++) {
            int any = 0;
            for (int a = 0; a < al->n; a++) any |= s->variants[wi * al->n + a].selected;
            if (!any) continue;
            fprintf(f, "%-14.14s", es_term(t, sizeof(t), wl->v[wi].label));
            const rm_metric *bm = aw_find(sum, wi * al->n + base, row->metric);
            for (int a = 0; a < al->n; a++) {
                const rm_metric *m = aw_find(sum, wi * al->n + a, row->metric);
                char cell[64] = "-";
                if (m) {
                    int n = snprintf(cell, sizeof(cell), row->fmt, m->st.median * row->scale);
                    if (row->ratio && bm && bm->st.median > 0 && n > 0)
                        snprintf(cell + n, sizeof(cell) - (size_t)n, " %5.3gx", m->st.median / bm->st.median);
                }
                fprintf(f, " %*s", cw, cell);
            }
            fputc('\n', f);
        }
    }
    fprintf(f, "\nspread (min .. max, CI) per cell: results.csv; every repetition: results.json\n");
}
