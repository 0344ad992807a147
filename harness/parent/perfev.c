#include "perfev.h"

#include <errno.h>
#include <perfmon/pfmlib_perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engines/abi/module.h"

/* Each event declares how bench compare judges its counts: faults with the slack of the
 * process's start-up, context switches as information (they depend on the rest of the
 * machine), the PMU's counts exactly (instructions within 0.5%: results.c's per-event
 * tolerance), smaller better. */
static const struct { const char *name; int hw, cls, better; } pe_events[] = {
    {"page-faults", 0, BENCH_CTR_COUNT, BENCH_BETTER_LOWER}, {"minor-faults", 0, BENCH_CTR_COUNT, BENCH_BETTER_LOWER},
    {"major-faults", 0, BENCH_CTR_COUNT, BENCH_BETTER_LOWER}, {"context-switches", 0, BENCH_CTR_INFO, BENCH_BETTER_NONE},
    {"cycles", 1, BENCH_CTR_EXACT, BENCH_BETTER_LOWER}, {"instructions", 1, BENCH_CTR_EXACT, BENCH_BETTER_LOWER},
    {"cache-misses", 1, BENCH_CTR_EXACT, BENCH_BETTER_LOWER}, {"dTLB-load-misses", 1, BENCH_CTR_EXACT, BENCH_BETTER_LOWER},
};
_Static_assert(sizeof(pe_events) / sizeof(pe_events[0]) <= PE_MAX, "PE_MAX too small");

static int pe_init_rc = -1;       /* -1: not tried; else the pfm_initialize() result */

int pe_library_init(char *err, size_t errlen) {
    if (pe_init_rc < 0) pe_init_rc = pfm_initialize();
    if (pe_init_rc != PFM_SUCCESS) {
        if (err && errlen) snprintf(err, errlen, "libpfm4: pfm_initialize: %s", pfm_strerror(pe_init_rc));
        return -1;
    }
    return 0;
}

void pe_library_fini(void) {
    if (pe_init_rc == PFM_SUCCESS) pfm_terminate();
    pe_init_rc = -1;
}

const char *pe_library_version(char *buf, size_t len) {
    int v = pfm_get_version();
    snprintf(buf, len, "%d.%d", PFM_MAJ_VERSION(v), PFM_MIN_VERSION(v));
    return buf;
}

/* Encodes ev for privilege levels plm and opens it on pid; -errno or -1000-pfm error. */
static int pe_open_one(const char *ev, int plm, pid_t pid, int *fd_out) {
    struct perf_event_attr attr;
    pfm_perf_encode_arg_t arg;
    memset(&attr, 0, sizeof(attr));
    memset(&arg, 0, sizeof(arg));
    arg.attr = &attr;
    arg.size = sizeof(arg);
    int rc = pfm_get_os_event_encoding(ev, plm, PFM_OS_PERF_EVENT, &arg);
    if (rc != PFM_SUCCESS) return -1000 + rc;
    attr.size = sizeof(attr);
    attr.disabled = 1;
    attr.enable_on_exec = 1;
    attr.inherit = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return -errno;
    *fd_out = fd;
    return 0;
}

int pe_open(pe_set *s, pid_t pid) {
    char err[128];
    int avail = 0;
    memset(s, 0, sizeof(*s));
    int lib = pe_library_init(err, sizeof(err));
    for (size_t i = 0; i < sizeof(pe_events) / sizeof(pe_events[0]); i++) {
        pe_counter *c = &s->c[s->n++];
        c->name = pe_events[i].name;
        c->hardware = pe_events[i].hw;
        c->cls = pe_events[i].cls;
        c->better = pe_events[i].better;
        c->fd = -1;
        if (lib) {
            snprintf(c->reason, sizeof(c->reason), "%s", err);
            continue;
        }
        /* Faults taken inside system calls (pread's copy into fresh memory) are
         * kernel-mode faults: software events need kernel counting to see them. */
        int rc = pe_open_one(c->name, c->hardware ? PFM_PLM3 : PFM_PLM0 | PFM_PLM3, pid, &c->fd);
        if (!c->hardware && (rc == -EACCES || rc == -EPERM)) {
            rc = pe_open_one(c->name, PFM_PLM3, pid, &c->fd);
            if (!rc) snprintf(c->reason, sizeof(c->reason),
                              "user space only: kernel counting refused (perf_event_paranoid); faults inside system calls are missed");
        }
        if (rc <= -1000) {
            snprintf(c->reason, sizeof(c->reason), "libpfm4: %s: %s", c->name, pfm_strerror(rc + 1000));
        } else if (rc < 0) {
            int e = -rc;
            const char *hint = e == ENOENT || e == EOPNOTSUPP ? " (no hardware PMU exposed, e.g. in a VM)"
                             : e == EACCES || e == EPERM ? " (see /proc/sys/kernel/perf_event_paranoid)" : "";
            snprintf(c->reason, sizeof(c->reason), "perf_event_open: %s%s", strerror(e), hint);
        } else {
            c->available = 1;
            avail++;
        }
    }
    return avail;
}

int pe_read(const pe_set *s, int i, uint64_t *value) {
    if (i < 0 || i >= s->n || s->c[i].fd < 0) return -1;
    uint64_t v;
    if (read(s->c[i].fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) return -1;
    *value = v;
    return 0;
}

void pe_close(pe_set *s) {
    for (int i = 0; i < s->n; i++) {
        if (s->c[i].fd >= 0) close(s->c[i].fd);
        s->c[i].fd = -1;
    }
}
