/* bf16 rearranged for the GEMM and the decode kernels (KN_BF16_R16): the layout, and rows to it
 * and back. Below kernels.c and the ISA files alike, which both take it.
 *
 * Why: the bf16 GEMM transposed every 64-row panel of the file's rows before each use (16 x 16
 * transposes of column pairs) and prefetched the next panel's 64 scattered row pieces; the two
 * cost about a tenth of a bf16 prefill on Zen 5 (docs/PERFORMANCE.md). Rows kept 16 to a group,
 * column pair by column pair, are already what its register tile loads: a panel is 4 groups
 * read in place, and a decode reads each group as one stream of 64-byte lines. */
#ifndef BENCH_BF16R16_H
#define BENCH_BF16R16_H

#include <stddef.h>
#include <stdint.h>

#include "engines/abi/dtype.h"

/* Rows a group. Each whole group of 16 consecutive rows (from row 0) takes the bytes those rows
 * take in the file, laid out as (cols / 2, 16) 32-bit column pairs: pair p of the group's row i
 * (columns 2p, 2p + 1, the even one in the low half, as in the file) at 32-bit word 16 p + i.
 * Rows past the last whole group stay as they were, so row r's bytes start where the file's do
 * for every r that is not inside a group. cols must be even (kn_bf16_r16_ok). */
#define KN_BF16_R16_ROWS 16

/* The dtype tag kn_matmul and kn_matmul_multi take for weights in that layout: past
 * KN_Q4_0_R8's (q4r8.h), where no bench_dtype can be. */
enum { KN_BF16_R16_TAG = BENCH_DTYPE_COUNT + 1 };
#define KN_BF16_R16 ((bench_dtype)KN_BF16_R16_TAG)

/* Whether a matrix of rows x cols can be laid out so: an even cols and a whole group. */
static inline int kn_bf16_r16_ok(int rows, int cols) { return cols % 2 == 0 && rows >= KN_BF16_R16_ROWS; }

/* Rows in whole groups: [0, kn_bf16_r16_grouped) is grouped, the rest as in the file. */
static inline int kn_bf16_r16_grouped(int rows) { return rows / KN_BF16_R16_ROWS * KN_BF16_R16_ROWS; }

/* Groups [g0, g1) of a matrix of cols columns rearranged in place. tmp: room for one group's
 * bytes (16 cols 2-byte values), which the caller owns, so that nothing here can fail halfway. */
void kn_bf16_r16_pack(void *w, int cols, int g0, int g1, void *tmp);

/* Rows [r0, r1) of a rearranged matrix of rows x cols, in the file's layout, into dst
 * ((r1 - r0) rows of cols values). */
void kn_bf16_r16_unpack(const void *w, int rows, int cols, int r0, int r1, uint16_t *dst);

#endif
