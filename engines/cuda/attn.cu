/* Attention over the CUDA KV layouts (attn.h).
 *
 * Decode (a few queries) is latency-bound: one block per head would walk hundreds of
 * positions one dependent load after another on a handful of SMs. So a pass of at most
 * ATT_SPLIT_MAX_N queries splits each query's positions into chunks (att_chunk), one
 * block per (head, chunk, query), each writing its partial max, sum and weighted V row
 * to the work area; a second kernel merges the chunks (flash-decoding's split-K).
 * Longer passes (prefill) have a block per (head, query) already: each keeps its scores
 * in shared memory. Both score a position with a group of lanes reading its K row 16
 * bytes at a time, and sum V with threads over the head dimension.
 *
 * The arithmetic is transformer.c's where it can be: dot / sqrt(hd), exp(s - max); the
 * split merges exp-rescaled partial sums, so its rounding differs from the one-block
 * kernel's. Which kernel runs depends only on n and the positions, never on the layout:
 * every KV module gives the same bits.
 *
 * Rows are stored in the cache's type (f32, f16, bf16, q8_0, q4_0; K and V may differ): the
 * stores quantise with the CPU's own functions (blockquant.h, compiled for the device), so a
 * row holds the bits the CPU's cache would, and the attention reads each element as d * q
 * or its 16-bit value widened, exactly, in f32. Only f32 K takes the 16-byte loads. */
#include <cuda_runtime.h>
#include <float.h>

#include "engines/abi/blockquant.h"
#include "engines/cuda/attn.h"

#define ATT_THREADS 128
#define ATT_CHUNK 32        /* positions per block in the split kernel, at the least */
#define ATT_CHUNK_MAX 1024  /* ... and at the most */
#define ATT_BLOCKS_PER_SM 8 /* the split's chunk doubles until its blocks are about this many a multiprocessor */
#define ATT_SPLIT_MAX_N 4   /* passes of at most this many queries take the split */

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

/* Element e of a row stored in type t (kv.h's types), exactly as f32. */
__device__ __forceinline__ float kv_elem(const unsigned char *row, int t, int e) {
    switch (t) {
    case BENCH_F16: return bench_f16_to_f32(((const uint16_t *)row)[e]);
    case BENCH_BF16: return bench_bf16_to_f32(((const uint16_t *)row)[e]);
    case BENCH_Q8_0: {
        const unsigned char *b = row + (size_t)(e / BENCH_Q8_0_BLOCK) * sizeof(bench_block_q8_0);
        return bench_f16_to_f32((uint16_t)(b[0] | b[1] << 8)) * (float)(signed char)b[2 + e % BENCH_Q8_0_BLOCK];
    }
    case BENCH_Q4_0: {
        const unsigned char *b = row + (size_t)(e / BENCH_QK) * sizeof(bench_block_q4_0);
        int j = e % BENCH_QK, byte = b[2 + j % 16], q = j < 16 ? byte & 15 : byte >> 4;
        return bench_f16_to_f32((uint16_t)(b[0] | b[1] << 8)) * (float)(q - 8);
    }
    default: return ((const float *)row)[e];
    }
}

/* Bytes before element e of a row of type t (e a whole number of t's blocks). */
__device__ __forceinline__ size_t kv_off(int t, size_t e) {
    return e / bench_dtype_block_elems((bench_dtype)t) * bench_dtype_block_bytes((bench_dtype)t);
}

/* ---- stores ---- */

/* One item per element of a 16- or 32-bit type, or per block of a block type, of the
 * (n, kv_dim) rows of one of K and V. */
__global__ void store_kernel(unsigned char *base, size_t stride, int t, const int *table, int bs, int pos0, int n,
                             int kv_dim, const float *src) {
    int be = (int)bench_dtype_block_elems((bench_dtype)t), per = kv_dim / be;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n * per) return;
    int i = (int)(idx / per), j = (int)(idx % per);
    unsigned char *row = base + row_of(table, bs, pos0 + i) * stride;
    const float *x = src + (size_t)i * kv_dim + (size_t)j * be;
    switch (t) {
    case BENCH_F16: ((uint16_t *)row)[j] = bench_f32_to_f16(*x); break;
    case BENCH_BF16: ((uint16_t *)row)[j] = bench_f32_to_bf16(*x); break;
    case BENCH_Q8_0: {
        bench_block_q8_0 b;
        bench_quant_block_q8_0(x, &b);
        memcpy(row + (size_t)j * sizeof b, &b, sizeof b); /* 34-byte blocks: 2-byte aligned only */
        break;
    }
    case BENCH_Q4_0: {
        bench_block_q4_0 b;
        bench_quant_block_q4_0(x, &b);
        memcpy(row + (size_t)j * sizeof b, &b, sizeof b);
        break;
    }
    default: ((float *)row)[j] = *x; break;
    }
}

