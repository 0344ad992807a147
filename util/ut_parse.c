/* The host's parsers for option values given as text (ut_parse.h). */
#include "util/ut_parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ut_parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-') return -1;
    uint64_t mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default: break;
    }
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    if (*end || (mul > 1 && v > UINT64_MAX / mul)) return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

int ut_parse_bool(const char *s, int *out) {
    if (!s) return -1;
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcmp(s, yes[i])) return *out = 1, 0;
        if (!strcmp(s, no[i])) return *out = 0, 0;
    }
    return -1;
}
