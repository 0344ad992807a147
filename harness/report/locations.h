/* Where bench writes, whatever directory it runs from (README.md, "Where results go"):
 *   results     --out DIR; else $BENCH_RESULTS; else the results/ folder of the checkout
 *               the binary was built in (found from /proc/self/exe); else ./results, with
 *               a note saying so
 *   model cache $BENCH_MODEL_CACHE; else $XDG_CACHE_HOME/bench; else $HOME/.cache/bench
 *   commit      the one the binary was built from (make records it), never the current
 *               directory's
 */
#ifndef BENCH_LOCATIONS_H
#define BENCH_LOCATIONS_H

#include <stddef.h>

/* The folder results/<scenario>/... goes under. *why (static) says which rule chose it. */
int loc_results_root(char *buf, size_t len, const char **why);
/* The synth model cache folder. */
int loc_model_cache(char *buf, size_t len, const char **why);
/* The build's commit: full sha (or "" when built outside git) and whether the tree had
 * uncommitted changes to tracked files. */
const char *loc_commit_sha(void);
int loc_commit_dirty(void);
/* "1a2b3c4", "1a2b3c4-dirty", or "nogit". */
void loc_commit_short(char *buf, size_t len);

/* Makes dir ready for a run: created when absent; refused when it holds anything,
 * unless force, which empties it first, and only when it holds a results.json (a
 * bench run's folder), so --force never empties a folder bench did not write. */
int loc_prepare_out(const char *dir, int force, char *err, size_t errlen);

#endif
