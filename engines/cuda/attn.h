/* Attention and K/V stores of the CUDA KV modules (engines/cuda/attn.cu), over any of
 * their layouts and cache types. A position p of a layer lives in row
 *     row(p) = table ? table[p / bs] * bs + p % bs : p
 * and its K (V) vector at kb + row * k_stride (vb + row * v_stride) bytes: kv_dim elements
 * in k_type (v_type), block scales included (kv.h bench_kv_row_bytes). So:
 *   position-major contiguous cache (prealloc, dynamic, vmm; engines/cuda/kvc_cuda.h):
 *       kb = mem + layer * k_row, vb = mem + n_layers * k_row + layer * v_row,
 *       both strides n_layers * (k_row + v_row), table NULL
 *   pool of rows (block, token; engines/modules/common/kv_paged.h):
 *       kb, vb = the layer's K and V bases, strides k_row and v_row, table = the block table
 *       (bs = block size) or the slot map (bs = 1), on the device
 * Every layout goes through the same kernel, so the KV modules agree bit for bit.
 * Launchers return cudaGetLastError() as an int.
 */
#ifndef BENCH_CUDA_ATTN_H
#define BENCH_CUDA_ATTN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One layer's K and V rows on the device. */
typedef struct cuatt_rows {
    void *kb, *vb;
    size_t k_stride, v_stride;  /* bytes from one row to the next */
    int k_type, v_type;         /* bench_dtype: f32, f16, bf16, q8_0 or q4_0 */
} cuatt_rows;

/* Writes k, v (n, kv_dim floats) of positions pos0 .. pos0+n-1 into their rows, converted to
 * the rows' types as the CPU's caches convert them (blockquant.h). */
int cuatt_store(void *stream, const cuatt_rows *kv, const int *table, int bs, int pos0, int n, int kv_dim,
                const float *k, const float *v);

/* Causal grouped-query attention (engines/abi/kv.h) of q (n, n_heads*hd) at pos0.. into
 * out (n, n_heads*hd); scores / sqrt(hd), softmax in f32. work: device memory of
 * cuatt_work_bytes for the split kernel of short passes (decode); NULL: never split. */
int cuatt_attend(void *stream, const cuatt_rows *kv, const int *table, int bs, int pos0, int n, int n_heads,
                 int n_kv_heads, int hd, const float *q, float *out, float *work);

/* Bytes of the work area for contexts of max_pos positions. */
size_t cuatt_work_bytes(int n_heads, int hd, int max_pos);

/* The most positions a pass may attend over for head dimension hd on the current device
 * (the one-block kernel keeps every score in shared memory); 0 when hd is outside 1..256
 * or the device cannot be asked. */
int cuatt_max_positions(int hd);

#ifdef __cplusplus
}
#endif

#endif
