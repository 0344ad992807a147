/* The results folder of a run: one bench run at a time, and what killed runs left.
 *
 * The lock is flock(2) on the folder itself (no file in it, so emptying the folder
 * with --force cannot remove it), held through a descriptor the run keeps open until
 * it ends (O_CLOEXEC: workers do not inherit it; the kernel drops it when the run dies,
 * however it dies). The holder's pid is read back from /proc/locks for the message. */
#ifndef BENCH_OUTLOCK_H
#define BENCH_OUTLOCK_H

#include <stddef.h>

/* Locks dir (which must exist) for this process: 0 with *fd to close at the end; -1
 * with err, naming the holder's pid when another run holds it; 1 with a note in err
 * (and *fd -1) where the file system cannot lock a folder (the run goes on). */
int ol_lock(const char *dir, int *fd, char *err, size_t errlen);
/* Removes the temporary files NAME.tmp.PID (results written atomically) that a run
 * killed mid-write left in dir and its subfolders one level down, where PID is no
 * longer a live process. Returns how many were removed. */
int ol_clean_stale(const char *dir);

#endif
