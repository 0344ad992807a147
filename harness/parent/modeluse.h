/* Which other bench processes use a model file now.
 *
 * Two runs on one model spoil each other's page-cache states: one's cold repetitions evict
 * the pages the other's warm repetitions just read. While it runs, each bench run (and
 * exec) leaves a mark in DIR (the model cache's in-use/ folder): an empty file named
 * "<dev>-<ino>.<pid>" for the model file's identity, removed at the end. A mark whose
 * process is gone (a run killed with SIGKILL) or is no longer a bench (its pid reused) does
 * not count, and is removed by the next look.
 */
#ifndef BENCH_MODELUSE_H
#define BENCH_MODELUSE_H

#include <limits.h>
#include <stddef.h>

typedef struct mu_mark {
    char dir[PATH_MAX];
    unsigned long long dev, ino;
    char path[PATH_MAX + 64];       /* this process's mark; "" when none was left */
} mu_mark;

/* Leaves this process's mark for the file (dev, ino) in dir (made when missing). 0, or -1
 * with err: a run goes on without one (it only loses the detection). */
int mu_enter(const char *dir, unsigned long long dev, unsigned long long ino, mu_mark *m, char *err, size_t errlen);
/* The pid of another live bench process with a mark for the same file, or 0. */
int mu_other(const mu_mark *m);
/* Removes this process's mark. */
void mu_leave(mu_mark *m);

#endif
