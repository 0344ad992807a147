/* Reads an http target's /metrics while a repetition runs (the target's "metrics" block,
 * harness/scenario/target_metrics.h): a thread of the worker that GETs the URL at a fixed period,
 * parses the body (harness/net/prom.h) and sends each series' value as a SCRAPE event
 * (events.h), so that the parent puts them on the repetition's timeline beside the server's
 * RSS. A read that fails (no answer, not 200, a body that is not the format) is one SCRAPE
 * with a = -1 and the reason: counted and reported, never fatal.
 *
 * Reads: one when started, one every period_s after (a read slower than the period skips the
 * ticks it missed, so reads never pile up), and one when stopped: a repetition shorter than
 * the period still has its two ends.
 */
#ifndef BENCH_SCRAPE_H
#define BENCH_SCRAPE_H

#include <stddef.h>

#include "harness/child/serve.h"
#include "harness/scenario/target_metrics.h"

typedef struct scr_scraper scr_scraper;

/* Starts the thread when the target has a metrics block (spec->n > 0; harness/scenario/
 * target_metrics.h, borrowed until scr_stop); base_url is the target's url with {port} filled
 * in, port what fills a {port} of the block's url. *out: NULL when there is no block. Returns
 * 0, or -1 with err (a series that is not a selector, out of memory). */
int scr_start(const tm_spec *spec, const char *base_url, const char *port, const sv_sink *sink, scr_scraper **out, char *err,
              size_t errlen);

/* Takes the last read, stops and joins the thread, frees; s may be NULL. */
void scr_stop(scr_scraper *s);

#endif
