#include "transformer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ---- binding ---- */

const tf_matrix_slot tf_layer_matrices[TF_LAYER_MATRICES] = {
    {"attn_q", offsetof(tf_layer, wq)},     {"attn_k", offsetof(tf_layer, wk)},
    {"attn_v", offsetof(tf_layer, wv)},     {"attn_output", offsetof(tf_layer, wo)},
    {"ffn_gate", offsetof(tf_layer, w1)},   {"ffn_down", offsetof(tf_layer, w2)},
    {"ffn_up", offsetof(tf_layer, w3)},
};

static int bind_matrix(const model *m, const void *const *data, const char *name, tf_matrix *out,
                       char *err, size_t errlen) {
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *t = &m->tensors[i];
        if (strcmp(t->name, name)) continue;
        out->data = data[i];
        out->dtype = t->dtype;
        out->cols = (int)t->ne[0];
        out->rows = t->n_dims > 1 ? (int)t->ne[1] : 1;
        return 0;
    }
    return bench_errf(err, errlen, "missing tensor %s", name);
}

int tf_bind(const model *m, const void *const *data, tf_weights *w, char *err, size_t errlen) {
    memset(w, 0, sizeof(*w));
    tf_matrix norm;
    char name[96];
    w->layers = calloc((size_t)m->cfg.n_layers, sizeof(*w->layers));
    if (!w->layers) return bench_errf(err, errlen, "out of memory");
    if (bind_matrix(m, data, "token_embd.weight", &w->tok_embd, err, errlen)) goto err;
    if (bind_matrix(m, data, "output_norm.weight", &norm, err, errlen)) goto err;
    w->out_norm = norm.data;
    if (model_find(m, "rope_freqs.weight")) {
        tf_matrix rf;
        if (bind_matrix(m, data, "rope_freqs.weight", &rf, err, errlen)) goto err;
        w->rope_freqs = rf.data;
    }
    if (model_find(m, "output.weight")) {
        if (bind_matrix(m, data, "output.weight", &w->output, err, errlen)) goto err;
    } else {
        w->output = w->tok_embd; /* tied classifier */
    }
    for (int l = 0; l < m->cfg.n_layers; l++) {
        tf_layer *L = &w->layers[l];
        for (int i = 0; i < TF_LAYER_MATRICES; i++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", l, tf_layer_matrices[i].name);
            if (bind_matrix(m, data, name, tf_layer_matrix(L, i), err, errlen)) goto err;
        }
        snprintf(name, sizeof(name), "blk.%d.attn_norm.weight", l);
        if (bind_matrix(m, data, name, &norm, err, errlen)) goto err;
        L->attn_norm = norm.data;
        snprintf(name, sizeof(name), "blk.%d.ffn_norm.weight", l);
        if (bind_matrix(m, data, name, &norm, err, errlen)) goto err;
        L->ffn_norm = norm.data;
    }
    return 0;
err:
    tf_unbind(w);
    return -1;
}

void tf_unbind(tf_weights *w) {
    free(w->layers);
    memset(w, 0, sizeof(*w));
}

/* ---- blocks (written as the reference writes them, so greedy ids match) ---- */

/* o[j] = w[j] * (a * x[j]), 16 at a time where the CPU has the width: elementwise, so every
 * width gives the scalar loop's bits (the baseline build's -O2 left the loop scalar). */
typedef float rn_v16 __attribute__((vector_size(64), aligned(4), may_alias));
__attribute__((target_clones("avx512f", "avx2", "default")))
static void rn_scale(float *restrict o, const float *restrict x, const float *restrict w, float a, int size) {
    const rn_v16 av = {a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a};
    int j = 0;
    for (; j + 16 <= size; j += 16)
        *(rn_v16 *)(void *)(o + j) = *(const rn_v16 *)(const void *)(w + j) * (av * *(const rn_v16 *)(const void *)(x + j));
    for (; j < size; j++) o[j] = w[j] * (a * x[j]);
}

/* o[j] += a[j]: the residual adds, 16 at a time (elementwise: the scalar loop's bits) */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void rn_add(float *restrict o, const float *restrict a, size_t n) {
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        *(rn_v16 *)(void *)(o + j) = *(const rn_v16 *)(const void *)(o + j) + *(const rn_v16 *)(const void *)(a + j);
    for (; j < n; j++) o[j] += a[j];
}