static int att_store_one(cudaStream_t s, void *base, size_t stride, int t, const int *table, int bs, int pos0, int n,
                         int kv_dim, const float *src) {
    size_t items = (size_t)n * (size_t)(kv_dim / (int)bench_dtype_block_elems((bench_dtype)t));
    store_kernel<<<(unsigned)((items + 255) / 256), 256, 0, s>>>((unsigned char *)base, stride, t, table, bs, pos0, n,
                                                                 kv_dim, src);
    return (int)cudaGetLastError();
}

extern "C" int cuatt_store(void *stream, const cuatt_rows *kv, const int *table, int bs, int pos0, int n, int kv_dim,
                           const float *k, const float *v) {
    if (!n || !kv_dim) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    int e = att_store_one(s, kv->kb, kv->k_stride, kv->k_type, table, bs, pos0, n, kv_dim, k);
    return e ? e : att_store_one(s, kv->vb, kv->v_stride, kv->v_type, table, bs, pos0, n, kv_dim, v);
}

/* ---- the pieces both kernels share ---- */

/* Scores of positions [t0, t1) into att[t - t0]: a group of lanes per position, summed
 * within the group; an f32 K row 16 bytes a lane at a time (vec: hd % 4 == 0 and a stride
 * of whole 16 bytes, which keeps rows 16-byte aligned in every layout), any other type an
 * element a lane at a time. head: the KV head's first element in the row. */
__device__ void score_range(const float *qs, const cuatt_rows *kv, const int *table, int bs, size_t head, int hd, int t0,
                            int t1, float *att) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    float sqrt_hd = sqrtf((float)hd);
    bool vec = kv->k_type == BENCH_F32 && hd % 4 == 0 && kv->k_stride % 16 == 0;
    int L = 32;
    if (vec) {
        L = 1;
        while (L < 32 && L * 4 < hd) L <<= 1;
    }
    int per_warp = 32 / L, sub = lane / L, li = lane % L;
    const unsigned char *kb = (const unsigned char *)kv->kb;
    for (int base = t0 + wid * per_warp; base < t1; base += nw * per_warp) {
        int t = base + sub;
        float dot = 0.0f;
        if (t < t1) {
            const unsigned char *kr = kb + row_of(table, bs, t) * kv->k_stride + kv_off(kv->k_type, head);
            if (vec) {
                const float4 *k4 = (const float4 *)kr, *q4 = (const float4 *)qs;
                for (int j = li; j < hd / 4; j += L) {
                    float4 a = k4[j], b = q4[j];
                    dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
                }
            } else {
                for (int d = li; d < hd; d += L) dot += qs[d] * kv_elem(kr, kv->k_type, d);
            }
        }
        for (int o = L / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (li == 0 && t < t1) att[t - t0] = dot / sqrt_hd; /* divide, as the reference does */
    }
}

/* part[g * hd + d] = sum over t in [t0, t1), t = t0 + g (mod groups), of w[t - t0] / div * V[t][d]
 * (a division, as the reference divides): groups of hd threads take every groups-th
 * position (one group, several dimensions a thread, when hd > blockDim). */
__device__ void weigh_v(const float *w, float div, const cuatt_rows *kv, const int *table, int bs, size_t head, int hd,
                        int groups, int t0, int t1, float *part) {
    const unsigned char *vb = (const unsigned char *)kv->vb;
    size_t hoff = kv_off(kv->v_type, head);
    int g = groups > 1 ? (int)threadIdx.x / hd : 0;
    for (int d = groups > 1 ? (int)threadIdx.x % hd : (int)threadIdx.x; d < hd && g < groups;
         d += groups > 1 ? hd : (int)blockDim.x) {
        float o = 0.0f;
#pragma unroll 4
        for (int t = t0 + g; t < t1; t += groups)
            o += w[t - t0] / div * kv_elem(vb + row_of(table, bs, t) * kv->v_stride + hoff, kv->v_type, d);
        part[(size_t)g * hd + d] = o;
    }
}

