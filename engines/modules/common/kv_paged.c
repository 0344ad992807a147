#include "kv_paged.h"
#include "kv_attn.h"

#include <math.h>

#include "engines/abi/alloc.h"
#include "engines/abi/dtype.h"

int kvp_score(void) { return 1; }

int kvp_pool_create(kvp_pool *p, const bench_kv_shape *s, int n_rows, const bench_host *host, int touch,
                    const char *mod, char *err, size_t errlen) {
    memset(p, 0, sizeof(*p));
    if (n_rows < 1) return bench_errf(err, errlen, "%s: a pool of %d tokens: expected at least 1", mod, n_rows);
    size_t per = kvp_token_bytes(s);
    if (per == 0 || (size_t)n_rows > SIZE_MAX / per)
        return bench_errf(err, errlen, "%s: a pool of %d tokens overflows the address space", mod, n_rows);
    p->bytes = per * (size_t)n_rows;
    p->mem = bench_alloc(host ? host->alloc : NULL, p->bytes, 4096);
    if (!p->mem) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "%s: cannot allocate a pool of %zu bytes (%d tokens)", mod, p->bytes, n_rows);
    p->n_rows = n_rows;
    bench_name_region(host, p->mem, p->bytes, BENCH_REGION_KV);
    if (touch) memset(p->mem, 0, p->bytes);
    return 0;
}

void kvp_pool_destroy(kvp_pool *p, const bench_host *host) {
    if (p->mem) bench_free(host ? host->alloc : NULL, p->mem, p->bytes);
    memset(p, 0, sizeof(*p));
}

void kvp_copy_rows(const bench_kv_shape *s, kvp_pool *p, int dst, int src, int n) {
    size_t kr = kvp_k_row(s), vr = kvp_v_row(s);
    for (int l = 0; l < s->n_layers; l++) {
        memcpy(kvp_kb(s, p, l) + (size_t)dst * kr, kvp_kb(s, p, l) + (size_t)src * kr, (size_t)n * kr);
        memcpy(kvp_vb(s, p, l) + (size_t)dst * vr, kvp_vb(s, p, l) + (size_t)src * vr, (size_t)n * vr);
    }
}

void kvp_store(const bench_kv_shape *s, kvp_pool *p, const int *table, int bs, int layer, int pos0, int n,
               const float *k, const float *v) {
    size_t kv_dim = kvp_kv_dim(s), kr = kvp_k_row(s), vr = kvp_v_row(s);
    uint8_t *kl = kvp_kb(s, p, layer), *vl = kvp_vb(s, p, layer);
    /* one copy (or conversion) per run of positions that share a block */
    for (int i = 0; i < n;) {
        int pos = pos0 + i, off = pos % bs, run = bs - off;
        if (run > n - i) run = n - i;
        size_t row = (size_t)table[pos / bs] * (size_t)bs + (size_t)off;
        if (s->k_type == BENCH_F32) memcpy(kl + row * kr, k + (size_t)i * kv_dim, (size_t)run * kr);
        else for (int r = 0; r < run; r++) kvq_store_row(s->k_type, k + (size_t)(i + r) * kv_dim, kl + (row + (size_t)r) * kr, kv_dim);
        if (s->v_type == BENCH_F32) memcpy(vl + row * vr, v + (size_t)i * kv_dim, (size_t)run * vr);
        else for (int r = 0; r < run; r++) kvq_store_row(s->v_type, v + (size_t)(i + r) * kv_dim, vl + (row + (size_t)r) * vr, kv_dim);
        i += run;
    }
}

typedef struct attend_job {
    const bench_kv_shape *s;
    const uint8_t *k, *v;       /* layer bases of the pool */
    const float *q;
    const int *table;
    float *out, *scratch;
    int bs, pos0, n;
} attend_job;

typedef struct paged_rows { const uint8_t *k, *v; const int *table; size_t kr, vr; int bs; } paged_rows;
static size_t paged_row(const paged_rows *r, int t) { return (size_t)r->table[t / r->bs] * (size_t)r->bs + (size_t)(t % r->bs); }
static const uint8_t *paged_krow(const void *ctx, int t) { const paged_rows *r = ctx; return r->k + paged_row(r, t) * r->kr; }
static const uint8_t *paged_vrow(const void *ctx, int t) { const paged_rows *r = ctx; return r->v + paged_row(r, t) * r->vr; }

