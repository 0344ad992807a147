#include "bf16r16.h"

#include <string.h>

void kn_bf16_r16_pack(void *w, int cols, int g0, int g1, void *tmp) {
    const int cp = cols / 2;
    const size_t gb = (size_t)KN_BF16_R16_ROWS * (size_t)cols * sizeof(uint16_t);
    for (int g = g0; g < g1; g++) {
        /* bytes, not words: a file's tensor may be only 2-byte aligned */
        char *p = (char *)w + (size_t)g * gb;
        const char *t = tmp;
        memcpy(tmp, p, gb);
        for (int i = 0; i < KN_BF16_R16_ROWS; i++)
            for (int c = 0; c < cp; c++) memcpy(p + ((size_t)c * KN_BF16_R16_ROWS + i) * 4, t + ((size_t)i * cp + c) * 4, 4);
    }
}

void kn_bf16_r16_unpack(const void *w, int rows, int cols, int r0, int r1, uint16_t *dst) {
    const int cp = cols / 2, grouped = kn_bf16_r16_grouped(rows);
    const size_t rb = (size_t)cols * sizeof(uint16_t);
    for (int r = r0; r < r1; r++) {
        uint16_t *o = dst + (size_t)(r - r0) * cols;
        if (r >= grouped) {
            memcpy(o, (const char *)w + (size_t)r * rb, rb);
            continue;
        }
        /* the group's words, one every 16 */
        const char *g = (const char *)w + (size_t)(r / KN_BF16_R16_ROWS) * KN_BF16_R16_ROWS * rb;
        const int i = r % KN_BF16_R16_ROWS;
        for (int c = 0; c < cp; c++) memcpy(o + 2 * c, g + ((size_t)c * KN_BF16_R16_ROWS + i) * 4, 4);
    }
}
