/* Per-repetition metrics, derived from what the runner recorded.
 *
 * Names are stable (results.json, results.csv and `bench compare` key on them):
 *   load_ms ttft_ms tpot_ms itl_p50_ms itl_p90_ms itl_p99_ms itl_max_ms
 *   prefill_tok_s decode_tok_s
 *   peak_rss_mib ru_maxrss_mib  {rss,anon,file,shmem,pss}_{load,prefill,end}_mib
 *   region_<name>_{rss,pss}_{load,end}_mib   (weights, kv, scratch, model_file, other_anon, other_file)
 *   {minflt,majflt}_{load,prefill,decode}   {minflt,majflt}_total  nvcsw nivcsw user_ms sys_ms
 *   perf_<event>_{load,prefill,decode,total}  (only the events that are available)
 *   mod.<family>.<counter>                     (the modules' own, in their units)
 *   serve_*  minflt_serve majflt_serve         (a serving run's: harness/child/serve.h)
 * and per repetition (all processes together):
 *   pss_total_end_mib  weights_pss_total_mib  residency_pct
 *   energy_*_j power_*_w energy_{prefill,decode}_j_per_tok gpu_{used,proc}_peak_mib  (energy_report.h)
 */
#ifndef BENCH_METRICS_H
#define BENCH_METRICS_H

#include "harness/parent/runner.h"
#include "harness/report/mclass.h"

typedef struct mt_bag {
    int n, cap;
    char **name;
    const char **unit;          /* static strings, or owned copies in units_owned */
    double *v;
    char **units_owned;
    mc_decl *decl;              /* (n) what each metric declared itself (harness/report/mclass.h) */
} mt_bag;

/* The declarations the harness's metrics make (mclass.h): a time smaller or larger better, a
 * fault count, a memory reading, a figure that depends on the rest of the machine, an exact count. */
#define MT_TIME_LO mc_declare(MC_TIME, -1)
#define MT_TIME_HI mc_declare(MC_TIME, +1)
#define MT_FAULTS mc_declare(MC_COUNT, -1)
#define MT_MEMORY mc_declare(MC_BYTES, -1)
#define MT_INFO_LO mc_declare(MC_INFO, -1)
#define MT_INFO mc_declare(MC_INFO, 0)
#define MT_EXACT mc_declare(MC_EXACT, 0)
#define MT_EXACT_LO mc_declare(MC_EXACT, -1)
#define MT_EXACT_HI mc_declare(MC_EXACT, +1)

void mt_add(mt_bag *b, const char *name, const char *unit, mc_decl decl, double v);
void mt_bag_free(mt_bag *b);

/* The metrics of one process of a repetition that ended OK. */
void mt_proc(const scenario *s, const rn_proc *p, mt_bag *b);
/* The metrics of a whole repetition (sums over its processes). */
void mt_run(const scenario *s, const rn_run *r, mt_bag *b);

#endif
