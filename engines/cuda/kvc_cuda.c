#include "kvc_cuda.h"

#include "engines/cuda/attn.h"
#include "engines/cuda/cu_util.h"

int kvcc_open(kvcc *k, const bench_kv_shape *s, const bench_host *host, const char *mod, char *err, size_t errlen) {
    memset(k, 0, sizeof(*k));
    if (!cu_probe(err, errlen)) return -1;
    if (!host || !host->stream)
        return bench_errf(err, errlen, "%s: built for CUDA: run it with the cuda device (--device cuda)", mod);
    if (s->head_dim < 1 || s->head_dim > 256)
        return bench_errf(err, errlen, "%s: head dimension %d: the CUDA attention takes 1..256", mod, s->head_dim);
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

void kvcc_store(const kvcc *k, float *mem, int layer, int pos0, int n, const float *key, const float *v) {
    const bench_kv_shape *s = &k->shape;
    size_t kv_dim = (size_t)s->n_kv_heads * (size_t)s->head_dim, stride = 2u * (size_t)s->n_layers * kv_dim;
    cuatt_store(k->stream, mem + (size_t)layer * kv_dim, mem + ((size_t)s->n_layers + (size_t)layer) * kv_dim, stride,
                NULL, 1, pos0, n, (int)kv_dim, key, v);
}

void kvcc_attend(const kvcc *k, const float *mem, int layer, int pos0, int n, const float *q, float *out) {
    const bench_kv_shape *s = &k->shape;
    size_t kv_dim = (size_t)s->n_kv_heads * (size_t)s->head_dim, stride = 2u * (size_t)s->n_layers * kv_dim;
    cuatt_attend(k->stream, mem + (size_t)layer * kv_dim, mem + ((size_t)s->n_layers + (size_t)layer) * kv_dim, stride,
                 NULL, 1, pos0, n, s->n_heads, s->n_kv_heads, s->head_dim, q, out, k->work);
}
