/* A module's options in a worker spec: the values the parent checked against the module's
 * table (modreg_type_opts), typed, as one JSON object, {"name": value, ...}:
 *   a bool option        true / false
 *   an int or a size     a whole number (|n| <= 2^53, exact in a JSON number)
 *   an enum or a string  a string (the enum's choice by name)
 * The worker reads the object back into typed values (module.h BENCH_OPTV_*), which the host
 * stores by the option's type (modreg_fill_opts): no text is parsed and no range checked
 * again. The engine's spec (worker_spec.c) and the allocator workloads' (alloc_spec.c) both
 * write and read their options here. */
#ifndef BENCH_SPEC_OPTS_H
#define BENCH_SPEC_OPTS_H

#include <stddef.h>

#include "engines/abi/module.h"

struct cJSON;

/* The values as a JSON object (NULL: out of memory). A text value (BENCH_OPTV_TEXT, never
 * a checked one) is written as a string. */
struct cJSON *so_opts_json(const bench_opts *o);

/* The object of field `field` of spec j back into *out: the keys and strings point into j,
 * *mem is the array (free() it). An absent field is no options. -1 with err naming the field
 * and what was expected: an object whose values are booleans, whole numbers or strings. */
int so_opts_read(const struct cJSON *j, const char *field, bench_opts *out, bench_opt **mem, char *err, size_t errlen);

#endif
