#include "q4r8.h"

#include <string.h>

/* The 8 blocks of a group, as the file holds them, into the rearranged form, and back. */
static void kn_group_pack(const bench_block_q4_0 b[KN_Q4_0_R8_GROUP], kn_block_q4_0x8 *g) {
    for (int k = 0; k < KN_Q4_0_R8_GROUP; k++) g->d[k] = b[k].d;
    for (int m = 0; m < KN_Q4_0_R8_GROUP / 2; m++) {
        const bench_block_q4_0 *a = &b[2 * m], *c = &b[2 * m + 1];
        for (int j = 0; j < 16; j++) {
            g->qs[m][j] = (uint8_t)((a->qs[j] & 15) | (c->qs[j] & 15) << 4);
            g->qs[m][16 + j] = (uint8_t)((a->qs[j] >> 4) | (c->qs[j] & 0xf0));
        }
    }
}

static void kn_group_unpack(const kn_block_q4_0x8 *g, bench_block_q4_0 b[KN_Q4_0_R8_GROUP]) {
    for (int k = 0; k < KN_Q4_0_R8_GROUP; k++) b[k].d = g->d[k];
    for (int m = 0; m < KN_Q4_0_R8_GROUP / 2; m++)
        for (int j = 0; j < 16; j++) {
            const uint8_t lo = g->qs[m][j], hi = g->qs[m][16 + j];
            b[2 * m].qs[j] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            b[2 * m + 1].qs[j] = (uint8_t)((lo >> 4) | (hi & 0xf0));
        }
}

/* Every whole group of every row packed (pack 1) or unpacked, in place; each group is copied
 * out and back because a row is only 2-byte aligned. */
static void kn_each_group(void *w, int rows, int cols, int pack) {
    const int nb = cols / BENCH_QK;
    const size_t rb = bench_dtype_row_bytes(BENCH_Q4_0, cols);
    for (int r = 0; r < rows; r++)
        for (int g = 0; g + KN_Q4_0_R8_GROUP <= nb; g += KN_Q4_0_R8_GROUP) {
            unsigned char *p = (unsigned char *)w + (size_t)r * rb + (size_t)g * sizeof(bench_block_q4_0);
            bench_block_q4_0 b[KN_Q4_0_R8_GROUP];
            kn_block_q4_0x8 x;
            if (pack) {
                memcpy(b, p, sizeof b);
                kn_group_pack(b, &x);
                memcpy(p, &x, sizeof x);
            } else {
                memcpy(&x, p, sizeof x);
                kn_group_unpack(&x, b);
                memcpy(p, b, sizeof b);
            }
        }
}

void kn_repack_rows(void *w, int rows, int cols) { kn_each_group(w, rows, cols, 1); }

void kn_unrepack_rows(const void *src, void *dst, int rows, int cols) {
    if (dst != src) memmove(dst, src, (size_t)rows * bench_dtype_row_bytes(BENCH_Q4_0, cols)); /* the tail blocks too */
    kn_each_group(dst, rows, cols, 0);
}
