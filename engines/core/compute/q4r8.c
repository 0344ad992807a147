#include "q4r8.h"

#include <string.h>

enum { KN_R8_GROUP = 8 }; /* blocks a group */

void kn_repack_rows(void *w, int rows, int cols) {
    const int nb = cols / BENCH_QK;
    const size_t rb = bench_dtype_row_bytes(BENCH_Q4_0, cols);
    for (int r = 0; r < rows; r++)
        for (int g = 0; g + KN_R8_GROUP <= nb; g += KN_R8_GROUP) {
            unsigned char *p = (unsigned char *)w + (size_t)r * rb + (size_t)g * sizeof(bench_block_q4_0);
            bench_block_q4_0 b[KN_R8_GROUP];
            memcpy(b, p, sizeof b);
            for (int k = 0; k < KN_R8_GROUP; k++) memcpy(p + 2 * k, &b[k].d, 2);
            for (int m = 0; m < KN_R8_GROUP / 2; m++) {
                const bench_block_q4_0 *a = &b[2 * m], *c = &b[2 * m + 1];
                unsigned char *pq = p + 16 + 32 * m;
                for (int j = 0; j < 16; j++) {
                    pq[j] = (unsigned char)((a->qs[j] & 15) | (c->qs[j] & 15) << 4);
                    pq[16 + j] = (unsigned char)((a->qs[j] >> 4) | (c->qs[j] & 0xf0));
                }
            }
        }
}

void kn_unrepack_rows(const void *src, void *dst, int rows, int cols) {
    const int nb = cols / BENCH_QK;
    const size_t rb = bench_dtype_row_bytes(BENCH_Q4_0, cols);
    if (dst != src) memmove(dst, src, (size_t)rows * rb); /* the tail blocks, and the groups' bytes to read */
    for (int r = 0; r < rows; r++)
        for (int g = 0; g + KN_R8_GROUP <= nb; g += KN_R8_GROUP) {
            unsigned char *p = (unsigned char *)dst + (size_t)r * rb + (size_t)g * sizeof(bench_block_q4_0);
            unsigned char in[KN_R8_GROUP * sizeof(bench_block_q4_0)];
            memcpy(in, p, sizeof in);
            bench_block_q4_0 b[KN_R8_GROUP];
            for (int k = 0; k < KN_R8_GROUP; k++) memcpy(&b[k].d, in + 2 * k, 2);
            for (int m = 0; m < KN_R8_GROUP / 2; m++) {
                const unsigned char *pq = in + 16 + 32 * m;
                for (int j = 0; j < 16; j++) {
                    b[2 * m].qs[j] = (uint8_t)((pq[j] & 15) | (pq[16 + j] & 15) << 4);
                    b[2 * m + 1].qs[j] = (uint8_t)((pq[j] >> 4) | (pq[16 + j] & 0xf0));
                }
            }
            memcpy(p, b, sizeof b);
        }
}
