/* A growable byte buffer: text built piece by piece (JSON, option strings, file contents).
 * Glossary: len bytes used of cap allocated; p is NUL-terminated whenever len < cap and
 * something was appended (ut_buf_append and ut_buf_printf keep p[len] == 0).
 * A zeroed ut_buf is empty and valid; ut_buf_free returns it to that state. */
#ifndef UT_BUF_H
#define UT_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ut_buf {
    char *p;        /* cap bytes, malloc'd; NULL while cap == 0 */
    size_t len;     /* bytes in use */
    size_t cap;     /* bytes allocated */
} ut_buf;

/* Room for at least need bytes in all (doubling, so appends are amortized O(1)).
 * 0, or -1 on overflow or out of memory with b unchanged. */
int ut_buf_reserve(ut_buf *b, size_t need);
/* n bytes at the end, and a NUL after them. 0 or -1 (b unchanged). */
int ut_buf_append(ut_buf *b, const void *data, size_t n);
/* printf at the end. 0 or -1 (b unchanged). */
int ut_buf_printf(ut_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ut_buf_vprintf(ut_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* The bytes, given to the caller (who frees them); b is empty afterwards. Never NULL
 * unless out of memory: an empty buffer gives "". */
char *ut_buf_take(ut_buf *b);
void ut_buf_free(ut_buf *b);

#endif
