#include "util/ut_clock.h"
#include "cu_util.h"

#include <stdio.h>
#include <time.h>

int cu_fail(char *err, size_t errlen, const char *what, cudaError_t e) {
    if (err && errlen) snprintf(err, errlen, "%s: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return -1;
}

/* The oldest GPU the Makefile's CUDA_ARCH has machine code for (sm_80). */
#define CU_MIN_MAJOR 8

int cu_probe(char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        int rt = 0;
        cudaRuntimeGetVersion(&rt);
        if (err && errlen)
            snprintf(err, errlen, "no CUDA device: cudaGetDeviceCount: %s (%s)%s%d.%d", cudaGetErrorString(e),
                     cudaGetErrorName(e),
                     e == cudaErrorInsufficientDriver ? "; no NVIDIA driver is loaded, or it is older than this build's CUDA "
                                                      : "; this build's CUDA runtime is ",
                     rt / 1000, rt % 1000 / 10);
        return 0;
    }
    if (n < 1) {
        if (err && errlen) snprintf(err, errlen, "no CUDA device: the driver reports none");
        return 0;
    }
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess) {
        if (err && errlen) snprintf(err, errlen, "no CUDA device: cudaGetDeviceProperties: %s", cudaGetErrorString(e));
        return 0;
    }
    if (p.major < CU_MIN_MAJOR) {
        if (err && errlen)
            snprintf(err, errlen, "no CUDA device: GPU 0 is %s (compute capability %d.%d); this build has code for %d.0 and later",
                     p.name, p.major, p.minor, CU_MIN_MAJOR);
        return 0;
    }
    return 1;
}

int cu_score(void) {
    static int score = -1;  /* the answer cannot change within a process */
    if (score < 0) score = cu_probe(NULL, 0);
    return score;
}

uint64_t cu_now_ns(void) { return (uint64_t)ut_now_ns(); }

uint64_t cu_mem_used(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
    return (uint64_t)(total_b - free_b);
}
