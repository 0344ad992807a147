/* Where a scenario file may make bench read. See confine.h. */
#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engines/abi/module.h"

#define CF_MAX_ROOTS 32

/* --allow-read folders, resolved when given: the CLI is one thread, and a root
 * outlives every scenario of the process */
static char cf_explicit[CF_MAX_ROOTS][PATH_MAX];
static const char *cf_explicit_why[CF_MAX_ROOTS];
static int cf_n_explicit;

int cf_allow_as(const char *dir, const char *why, char *err, size_t errlen) {
    if (cf_n_explicit == CF_MAX_ROOTS)
        return bench_errf(err, errlen, "%s %s: more than %d folders", why, dir, CF_MAX_ROOTS);
    if (!realpath(dir, cf_explicit[cf_n_explicit]))
        return bench_errf(err, errlen, "%s %s: %s", why, dir, strerror(errno));
    cf_explicit_why[cf_n_explicit++] = why;
    return 0;
}

int cf_allow(const char *dir, char *err, size_t errlen) { return cf_allow_as(dir, "--allow-read", err, errlen); }

void cf_reset(void) { cf_n_explicit = 0; }

/* ---- resolving ---- */

/* Removes ".", ".." and repeated slashes from an absolute path, in place, without
 * looking at the file system (used only past a component that is not there). */
static void cf_lexical(char *p) {
    char out[PATH_MAX + 2];
    size_t o = 0;
    for (const char *in = p; *in;) {
        while (*in == '/') in++;
        size_t n = strcspn(in, "/");
        if (n == 0 || (n == 1 && in[0] == '.')) {
            /* nothing */
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;    /* back over the last component */
            if (o > 0) o--;                             /* and its slash */
        } else if (o + 1 + n < sizeof(out)) {
            out[o++] = '/';
            memcpy(out + o, in, n);
            o += n;
        }
        in += n;
    }
    if (o == 0) out[o++] = '/';
    out[o] = 0;
    memcpy(p, out, o + 1);     /* never longer than p was */
}

/* The path the kernel would open, as realpath finds it, but going on where a component
 * is missing: the rest is appended as written (cleaned of "." and ".."). A dangling
 * symlink is followed to where it points, so that neither a missing file nor a link to
 * one ("not found") tells a scenario what exists outside the roots. */
#define CF_MAX_LINKS 40     /* as the kernel's ELOOP */
static int cf_resolve(const char *path, char out[PATH_MAX]) {
    char todo[2 * PATH_MAX], rest[2 * PATH_MAX], cur[PATH_MAX + 2], target[PATH_MAX];
    int links = 0;
    if (realpath(path, out)) return 0;  /* the file is there: the C library's word */
    if (path[0] == '/') {
        if (snprintf(todo, sizeof(todo), "%s", path) >= (int)sizeof(todo)) return -1;
    } else {
        if (!getcwd(cur, PATH_MAX) || snprintf(todo, sizeof(todo), "%s/%s", cur, path) >= (int)sizeof(todo)) return -1;
    }
    strcpy(out, "/");
    const char *p = todo;
    while (*p) {
        while (*p == '/') p++;
        size_t n = strcspn(p, "/");
        if (n == 0) break;
        if (n == 1 && p[0] == '.') { p += n; continue; }
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            char *slash = strrchr(out, '/');
            slash[slash == out] = 0;    /* "/a/b" -> "/a", "/a" -> "/" */
            p += n;
            continue;
        }
        if (snprintf(cur, sizeof(cur), "%s%s%.*s", out, strcmp(out, "/") ? "/" : "", (int)n, p) >= PATH_MAX) return -1;
        struct stat st;
        if (lstat(cur, &st)) {
            /* missing from here on: nothing more on the disk to follow */
            if (snprintf(cur, sizeof(cur), "%s/%s", out, p) >= PATH_MAX) return -1;
            cf_lexical(cur);
            memcpy(out, cur, strlen(cur) + 1);     /* no longer than it was: < PATH_MAX */
            return 0;
        }
        p += n;
        if (!S_ISLNK(st.st_mode)) {
            memcpy(out, cur, strlen(cur) + 1);     /* checked < PATH_MAX above */
            continue;
        }
        ssize_t k = readlink(cur, target, sizeof(target) - 1);
        if (k < 0 || ++links > CF_MAX_LINKS) return -1;
        target[k] = 0;
        /* the link's target, then what was left after it; a relative one from the link's folder */
        if (snprintf(rest, sizeof(rest), "%s/%s", target, p) >= (int)sizeof(rest)) return -1;
        if (target[0] == '/') strcpy(out, "/");
        memcpy(todo, rest, strlen(rest) + 1);
        p = todo;
    }
    return 0;
}

