/* The forward pass's own kernels: embedding lookup, RMSNorm, RoPE, SwiGLU, 16-bit
 * conversion, decode GEMV, argmax and top-p sampling, and the triad bandwidth probe.
 * Prefill's matrix products go to cuBLAS (device_cuda.c). Launchers: kernels.h.
 *
 * Numerics follow engines/core/compute/transformer.c where it matters for greedy ids: f32
 * everywhere, the same formulas (1/sqrt(ss/dim + eps), theta^(-i/hd), x/(1+exp(-x))),
 * no fast-math intrinsics; only the order of the sums differs (tree reductions).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>

#include "engines/cuda/kernels.h"
#include "engines/cuda/host/topp.h"

/* ---- element access in each dtype ---- */

__device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }

__device__ __forceinline__ float ld_dt(const void *p, bench_dtype dt, size_t i) {
    switch (dt) {
    case BENCH_F16: return ld((const __half *)p, i);
    case BENCH_BF16: return ld((const __nv_bfloat16 *)p, i);
    default: return ld((const float *)p, i);
    }
}

__device__ __forceinline__ void st16(void *p, bench_dtype dt, size_t i, float v) {
    if (dt == BENCH_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
    else ((__half *)p)[i] = __float2half(v);
}

/* ---- block-quantised weights (engines/abi/dtype.h has the layouts; engines/core/compute/
 * quant.c the CPU's exact dequantisers, which these follow value for value: the same f32
 * products in the same order, so each weight is the same f32 number on both sides) ---- */

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* Q4_K/Q5_K: scale and min j (0..7) of the 12 packed bytes. */
__device__ __forceinline__ void q_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
        *mn = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

/* Element e (< the type's block size) of the block at p, as f32. The f16 fields are
 * read a byte pair at a time: blocks are only 2-byte aligned. __fmul_rn where a product
 * is followed by an add keeps nvcc from fusing them into one FMA, which would round
 * once where the CPU (and gguf-py) round twice. */
__device__ float q_elem(const uint8_t *p, bench_dtype dt, int e) {
#define F16_AT(off) h2f((uint16_t)(p[off] | p[(off) + 1] << 8))
    switch (dt) {
    case BENCH_Q8_0: return F16_AT(0) * (float)(int8_t)p[2 + e];
    case BENCH_Q4_0: {
        int q = e < 16 ? p[2 + e] & 15 : p[2 + e - 16] >> 4;
        return F16_AT(0) * (float)(q - 8);
    }
    case BENCH_Q4_1: {
        int q = e < 16 ? p[4 + e] & 15 : p[4 + e - 16] >> 4;
        return __fmul_rn(F16_AT(0), (float)q) + F16_AT(2);
    }
    case BENCH_Q5_0: case BENCH_Q5_1: {
        int base = dt == BENCH_Q5_0 ? 2 : 4;
        uint32_t qh = (uint32_t)p[base] | (uint32_t)p[base + 1] << 8 | (uint32_t)p[base + 2] << 16 | (uint32_t)p[base + 3] << 24;
        const uint8_t *qs = p + base + 4;
        int q = (e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | (int)((qh >> e) & 1) << 4;
        return dt == BENCH_Q5_0 ? F16_AT(0) * (float)(q - 16) : __fmul_rn(F16_AT(0), (float)q) + F16_AT(2);
    }
    case BENCH_Q2_K: {
        int h = e / 128, j = (e % 128) / 32, i = e % 32, g = e / 16;
        int q = (p[16 + 32 * h + i] >> (2 * j)) & 3;
        float dl = F16_AT(80) * (float)(p[g] & 15), ml = F16_AT(82) * (float)(p[g] >> 4);
        return __fmul_rn(dl, (float)q) - ml;
    }
    case BENCH_Q3_K: {
        int h = e / 128, j = (e % 128) / 32, i = e % 32, g = e / 16;
        const uint8_t *sc = p + 96;
        int low = g < 8 ? sc[g] & 15 : sc[g - 8] >> 4, high = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
        int q = ((p[32 + 32 * h + i] >> (2 * j)) & 3) - ((p[i] >> (4 * h + j)) & 1 ? 0 : 4);
        return F16_AT(108) * (float)((low | high << 4) - 32) * (float)q;
    }
    case BENCH_Q4_K: case BENCH_Q5_K: {
        int g = e / 32, l = e % 32, sc, mn;
        q_scale_min(g, p + 4, &sc, &mn);
        const uint8_t *qs = p + (dt == BENCH_Q4_K ? 16 : 48) + 32 * (e / 64);
        int q = g % 2 ? qs[l] >> 4 : qs[l] & 15;
        if (dt == BENCH_Q5_K) q += (p[16 + l] >> g) & 1 ? 16 : 0;
        return __fmul_rn(F16_AT(0) * (float)sc, (float)q) - __fmul_rn(F16_AT(2), (float)mn);
    }
    case BENCH_Q6_K: {
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        int lo = p[64 * h + l + (k % 2) * 32];
        lo = k < 2 ? lo & 15 : lo >> 4;
        int q = (lo | ((p[128 + 32 * h + l] >> (2 * k)) & 3) << 4) - 32;
        return F16_AT(208) * (float)(int8_t)p[192 + e / 16] * (float)q;
    }
    default: return 0.0f;
    }
#undef F16_AT
}

__device__ __forceinline__ size_t q_block_elems(bench_dtype dt) { return dt >= BENCH_Q2_K && dt <= BENCH_Q6_K ? 256 : 32; }

__device__ __forceinline__ size_t q_block_bytes(bench_dtype dt) {
    switch (dt) {
    case BENCH_Q8_0: return 34;
    case BENCH_Q4_0: return 18;
    case BENCH_Q4_1: return 20;
    case BENCH_Q5_0: return 22;
    case BENCH_Q5_1: return 24;
    case BENCH_Q2_K: return 84;
    case BENCH_Q3_K: return 110;
    case BENCH_Q4_K: return 144;
    case BENCH_Q5_K: return 176;
    default: return 210; /* Q6_K */
    }
}

/* Element c of a row of a block-quantised matrix. */
__device__ __forceinline__ float q_row_elem(const uint8_t *row, bench_dtype dt, int c) {
    size_t be = q_block_elems(dt);
    return q_elem(row + (size_t)c / be * q_block_bytes(dt), dt, (int)((size_t)c % be));
}

/* ---- reductions ---- */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Every thread of the block gets the sum; sh holds 32 floats. The block size is a
 * multiple of 32. The order of the adds depends only on the block size. */
__device__ float block_sum(float v, float *sh) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = threadIdx.x < nw ? sh[lane] : 0.0f;
    if (wid == 0) v = warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

__device__ float block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = threadIdx.x < nw ? sh[lane] : -FLT_MAX;
    if (wid == 0) v = warp_max(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

/* The first index of the maximum over the block: (value, index) pairs, larger value
 * first, then smaller index. NaN never wins, as in sampler.c's `x[i] > x[best]`. */
__device__ __forceinline__ void better(float &v, int &i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
}

__device__ int block_argmax(float v, int i, float *shv, int *shi) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    if (lane == 0) { shv[wid] = v; shi[wid] = i; }
    __syncthreads();
    if (wid == 0) {
        v = lane < nw ? shv[lane] : -INFINITY;
        i = lane < nw ? shi[lane] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
        if (lane == 0) shi[0] = i;
    }
    __syncthreads();
    int r = shi[0];
    __syncthreads();
    return r;
}

static int launched(void) { return (int)cudaGetLastError(); }

/* ---- embedding, norm, rope, swiglu, conversion ---- */

__global__ void embed_kernel(const void *table, bench_dtype dt, const int *tokens, int dim, float *x) {
    size_t row = (size_t)tokens[blockIdx.x] * (size_t)dim;
    float *out = x + (size_t)blockIdx.x * dim;
    if (dt >= BENCH_Q8_0) { /* block-quantised */
        const uint8_t *r = (const uint8_t *)table + row / q_block_elems(dt) * q_block_bytes(dt);
        for (int d = threadIdx.x; d < dim; d += blockDim.x) out[d] = q_row_elem(r, dt, d);
        return;
    }
    for (int d = threadIdx.x; d < dim; d += blockDim.x) out[d] = ld_dt(table, dt, row + (size_t)d);
}

extern "C" int cuk_embed(void *stream, const void *table, bench_dtype dt, const int *tokens, int n, int dim, float *x) {
    embed_kernel<<<n, 256, 0, (cudaStream_t)stream>>>(table, dt, tokens, dim, x);
    return launched();
}

__global__ void rmsnorm_kernel(const float *x, const float *w, int dim, float eps, float *out, void *out16,
                               bench_dtype dt16) {
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int d = threadIdx.x; d < dim; d += blockDim.x) ss += xr[d] * xr[d];
    ss = block_sum(ss, sh);
    float scale = 1.0f / sqrtf(ss / (float)dim + eps);
    size_t base = (size_t)blockIdx.x * dim;
    for (int d = threadIdx.x; d < dim; d += blockDim.x) {
        float o = w[d] * (scale * xr[d]);
        out[base + d] = o;
        if (out16) st16(out16, dt16, base + d, o);
    }
}

extern "C" int cuk_rmsnorm(void *stream, const float *x, const float *w, int n, int dim, float eps, float *out,
                           void *out16, bench_dtype dt16) {
    rmsnorm_kernel<<<n, 256, 0, (cudaStream_t)stream>>>(x, w, dim, eps, out, out16, dt16);
    return launched();
}

/* One thread per rotated pair; q's heads first, then k's. */
__global__ void rope_kernel(float *q, float *k, int n, int n_heads, int n_kv_heads, int hd, int pos0, float theta,
                            int half) {
    int pairs = hd / 2, per_row = (n_heads + n_kv_heads) * pairs;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n * per_row) return;
    int i = (int)(idx / per_row), r = (int)(idx % per_row), head = r / pairs, j = r % pairs;
    float *v = head < n_heads ? q + ((size_t)i * n_heads + head) * hd : k + ((size_t)i * n_kv_heads + head - n_heads) * hd;
    int e = 2 * j; /* transformer.c's loop variable */
    float freq = 1.0f / powf(theta, (float)e / (float)hd);
    float val = (float)(pos0 + i) * freq;
    float fcr = cosf(val), fci = sinf(val);
    int a = half ? j : e, b = half ? j + hd / 2 : e + 1;
    float v0 = v[a], v1 = v[b];
    v[a] = v0 * fcr - v1 * fci;
    v[b] = v0 * fci + v1 * fcr;
}

