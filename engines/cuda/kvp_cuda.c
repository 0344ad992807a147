/* engines/modules/common/kv_paged.h over device memory: the CUDA build of kv "block" and
 * kv "token" links this file in place of kv_paged.c, so their block tables, free lists,
 * prefix caches and copy-on-write run unchanged on the host while the pool of rows lives
 * on the GPU and the attention kernel (attn.h) reads the rows there.
 *
 * The kernels need the host's index tables on the device: each table has a device
 * mirror (host/tablemirror.h), uploaded from a pinned copy on the pool's stream, so no
 * upload waits for the device. A table changes between passes (reserve, copy-on-write,
 * share_prefix, fork) and, for kv "token", in the last layer's store of a prefill (its
 * positions move to the prefix tree's slots, which hold the same K/V). So a pass compares
 * the whole table twice, at layer 0's store and at the last layer's attention, and
 * otherwise uploads only entries past what the device holds. */
#include "engines/modules/common/kv_paged.h"

#include "engines/cuda/attn.h"
#include "engines/cuda/cu_util.h"
#include "engines/cuda/host/tablemirror.h"
#include "engines/cuda/kvc_cuda.h"

typedef struct kvp_mirror {
    const int *host;        /* the host table mirrored; NULL: unused */
    int *dev;               /* (cap) on the device */
    int *pinned;            /* (cap) what dev holds once `done` has passed; the uploads' source */
    cudaEvent_t done;       /* the last upload from pinned */
    int n_synced, cap;
} kvp_mirror;

typedef struct kvp_dev {
    kvcc k;                 /* the checks, the stream, the attention's work area */
    cudaStream_t stream;
    int n_layers;
    kvp_mirror *m;          /* (n_m) one per table, round-robin when more tables than that appear */
    int n_m, next;
} kvp_dev;

int kvp_score(void) { return cu_score(); }

static void mirror_free(kvp_mirror *m) {
    if (m->done) cudaEventSynchronize(m->done), cudaEventDestroy(m->done);
    cudaFree(m->dev);
    if (m->pinned) cudaFreeHost(m->pinned);
    *m = (kvp_mirror){0};
}

int kvp_pool_create(kvp_pool *p, const bench_kv_shape *s, int n_rows, const bench_host *host, int touch, const char *mod,
                    char *err, size_t errlen) {
    memset(p, 0, sizeof(*p));
    if (n_rows < 1) return bench_errf(err, errlen, "%s: a pool of %d tokens: expected at least 1", mod, n_rows);
    size_t per = kvp_token_bytes(s);
    if (per == 0 || (size_t)n_rows > SIZE_MAX / per)
        return bench_errf(err, errlen, "%s: a pool of %d tokens overflows the address space", mod, n_rows);
    kvp_dev *d = calloc(1, sizeof(*d));
    if (!d) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "%s: out of memory", mod);
    p->dev = d;
    if (kvcc_open(&d->k, s, host, mod, err, errlen)) {
        kvp_pool_destroy(p, host);
        return -1;
    }
    d->stream = (cudaStream_t)host->stream;
    d->n_layers = s->n_layers;
    d->n_m = s->max_seqs > 0 ? s->max_seqs : 1;
    d->m = calloc((size_t)d->n_m, sizeof(*d->m));
    if (!d->m) {
        kvp_pool_destroy(p, host);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "%s: out of memory", mod);
    }
    p->bytes = per * (size_t)n_rows;
    cudaError_t e = cudaMalloc((void **)&p->mem, p->bytes);
    if (e != cudaSuccess) {
        p->mem = NULL;
        kvp_pool_destroy(p, host);
        char what[160];
        snprintf(what, sizeof(what), "%s: cudaMalloc of a pool of %d tokens", mod, n_rows);
        return cu_fail(err, errlen, what, e);
    }
    p->n_rows = n_rows;
    if (touch && ((e = cudaMemsetAsync(p->mem, 0, p->bytes, d->stream)) != cudaSuccess ||
                  (e = cudaStreamSynchronize(d->stream)) != cudaSuccess)) {
        kvp_pool_destroy(p, host);
        return cu_fail(err, errlen, mod, e);
    }
    return 0;
}

void kvp_pool_destroy(kvp_pool *p, const bench_host *host) {
    (void)host;
    kvp_dev *d = p->dev;
    if (d) {
        if (d->stream) cudaStreamSynchronize(d->stream);
        for (int i = 0; d->m && i < d->n_m; i++) mirror_free(&d->m[i]);
        kvcc_close(&d->k);
        free(d->m);
        free(d);
    }
    cudaFree(p->mem);
    memset(p, 0, sizeof(*p));
}

