/* Escaping for the terminal and CSV (escape.h). */
#include "harness/report/escape.h"

#include <string.h>

char *es_term(char *dst, size_t len, const char *src) {
    if (!len) return dst;
    size_t o = 0;
    for (const unsigned char *s = (const unsigned char *)(src ? src : ""); *s; s++) {
        if (*s < 0x20 || *s == 0x7f) {
            if (o + 4 >= len) break;
            static const char hex[] = "0123456789abcdef";
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[*s >> 4];
            dst[o++] = hex[*s & 15];
        } else {
            if (o + 1 >= len) break;
            dst[o++] = (char)*s;
        }
    }
    dst[o] = 0;
    return dst;
}

void es_csv(FILE *f, const char *src, int always) {
    if (!src) src = "";
    if (!always && !src[strcspn(src, ",\"\r\n")]) {
        fputs(src, f);
        return;
    }
    fputc('"', f);
    for (const char *s = src; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}
