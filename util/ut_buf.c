#include "ut_buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ut_buf_reserve(ut_buf *b, size_t need) {
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int ut_buf_append(ut_buf *b, const void *data, size_t n) {
    if (n >= SIZE_MAX - b->len || ut_buf_reserve(b, b->len + n + 1)) return -1;
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int ut_buf_vprintf(ut_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0 || ut_buf_reserve(b, b->len + (size_t)n + 1)) {
        va_end(ap2);
        return -1;
    }
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
    return 0;
}

int ut_buf_printf(ut_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = ut_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *ut_buf_take(ut_buf *b) {
    char *p = b->p;
    if (!p) p = calloc(1, 1);
    *b = (ut_buf){0};
    return p;
}

void ut_buf_free(ut_buf *b) {
    free(b->p);
    *b = (ut_buf){0};
}
