/* The memory of a process tree: a server and every process below it (an http target's
 * memory "tree", harness/scenario/target.h), read from /proc on the runner's clock, at the
 * same moments as one process's (every timeline sample and phase snapshot).
 *
 * A sample finds the tree by walking /proc/<pid>/stat's ppid from the root down (every
 * process, so a grandchild whose parent exited is lost with that parent: it is no longer
 * below the root), then reads each member's status (VmRSS, VmHWM, RssAnon, RssFile,
 * RssShmem), its smaps_rollup Pss when asked, and the stat's minflt and majflt:
 *
 *   sum      each figure summed over the members alive at that moment (KiB; faults as counts)
 *   peak     the tree's peak RSS and PSS: the largest sums over the samples so far. A peak
 *            between two samples is missed; each member's own VmHWM is exact, and the sum of
 *            those is an upper bound (pt_member.peak_rss_kib)
 *   faults   of the members alive: an exited member's faults leave the sum (its parent
 *            counts them as cminflt once it reaps it)
 *   members  every process seen in any sample, root first, with its last comm and its peaks
 */
#ifndef BENCH_PROCTREE_H
#define BENCH_PROCTREE_H

#include <stdint.h>
#include <sys/types.h>

#include "harness/parent/procmem.h"

typedef struct pt_member {
    pid_t pid;
    char comm[32];          /* /proc/<pid>/stat's, at its last sample */
    int64_t peak_rss_kib;   /* its VmHWM, at its last sample */
    int64_t peak_pss_kib;   /* its largest Pss over the samples; -1: never read */
    int alive;              /* in the tree at the last sample */
} pt_member;

typedef struct pt_tree {
    pid_t root;
    int n, cap;
    pt_member *m;           /* (n) every process seen, in the order first seen */
    int64_t peak_rss_kib, peak_pss_kib;     /* the largest sums over the samples; pss -1: never read */
} pt_tree;

/* One sample of the tree: every figure summed over its live members. */
typedef struct pt_sum {
    pm_status st;           /* summed; vm_hwm is the tree's peak RSS so far (pt_tree.peak_rss_kib) */
    int64_t pss_kib;        /* summed Pss; -1 when not read or unreadable for any member */
    uint64_t minflt, majflt;
    int n;                  /* members alive */
} pt_sum;

pt_tree *pt_create(pid_t root);         /* NULL: out of memory */
void pt_free(pt_tree *t);               /* t may be NULL */
/* Samples the tree (with_pss: smaps_rollup too, which walks every mapping). Returns 0, or
 * -1 when the root is gone (out untouched). */
int pt_sample(pt_tree *t, int with_pss, pt_sum *out);

struct cJSON;
/* results.json's "tree": {"root", "peak_rss_kib", "peak_pss_kib", "processes": [{"pid",
 * "comm", "peak_rss_kib", "peak_pss_kib"}, ...]}; NULL out of memory. */
struct cJSON *pt_json(const pt_tree *t);

#endif
