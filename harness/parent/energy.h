/* Energy and GPU memory, read from outside the workers, as the machine counts them.
 *
 * Glossary
 *   source   one way of counting the machine's energy, a row of en_sources[] (energy.c):
 *              rapl  the CPU packages' powercap counters, <root>/class/powercap/intel-rapl:N/
 *                    energy_uj (AMD's packages appear under the same names), summed; each wraps
 *                    to 0 past its max_energy_range_uj. root: $BENCH_SYSFS_ROOT, else /sys.
 *              nvml  every GPU through libnvidia-ml.so.1 ($BENCH_NVML_LIB), dlopen'd at run time
 *                    (no link-time dependency): its total energy counter (mJ), or, on a GPU that
 *                    has none, its power (mW) integrated between readings (trapezoids); and the
 *                    GPUs' used memory and the workers' (their compute processes' memory)
 *   reader   the sources that opened on this machine; each that did not says why
 *   mark     a reading at one of a repetition's phase boundaries (the runner's RN_PH_*:
 *            start, load, prefill, end); a phase's joules are the difference of two marks
 *   point    a reading of the timeline, taken with the RSS samples: the watts since the
 *            point before, and the GPU memory then
 *
 * Invariants: a source's joules only grow (a wrapped counter is unwrapped against its range,
 * which holds as long as readings are closer than one wrap: minutes at full power); a reading
 * is all sources or none (a source failing mid-run makes that reading's energy unknown, never
 * a partial sum). Energy is the machine's, not the worker's: other processes' work counts too.
 */
#ifndef BENCH_ENERGY_H
#define BENCH_ENERGY_H

#include <stdint.h>
#include <sys/types.h>

#define EN_MAX_SRC 2        /* rows of en_sources[] */
#define EN_MARKS 4          /* the runner's phase boundaries (RN_PH_COUNT) */

typedef struct en_reader en_reader;

/* Opens every source that works here: root is the sysfs root (NULL: $BENCH_SYSFS_ROOT, else
 * /sys), nvml_lib the NVML library (NULL: $BENCH_NVML_LIB, else "libnvidia-ml.so.1"). A
 * source that cannot be used is left closed with its reason; NULL only out of memory. */
en_reader *en_open(const char *root, const char *nvml_lib);
void en_close(en_reader *r);            /* NULL: nothing */

/* 1 when at least one source counts energy. */
int en_available(const en_reader *r);
/* Why there is no energy ("rapl: ...; nvml: ..."), or "" when there is. */
const char *en_why(const en_reader *r);
/* The sources, opened or not: name ("rapl", "nvml"), what it counts, whether it opened, its
 * reason when not, and how it counts ("counter", "power samples"). */
int en_n_sources(void);
const char *en_source_name(int i);
const char *en_source_what(int i);
int en_source_ok(const en_reader *r, int i);
const char *en_source_why(const en_reader *r, int i);
const char *en_source_method(const en_reader *r, int i);

/* One reading. */
typedef struct en_now {
    int64_t t_ns;               /* CLOCK_MONOTONIC, as given */
    int ok;                     /* every opened source was read */
    double j[EN_MAX_SRC];       /* J since the reader opened, per source; NAN: not opened, or failed */
    int64_t gpu_used;           /* B, all GPUs; -1: no NVML */
    int64_t gpu_proc;           /* B, the given pids on all GPUs; -1: no NVML, or it could not say */
} en_now;

/* Reads every opened source now (t_ns: the caller's clock; power samples are integrated
 * against it). pids: whose GPU memory gpu_proc sums (n may be 0). */
void en_read(en_reader *r, int64_t t_ns, const pid_t *pids, int n, en_now *out);

/* ---- one repetition ---- */

typedef struct en_point {
    int64_t t_ns;
    double w;                   /* W, all sources, since the point before (NAN at the first, or unknown) */
    int64_t gpu_used, gpu_proc; /* B; -1 unknown */
} en_point;

typedef struct en_run {
    en_reader *rd;              /* borrowed: the runner's, open for the whole run (NULL: none) */
    int npids, cap_pids;
    pid_t *pids;                /* (npids) the repetition's workers */
    en_now mark[EN_MARKS];      /* t_ns 0: not taken */
    int n_pts, cap_pts;
    en_point *pts;              /* (n_pts) the timeline */
    en_now last;                /* the reading of the last point (t_ns 0: none yet) */
} en_run;

void en_run_begin(en_run *e, en_reader *rd);
void en_run_pid(en_run *e, pid_t pid);          /* a worker of the repetition */
/* The reading at boundary k (the first call for k only), which is a point too. */
void en_run_mark(en_run *e, int k, int64_t t_ns);
/* A point of the timeline; none before the first mark (the workers' exec) nor after the last
 * (what a worker does after DONE is not the workload). */
void en_run_sample(en_run *e, int64_t t_ns);
void en_run_free(en_run *e);

/* The joules and seconds between marks a and b, all sources; 0, or -1 when either mark is
 * missing or unknown. */
int en_run_between(const en_run *e, int a, int b, double *j, double *s);

#endif
