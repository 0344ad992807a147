/* One message for a bad argument, with a suggestion instead of the whole help page. */
#include "harness/cli/cliargs.h"

#include <limits.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

#include "engines/core/runtime/modreg.h"
#include "harness/report/locations.h"
#include "harness/scenario/confine.h"
#include "harness/scenario/launch.h"
#include "util/ut_term.h"

/* Levenshtein distance, capped: options are short */
static int cli_dist(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 62 || lb > 62) return 99;
    int prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]), del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

const char *cli_nearest(const char *arg, const char *const *known) {
    const char *best = NULL;
    int bd = 3;
    for (const char *const *k = known; *k; k++) {
        int d = cli_dist(arg, *k);
        /* "--rep" for "--repeat": a prefix of exactly one option */
        if (d > 2 && strlen(arg) > 3 && !strncmp(*k, arg, strlen(arg))) d = 2;
        if (d < bd) bd = d, best = *k;
    }
    return best;
}

int cli_enum_arg(const char *cmd, const char *opt, const char *v, int (*parse)(const char *), const char *expect,
                 int *out) {
    const int x = parse(v);
    if (x < 0) {
        fprintf(stderr, "bench %s: %s %s: expected %s\n", cmd, opt, v, expect);
        return CLI_EXIT_USAGE;
    }
    *out = x;
    return 0;
}

int cli_bad_arg(FILE *f, const char *cmd, const char *arg, const char *const *known) {
    for (const char *const *k = known; *k; k++)
        if (!strcmp(arg, *k)) {
            fprintf(f, "bench %s: %s needs a value (bench %s --help)\n", cmd, arg, cmd);
            return CLI_EXIT_USAGE;
        }
    if (arg[0] != '-') {
        fprintf(f, "bench %s: unexpected argument \"%s\" (bench %s --help)\n", cmd, arg, cmd);
        return CLI_EXIT_USAGE;
    }
    const char *near = cli_nearest(arg, known);
    if (near) fprintf(f, "bench %s: unknown option \"%s\": did you mean %s? (bench %s --help)\n", cmd, arg, near, cmd);
    else fprintf(f, "bench %s: unknown option \"%s\" (bench %s --help lists the options)\n", cmd, arg, cmd);
    return CLI_EXIT_USAGE;
}

void cli_allow_model_cache(void) {
    char dir[PATH_MAX], e[64];
    const char *why;
    /* a cache not made yet holds no model to read */
    if (!loc_model_cache(dir, sizeof(dir), &why)) (void)cf_allow_as(dir, "the model cache", e, sizeof(e));
}

int cli_allow_read(const char *cmd, const char *dir) {
    char e[PATH_MAX + 256];
    if (!cf_allow(dir, e, sizeof(e))) return 0;
    fprintf(stderr, "bench %s: %s\n", cmd, e);
    return CLI_EXIT_USAGE;
}

int cli_launch_gate(const char *cmd, const struct scenario *s, int flag) {
    ln_set set;
    char why[4096];
    if (ln_collect(s, &set, why, sizeof(why))) {
        fprintf(stderr, "bench %s: %s\n", cmd, why);
        return CLI_EXIT_USAGE;
    }
    int rc = ln_check(&set, flag, why, sizeof(why));
    ln_free(&set);
    if (!rc) return 0;
    fprintf(stderr, "bench %s: %s: %s\n", cmd, s->file, why);
    return CLI_EXIT_USAGE;
}

void cli_say(const char *cmd, const char *fmt, ...) {
    char raw[8192], safe[4 * sizeof(raw)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    fprintf(stderr, "bench %s: %s\n", cmd, es_term_lines(safe, sizeof(safe), raw));
}

void cli_usage_modules(FILE *f) {
    char *dir = modreg_default_dir(NULL);
    fprintf(f, "  modules          on the module path%s%s (bench list says what each does and takes):\n", dir ? " " : "", dir ? dir : "");
    for (int i = 0; dir && modreg_family(i); i++) {
        const char *fam = modreg_family(i);
        char *names = modreg_names(dir, fam);
        /* the CPU runs in process: "cpu" is no module, but a --device value */
        fprintf(f, "                     --%-7s %s%s%s\n", fam, strcmp(fam, "device") ? "" : "cpu, ", names && names[0] ? names : "",
                names && names[0] ? "" : strcmp(fam, "device") ? "(none found)" : "(no other built)");
        free(names);
    }
    free(dir);
}
