/* Q4_0 rearranged for the decode kernels (KN_Q4_0_R8): the layout, and rows to it and back.
 * Below kernels.c and the ISA files alike, which both take it. */
#ifndef BENCH_Q4R8_H
#define BENCH_Q4R8_H

#include "engines/abi/dtype.h"

/* Q4_0 rows rearranged for the decode kernels (kn_repack_rows), an internal dtype that no file
 * holds: kn_matmul and kn_matmul_multi take it as the weights' dtype, and every family runs
 * it (the ones without a decode of their own put the rows back first). Per row, each group of
 * 8 blocks becomes its 8 f16 scales, then for each pair of blocks a, b 32 bytes: byte j of the
 * first 16 holds a's weight j in its low nibble and b's weight j in its high one, byte j of
 * the next 16 the same for weights 16 + j; blocks past the last whole group stay as they
 * were. The same bytes per row as Q4_0. */
#define KN_Q4_0_R8 ((bench_dtype)BENCH_DTYPE_COUNT)

/* rows Q4_0 rows of cols (a multiple of 32) rearranged in place, and back (dst may be src) */
void kn_repack_rows(void *w, int rows, int cols);
void kn_unrepack_rows(const void *src, void *dst, int rows, int cols);

#endif
