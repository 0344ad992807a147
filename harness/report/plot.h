/* Figures of a results directory, drawn by gnuplot (found at run time), and the
 * self-contained report.html.
 *
 * DIR/plots/<figure>.gp      the gnuplot script, data inlined (re-run it by hand to restyle)
 * DIR/plots/<figure>.png     pngcairo (or the plain png terminal where cairo is missing)
 * DIR/plots/<figure>.svg
 * DIR/report.html            figures as base64 PNG, the summary table, environment, scenario
 *
 * Figures (each only when the results hold its data):
 *   rss_timeline   RSS over time per variant: anonymous and file-backed pages, the named
 *                  regions (weights, KV, scratch) at each phase boundary, phase marks
 *   latency        TTFT and TPOT per variant: mean with its 95% CI, median
 *   itl            inter-token latency distributions (ECDF) per variant
 *   faults         minor and major page faults per phase per variant
 *   alloc          ns/op per workload per variant (metrics whose unit is ns/op)
 *   kv             KV bytes reserved, resident, live and wasted against tokens
 *
 * $BENCH_GNUPLOT names the gnuplot binary (default: gnuplot on PATH).
 */
#ifndef BENCH_PLOT_H
#define BENCH_PLOT_H

#include <stddef.h>
#include <stdio.h>

#include "harness/report/rmodel.h"

/* 1 when gnuplot can be run. *term gets "pngcairo" or "png" (no cairo). */
int pl_gnuplot_found(const char **png_term);

/* Runs a gnuplot script file; 0 on success, -1 with a message. */
int pl_run_gnuplot(const char *script, char *err, size_t errlen);

/* Writes gnuplot's heredoc-safe, quoted form of s ("a \"b\"") on f. */
void pl_quote(FILE *f, const char *s);

/* All figures of d into DIR/plots (when gnuplot is found) and DIR/report.html.
 * *n_figures gets the count drawn. Returns 0, or -1 with a message. The document's
 * strings are changed in place first: backquotes, quotes, backslashes and control
 * characters, which would let a results.json run commands in gnuplot, become harmless. */
int pl_results(rr_doc *d, int *n_figures, char *err, size_t errlen);

/* bench run's last step: the figures and report of the run's own model (d->dir its folder;
 * nothing read back from results.json) when gnuplot is found, else one line saying so; a
 * failure is reported on stderr and does not fail the run. d's strings are defanged as by
 * pl_results: call it after the last write. */
int pl_after_run(rr_doc *d);

/* The figures' file stems: figures.h's pl_figure_name(k). report.html: report_html.h. */
#include "harness/report/figures.h"

#endif
