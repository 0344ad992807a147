#include "kv_contig.h"

#include "engines/abi/dtype.h"

#include <math.h>

size_t kvc_bytes(const bench_kv_shape *s, int cap) {
    return 2u * (size_t)s->n_layers * (size_t)cap * (size_t)(s->n_kv_heads * s->head_dim) * sizeof(float);
}

void kvc_store(const bench_kv_shape *s, kvc_seq *q, int layer, int pos0, int n, const float *k, const float *v) {
    size_t kv_dim = (size_t)(s->n_kv_heads * s->head_dim);
    memcpy(kvc_k(s, q, layer) + (size_t)pos0 * kv_dim, k, (size_t)n * kv_dim * sizeof(float));
    memcpy(kvc_v(s, q, layer) + (size_t)pos0 * kv_dim, v, (size_t)n * kv_dim * sizeof(float));
    if (pos0 + n > q->used) q->used = pos0 + n;
}

typedef struct attend_job {
    const bench_kv_shape *s;
    const float *k, *v, *q;
    float *out, *scratch;
    int pos0, n, n_tasks;
} attend_job;

/* A dot product in 16 independent lanes, so the compiler can vectorise it
 * (one running sum is a chain of dependent adds: the scalar loop made attention
 * a fifth of decode time at 260 positions on llama-110m). The order of the adds
 * differs from the reference's; the matmul kernels already differ the same way
 * and the greedy ids still match (tests/test_engine.c). Built for AVX-512, AVX2
 * and the baseline, picked at load time. */
#define KVC_LANES 16
__attribute__((target_clones("avx512f", "avx2", "default")))
static float dot_f32(const float *a, const float *b, int n) {
    float acc[KVC_LANES] = {0};
    int d = 0;
    for (; d + KVC_LANES <= n; d += KVC_LANES)
        for (int l = 0; l < KVC_LANES; l++) acc[l] += a[d + l] * b[d + l];
    float sum = 0.0f;
    for (int l = 0; l < KVC_LANES; l++) sum += acc[l];
    for (; d < n; d++) sum += a[d] * b[d];
    return sum;
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void axpy_f32(float *restrict y, float a, const float *restrict x, int n) {
    int d = 0;
    for (; d + KVC_LANES <= n; d += KVC_LANES)
        for (int l = 0; l < KVC_LANES; l++) y[d + l] += a * x[d + l];
    for (; d < n; d++) y[d] += a * x[d];
}

/* The (query, head) pairs are dealt round-robin to the tasks; each task owns one
 * score buffer of max_pos floats. */
static void attend_task(void *arg, int task, int n_tasks) {
    const attend_job *j = arg;
    const bench_kv_shape *s = j->s;
    int hd = s->head_dim, kv_dim = s->n_kv_heads * hd, q_dim = s->n_heads * hd;
    int group = s->n_heads / s->n_kv_heads;
    float sqrt_hd = sqrtf((float)hd);
    float *att = j->scratch + (size_t)task * (size_t)s->max_pos;
    int pairs = j->n * s->n_heads;
    for (int p = task; p < pairs; p += n_tasks) {
        int i = p / s->n_heads, h = p % s->n_heads;
        int pos = j->pos0 + i;
        const float *qh = j->q + (size_t)i * q_dim + (size_t)h * hd;
        const float *kh = j->k + (size_t)(h / group) * hd;
        const float *vh = j->v + (size_t)(h / group) * hd;
        float max = -INFINITY;
        for (int t = 0; t <= pos; t++) {
            float dot = dot_f32(qh, kh + (size_t)t * kv_dim, hd);
            /* divide, as the reference does; llama.cpp (attn_f16) multiplies by 1/sqrt(hd) */
            dot = s->attn_f16 ? dot * (1.0f / sqrt_hd) : dot / sqrt_hd;
            att[t] = dot;
            if (dot > max) max = dot;
        }
        float sum = 0.0f;
        double sum_d = 0.0; /* llama.cpp's softmax sums in double and scales by 1/sum */
        for (int t = 0; t <= pos; t++) {
            att[t] = expf(att[t] - max);
            sum += att[t];
            sum_d += att[t];
        }
        const float inv = (float)(1.0 / sum_d);
        float *o = j->out + (size_t)i * q_dim + (size_t)h * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        for (int t = 0; t <= pos; t++) {
            const float *vt = vh + (size_t)t * kv_dim;
            float a = s->attn_f16 ? bench_f16_to_f32(bench_f32_to_f16(att[t] * inv)) : att[t] / sum;
            axpy_f32(o, a, vt, hd);
        }
    }
}

void kvc_attend(const bench_kv_shape *s, const bench_host *host, const float *k, const float *v,
                int pos0, int n, const float *q, float *out, float *scratch) {
    int n_tasks = host && host->n_threads > 0 ? host->n_threads : 1;
    attend_job j = {.s = s, .k = k, .v = v, .q = q, .out = out, .scratch = scratch,
                    .pos0 = pos0, .n = n, .n_tasks = n_tasks};
    if (host && host->parallel_for && n_tasks > 1) host->parallel_for(host->pool, attend_task, &j, n_tasks);
    else attend_task(&j, 0, 1);
}
