/* The subcommands' one message for an argument they do not take: a missing value, an
 * unknown option with the nearest known one ("did you mean --repeat?"), or an extra
 * operand. Every usage error exits CLI_EXIT_USAGE. */
#ifndef BENCH_CLIARGS_H
#define BENCH_CLIARGS_H

#include <stdio.h>

#define CLI_EXIT_USAGE 2

/* known: the command's options, NULL-terminated. Prints one line (and a pointer to
 * `bench CMD --help`) to f; returns CLI_EXIT_USAGE. */
int cli_bad_arg(FILE *f, const char *cmd, const char *arg, const char *const *known);
/* An option that names one value of an enum (parse: the value of a name, -1 for another): 0
 * with *out set, or CLI_EXIT_USAGE after "bench CMD: OPT V: expected EXPECT" on stderr. */
int cli_enum_arg(const char *cmd, const char *opt, const char *v, int (*parse)(const char *), const char *expect,
                 int *out);
/* The known option nearest to arg by edit distance (at most 2, or a prefix), or NULL. */
const char *cli_nearest(const char *arg, const char *const *known);

/* The model cache as a folder a scenario may read (harness/scenario/confine.h: the spec
 * layer cannot locate it); bench run, exec and plan call it before loading one. */
void cli_allow_model_cache(void);
/* --allow-read DIR of bench CMD: 0, or CLI_EXIT_USAGE after printing why. */
int cli_allow_read(const char *cmd, const char *dir);

/* "bench CMD: message\n" on stderr, the message's control characters escaped (line feeds
 * kept): a message may quote a results.json, a scenario or a server, which anyone may have
 * written, and an ESC in it must not reach the terminal. */
void cli_say(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The launch gate (harness/scenario/launch.h) for bench CMD on s's selected variants: 0 when
 * nothing launches or it is allowed (flag: --allow-launch given); else CLI_EXIT_USAGE after
 * printing what would start and how to allow it. */
struct scenario;
int cli_launch_gate(const char *cmd, const struct scenario *s, int flag);

/* The help's "modules" lines: each family's modules as found on the module path (modreg's
 * table of families, modreg_names), so no help text types a module's name. */
void cli_usage_modules(FILE *f);

#endif
