/* The host's parsers for option values given as text (a module's options on the command
 * line, a scenario's sizes): not part of the module ABI, which takes typed values. */
#ifndef UT_PARSE_H
#define UT_PARSE_H

#include <stdint.h>

/* A size such as 4096, 64k, 2m, 1g (also 64KiB, 2MB), in bytes, into *out. 0, or -1 when s is
 * not one (empty, negative, another suffix, past 2^64). */
int ut_parse_size(const char *s, uint64_t *out);

/* 1/true/yes/on or 0/false/no/off into *out. 0, or -1 when s is none of them. */
int ut_parse_bool(const char *s, int *out);

#endif
