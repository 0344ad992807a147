/* Stop strings (OpenAI's "stop"): where a generated text must end, and how much of its tail
 * a stream must hold back because it may be the start of one. Pure functions of the bytes:
 * the server decodes token by token and asks after each piece.
 *
 *   text    "Once upon a ti"      stops {"time"}
 *   stop_find      no match yet
 *   stop_holdback  2 ("ti" may become "time"): send "Once upon a " now, keep "ti"
 *   next piece "me" -> "Once upon a time": stop_find at 12: the answer is "Once upon a "
 *
 * An incomplete UTF-8 character at the end is held back too (a byte-level vocabulary splits
 * characters across tokens): a client's JSON must hold whole characters. */
#ifndef BENCH_STOPSTR_H
#define BENCH_STOPSTR_H

#include <stddef.h>

/* The start of the earliest occurrence of any of stops[0..n) in text[0..len) that ends after
 * byte `from` (text before it was searched already), or -1. */
long stop_find(const char *text, size_t len, size_t from, const char *const *stops, int n);

/* Trailing bytes of text[0..len) that must not be sent yet: the longest suffix that is a
 * proper prefix of a stop string, or an unfinished UTF-8 sequence, whichever is longer. */
size_t stop_holdback(const char *text, size_t len, const char *const *stops, int n);

#endif
