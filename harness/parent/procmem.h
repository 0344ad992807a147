/* Memory of another process, read from /proc.
 *
 *   /proc/<pid>/status        VmRSS, VmHWM, RssAnon, RssFile, RssShmem (cheap: every sample)
 *   /proc/<pid>/smaps_rollup  Pss (walks every mapping: every sample when asked)
 *   /proc/<pid>/smaps         Rss/Pss per mapping, summed per region (phase boundaries only)
 *   /proc/<pid>/stat          minflt, majflt of the whole thread group
 * All sizes are KiB, as the kernel prints them.
 */
#ifndef BENCH_PROCMEM_H
#define BENCH_PROCMEM_H

#include <stdint.h>
#include <sys/types.h>

typedef struct pm_status {
    int64_t vm_rss, vm_hwm, rss_anon, rss_file, rss_shmem;     /* KiB */
} pm_status;

/* A process's open /proc files, kept open so a sample is one pread each. */
typedef struct pm_proc {
    pid_t pid;
    int status_fd, rollup_fd;
} pm_proc;

int pm_open(pm_proc *p, pid_t pid);                 /* -1 with errno when /proc/<pid> is gone */
void pm_close(pm_proc *p);                          /* p may be half-open */
int pm_read_status(pm_proc *p, pm_status *out);     /* -1 once the process has exited */
int pm_read_pss(pm_proc *p, int64_t *pss_kib);      /* smaps_rollup Pss */

int pm_read_faults(pid_t pid, uint64_t *minflt, uint64_t *majflt);

/* Regions of /proc/<pid>/smaps:
 *   "<x>"          every mapping named [anon:bench:<x>] (weights, kv, scratch, ...)
 *   "model_file"   every mapping of one of the model files given
 *   "other_anon"   any other anonymous memory (heap, stacks, unnamed mmaps)
 *   "other_file"   any other file mapping (the bench binary, libraries, modules) */
#define PM_MAX_REGIONS 16
typedef struct pm_region {
    char name[32];
    int64_t size_kib, rss_kib, pss_kib, anon_kib;
} pm_region;

typedef struct pm_smaps {
    int n;
    pm_region v[PM_MAX_REGIONS];
} pm_smaps;

/* An address range the process says holds region `name`: where the kernel
 * cannot name anonymous mappings (CONFIG_ANON_VMA_NAME unset), an anonymous
 * mapping overlapping it is counted to that region in proportion to the
 * overlap (the kernel may have merged it with a neighbouring mapping, whose
 * pages smaps cannot tell apart: approximate in that case). */
typedef struct pm_range {
    uint64_t start, end;
    char name[32];
} pm_range;

/* files: absolute, canonical paths (realpath) as the kernel prints them. */
int pm_read_smaps(pid_t pid, const char *const *files, int n_files, const pm_range *ranges, int n_ranges,
                  pm_smaps *out);
const pm_region *pm_find_region(const pm_smaps *s, const char *name);   /* NULL when absent */

#endif
