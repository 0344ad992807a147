/* Helpers every CUDA module compiles in (a module links nothing of another's): errors
 * as text, the probe behind score(), a clock. Host C over the CUDA runtime's C API. */
#ifndef BENCH_CUDA_UTIL_H
#define BENCH_CUDA_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* Writes "<what>: <cudaErrorName>: <description>" to err; returns -1. */
int cu_fail(char *err, size_t errlen, const char *what, cudaError_t e);

/* Runs a runtime call; on failure returns -1 from the calling function with the message
 * in its err/errlen. */
#define CU_TRY(call, what)                                              \
    do {                                                                \
        cudaError_t cu_e_ = (call);                                     \
        if (cu_e_ != cudaSuccess) return cu_fail(err, errlen, what, cu_e_); \
    } while (0)

/* 1 when a CUDA device this build has code for is there; else 0 and, in err, why:
 * "no CUDA device: ..." (no driver, no GPU, or one older than compute capability 8.0). */
int cu_probe(char *err, size_t errlen);
/* score() of every CUDA module: cu_probe's answer, computed once. */
int cu_score(void);

/* CLOCK_MONOTONIC in ns. */
uint64_t cu_now_ns(void);

/* Used bytes of the current device's memory (total - free, every process's); 0 when unknown. */
uint64_t cu_mem_used(void);

#endif
