/* A model file that changes under a mapping: the process reading it takes SIGBUS.
 *
 * A mmap'd model truncated (or rewritten in place) while it runs makes the next
 * read of a page past the new end fault with SIGBUS. Without a handler that is a
 * bare "Bus error" and exit 135. mg_install puts in a handler that finds the
 * faulting address's mapping in /proc/self/maps and writes one line:
 *   bench generate: /m/llama.gguf changed under the mapping: reading offset 104857600
 *   faulted (SIGBUS): the file was truncated or rewritten while it was mapped
 * then, as asked, either dies by SIGBUS itself (the worker: the parent records the
 * signal and the line from the worker's log as the run's cause) or exits with
 * MG_EXIT_CHANGED (bench generate, bench exec).
 * Only open/read/write/_exit/raise are used in the handler: async-signal-safe. */
#ifndef BENCH_MAPGUARD_H
#define BENCH_MAPGUARD_H

#include <stddef.h>

/* Exit status of a process that mg_install(..., 0) stopped. */
#define MG_EXIT_CHANGED 4

/* who: the line's prefix ("bench worker"). reraise: 1 die by SIGBUS, 0 _exit(MG_EXIT_CHANGED). */
void mg_install(const char *who, int reraise);

/* For a process that can fail a request instead of dying (bench serve): on a SIGBUS in a
 * mapped file, the handler maps zeros over that whole mapping (MAP_FIXED, anonymous), writes
 *   bench serve: /m/llama.gguf changed under the mapping: reading offset 104857600 faulted
 *   (SIGBUS): the file was truncated or rewritten while it was mapped; it reads as zeros from now on
 * and returns: the read that faulted runs again on zeros, so the computation ends with
 * wrong numbers instead of the process. The caller asks mg_changed after each step and
 * throws such results away. A SIGBUS in no mapped file still ends the process
 * (MG_EXIT_CHANGED), as mg_install(who, 0) does. */
void mg_install_recover(const char *who);
/* 1, with "PATH changed under the mapping: ..." in msg, once a mapping was replaced by
 * zeros (mg_install_recover); else 0. */
int mg_changed(char *msg, size_t len);

/* Test hook (BENCH_TEST_HOOKS=1 and BENCH_TEST_TRUNCATE_MODEL=BYTES): truncates
 * path to BYTES, as another process would while the run has it mapped. Returns 1
 * when it truncated, 0 when not asked, -1 on error (reported on stderr). */
int mg_test_truncate(const char *path);

#endif
