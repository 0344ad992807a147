/* What every CUDA KV module shares (kv "prealloc", "dynamic", "vmm" here, "block" and
 * "token" through engines/cuda/kvp_cuda.c): the checks at create, the device's stream,
 * the attention's work area; and the contiguous layout of the first three,
 * position-major, each row in its cache type (f32 the reference, f16, bf16, q8_0, q4_0):
 *     mem (cap, K rows of every layer, then V rows of every layer), kvcc_pos_bytes a position
 * so a cache grows by appending at its end: a dynamic growth is one copy of the bytes
 * held, and vmm maps more address space after what it holds. Attention reads one
 * layer's rows at a stride of kvcc_pos_bytes (engines/cuda/attn.h).
 * (The CPU's contiguous caches are layer-major, engines/modules/common/kv_contig.h: a
 * growth there copies each layer apart.)
 */
#ifndef BENCH_CUDA_KVC_H
#define BENCH_CUDA_KVC_H

#include "engines/abi/kv.h"
#include "engines/modules/common/kv_types.h"

typedef struct kvcc {
    bench_kv_shape shape;
    void *stream;           /* the device's cudaStream_t */
    float *work;            /* (cuatt_work_bytes) the split attention's partial results */
} kvcc;

/* A usable device, a stream (the module runs with --device cuda), a head dimension and a
 * context the attention takes, cache types it stores (KVC_CUDA_TYPES; a block type needs the
 * head dimension a whole number of its blocks), and the work area. mod names the module in
 * errors. */
int kvcc_open(kvcc *k, const bench_kv_shape *s, const bench_host *host, const char *mod, char *err, size_t errlen);
void kvcc_close(kvcc *k);   /* k may be zeroed */

/* The cache types the CUDA KV modules store (their iface's cache_types), as the CPU's do. */
#define KVC_CUDA_TYPES KVQ_CUDA_TYPES /* kv_types.h: the rows attn.cu reads */

/* B of one layer's K (V) row of one position, in its cache type. */
static inline size_t kvcc_k_row(const bench_kv_shape *s) {
    return bench_kv_row_bytes(s->k_type, s->n_kv_heads * s->head_dim);
}
static inline size_t kvcc_v_row(const bench_kv_shape *s) {
    return bench_kv_row_bytes(s->v_type, s->n_kv_heads * s->head_dim);
}

/* B per position of the contiguous layout: K and V of every layer, in their types. */
static inline size_t kvcc_pos_bytes(const bench_kv_shape *s) {
    return (size_t)s->n_layers * (kvcc_k_row(s) + kvcc_v_row(s));
}

/* K/V (n, kv_dim floats) of positions pos0.. of one layer into the contiguous cache at mem. */
void kvcc_store(const kvcc *k, void *mem, int layer, int pos0, int n, const float *key, const float *v);

/* Causal attention (kv.h) of q (n, q_dim) at pos0.. over the contiguous cache at mem. */
void kvcc_attend(const kvcc *k, const void *mem, int layer, int pos0, int n, const float *q, float *out);

#endif
