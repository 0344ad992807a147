/* A module's options in a worker spec. See spec_opts.h. */
#include "harness/scenario/jsonval.h"
#include "spec_opts.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

cJSON *so_opts_json(const bench_opts *o) {
    cJSON *j = cJSON_CreateObject();
    for (int i = 0; j && o && i < o->n; i++) {
        const bench_opt *v = &o->v[i];
        cJSON *x = v->kind == BENCH_OPTV_BOOL ? cJSON_CreateBool(v->num != 0)
                 : v->kind == BENCH_OPTV_NUM  ? cJSON_CreateNumber((double)v->num)
                                              : cJSON_CreateString(v->value ? v->value : "");
        if (!x) {
            cJSON_Delete(j);
            return NULL;
        }
        cJSON_AddItemToObject(j, v->key, x);
    }
    return j;
}

static const char *so_type(const cJSON *x) {
    return cJSON_IsNumber(x) ? "a number that is not a whole one of at most 2^53" : jv_type(x);
}

int so_opts_read(const cJSON *j, const char *field, bench_opts *out, bench_opt **mem, char *err, size_t errlen) {
    *out = (bench_opts){0, NULL};
    *mem = NULL;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, field);
    if (!o) return 0;
    if (!cJSON_IsObject(o))
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "worker spec: %s: expected an object {\"option\": value}, typed as "
                          "the module's table says (bench run writes it)", field);
    int n = cJSON_GetArraySize(o);
    bench_opt *v = calloc(n ? (size_t)n : 1, sizeof(*v));
    if (!v) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    int k = 0;
    for (const cJSON *x = o->child; x; x = x->next, k++) {
        v[k].key = x->string;
        if (cJSON_IsBool(x)) {
            v[k].kind = BENCH_OPTV_BOOL;
            v[k].num = cJSON_IsTrue(x);
        } else if (cJSON_IsString(x)) {
            v[k].kind = BENCH_OPTV_STR;
            v[k].value = x->valuestring;
        } else if (cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble) &&
                   fabs(x->valuedouble) <= (double)BENCH_OPTV_NUM_MAX) {
            v[k].kind = BENCH_OPTV_NUM;
            v[k].num = (int64_t)x->valuedouble;
        } else {
            free(v);
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "worker spec: %s.%s: expected a boolean, a whole number or a "
                              "string, got %s", field, x->string, so_type(x));
        }
    }
    out->n = k;
    out->v = v;
    *mem = v;
    return 0;
}