/* ---- one block per (head, query): prefill ---- */

/* Shared memory: q (hd) | scores (pos0 + n) | partial outputs (groups * hd) | 32 for reductions. */
__global__ void attend_kernel(cuatt_rows kv, const int *table, int bs, int pos0, int n_heads, int group, int hd, int groups,
                              const float *q, float *out) {
    extern __shared__ __align__(16) float sm[];
    int h = blockIdx.x, i = blockIdx.y, pos = pos0 + i, n_pos = pos0 + gridDim.y;
    float *qs = sm, *att = qs + hd, *part = att + n_pos, *red = part + (size_t)groups * hd;
    size_t q_dim = (size_t)n_heads * hd, head = (size_t)(h / group) * hd;
    const float *qh = q + (size_t)i * q_dim + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = qh[d];
    __syncthreads();
    score_range(qs, &kv, table, bs, head, hd, 0, pos + 1, att);
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
    weigh_v(att, sum, &kv, table, bs, head, hd, groups, 0, pos + 1, part);
    __syncthreads();
    float *oh = out + (size_t)i * q_dim + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int gg = 0; gg < groups; gg++) o += part[(size_t)gg * hd + d];
        oh[d] = o;
    }
}

/* ---- split: one block per (head, chunk, query), then the merge: decode ---- */

/* Work layout: (n, n_heads, chunks, hd + 2): max, sum of exp, then sum of exp * V. */
__global__ void attend_split_kernel(cuatt_rows kv, const int *table, int bs, int pos0, int n_heads, int group, int hd,
                                    int groups, int chunk, const float *q, float *work) {
    __shared__ __align__(16) float qs[256];
    __shared__ float red[32];
    extern __shared__ float part[];    /* (groups, hd), then the chunk's scores */
    float *att = part + (size_t)groups * hd;
    int h = blockIdx.x, s = blockIdx.y, i = blockIdx.z, pos = pos0 + i, chunks = gridDim.y;
    int t0 = s * chunk, t1 = min(t0 + chunk, pos + 1);
    float *w = work + (((size_t)i * n_heads + h) * chunks + s) * (size_t)(hd + 2);
    if (t0 >= t1) { /* past this query's position: an empty chunk */
        if (threadIdx.x == 0) { w[0] = -FLT_MAX; w[1] = 0.0f; }
        return;
    }
    size_t q_dim = (size_t)n_heads * hd, head = (size_t)(h / group) * hd;
    const float *qh = q + (size_t)i * q_dim + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = qh[d];
    __syncthreads();
    score_range(qs, &kv, table, bs, head, hd, t0, t1, att);
    __syncthreads();
    float mx = -FLT_MAX;
    for (int t = threadIdx.x; t < t1 - t0; t += blockDim.x) mx = fmaxf(mx, att[t]);
    mx = att_block_reduce(mx, red, true);
    float sum = 0.0f;
    for (int t = threadIdx.x; t < t1 - t0; t += blockDim.x) {
        float e = expf(att[t] - mx);
        att[t] = e;
        sum += e;
    }
    sum = att_block_reduce(sum, red, false);
    weigh_v(att, 1.0f, &kv, table, bs, head, hd, groups, t0, t1, part);
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int gg = 0; gg < groups; gg++) o += part[(size_t)gg * hd + d];
        w[2 + d] = o;
    }
    if (threadIdx.x == 0) { w[0] = mx; w[1] = sum; }
}

/* out = sum_s exp(m_s - M) o_s / sum_s exp(m_s - M) l_s over the query's chunks. */
__global__ void attend_merge_kernel(const float *work, int n_heads, int hd, int chunks, int chunk, int pos0, float *out) {
    int h = blockIdx.x, i = blockIdx.y, used = (pos0 + i) / chunk + 1;
    const float *w = work + ((size_t)i * n_heads + h) * chunks * (size_t)(hd + 2);
    float M = -FLT_MAX, L = 0.0f;
    for (int s = 0; s < used; s++) M = fmaxf(M, w[(size_t)s * (hd + 2)]);
    for (int s = 0; s < used; s++) L += w[(size_t)s * (hd + 2) + 1] * expf(w[(size_t)s * (hd + 2)] - M);
    float *oh = out + ((size_t)i * n_heads + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < used; s++) o += w[(size_t)s * (hd + 2) + 2 + d] * expf(w[(size_t)s * (hd + 2)] - M);
        oh[d] = o / L;
    }
}

