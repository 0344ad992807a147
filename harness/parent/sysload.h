/* How busy the machine is around a repetition: the load average and the CPU time of every
 * process, read before and after it (util/ut_cpuload.h reads them). The report turns two
 * readings into the share of the CPUs that others used, and that a hypervisor stole
 * (results.json runs[].machine_load), and warns when timings ran on a busy machine. */
#ifndef BENCH_SYSLOAD_H
#define BENCH_SYSLOAD_H

#include "util/ut_cpuload.h"

typedef ut_cpu_snap sl_snap;
/* A repetition's load from two readings and the CPU time its workers used (seconds): the
 * share of all CPUs busy, used by other processes (neither the workers nor bench run), and
 * stolen, each in [0, 1]; NAN when a reading failed. */
typedef ut_cpu_load sl_load;
sl_load sl_between(const sl_snap *a, const sl_snap *b, double workers_cpu_s);
/* The shares above which timings are not to be trusted as quiet ones. */
#define SL_BUSY_OTHERS UT_BUSY_OTHERS
#define SL_BUSY_STEAL UT_BUSY_STEAL

/* Reads now into s (s->ok says whether it could). */
void sl_read(sl_snap *s);

#endif
