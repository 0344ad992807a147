/* report.html: a results directory on one self-contained page (the figures as base64 PNG,
 * the summary table, the environment, the scenario). */
#ifndef BENCH_REPORT_HTML_H
#define BENCH_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "harness/report/rmodel.h"

/* DIR/report.html for d (d->dir), written to a temporary file and renamed: the figures of
 * plots (the folder plot.c drew into; none when have_gnuplot is 0), then the tables.
 * 0, or -1 with err. */
int rh_write(const rr_doc *d, const char *plots, int have_gnuplot, char *err, size_t errlen);

/* s as HTML text (< > & " escaped): for anyone's text, a label or a field of results.json. */
void rh_text(FILE *f, const char *s);

#endif