extern "C" int cuk_rope(void *stream, float *q, float *k, int n, int n_heads, int n_kv_heads, int hd, int pos0,
                        float theta, int half) {
    size_t total = (size_t)n * (size_t)(n_heads + n_kv_heads) * (size_t)(hd / 2);
    if (total == 0) return 0;
    rope_kernel<<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)stream>>>(q, k, n, n_heads, n_kv_heads, hd, pos0,
                                                                                  theta, half);
    return launched();
}

__global__ void swiglu_kernel(const float *g, const float *u, size_t count, float *out, void *out16, bench_dtype dt16) {
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < count; j += (size_t)gridDim.x * blockDim.x) {
        float val = g[j];
        val *= 1.0f / (1.0f + expf(-val));
        val *= u[j];
        out[j] = val;
        if (out16) st16(out16, dt16, j, val);
    }
}

static unsigned grid_for(size_t count) {
    size_t blocks = (count + 255) / 256;
    return (unsigned)(blocks > 65535 ? 65535 : blocks ? blocks : 1);
}

extern "C" int cuk_swiglu(void *stream, const float *g, const float *u, size_t count, float *out, void *out16,
                          bench_dtype dt16) {
    swiglu_kernel<<<grid_for(count), 256, 0, (cudaStream_t)stream>>>(g, u, count, out, out16, dt16);
    return launched();
}

