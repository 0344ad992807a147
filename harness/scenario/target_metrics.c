/* The http target's metrics block: see target_metrics.h. */
#include "target_metrics.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/module.h"
#include "harness/scenario/jsonval.h"

/* A server's series worth watching beside its memory: the KV cache's use and the queue. */
static const struct tm_preset {
    const char *name;
    const char *series[6][2];       /* {name, fallback or NULL}; ends at a NULL name */
} tm_presets[] = {
    {"llama-server", {{"llamacpp:kv_cache_usage_ratio"}, {"llamacpp:requests_processing"}, {"llamacpp:requests_deferred"}}},
    /* vLLM V1 renamed gpu_cache_usage_perc; prometheus_client writes a counter with _total */
    {"vllm", {{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, {"vllm:num_requests_running"},
              {"vllm:num_requests_waiting"}, {"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"}}},
    {"sglang", {{"sglang:token_usage"}, {"sglang:num_running_reqs"}, {"sglang:num_queue_reqs"}}},
    {"bench", {{"bench:kv_cache_usage_ratio"}, {"bench:requests_running"}, {"bench:requests_waiting"},
               {"bench:kv_cache_used_bytes"}}},
};
enum { TM_N_PRESETS = (int)(sizeof(tm_presets) / sizeof(tm_presets[0])) };

const char *tm_preset_name(int i) { return i >= 0 && i < TM_N_PRESETS ? tm_presets[i].name : NULL; }

static const struct tm_preset *tm_preset(const char *name) {
    for (int i = 0; i < TM_N_PRESETS; i++)
        if (!strcmp(tm_presets[i].name, name)) return &tm_presets[i];
    return NULL;
}

static int tm_preset_len(const struct tm_preset *p) {
    int n = 0;
    while (n < 6 && p->series[n][0]) n++;
    return n;
}

int tm_preset_series(const tm_spec *t) { return tm_preset_name(t->preset) ? tm_preset_len(&tm_presets[t->preset]) : 0; }

static void tm_err(tm_err_fn fn, void *user, const char *path, const char *key, const char *msg) {
    char q[360];
    snprintf(q, sizeof(q), "%.300s%s%s", path, key ? "." : "", key ? key : "");
    fn(user, q, msg);
}

/* The name part of a selector, and a label set that at least closes: the labels themselves are
 * read by the scraper (harness/net/prom.h, a layer this one does not use), which fails the
 * repetition naming the series before any request is sent. */
static int tm_selector_ok(const char *s) {
    const char *p = s;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || *p == ':')) return 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == ':') p++;
    if (!*p) return 1;
    size_t n = strlen(p);
    return *p == '{' && p[n - 1] == '}' && !strchr(p, '\n');
}

int tm_check(const cJSON *m, const char *path, tm_err_fn fn, void *user) {
    char msg[512];
    if (!cJSON_IsObject(m)) {
        snprintf(msg, sizeof(msg), "expected an object {\"preset\": ..., \"series\": [...], \"period_s\": 0.5, \"url\": ...}, got %s",
                 jv_type(m));
        tm_err(fn, user, path, NULL, msg);
        return 1;
    }
    int bad = 0, n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, m) {
        if (strcmp(it->string, "url") && strcmp(it->string, "period_s") && strcmp(it->string, "preset") && strcmp(it->string, "series")) {
            snprintf(msg, sizeof(msg), "unknown key \"%.100s\" (allowed: url, period_s, preset, series)", it->string);
            tm_err(fn, user, path, it->string, msg);
            bad++;
        }
    }
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(m, "url"), *per = cJSON_GetObjectItemCaseSensitive(m, "period_s");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(m, "preset"), *ser = cJSON_GetObjectItemCaseSensitive(m, "series");
    if (url && (!cJSON_IsString(url) || (strncmp(url->valuestring, "http://", 7) && strncmp(url->valuestring, "https://", 8)))) {
        snprintf(msg, sizeof(msg), "expected a URL starting http:// or https://, got %s", jv_type(url));
        tm_err(fn, user, path, "url", msg);
        bad++;
    }
    if (per && (!cJSON_IsNumber(per) || !(per->valuedouble >= 0.05 && per->valuedouble <= 3600))) {
        tm_err(fn, user, path, "period_s", "expected seconds between two reads of /metrics, a number from 0.05 to 3600");
        bad++;
    }
    if (pre) {
        const struct tm_preset *p = cJSON_IsString(pre) ? tm_preset(pre->valuestring) : NULL;
        if (!p) {
            char have[160] = "";
            for (int i = 0; i < TM_N_PRESETS; i++)
                snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s\"%s\"", i ? ", " : "", tm_presets[i].name);
            snprintf(msg, sizeof(msg), "unknown preset %s%.100s%s (have: %s)", cJSON_IsString(pre) ? "\"" : "",
                     cJSON_IsString(pre) ? pre->valuestring : jv_type(pre), cJSON_IsString(pre) ? "\"" : "", have);
            tm_err(fn, user, path, "preset", msg);
            bad++;
        } else {
            n += tm_preset_len(p);
        }
    }
    if (ser && !cJSON_IsArray(ser)) {
        snprintf(msg, sizeof(msg), "expected a list of series names, e.g. [\"vllm:num_requests_running\"], got %s", jv_type(ser));
        tm_err(fn, user, path, "series", msg);
        bad++;
    } else if (ser) {
        int i = 0;
        cJSON_ArrayForEach(it, ser) {
            char k[40];
            snprintf(k, sizeof(k), "series[%d]", i++);
            if (!cJSON_IsString(it) || !tm_selector_ok(it->valuestring)) {
                snprintf(msg, sizeof(msg), "expected a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), optionally with labels "
                         "name{label=\"value\"}, got %s%.100s%s", cJSON_IsString(it) ? "\"" : "",
                         cJSON_IsString(it) ? it->valuestring : jv_type(it), cJSON_IsString(it) ? "\"" : "");
                tm_err(fn, user, path, k, msg);
                bad++;
            }
            n++;
        }
    }
    if (!pre && !ser) {
        tm_err(fn, user, path, NULL, "expected \"preset\" (llama-server, vllm, sglang, bench) or \"series\" (names): nothing to read");
        bad++;
    } else if (n == 0 && !bad) {
        tm_err(fn, user, path, "series", "expected at least one series name");
        bad++;
    } else if (n > TM_MAX_SERIES) {
        snprintf(msg, sizeof(msg), "%d series, more than %d", n, TM_MAX_SERIES);
        tm_err(fn, user, path, NULL, msg);
        bad++;
    }
    return bad;
}

