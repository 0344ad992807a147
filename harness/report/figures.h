/* The figures a results directory gets, shared by the drawing (plot.c) and the page that
 * shows them (report_html.c), neither of which includes the other. */
#ifndef BENCH_FIGURES_H
#define BENCH_FIGURES_H

#include <stddef.h>

/* Variants beyond this many make unreadable panels; the report says which were left out. */
#define PL_MAX_PANELS 8

/* The figures' file stems in report order (plot.h says what each shows); NULL past the last. */
static inline const char *pl_figure_name(int k) {
    static const char *const names[] = {"rss_timeline", "latency", "itl", "faults", "alloc", "kv"};
    return k >= 0 && (size_t)k < sizeof(names) / sizeof(names[0]) ? names[k] : NULL;
}

#endif
