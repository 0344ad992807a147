/* ggml's block-quantised weight types (Q4_0 .. Q6_K; engines/abi/dtype.h has
 * the byte layouts): exact dequantisation, the exact matmul over them, and the
 * Q4_0 quantiser the writers use.
 *
 * "Exact" means what gguf-py's quants.dequantize computes: every weight becomes
 * the f32 value ggml defines for it (scale products rounded to f32 in the same
 * order), and products with the activations are summed in f32. The only
 * difference from llama.cpp on a dequantised f32 file is the order of the sums.
 * Faster kernels (integer dot products on quantised activations) belong beside
 * these, selected by kernels.c; these stay the reference they are tested against.
 */
#ifndef BENCH_QUANT_H
#define BENCH_QUANT_H

#include "engines/abi/dtype.h"

/* out (n) = row (n elements in dt) as f32; dt any block-quantised type
 * (bench_dtype_is_quant), n a whole number of blocks. */
void qn_dequant_row(bench_dtype dt, const void *row, float *out, int n);

/* y[t*rows + r] = sum_k x[t*cols + k] * W[r][k] for t < n, r in [r0, r1), with W (rows,
 * cols) in a block-quantised dt, dequantised exactly a chunk at a time. Same shape as
 * kernels_impl.h's kn_mm_fn; returns NULL for a dt that is not block-quantised. */
typedef void (*qn_mm_fn)(float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1);
qn_mm_fn qn_exact_mm(bench_dtype dt);

/* Q4_0 of n (a multiple of 32) floats: per block, d = (the element of largest
 * magnitude, signed) / -8 rounded to f16, q = round(x / d) + 8 clamped to 0..15.
 * That element lands exactly on q = 0; the error of every other is at most d/2,
 * or d where one of the opposite sign and equal size is clamped to +7. */
void qn_quant_row_q4_0(const float *in, void *out, int n);

#endif