void tm_free(tm_spec *t) {
    if (!t) return;
    free(t->url);
    for (int i = 0; i < t->n; i++) {
        free(t->s[i].name);
        free(t->s[i].fallback);
    }
    memset(t, 0, sizeof(*t));
    t->preset = -1;
}

static int tm_add(tm_spec *t, const char *name, const char *fallback) {
    if (t->n == TM_MAX_SERIES) return 0;    /* tm_check refused more */
    tm_series *s = &t->s[t->n++];
    s->name = strdup(name);
    s->fallback = fallback ? strdup(fallback) : NULL;
    return s->name && (!fallback || s->fallback) ? 0 : -1;
}

int tm_from_json(const cJSON *m, tm_spec *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    out->preset = -1;
    if (!cJSON_IsObject(m)) return bench_errf(err, errlen, "target.http.metrics: expected an object");
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(m, "url"), *per = cJSON_GetObjectItemCaseSensitive(m, "period_s");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(m, "preset"), *ser = cJSON_GetObjectItemCaseSensitive(m, "series");
    out->period_s = cJSON_IsNumber(per) ? per->valuedouble : TM_DEFAULT_PERIOD_S;
    int oom = cJSON_IsString(url) && !(out->url = strdup(url->valuestring));
    const struct tm_preset *p = cJSON_IsString(pre) ? tm_preset(pre->valuestring) : NULL;
    if (pre && !p) {
        tm_free(out);
        return bench_errf(err, errlen, "target.http.metrics.preset: unknown preset");
    }
    if (p) out->preset = (int)(p - tm_presets);
    for (int i = 0; p && i < tm_preset_len(p); i++) oom |= tm_add(out, p->series[i][0], p->series[i][1]) != 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, ser) if (cJSON_IsString(it)) oom |= tm_add(out, it->valuestring, NULL) != 0;
    if (oom) {
        tm_free(out);
        return bench_errf(err, errlen, "out of memory");
    }
    return 0;
}

cJSON *tm_to_json(const tm_spec *t) {
    cJSON *m = cJSON_CreateObject();
    int ok = m != NULL;
    if (ok && t->url) ok = cJSON_AddStringToObject(m, "url", t->url) != NULL;
    if (ok) ok = cJSON_AddNumberToObject(m, "period_s", t->period_s) != NULL;
    if (ok && tm_preset_name(t->preset)) ok = cJSON_AddStringToObject(m, "preset", tm_preset_name(t->preset)) != NULL;
    if (ok && t->n > tm_preset_series(t)) {
        cJSON *ser = cJSON_AddArrayToObject(m, "series");
        for (int i = tm_preset_series(t); ser && i < t->n; i++) {
            cJSON *x = cJSON_CreateString(t->s[i].name);
            if (!x) ser = NULL;
            else cJSON_AddItemToArray(ser, x);
        }
        ok = ser != NULL;
    }
    if (!ok) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}
