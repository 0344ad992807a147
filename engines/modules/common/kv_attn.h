/* The two inner loops of CPU attention, shared by the contiguous cache (kv_contig.c)
 * and the paged ones (kv_paged.c), so that every KV layout adds in the same order
 * and their outputs agree bit for bit. Static: each module compiles its own copy
 * (modules link nothing of the core's).
 *
 * Why these are not the plain per-position calls they replaced: a call per
 * position to a 16-lane dot ending in 15 dependent scalar adds, and an axpy per
 * position that read and wrote the output row through memory, made attention 28%
 * of llama-110m q8_0 decode on one Zen 5 core at ~200 positions (perf). Here a
 * row's dot ends in a 4-step tree, the positions are one loop the core can
 * overlap, and the output stays in registers across positions.
 *
 * Order of operations, which tests rely on:
 * - kva_dots: per position, 16 lanes accumulate q[d] * k[d] over d in chunks of 16
 *   (mul then add: the build is ISO C, no contraction), then lanes are summed as a
 *   tree (8+8, 4+4, 2+2, 1+1). A head_dim that is not a multiple of 16 keeps the
 *   older order (lanes summed left to right, then the tail), so stories260K
 *   (head_dim 8) gives the same ids as before.
 * - kva_accum: o[d] += w[t] * v_t[d] for t in order, exactly as one axpy per
 *   position did.
 */
#ifndef BENCH_KV_ATTN_H
#define BENCH_KV_ATTN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kv_types.h"

#define KVA_LANES 16
typedef float kva_v16 __attribute__((vector_size(KVA_LANES * sizeof(float))));
typedef int kva_i16 __attribute__((vector_size(KVA_LANES * sizeof(int))));

/* Unaligned vector access through a type that may alias float (macros, not functions:
 * a 64-byte vector passed by value in the baseline clone would change the ABI). */
typedef float kva_u16 __attribute__((vector_size(KVA_LANES * sizeof(float)), aligned(4), may_alias));
#define kva_load(p) (*(const kva_u16 *)(const void *)(p))
#define kva_store(p, v) (*(kva_u16 *)(void *)(p) = (v))

/* a's lanes summed as a tree, into lane 0 */
#define KVA_HSUM(a)                                                                                        \
    do {                                                                                                   \
        (a) += __builtin_shuffle((a), (kva_i16){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});    \
        (a) += __builtin_shuffle((a), (kva_i16){4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});    \
        (a) += __builtin_shuffle((a), (kva_i16){2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});    \
        (a) += __builtin_shuffle((a), (kva_i16){1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});    \
    } while (0)

/* att[t] = q . k_t for t < count, where row t is k + t * stride (hd floats each). */
__attribute__((target_clones("avx512f", "avx2", "default"), unused))
static void kva_dots(const float *q, const float *k, size_t stride, int count, int hd, float *att) {
    if (hd % KVA_LANES) {
        for (int t = 0; t < count; t++) {
            const float *kt = k + (size_t)t * stride;
            float acc[KVA_LANES] = {0};
            int d = 0;
            for (; d + KVA_LANES <= hd; d += KVA_LANES)
                for (int l = 0; l < KVA_LANES; l++) acc[l] += q[d + l] * kt[d + l];
            float sum = 0.0f;
            for (int l = 0; l < KVA_LANES; l++) sum += acc[l];
            for (; d < hd; d++) sum += q[d] * kt[d];
            att[t] = sum;
        }
        return;
    }
    for (int t = 0; t < count; t++) {
        const float *kt = k + (size_t)t * stride;
        kva_v16 acc = kva_load(q) * kva_load(kt);
        for (int d = KVA_LANES; d < hd; d += KVA_LANES) acc += kva_load(q + d) * kva_load(kt + d);
        KVA_HSUM(acc);
        att[t] = acc[0];
    }
}

/* o[d] += w[t] * v_t[d] for t < count in order, where row t is v + t * stride. */
__attribute__((target_clones("avx512f", "avx2", "default"), unused))
static void kva_accum(float *restrict o, const float *w, const float *restrict v, size_t stride, int count,
                      int hd) {
    int d = 0;
    /* four vectors of o held in registers across every position */
    for (; d + 4 * KVA_LANES <= hd; d += 4 * KVA_LANES) {
        kva_v16 o0 = kva_load(o + d), o1 = kva_load(o + d + 16), o2 = kva_load(o + d + 32), o3 = kva_load(o + d + 48);
        for (int t = 0; t < count; t++) {
            const float *vt = v + (size_t)t * stride + d;
            const float a = w[t];
            o0 += a * kva_load(vt);
            o1 += a * kva_load(vt + 16);
            o2 += a * kva_load(vt + 32);
            o3 += a * kva_load(vt + 48);
        }
        kva_store(o + d, o0);
        kva_store(o + d + 16, o1);
        kva_store(o + d + 32, o2);
        kva_store(o + d + 48, o3);
    }
    for (; d + KVA_LANES <= hd; d += KVA_LANES) {
        kva_v16 o0 = kva_load(o + d);
        for (int t = 0; t < count; t++) o0 += w[t] * kva_load(v + (size_t)t * stride + d);
        kva_store(o + d, o0);
    }
    for (; d < hd; d++) {
        float s = o[d];
        for (int t = 0; t < count; t++) s += w[t] * v[(size_t)t * stride + d];
        o[d] = s;
    }
}

/* kva_dots over count rows stored in type kt, row t at k + t * stride bytes (the head's
 * first value): rows are converted a chunk at a time (kv_types.h), then dotted in the order
 * above, so a cache of type T attends exactly as an f32 cache holding T's values would. */
__attribute__((unused))
static void kva_dots_t(bench_dtype kt, const float *q, const uint8_t *k, size_t stride, int count, int hd, float *att) {
    if (kt == BENCH_F32) {
        kva_dots(q, (const float *)(const void *)k, stride / sizeof(float), count, hd, att);
        return;
    }
    float buf[KVQ_CHUNK_FLOATS] __attribute__((aligned(64)));
    const int rows = KVQ_CHUNK_FLOATS / hd;
    for (int t0 = 0; t0 < count; t0 += rows) {
        int n = count - t0 < rows ? count - t0 : rows;
        for (int r = 0; r < n; r++) kvq_load_row(kt, k + (size_t)(t0 + r) * stride, buf + (size_t)r * hd, (size_t)hd);
        kva_dots(q, buf, (size_t)hd, n, hd, att + t0);
    }
}

/* kva_accum over count rows stored in type vt, as kva_dots_t reads them; o accumulates in
 * position order across chunks, as one call over f32 rows would. */
__attribute__((unused))
static void kva_accum_t(bench_dtype vt, float *o, const float *w, const uint8_t *v, size_t stride, int count, int hd) {
    if (vt == BENCH_F32) {
        kva_accum(o, w, (const float *)(const void *)v, stride / sizeof(float), count, hd);
        return;
    }
    float buf[KVQ_CHUNK_FLOATS] __attribute__((aligned(64)));
    const int rows = KVQ_CHUNK_FLOATS / hd;
    for (int t0 = 0; t0 < count; t0 += rows) {
        int n = count - t0 < rows ? count - t0 : rows;
        for (int r = 0; r < n; r++) kvq_load_row(vt, v + (size_t)(t0 + r) * stride, buf + (size_t)r * hd, (size_t)hd);
        kva_accum(o, w + t0, buf, (size_t)hd, n, hd);
    }
}

#endif
