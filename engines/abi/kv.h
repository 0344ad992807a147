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

#define BENCH_KV_IFACE_VERSION 3u
/* Version 2 added the optional prefix-sharing slots at the end of the iface; a
 * version 1 module (whose struct ends at destroy) still loads, without them.
 * Version 3 added bench_kv_shape.attn_f16: an older module would ignore it and attend
 * in f32, so the engine refuses attn_f16 with a module below version 3. */
#define BENCH_KV_IFACE_MIN_VERSION 1u

typedef struct bench_kv_shape {
    int n_layers;
    int n_heads;        /* query heads */
    int n_kv_heads;
    int head_dim;
    int max_pos;        /* positions per sequence (the model's context) */
    int max_seqs;       /* concurrent sequences */
    /* 1: round each softmax weight to f16 before it multiplies V, as llama.cpp does
     * with its default f16 KV cache (the core rounds q, k and v to f16 itself). Only
     * for agreement with llama.cpp's numbers; 0 is the f32 attention. Version 3. */
    int attn_f16;
} bench_kv_shape;

struct bench_kv_iface {
    uint32_t version;   /* BENCH_KV_IFACE_VERSION */
    int  (*create)(const bench_kv_shape *shape, const bench_opts *opts, const bench_host *host,
                   void **ctx, char *err, size_t errlen);
    /* Makes room for positions [0, n_pos) of sequence seq (a dynamic cache grows here). */
    int  (*reserve)(void *ctx, int seq, int n_pos, char *err, size_t errlen);
    /* Stores K/V of positions pos0 .. pos0+n-1 of layer `layer`; the room was reserved. */
    void (*store)(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v);
    /* Causal attention of the n queries at pos0 .. pos0+n-1 over the stored positions 0 .. pos0+n-1. */
    void (*attend)(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out);
    /* Forgets sequence seq and returns its memory where the module gives memory back. */
    void (*release)(void *ctx, int seq);
    /* (optional) bytes reserved, bytes used, grow events, bytes copied, allocations... */
    void (*counters)(void *ctx, const bench_counter_sink *sink);
    void (*destroy)(void *ctx); /* ctx may be NULL */

    /* ---- since version 2, every slot (optional): prefix sharing; NULL where the module has none.
     * Read them through bench_kv_v2(), which is NULL for a version 1 module. ---- */
    /* Tells the module the token ids of positions pos0 .. pos0+n-1 of seq, after reserve and
     * before they are stored; it keys its prefix cache on them. */
    void (*tokens)(void *ctx, int seq, int pos0, int n, const int *ids);
    /* For the empty sequence seq, attaches the longest cached prefix of ids[0 .. n-1) (never
     * the last id: at least one token is run, for its logits) and returns its length in
     * positions, 0 when nothing is cached; the caller runs the model from there. The ids of
     * the attached positions count as told. -1 with err when seq is not empty or out of range. */
    int  (*share_prefix)(void *ctx, int seq, const int *ids, int n, char *err, size_t errlen);
    /* Makes the empty sequence dst share every stored position of src (parallel sampling);
     * the first write into a shared partial block copies it (copy-on-write). */
    int  (*fork)(void *ctx, int src, int dst, char *err, size_t errlen);
};

/* The iface when it has the version 2 slots, else NULL. */
static inline const struct bench_kv_iface *bench_kv_v2(const struct bench_kv_iface *i) {
    return i && i->version >= 2u ? i : NULL;
}

/* A KV cache instance, as bench_allocator is an allocator's: its vtable and context. The
 * wrappers below apply each optional slot's default (and the version 2 slots' absence from
 * a version 1 module), so that a caller never tests a slot. */
typedef struct bench_kv {
    const struct bench_kv_iface *iface;
    void *ctx;
} bench_kv;

/* release, default: nothing to give back */
static inline void bench_kv_release(const bench_kv *k, int seq) {
    if (k->iface->release) k->iface->release(k->ctx, seq);
}
/* counters, default: none */
static inline void bench_kv_counters(const bench_kv *k, const bench_counter_sink *sink) {
    if (k->iface->counters) k->iface->counters(k->ctx, sink);
}
/* tokens, default: the module keys nothing on them */
static inline void bench_kv_tokens(const bench_kv *k, int seq, int pos0, int n, const int *ids) {
    const struct bench_kv_iface *v2 = bench_kv_v2(k->iface);
    if (v2 && v2->tokens) v2->tokens(k->ctx, seq, pos0, n, ids);
}
/* share_prefix, default: nothing cached (0 positions attached) */
static inline int bench_kv_share_prefix(const bench_kv *k, int seq, const int *ids, int n, char *err, size_t errlen) {
    const struct bench_kv_iface *v2 = bench_kv_v2(k->iface);
    return v2 && v2->share_prefix ? v2->share_prefix(k->ctx, seq, ids, n, err, errlen) : 0;
}
/* fork, default: refused, with err */
static inline int bench_kv_fork(const bench_kv *k, int src, int dst, char *err, size_t errlen) {
    const struct bench_kv_iface *v2 = bench_kv_v2(k->iface);
    if (v2 && v2->fork) return v2->fork(k->ctx, src, dst, err, errlen);
    return bench_errf(err, errlen, "this kv module cannot fork a sequence (no fork slot)");
}

#endif
