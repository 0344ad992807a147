/* /proc/loadavg and /proc/stat (ut_cpuload.h). */
#include "util/ut_cpuload.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void ut_cpu_read(ut_cpu_snap *s) {
    memset(s, 0, sizeof(*s));
    struct timespec ts;
    if (!clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)) s->self_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    int got = fscanf(f, "%lf", &s->load1);
    fclose(f);
    if (got != 1) return;
    f = fopen("/proc/stat", "r");
    if (!f) return;
    /* cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest is in user) */
    unsigned long long v[8] = {0};
    got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got < 4) return;
    s->steal = v[7];
    s->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    s->total = s->busy + v[3] + v[4];
    s->ok = 1;
}

ut_cpu_load ut_cpu_between(const ut_cpu_snap *a, const ut_cpu_snap *b, double extra_cpu_s) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN), hz = sysconf(_SC_CLK_TCK);
    ut_cpu_load l = {.busy = NAN, .others = NAN, .steal = NAN, .cpus = cpus > 0 ? (int)cpus : 0};
    if (!a->ok || !b->ok || b->total <= a->total || b->busy < a->busy || hz <= 0) return l;
    double total = (double)(b->total - a->total), busy = (double)(b->busy - a->busy);
    /* ours in jiffies: the caller's extra CPU time and this process's own */
    double ours = (extra_cpu_s + (double)(b->self_ns - a->self_ns) * 1e-9) * (double)hz;
    l.busy = fmin(1, busy / total);
    l.others = fmin(1, fmax(0, busy - ours) / total);
    l.steal = b->steal >= a->steal ? fmin(1, (double)(b->steal - a->steal) / total) : NAN;
    return l;
}

int ut_cpu_busy(const ut_cpu_load *l) {
    return (isfinite(l->others) && l->others > UT_BUSY_OTHERS) || (isfinite(l->steal) && l->steal > UT_BUSY_STEAL);
}
