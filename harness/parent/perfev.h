/* Performance counters of a child process: libpfm4 encodes the event names,
 * perf_event_open counts them on the child.
 *
 * Opened on a forked child that has not exec'd yet, with enable_on_exec (the
 * count starts at exec, so bench's own fork path is not counted) and inherit
 * (the engine's threads are counted too). Reading gives the count so far, so
 * reading at each phase boundary gives per-phase counts by difference.
 * A counter that cannot be opened is kept with the reason (no PMU in a VM,
 * perf_event_paranoid, an unknown event...) and is reported as unavailable,
 * never as zero.
 */
#ifndef BENCH_PERFEV_H
#define BENCH_PERFEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PE_MAX 8

typedef struct pe_counter {
    const char *name;       /* perf's name: "page-faults", "cycles", ... */
    int hardware;           /* 1: a PMU event */
    int cls, better;        /* how its counts are judged: BENCH_CTR_* and BENCH_BETTER_* (engines/abi/module.h) */
    int fd;                 /* -1: unavailable, or closed */
    int available;          /* it was opened */
    char reason[160];       /* why it is unavailable; a note when it counts user space only */
} pe_counter;

typedef struct pe_set {
    int n;
    pe_counter c[PE_MAX];
} pe_set;

/* Initialises libpfm4 once per process; pe_library_fini releases it. */
int pe_library_init(char *err, size_t errlen);
void pe_library_fini(void);
const char *pe_library_version(char *buf, size_t len);

/* Opens every event of the default set on pid. Returns the number available. */
int pe_open(pe_set *s, pid_t pid);
/* Count so far of counter i; -1 when it is unavailable or the read fails. */
int pe_read(const pe_set *s, int i, uint64_t *value);
void pe_close(pe_set *s);   /* closes the counters; names, availability and reasons stay */

#endif