/* o = weight * (x / rms), given x's sum of squares ss. */
static void rmsnorm_apply(float *restrict o, const float *restrict x, const float *restrict weight, int size, float ss,
                          float eps) {
    ss /= (float)size;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    rn_scale(o, x, weight, ss, size);
}

/* rmsnorm of n rows of size floats (o, x: (n, size)). Each row's sum of squares is the
 * reference's serial sum (so the bits are the same), but eight rows' sums advance
 * together: eight independent add chains instead of one waiting on the adder's latency
 * (rmsnorm was 2 to 3% of a llama-110m prefill's cycles, perf, 1 thread). */
static void rmsnorm_rows(float *o, const float *x, const float *weight, int n, int size, float eps) {
    enum { R = 8 };
    for (int t0 = 0; t0 < n; t0 += R) {
        const int nr = n - t0 < R ? n - t0 : R;
        const float *xr = x + (size_t)t0 * size;
        float ss[R] = {0};
        if (nr == R) {
            /* a constant count, unrolled, so that the 8 sums live in registers: with nr
             * variable they stayed in memory, each add waiting on the last one's store
             * (perf annotate: the stores were half of rmsnorm_rows' samples) */
            for (int j = 0; j < size; j++) {
#pragma GCC unroll 8
                for (int t = 0; t < R; t++) ss[t] += xr[(size_t)t * size + j] * xr[(size_t)t * size + j];
            }
        } else
            for (int t = 0; t < nr; t++) { /* a row's sum in a register (decode's one row) */
                float sum = 0.0f;
                for (int j = 0; j < size; j++) sum += xr[(size_t)t * size + j] * xr[(size_t)t * size + j];
                ss[t] = sum;
            }
        for (int t = 0; t < nr; t++)
            rmsnorm_apply(o + (size_t)(t0 + t) * size, xr + (size_t)t * size, weight, size, ss[t], eps);
    }
}

/* cos and sin of each pair's angle at pos: cs[i] for the pair starting at i (hd/2 pairs).
 * The angle is pos * theta^(-i/hd) * freq_scale / freq_factor[i/2]: freq_scale is
 * 1/rope.scaling.factor for linear scaling, the factors rope_freqs.weight (Llama 3's long
 * context), both 1 when absent. Computed as the reference (llama2.c) writes it, or with
 * llama_numerics as ggml does it: theta^(-2/hd) raised by repeated multiplication. */
static void rope_table(const tf_ctx *t, int hd, int pos, float *cs) {
    const model_config *c = t->cfg;
    const float *ff = t->w->rope_freqs;
    float theta_scale = powf(c->rope_theta, -2.0f / (float)hd), th = (float)pos;
    float freq_scale = c->rope_linear > 0.0f ? 1.0f / c->rope_linear : 1.0f;
    for (int i = 0; i < hd; i += 2) {
        float val;
        if (t->llama_numerics) {
            val = (ff ? th / ff[i / 2] : th) * freq_scale;
            th *= theta_scale;
        } else {
            float freq = 1.0f / powf(c->rope_theta, (float)i / (float)hd);
            val = (float)pos * freq;
            if (ff) val /= ff[i / 2];
            if (freq_scale != 1.0f) val *= freq_scale;
        }
        cs[i] = cosf(val);
        cs[i + 1] = sinf(val);
    }
}

/* The interleaved layout's rotation of n_heads heads of hd floats (hd a multiple of 16), every
 * head by the same cs, 8 pairs a vector: lane 2k gets v0 c + v1 (-s) = v0 c - v1 s and lane 2k+1 gets v1 c + v0 s = v0 s + v1 c,
 * the scalar loop's products and sums (an add is commutative, a negation exact), so the same
 * bits; the scalar loop stayed scalar in the baseline build (rope 1.4% of a q4_0 prefill). */
