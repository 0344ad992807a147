/* Escaping for the terminal (ut_term.h). */
#include "util/ut_term.h"

static size_t ut_put_hex(char *dst, size_t o, size_t len, unsigned char c) {
    static const char hex[] = "0123456789abcdef";
    if (o + 4 >= len) return 0;
    dst[o] = '\\';
    dst[o + 1] = 'x';
    dst[o + 2] = hex[c >> 4];
    dst[o + 3] = hex[c & 15];
    return 4;
}

static char *es_term_keep(char *dst, size_t len, const char *src, int keep_lines) {
    if (!len) return dst;
    size_t o = 0;
    int pending = 0; /* continuation bytes still due to the last UTF-8 lead byte */
    for (const unsigned char *s = (const unsigned char *)(src ? src : ""); *s; s++) {
        unsigned char c = *s;
        int cont = c >= 0x80 && c <= 0xbf;
        int kept = keep_lines && (c == '\n' || c == '\t');
        int control = (c < 0x20 && !kept) || c == 0x7f || (cont && !pending && c <= 0x9f);
        /* U+0080..U+009F are C2 80..C2 9F: a terminal in UTF-8 mode reads them as one C1
         * control (U+009B is CSI), so both bytes are escaped */
        int c1_pair = c == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f;
        if (c1_pair || control) {
            size_t a = ut_put_hex(dst, o, len, c);
            size_t b = a && c1_pair ? ut_put_hex(dst, o + a, len, s[1]) : 0;
            if (!a || (c1_pair && !b)) break;
            o += a + b;
            s += c1_pair;
            pending = 0;
            continue;
        }
        if (o + 1 >= len) break;
        dst[o++] = (char)c;
        pending = cont ? (pending ? pending - 1 : 0) : c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 ? 1 : 0;
    }
    dst[o] = 0;
    return dst;
}

char *es_term(char *dst, size_t len, const char *src) { return es_term_keep(dst, len, src, 0); }

char *es_term_lines(char *dst, size_t len, const char *src) { return es_term_keep(dst, len, src, 1); }
