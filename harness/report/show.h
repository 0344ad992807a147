/* bench show: the summary table of a results directory, from its results.json alone (a run
 * that finished, one interrupted, a merge of shards), as bench run prints it at its end. */
#ifndef BENCH_SHOW_H
#define BENCH_SHOW_H

#include <stdio.h>

#include "harness/report/rmodel.h"

/* The table on f: a column per variant, the rows of bench run's table (every metric of the
 * summary when `all`), the repetitions note and the busy-machine warning. */
void sh_print(FILE *f, const rr_doc *d, int all);

/* A scenario's folder (results/<scenario>, which holds runs, not a run): each run below it
 * that has a results.json, newest first (by the time written, then by name), one line each
 * with its status, variants, counted repetitions and time. Returns the count of runs listed
 * (0: the folder holds none), or -1 with err when dir cannot be read. */
int sh_list_runs(FILE *f, const char *dir, char *err, size_t errlen);

#endif