__global__ void to16_kernel(const float *x, size_t count, void *out16, bench_dtype dt16) {
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < count; j += (size_t)gridDim.x * blockDim.x)
        st16(out16, dt16, j, x[j]);
}

extern "C" int cuk_to16(void *stream, const float *x, size_t count, void *out16, bench_dtype dt16) {
    to16_kernel<<<grid_for(count), 256, 0, (cudaStream_t)stream>>>(x, count, out16, dt16);
    return launched();
}

/* ---- decode GEMV ---- */

struct gemv_args {
    cuk_gemv_job job[3];
    int n_jobs, swiglu, cols;
    const float *x;
};

/* 16 bytes of weights times the matching x, added to acc. */
__device__ __forceinline__ float dot16(const float *w, const float *x) {
    float4 a = *(const float4 *)w, b = *(const float4 *)x;
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
__device__ __forceinline__ float dot16(const __half *w, const float *x) {
    uint4 raw = *(const uint4 *)w;
    const __half2 *h = (const __half2 *)&raw;
    float4 x0 = *(const float4 *)x, x1 = *(const float4 *)(x + 4);
    float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]), f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
    return f0.x * x0.x + f0.y * x0.y + f1.x * x0.z + f1.y * x0.w + f2.x * x1.x + f2.y * x1.y + f3.x * x1.z + f3.y * x1.w;
}
__device__ __forceinline__ float dot16(const __nv_bfloat16 *w, const float *x) {
    uint4 raw = *(const uint4 *)w;
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
    float4 x0 = *(const float4 *)x, x1 = *(const float4 *)(x + 4);
    float2 f0 = __bfloat1622float2(h[0]), f1 = __bfloat1622float2(h[1]), f2 = __bfloat1622float2(h[2]),
           f3 = __bfloat1622float2(h[3]);
    return f0.x * x0.x + f0.y * x0.y + f1.x * x0.z + f1.y * x0.w + f2.x * x1.x + f2.y * x1.y + f3.x * x1.z + f3.y * x1.w;
}

