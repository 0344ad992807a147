#include "kvc_cuda.h"

#include "engines/cuda/attn.h"
#include "engines/cuda/cu_util.h"
#include "engines/modules/common/kv_types.h"

int kvcc_open(kvcc *k, const bench_kv_shape *s, const bench_host *host, const char *mod, char *err, size_t errlen) {
    memset(k, 0, sizeof(*k));
    if (!cu_probe(err, errlen)) return -1;
    if (!host || !host->stream)
        return bench_errf(err, errlen, "%s: built for CUDA: run it with the cuda device (--device cuda)", mod);
    if (s->head_dim < 1 || s->head_dim > 256)
        return bench_errf(err, errlen, "%s: head dimension %d: the CUDA attention takes 1..256", mod, s->head_dim);
    int rc = kvq_check_shape(s, KVC_CUDA_TYPES, mod, err, errlen);
    if (rc) return rc;
    int max = cuatt_max_positions(s->head_dim);
    if (s->max_pos > max)
        return bench_errf(err, errlen, "%s: a context of %d positions: the CUDA attention holds at most %d on this GPU (lower --ctx)",
                          mod, s->max_pos, max);
    k->shape = *s;
    k->stream = host->stream;
    size_t bytes = cuatt_work_bytes(s->n_heads, s->head_dim, s->max_pos);
    cudaError_t e = cudaMalloc((void **)&k->work, bytes);
    if (e != cudaSuccess) {
        k->work = NULL;
        return cu_fail(err, errlen, mod, e);
    }
    return 0;
}

void kvcc_close(kvcc *k) {
    if (k->work) cudaFree(k->work);
    k->work = NULL;
}

/* One layer's rows in the contiguous layout (kvc_cuda.h). */
static cuatt_rows kvcc_rows(const bench_kv_shape *s, const void *mem, int layer) {
    const size_t kr = kvcc_k_row(s), vr = kvcc_v_row(s), pos = kvcc_pos_bytes(s);
    unsigned char *m = (unsigned char *)(uintptr_t)mem;
    return (cuatt_rows){.kb = m + (size_t)layer * kr, .vb = m + (size_t)s->n_layers * kr + (size_t)layer * vr,
                        .k_stride = pos, .v_stride = pos, .k_type = s->k_type, .v_type = s->v_type};
}

void kvcc_store(const kvcc *k, void *mem, int layer, int pos0, int n, const float *key, const float *v) {
    const bench_kv_shape *s = &k->shape;
    cuatt_rows r = kvcc_rows(s, mem, layer);
    cuatt_store(k->stream, &r, NULL, 1, pos0, n, s->n_kv_heads * s->head_dim, key, v);
}

void kvcc_attend(const kvcc *k, const void *mem, int layer, int pos0, int n, const float *q, float *out) {
    const bench_kv_shape *s = &k->shape;
    cuatt_rows r = kvcc_rows(s, mem, layer);
    cuatt_attend(k->stream, &r, NULL, 1, pos0, n, s->n_heads, s->n_kv_heads, s->head_dim, q, out, k->work);
}
