/* What every parser of harness/scenario says about a JSON value it did not expect, and the
 * lists of names its messages offer: one wording for all of them. */
#ifndef BENCH_JSONVAL_H
#define BENCH_JSONVAL_H

#include <stddef.h>

typedef struct cJSON cJSON;

/* "a string", "a number", "a boolean", "null", "an array", "an object"; "nothing" for NULL
 * (a missing key), "invalid" for a value cJSON marks as such. */
const char *jv_type(const cJSON *j);

/* The index of s in names (NULL-terminated), or -1. */
int jv_enum(const char *s, const char *const *names);

/* names (NULL-terminated) as "a, b, c" into buf, cut to len. */
void jv_join(char *buf, size_t len, const char *const *names);

/* j as a whole number in [lo, hi] into *out: 0, or -1 with what was wrong in msg ("expected an
 * integer, got a fraction", "5 is out of range: expected 1 .. 4"), for the caller's error sink. */
int jv_int(const cJSON *j, long long lo, long long hi, long long *out, char *msg, size_t len);

#endif