/* (query, head) pairs are dealt round-robin to the tasks, as in kv_contig.c.
 * Positions are walked block by block: inside a block the rows are contiguous. A typed
 * cache goes by units instead (kv_attn.h), its rows found through the table. */
static void attend_task(void *arg, int task, int n_tasks) {
    const attend_job *j = arg;
    const bench_kv_shape *s = j->s;
    if (s->k_type != BENCH_F32 || s->v_type != BENCH_F32) {
        size_t kv_dim = kvp_kv_dim(s);
        paged_rows rows = {j->k, j->v, j->table, kvq_bytes(s->k_type, kv_dim), kvq_bytes(s->v_type, kv_dim), j->bs};
        kva_unit u = {.s = s, .krow = paged_krow, .vrow = paged_vrow, .ctx = &rows, .q = j->q, .out = j->out,
                      .att = j->scratch + (size_t)task * kvq_scores_per_task(s), .pos0 = j->pos0};
        kva_typed_task(&u, j->n, task, n_tasks);
        return;
    }
    int hd = s->head_dim, kv_dim = s->n_kv_heads * hd, q_dim = s->n_heads * hd, bs = j->bs;
    int group = s->n_heads / s->n_kv_heads;
    float *att = j->scratch + (size_t)task * kvq_scores_per_task(s);
    int pairs = j->n * s->n_heads;
    const size_t kr = kvq_bytes(s->k_type, (size_t)kv_dim), vr = kvq_bytes(s->v_type, (size_t)kv_dim);
    const size_t k_block = (size_t)bs * kr, v_block = (size_t)bs * vr;
    for (int p = task; p < pairs; p += n_tasks) {
        int i = p / s->n_heads, h = p % s->n_heads;
        int pos = j->pos0 + i;
        const float *qh = j->q + (size_t)i * q_dim + (size_t)h * hd;
        size_t head = (size_t)(h / group) * hd, kh = kvq_bytes(s->k_type, head), vh = kvq_bytes(s->v_type, head);
        /* raw dots first, over runs of contiguous rows: one slot, or one block */
        if (bs == 1) {
            for (int t = 0; t <= pos; t++) kva_dots_t(s->k_type, qh, j->k + (size_t)j->table[t] * kr + kh, 0, 1, hd, att + t);
        } else for (int b = 0, t0 = 0; t0 <= pos; b++, t0 += bs) {
            int tn = pos + 1 - t0 < bs ? pos + 1 - t0 : bs;
            kva_dots_t(s->k_type, qh, j->k + (size_t)j->table[b] * k_block + kh, kr, tn, hd, att + t0);
        }
        kva_softmax(s, att, pos + 1);
        float *o = j->out + (size_t)i * q_dim + (size_t)h * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        if (bs == 1) {
            for (int t = 0; t <= pos; t++) kva_accum_t(s->v_type, o, att + t, j->v + (size_t)j->table[t] * vr + vh, 0, 1, hd);
        } else for (int b = 0, t0 = 0; t0 <= pos; b++, t0 += bs) {
            int tn = pos + 1 - t0 < bs ? pos + 1 - t0 : bs;
            kva_accum_t(s->v_type, o, att + t0, j->v + (size_t)j->table[b] * v_block + vh, vr, tn, hd);
        }
    }
}

void kvp_attend(const bench_kv_shape *s, const bench_host *host, const kvp_pool *p, const int *table, int bs,
                int layer, int pos0, int n, const float *q, float *out, float *scratch) {
    int n_tasks = host && host->n_threads > 0 ? host->n_threads : 1;
    attend_job j = {.s = s, .k = kvp_kb(s, p, layer), .v = kvp_vb(s, p, layer), .q = q, .table = table,
                    .out = out, .scratch = scratch, .bs = bs, .pos0 = pos0, .n = n};
    if (host && host->parallel_for && n_tasks > 1) host->parallel_for(host->pool, attend_task, &j, n_tasks);
    else attend_task(&j, 0, 1);
}