typedef int rn_i16 __attribute__((vector_size(64)));
__attribute__((target_clones("avx512f", "avx2", "default")))
static void rope_pairs(float *restrict v, const float *restrict cs, int n_heads, int hd) {
    const rn_i16 swap = {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14};
    const rn_i16 even = {0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14};
    const rn_i16 odd = {1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15};
    const rn_v16 sign = {-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1};
    for (int i = 0; i < n_heads * hd; i += 16) {
        const rn_v16 x = *(const rn_v16 *)(const void *)(v + i), t = *(const rn_v16 *)(const void *)(cs + i % hd);
        const rn_v16 c = __builtin_shuffle(t, even), sn = __builtin_shuffle(t, odd) * sign;
        *(rn_v16 *)(void *)(v + i) = x * c + __builtin_shuffle(x, swap) * sn;
    }
}

/* Rotates each head's pairs by the angles of cs (rope_table). The pair is (2i, 2i+1) in
 * the interleaved layout and (i, i + hd/2) in HF's layout; same rotation. */
static void rope(float *v, int n_heads, int hd, const float *cs, rope_style style) {
    if (style != ROPE_HALF && hd % 16 == 0) {
        rope_pairs(v, cs, n_heads, hd);
        return;
    }
    for (int h = 0; h < n_heads; h++) {
        float *vh = v + (size_t)h * hd;
        for (int i = 0; i < hd; i += 2) {
            float fcr = cs[i], fci = cs[i + 1];
            int a = style == ROPE_HALF ? i / 2 : i;
            int b = style == ROPE_HALF ? i / 2 + hd / 2 : i + 1;
            float v0 = vh[a], v1 = vh[b];
            vh[a] = v0 * fcr - v1 * fci;
            vh[b] = v0 * fci + v1 * fcr;
        }
    }
}

/* llama.cpp's default KV cache holds k and v in f16, and its attention products
 * convert q (and the softmax weights) to f16 too: this gives the same values. */
static void round_f16(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = bench_f16_to_f32(bench_f32_to_f16(v[i]));
}

static void matmul(tf_ctx *t, float *y, const float *x, int n, const tf_matrix *w) {
    kn_matmul(t->pool, y, x, n, w->data, w->dtype, w->rows, w->cols);
}

/* ---- forward ---- */

typedef struct scratch {
    float *x;       /* (n, dim) residual stream */
    float *xb;      /* (n, dim) normed input / attention output */
    float *xb2;     /* (n, dim) */
    float *q;       /* (n, dim) */
    float *k, *v;   /* (n, kv_dim) */
    float *hb, *hb2;/* (n, hidden) */
    float *cs;      /* (n, hd) cos, sin of each RoPE pair at each row's position, made once a call */
} scratch;

/* Index of the first element of v[0..n) that is NaN or infinite, or -1. */
static long first_not_finite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return (long)i;
    return -1;
}

/* The output row i of a forward as (sequence, position). */
static void out_position(const tf_span *spans, int n_spans, int n, int n_out, int i, int *seq, int *pos) {
    int row = n - n_out + i;
    for (int k = 0; k < n_spans; k++) {
        if (row < spans[k].n) {
            *seq = spans[k].seq;
            *pos = spans[k].pos0 + row;
            return;
        }
        row -= spans[k].n;
    }
    *seq = *pos = -1;
}

/* ---- the per-token steps between the matmuls, on the pool's threads ----
 *
 * Between two matmuls of a prefill the norms, RoPE, residual adds and SwiGLU ran on the calling
 * thread while the others spun: with 2 threads each such step cost twice its time (perf, warm
 * llama-110m q4_0 prefill of 128 tokens, Zen 5: rmsnorm, rope, swiglu and the adds 4.5% of the
 * samples, the waiting workers another 9.5%). Each row is computed as before, alone and in the
 * same order, so a split never changes a value. */

enum { ROWS_PAR_MIN = 8 }; /* fewer tokens (decode): one thread, no hand-over */

typedef enum {
    ROW_ROPE_TABLE, /* cs: each row's cos and sin, the same in every layer */
    ROW_ATTN_NORM,  /* xb = rmsnorm(x) * attn_norm */
    ROW_ROPE,       /* q, k rotated at each row's position (and rounded, llama_numerics) */
    ROW_RESID_NORM, /* x += xb2; xb = rmsnorm(x) * ffn_norm */
    ROW_SWIGLU,     /* hb = silu(hb) * hb2 */
    ROW_RESID,      /* x += xb */
} row_op;

