/* Family "kv": the KV-cache storage layout AND the attention that reads it
 * (a paged layout needs its own attention). Version BENCH_KV_IFACE_VERSION.
 *
 * Shapes (row-major, f32):
 *   k, v   (n, kv_dim)        kv_dim = n_kv_heads * head_dim, for n consecutive positions
 *   q, out (n, q_dim)         q_dim  = n_heads * head_dim
 * Query head h attends to KV head h / (n_heads / n_kv_heads) (grouped-query attention),
 * causally: the query at position p sees positions 0..p of its sequence.
 * Scores are scaled by 1/sqrt(head_dim); softmax in f32.
 */
#ifndef BENCH_KV_H
#define BENCH_KV_H

#include "module.h"
#include "dtype.h"

#define BENCH_KV_IFACE_VERSION 4u
/* Version 4 (module API 2): create takes the module's filled options struct; the memory slot
 * reports reserved/used/cached/wasted bytes as a typed struct (the host no longer reads them
 * from counters by name); prefix sharing and fork are declared as capabilities; the shape
 * carries the cache's element types and the host's pool size. Versions 1..3 had create
 * parse text and are refused at load. */
#define BENCH_KV_IFACE_MIN_VERSION 4u

typedef struct bench_kv_shape {
    int n_layers;
    int n_heads;        /* query heads */
    int n_kv_heads;
    int head_dim;
    int max_pos;        /* positions per sequence (the model's context) */
    int max_seqs;       /* concurrent sequences */
    /* 1: round each softmax weight to f16 before it multiplies V, as llama.cpp does
     * with its default f16 KV cache (the core rounds q, k and v to f16 itself). Only
     * for agreement with llama.cpp's numbers; 0 is the f32 attention. */
    int attn_f16;
    /* The element types K and V are stored in. The host asks only for types the module
     * declares in its iface's cache_types; BENCH_F32 is the exact reference. */
    bench_dtype k_type, v_type;
    /* BENCH_CAP_KV_SHARED_POOL: the pool's size in bytes from the host's KV budget, which
     * replaces the module's own sizing options; 0: no budget, the module sizes its pool. */
    uint64_t pool_bytes;
} bench_kv_shape;

/* The KV module's memory now, in bytes: what serving admission and the KV timeline read.
 *   reserved  what the module holds (allocated or mapped for KV)
 *   used      what holds live positions, counting a position shared by several sequences once
 *   cached    of used, what only a prefix cache holds (no sequence refers to it)
 *   wasted    of reserved, what no position can use: the unused tail of a sequence's
 *             contiguous cache, a paged pool's partial blocks; a pool's free room is not waste */
typedef struct bench_kv_memory {
    uint64_t reserved, used, cached, wasted;
} bench_kv_memory;

/* Bytes of one position of one layer's K (or V) row of kv_dim elements stored in type t,
 * block scales included. */
static inline size_t bench_kv_row_bytes(bench_dtype t, int kv_dim) {
    return (size_t)kv_dim / bench_dtype_block_elems(t) * bench_dtype_block_bytes(t);
}

struct bench_kv_iface {
    uint32_t version;   /* BENCH_KV_IFACE_VERSION */
    /* The cache types the module stores: bit (1u << t) for each bench_dtype t, for K and V
     * alike. 0 is read as f32 only. */
    uint32_t cache_types;
    /* opts: the module's options struct, filled by the host (module.h); NULL when the module
     * declares no options. */
    int  (*create)(const bench_kv_shape *shape, const void *opts, const bench_host *host,
                   void **ctx, char *err, size_t errlen);
    /* Makes room for positions [0, n_pos) of sequence seq (a dynamic cache grows here). */
    int  (*reserve)(void *ctx, int seq, int n_pos, char *err, size_t errlen);
    /* Stores K/V of positions pos0 .. pos0+n-1 of layer `layer`; the room was reserved. */
    void (*store)(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v);
    /* Causal attention of the n queries at pos0 .. pos0+n-1 over the stored positions 0 .. pos0+n-1. */
    void (*attend)(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out);
    /* Forgets sequence seq and returns its memory where the module gives memory back. */
    void (*release)(void *ctx, int seq);
    /* The memory now (bench_kv_memory). Required. */
    void (*memory)(void *ctx, bench_kv_memory *out);
    /* (optional) allocations, grow events, bytes copied, prefix hits... */
    void (*counters)(void *ctx, const bench_counter_sink *sink);
    void (*destroy)(void *ctx); /* ctx may be NULL */

