/* What the parsers say about a JSON value (jsonval.h). */
#include "harness/scenario/jsonval.h"

#include <cJSON.h>
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
