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
 * time: no caller keeps it across a call that uses the same slot on the same thread. */
enum { KN_SCRATCH_XQ, KN_SCRATCH_GEMM, KN_SCRATCH_N };
void *kn_scratch(int slot, size_t need);

#endif
