/* What a scenario would start, and whether the person running it allowed that (launch.h). */
#include "harness/scenario/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/ut_fs.h"

int ln_collect(const scenario *s, ln_set *out, char *err, size_t errlen) {
    *out = (ln_set){0};
    const sc_axis *ax = &s->axes[SC_AX_TARGET];
    if (!ax->n) return 0;
    out->v = calloc((size_t)ax->n, sizeof(*out->v));
    if (!out->v) return snprintf(err, errlen, "out of memory"), -1;
    for (int c = 0; c < ax->n; c++) {
        int used = 0;
        for (int vi = 0; vi < s->n_variants && !used; vi++)
            used = s->variants[vi].selected && s->variants[vi].pick[SC_AX_TARGET] == c;
        if (!used || strcmp(ax->v[c].name, "http")) continue;
        if (!ax->v[c].http->launch) continue;
        out->v[out->n++] = (ln_launch){.target = ax->v[c].label, .http = ax->v[c].http};
    }
    return 0;
}

void ln_free(ln_set *set) {
    free(set->v);
    *set = (ln_set){0};
}

char *ln_allow_file(char *buf, size_t len) {
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(buf, len, "%s/bench/allow-launch", xdg);
    else snprintf(buf, len, "%s/.config/bench/allow-launch", home && home[0] ? home : "/nonexistent");
    return buf;
}

/* The allow-list's text (malloc'd), NULL with *missing set when there is none, or NULL with
 * why when the file is there but not to be trusted. */
static char *ln_read_list(int *missing, char *why, size_t whylen) {
    char path[4096];
    ln_allow_file(path, sizeof(path));
    *missing = 0;
    /* no link followed, and a FIFO does not block the open */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) *missing = 1;
        else snprintf(why, whylen, "the allow-list %s cannot be read: %s", path, errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *bad = fstat(fd, &st) ? strerror(errno) : !S_ISREG(st.st_mode) ? "it is not a regular file"
                      : st.st_uid != geteuid() && st.st_uid != 0 ? "it is owned by another user"
                      : (st.st_mode & 022) ? "others than its owner may write it" : NULL;
    FILE *f = bad ? NULL : fdopen(fd, "r");
    if (!f) {
        snprintf(why, whylen, "the allow-list %s is not used: %s", path, bad ? bad : strerror(errno));
        close(fd);
        return NULL;
    }
    char e[512];
    char *text = ut_slurp_file(f, path, 1 << 20, NULL, e, sizeof(e));
    fclose(f);
    if (!text) snprintf(why, whylen, "%s", e);
    return text;
}

/* Whether the line's words (blank-separated, up to a '#') are a prefix of argv. A line with
 * no word allows nothing. */
static int ln_line_allows(char *line, char *const *argv) {
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    int i = 0;
    char *save = NULL;
    for (char *w = strtok_r(line, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save), i++)
        if (!argv[i] || strcmp(w, argv[i])) return 0;
    return i > 0;
}

int ln_listed(const ln_set *set, int i, char *why, size_t whylen) {
    int missing;
    why[0] = 0;
    char *text = ln_read_list(&missing, why, whylen);
    if (!text) return missing ? 0 : -1;
    int ok = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && !ok; line = strtok_r(NULL, "\n", &save))
        ok = ln_line_allows(line, set->v[i].http->launch);
    free(text);
    return ok;
}

int ln_check(const ln_set *set, int flag, char *why, size_t whylen) {
    if (flag || !set->n) return 0;
    for (int i = 0; i < set->n; i++) {
        char refused[1024], line[2048], path[4096];
        int listed = ln_listed(set, i, refused, sizeof(refused));
        if (listed == 1) continue;
        char *const *argv = set->v[i].http->launch;
        /* "{bench}" alone would allow any subcommand of bench: suggest "{bench} serve" */
        char *prefix[3] = {argv[0], !strcmp(argv[0], "{bench}") ? argv[1] : NULL, NULL};
        char example[512];
        ln_argv_line(line, sizeof(line), argv);
        ln_argv_line(example, sizeof(example), prefix);
        snprintf(why, whylen,
                 "target %s would start a program: %s\n"
                 "  nothing in a scenario runs unasked: give --allow-launch to allow this run's launches,\n"
                 "  or put the words it starts with (e.g. %s) on a line of %s%s%s",
                 set->v[i].target, line, example, ln_allow_file(path, sizeof(path)),
                 listed < 0 ? "\n  " : "", listed < 0 ? refused : "");
        return -1;
    }
    return 0;
}

void ln_append_word(char *buf, size_t len, const char *word, int *full) {
    size_t n = strlen(buf);
    int plain = word[0] != 0 && strspn(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./=,:") == strlen(word);
    size_t need = 1 + strlen(word) + (plain ? 0 : 2);
    for (const char *c = word; !plain && *c; c++) need += *c == '\'' ? 3 : 0;
    if (*full || n + need + 1 > len) {
        *full = 1;
        return;
    }
    char *o = buf + n;
    *o++ = ' ';
    if (!plain) *o++ = '\'';
    for (const char *c = word; *c; c++) {
        if (*c == '\'' && !plain) {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else
            *o++ = *c;
    }
    if (!plain) *o++ = '\'';
    *o = 0;
}

void ln_argv_line(char *buf, size_t len, char *const *argv) {
    if (len < 8) {
        if (len) buf[0] = 0;
        return;
    }
    buf[0] = 0;
    int full = 0;
    for (int i = 0; argv[i] && !full; i++) ln_append_word(buf, len, argv[i], &full);
    size_t n = strlen(buf);
    if (full) memcpy(buf + (n + 4 < len ? n : len - 5), " ...", 5);
    if (buf[0] == ' ') memmove(buf, buf + 1, strlen(buf));
}
