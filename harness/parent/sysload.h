/* How busy the machine is around a repetition: the load average and the CPU time of every
 * process (/proc/loadavg, /proc/stat's "cpu" line), read before and after it. The report
 * turns two readings into the share of the CPUs that others used, and that a hypervisor
 * stole (results.json runs[].machine_load), and warns when timings ran on a busy machine. */
#ifndef BENCH_SYSLOAD_H
#define BENCH_SYSLOAD_H

#include <stdint.h>

typedef struct sl_snap {
    int ok;                     /* 0: /proc/stat or /proc/loadavg could not be read */
    double load1;               /* 1-minute load average (it counts our own worker too) */
    uint64_t busy;              /* jiffies, all CPUs: user + nice + system + irq + softirq + steal */
    uint64_t total;             /* jiffies, all CPUs: busy + idle + iowait */
    uint64_t steal;             /* jiffies, all CPUs, taken by the hypervisor */
    int64_t self_ns;            /* CPU time of this process (bench run, all its threads) */
} sl_snap;

/* A repetition's load from two readings and the CPU time its workers used (seconds): the
 * share of all CPUs busy, used by other processes (neither the workers nor bench run), and
 * stolen, each in [0, 1]; NAN when a reading failed. */
typedef struct sl_load {
    double busy, others, steal;
    int cpus;
} sl_load;
sl_load sl_between(const sl_snap *a, const sl_snap *b, double workers_cpu_s);
/* The shares above which timings are not to be trusted as quiet ones. */
#define SL_BUSY_OTHERS 0.25     /* a quarter of the machine's CPUs used by other processes */
#define SL_BUSY_STEAL 0.05      /* 5% of the CPU time taken by the hypervisor */

/* Reads now into s (s->ok says whether it could). */
void sl_read(sl_snap *s);

#endif