/* One lane's share of row . x; the warp sums the shares. VEC: 16-byte loads (the launcher
 * checked the alignment), four in flight per lane. */
template <typename T, bool VEC>
__device__ __forceinline__ float row_dot(const T *w, const float *x, int cols, int lane) {
    float acc = 0.0f;
    if (VEC) {
        const int per = 16 / (int)sizeof(T), vecs = cols / per;
#pragma unroll 4
        for (int e = lane; e < vecs; e += 32) acc += dot16(w + (size_t)e * per, x + (size_t)e * per);
    } else {
        for (int c = lane; c < cols; c += 32) acc += ld(w, (size_t)c) * x[c];
    }
    return warp_sum(acc);
}

/* The decode GEMV, whatever the rows' type: warp w computes one output, either silu(gate row
 * w . x) * (up row w . x) (swiglu: jobs 0 and 1 into job 0's y), or row w of the job it falls
 * in. dot(w, row, lane) is the warp's sum of row `row` of matrix w times x. */
template <typename Dot>
__device__ __forceinline__ void gemv_rows(const gemv_args &a, Dot dot) {
    int warp = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (a.swiglu) {
        if (warp >= a.job[0].rows) return;
        float g = dot(a.job[0].w, (size_t)warp, lane);
        float u = dot(a.job[1].w, (size_t)warp, lane);
        if (lane == 0) {
            g *= 1.0f / (1.0f + expf(-g));
            a.job[0].y[warp] = g * u;
        }
        return;
    }
    /* the job by branches, not by a run-time index into the parameters (which would copy
     * them to local memory) */
    int r = warp;
    cuk_gemv_job job = a.job[0];
    if (r >= a.job[0].rows) {
        r -= a.job[0].rows;
        job = a.job[1];
        if (a.n_jobs < 2) return;
        if (r >= a.job[1].rows) {
            r -= a.job[1].rows;
            job = a.job[2];
            if (a.n_jobs < 3 || r >= a.job[2].rows) return;
        }
    }
    float s = dot(job.w, (size_t)r, lane);
    if (lane == 0) {
        if (job.accumulate) job.y[r] += s;
        else job.y[r] = s;
    }
}

