/* Attention over a contiguous per-sequence cache, shared by kv "prealloc" and
 * kv "dynamic" (compiled into each module; modules link nothing of the core's).
 *
 * Layout of one sequence's cache, each row in its cache type (kv_types.h):
 *   K  (n_layers, cap, k_row bytes)   then   V  (n_layers, cap, v_row bytes)
 * where a row is kv_dim values: 4 kv_dim bytes in f32, 2 kv_dim in f16/bf16, 34 per 32
 * values in q8_0, 18 per 32 in q4_0. cap is the capacity in positions; the two modules
 * differ only in how cap grows.
 */
#ifndef BENCH_KV_CONTIG_H
#define BENCH_KV_CONTIG_H

#include "engines/abi/kv.h"
#include "kv_types.h"

typedef struct kvc_seq {
    uint8_t *mem;       /* K then V, NULL until reserved */
    size_t bytes;       /* bytes of mem */
    int cap;            /* positions of room */
    int used;           /* positions stored (high-water mark) */
} kvc_seq;

/* Bytes of one position's K (or V) row of one layer. */
static inline size_t kvc_k_row(const bench_kv_shape *s) { return kvq_bytes(s->k_type, (size_t)s->n_kv_heads * (size_t)s->head_dim); }
static inline size_t kvc_v_row(const bench_kv_shape *s) { return kvq_bytes(s->v_type, (size_t)s->n_kv_heads * (size_t)s->head_dim); }

static inline uint8_t *kvc_k(const bench_kv_shape *s, const kvc_seq *q, int layer) {
    return q->mem + (size_t)layer * (size_t)q->cap * kvc_k_row(s);
}
static inline uint8_t *kvc_v(const bench_kv_shape *s, const kvc_seq *q, int layer) {
    return q->mem + (size_t)s->n_layers * (size_t)q->cap * kvc_k_row(s) + (size_t)layer * (size_t)q->cap * kvc_v_row(s);
}

/* Bytes of a cache with room for cap positions: cap x n_layers x (k_row + v_row). */
size_t kvc_bytes(const bench_kv_shape *s, int cap);

/* Bytes holding the stored positions of n sequences. */
static inline uint64_t kvc_used_bytes(const bench_kv_shape *s, const kvc_seq *seqs, int n) {
    uint64_t used = 0;
    for (int i = 0; i < n; i++) used += seqs[i].used ? kvc_bytes(s, seqs[i].used) : 0;
    return used;
}

/* Copies n positions of K and V for one layer into the cache. */
void kvc_store(const bench_kv_shape *s, kvc_seq *q, int layer, int pos0, int n, const float *k, const float *v);

/* Causal GQA attention for n queries at pos0.. over one layer's K/V rows (kvc_k, kvc_v),
 * read in their cache types (see kv.h). scratch: n_tasks * kvq_scores_per_task(s) floats (kv_attn.h) where
 * n_tasks = host->n_threads. */
void kvc_attend(const bench_kv_shape *s, const bench_host *host, const uint8_t *k, const uint8_t *v,
                int pos0, int n, const float *q, float *out, float *scratch);

#endif
