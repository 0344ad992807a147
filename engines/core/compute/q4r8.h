/* Q4_0 rearranged for the decode kernels (KN_Q4_0_R8): the layout, and rows to it and back.
 * Below kernels.c and the ISA files alike, which both take it. */
#ifndef BENCH_Q4R8_H
#define BENCH_Q4R8_H

#include "engines/abi/dtype.h"
#include "bf16r16.h"
#include "q4g16.h"

/* Q4_0 rows rearranged for the decode kernels (kn_repack_rows), an internal layout that no file
 * holds: each group of 8 blocks of a row becomes one kn_block_q4_0x8; blocks past the last
 * whole group stay as they were, so a row has the same bytes as in Q4_0. Pair m of a group
 * takes blocks a = 2m and b = 2m + 1: byte j of qs[m] holds a's weight j in its low nibble and
 * b's weight j in its high one, byte 16 + j the same for weights 16 + j. */
#define KN_Q4_0_R8_GROUP 8 /* blocks a group */
typedef struct kn_block_q4_0x8 {
    uint16_t d[KN_Q4_0_R8_GROUP];                       /* the 8 blocks' f16 scales */
    uint8_t qs[KN_Q4_0_R8_GROUP / 2][2 * BENCH_QK / 2]; /* a pair of blocks' nibbles, as above */
} kn_block_q4_0x8;
BENCH_STATIC_ASSERT(sizeof(kn_block_q4_0x8) == KN_Q4_0_R8_GROUP * sizeof(bench_block_q4_0),
                    "a rearranged group must take the bytes of the 8 Q4_0 blocks it holds");

/* The dtype tag kn_matmul and kn_matmul_multi take for weights in that layout (every family runs
 * it; the ones without a decode of their own put the rows back first). Not a bench_dtype: no
 * file, module or ABI sees it, so it sits just past the enum, where no bench_dtype can be. */
enum { KN_Q4_0_R8_TAG = BENCH_DTYPE_COUNT };
#define KN_Q4_0_R8 ((bench_dtype)KN_Q4_0_R8_TAG)

/* The dtype whose bytes a kernel's dtype rearranges: Q4_0 for rearranged Q4_0 (the same bytes
 * per row) and for interleaved Q4_0 (q4g16.h), BF16 for grouped bf16 (bf16r16.h: the same bytes
 * per group of rows), else itself. */
static inline bench_dtype kn_base_dt(int dt) {
    return dt == KN_Q4_0_R8_TAG || dt == KN_Q4_0_G16_TAG ? BENCH_Q4_0 : dt == KN_BF16_R16_TAG ? BENCH_BF16 : (bench_dtype)dt;
}

/* rows Q4_0 rows of cols (a multiple of 32) rearranged in place, and back (dst may be src) */
void kn_repack_rows(void *w, int rows, int cols);
void kn_unrepack_rows(const void *src, void *dst, int rows, int cols);

#endif
