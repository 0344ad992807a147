#include "q4g16.h"

#include <string.h>

/* Row i's block to its place in the group's block. Bytes go through memcpy: a file's tensor may
 * be only 2-byte aligned. */
static void kn_g16_put(const bench_block_q4_0 *src, kn_block_q4_0x16 *dst, int i) {
    dst->d[i] = src->d;
    for (int j = 0; j < 4; j++) memcpy(dst->qs[j][i], src->qs + 4 * j, 4);
}

void kn_q4_0_g16_pack(void *w, int cols, int g0, int g1, void *tmp) {
    const int nb = cols / BENCH_QK;
    const size_t gb = (size_t)KN_Q4_0_G16_ROWS * (size_t)nb * sizeof(bench_block_q4_0);
    for (int g = g0; g < g1; g++) {
        char *p = (char *)w + (size_t)g * gb;
        memcpy(tmp, p, gb);
        for (int b = 0; b < nb; b++) {
            kn_block_q4_0x16 blk;
            for (int i = 0; i < KN_Q4_0_G16_ROWS; i++) {
                bench_block_q4_0 src;
                memcpy(&src, (const char *)tmp + ((size_t)i * nb + b) * sizeof src, sizeof src);
                kn_g16_put(&src, &blk, i);
            }
            memcpy(p + (size_t)b * sizeof blk, &blk, sizeof blk);
        }
    }
}

void kn_q4_0_g16_unpack(const void *w, int rows, int cols, int r0, int r1, void *dst) {
    const int nb = cols / BENCH_QK, grouped = kn_q4_0_g16_grouped(rows);
    const size_t rb = (size_t)nb * sizeof(bench_block_q4_0);
    for (int r = r0; r < r1; r++) {
        char *o = (char *)dst + (size_t)(r - r0) * rb;
        if (r >= grouped) {
            memcpy(o, (const char *)w + (size_t)r * rb, rb);
            continue;
        }
        /* row i's pieces of each group block, where they lie (a copy of the whole block a row
         * made the prefill's unpacking, kernels.c kn_mm_unpacked, cost a tenth of it) */
        const char *g = (const char *)w + (size_t)(r / KN_Q4_0_G16_ROWS) * KN_Q4_0_G16_ROWS * rb;
        const size_t i = (size_t)(r % KN_Q4_0_G16_ROWS);
        for (int b = 0; b < nb; b++) {
            const char *s = g + (size_t)b * sizeof(kn_block_q4_0x16);
            char *d = o + (size_t)b * sizeof(bench_block_q4_0);
            memcpy(d + offsetof(bench_block_q4_0, d), s + offsetof(kn_block_q4_0x16, d) + 2 * i, 2);
            for (int j = 0; j < 4; j++)
                memcpy(d + offsetof(bench_block_q4_0, qs) + 4 * j, s + offsetof(kn_block_q4_0x16, qs) + (size_t)64 * j + 4 * i, 4);
        }
    }
}
