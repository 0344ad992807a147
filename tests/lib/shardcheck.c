#include "tests/lib/shardcheck.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/report/compare.h"

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static const char *str(const cJSON *o, const char *k) {
    const cJSON *s = get(o, k);
    return cJSON_IsString(s) ? s->valuestring : "";
}
static int num(const cJSON *o, const char *k) {
    const cJSON *x = get(o, k);
    return cJSON_IsNumber(x) ? x->valueint : -1;
}

static const char *vkey(const cJSON *doc, int index) {
    const cJSON *v;
    cJSON_ArrayForEach(v, get(doc, "variants"))
        if (num(v, "index") == index) return str(v, "key");
    return "";
}

static const cJSON *find_run(const cJSON *doc, const char *key, int rep) {
    const cJSON *r;
    cJSON_ArrayForEach(r, get(doc, "runs"))
        if (!cJSON_IsTrue(get(r, "warmup")) && num(r, "repetition") == rep && !strcmp(vkey(doc, num(r, "variant")), key))
            return r;
    return NULL;
}

/* A metric's unit, from the summary of the variant with key. */
static const char *unit_of(const cJSON *doc, const char *key, const char *metric) {
    const cJSON *s;
    cJSON_ArrayForEach(s, get(doc, "summary"))
        if (!strcmp(str(s, "key"), key)) return str(get(get(s, "metrics"), metric), "unit");
    return "";
}

/* The exact-class members of metrics object a, each equal in b. */
static int same_exact(const cJSON *doc, const char *key, const cJSON *a, const cJSON *b, const char *where, char *err,
                      size_t errlen) {
    int n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, a) {
        if (!cJSON_IsNumber(m) || cmp_classify(m->string, unit_of(doc, key, m->string)) != CMP_EXACT) continue;
        const cJSON *o = get(b, m->string);
        if (!cJSON_IsNumber(o) || o->valuedouble != m->valuedouble) {
            snprintf(err, errlen, "%s: %s is %.17g in the merged run, %.17g unsharded", where, m->string, m->valuedouble,
                     cJSON_IsNumber(o) ? o->valuedouble : NAN);
            return -1;
        }
        n++;
    }
    return n;
}

int sck_same_records(const cJSON *merged, const cJSON *full, char *err, size_t errlen) {
    int n = 0, measured = 0;
    const cJSON *va = get(merged, "variants"), *vb = get(full, "variants");
    if (cJSON_GetArraySize(va) != cJSON_GetArraySize(vb)) {
        snprintf(err, errlen, "%d variants merged, %d unsharded", cJSON_GetArraySize(va), cJSON_GetArraySize(vb));
        return -1;
    }
    for (int i = 0; i < cJSON_GetArraySize(va); i++) {
        const cJSON *a = cJSON_GetArrayItem(va, i), *b = cJSON_GetArrayItem(vb, i);
        if (strcmp(str(a, "key"), str(b, "key")) || cJSON_IsTrue(get(a, "selected")) != cJSON_IsTrue(get(b, "selected"))) {
            snprintf(err, errlen, "variant %d: \"%s\" merged, \"%s\" unsharded", i, str(a, "key"), str(b, "key"));
            return -1;
        }
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, get(full, "runs")) measured += !cJSON_IsTrue(get(r, "warmup"));
    int merged_measured = 0;
    cJSON_ArrayForEach(r, get(merged, "runs")) merged_measured += !cJSON_IsTrue(get(r, "warmup"));
    if (measured != merged_measured) {
        snprintf(err, errlen, "%d measured records merged, %d unsharded", merged_measured, measured);
        return -1;
    }
    cJSON_ArrayForEach(r, get(full, "runs")) {
        if (cJSON_IsTrue(get(r, "warmup"))) continue;
        const char *key = str(r, "key");
        int rep = num(r, "repetition");
        char where[256];
        snprintf(where, sizeof(where), "%s repetition %d", key, rep);
        const cJSON *m = find_run(merged, key, rep);
        if (!m) {
            snprintf(err, errlen, "%s: not in the merged records", where);
            return -1;
        }
        if (strcmp(str(m, "status"), str(r, "status")) || cJSON_IsTrue(get(m, "counted")) != cJSON_IsTrue(get(r, "counted"))) {
            snprintf(err, errlen, "%s: status %s merged, %s unsharded", where, str(m, "status"), str(r, "status"));
            return -1;
        }
        int k = same_exact(full, key, get(m, "metrics"), get(r, "metrics"), where, err, errlen);
        if (k < 0) return -1;
        n += k;
        const cJSON *pm = get(m, "processes"), *pr = get(r, "processes");
        if (cJSON_GetArraySize(pm) != cJSON_GetArraySize(pr)) {
            snprintf(err, errlen, "%s: %d processes merged, %d unsharded", where, cJSON_GetArraySize(pm), cJSON_GetArraySize(pr));
            return -1;
        }
        for (int p = 0; p < cJSON_GetArraySize(pr); p++) {
            const cJSON *a = cJSON_GetArrayItem(pm, p), *b = cJSON_GetArrayItem(pr, p);
            if ((k = same_exact(full, key, get(a, "metrics"), get(b, "metrics"), where, err, errlen)) < 0) return -1;
            n += k;
            if (num(a, "prompt_tokens") != num(b, "prompt_tokens")) {
                snprintf(err, errlen, "%s: %d prompt tokens merged, %d unsharded", where, num(a, "prompt_tokens"), num(b, "prompt_tokens"));
                return -1;
            }
            const cJSON *ta = get(get(a, "tokens"), "id"), *tb = get(get(b, "tokens"), "id");
            if (!cJSON_Compare(ta, tb, 1)) {
                snprintf(err, errlen, "%s: the generated token ids differ", where);
                return -1;
            }
            n += cJSON_GetArraySize(tb);
        }
    }
    const cJSON *sb;
    cJSON_ArrayForEach(sb, get(full, "summary")) {
        const cJSON *sa = NULL, *s;
        cJSON_ArrayForEach(s, get(merged, "summary")) if (!strcmp(str(s, "key"), str(sb, "key"))) sa = s;
        if (!sa || num(sa, "repetitions_counted") != num(sb, "repetitions_counted")) {
            snprintf(err, errlen, "summary of %s: %d counted merged, %d unsharded", str(sb, "key"),
                     sa ? num(sa, "repetitions_counted") : -1, num(sb, "repetitions_counted"));
            return -1;
        }
        const cJSON *m;
        cJSON_ArrayForEach(m, get(sb, "metrics")) {
            if (cmp_classify(m->string, str(m, "unit")) != CMP_EXACT || !strncmp(m->string, "instructions", 12)) continue;
            const cJSON *o = get(get(sa, "metrics"), m->string);
            if (num(o, "n") != num(m, "n") || !cJSON_IsNumber(get(o, "median")) ||
                get(o, "median")->valuedouble != get(m, "median")->valuedouble) {
                snprintf(err, errlen, "summary of %s: %s differs (n %d and %d)", str(sb, "key"), m->string, num(o, "n"), num(m, "n"));
                return -1;
            }
            n++;
        }
    }
    return n;
}
