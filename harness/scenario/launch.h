/* What a scenario would start, and whether the person running it allowed that.
 *
 * A scenario is data that people share, so nothing in one runs unasked. The one field that
 * starts a program is an http target's launch (target.h), and bench starts it only when
 *   - the command line says --allow-launch (bench run, exec, sweep), or
 *   - every launch is on the allow-list ln_allow_file names: $XDG_CONFIG_HOME/bench/allow-launch,
 *     else ~/.config/bench/allow-launch. One prefix of a launch a line, its words separated by
 *     blanks and written as the scenario writes them, placeholders unfilled: "{bench} serve"
 *     allows ["{bench}", "serve", ...] with any further words, "llama-server" allows
 *     llama-server with any arguments; '#' starts a comment. The file counts only when it is a
 *     regular file owned by this user (or root) that no one else may write, as ssh takes
 *     authorized_keys; any other file is refused by name, not half trusted.
 * `bench plan` lists the launches and whether the allow-list covers them.
 */
#ifndef BENCH_LAUNCH_H
#define BENCH_LAUNCH_H

#include <stddef.h>

#include "harness/scenario/scenario_types.h"
#include "harness/scenario/target.h"

/* One target that launches: its label and settings (argv as written), both the scenario's. */
typedef struct ln_launch {
    const char *target;
    const tg_http *http;
} ln_launch;

typedef struct ln_set {
    int n;
    ln_launch *v;
} ln_set;

/* The launches of s's selected variants, one per target choice. 0, or -1 with err. */
int ln_collect(const scenario *s, ln_set *out, char *err, size_t errlen);
void ln_free(ln_set *set);

/* The allow-list's path into buf (always terminated). Returns buf. */
char *ln_allow_file(char *buf, size_t len);

/* Whether launch i of set may start: 1 by the allow-list, 0 not on it, -1 the allow-list
 * exists but is refused (why says which file and why). */
int ln_listed(const ln_set *set, int i, char *why, size_t whylen);

/* The whole decision: 0 when nothing launches, flag (--allow-launch) is set or the
 * allow-list covers every launch; else -1 with why: the first launch not allowed and how
 * to allow it. */
int ln_check(const ln_set *set, int flag, char *why, size_t whylen);

/* Appends " word" to buf for a POSIX shell: as it is when it needs no quoting, else inside
 * '...' (a ' written '\''). A word that does not fit sets *full and leaves buf as it was. */
void ln_append_word(char *buf, size_t len, const char *word, int *full);

/* argv as one line for a person (ln_append_word's quoting, without the leading blank). */
void ln_argv_line(char *buf, size_t len, char *const *argv);

#endif
