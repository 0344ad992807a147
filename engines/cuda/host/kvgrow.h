/* Growth arithmetic of the CUDA KV caches, plain C so that the CPU tests check it
 * (tests/test_cuda_host.c). The device caches are position-major (engines/cuda/kvc_cuda.h):
 * one position holds K and V of every layer, pos_bytes = 2 * n_layers * kv_dim * 4, so a
 * cache that grows only appends at its end.
 *
 *   dynamic   capacity = n_pos rounded up to `step` positions, at most max_pos; each growth
 *             is a bigger cudaMalloc and a copy of the positions held
 *   vmm       one address range reserved for max_pos positions (rounded up to whole chunks);
 *             each growth maps more chunks at the end of what is mapped: no copy, the
 *             addresses stay put. chunk = the option rounded up to the allocation
 *             granularity (the driver's minimum, 2 MiB on current GPUs)
 * Invariants: chunks(n) * chunk >= n * pos_bytes for n <= max_pos; reserve = chunks(max_pos) * chunk.
 */
#ifndef BENCH_CUDA_KVGROW_H
#define BENCH_CUDA_KVGROW_H

#include <stddef.h>
#include <stdint.h>

/* Positions of room after growing to hold n_pos: a multiple of step, capped at max_pos. */
int kvg_dynamic_cap(int n_pos, int step, int max_pos);

typedef struct kvg_vmm {
    size_t pos_bytes;       /* B per position */
    int max_pos;
    size_t chunk;           /* B mapped per growth step, a multiple of the granularity */
    size_t reserve;         /* B of address space, a whole number of chunks */
    size_t max_chunks;      /* reserve / chunk */
} kvg_vmm;

/* granularity: a power of two (cuMemGetAllocationGranularity). chunk_opt: 0 for one
 * granule, else rounded up to granules. Errors name the option and the limits. */
int kvg_vmm_plan(size_t pos_bytes, int max_pos, size_t granularity, uint64_t chunk_opt, kvg_vmm *out,
                 char *err, size_t errlen);
/* Chunks that must be mapped to hold positions [0, n_pos). */
size_t kvg_vmm_chunks(const kvg_vmm *v, int n_pos);

#endif
