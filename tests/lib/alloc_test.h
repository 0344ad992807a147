/* Helpers shared by the allocator tests (test_arena, test_slab, test_buddy):
 * a misuse run in a forked child, a shadow-model pattern, a small PRNG.
 * Include after cmocka.h. */
#ifndef BENCH_ALLOC_TEST_H
#define BENCH_ALLOC_TEST_H

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn in a child whose stderr is a pipe; asserts the child died of SIGABRT and
 * wrote `needle`. The parent's allocator state is untouched by whatever the child does. */
static void expect_misuse(void (*fn)(void), const char *needle) {
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        fn();
        _exit(0);   /* not caught: the parent sees exit 0 instead of SIGABRT */
    }
    close(pfd[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(buf) - 1 && (r = read(pfd[0], buf + n, sizeof(buf) - 1 - n)) > 0) n += (size_t)r;
    buf[n] = 0;
    close(pfd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
        fail_msg("misuse not caught (want \"%s\"): child %s %d; stderr: %s", needle,
                 WIFSIGNALED(st) ? "died of signal" : "exited with", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), buf);
    if (!strstr(buf, needle)) fail_msg("child aborted but its message lacks \"%s\": %s", needle, buf);
}

/* xorshift64*: deterministic, so a failure replays. */
static inline uint64_t tr_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* A power-law size in [lo, hi]: uniform in log2, then uniform within the octave. */
static inline size_t tr_size(uint64_t *s, size_t lo, size_t hi) {
    unsigned lg_lo = 63u - (unsigned)__builtin_clzll(lo), lg_hi = 63u - (unsigned)__builtin_clzll(hi);
    unsigned lg = lg_lo + (unsigned)(tr_next(s) % (lg_hi - lg_lo + 1));
    size_t base = (size_t)1 << lg, v = base + tr_next(s) % base;
    return v < lo ? lo : v > hi ? hi : v;
}

/* The pattern byte j of block `id` holds; whole blocks are filled and checked, so
 * two live blocks that overlap are found as soon as either is checked. */
static inline uint8_t pat(uint32_t id, size_t j) { return (uint8_t)(id * 167u + (uint32_t)j * 13u + (uint32_t)(j >> 8)); }

static inline void pat_fill(void *p, size_t n, uint32_t id) {
    uint8_t *b = p;
    for (size_t j = 0; j < n; j++) b[j] = pat(id, j);
}

static inline int pat_ok(const void *p, size_t n, uint32_t id) {
    const uint8_t *b = p;
    for (size_t j = 0; j < n; j++)
        if (b[j] != pat(id, j)) return 0;
    return 1;
}

typedef struct live_blk { char *p; size_t size; uint32_t id; } live_blk;

static int live_cmp(const void *a, const void *b) {
    const live_blk *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

/* Sorts a copy of the live set by address and asserts no two blocks overlap. */
static inline void assert_disjoint(const live_blk *v, size_t n) {
    live_blk *c = malloc((n ? n : 1) * sizeof(*c));
    assert_non_null(c);
    memcpy(c, v, n * sizeof(*c));
    qsort(c, n, sizeof(*c), live_cmp);
    for (size_t i = 1; i < n; i++)
        if (c[i - 1].p + c[i - 1].size > c[i].p)
            fail_msg("blocks overlap: %p+%zu and %p", (void *)c[i - 1].p, c[i - 1].size, (void *)c[i].p);
    free(c);
}

#endif
