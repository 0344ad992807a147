#include "kvc_cuda.h"

#include "engines/cuda/attn.h"
#include "engines/cuda/cu_util.h"

int kvcc_check(const bench_kv_shape *s, const bench_host *host, const char *mod, char *err, size_t errlen) {
    if (!cu_probe(err, errlen)) return -1;
    if (!host || !host->stream)
        return bench_errf(err, errlen, "%s: built for CUDA: run it with the cuda device (--device cuda)", mod);
    int max = cuatt_max_positions(s->head_dim);
    if (s->max_pos > max)
        return bench_errf(err, errlen, "%s: a context of %d positions: the CUDA attention holds at most %d on this GPU (lower --ctx)",
                          mod, s->max_pos, max);
    return 0;
}

void kvcc_store(const bench_kv_shape *s, void *stream, float *mem, int layer, int pos0, int n, const float *k,
                const float *v) {
    size_t kv_dim = (size_t)s->n_kv_heads * (size_t)s->head_dim, stride = 2u * (size_t)s->n_layers * kv_dim;
    cuatt_store(stream, mem + (size_t)layer * kv_dim, mem + ((size_t)s->n_layers + (size_t)layer) * kv_dim, stride, NULL, 1,
                pos0, n, (int)kv_dim, k, v);
}

void kvcc_attend(const bench_kv_shape *s, void *stream, const float *mem, int layer, int pos0, int n, const float *q,
                 float *out) {
    size_t kv_dim = (size_t)s->n_kv_heads * (size_t)s->head_dim, stride = 2u * (size_t)s->n_layers * kv_dim;
    cuatt_attend(stream, mem + (size_t)layer * kv_dim, mem + ((size_t)s->n_layers + (size_t)layer) * kv_dim, stride, NULL,
                 1, pos0, n, s->n_heads, s->n_kv_heads, s->head_dim, q, out);
}
