/* Where results, models and the commit come from: one rule, the same from any directory. */
#include "harness/report/locations.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* make passes these (Makefile, BENCH_COMMIT); a build outside make has none */
#ifndef BENCH_COMMIT_SHA
#define BENCH_COMMIT_SHA ""
#endif
#ifndef BENCH_COMMIT_DIRTY
#define BENCH_COMMIT_DIRTY 0
#endif

const char *loc_commit_sha(void) { return BENCH_COMMIT_SHA; }
int loc_commit_dirty(void) { return BENCH_COMMIT_DIRTY; }

void loc_commit_short(char *buf, size_t len) {
    const char *s = loc_commit_sha();
    if (!*s) snprintf(buf, len, "nogit");
    else snprintf(buf, len, "%.7s%s", s, loc_commit_dirty() ? "-dirty" : "");
}

static int loc_is_dir(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* The checkout holding the binary: the nearest ancestor of /proc/self/exe's folder with
 * the project's own files (build/bench, build/asan/bench: two or three levels up). */
static int loc_checkout(char *buf, size_t len) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash || slash == exe) return -1;
        *slash = 0;
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof(probe), "%s/harness/cli/main.c", exe);
        if (!access(probe, F_OK)) {
            snprintf(buf, len, "%s", exe);
            return 0;
        }
    }
    return -1;
}

int loc_results_root(char *buf, size_t len, const char **why) {
    const char *env = getenv("BENCH_RESULTS");
    char co[PATH_MAX];
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        *why = "$BENCH_RESULTS";
    } else if (!loc_checkout(co, sizeof(co))) {
        snprintf(buf, len, "%s/results", co);
        *why = "the checkout bench was built in";
    } else {
        snprintf(buf, len, "results");
        *why = "the current directory: bench is not in its checkout and $BENCH_RESULTS is not set";
    }
    return 0;
}

int loc_model_cache(char *buf, size_t len, const char **why) {
    const char *env = getenv("BENCH_MODEL_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && *env) snprintf(buf, len, "%s", env), *why = "$BENCH_MODEL_CACHE";
    else if (xdg && *xdg) snprintf(buf, len, "%s/bench", xdg), *why = "$XDG_CACHE_HOME/bench";
    else if (home && *home) snprintf(buf, len, "%s/.cache/bench", home), *why = "$HOME/.cache/bench";
    else {
        const char *w;
        char root[PATH_MAX];
        loc_results_root(root, sizeof(root), &w);
        snprintf(buf, len, "%s/models", root);
        *why = "the results folder: neither $XDG_CACHE_HOME nor $HOME is set";
    }
    return 0;
}

static int loc_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    if (ftw->level == 0) return 0; /* the folder itself stays */
    return remove(path) ? -1 : 0;
}

int loc_prepare_out(const char *dir, int force, char *err, size_t errlen) {
    if (!loc_is_dir(dir)) {
        if (!access(dir, F_OK)) {
            snprintf(err, errlen, "--out %s: exists and is not a folder", dir);
            return -1;
        }
        return 0; /* the caller creates it */
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "--out %s: %s", dir, strerror(errno));
        return -1;
    }
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
    closedir(d);
    if (!entries) return 0;
    char rj[PATH_MAX + 16];
    snprintf(rj, sizeof(rj), "%s/results.json", dir);
    int is_run = !access(rj, F_OK);
    if (!is_run) {
        snprintf(err, errlen,
                 "--out %s: the folder is not empty and holds no results.json, so it is not a bench run's; "
                 "choose an empty or new folder",
                 dir);
        return -1;
    }
    if (!force) {
        snprintf(err, errlen,
                 "--out %s: already holds a run (results.json); give --force to empty it first, or choose another folder",
                 dir);
        return -1;
    }
    /* the earlier run's timelines/, logs/ and plots/ would otherwise stay beside a
     * results.json that no longer names them */
    if (nftw(dir, loc_rm, 16, FTW_DEPTH | FTW_PHYS)) {
        snprintf(err, errlen, "--out %s --force: cannot empty the folder: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}