void kvp_copy_rows(const bench_kv_shape *s, kvp_pool *p, int dst, int src, int n) {
    kvp_dev *d = p->dev;
    const size_t kr = kvp_k_row(s), vr = kvp_v_row(s);
    for (int l = 0; l < s->n_layers; l++) {
        cudaMemcpyAsync(kvp_kb(s, p, l) + (size_t)dst * kr, kvp_kb(s, p, l) + (size_t)src * kr, (size_t)n * kr,
                        cudaMemcpyDeviceToDevice, d->stream);
        cudaMemcpyAsync(kvp_vb(s, p, l) + (size_t)dst * vr, kvp_vb(s, p, l) + (size_t)src * vr, (size_t)n * vr,
                        cudaMemcpyDeviceToDevice, d->stream);
    }
}

/* One layer's rows of the pool, in their types. */
static cuatt_rows kvp_rows(const bench_kv_shape *s, const kvp_pool *p, int layer) {
    return (cuatt_rows){.kb = kvp_kb(s, p, layer), .vb = kvp_vb(s, p, layer), .k_stride = kvp_k_row(s),
                        .v_stride = kvp_v_row(s), .k_type = s->k_type, .v_type = s->v_type};
}

/* The device copy of table with entries [0, n_need) current. full: compare every entry
 * (else only append what the device lacks). NULL on a CUDA error, which stays the
 * runtime's last error for the device module to report after the pass. */
static const int *mirror(kvp_dev *d, const int *table, int n_need, int cap, int full) {
    kvp_mirror *m = NULL;
    for (int i = 0; i < d->n_m && !m; i++)
        if (d->m[i].host == table) m = &d->m[i];
    if (!m) {
        for (int i = 0; i < d->n_m && !m; i++)
            if (!d->m[i].host) m = &d->m[i];
        if (!m) { /* more tables than sequences: recycle one */
            m = &d->m[d->next];
            d->next = (d->next + 1) % d->n_m;
        }
        m->host = table;
        m->n_synced = 0;
    }
    if (!m->dev) {
        if (cudaMalloc((void **)&m->dev, (size_t)cap * sizeof(int)) != cudaSuccess ||
            cudaHostAlloc((void **)&m->pinned, (size_t)cap * sizeof(int), cudaHostAllocDefault) != cudaSuccess ||
            cudaEventCreateWithFlags(&m->done, cudaEventDisableTiming) != cudaSuccess) {
            mirror_free(m);
            return NULL;
        }
        m->cap = cap;
    }
    if (n_need > m->cap) return NULL;
    int first = m->n_synced < n_need ? m->n_synced : n_need, count = n_need - first;
    if (full) count = tmr_diff(table, m->pinned, m->n_synced, n_need, &first);
    if (count > 0) {
        /* pinned is the source of the previous upload until its event has passed */
        if (cudaEventSynchronize(m->done) != cudaSuccess) return NULL;
        memcpy(m->pinned + first, table + first, (size_t)count * sizeof(int));
        if (cudaMemcpyAsync(m->dev + first, m->pinned + first, (size_t)count * sizeof(int), cudaMemcpyHostToDevice,
                            d->stream) != cudaSuccess ||
            cudaEventRecord(m->done, d->stream) != cudaSuccess)
            return NULL;
        if (n_need > m->n_synced) m->n_synced = n_need;
    }
    return m->dev;
}

/* Entries of a table that positions [0, end) use; the table of a sequence never has more
 * than max_pos (block size 1). */
static int entries(int end, int bs) { return (end + bs - 1) / bs; }

void kvp_store(const bench_kv_shape *s, kvp_pool *p, const int *table, int bs, int layer, int pos0, int n, const float *k,
               const float *v) {
    kvp_dev *d = p->dev;
    const int *dt = mirror(d, table, entries(pos0 + n, bs), s->max_pos, layer == 0);
    if (!dt) return;
    cuatt_rows r = kvp_rows(s, p, layer);
    cuatt_store(d->stream, &r, dt, bs, pos0, n, (int)kvp_kv_dim(s), k, v);
}

void kvp_attend(const bench_kv_shape *s, const bench_host *host, const kvp_pool *p, const int *table, int bs, int layer,
                int pos0, int n, const float *q, float *out, float *scratch) {
    (void)host;
    (void)scratch; /* the CPU's score buffer: the kernel keeps its scores in shared memory */
    kvp_dev *d = p->dev;
    const int *dt = mirror(d, table, entries(pos0 + n, bs), s->max_pos, layer == d->n_layers - 1);
    if (!dt) return;
    cuatt_rows r = kvp_rows(s, p, layer);
    cuatt_attend(d->stream, &r, dt, bs, pos0, n, s->n_heads, s->n_kv_heads, s->head_dim, q, out, d->k.work);
}
