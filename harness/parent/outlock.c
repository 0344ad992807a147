/* The results folder's lock and stale temporary files (see outlock.h). */
#include "outlock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The pid of a process holding a flock on (dev, ino), from /proc/locks; -1 if none found.
 * Lines: "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (major:minor in hex). */
static long holder_pid(dev_t dev, ino_t ino) {
    FILE *f = fopen("/proc/locks", "re");
    if (!f) return -1;
    char line[256];
    long pid = -1;
    while (pid < 0 && fgets(line, sizeof(line), f)) {
        char kind[16], adv[16], rw[16];
        long p;
        unsigned maj, min;
        unsigned long long in;
        if (sscanf(line, "%*d: %15s %15s %15s %ld %x:%x:%llu", kind, adv, rw, &p, &maj, &min, &in) == 7 &&
            !strcmp(kind, "FLOCK") && maj == major(dev) && min == minor(dev) && in == (unsigned long long)ino)
            pid = p;
    }
    fclose(f);
    return pid;
}

int ol_lock(const char *dir, int *fd, char *err, size_t errlen) {
    *fd = -1;
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) {
        snprintf(err, errlen, "--out %s: %s", dir, strerror(errno));
        return -1;
    }
    /* test hook: a file system that cannot lock folders (BENCH_TEST_FLOCK_ERRNO=95, EOPNOTSUPP) */
    const char *hooks = getenv("BENCH_TEST_HOOKS"), *fe = getenv("BENCH_TEST_FLOCK_ERRNO");
    int fake = hooks && !strcmp(hooks, "1") && fe ? atoi(fe) : 0;
    if (fake || flock(d, LOCK_EX | LOCK_NB)) {
        int e = fake ? fake : errno;
        if (e != EWOULDBLOCK && e != EINTR) {
            /* a file system without flock on folders (NFS turns flock into a POSIX lock,
             * which wants a descriptor open for writing): run, unlocked, and say so */
            snprintf(err, errlen, "--out %s: the folder cannot be locked here (%s); running without the lock, so a "
                     "second run into it would not be refused", dir, strerror(e));
            close(d);
            return 1;
        }
        struct stat st;
        long pid = e == EWOULDBLOCK && !fstat(d, &st) ? holder_pid(st.st_dev, st.st_ino) : -1;
        if (e != EWOULDBLOCK) snprintf(err, errlen, "--out %s: cannot lock the folder: %s", dir, strerror(e));
        else if (pid > 0)
            snprintf(err, errlen, "--out %s: another bench run (pid %ld) is writing to this folder; wait for it to end or choose another folder",
                     dir, pid);
        else snprintf(err, errlen, "--out %s: another bench run is writing to this folder; wait for it to end or choose another folder", dir);
        close(d);
        return -1;
    }
    *fd = d;
    return 0;
}

/* NAME.tmp.PID with PID a process that no longer exists */
static int is_stale_tmp(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (!t || t == name) return 0;
    for (const char *n; (n = strstr(t + 1, ".tmp."));) t = n;
    const char *digits = t + 5;
    if (!*digits) return 0;
    for (const char *c = digits; *c; c++)
        if (*c < '0' || *c > '9') return 0;
    long pid = strtol(digits, NULL, 10);
    if (pid <= 0 || pid > INT_MAX) return 0;
    return kill((pid_t)pid, 0) && errno == ESRCH;
}

static int clean_dir(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    char path[PATH_MAX];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path)) continue;
        struct stat st;
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth > 0) removed += clean_dir(path, depth - 1);
        } else if (S_ISREG(st.st_mode) && is_stale_tmp(e->d_name) && !unlink(path)) {
            removed++;
        }
    }
    closedir(d);
    return removed;
}

int ol_clean_stale(const char *dir) { return clean_dir(dir, 1); }