/* ---- roots ---- */

typedef struct cf_root {
    char path[PATH_MAX];
    const char *why;
} cf_root;

typedef struct cf_roots {
    cf_root v[CF_MAX_ROOTS * 2 + 4];
    int n;
} cf_roots;

static void cf_add(cf_roots *r, const char *dir, const char *why) {
    if (r->n == (int)(sizeof(r->v) / sizeof(r->v[0])) || !dir || !*dir) return;
    if (!realpath(dir, r->v[r->n].path)) return;    /* a folder that is not there holds nothing */
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].path, r->v[r->n].path)) return;     /* named once, for its first reason */
    r->v[r->n++].why = why;
}

static int cf_inside(const char *path, const char *root) {
    size_t n = strlen(root);
    if (!strcmp(root, "/")) return 1;
    return !strncmp(path, root, n) && (path[n] == 0 || path[n] == '/');
}

/* The scenario's folder and the current directory: not when they hold the home
 * directory ($HOME, /home, /), where they would open ~/.ssh to any scenario. */
static void cf_add_implicit(cf_roots *r, const char *dir, const char *why) {
    char rp[PATH_MAX], home[PATH_MAX];
    const char *h = getenv("HOME");
    if (!realpath(dir, rp) || !strcmp(rp, "/")) return;
    if (h && *h && realpath(h, home) && cf_inside(home, rp)) return;
    cf_add(r, rp, why);
}

static void cf_collect(cf_roots *r, const char *scenario_file) {
    r->n = 0;
    char dir[PATH_MAX], rp[PATH_MAX];
    if (scenario_file && realpath(scenario_file, rp)) {
        char *slash = strrchr(rp, '/');
        snprintf(dir, sizeof(dir), "%.*s", slash == rp ? 1 : (int)(slash - rp), rp);
        cf_add_implicit(r, dir, "the scenario's folder");
    }
    if (getcwd(dir, sizeof(dir))) cf_add_implicit(r, dir, "the current directory");
    for (int i = 0; i < cf_n_explicit; i++) cf_add(r, cf_explicit[i], cf_explicit_why[i]);
    const char *env = getenv("BENCH_ALLOW_READ");
    for (const char *p = env; p && *p; p += strcspn(p, ":"), p += *p == ':') {
        size_t n = strcspn(p, ":");
        if (n && n < sizeof(dir)) {
            snprintf(dir, sizeof(dir), "%.*s", (int)n, p);
            cf_add(r, dir, "$BENCH_ALLOW_READ");
        }
    }
}

/* cf_check, leaving in res the path it resolved to (what was checked). */
static int cf_check_resolved(const char *scenario_file, const char *path, char res[PATH_MAX], char *err, size_t errlen) {
    if (!*path) return bench_errf(err, errlen, "an empty path");
    if (cf_resolve(path, res)) return bench_errf(err, errlen, "%s: cannot be resolved (too long, or more than %d symlinks)", path, CF_MAX_LINKS);
    cf_roots *r = malloc(sizeof(*r));
    if (!r) return bench_errf(err, errlen, "out of memory");
    cf_collect(r, scenario_file);
    for (int i = 0; i < r->n; i++)
        if (cf_inside(res, r->v[i].path)) {
            free(r);
            return 0;
        }
    /* where the file is: the folder to name to allow it */
    char dir[PATH_MAX];
    char *slash = strrchr(res, '/');
    snprintf(dir, sizeof(dir), "%.*s", slash == res ? 1 : (int)(slash - res), res);
    char roots[2048] = "";
    for (int i = 0; i < r->n; i++) {
        size_t u = strlen(roots);
        snprintf(roots + u, sizeof(roots) - u, "%s%s (%s)", u ? ", " : "", r->v[i].path, r->v[i].why);
    }
    bench_errf(err, errlen, "%s resolves to %s, outside the folders a scenario may read from (%s); nothing was read. "
               "To allow it: --allow-read %s, or BENCH_ALLOW_READ=%s",
               path, res, r->n ? roots : "none", dir, dir);
    free(r);
    return -1;
}