template <typename T, bool VEC>
__global__ void gemv_kernel(gemv_args a) {
    const float *x = a.x;
    const int cols = a.cols;
    gemv_rows(a, [=](const void *w, size_t row, int lane) {
        return row_dot<T, VEC>((const T *)w + row * cols, x, cols, lane);
    });
}

/* Block-quantised rows, dequantised on the fly one element per lane step: consecutive lanes
 * read consecutive elements, so a warp reads a block's bytes together. Each lane's sum is
 * f32 over exactly the CPU's weights; only the order of the adds differs. */
__device__ __forceinline__ float row_dot_q(const uint8_t *w, bench_dtype dt, const float *x, int cols, int lane) {
    float acc = 0.0f;
    for (int c = lane; c < cols; c += 32) acc += q_row_elem(w, dt, c) * x[c];
    return warp_sum(acc);
}

__global__ void gemv_q_kernel(gemv_args a, bench_dtype dt, size_t row_bytes) {
    const float *x = a.x;
    const int cols = a.cols;
    gemv_rows(a, [=](const void *w, size_t row, int lane) {
        return row_dot_q((const uint8_t *)w + row * row_bytes, dt, x, cols, lane);
    });
}

template <typename T>
static void gemv_launch(const gemv_args &a, int vec, unsigned blocks, cudaStream_t s) {
    if (vec) gemv_kernel<T, true><<<blocks, 256, 0, s>>>(a);
    else gemv_kernel<T, false><<<blocks, 256, 0, s>>>(a);
}

extern "C" int cuk_gemv(void *stream, const cuk_gemv_job *jobs, int n_jobs, int swiglu, bench_dtype dt, int cols,
                        const float *x) {
    if (n_jobs < 1 || n_jobs > 3 || (swiglu && (n_jobs != 2 || jobs[0].rows != jobs[1].rows))) return (int)cudaErrorInvalidValue;
    gemv_args a;
    a.n_jobs = n_jobs;
    a.swiglu = swiglu;
    a.cols = cols;
    a.x = x;
    size_t esize = dt == BENCH_F32 ? 4 : 2, rows = 0;
    int vec = (size_t)cols * esize % 16 == 0 && (uintptr_t)x % 16 == 0;
    for (int i = 0; i < n_jobs; i++) {
        a.job[i] = jobs[i];
        rows += swiglu && i ? 0 : (size_t)jobs[i].rows;
        if ((uintptr_t)jobs[i].w % 16) vec = 0;
    }
    for (int i = n_jobs; i < 3; i++) a.job[i] = cuk_gemv_job{};
    unsigned blocks = (unsigned)((rows + 7) / 8); /* 8 warps, one row each */
    if (!blocks) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    switch (dt) {
    case BENCH_F32: gemv_launch<float>(a, vec, blocks, s); break;
    case BENCH_F16: gemv_launch<__half>(a, vec, blocks, s); break;
    case BENCH_BF16: gemv_launch<__nv_bfloat16>(a, vec, blocks, s); break;
    default:
        if (!bench_dtype_is_quant(dt) || !bench_dtype_row_bytes(dt, cols)) return (int)cudaErrorInvalidValue;
        gemv_q_kernel<<<blocks, 256, 0, s>>>(a, dt, bench_dtype_row_bytes(dt, cols));
        break;
    }
    return launched();
}

/* ---- sampling ---- */

