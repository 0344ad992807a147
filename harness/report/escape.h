/* Writing strings from results.json (labels from a scenario, module counters' names), which
 * anyone may have written, into the three places a run's figures go: a terminal, a CSV file
 * and HTML (report_html.h's rh_text). */
#ifndef BENCH_ESCAPE_H
#define BENCH_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* es_term, for the terminal, is util/ut_term.h's: the worker and the http client escape a
 * server's text with it too. */
#include "util/ut_term.h"

/* src as one CSV field (RFC 4180): quoted, each " doubled, when `always` or when it holds a
 * comma, quote or line break; else as it is. NULL is the empty field. */
void es_csv(FILE *f, const char *src, int always);

#endif