typedef struct row_job {
    const tf_ctx *t;
    const scratch *s;
    const tf_layer *L;
    const tf_span *spans;
    int n_spans, n;
    row_op op;
} row_job;

/* The position of row i of the batch (spans in order). */
static int row_pos(const tf_span *spans, int n_spans, int i) {
    for (int k = 0; k < n_spans; k++) {
        if (i < spans[k].n) return spans[k].pos0 + i;
        i -= spans[k].n;
    }
    return -1;
}

static void row_range(const row_job *j, int r0, int r1) {
    const tf_ctx *t = j->t;
    const model_config *c = t->cfg;
    const scratch *s = j->s;
    const int dim = c->dim, hd = dim / c->n_heads, kv_dim = c->n_kv_heads * hd, hidden = c->hidden_dim;
    const size_t a = (size_t)r0, nr = (size_t)(r1 - r0);
    switch (j->op) {
    case ROW_ROPE_TABLE:
        /* once a call, not once a layer: 2 powf and 2 trig calls a pair, which every layer
         * made again for the same positions (rope and rope_table 2.5% of a warm llama-110m
         * q4_0 prefill's samples, 12 layers) */
        for (int i = r0; i < r1; i++) rope_table(t, hd, row_pos(j->spans, j->n_spans, i), s->cs + (size_t)i * hd);
        return;
    case ROW_ATTN_NORM:
        rmsnorm_rows(s->xb + a * dim, s->x + a * dim, j->L->attn_norm, r1 - r0, dim, c->norm_eps);
        return;
    case ROW_ROPE:
        for (int i = r0; i < r1; i++) {
            rope(s->q + (size_t)i * dim, c->n_heads, hd, s->cs + (size_t)i * hd, c->rope);
            rope(s->k + (size_t)i * kv_dim, c->n_kv_heads, hd, s->cs + (size_t)i * hd, c->rope);
        }
        if (t->llama_numerics) {
            round_f16(s->q + a * dim, nr * dim);
            round_f16(s->k + a * kv_dim, nr * kv_dim);
            round_f16(s->v + a * kv_dim, nr * kv_dim);
        }
        return;
    case ROW_RESID_NORM:
        rn_add(s->x + a * dim, s->xb2 + a * dim, nr * dim);
        rmsnorm_rows(s->xb + a * dim, s->x + a * dim, j->L->ffn_norm, r1 - r0, dim, c->norm_eps);
        return;
    case ROW_SWIGLU:
        kn_swiglu(s->hb + a * hidden, s->hb2 + a * hidden, nr * hidden);
        return;
    case ROW_RESID:
        rn_add(s->x + a * dim, s->xb + a * dim, nr * dim);
        return;
    }
}

static void row_task(void *arg, int task, int n_tasks) {
    const row_job *j = arg;
    row_range(j, (int)((int64_t)j->n * task / n_tasks), (int)((int64_t)j->n * (task + 1) / n_tasks));
}

/* Runs op over the batch's n rows, split across the pool where the batch is large enough. */
static void rows_run(const tf_ctx *t, const scratch *s, const tf_layer *L, const tf_span *spans, int n_spans, int n, row_op op) {
    row_job j = {t, s, L, spans, n_spans, n, op};
    const int threads = tp_threads(t->pool);
    if (n < ROWS_PAR_MIN || threads < 2) row_range(&j, 0, n);
    else tp_run(t->pool, row_task, &j, threads);
}

/* A pass's scratch for n tokens: tf_forward_spans' buffers, laid out there. */
static size_t tf_scratch_bytes(const model_config *c, int n) {
    const size_t dim = (size_t)c->dim, hd = dim / (size_t)c->n_heads, kv_dim = (size_t)c->n_kv_heads * hd;
    return (size_t)n * (4u * dim + 2u * kv_dim + 2u * (size_t)c->hidden_dim + hd) * sizeof(float);
}

