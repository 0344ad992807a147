#include "harness_jsonschema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "util/ut_fs.h"

typedef struct hjs_ctx {
    const cJSON *root;
    int n;
    char *err;
    size_t errlen;
} hjs_ctx;

static void hjs_fail(hjs_ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void hjs_fail(hjs_ctx *c, const char *path, const char *fmt, ...) {
    if (c->n++ >= 8 || !c->err) return;
    size_t used = strlen(c->err);
    if (used + 1 >= c->errlen) return;
    int n = snprintf(c->err + used, c->errlen - used, "%s: ", *path ? path : ".");
    if (n < 0 || (size_t)n >= c->errlen - used) return;
    used += (size_t)n;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + used, c->errlen - used, fmt, ap);
    va_end(ap);
    used = strlen(c->err);
    if (used + 1 < c->errlen) strcat(c->err, "\n");
}

static int hjs_is_type(const cJSON *v, const char *t) {
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    return 0;
}

static const cJSON *hjs_resolve(hjs_ctx *c, const cJSON *s, const char *path) {
    for (int depth = 0; depth < 16; depth++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!cJSON_IsString(ref)) return s;
        const char *pre = "#/definitions/";
        if (strncmp(ref->valuestring, pre, strlen(pre))) {
            hjs_fail(c, path, "schema: unsupported $ref %s", ref->valuestring);
            return NULL;
        }
        const cJSON *defs = cJSON_GetObjectItemCaseSensitive(c->root, "definitions");
        s = cJSON_GetObjectItemCaseSensitive(defs, ref->valuestring + strlen(pre));
        if (!s) {
            hjs_fail(c, path, "schema: $ref %s not found", ref->valuestring);
            return NULL;
        }
    }
    return s;
}

static void hjs_check(hjs_ctx *c, const cJSON *s, const cJSON *v, const char *path) {
    s = hjs_resolve(c, s, path);
    if (!s) return;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(type) && !hjs_is_type(v, type->valuestring)) {
        hjs_fail(c, path, "expected type %s", type->valuestring);
        return;
    }
    if (cJSON_IsArray(type)) {
        int ok = 0;
        for (const cJSON *t = type->child; t && !ok; t = t->next) ok = cJSON_IsString(t) && hjs_is_type(v, t->valuestring);
        if (!ok) {
            char *txt = cJSON_PrintUnformatted(type);
            hjs_fail(c, path, "expected one of the types %s", txt ? txt : "?");
            free(txt);
            return;
        }
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cJSON_IsArray(en)) {
        int ok = 0;
        for (const cJSON *e = en->child; e && !ok; e = e->next) ok = cJSON_Compare(e, v, 1);
        if (!ok) {
            char *txt = cJSON_PrintUnformatted(v);
            hjs_fail(c, path, "value %s is not in the enum", txt ? txt : "?");
            free(txt);
        }
    }
    char sub[1024];
    if (cJSON_IsObject(v)) {
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(v, r->valuestring))
                hjs_fail(c, path, "required property \"%s\" is missing", r->valuestring);
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        for (const cJSON *m = v->child; m; m = m->next) {
            snprintf(sub, sizeof(sub), "%s.%s", path, m->string);
            const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string) : NULL;
            if (ps) hjs_check(c, ps, m, sub);
            else if (cJSON_IsFalse(addl)) hjs_fail(c, sub, "property not allowed by the schema");
            else if (cJSON_IsObject(addl)) hjs_check(c, addl, m, sub);
        }
    }
    if (cJSON_IsArray(v)) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        int i = 0;
        for (const cJSON *m = v->child; items && m; m = m->next, i++) {
            snprintf(sub, sizeof(sub), "%s[%d]", path, i);
            hjs_check(c, items, m, sub);
        }
    }
}

int hjs_validate(const cJSON *schema, const cJSON *doc, char *err, size_t errlen) {
    hjs_ctx c = {.root = schema, .err = err, .errlen = errlen};
    if (err && errlen) err[0] = 0;
    hjs_check(&c, schema, doc, "");
    return c.n;
}

cJSON *hjs_load(const char *path) {
    char err[512];
    char *buf = ut_slurp(path, SIZE_MAX, NULL, err, sizeof(err));
    if (!buf) {
        fprintf(stderr, "hjs_load: %s\n", err);
        return NULL;
    }
    cJSON *j = cJSON_Parse(buf);
    if (!j) fprintf(stderr, "hjs_load: %s is not valid JSON (near: %.40s)\n", path, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    free(buf);
    return j;
}

int hjs_save(const char *path, const cJSON *doc) {
    char *text = cJSON_Print(doc);
    FILE *o = text ? fopen(path, "w") : NULL;
    int ok = o && fputs(text, o) >= 0;
    if (o && fclose(o)) ok = 0;
    free(text);
    if (!ok) fprintf(stderr, "hjs_save: %s: cannot write it\n", path);
    return ok ? 0 : -1;
}

int hjs_results_violations(const cJSON *doc) {
    cJSON *schema = hjs_load("docs/results-schema.json");
    if (!schema) return -1;
    char err[2048];
    int n = hjs_validate(schema, doc, err, sizeof(err));
    if (n) fprintf(stderr, "schema violations (%d):\n%s", n, err);
    cJSON_Delete(schema);
    return n;
}
