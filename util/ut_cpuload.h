/* How busy the CPUs are: the load average and the CPU time of every process (/proc/loadavg,
 * /proc/stat's "cpu" line), read before and after some work. Two readings give the share of
 * the CPUs that other processes used, and that a hypervisor stole. Written once here for the
 * two that ask: bench run's report of each repetition (harness/parent/sysload.h) and the
 * kernel tuner, which keeps a measurement only when it was taken on a quiet machine
 * (engines/core/compute/kernels_tune.h). */
#ifndef BENCH_UT_CPULOAD_H
#define BENCH_UT_CPULOAD_H

#include <stdint.h>

typedef struct ut_cpu_snap {
    int ok;                     /* 0: /proc/stat or /proc/loadavg could not be read */
    double load1;               /* 1-minute load average (it counts our own threads too) */
    uint64_t busy;              /* jiffies, all CPUs: user + nice + system + irq + softirq + steal */
    uint64_t total;             /* jiffies, all CPUs: busy + idle + iowait */
    uint64_t steal;             /* jiffies, all CPUs, taken by the hypervisor */
    int64_t self_ns;            /* CPU time of this process (all its threads) */
} ut_cpu_snap;

/* The load between two readings: the share of all CPUs busy, used by other processes (neither
 * this one nor the CPU seconds `extra_cpu_s` the caller counts as its own, e.g. its children),
 * and stolen, each in [0, 1]; NAN when a reading failed. */
typedef struct ut_cpu_load {
    double busy, others, steal;
    int cpus;
} ut_cpu_load;

/* The shares above which timings are not to be trusted as quiet ones. */
#define UT_BUSY_OTHERS 0.25     /* a quarter of the machine's CPUs used by other processes */
#define UT_BUSY_STEAL 0.05      /* 5% of the CPU time taken by the hypervisor */

/* Reads now into s (s->ok says whether it could). */
void ut_cpu_read(ut_cpu_snap *s);
ut_cpu_load ut_cpu_between(const ut_cpu_snap *a, const ut_cpu_snap *b, double extra_cpu_s);
/* 1 when l says the machine was busy (others or steal above the shares above); 0 when quiet
 * or unknown (a failed reading cannot be held against a measurement). */
int ut_cpu_busy(const ut_cpu_load *l);

#endif