/* The call's scratch: bytes from the kept block, grown to fit (its contents are not kept), or a
 * block of the call's own under scratch_per_pass. Kept, because a block given back every call
 * is faulted in again by every call where the allocator returns it to the kernel: glibc's
 * malloc maps and unmaps a prefill's 4.5 MiB (llama-110m, 128 tokens) each time, about 1,100
 * page faults a warm pass, and prefill ran at 1431.6 against 1809.4 tokens/s (f16) and 2297.8
 * against 3257.3 (bf16) beside the slab allocator, which keeps it (Zen 5, docs/PERFORMANCE.md
 * "The forward pass's scratch"). */
static float *tf_scratch(tf_ctx *t, size_t bytes) {
    if (t->scratch_per_pass) {
        float *mem = bench_alloc(t->alloc, bytes, 64);
        if (mem) t->scratch_allocs++;
        return mem;
    }
    if (t->scratch && t->scratch_bytes >= bytes) return t->scratch;
    tf_release(t);
    t->scratch = bench_alloc(t->alloc, bytes, 64);
    if (!t->scratch) return NULL;
    t->scratch_bytes = bytes;
    t->scratch_allocs++;
    return t->scratch;
}

int tf_reserve(tf_ctx *t, int n) {
    if (t->scratch_per_pass || n <= 0) return 0;
    const uint64_t allocs = t->scratch_allocs;
    const size_t bytes = tf_scratch_bytes(t->cfg, n);
    float *mem = tf_scratch(t, bytes);
    if (!mem) return -1;
    if (t->scratch_allocs != allocs) memset(mem, 0, bytes); /* a new block: its pages faulted in here */
    return 0;
}

void tf_release(tf_ctx *t) {
    if (t->scratch) bench_free(t->alloc, t->scratch, t->scratch_bytes);
    t->scratch = NULL;
    t->scratch_bytes = 0;
}

int tf_forward(tf_ctx *t, int seq, const int *tokens, int n, int pos0, float *logits, int n_out,
               char *err, size_t errlen) {
    tf_span one = {.seq = seq, .pos0 = pos0, .n = n};
    return tf_forward_spans(t, &one, 1, tokens, logits, n_out, err, errlen);
}

