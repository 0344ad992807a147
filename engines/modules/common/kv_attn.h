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
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kv_types.h"
#include "engines/abi/vexpf.h"

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

/* Rows ahead that the loops over cache rows prefetch. A head's row is 36 to 256 bytes of a
 * position's kv_dim-wide row (768 f16 values, 1.5 KiB, in llama-110m), so the reads stride across pages
 * and the hardware prefetchers keep few of them in flight: at depth 2048 the f16 rows' loads were
 * 53% of llama-110m's decode (perf), reading the cache at ~7 GB/s. */
#ifndef KVA_PF_ROWS
#define KVA_PF_ROWS 16
#endif

/* Every cache line of the bytes [p, p + n). */
static inline void kva_prefetch(const uint8_t *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o);
    __builtin_prefetch(p + n - 1);
}

/* KVA_HSUM of 16 vectors at once: out[p] is a[p]'s lane 0 after KVA_HSUM,
 * with every addition pairing the same two values (so the same bits): each level adds the
 * halves of two vectors' partial sums side by side, where KVA_HSUM adds them in one vector
 * and discards half the lanes. Level by level, a[p]'s sums: lanes i and i + 8, then i and
 * i + 4, i and i + 2, 0 and 1; the last level leaves position 4k + q in lane 4q + k. */
static inline __attribute__((always_inline)) void kva_hsum16(const kva_v16 *a, float *out) {
    kva_v16 b[8], c[4], e[2];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) /* lanes 0-7: a[2j]'s i + (i + 8), 8-15: a[2j + 1]'s */
        b[j] = __builtin_shuffle(a[2 * j], a[2 * j + 1], (kva_i16){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}) +
               __builtin_shuffle(a[2 * j], a[2 * j + 1], (kva_i16){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
#pragma GCC unroll 8
    for (int m = 0; m < 4; m++) /* quarter r: position 4m + r's i + (i + 4) */
        c[m] = __builtin_shuffle(b[2 * m], b[2 * m + 1], (kva_i16){0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27}) +
               __builtin_shuffle(b[2 * m], b[2 * m + 1], (kva_i16){4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31});
#pragma GCC unroll 8
    for (int n = 0; n < 2; n++) /* quarter r: positions 8n + r and 8n + 4 + r, i + (i + 2) each */
        e[n] = __builtin_shuffle(c[2 * n], c[2 * n + 1], (kva_i16){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}) +
               __builtin_shuffle(c[2 * n], c[2 * n + 1], (kva_i16){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31});
    /* quarter r: positions r, 4 + r, 8 + r, 12 + r, lane 0 + lane 1 each */
    const kva_v16 f = __builtin_shuffle(e[0], e[1], (kva_i16){0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14, 28, 30}) +
                      __builtin_shuffle(e[0], e[1], (kva_i16){1, 3, 17, 19, 5, 7, 21, 23, 9, 11, 25, 27, 13, 15, 29, 31});
    kva_store(out, __builtin_shuffle(f, (kva_i16){0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}));
}

/* out[p] = q . k_p for the 16 rows k0 + p * stride (hd floats each, hd a multiple of 16):
 * per row, 16 lanes accumulate over d in chunks of 16, then the trees of kva_hsum16. Unrolled
 * over the rows, so that the 16 accumulators stay in registers: as loops the compiler kept
 * them on the stack, a load and a store around every multiply-add (perf annotate: the stack
 * stores were a third of kva_dots' samples). */
static inline __attribute__((always_inline)) void kva_block16(const float *q, const float *k0, size_t stride, int hd,
                                                              float *out) {
    kva_v16 acc[KVA_LANES];
    const kva_v16 q0 = kva_load(q);
#pragma GCC unroll 16
    for (int p = 0; p < KVA_LANES; p++) acc[p] = q0 * kva_load(k0 + (size_t)p * stride);
    for (int d = KVA_LANES; d < hd; d += KVA_LANES) {
        const kva_v16 qd = kva_load(q + d);
#pragma GCC unroll 16
        for (int p = 0; p < KVA_LANES; p++) acc[p] += qd * kva_load(k0 + (size_t)p * stride + d);
    }
    kva_hsum16(acc, out);
}

/* att[t] = q . k_t for t < count, where row t is k + t * stride (hd floats each); rows
 * that are not contiguous (a cache's, not a converted chunk's) are prefetched ahead. */
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
    const int pf = stride != (size_t)hd;
    int t = 0;
    /* 16 positions at once: the same products and sums per position, then the 16 trees
     * reduced together, two rows a step (kva_hsum16), a fifth of the shuffles and adds.
     * Contiguous rows of the common head sizes take the block with its row stride a
     * constant: the 16 rows are then one base register and displacements, where a variable
     * stride left 16 row pointers that did not fit in the registers beside the 16
     * accumulators and were reloaded from the stack in the inner loop (perf annotate). */
    if (!pf && hd == 64)
        for (; t + KVA_LANES <= count; t += KVA_LANES) kva_block16(q, k + (size_t)t * 64, 64, 64, att + t);
    else if (!pf && hd == 128)
        for (; t + KVA_LANES <= count; t += KVA_LANES) kva_block16(q, k + (size_t)t * 128, 128, 128, att + t);
    for (; t + KVA_LANES <= count; t += KVA_LANES) {
        const float *k0 = k + (size_t)t * stride;
        if (pf && t + KVA_LANES + KVA_PF_ROWS <= count)
            for (int p = 0; p < KVA_LANES; p++)
                kva_prefetch((const uint8_t *)(k0 + (size_t)(KVA_PF_ROWS + p) * stride), (size_t)hd * sizeof(float));
        kva_block16(q, k0, stride, hd, att + t);
    }
    for (; t < count; t++) {
        const float *kt = k + (size_t)t * stride;
        if (pf && t + KVA_PF_ROWS < count) kva_prefetch((const uint8_t *)(kt + KVA_PF_ROWS * stride), (size_t)hd * sizeof(float));
        kva_v16 acc = kva_load(q) * kva_load(kt);
        for (int d = KVA_LANES; d < hd; d += KVA_LANES) acc += kva_load(q + d) * kva_load(kt + d);
        KVA_HSUM(acc);
        att[t] = acc[0];
    }
}

