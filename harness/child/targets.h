/* The table of targets (wtarget.h): one entry a target, found by the name the scenario and
 * the worker spec give it. A new target is one row in targets.c. */
#ifndef BENCH_TARGETS_H
#define BENCH_TARGETS_H

#include <stddef.h>

#include "harness/child/wtarget.h"

/* The target called name; NULL when there is none. */
const wt_target_i *wt_find(const char *name);
/* The targets' names, ", "-separated, for a message. */
void wt_names(char *buf, size_t len);

#endif