int tf_forward_spans(tf_ctx *t, const tf_span *spans, int n_spans, const int *tokens, float *logits, int n_out,
                     char *err, size_t errlen) {
    const model_config *c = t->cfg;
    const tf_weights *w = t->w;
    int dim = c->dim, hd = c->dim / c->n_heads, kv_dim = c->n_kv_heads * hd, hidden = c->hidden_dim;
    int n = 0;
    for (int k = 0; k < n_spans; k++) {
        if (spans[k].n <= 0) return bench_errf(err, errlen, "forward: span %d of sequence %d has %d tokens", k, spans[k].seq, spans[k].n);
        n += spans[k].n;
    }
    if (n_spans <= 0 || n_out <= 0 || n_out > n) return bench_errf(err, errlen, "forward: %d tokens, %d outputs", n, n_out);
    for (int k = 0, i = 0; k < n_spans; k++)
        for (int j = 0; j < spans[k].n; j++, i++)
            if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
                return bench_errf(err, errlen, "forward: token %d at position %d of sequence %d is outside the vocabulary of %d",
                                  tokens[i], spans[k].pos0 + j, spans[k].seq, c->vocab_size);

    const size_t nn = (size_t)n, bytes = tf_scratch_bytes(c, n);
    float *mem = tf_scratch(t, bytes);
    if (!mem) return bench_errf(err, errlen, "forward: cannot allocate %zu bytes of scratch", bytes);
    scratch s;
    float *p = mem;
    s.x = p; p += nn * dim;
    s.xb = p; p += nn * dim;
    s.xb2 = p; p += nn * dim;
    s.q = p; p += nn * dim;
    s.k = p; p += nn * kv_dim;
    s.v = p; p += nn * kv_dim;
    s.hb = p; p += nn * hidden;
    s.hb2 = p; p += nn * hidden;
    s.cs = p;

    for (int i = 0; i < n; i++) {
        const uint8_t *row = (const uint8_t *)w->tok_embd.data +
                             (size_t)tokens[i] * bench_dtype_row_bytes(w->tok_embd.dtype, dim);
        kn_dequant_row(w->tok_embd.dtype, row, s.x + (size_t)i * dim, dim);
    }
    /* Where the output rows first stop being finite: -2 still finite, -1 the token
     * embedding, else the layer. Only the n_out rows the logits come from are looked
     * at (dim floats per layer and output, nothing beside the matmuls), and only until
     * the first non-finite value, so that a failed forward can say where it began. */
    float *outx = s.x + (size_t)(n - n_out) * dim;
    int bad_from = first_not_finite(outx, (size_t)n_out * dim) >= 0 ? -1 : -2;

    rows_run(t, &s, NULL, spans, n_spans, n, ROW_ROPE_TABLE);
    for (int l = 0; l < c->n_layers; l++) {
        const tf_layer *L = &w->layers[l];
        rows_run(t, &s, L, spans, n_spans, n, ROW_ATTN_NORM);
        kn_mm_out qkv[3] = {{s.q, L->wq.data, L->wq.dtype, L->wq.rows}, {s.k, L->wk.data, L->wk.dtype, L->wk.rows},
                            {s.v, L->wv.data, L->wv.dtype, L->wv.rows}};
        kn_matmul_multi(t->pool, s.xb, n, dim, qkv, 3);
        rows_run(t, &s, L, spans, n_spans, n, ROW_ROPE);
        /* each span at its own positions, through its own sequence's cache */
        for (int k = 0, i0 = 0; k < n_spans; i0 += spans[k++].n) {
            const tf_span *sp = &spans[k];
            t->kv->iface->store(t->kv->ctx, sp->seq, l, sp->pos0, sp->n, s.k + (size_t)i0 * kv_dim, s.v + (size_t)i0 * kv_dim);
            t->kv->iface->attend(t->kv->ctx, sp->seq, l, sp->pos0, sp->n, s.q + (size_t)i0 * dim, s.xb + (size_t)i0 * dim);
        }
        matmul(t, s.xb2, s.xb, n, &L->wo);
        rows_run(t, &s, L, spans, n_spans, n, ROW_RESID_NORM);
        kn_mm_out gate_up[2] = {{s.hb, L->w1.data, L->w1.dtype, L->w1.rows}, {s.hb2, L->w3.data, L->w3.dtype, L->w3.rows}};
        kn_matmul_multi(t->pool, s.xb, n, dim, gate_up, 2);
        rows_run(t, &s, L, spans, n_spans, n, ROW_SWIGLU);
        matmul(t, s.xb, s.hb, n, &L->w2);
        rows_run(t, &s, L, spans, n_spans, n, ROW_RESID);
        if (bad_from == -2 && first_not_finite(outx, (size_t)n_out * dim) >= 0) bad_from = l;
    }

    float *last = s.x + (size_t)(n - n_out) * dim;
    rmsnorm_rows(s.xb, last, w->out_norm, n_out, dim, c->norm_eps);
    matmul(t, logits, s.xb, n_out, &w->output);
    if (t->scratch_per_pass) bench_free(t->alloc, mem, bytes);
    /* NaN or Inf in a weight (a scale, a norm, the embedding) made every later token 0,
     * with no sign: the logits are checked once per forward, and the run stops there */
    long bad = first_not_finite(logits, (size_t)n_out * (size_t)c->vocab_size);
    if (bad >= 0) {
        int row = (int)(bad / c->vocab_size), bseq, bpos;
        out_position(spans, n_spans, n, n_out, row, &bseq, &bpos);
        char where[96];
        if (bad_from == -1) snprintf(where, sizeof(where), "the token embedding (token_embd.weight)");
        else if (bad_from >= 0) snprintf(where, sizeof(where), "layer %d (blk.%d.*)", bad_from, bad_from);
        else snprintf(where, sizeof(where), "the output norm or classifier (output_norm.weight, output.weight)");
        return bench_errf(err, errlen,
                          "forward: the logits at position %d of sequence %d are not finite (logit %ld is %g); "
                          "the first non-finite values come from %s: the model's weights hold NaN or Inf (bench model info --check)",
                          bpos, bseq, bad % c->vocab_size, logits[bad], where);
    }
    return 0;
}
