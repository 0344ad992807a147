/* Escaping for CSV (escape.h). */
#include "harness/report/escape.h"

#include <string.h>

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
