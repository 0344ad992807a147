/* The class of a metric and its better direction, declared where the metric is made
 * (harness/report/metrics.c, serve_report.c, results.c; a module's counters through
 * bench_emit_as, engines/abi/module.h) and kept with it in results.json's summary
 * ("class", "better", "tolerance"), so that bench compare judges a figure by what its
 * maker said it is, not by its name.
 *
 *   exact  a figure the program counts (allocations, bytes a module reserved, instructions
 *          under callgrind): any change beyond its tolerance (0 but for instructions, 0.5%)
 *   count  a count with run-to-run slack from the process's own start-up (page faults):
 *          tolerance 5% + 16
 *   bytes  a memory reading (RSS by region, a device's used memory): tolerance 2% + 0.25
 *   time   a clock's figure (ms, tok/s, ns/op): tested for noise (bench compare)
 *   info   depends on the rest of the machine (PSS, context switches, page cache
 *          residency): shown, never judged
 *
 * A results.json written before metrics declared their class has none; mc_legacy gives
 * such a file's metrics the class its reader gave them then, from their names.
 */
#ifndef BENCH_MCLASS_H
#define BENCH_MCLASS_H

typedef enum mc_class { MC_EXACT, MC_COUNT, MC_BYTES, MC_TIME, MC_INFO } mc_class;

typedef struct mc_decl {
    mc_class cls;
    int better;                 /* +1 larger is better, -1 smaller, 0 neither */
    double tol_rel, tol_abs;    /* exact, count, bytes: |b - a| <= rel x |a| + abs is no change */
} mc_decl;

/* cls with its default tolerance, and better. */
mc_decl mc_declare(mc_class cls, int better);
/* A module's counter as module.h declares it: its BENCH_CTR_* class and direction, or,
 * for BENCH_CTR_UNIT, the class its unit says. */
mc_decl mc_from_counter(const char *unit, int ctr_cls, int better);

const char *mc_class_name(mc_class c);      /* "exact", "count", "bytes", "time", "info" */
int mc_class_parse(const char *name);       /* an mc_class, or -1 */
const char *mc_better_name(int better);     /* "higher", "lower", "none" */
int mc_better_parse(const char *name, int *better);    /* 0, or -1 */

/* The class of a metric of a results.json that declares none (written before declarations). */
mc_decl mc_legacy(const char *metric, const char *unit);

#endif
