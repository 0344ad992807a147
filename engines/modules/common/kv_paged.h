/* A pool of token rows and the attention that reads it through an index table,
 * shared by kv "block" (paged) and kv "token" (one slot per token) and compiled
 * into each module (modules link nothing of the core's).
 *
 * Glossary:
 *   row     the K (or V) vector of one token of one layer: kv_dim floats
 *   block   bs consecutive rows; block b holds rows b*bs .. b*bs+bs-1 in every layer
 *   table   a sequence's block ids in position order: position p lives in row
 *           table[p / bs] * bs + p % bs. kv "token" is the case bs = 1 (table = slots).
 *
 * Layout of the pool, each row in its cache type (kv_types.h; the CUDA build the same):
 *   K (n_layers, n_rows, k_row bytes)   then   V (n_layers, n_rows, v_row bytes)
 * so a block of one layer is bs rows of contiguous bytes: attention walks it with the
 * same dot/axpy as the contiguous cache, and no position is gathered into a temporary
 * buffer (a typed row is converted a chunk at a time, kv_attn.h kva_dots_t).
 */
#ifndef BENCH_KV_PAGED_H
#define BENCH_KV_PAGED_H

#include "engines/abi/kv.h"
#include "kv_types.h"

typedef struct kvp_pool {
    void *mem;          /* K rows of every layer, then V rows, in their types (below) */
    size_t bytes;       /* bytes of mem */
    int n_rows;         /* token rows in each layer */
    void *dev;          /* off the CPU: the device side's state (engines/cuda/kvp_cuda.c); NULL here */
} kvp_pool;

/* The device the pool lives on, for the modules' registration. The CUDA build of kv
 * "block" and "token" compiles the same module sources with -DKVP_DEVICE='"cuda"' and
 * links engines/cuda/kvp_cuda.c, the functions below over device memory, in place of
 * kv_paged.c: one block-table and radix-tree logic for both devices. */
#ifndef KVP_DEVICE
#define KVP_DEVICE "cpu"
#define KVP_CACHE_TYPES KVQ_CPU_TYPES
#else
/* the device pool stores the CPU's types, with the CPU's conversions (engines/cuda/attn.cu) */
#define KVP_CACHE_TYPES KVQ_CPU_TYPES
#endif

/* The modules' score(): 1 on the CPU; on CUDA, 0 where no usable GPU is. */
int kvp_score(void);

static inline size_t kvp_kv_dim(const bench_kv_shape *s) { return (size_t)s->n_kv_heads * (size_t)s->head_dim; }

/* Bytes of one token's K (or V) row of one layer, in its cache type. */
static inline size_t kvp_k_row(const bench_kv_shape *s) { return kvq_bytes(s->k_type, kvp_kv_dim(s)); }
static inline size_t kvp_v_row(const bench_kv_shape *s) { return kvq_bytes(s->v_type, kvp_kv_dim(s)); }

/* Bytes of K and V of one token over all layers. */
static inline size_t kvp_token_bytes(const bench_kv_shape *s) {
    return (size_t)s->n_layers * (kvp_k_row(s) + kvp_v_row(s));
}

/* A layer's K (V) rows, in bytes. */
static inline uint8_t *kvp_kb(const bench_kv_shape *s, const kvp_pool *p, int layer) {
    return (uint8_t *)p->mem + (size_t)layer * (size_t)p->n_rows * kvp_k_row(s);
}
static inline uint8_t *kvp_vb(const bench_kv_shape *s, const kvp_pool *p, int layer) {
    return (uint8_t *)p->mem + (size_t)s->n_layers * (size_t)p->n_rows * kvp_k_row(s) +
           (size_t)layer * (size_t)p->n_rows * kvp_v_row(s);
}

/* Allocates n_rows rows from host->alloc (libc when NULL), names the region
 * "bench:kv" and writes every page once when touch is set. mod names the module in errors. */
int kvp_pool_create(kvp_pool *p, const bench_kv_shape *s, int n_rows, const bench_host *host, int touch,
                    const char *mod, char *err, size_t errlen);
void kvp_pool_destroy(kvp_pool *p, const bench_host *host);   /* p->mem may be NULL */

/* Copies n rows starting at row src to row dst, in every layer, K and V (copy-on-write). */
void kvp_copy_rows(const bench_kv_shape *s, kvp_pool *p, int dst, int src, int n);

/* Writes K/V of positions pos0 .. pos0+n-1 of one layer through the table. */
void kvp_store(const bench_kv_shape *s, kvp_pool *p, const int *table, int bs, int layer, int pos0, int n,
               const float *k, const float *v);

/* Causal GQA attention (kv.h) of n queries at pos0.. over the positions the table
 * maps. The sums run in the same order as common/kv_contig.c's, so the results are
 * bitwise those of a contiguous cache. scratch: host->n_threads * kvq_scores_per_task(s) floats. */
void kvp_attend(const bench_kv_shape *s, const bench_host *host, const kvp_pool *p, const int *table, int bs,
                int layer, int pos0, int n, const float *q, float *out, float *scratch);

#endif
