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

#endif