#define SAMPLE_THREADS 1024

__global__ void argmax_kernel(const float *x, int n, int *out) {
    __shared__ float shv[32];
    __shared__ int shi[32];
    float v = -INFINITY;
    int best = INT_MAX;
    for (int i = threadIdx.x; i < n; i += blockDim.x) better(v, best, x[i], i);
    best = block_argmax(v, best, shv, shi);
    if (threadIdx.x == 0) *out = best == INT_MAX ? 0 : best;
}

extern "C" int cuk_argmax(void *stream, const float *x, int n, int *out) {
    argmax_kernel<<<1, SAMPLE_THREADS, 0, (cudaStream_t)stream>>>(x, n, out);
    return launched();
}

__device__ __forceinline__ uint32_t level_of(float p) { return __float_as_uint(p); }

/* sum of the candidates' p (level >= lo) whose level is at least at */
__device__ float mass_ge(const float *p, int n, uint32_t lo, uint32_t at, float *sh) {
    uint32_t bound = at > lo ? at : lo;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (level_of(p[i]) >= bound) s += p[i];
    return block_sum(s, sh);
}

__device__ int count_eq(const float *p, int n, uint32_t l, float *sh) {
    float c = 0.0f; /* counts up to 2^24 are exact in a float */
    for (int i = threadIdx.x; i < n; i += blockDim.x) c += level_of(p[i]) == l ? 1.0f : 0.0f;
    return (int)block_sum(c, sh);
}

/* Each thread owns a contiguous range of the vocabulary; returns the first index i (in
 * index order) where pred(i) has been true `want` times, or n - 1. Uses scan[blockDim]. */
