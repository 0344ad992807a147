/* One child process run to completion for the parent's untimed extras (the callgrind
 * repetition, the accuracy pass): its stdout and stderr into a log file, stdin from
 * /dev/null, killed at a deadline or when the run is interrupted. */
#ifndef BENCH_SUBPROC_H
#define BENCH_SUBPROC_H

#include <signal.h>
#include <stddef.h>

/* Runs argv[0] (found on PATH) with argv. Returns 0 when it exited 0; else -1 with why in err
 * ("timed out after 30 s (see LOG)", "exited 2 (see LOG)", "died of signal 11 (see LOG)",
 * "interrupted"), what naming the program in those messages. */
int sp_run(char *const argv[], const char *what, const char *log_path, double timeout_s,
           volatile sig_atomic_t *interrupted, char *err, size_t errlen);

#endif