/* o[d] += w[t] * v_t[d] for t < count in order, where row t is v + t * stride; rows that are
 * not contiguous are prefetched ahead, as in kva_dots. */
__attribute__((target_clones("avx512f", "avx2", "default"), unused))
static void kva_accum(float *restrict o, const float *w, const float *restrict v, size_t stride, int count,
                      int hd) {
    int d = 0;
    const int pf = stride != (size_t)hd;
    /* four vectors of o held in registers across every position */
    for (; d + 4 * KVA_LANES <= hd; d += 4 * KVA_LANES) {
        kva_v16 o0 = kva_load(o + d), o1 = kva_load(o + d + 16), o2 = kva_load(o + d + 32), o3 = kva_load(o + d + 48);
        for (int t = 0; t < count; t++) {
            const float *vt = v + (size_t)t * stride + d;
            if (pf && d == 0 && t + KVA_PF_ROWS < count)
                kva_prefetch((const uint8_t *)(vt + KVA_PF_ROWS * stride), (size_t)hd * sizeof(float));
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

/* kva_accum for two queries over the same n rows: o0 with weights w0, o1 with w1, each in
 * position order as kva_accum adds them, so each gets kva_accum's bits (and a later kva_accum
 * over further rows continues either exactly). Its reason: kva_accum's sums are chains, one add
 * per row on each of hd / 16 vectors, so a head of 64 waits an add's latency a row with 4 adds
 * to do; two queries' 8 independent chains fill that wait (a causal prefill's queries i and
 * i + 1 read the same rows). Rows contiguous (stride hd); a head not a multiple of 64 goes one
 * query at a time. */
__attribute__((target_clones("avx512f", "avx2", "default"), unused))
static void kva_accum2(float *restrict o0, const float *w0, float *restrict o1, const float *w1, int n,
                       const float *restrict v, int hd) {
    if (hd % (4 * KVA_LANES)) {
        kva_accum(o0, w0, v, (size_t)hd, n, hd);
        kva_accum(o1, w1, v, (size_t)hd, n, hd);
        return;
    }
    for (int d = 0; d < hd; d += 4 * KVA_LANES) {
        kva_v16 a0 = kva_load(o0 + d), a1 = kva_load(o0 + d + 16), a2 = kva_load(o0 + d + 32), a3 = kva_load(o0 + d + 48);
        kva_v16 b0 = kva_load(o1 + d), b1 = kva_load(o1 + d + 16), b2 = kva_load(o1 + d + 32), b3 = kva_load(o1 + d + 48);
        for (int t = 0; t < n; t++) {
            const float *vt = v + (size_t)t * (size_t)hd + d;
            const kva_v16 v0 = kva_load(vt), v1 = kva_load(vt + 16), v2 = kva_load(vt + 32), v3 = kva_load(vt + 48);
            const float a = w0[t], b = w1[t];
            a0 += a * v0;
            a1 += a * v1;
            a2 += a * v2;
            a3 += a * v3;
            b0 += b * v0;
            b1 += b * v1;
            b2 += b * v2;
            b3 += b * v3;
        }
        kva_store(o0 + d, a0);
        kva_store(o0 + d + 16, a1);
        kva_store(o0 + d + 32, a2);
        kva_store(o0 + d + 48, a3);
        kva_store(o1 + d, b0);
        kva_store(o1 + d + 16, b1);
        kva_store(o1 + d + 32, b2);
        kva_store(o1 + d + 48, b3);
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

/* ---- a typed cache: one conversion of a row serves every query head that reads it ----
 *
 * A cache in f16/bf16/q8_0/q4_0 converts its rows before the dot and the axpy. Converting them
 * once per (query, head) pair repeated the work group x n times (8 query heads share a KV head
 * in tinyllama); a unit here is a block of up to KVQ_QBLOCK queries on one KV head, and each
 * chunk of rows is converted once for all group x queries pairs of the unit. Each pair's dots
 * and axpys run over the same rows in the same order as kva_dots_t/kva_accum_t, so the
 * results are the same bits. */

/* Where position t's K (V) row of the layer starts: the caller's layout (contiguous, paged). */
typedef const uint8_t *(*kva_row_fn)(const void *ctx, int t);

typedef struct kva_unit {
    const bench_kv_shape *s;
    kva_row_fn krow, vrow;
    const void *ctx;
    const float *q;     /* (n, q_dim) of the call */
    float *out;         /* (n, q_dim) */
    float *att;         /* KVQ_QBLOCK * group rows of max_pos */
    int pos0;           /* the call's first position */
} kva_unit;

/* att[t] = att[t] op a for t < count, 16 lanes at a time: op 0 divides, 1 multiplies, 2
 * subtracts. Elementwise IEEE operations, so every width gives the scalar loop's bits. */
__attribute__((target_clones("avx512f", "avx2", "default"), unused))
static void kva_rowop(float *att, int count, float a, int op) {
    int t = 0;
    const kva_v16 av = {a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a};
    for (; t + KVA_LANES <= count; t += KVA_LANES) {
        kva_v16 x = kva_load(att + t);
        kva_store(att + t, op == 0 ? x / av : op == 1 ? x * av : x - av);
    }
    for (; t < count; t++) att[t] = op == 0 ? att[t] / a : op == 1 ? att[t] * a : att[t] - a;
}

/* The largest of m and att[t < count] as the loop `if (att[t] > m) m = att[t]` finds it (NaNs
 * skipped), in 16 lanes: a maximum does not depend on the order it is taken in, except which of
 * +0 and -0 it keeps on a tie, and x - (+0) and x - (-0) give exp(.) the same value. The scalar
 * loop was a chain of dependent compares, one every maxss latency. */
__attribute__((target_clones("avx512f", "avx2", "default"), unused))
static float kva_rowmax(const float *att, int count, float m) {
    int t = 0;
    if (count >= KVA_LANES) {
        kva_v16 mv = {m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m};
        for (; t + KVA_LANES <= count; t += KVA_LANES) {
            const kva_v16 x = kva_load(att + t);
            const kva_i16 gt = x > mv;
            mv = (kva_v16)((gt & (kva_i16)x) | (~gt & (kva_i16)mv));
        }
        for (int l = 0; l < KVA_LANES; l++)
            if (mv[l] > m) m = mv[l];
    }
    for (; t < count; t++)
        if (att[t] > m) m = att[t];
    return m;
}

/* Softmax of one pair's scores in place: every layout's, f32 and typed (kv_contig.c, kv_paged.c),
 * with the reference's operations in its order; the loops are vectors (the scale, the shift, expf
 * through vexpf.h, the division), the two running sums stay sequential, as their rounding needs. */
static inline void kva_softmax(const bench_kv_shape *s, float *att, int count) {
    float sqrt_hd = sqrtf((float)s->head_dim), max = -INFINITY;
    /* divide, as the reference does; llama.cpp (attn_f16) multiplies by 1/sqrt(hd) */
    if (s->attn_f16) kva_rowop(att, count, 1.0f / sqrt_hd, 1);
    else kva_rowop(att, count, sqrt_hd, 0);
    max = kva_rowmax(att, count, max);
    kva_rowop(att, count, max, 2);
    bench_expf_n(att, att, (size_t)count);
    float sum = 0.0f;
    double sum_d = 0.0; /* llama.cpp's softmax sums in double and scales by 1/sum */
    for (int t = 0; t < count; t++) {
        sum += att[t];
        sum_d += att[t];
    }
    if (s->attn_f16) {
        const float inv = (float)(1.0 / sum_d);
        for (int t = 0; t < count; t++) att[t] = bench_f16_to_f32(bench_f32_to_f16(att[t] * inv));
    } else {
        kva_rowop(att, count, sum, 0);
    }
}

/* Rows t0 .. t0+nr-1 of nkv adjacent heads (from byte off of each row, hb bytes a head),
 * converted into buf, head h's rows at buf + h * hbuf; rows up to last are prefetched
 * KVA_PF_ROWS ahead. Pass 1 reads K through it, pass 2 V. */
static inline void kva_load_chunk(bench_dtype type, kva_row_fn row_at, const void *ctx, size_t off, size_t hb, int nkv,
                                  int hd, int t0, int nr, int last, float *buf, size_t hbuf) {
    for (int r = 0; r < nr; r++) {
        if (t0 + r + KVA_PF_ROWS <= last) kva_prefetch(row_at(ctx, t0 + r + KVA_PF_ROWS) + off, (size_t)nkv * hb);
        const uint8_t *row = row_at(ctx, t0 + r) + off;
        for (int h = 0; h < nkv; h++) kvq_load_row(type, row + (size_t)h * hb, buf + (size_t)h * hbuf + (size_t)r * hd, (size_t)hd);
    }
}

/* The scores row of pair (query ii of the unit, its head h, group member g): rows are
 * ((h * ni + ii) * group + g), each max_pos floats. */
static inline float *kva_scores(const kva_unit *u, int ni, int h, int ii, int g) {
    const int group = u->s->n_heads / u->s->n_kv_heads;
    return u->att + (size_t)((h * ni + ii) * group + g) * (size_t)u->s->max_pos;
}

/* How many of a chunk's nr rows from t0 query i0 + ii of the unit sees (causal): 0 to nr. */
static inline int kva_seen(const kva_unit *u, int i0, int ii, int t0, int nr) {
    int cnt = u->pos0 + i0 + ii + 1 - t0;
    return cnt < 0 ? 0 : cnt > nr ? nr : cnt;
}

/* Queries i0 .. i0+ni-1 of the call on KV heads kvh0 .. kvh0+nkv-1 (ni * nkv <= KVQ_QBLOCK),
 * every query head of their groups. A chunk's rows are converted row by row, the unit's heads
 * of a row one after the other: they are adjacent in the row, so each position's read is one
 * run of nkv heads' bytes instead of nkv reads a whole pass apart. Pair (ii, head kvh0 + h,
 * g)'s scores are kva_scores(u, ni, h, ii, g); each pair's dots and axpys run
 * over its rows in position order, whatever nkv, so its bits do not depend on the unit. */
__attribute__((unused))
static void kva_typed_unit(const kva_unit *u, int i0, int ni, int kvh0, int nkv) {
    const bench_kv_shape *s = u->s;
    const int hd = s->head_dim, group = s->n_heads / s->n_kv_heads, q_dim = s->n_heads * hd;
    const int rows = KVQ_CHUNK_FLOATS / (hd * nkv), last = u->pos0 + i0 + ni - 1;
    const size_t kh = kvq_bytes(s->k_type, (size_t)kvh0 * hd), vh = kvq_bytes(s->v_type, (size_t)kvh0 * hd);
    const size_t khb = kvq_bytes(s->k_type, (size_t)hd), vhb = kvq_bytes(s->v_type, (size_t)hd);
    const size_t hbuf = (size_t)rows * hd; /* the unit's head h (kvh0 + h) has its rows at buf + h * hbuf */
    float buf[KVQ_CHUNK_FLOATS] __attribute__((aligned(64)));
    /* pass 1: every pair's raw dots, a chunk of K rows converted once */
    for (int t0 = 0; t0 <= last; t0 += rows) {
        int nr = last + 1 - t0 < rows ? last + 1 - t0 : rows;
        kva_load_chunk(s->k_type, u->krow, u->ctx, kh, khb, nkv, hd, t0, nr, last, buf, hbuf);
        for (int h = 0; h < nkv; h++)
            for (int ii = 0; ii < ni; ii++) {
                const int cnt = kva_seen(u, i0, ii, t0, nr);
                for (int g = 0; g < group && cnt; g++) {
                    const float *qh = u->q + (size_t)(i0 + ii) * q_dim + (size_t)((kvh0 + h) * group + g) * hd;
                    kva_dots(qh, buf + (size_t)h * hbuf, (size_t)hd, cnt, hd,
                             kva_scores(u, ni, h, ii, g) + t0);
                }
            }
    }
    for (int h = 0; h < nkv; h++)
        for (int ii = 0; ii < ni; ii++)
            for (int g = 0; g < group; g++) {
                kva_softmax(s, kva_scores(u, ni, h, ii, g), u->pos0 + i0 + ii + 1);
                memset(u->out + (size_t)(i0 + ii) * q_dim + (size_t)((kvh0 + h) * group + g) * hd, 0, (size_t)hd * sizeof(float));
            }
    /* pass 2: every pair's weighted sum, a chunk of V rows converted once, positions in order */
    for (int t0 = 0; t0 <= last; t0 += rows) {
        int nr = last + 1 - t0 < rows ? last + 1 - t0 : rows;
        kva_load_chunk(s->v_type, u->vrow, u->ctx, vh, vhb, nkv, hd, t0, nr, last, buf, hbuf);
        for (int h = 0; h < nkv; h++)
            for (int ii = 0; ii < ni; ii++) {
                const int cnt = kva_seen(u, i0, ii, t0, nr);
                for (int g = 0; g < group && cnt; g++)
                    kva_accum(u->out + (size_t)(i0 + ii) * q_dim + (size_t)((kvh0 + h) * group + g) * hd,
                              kva_scores(u, ni, h, ii, g) + t0, buf + (size_t)h * hbuf, (size_t)hd, cnt, hd);
            }
    }
}

/* KV heads a unit takes when every query of the call is one block of ni: at most what its
 * scores (KVQ_QBLOCK / ni) and a chunk's rows (at least 4 of each head) hold, and of those the
 * run that gives the busiest task the fewest heads, the longest run on a tie (12 KV heads on
 * 2 tasks: 3 a unit, 6 a task, where 4 a unit would give one task 8). */
static inline int kva_heads_per_unit(int n_kv, int hd, int ni, int n_tasks) {
    int most = KVQ_QBLOCK / ni, fit = KVQ_CHUNK_FLOATS / (4 * hd), best = 1, best_load = 0;
    if (most > fit) most = fit;
    for (int h = 1; h <= most && h <= n_kv; h++) {
        int runs = (n_kv + h - 1) / h, load = (runs + n_tasks - 1) / n_tasks * h;
        if (h == 1 || load <= best_load) best = h, best_load = load;
    }
    return best;
}

/* A call's K and V rows of one KV head, converted once for all its query blocks. The units
 * above convert each chunk once per block of KVQ_QBLOCK queries: a 128-token prefill converted
 * each row 32 times over (kvq_load_f16 2.7% of a warm llama-110m q4_0 prefill's samples,
 * perf). Where a head's K and V fit in KVA_HEAD_FLOATS (on the stack), they are converted once;
 * each pair then runs the same dots, softmax and axpys over the same rows in the same order as
 * in kva_typed_unit (kva_dots' blocks of 16 and its single rows give the same bits), so no
 * result changes. */
#define KVA_HEAD_FLOATS (32 * 1024) /* 128 KiB */

static inline int kva_head_fits(const kva_unit *u, int n) {
    return (size_t)2 * (size_t)(u->pos0 + n) * (size_t)u->s->head_dim <= KVA_HEAD_FLOATS;
}

/* Every query of the call on KV head h (its group's query heads), through kb and vb, each
 * room for the call's pos0 + n rows of hd floats. */
__attribute__((unused))
static void kva_typed_head(const kva_unit *u, int n, int h, float *kb, float *vb) {
    const bench_kv_shape *s = u->s;
    const int hd = s->head_dim, group = s->n_heads / s->n_kv_heads, q_dim = s->n_heads * hd, rows = u->pos0 + n;
    const size_t hoff = (size_t)h * (size_t)hd, rb = (size_t)rows * (size_t)hd;
    kva_load_chunk(s->k_type, u->krow, u->ctx, kvq_bytes(s->k_type, hoff), kvq_bytes(s->k_type, (size_t)hd), 1, hd, 0,
                   rows, rows - 1, kb, rb);
    kva_load_chunk(s->v_type, u->vrow, u->ctx, kvq_bytes(s->v_type, hoff), kvq_bytes(s->v_type, (size_t)hd), 1, hd, 0,
                   rows, rows - 1, vb, rb);
    /* queries two at a time, for kva_accum2; each pair's scores in the unit's first 2 x group
     * rows (it has KVQ_QBLOCK x group) */
    for (int i = 0; i < n; i += 2) {
        const int nq = i + 1 < n ? 2 : 1;
        for (int g = 0; g < group; g++) {
            const size_t head = (size_t)(h * group + g) * (size_t)hd;
            float *sc[2], *o[2];
            for (int m = 0; m < nq; m++) {
                const int cnt = u->pos0 + i + m + 1;
                sc[m] = u->att + (size_t)(m * group + g) * (size_t)s->max_pos;
                kva_dots(u->q + (size_t)(i + m) * q_dim + head, kb, (size_t)hd, cnt, hd, sc[m]);
                kva_softmax(s, sc[m], cnt);
                o[m] = u->out + (size_t)(i + m) * q_dim + head;
                memset(o[m], 0, (size_t)hd * sizeof(float));
            }
            const int cnt0 = u->pos0 + i + 1;
            if (nq == 2) { /* the rows both see, then the second's last */
                kva_accum2(o[0], sc[0], o[1], sc[1], cnt0, vb, hd);
                kva_accum(o[1], sc[1] + cnt0, vb + (size_t)cnt0 * (size_t)hd, (size_t)hd, 1, hd);
            } else {
                kva_accum(o[0], sc[0], vb, (size_t)hd, cnt0, hd);
            }
        }
    }
}

/* The units of a call dealt round-robin to the tasks: (query block, run of KV heads). A call
 * of more than one query block takes one KV head a unit: its units are many already; where
 * every head's rows fit (kva_head_fits) and the heads share evenly between the tasks, whole
 * heads instead (kva_typed_head). */
static inline void kva_typed_task(const kva_unit *u, int n, int task, int n_tasks) {
    const int n_kv = u->s->n_kv_heads, blocks = (n + KVQ_QBLOCK - 1) / KVQ_QBLOCK;
    if (blocks > 1 && n_kv % n_tasks == 0 && kva_head_fits(u, n)) {
        float buf[KVA_HEAD_FLOATS] __attribute__((aligned(64)));
        const size_t rb = (size_t)(u->pos0 + n) * (size_t)u->s->head_dim;
        for (int h = task; h < n_kv; h += n_tasks) kva_typed_head(u, n, h, buf, buf + rb);
        return;
    }
    const int hpu = blocks == 1 ? kva_heads_per_unit(n_kv, u->s->head_dim, n, n_tasks) : 1, runs = (n_kv + hpu - 1) / hpu;
    for (int w = task; w < blocks * runs; w += n_tasks) {
        int b = w / runs, i0 = b * KVQ_QBLOCK, ni = n - i0 < KVQ_QBLOCK ? n - i0 : KVQ_QBLOCK;
        int kvh0 = (w % runs) * hpu, nkv = n_kv - kvh0 < hpu ? n_kv - kvh0 : hpu;
        kva_typed_unit(u, i0, ni, kvh0, nkv);
    }
}

#endif
