/* Small helpers shared by the tests: where the shared files are, temp dirs, running bench. */
#ifndef BENCH_TESTUTIL_H
#define BENCH_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

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
/* Whether prog is an executable in a $PATH folder; its path into buf (len bytes) when so.
 * A lookup in C, not `command -v` through a shell. */
int tu_on_path(const char *prog, char *buf, size_t len);
/* Copies the file src to dst (created or truncated); 0, or -1 with errno. */
int tu_copy_file(const char *src, const char *dst);
/* The file at path onto stderr (a failed run's log, for the test's output); quiet when absent. */
void tu_dump_file(const char *path);

/* The conformance suite's module list: the names of every module of family built for the
 * CPU and found on the module path (tu_module_dir), in path order, so that a module dropped
 * into a module folder is tested with no edit to any test. $BENCH_CONFORMANCE narrows it,
 * for the SDK test: "kv=skeleton" keeps only that kv module (other families stay whole).
 * Returns the count; *names (static storage, valid until the next call for that family) gets
 * the names. Fails the test when the path holds none. */
int tu_modules(const char *family, const char *const **names);
/* The same for the modules built for device ("cuda"); 0 when none is built. */
int tu_device_modules(const char *device, const char *family, const char *const **names);
/* The capabilities (BENCH_CAP_*) module family/name declares. */
uint64_t tu_module_caps(const char *family, const char *name);

#endif
