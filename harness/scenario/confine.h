/* Where a scenario file may make bench read (docs/reliability.md, "Paths in scenario files").
 *
 * A scenario someone else wrote names files to read: the model, its tokenizer, a
 * request-lengths file, an allocation trace. Each must resolve (realpath: symlinks and
 * `..` followed first) inside one of the allowed roots:
 *   - the scenario file's own folder and what is under it,
 *   - the current directory and what is under it,
 *   - the model cache (harness/report/locations.h; the layer above finds it and hands
 *     it over with cf_allow_as, as harness/cli/cliargs.c's cli_allow_model_cache does),
 *   - each folder given with --allow-read DIR (bench run, plan, exec: cf_allow),
 *   - each folder of $BENCH_ALLOW_READ (colon-separated, for scripts and CI).
 * The scenario's folder and the current directory do not count when they hold the
 * home directory ($HOME itself, /home, /): run from one's home, they would open
 * ~/.ssh to any scenario. Such a folder is allowed only by naming it (--allow-read ~).
 * A command-line path (bench generate --model) is the user's own choice and is not
 * checked here.
 */
#ifndef BENCH_CONFINE_H
#define BENCH_CONFINE_H

#include <stddef.h>
#include <sys/types.h>

/* Adds DIR to the roots for the rest of the process (--allow-read). It must exist.
 * Returns 0, or -1 with err. */
int cf_allow(const char *dir, char *err, size_t errlen);
/* The same, the root named why in messages ("the model cache"; why is not copied). */
int cf_allow_as(const char *dir, const char *why, char *err, size_t errlen);
/* Forgets the roots cf_allow added (tests). */
void cf_reset(void);

/* Checks path, as scenario_file wrote it (relative to the current directory), before
 * anything opens it. A path that does not exist is resolved as far as it goes (its
 * folder's realpath and its name), so "not found" is said only inside the roots and
 * never tells a scenario what exists elsewhere. Returns 0 when it resolves inside a
 * root; -1 with err, one sentence: the path, what it resolves to, the roots, and the
 * flag and the variable that would allow it. */
int cf_check(const char *scenario_file, const char *path, char *err, size_t errlen);
/* cf_check for each symlink in folder dir: a safetensors model is a folder whose
 * config.json, tokenizer.json, index and shards the loader opens by name, and one of
 * them may point elsewhere. The error names the entry. */
int cf_check_folder(const char *scenario_file, const char *dir, char *err, size_t errlen);

/* ---- the file checked is the file read (a swap between the check and the open) ----
 *
 * cf_check resolves a path once; the parent and each worker open it later. A symlink
 * swapped in between would have them read elsewhere. bench run therefore resolves the
 * model and tokenizer paths once, reads the model through the resolved path, notes
 * each file's identity (st_dev, st_ino), and hands path and identity to the workers,
 * which open the resolved path following no symlink at all and refuse a file that is
 * not the one noted. */

/* Opens a resolved path to read, following no symlink in any component (openat2
 * RESOLVE_NO_SYMLINKS; where the kernel lacks it, O_NOFOLLOW on the last component),
 * without blocking on a FIFO. Returns the descriptor with *dev and *ino, or -1 with err. */
int cf_open_exact(const char *resolved, unsigned long long *dev, unsigned long long *ino, char *err, size_t errlen);
/* Whether resolved is still the file (dev, ino): 0, or -1 with err saying what it is now. */
int cf_same_file(const char *resolved, unsigned long long dev, unsigned long long ino, char *err, size_t errlen);

/* ---- checked and opened at once (a file read where the scenario is parsed) ----
 *
 * A file the parser reads itself (a lengths file, a trace) is checked and opened by one
 * call, so that nothing can be swapped between the two: cf_check's resolution, the
 * identity (st_dev, st_ino) of the file the resolved path names then, and an open of that
 * path as cf_open_exact does it (no symlink followed, a FIFO never waited on). */

/* What a file of this st_mode is, for "PATH: is %s, expected a regular file": "a FIFO",
 * "a directory", "a character device", ... */
const char *cf_kind(mode_t mode);

/* Opens path to read, as cf_check allows it: cf_check's message when it is outside the
 * roots; "PATH: is a FIFO, expected a regular file" (a directory, a device, a socket) for
 * what is not a regular file; and a refusal for a file that is not the one checked. what
 * says what the file is for ("a mooncake trace"), appended to a "not found" message.
 * Returns a blocking descriptor of a regular file (the caller closes it), or -1 with err. */
int cf_open_checked(const char *scenario_file, const char *path, const char *what, char *err, size_t errlen);
/* The open half, for a path already resolved and the identity noted when it was checked:
 * path names the file in messages. Refuses a symlink anywhere in resolved, what is not a
 * regular file, and a file whose (dev, ino) is not (dev, ino). A descriptor or -1 with err. */
int cf_open_identical(const char *path, const char *resolved, unsigned long long dev, unsigned long long ino, char *err,
                      size_t errlen);

#endif
