/* What the parsers say about a JSON value (jsonval.h). */
#include "harness/scenario/jsonval.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *jv_type(const cJSON *j) {
    if (!j) return "nothing";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "invalid";
}

int jv_enum(const char *s, const char *const *names) {
    for (int i = 0; s && names[i]; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

void jv_join(char *buf, size_t len, const char *const *names) {
    if (!len) return;
    buf[0] = 0;
    for (int i = 0; names[i]; i++) {
        if (i) strncat(buf, ", ", len - strlen(buf) - 1);
        strncat(buf, names[i], len - strlen(buf) - 1);
    }
}

int jv_int(const cJSON *j, long long lo, long long hi, long long *out, char *msg, size_t len) {
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || !isfinite(j->valuedouble)) {
        snprintf(msg, len, "expected an integer, got %s", cJSON_IsNumber(j) ? "a fraction" : jv_type(j));
        return -1;
    }
    if (j->valuedouble < (double)lo || j->valuedouble > (double)hi) {
        snprintf(msg, len, "%.17g is out of range: expected %lld .. %lld", j->valuedouble, lo, hi);
        return -1;
    }
    *out = (long long)j->valuedouble;
    return 0;
}
