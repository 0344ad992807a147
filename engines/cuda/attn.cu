/* Attention over the CUDA KV layouts (attn.h). One block per (query head, query):
 * scores of every visible position into shared memory (a warp per position, its lanes
 * over the head dimension: one coalesced row read), softmax, then the weighted sum of
 * V rows (threads over the head dimension, split into groups over positions).
 * The arithmetic is transformer.c's: dot / sqrt(hd), exp(s - max), weights att/sum. */
#include <cuda_runtime.h>
#include <float.h>

#include "engines/cuda/attn.h"

#define ATT_THREADS 128

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ float att_block_reduce(float v, float *sh, bool is_max) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = threadIdx.x < nw ? sh[lane] : (is_max ? -FLT_MAX : 0.0f);
    if (wid == 0) v = is_max ? warp_max(v) : warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

__device__ __forceinline__ size_t row_of(const int *table, int bs, int p) {
    return table ? (size_t)table[p / bs] * (size_t)bs + (size_t)(p % bs) : (size_t)p;
}

__global__ void store_kernel(float *kb, float *vb, size_t stride, const int *table, int bs, int pos0, int n, int kv_dim,
                             const float *k, const float *v) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n * kv_dim) return;
    int i = (int)(idx / kv_dim), d = (int)(idx % kv_dim);
    size_t at = row_of(table, bs, pos0 + i) * stride + (size_t)d;
    kb[at] = k[idx];
    vb[at] = v[idx];
}

extern "C" int cuatt_store(void *stream, float *kb, float *vb, size_t stride, const int *table, int bs, int pos0, int n,
                           int kv_dim, const float *k, const float *v) {
    size_t total = (size_t)n * (size_t)kv_dim;
    if (!total) return 0;
    store_kernel<<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)stream>>>(kb, vb, stride, table, bs, pos0, n,
                                                                                   kv_dim, k, v);
    return (int)cudaGetLastError();
}

/* Shared memory: q (hd) | scores (pos0 + n) | partial outputs (groups * hd) | 32 for reductions. */
__global__ void attend_kernel(const float *kb, const float *vb, size_t stride, const int *table, int bs, int pos0,
                              int n_heads, int group, int hd, int groups, const float *q, float *out) {
    extern __shared__ float sm[];
    int h = blockIdx.x, i = blockIdx.y, pos = pos0 + i, n_pos = pos0 + gridDim.y;
    float *qs = sm, *att = qs + hd, *part = att + n_pos, *red = part + (size_t)groups * hd;
    size_t q_dim = (size_t)n_heads * hd, head = (size_t)(h / group) * hd;
    const float *qh = q + (size_t)i * q_dim + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = qh[d];
    __syncthreads();

    float sqrt_hd = sqrtf((float)hd);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int t = wid; t <= pos; t += nw) {
        const float *kr = kb + row_of(table, bs, t) * stride + head;
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += qs[d] * kr[d];
        dot = warp_sum(dot);
        if (lane == 0) att[t] = dot / sqrt_hd; /* divide, as the reference does */
    }
    __syncthreads();
    float mx = -FLT_MAX;
    for (int t = threadIdx.x; t <= pos; t += blockDim.x) mx = fmaxf(mx, att[t]);
    mx = att_block_reduce(mx, red, true);
    float sum = 0.0f;
    for (int t = threadIdx.x; t <= pos; t += blockDim.x) {
        float e = expf(att[t] - mx);
        att[t] = e;
        sum += e;
    }
    sum = att_block_reduce(sum, red, false);

    /* groups of hd threads each take every groups-th position; with hd > blockDim, one
     * group and each thread several dimensions */
    int g = groups > 1 ? (int)threadIdx.x / hd : 0;
    for (int d = groups > 1 ? (int)threadIdx.x % hd : (int)threadIdx.x; d < hd && g < groups;
         d += groups > 1 ? hd : (int)blockDim.x) {
        float o = 0.0f;
        for (int t = g; t <= pos; t += groups) o += att[t] / sum * vb[row_of(table, bs, t) * stride + head + d];
        part[(size_t)g * hd + d] = o;
    }
    __syncthreads();
    float *oh = out + (size_t)i * q_dim + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int gg = 0; gg < groups; gg++) o += part[(size_t)gg * hd + d];
        oh[d] = o;
    }
}

static int att_groups(int hd) { return hd <= ATT_THREADS && ATT_THREADS % hd == 0 ? ATT_THREADS / hd : 1; }

static size_t att_smem(int hd, int n_pos) {
    return ((size_t)hd + (size_t)n_pos + (size_t)att_groups(hd) * hd + 32) * sizeof(float);
}

/* The kernel may take the device's whole opt-in shared memory; asked once per process
 * (every module that links this file asks for its own copy of the kernel). */
static int att_limit(void) {
    static int limit = -1;
    if (limit < 0) {
        int dev = 0, optin = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            return 0;
        if (cudaFuncSetAttribute(attend_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin) != cudaSuccess) {
            cudaGetLastError(); /* not an error of the pass: the default limit then */
            optin = 48 * 1024;
        }
        limit = optin;
    }
    return limit;
}

extern "C" int cuatt_max_positions(int hd) {
    int limit = att_limit();
    size_t fixed = att_smem(hd, 0);
    return limit <= 0 || (size_t)limit <= fixed ? 0 : (int)(((size_t)limit - fixed) / sizeof(float));
}

extern "C" int cuatt_attend(void *stream, const float *kb, const float *vb, size_t stride, const int *table, int bs,
                            int pos0, int n, int n_heads, int n_kv_heads, int hd, const float *q, float *out) {
    if (n < 1) return 0;
    if (att_limit() <= 0) return (int)cudaGetLastError();
    dim3 grid((unsigned)n_heads, (unsigned)n);
    attend_kernel<<<grid, ATT_THREADS, att_smem(hd, pos0 + n), (cudaStream_t)stream>>>(
        kb, vb, stride, table, bs, pos0, n_heads, n_heads / n_kv_heads, hd, att_groups(hd), q, out);
    return (int)cudaGetLastError();
}
