/* The contiguous layout of the CUDA KV caches (kv "prealloc", "dynamic", "vmm"),
 * position-major, f32:
 *     mem (cap, 2, n_layers, kv_dim): position p holds K of every layer, then V of every layer
 * so a cache grows by appending at its end: a dynamic growth is one copy of the bytes
 * held, and vmm maps more address space after what it holds. Attention reads one
 * layer's rows at a stride of 2 * n_layers * kv_dim floats (engines/cuda/attn.h).
 * (The CPU's contiguous caches are layer-major, engines/modules/common/kv_contig.h: a
 * growth there copies each layer apart.)
 */
#ifndef BENCH_CUDA_KVC_H
#define BENCH_CUDA_KVC_H

#include "engines/abi/kv.h"

/* B per position: K and V of every layer. */
static inline size_t kvcc_pos_bytes(const bench_kv_shape *s) {
    return 2u * (size_t)s->n_layers * (size_t)s->n_kv_heads * (size_t)s->head_dim * sizeof(float);
}

/* The checks every CUDA cache makes at create: a usable device, a context that the
 * attention kernel's shared memory holds, a stream to queue on. mod names the module. */
int kvcc_check(const bench_kv_shape *s, const bench_host *host, const char *mod, char *err, size_t errlen);

/* K/V (n, kv_dim) of positions pos0.. of one layer into the cache at mem; queued on stream. */
void kvcc_store(const bench_kv_shape *s, void *stream, float *mem, int layer, int pos0, int n, const float *k,
                const float *v);

/* Causal attention (kv.h) of q (n, q_dim) at pos0.. over the cache at mem; queued on stream. */
void kvcc_attend(const bench_kv_shape *s, void *stream, const float *mem, int layer, int pos0, int n, const float *q,
                 float *out);

#endif
