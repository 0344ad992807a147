/* Text that anyone may have written (a scenario's labels, a server's error body, a field of a
 * results.json), made safe to print on a terminal. In util so that every layer that prints
 * such text (the http client, the worker, the report) escapes it the same way. */
#ifndef UT_TERM_H
#define UT_TERM_H

#include <stddef.h>

/* src for a terminal, into dst (always terminated, cut at len - 1): each C0 control
 * character (below 0x20), DEL, each C1 control (U+0080..U+009F in UTF-8, and the raw bytes
 * 0x80..0x9f where they do not continue a UTF-8 sequence: an 8-bit CSI is 0x9b on terminals
 * that take it) as \xHH, so that ESC, CSI or BEL neither moves the cursor, recolours the
 * screen nor rings; everything else as it is. NULL is "". Returns dst. */
char *es_term(char *dst, size_t len, const char *src);
/* The same for a message of several lines: line feeds and tabs kept, every other control
 * escaped. For error messages that quote a file's text (a results.json anyone may edit). */
char *es_term_lines(char *dst, size_t len, const char *src);

#endif
