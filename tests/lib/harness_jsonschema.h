/* A validator for the subset of JSON Schema that docs/results-schema.json uses:
 * type (a name or a list), required, properties, items (one schema),
 * enum (strings, numbers), additionalProperties (false or a schema), and
 * $ref to "#/definitions/NAME". Anything else in a schema is ignored. */
#ifndef BENCH_TEST_HARNESS_JSONSCHEMA_H
#define BENCH_TEST_HARNESS_JSONSCHEMA_H

#include <stddef.h>
#include <cJSON.h>

/* Returns the number of violations; the first few are written to err as
 * "<JSON path>: <what>" lines. */
int hjs_validate(const cJSON *schema, const cJSON *doc, char *err, size_t errlen);

/* The violations of docs/results-schema.json in doc (a results.json), the first few printed
 * on stderr; -1 when the schema cannot be read. The tests' one check of a results file. */
int hjs_results_violations(const cJSON *doc);

/* Reads and parses a JSON file; NULL (with a message on stderr) on failure. */
cJSON *hjs_load(const char *path);
/* doc written to path (cJSON_Print's layout); 0, or -1 after printing why. For tests that
 * tamper with a results.json and write it back. */
int hjs_save(const char *path, const cJSON *doc);

#endif
