/* What every CUDA KV module shares (kv "prealloc", "dynamic", "vmm" here, "block" and
 * "token" through engines/cuda/kvp_cuda.c): the checks at create, the device's stream,
 * the attention's work area; and the contiguous layout of the first three,
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

typedef struct kvcc {
    bench_kv_shape shape;
    void *stream;           /* the device's cudaStream_t */
    float *work;            /* (cuatt_work_bytes) the split attention's partial results */
} kvcc;

/* A usable device, a stream (the module runs with --device cuda), a head dimension and a
 * context the attention takes, and the work area. mod names the module in errors. */
int kvcc_open(kvcc *k, const bench_kv_shape *s, const bench_host *host, const char *mod, char *err, size_t errlen);
void kvcc_close(kvcc *k);   /* k may be zeroed */

/* B per position of the contiguous layout: K and V of every layer. */
static inline size_t kvcc_pos_bytes(const bench_kv_shape *s) {
    return 2u * (size_t)s->n_layers * (size_t)s->n_kv_heads * (size_t)s->head_dim * sizeof(float);
}

/* K/V (n, kv_dim) of positions pos0.. of one layer into the contiguous cache at mem. */
void kvcc_store(const kvcc *k, float *mem, int layer, int pos0, int n, const float *key, const float *v);

/* Causal attention (kv.h) of q (n, q_dim) at pos0.. over the contiguous cache at mem. */
void kvcc_attend(const kvcc *k, const float *mem, int layer, int pos0, int n, const float *q, float *out);

#endif