int cf_check(const char *scenario_file, const char *path, char *err, size_t errlen) {
    char res[PATH_MAX];
    return cf_check_resolved(scenario_file, path, res, err, errlen);
}

int cf_check_folder(const char *scenario_file, const char *dir, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return 0;   /* nothing to open in it */
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        char p[PATH_MAX];
        struct stat st;
        if (snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= (int)sizeof(p)) continue;
        if (lstat(p, &st) || !S_ISLNK(st.st_mode)) continue;    /* only a link leads elsewhere */
        rc = cf_check(scenario_file, p, err, errlen);
    }
    closedir(d);
    return rc;
}

/* ---- the file checked is the file read ---- */

int cf_open_exact(const char *resolved, unsigned long long *dev, unsigned long long *ino, char *err, size_t errlen) {
    struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW, .resolve = RESOLVE_NO_SYMLINKS};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, resolved, &how, sizeof(how));
    if (fd < 0 && (errno == ENOSYS || errno == E2BIG || errno == EPERM)) /* no openat2 (or a filter refuses it) */
        fd = open(resolved, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP || e == EXDEV)
            return bench_errf(err, errlen, "%s: a symlink appeared in the path since it was checked; not read", resolved);
        return bench_errf(err, errlen, "%s: %s", resolved, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return bench_errf(err, errlen, "%s: %s", resolved, strerror(e));
    }
    *dev = (unsigned long long)st.st_dev;
    *ino = (unsigned long long)st.st_ino;
    return fd;
}

int cf_same_file(const char *resolved, unsigned long long dev, unsigned long long ino, char *err, size_t errlen) {
    unsigned long long d, i;
    int fd = cf_open_exact(resolved, &d, &i, err, errlen);
    if (fd < 0) return -1;
    close(fd);
    if (d != dev || i != ino)
        return bench_errf(err, errlen, "%s is not the file bench run checked (device %llu inode %llu then, device %llu inode %llu "
                          "now): it was replaced since; not read", resolved, dev, ino, d, i);
    return 0;
}

/* ---- checked and opened at once: the lengths file, the trace ---- */

const char *cf_kind(mode_t mode) {
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : S_ISLNK(mode) ? "a symlink" : "not a regular file";
}

int cf_open_identical(const char *path, const char *resolved, unsigned long long dev, unsigned long long ino, char *err,
                      size_t errlen) {
    unsigned long long d, i;
    char e[PATH_MAX + 256];
    int fd = cf_open_exact(resolved, &d, &i, e, sizeof(e));
    if (fd < 0) return bench_errf(err, errlen, "%s: %s", path, e);
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st)) why = strerror(errno);
    else if (!S_ISREG(st.st_mode)) why = cf_kind(st.st_mode);
    if (why) {
        close(fd);
        return bench_errf(err, errlen, "%s: is %s, expected a regular file", path, why);
    }
    if (d != dev || i != ino) {
        close(fd);
        return bench_errf(err, errlen, "%s (%s) is not the file that was checked (device %llu inode %llu then, device %llu inode %llu "
                          "now): it was replaced since; not read", path, resolved, dev, ino, d, i);
    }
    /* O_NONBLOCK was for the open (a FIFO); reads of a regular file ignore it, but the
     * stdio stream made over fd should not inherit a surprise */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int cf_open_checked(const char *scenario_file, const char *path, const char *what, char *err, size_t errlen) {
    char res[PATH_MAX];
    if (cf_check_resolved(scenario_file, path, res, err, errlen)) return -1;
    /* the identity of what was checked: lstat, so that a link planted since is itself
     * what is compared (and refused), never its target */
    struct stat st;
    if (lstat(res, &st)) return bench_errf(err, errlen, "%s: %s (%s)", path, strerror(errno), what);
    if (!S_ISREG(st.st_mode)) return bench_errf(err, errlen, "%s: is %s, expected a regular file (%s)", path, cf_kind(st.st_mode), what);
    return cf_open_identical(path, res, (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, err, errlen);
}
