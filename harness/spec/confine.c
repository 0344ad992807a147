/* Where a scenario file may make bench read. See confine.h. */
#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
 * looking at the file system (used only where it has nothing to look at). */
static void cf_lexical(char *p) {
    char *out = p + 1, *in = p + 1;
    while (*in) {
        size_t n = strcspn(in, "/");
        if (n == 0 || (n == 1 && in[0] == '.')) {
            /* nothing */
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            if (out > p + 1) {
                out--;  /* the slash after the last component */
                while (out > p + 1 && out[-1] != '/') out--;
            }
        } else {
            memmove(out, in, n);
            out += n;
            *out++ = '/';
        }
        in += n;
        if (*in) in++;
    }
    if (out > p + 1) out--;     /* no trailing slash */
    *out = 0;
}

/* The path the kernel would open: realpath where the file exists; else its folder's
 * realpath and the name (a file not there yet, or a typo); else the path made absolute
 * and cleaned. A missing file is still checked, so that "not found" never tells a
 * scenario what exists outside the roots. */
static int cf_resolve(const char *path, char out[PATH_MAX]) {
    if (realpath(path, out)) return 0;
    char abs[PATH_MAX];
    if (path[0] == '/') {
        if (snprintf(abs, sizeof(abs), "%s", path) >= (int)sizeof(abs)) return -1;
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)) || snprintf(abs, sizeof(abs), "%s/%s", cwd, path) >= (int)sizeof(abs)) return -1;
    }
    char *slash = strrchr(abs, '/');
    const char *base = slash + 1;
    if (*base && strcmp(base, ".") && strcmp(base, "..")) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%.*s", slash == abs ? 1 : (int)(slash - abs), abs);
        if (realpath(dir, out) && strlen(out) + 1 + strlen(base) < PATH_MAX) {
            if (strcmp(out, "/")) strcat(out, "/");
            strcat(out, base);
            return 0;
        }
    }
    cf_lexical(abs);
    snprintf(out, PATH_MAX, "%s", abs);
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

/* The scenario's folder and the current directory: not when they are / or $HOME. */
static void cf_add_implicit(cf_roots *r, const char *dir, const char *why) {
    char rp[PATH_MAX], home[PATH_MAX];
    const char *h = getenv("HOME");
    if (!realpath(dir, rp) || !strcmp(rp, "/")) return;
    if (h && *h && realpath(h, home) && !strcmp(rp, home)) return;
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

static int cf_inside(const char *path, const char *root) {
    size_t n = strlen(root);
    if (!strcmp(root, "/")) return 1;
    return !strncmp(path, root, n) && (path[n] == 0 || path[n] == '/');
}

int cf_check(const char *scenario_file, const char *path, char *err, size_t errlen) {
    char res[PATH_MAX];
    if (!*path) return bench_errf(err, errlen, "an empty path");
    if (cf_resolve(path, res)) return bench_errf(err, errlen, "%s: path too long", path);
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
