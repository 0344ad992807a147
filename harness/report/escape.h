/* Writing strings from results.json (labels from a scenario, module counters' names), which
 * anyone may have written, into the three places a run's figures go: a terminal, a CSV file
 * and HTML (plot.c's pl_html_text). */
#ifndef BENCH_ESCAPE_H
#define BENCH_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* src for a terminal, into dst (always terminated, cut at len - 1): each control
 * character (below 0x20, and DEL) as \xHH, so that ESC or BEL in a label neither moves
 * the cursor, recolours the screen nor rings; everything else as it is. Returns dst. */
char *es_term(char *dst, size_t len, const char *src);
/* src as one CSV field (RFC 4180): quoted, each " doubled, when `always` or when it holds a
 * comma, quote or line break; else as it is. NULL is the empty field. */
void es_csv(FILE *f, const char *src, int always);

#endif
