/* A stand-in for libnvidia-ml.so.1, built by the tests (build/test-modules/nvml/) and loaded
 * through $BENCH_NVML_LIB, so that harness/parent/energy.c's NVML path runs on a machine
 * without a GPU. Its values are scripted, so every figure a test reads is known:
 *
 *   FAKE_NVML_INIT_FAIL=1   nvmlInit_v2 fails (9: the driver is not loaded)
 *   FAKE_NVML_DEVICES=N     GPUs (default 1; 0: NVML sees none)
 *   FAKE_NVML_NO_ENERGY=1   no energy counter (3: not supported): power only
 *   energy                  each GPU's counter starts at 1000 mJ and grows by 500 mJ at every read
 *   power                   100 W per GPU
 *   memory                  3 GiB used per GPU, of 80
 *   processes               on every GPU: the caller 128 MiB, each of its children 256 MiB,
 *                           pid 1 1 GiB (someone else's, never counted)
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MIB (1024ULL * 1024ULL)
#define MAX_DEV 8

typedef struct fake_mem { unsigned long long total, free, used; } fake_mem;
typedef struct fake_proc { unsigned int pid; unsigned long long used; } fake_proc;

static unsigned long long energy_mj[MAX_DEV];

static int env_int(const char *k, int dflt) {
    const char *v = getenv(k);
    return v && *v ? atoi(v) : dflt;
}

static int dev_index(void *d) { return (int)(uintptr_t)d - 1; }

EXPORT int nvmlInit_v2(void) {
    for (int i = 0; i < MAX_DEV; i++) energy_mj[i] = 1000;
    return env_int("FAKE_NVML_INIT_FAIL", 0) ? 9 : 0;
}

EXPORT int nvmlShutdown(void) { return 0; }

EXPORT const char *nvmlErrorString(int rc) {
    return rc == 9 ? "Driver Not Loaded" : rc == 3 ? "Not Supported" : "Unknown Error";
}

EXPORT int nvmlDeviceGetCount_v2(unsigned *n) {
    int k = env_int("FAKE_NVML_DEVICES", 1);
    *n = (unsigned)(k < 0 ? 0 : k > MAX_DEV ? MAX_DEV : k);
    return 0;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) {
    if (i >= MAX_DEV) return 2;
    *d = (void *)(uintptr_t)(i + 1);
    return 0;
}

EXPORT int nvmlDeviceGetTotalEnergyConsumption(void *d, unsigned long long *mj) {
    if (env_int("FAKE_NVML_NO_ENERGY", 0)) return 3;
    int i = dev_index(d);
    *mj = energy_mj[i];
    energy_mj[i] += 500;
    return 0;
}

EXPORT int nvmlDeviceGetPowerUsage(void *d, unsigned *mw) {
    (void)d;
    *mw = 100000;
    return 0;
}

EXPORT int nvmlDeviceGetMemoryInfo(void *d, fake_mem *m) {
    (void)d;
    m->total = 80 * 1024 * MIB;
    m->used = 3 * 1024 * MIB;
    m->free = m->total - m->used;
    return 0;
}

/* The caller's children, from /proc/<pid>/stat's ppid. */
static int children(unsigned *pids, int max) {
    DIR *dir = opendir("/proc");
    int n = 0;
    struct dirent *de;
    while (dir && n < max && (de = readdir(dir))) {
        char path[300], buf[512];
        int pid = atoi(de->d_name), ppid = 0;
        if (pid <= 0) continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[got] = 0;
        const char *rp = strrchr(buf, ')');
        if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == (int)getpid()) pids[n++] = (unsigned)pid;
    }
    if (dir) closedir(dir);
    return n;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses(void *d, unsigned *count, fake_proc *p) {
    (void)d;
    unsigned kids[64];
    int nk = children(kids, 64);
    unsigned need = 2 + (unsigned)nk;
    if (*count < need) {
        *count = need;
        return 7;
    }
    p[0] = (fake_proc){.pid = (unsigned)getpid(), .used = 128 * MIB};
    p[1] = (fake_proc){.pid = 1, .used = 1024 * MIB};
    for (int i = 0; i < nk; i++) p[2 + i] = (fake_proc){.pid = kids[i], .used = 256 * MIB};
    *count = need;
    return 0;
}
