/* Attention over a contiguous per-sequence cache, shared by kv "prealloc" and
 * kv "dynamic" (compiled into each module; modules link nothing of the core's).
 *
 * Layout of one sequence's cache (f32):
 *   K  (n_layers, cap, kv_dim)   then   V  (n_layers, cap, kv_dim)
 * cap is the capacity in positions; the two modules differ only in how cap grows.
 */
#ifndef BENCH_KV_CONTIG_H
#define BENCH_KV_CONTIG_H

#include "engines/abi/kv.h"

typedef struct kvc_seq {
    float *mem;         /* (2, n_layers, cap, kv_dim), NULL until reserved */
    size_t bytes;       /* bytes of mem */
    int cap;            /* positions of room */
    int used;           /* positions stored (high-water mark) */
} kvc_seq;

static inline float *kvc_k(const bench_kv_shape *s, const kvc_seq *q, int layer) {
    return q->mem + (size_t)layer * (size_t)q->cap * (size_t)(s->n_kv_heads * s->head_dim);
}
static inline float *kvc_v(const bench_kv_shape *s, const kvc_seq *q, int layer) {
    return q->mem + ((size_t)s->n_layers + (size_t)layer) * (size_t)q->cap * (size_t)(s->n_kv_heads * s->head_dim);
}

/* Bytes of a cache with room for cap positions. */
size_t kvc_bytes(const bench_kv_shape *s, int cap);

/* Bytes holding the stored positions of n sequences. */
static inline uint64_t kvc_used_bytes(const bench_kv_shape *s, const kvc_seq *seqs, int n) {
    uint64_t used = 0;
    for (int i = 0; i < n; i++) used += seqs[i].used ? kvc_bytes(s, seqs[i].used) : 0;
    return used;
}

/* Copies n positions of K and V for one layer into the cache. */
void kvc_store(const bench_kv_shape *s, kvc_seq *q, int layer, int pos0, int n, const float *k, const float *v);

/* Causal GQA attention for n queries at pos0.. over K/V rows with stride kv_dim
 * (see kv.h). scratch: n_tasks * (max_pos) floats where n_tasks = host->n_threads. */
void kvc_attend(const bench_kv_shape *s, const bench_host *host, const float *k, const float *v,
                int pos0, int n, const float *q, float *out, float *scratch);

#endif
