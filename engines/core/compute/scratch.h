/* Scratch kept per thread for the kernels: see kn_scratch. */
#ifndef BENCH_KN_SCRATCH_H
#define BENCH_KN_SCRATCH_H

#include <stddef.h>

/* Scratch that outlives a call, one set per thread, grown and never shrunk, freed when the
 * thread ends: prefill's quantised x (KN_SCRATCH_XQ, the calling thread's) and the GEMMs'
 * panels (KN_SCRATCH_GEMM, each task thread's). Allocated and freed per call, they made the
 * first pass of a process touch fresh pages in every call, which this guest makes slow (the
 * int8 families' first prefill ran a third under their warm one), while later passes reused
 * what glibc had kept. 64-byte aligned; NULL when out of memory. A slot holds one use at a
 * time: no caller keeps it across a call that uses the same slot on the same thread, but for
 * KN_SCRATCH_X, which only kn_scratch_x hands out, under a key. */
enum { KN_SCRATCH_XQ, KN_SCRATCH_GEMM, KN_SCRATCH_X, KN_SCRATCH_N };
void *kn_scratch(int slot, size_t need);

/* The outputs of one kn_matmul_multi (wq, wk, wv; w1, w3) share x, and a GEMM that rounds or
 * transposes x would make the same thing again for each of them on each thread. kn_scratch_job
 * names the job this thread is running (kernels.c: a number per kn_matmul_multi call; 0: none,
 * so nothing is kept). kn_scratch_x returns slot KN_SCRATCH_X's buffer (need bytes) and sets
 * *kept when it already holds what this caller made (kind: the caller's tag for what it makes,
 * its layout included) of the same x, n and cols in the same job; otherwise the caller fills it
 * and it is kept under that key. NULL when out of memory. */
void kn_scratch_job(unsigned job);
void *kn_scratch_x(int kind, const void *x, int n, int cols, size_t need, int *kept);

#endif
