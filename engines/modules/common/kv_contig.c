#include "kv_contig.h"
#include "kv_attn.h"

#include "engines/abi/dtype.h"

#include <math.h>

size_t kvc_bytes(const bench_kv_shape *s, int cap) {
    return (size_t)s->n_layers * (size_t)cap * (kvc_k_row(s) + kvc_v_row(s));
}

void kvc_store(const bench_kv_shape *s, kvc_seq *q, int layer, int pos0, int n, const float *k, const float *v) {
    size_t kv_dim = (size_t)(s->n_kv_heads * s->head_dim), kr = kvc_k_row(s), vr = kvc_v_row(s);
    uint8_t *kd = kvc_k(s, q, layer) + (size_t)pos0 * kr, *vd = kvc_v(s, q, layer) + (size_t)pos0 * vr;
    if (s->k_type == BENCH_F32) memcpy(kd, k, (size_t)n * kr);
    else for (int i = 0; i < n; i++) kvq_store_row(s->k_type, k + (size_t)i * kv_dim, kd + (size_t)i * kr, kv_dim);
    if (s->v_type == BENCH_F32) memcpy(vd, v, (size_t)n * vr);
    else for (int i = 0; i < n; i++) kvq_store_row(s->v_type, v + (size_t)i * kv_dim, vd + (size_t)i * vr, kv_dim);
    if (pos0 + n > q->used) q->used = pos0 + n;
}

typedef struct attend_job {
    const bench_kv_shape *s;
    const uint8_t *k, *v;
    const float *q;
    float *out, *scratch;
    int pos0, n, n_tasks;
} attend_job;

typedef struct contig_rows { const uint8_t *k, *v; size_t kr, vr; } contig_rows;
static const uint8_t *contig_krow(const void *ctx, int t) { const contig_rows *r = ctx; return r->k + (size_t)t * r->kr; }
static const uint8_t *contig_vrow(const void *ctx, int t) { const contig_rows *r = ctx; return r->v + (size_t)t * r->vr; }

/* The (query, head) pairs are dealt round-robin to the tasks; each task owns one
 * score buffer of max_pos floats. A typed cache goes by units instead (kv_attn.h). */
static void attend_task(void *arg, int task, int n_tasks) {
    const attend_job *j = arg;
    const bench_kv_shape *s = j->s;
    if (s->k_type != BENCH_F32 || s->v_type != BENCH_F32) {
        size_t kv_dim = (size_t)s->n_kv_heads * (size_t)s->head_dim;
        contig_rows rows = {j->k, j->v, kvq_bytes(s->k_type, kv_dim), kvq_bytes(s->v_type, kv_dim)};
        kva_unit u = {.s = s, .krow = contig_krow, .vrow = contig_vrow, .ctx = &rows, .q = j->q, .out = j->out,
                      .att = j->scratch + (size_t)task * kvq_scores_per_task(s), .pos0 = j->pos0};
        kva_typed_task(&u, j->n, task, n_tasks);
        return;
    }
    int hd = s->head_dim, kv_dim = s->n_kv_heads * hd, q_dim = s->n_heads * hd;
    int group = s->n_heads / s->n_kv_heads;
    float *att = j->scratch + (size_t)task * (size_t)s->max_pos;
    int pairs = j->n * s->n_heads;
    for (int p = task; p < pairs; p += n_tasks) {
        int i = p / s->n_heads, h = p % s->n_heads;
        int pos = j->pos0 + i;
        const float *qh = j->q + (size_t)i * q_dim + (size_t)h * hd;
        /* the head's first value in each row, and the rows' strides, in bytes */
        const size_t head = (size_t)(h / group) * (size_t)hd;
        const size_t kr = kvq_bytes(s->k_type, (size_t)kv_dim), vr = kvq_bytes(s->v_type, (size_t)kv_dim);
        const uint8_t *kh = j->k + kvq_bytes(s->k_type, head), *vh = j->v + kvq_bytes(s->v_type, head);
        kva_dots_t(s->k_type, qh, kh, kr, pos + 1, hd, att);
        kva_softmax(s, att, pos + 1);
        float *o = j->out + (size_t)i * q_dim + (size_t)h * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        kva_accum_t(s->v_type, o, att, vh, vr, pos + 1, hd);
    }
}

void kvc_attend(const bench_kv_shape *s, const bench_host *host, const uint8_t *k, const uint8_t *v,
                int pos0, int n, const float *q, float *out, float *scratch) {
    int n_tasks = host && host->n_threads > 0 ? host->n_threads : 1;
    attend_job j = {.s = s, .k = k, .v = v, .q = q, .out = out, .scratch = scratch,
                    .pos0 = pos0, .n = n, .n_tasks = n_tasks};
    if (host && host->parallel_for && n_tasks > 1) host->parallel_for(host->pool, attend_task, &j, n_tasks);
    else attend_task(&j, 0, 1);
}
