/* Small helpers shared by the tests: where the shared files are, temp dirs, running bench. */
#ifndef BENCH_TESTUTIL_H
#define BENCH_TESTUTIL_H

#include <stddef.h>

/* $BENCH_SHARED/<rel> into buf; returns buf, or NULL (and prints which file) when it is missing. */
const char *tu_shared(const char *rel, char *buf, size_t len);
/* A fresh directory under $BENCH_TMP (or /tmp); removed by tu_rmtree. */
const char *tu_tmpdir(char *buf, size_t len);
void tu_rmtree(const char *path);
/* Runs `$BENCH_BIN args...` (a shell command line after the binary); returns its exit status.
 * stdout goes to out_path when given. */
int tu_bench(const char *out_path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads whitespace-separated ints; returns the count. */
int tu_read_ints(const char *path, int *v, int max);
const char *tu_module_dir(void);

#endif