template <typename F>
__device__ int nth_true(int n, int want, F pred, int *scan) {
    int per = (n + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per, hi = min(n, lo + per);
    int c = 0;
    for (int i = lo; i < hi; i++) c += pred(i) ? 1 : 0;
    scan[threadIdx.x] = c;
    __syncthreads();
    if (threadIdx.x == 0) { /* exclusive prefix, one pass: 1024 adds */
        int run = 0;
        for (int t = 0; t < (int)blockDim.x; t++) { int v = scan[t]; scan[t] = run; run += v; }
    }
    __syncthreads();
    __shared__ int found;
    if (threadIdx.x == 0) found = n - 1;
    __syncthreads();
    int before = scan[threadIdx.x];
    if (before < want && before + c >= want) {
        for (int i = lo; i < hi; i++)
            if (pred(i) && ++before == want) { found = i; break; }
    }
    __syncthreads();
    int r = found;
    __syncthreads();
    return r;
}

/* The fewest k in 1..cap with base + k*v > t, adding v one at a time (topp.c's fewest). */
__device__ int fewest(float base, float v, float t, int cap, float *sum) {
    int k = 0;
    float s = base;
    while (k < cap && !(s > t)) { s += v; k++; }
    if (k == 0) { s += v; k = 1; }
    *sum = s;
    return k;
}

/* One block: softmax(logits / temperature) into probs, then engines/cuda/host/topp.c's
 * draw, every reduction over the block. Uniform values live in every thread alike. */
__global__ void sample_kernel(const float *logits, int n, float temperature, float topp, float coin, float *probs,
                              int *out) {
    __shared__ float sh[32];
    __shared__ int scan[SAMPLE_THREADS];
    __shared__ float shv[32];
    __shared__ int shi[32];
    float m = -FLT_MAX;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, logits[i] / temperature);
    m = block_max(m, sh);
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float e = expf(logits[i] / temperature - m);
        probs[i] = e;
        s += e;
    }
    s = block_sum(s, sh);
    for (int i = threadIdx.x; i < n; i += blockDim.x) probs[i] /= s;
    __syncthreads();

    int result;
    if (!(topp < 1.0f)) { /* the whole distribution in index order: the first cdf past coin */
        int per = (n + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per, hi = min(n, lo + per);
        float part = 0.0f;
        for (int i = lo; i < hi; i++) part += probs[i];
        float *fscan = (float *)scan; /* same size as int */
        fscan[threadIdx.x] = part;
        __syncthreads();
        if (threadIdx.x == 0) {
            float run = 0.0f;
            for (int t = 0; t < (int)blockDim.x; t++) { float v = fscan[t]; fscan[t] = run; run += v; }
        }
        __syncthreads();
        float cdf = fscan[threadIdx.x];
        int mine = INT_MAX;
        for (int i = lo; i < hi; i++) {
            cdf += probs[i];
            if (coin < cdf) { mine = i; break; }
        }
        /* the smallest index whose cdf passed the coin */
        int first = block_argmax(mine == INT_MAX ? -INFINITY : 0.0f, mine, shv, shi);
        result = first == INT_MAX ? n - 1 : first;
    } else {
        uint32_t lo_level = level_of(n > 1 ? (1.0f - topp) / (float)(n - 1) : 0.0f);
        float total = mass_ge(probs, n, lo_level, 0u, sh);
        if (!(total > 0.0f) || !isfinite(total)) {
            float v = -INFINITY;
            int best = INT_MAX;
            for (int i = threadIdx.x; i < n; i += blockDim.x) better(v, best, probs[i], i);
            best = block_argmax(v, best, shv, shi);
            result = best == INT_MAX ? 0 : best;
        } else {
            uint32_t P;
            int k_lim;
            float cum;
            if (!(total > topp)) {
                P = lo_level;
                k_lim = INT_MAX;
                cum = total;
            } else {
                uint32_t lo = lo_level, hi = TOPP_LEVEL_ONE + 1;
                while (hi - lo > 1) {
                    uint32_t mid = lo + (hi - lo) / 2;
                    if (mass_ge(probs, n, lo_level, mid, sh) > topp) lo = mid;
                    else hi = mid;
                }
                P = lo;
                float base = mass_ge(probs, n, lo_level, P + 1, sh);
                k_lim = fewest(base, __uint_as_float(P), topp, count_eq(probs, n, P, sh), &cum);
            }
            float r = coin * cum;
            uint32_t lo = P, hi = TOPP_LEVEL_ONE + 1;
            while (hi - lo > 1) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (mass_ge(probs, n, lo_level, mid, sh) > r) lo = mid;
                else hi = mid;
            }
            uint32_t Q = lo;
            int at_q = count_eq(probs, n, Q, sh);
            int cap = Q == P && k_lim < at_q ? k_lim : at_q;
            if (cap < 1) {
                result = 0;
            } else {
                float base = mass_ge(probs, n, lo_level, Q + 1, sh), sum;
                int j = fewest(base, __uint_as_float(Q), r, cap, &sum);
                result = nth_true(n, j, [&](int i) { return level_of(probs[i]) == Q; }, scan);
            }
        }
    }
    if (threadIdx.x == 0) *out = result;
}

extern "C" int cuk_sample(void *stream, const float *logits, int n, float temperature, float topp, float coin,
                          float *probs, int *out) {
    sample_kernel<<<1, SAMPLE_THREADS, 0, (cudaStream_t)stream>>>(logits, n, temperature, topp, coin, probs, out);
    return launched();
}

/* ---- bandwidth ---- */

__global__ void triad_kernel(float4 *a, const float4 *b, const float4 *c, float s, size_t n4) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 x = b[i], y = c[i];
        a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    }
}

extern "C" int cuk_triad(void *stream, float *a, const float *b, const float *c, float s, size_t n) {
    /* n is a multiple of 4 and the arrays come from cudaMalloc (256-byte aligned) */
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    unsigned blocks = (unsigned)(sms > 0 ? sms * 8 : 1024);
    triad_kernel<<<blocks, 256, 0, (cudaStream_t)stream>>>((float4 *)a, (const float4 *)b, (const float4 *)c, s, n / 4);
    return launched();
}
