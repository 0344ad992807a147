/* Unicode tables and UTF-8 for the tokenizers (see unicode.h).
 *
 * The class table is generated at build time from UnicodeData.txt by
 * scripts/gen_unicode.awk (Makefile rule): a 40-line script is reviewable where a
 * 1500-line table is not, and the data comes from the Debian package rather than
 * from a file someone edited. The Unicode version is the package's (15.0.0 in Debian
 * 12); llama.cpp's test sets pass with it. A class change between versions can move a
 * split only for a character whose class changed, which the test sets would show.
 */
#include "unicode.h"

#include "unicode_tab.h" /* ucd_ranges: generated into $(BUILD)/gen */

int unicode_class(uint32_t cp) {
    /* binary search for the last range starting at or before cp */
    size_t lo = 0, hi = sizeof(ucd_ranges) / sizeof(ucd_ranges[0]);
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ucd_ranges[mid][0] <= cp) lo = mid;
        else hi = mid;
    }
    if (cp < ucd_ranges[lo][0] || cp > ucd_ranges[lo][1] >> 3) return UCAT_NONE;
    return (int)(ucd_ranges[lo][1] & 7);
}

/* White_Space from PropList.txt: not in UnicodeData.txt, and a fixed list since
 * Unicode 6.3 (U+180E left it then), so it is written out here. */
int unicode_is_space(uint32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return 0;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t unicode_decode(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    *len = 1;
    if (c < 0x80) return c;
    size_t need;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) need = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) need = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) need = 4, cp = c & 0x07, min = 0x10000;
    else return UNICODE_REPLACEMENT;
    if (n < need) return UNICODE_REPLACEMENT;
    for (size_t i = 1; i < need; i++) {
        if ((u[i] & 0xC0) != 0x80) return UNICODE_REPLACEMENT;
        cp = cp << 6 | (u[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return UNICODE_REPLACEMENT;
    *len = need;
    return cp;
}

size_t unicode_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t unicode_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    /* the k-th unprintable byte (in byte order) takes U+0100 + k */
    uint32_t k = 0;
    for (unsigned i = 0; i < b; i++) k += !byte_is_printable(i);
    return 0x100 + k;
}

int unicode_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t k = cp - 0x100;
    for (unsigned b = 0; b < 256; b++)
        if (!byte_is_printable(b) && k-- == 0) return (int)b;
    return -1;
}