    /* ---- BENCH_CAP_KV_PREFIX_SHARE: both slots, else both NULL ---- */
    /* Tells the module the token ids of positions pos0 .. pos0+n-1 of seq, after reserve and
     * before they are stored; it keys its prefix cache on them. */
    void (*tokens)(void *ctx, int seq, int pos0, int n, const int *ids);
    /* For the empty sequence seq, attaches the longest cached prefix of ids[0 .. n-1) (never
     * the last id: at least one token is run, for its logits) and returns its length in
     * positions, 0 when nothing is cached; the caller runs the model from there. The ids of
     * the attached positions count as told. -1 with err when seq is not empty or out of range. */
    int  (*share_prefix)(void *ctx, int seq, const int *ids, int n, char *err, size_t errlen);
    /* ---- BENCH_CAP_KV_FORK, else NULL ---- */
    /* Makes the empty sequence dst share every stored position of src (parallel sampling);
     * the first write into a shared partial block copies it (copy-on-write). */
    int  (*fork)(void *ctx, int src, int dst, char *err, size_t errlen);
};

/* Whether the module stores type t. */
static inline int bench_kv_stores(const struct bench_kv_iface *i, bench_dtype t) {
    uint32_t types = i->cache_types ? i->cache_types : 1u << BENCH_F32;
    return (unsigned)t < 32 && (types >> t & 1u);
}

/* A KV cache instance, as bench_allocator is an allocator's: its vtable and context. The
 * wrappers below apply each optional slot's default, so that a caller never tests a slot
 * (modreg.c has checked at load that the slots match the declared capabilities). */
typedef struct bench_kv {
    const struct bench_kv_iface *iface;
    void *ctx;
} bench_kv;

/* release, default: nothing to give back */
static inline void bench_kv_release(const bench_kv *k, int seq) {
    if (k->iface->release) k->iface->release(k->ctx, seq);
}
static inline bench_kv_memory bench_kv_mem(const bench_kv *k) {
    bench_kv_memory m = {0, 0, 0, 0};
    k->iface->memory(k->ctx, &m);
    return m;
}
/* counters, default: none */
static inline void bench_kv_counters(const bench_kv *k, const bench_counter_sink *sink) {
    if (k->iface->counters) k->iface->counters(k->ctx, sink);
}
/* tokens, default: the module keys nothing on them */
static inline void bench_kv_tokens(const bench_kv *k, int seq, int pos0, int n, const int *ids) {
    if (k->iface->tokens) k->iface->tokens(k->ctx, seq, pos0, n, ids);
}
/* share_prefix, default: nothing cached (0 positions attached) */
static inline int bench_kv_share_prefix(const bench_kv *k, int seq, const int *ids, int n, char *err, size_t errlen) {
    return k->iface->share_prefix ? k->iface->share_prefix(k->ctx, seq, ids, n, err, errlen) : 0;
}
/* fork, default: refused, with err */
static inline int bench_kv_fork(const bench_kv *k, int src, int dst, char *err, size_t errlen) {
    if (k->iface->fork) return k->iface->fork(k->ctx, src, dst, err, errlen);
    return bench_errc(err, errlen, BENCH_ERR_REFUSED, "this kv module cannot fork a sequence (it does not declare BENCH_CAP_KV_FORK)");
}

#endif
