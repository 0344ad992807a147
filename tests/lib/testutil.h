/* Small helpers shared by the tests: where the shared files are, temp dirs, running bench. */
#ifndef BENCH_TESTUTIL_H
#define BENCH_TESTUTIL_H

#include <stddef.h>

/* $BENCH_SHARED/<rel> into buf; returns buf, or NULL (and prints which file) when it is missing. */
const char *tu_shared(const char *rel, char *buf, size_t len);
/* The last file tu_shared found missing ("" when none was). */
const char *tu_missing(void);
/* In a test (cmocka): skips it, naming the missing shared file, when `have` is false. A group
 * setup that lacks shared data leaves its fixture NULL and returns 0, so that every test skips
 * instead of the group erroring out. */
#define TU_NEED(have)                                                                       \
    do {                                                                                    \
        if (!(have)) {                                                                      \
            fprintf(stderr, "skip: missing shared file %s\n", tu_missing()[0] ? tu_missing() : "(see above)"); \
            skip();                                                                         \
        }                                                                                   \
    } while (0)
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