/* ---- launchers ---- */

static int att_groups(int hd) { return hd <= ATT_THREADS && ATT_THREADS % hd == 0 ? ATT_THREADS / hd : 1; }

static size_t att_smem(int hd, int n_pos) {
    return ((size_t)hd + (size_t)n_pos + (size_t)att_groups(hd) * hd + 32) * sizeof(float);
}

/* The one-block kernel may take the device's whole opt-in shared memory; asked once per
 * process (every module that links this file asks for its own copy of the kernel). */
static int att_limit(void) {
    static int limit = -1;
    if (limit < 0) {
        int dev = 0, optin = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
            cudaGetLastError();
            return 0;
        }
        if (cudaFuncSetAttribute(attend_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin) != cudaSuccess) {
            cudaGetLastError(); /* not an error of the pass: the default limit then */
            optin = 48 * 1024;
        }
        limit = optin;
    }
    return limit;
}

/* Multiprocessors of the current device, asked once per process (0 if it cannot say). */
static int att_sms(void) {
    static int sms = -1;
    if (sms < 0) {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
            cudaGetLastError();
            n = 0;
        }
        sms = n;
    }
    return sms;
}

/* Positions per block of the split: at short depths 32, so that a decode spreads over the
 * multiprocessors; at long ones more, doubling until the blocks are about ATT_BLOCKS_PER_SM
 * a multiprocessor, so that each does enough to pay for its reductions and the merge walks
 * few chunks (with 32 at 8192 positions a layer took 8192 blocks and a merge of 256 chunks
 * a head). It depends on n, the positions and the device only, never on the layout. */
static int att_chunk(int n_pos, int n_heads, int n) {
    long target = (long)ATT_BLOCKS_PER_SM * att_sms();
    int chunk = ATT_CHUNK;
    while (chunk < ATT_CHUNK_MAX && (long)((n_pos + chunk - 1) / chunk) * n_heads * n > target) chunk *= 2;
    return chunk;
}

extern "C" int cuatt_max_positions(int hd) {
    if (hd < 1 || hd > 256) return 0; /* the split kernel keeps q in 256 floats */
    int limit = att_limit();
    size_t fixed = att_smem(hd, 0);
    return limit <= 0 || (size_t)limit <= fixed ? 0 : (int)(((size_t)limit - fixed) / sizeof(float));
}

extern "C" size_t cuatt_work_bytes(int n_heads, int hd, int max_pos) {
    size_t chunks = ((size_t)max_pos + ATT_CHUNK - 1) / ATT_CHUNK;
    return (size_t)ATT_SPLIT_MAX_N * (size_t)n_heads * chunks * (size_t)(hd + 2) * sizeof(float);
}

extern "C" int cuatt_attend(void *stream, const cuatt_rows *kv, const int *table, int bs, int pos0, int n, int n_heads,
                            int n_kv_heads, int hd, const float *q, float *out, float *work) {
    if (n < 1) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    int group = n_heads / n_kv_heads, groups = att_groups(hd), n_pos = pos0 + n;
    if (work && n <= ATT_SPLIT_MAX_N && n_pos > ATT_CHUNK) {
        int chunk = att_chunk(n_pos, n_heads, n), chunks = (n_pos + chunk - 1) / chunk;
        attend_split_kernel<<<dim3((unsigned)n_heads, (unsigned)chunks, (unsigned)n), ATT_THREADS,
                              ((size_t)groups * hd + (size_t)chunk) * sizeof(float), s>>>(*kv, table, bs, pos0, n_heads,
                                                                                          group, hd, groups, chunk, q, work);
        attend_merge_kernel<<<dim3((unsigned)n_heads, (unsigned)n), hd < 32 ? 32 : (hd > 256 ? 256 : hd), 0, s>>>(
            work, n_heads, hd, chunks, chunk, pos0, out);
        return (int)cudaGetLastError();
    }
    if (att_limit() <= 0) return (int)cudaGetLastError();
    attend_kernel<<<dim3((unsigned)n_heads, (unsigned)n), ATT_THREADS, att_smem(hd, n_pos), s>>>(
        *kv, table, bs, pos0, n_heads, group, hd, groups, q, out);
    return (int)cudaGetLastError();
}
