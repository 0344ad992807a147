/* Unicode for the tokenizers: UTF-8 decoding, general-category classes, White_Space,
 * and GPT-2's byte-level alphabet (every byte spelled as one printable code point).
 *
 * Glossary:
 *   class        the major general category of a code point: the first letter of its
 *                UnicodeData.txt category (Lu, Ll, ... -> L). UCAT_NONE: unassigned.
 *   byte-level   GPT-2's bytes_to_unicode(): bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF
 *                stand for themselves; the other 68 take U+0100.. in byte order.
 *                A bijection, so byte-level text decodes back to the exact bytes.
 */
#ifndef BENCH_UNICODE_H
#define BENCH_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum { UCAT_NONE = 0, UCAT_L, UCAT_M, UCAT_N, UCAT_P, UCAT_S, UCAT_Z, UCAT_C };

#define UNICODE_REPLACEMENT 0xFFFDu

int unicode_class(uint32_t cp);         /* UCAT_* */
int unicode_is_space(uint32_t cp);      /* the White_Space property (regex \s) */

/* Decodes one code point from s[0..n), n > 0. *len gets the bytes used. Malformed
 * input (a stray continuation byte, a truncated or overlong sequence, a surrogate,
 * a value past U+10FFFF) gives U+FFFD for one byte, as llama.cpp does. */
uint32_t unicode_decode(const char *s, size_t n, size_t *len);
/* Writes cp (<= U+10FFFF) as UTF-8 into out; returns the bytes written (1..4). */
size_t unicode_encode(uint32_t cp, char out[4]);

uint32_t unicode_byte_to_cp(uint8_t b);  /* byte-level spelling of byte b */
int unicode_cp_to_byte(uint32_t cp);     /* the byte a byte-level code point stands for, or -1 */

#endif
