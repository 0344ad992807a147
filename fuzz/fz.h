/* Shared by the libFuzzer targets: the parsers under test read files by path, so
 * each input is written to files in one private directory (on /dev/shm where it
 * exists: no disk traffic per input) and the parser is pointed at them.
 * Built with clang -fsanitize=fuzzer,address,undefined (fuzz/fuzz.mk). */
#ifndef BENCH_FUZZ_FZ_H
#define BENCH_FUZZ_FZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fz_dir_buf[256];

static inline void fz_cleanup(void) {
    if (!fz_dir_buf[0]) return;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fz_dir_buf);
    if (system(cmd)) { /* best effort: a leftover directory in /dev/shm is harmless */ }
}

/* The private directory, made on first use and removed at exit. */
static inline const char *fz_dir(void) {
    if (fz_dir_buf[0]) return fz_dir_buf;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fz_dir_buf, sizeof(fz_dir_buf), "%s/bench-fuzz.XXXXXX", base);
    if (!mkdtemp(fz_dir_buf)) { perror("fuzz: mkdtemp"); abort(); }
    atexit(fz_cleanup);
    return fz_dir_buf;
}

/* dir/name, written with exactly n bytes of p. Aborts on I/O errors: they are the
 * harness's, not the parser's. */
static inline const char *fz_write(const char *name, const void *p, size_t n, char *path, size_t len) {
    snprintf(path, len, "%s/%s", fz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) { perror(path); abort(); }
    return path;
}

static inline void fz_unlink(const char *name) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", fz_dir(), name);
    unlink(path);
}

/* Splits d at each occurrence of sep into at most max parts (the last takes the rest).
 * Returns the number of parts; a missing part has length 0. */
static inline int fz_split(const uint8_t *d, size_t n, const char *sep, const uint8_t **part, size_t *plen, int max) {
    size_t sl = strlen(sep);
    int k = 0;
    while (k < max - 1) {
        const uint8_t *hit = memmem(d, n, sep, sl);
        if (!hit) break;
        part[k] = d;
        plen[k++] = (size_t)(hit - d);
        n -= (size_t)(hit - d) + sl;
        d = hit + sl;
    }
    part[k] = d;
    plen[k++] = n;
    for (int i = k; i < max; i++) { part[i] = d + n; plen[i] = 0; }
    return k;
}

/* A NUL-terminated copy (the JSON parsers want strings); caller frees. */
static inline char *fz_strndup(const uint8_t *d, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, d, n);
    s[n] = 0;
    return s;
}

/* FUZZ_VERBOSE=1: say why each input was rejected (to check that the seeds parse). */
static inline void fz_say(const char *what, const char *err) {
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (verbose) fprintf(stderr, "fuzz: %s: %s\n", what, err && err[0] ? err : "ok");
}

#endif
