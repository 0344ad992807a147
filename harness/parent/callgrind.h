/* "instructions:callgrind": instructions per phase, counted by valgrind's callgrind.
 *
 * Where hardware counters are missing (VMs, CI), instruction counts are the
 * figure a regression gate can use: with one thread they are the same from one
 * run to the next, to the instruction. After a scenario's timed repetitions,
 * each selected variant runs once more as
 *     valgrind --tool=callgrind --callgrind-out-file=<dir>/callgrind/v<V>.out \
 *         bench worker --spec <dir>/specs/v<V>.json --callgrind
 * The worker dumps callgrind's counters at the end of each phase (worker.h), so
 * callgrind writes v<V>.out.1 (start: exec to the spec read), .2 (load),
 * .3 (prefill), .4 (decode) and, at exit, v<V>.out (end: teardown); each file
 * names its phase ("desc: Trigger: Client Request: load") and its total
 * ("totals: N"). The files stay in the results directory for callgrind_annotate.
 *
 * Metrics (results.json summary, one value per variant, unit "count"):
 *   instructions_load  instructions_prefill  instructions_decode  instructions_total
 */
#ifndef BENCH_CALLGRIND_H
#define BENCH_CALLGRIND_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/scenario/scenario.h"

enum { CG_PH_START, CG_PH_LOAD, CG_PH_PREFILL, CG_PH_DECODE, CG_PH_END, CG_PH_COUNT };
const char *cg_phase_name(int ph);          /* "start", "load", "prefill", "decode", "end" */

typedef struct cg_counts {
    int ok;                                 /* every phase was counted */
    uint64_t ir[CG_PH_COUNT];               /* instructions (Ir) per phase */
    uint64_t total;                         /* the whole process */
    char out_file[512];                     /* "" when the variant was not measured */
    char error[512];                        /* why not ok */
} cg_counts;

/* 0 when valgrind is on PATH and this build can mark phases; else -1 and why. */
int cg_available(char *err, size_t errlen);

/* Reads out_file and out_file.1, .2, ... as the worker's dumps leave them. */
int cg_parse(const char *out_file, cg_counts *c, char *err, size_t errlen);

/* Runs one spec under callgrind (stdout and stderr into log_path) and parses its
 * files. Returns 0 when c->ok; else -1 with c->error. */
int cg_measure(const char *bench_exe, const char *spec_path, const char *out_file, const char *log_path,
               double timeout_s, volatile sig_atomic_t *interrupted, cg_counts *c);

/* Every selected variant of s, its spec at <out_dir>/specs/v<V>.json. *out gets
 * s->n_variants entries (the caller frees it); a variant that fails has ok = 0
 * and its error, and the others still run. Returns -1 only when out of memory. */
int cg_run_variants(const scenario *s, const char *bench_exe, const char *out_dir,
                    volatile sig_atomic_t *interrupted, cg_counts **out);

#endif
