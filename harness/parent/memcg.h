/* The memory cgroup a process runs in, read from outside: how many times the kernel's OOM
 * killer struck in it, and its limit. A worker killed by a SIGKILL that bench did not send
 * is an OOM kill only if the cgroup's count went up meanwhile; without it, a guess.
 *
 * Both hierarchies: cgroup v2 (memory.events "oom_kill N", memory.max) and v1's memory
 * controller (memory.oom_control "oom_kill N", memory.limit_in_bytes), found through
 * /proc/PID/cgroup and the mount table. A machine with neither (no /sys/fs/cgroup in a
 * chroot) gives found = 0, and the caller says it could not tell. */
#ifndef BENCH_MEMCG_H
#define BENCH_MEMCG_H

#include <stdint.h>
#include <sys/types.h>

typedef struct mc_state {
    int found;              /* the cgroup and its counter were read */
    char dir[512];          /* the cgroup's folder, e.g. /sys/fs/cgroup/memory/job */
    int64_t oom_kills;      /* the count of OOM kills in it so far */
    uint64_t limit;         /* bytes; 0: no limit */
} mc_state;

/* Reads pid's memory cgroup (pid 0: this process). */
void mc_read(pid_t pid, mc_state *out);

/* Re-reads the count of the cgroup in st->dir (the process may be gone by then). -1: unknown. */
int64_t mc_oom_kills(const mc_state *st);

#endif
