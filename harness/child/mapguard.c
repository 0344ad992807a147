/* SIGBUS from a model file that changed under its mapping (mapguard.h). */
#include "harness/child/mapguard.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *mg_who = "bench";
static int mg_reraise;

/* ---- async-signal-safe formatting ---- */

typedef struct mg_buf {
    char s[1024];
    size_t n;
} mg_buf;

static void mg_puts(mg_buf *b, const char *s) {
    while (*s && b->n < sizeof(b->s) - 1) b->s[b->n++] = *s++;
}

static void mg_putu(mg_buf *b, uint64_t v) {
    char d[24];
    int k = 0;
    do { d[k++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (k && b->n < sizeof(b->s) - 1) b->s[b->n++] = d[--k];
}

static void mg_putx(mg_buf *b, uint64_t v) {
    char d[20];
    int k = 0;
    do { d[k++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    mg_puts(b, "0x");
    while (k && b->n < sizeof(b->s) - 1) b->s[b->n++] = d[--k];
}

static uint64_t mg_hex(const char **p) {
    uint64_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        if (c >= '0' && c <= '9') v = v << 4 | (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v = v << 4 | (uint64_t)(c - 'a' + 10);
        else return v;
    }
}

/* The mapping a faulting address lies in. */
typedef struct mg_map {
    uint64_t lo, hi;        /* its addresses, [lo, hi) */
    uint64_t off;           /* the file offset of the address */
} mg_map;

/* One line of /proc/self/maps: "lo-hi perms offset dev inode   path". Fills path
 * and *m when addr lies in it. */
static int mg_line_match(const char *l, uintptr_t addr, char *path, size_t plen, mg_map *m) {
    const char *p = l;
    uint64_t lo = mg_hex(&p);
    if (*p++ != '-') return 0;
    uint64_t hi = mg_hex(&p);
    if (addr < lo || addr >= hi) return 0;
    while (*p == ' ') p++;
    while (*p && *p != ' ') p++;        /* perms */
    while (*p == ' ') p++;
    uint64_t fo = mg_hex(&p);
    for (int f = 0; f < 2; f++) {       /* dev, inode */
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
    }
    while (*p == ' ') p++;
    size_t k = 0;
    while (p[k] && p[k] != '\n' && k < plen - 1) { path[k] = p[k]; k++; }
    path[k] = 0;
    *m = (mg_map){.lo = lo, .hi = hi, .off = fo + (addr - lo)};
    return 1;
}

/* The file mapped at addr, from /proc/self/maps; 0 when none is found. */
static int mg_find(uintptr_t addr, char *path, size_t plen, mg_map *m) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[4096], line[4608];
    size_t ln = 0;
    int found = 0;
    ssize_t got;
    while (!found && (got = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < got && !found; i++) {
            if (buf[i] != '\n') {
                if (ln < sizeof(line) - 1) line[ln++] = buf[i];
                continue;
            }
            line[ln] = 0;
            found = mg_line_match(line, addr, path, plen, m);
            ln = 0;
        }
    }
    close(fd);
    return found && path[0] == '/';
}

static volatile sig_atomic_t mg_entered;

/* ---- recovering (mg_install_recover) ---- */

static int mg_recover;
static int mg_spin;                 /* the handlers of several threads take turns */
static int mg_have_line;            /* mg_line is written */
static char mg_line[1024];          /* "PATH changed under the mapping: ..." */
static struct { uint64_t lo, hi; } mg_zeroed[64];   /* the mappings replaced by zeros */
static int mg_n_zeroed;

static void mg_describe(mg_buf *b, const char *path, uint64_t off) {
    mg_puts(b, path);
    mg_puts(b, " changed under the mapping: reading offset ");
    mg_putu(b, off);
    mg_puts(b, " faulted (SIGBUS): the file was truncated or rewritten while it was mapped");
}

/* Maps zeros over the whole mapping addr lies in, if it is a file's: the read that faulted
 * runs on (reading zeros), and so does every later one. Returns 1 when addr is readable now. */
static int mg_zero_mapping(uintptr_t addr) {
    while (__atomic_exchange_n(&mg_spin, 1, __ATOMIC_ACQUIRE)) { /* another thread's handler: a few syscalls */ }
    int ok = 0;
    for (int i = 0; i < mg_n_zeroed && !ok; i++) ok = addr >= mg_zeroed[i].lo && addr < mg_zeroed[i].hi;
    char path[1024];
    mg_map m;
    if (!ok && mg_n_zeroed < (int)(sizeof(mg_zeroed) / sizeof(mg_zeroed[0])) && mg_find(addr, path, sizeof(path), &m) &&
        mmap((void *)(uintptr_t)m.lo, m.hi - m.lo, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
            MAP_FAILED) {
        mg_zeroed[mg_n_zeroed].lo = m.lo;
        mg_zeroed[mg_n_zeroed++].hi = m.hi;
        ok = 1;
        if (!__atomic_load_n(&mg_have_line, __ATOMIC_ACQUIRE)) {
            mg_buf b = {.n = 0};
            mg_describe(&b, path, m.off);
            memcpy(mg_line, b.s, b.n + 1);
            mg_buf out = {.n = 0};
            mg_puts(&out, mg_who);
            mg_puts(&out, ": ");
            mg_puts(&out, mg_line);
            mg_puts(&out, "; it reads as zeros from now on\n");
            if (write(2, out.s, out.n) < 0) { /* nothing left to tell */ }
            __atomic_store_n(&mg_have_line, 1, __ATOMIC_RELEASE);
        }
    }
    __atomic_store_n(&mg_spin, 0, __ATOMIC_RELEASE);
    return ok;
}

static void mg_handler(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (mg_recover && si) {
        int saved = errno;
        int ok = mg_zero_mapping((uintptr_t)si->si_addr);
        errno = saved;
        if (ok) return;     /* the faulting read runs again, on zeros */
    }
    /* Every thread reading the file faults at once: the first one reports, the
     * others wait here for the process to end (a default action taken by a second
     * thread would kill it before the line is out). */
    if (__atomic_exchange_n(&mg_entered, 1, __ATOMIC_SEQ_CST))
        for (;;) pause();
    int saved = errno;
    mg_buf b = {.n = 0};
    char path[1024];
    mg_map m;
    mg_puts(&b, mg_who);
    if (si && mg_find((uintptr_t)si->si_addr, path, sizeof(path), &m)) {
        mg_puts(&b, ": ");
        mg_describe(&b, path, m.off);
    } else {
        mg_puts(&b, ": SIGBUS at address ");
        mg_putx(&b, si ? (uint64_t)(uintptr_t)si->si_addr : 0);
        mg_puts(&b, ", in no mapped file: a mapped file changed or a device failed");
    }
    mg_puts(&b, "\n");
    if (write(2, b.s, b.n) < 0) { /* nothing left to tell */ }
    errno = saved;
    if (mg_reraise) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    _exit(MG_EXIT_CHANGED);
}

void mg_install(const char *who, int reraise) {
    mg_who = who;
    mg_reraise = reraise;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = mg_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

void mg_install_recover(const char *who) {
    mg_recover = 1;
    mg_install(who, 0);
}

int mg_changed(char *msg, size_t len) {
    if (!__atomic_load_n(&mg_have_line, __ATOMIC_ACQUIRE)) return 0;
    snprintf(msg, len, "%s", mg_line);
    return 1;
}

int mg_test_truncate(const char *path) {
    const char *hooks = getenv("BENCH_TEST_HOOKS"), *size = getenv("BENCH_TEST_TRUNCATE_MODEL");
    if (!hooks || strcmp(hooks, "1") || !size || !*size || !path) return 0;
    char *end;
    long long n = strtoll(size, &end, 10);
    if (*end || n < 0) {
        fprintf(stderr, "test hook: BENCH_TEST_TRUNCATE_MODEL=%s: expected a byte count\n", size);
        return -1;
    }
    if (truncate(path, (off_t)n)) {
        fprintf(stderr, "test hook: truncate %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 1;
}
