/* Q4_0 with rows interleaved 16 at a time for the int8 decode (KN_Q4_0_G16): the layout, and rows
 * to it and back. Below kernels.c and the ISA files alike, which both take it.
 *
 * Why: the one-row decode (kernels_int8.inc mv_q4_0_zmm) spends a row's 16 lanes on 64 of its
 * columns, so every pair of blocks needs its scales permuted into lanes and every row ends in a
 * horizontal sum. With 16 rows side by side, lane i is row i: a 64-byte load is 4 bytes of each
 * row, x's 4 bytes are broadcast, a block's 8 vpdpbusd leave each row's whole integer dot in its
 * lane, the 16 scales convert in one instruction and nothing is summed across lanes; llama.cpp
 * interleaves rows (its q4_0_8x8) for the same reason. vnni's decode of llama-110m q4_0 went
 * 1.23x faster (docs/PERFORMANCE.md, Zen 4 stop 55). */
#ifndef BENCH_Q4G16_H
#define BENCH_Q4G16_H

#include <stddef.h>
#include <stdint.h>

#include "engines/abi/dtype.h"

/* Rows a group. Each whole group of 16 consecutive rows (from row 0) takes the bytes those rows
 * take in the file: block b of the group (the 16 rows' block b) is one kn_block_q4_0x16, the
 * groups' blocks in order. Rows past the last whole group stay as they were, so row r's bytes
 * start where the file's do for every r that is not inside a group. */
#define KN_Q4_0_G16_ROWS 16
typedef struct kn_block_q4_0x16 {
    uint16_t d[KN_Q4_0_G16_ROWS];           /* row i's f16 scale */
    uint8_t qs[4][KN_Q4_0_G16_ROWS][4];     /* [j][i]: row i's quant bytes 4j .. 4j + 3 */
} kn_block_q4_0x16;
BENCH_STATIC_ASSERT(sizeof(kn_block_q4_0x16) == KN_Q4_0_G16_ROWS * sizeof(bench_block_q4_0),
                    "a group's block must take the bytes of the 16 Q4_0 blocks it holds");

/* The dtype tag kn_matmul and kn_matmul_multi take for weights in that layout: past
 * KN_BF16_R16's (bf16r16.h), where no bench_dtype can be. */
enum { KN_Q4_0_G16_TAG = BENCH_DTYPE_COUNT + 2 };
#define KN_Q4_0_G16 ((bench_dtype)KN_Q4_0_G16_TAG)

/* Whether a matrix of rows x cols can be laid out so: whole blocks and a whole group. */
static inline int kn_q4_0_g16_ok(int rows, int cols) { return cols % BENCH_QK == 0 && rows >= KN_Q4_0_G16_ROWS; }

/* Rows in whole groups: [0, kn_q4_0_g16_grouped) is grouped, the rest as in the file. */
static inline int kn_q4_0_g16_grouped(int rows) { return rows / KN_Q4_0_G16_ROWS * KN_Q4_0_G16_ROWS; }

/* Groups [g0, g1) of a matrix of cols columns rearranged in place. tmp: room for one group's
 * bytes (16 rows of Q4_0), which the caller owns, so that nothing here can fail halfway. */
void kn_q4_0_g16_pack(void *w, int cols, int g0, int g1, void *tmp);

/* Rows [r0, r1) of a rearranged matrix of rows x cols, in the file's layout, into dst
 * ((r1 - r0) Q4_0 rows of cols). */
void kn_q4_0_g16_unpack(const void *w, int rows, int cols, int r0, int r1, void *dst);

#endif
