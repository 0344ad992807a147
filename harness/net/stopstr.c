/* Stop strings: see stopstr.h. */
#include "stopstr.h"

#include <string.h>

long stop_find(const char *text, size_t len, size_t from, const char *const *stops, int n) {
    long best = -1;
    for (int i = 0; i < n; i++) {
        size_t sl = strlen(stops[i]);
        if (!sl || sl > len) continue;
        /* an occurrence ending after `from` starts at from - sl + 1 or later */
        size_t start = from >= sl ? from - sl + 1 : 0;
        for (size_t p = start; p + sl <= len; p++) {
            if (best >= 0 && (long)p >= best) break;
            if (!memcmp(text + p, stops[i], sl)) {
                best = (long)p;
                break;
            }
        }
    }
    return best;
}

/* Bytes at the end that begin a UTF-8 character not yet whole (0 when the end is whole). */
static size_t stop_utf8_tail(const char *text, size_t len) {
    for (size_t k = 1; k <= 3 && k <= len; k++) {
        unsigned char c = (unsigned char)text[len - k];
        if ((c & 0xC0) == 0x80) continue;       /* a continuation byte: look further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

size_t stop_holdback(const char *text, size_t len, const char *const *stops, int n) {
    size_t hold = stop_utf8_tail(text, len);
    for (int i = 0; i < n; i++) {
        size_t sl = strlen(stops[i]);
        if (!sl) continue;
        for (size_t k = sl > len + 1 ? len : sl - 1; k > hold; k--)
            if (!memcmp(text + len - k, stops[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}
