/* A scenario's target: see target.h. */
#include "engines/abi/module.h"
#include "harness/scenario/jsonval.h"
#include "harness/scenario/target_metrics.h"
#include "target.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void tg_err(tg_err_fn fn, void *user, const char *path, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void tg_err(tg_err_fn fn, void *user, const char *path, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fn(user, path, msg);
}

static int tg_is_key(const char *k, const char *const *keys) {
    for (int i = 0; keys[i]; i++)
        if (!strcmp(k, keys[i])) return 1;
    return 0;
}

static const char *const tg_http_keys[] = {"url", "launch", "health", "ready_timeout_s", "request_timeout_s",
                                           "stop_timeout_s", "pid", "model", "concurrency", "ignore_eos", "metrics",
                                           "memory", NULL};

static const char *const tg_placeholders[] = {"bench", "model", "tokenizer", "port", NULL};

/* The first {name} in word whose name is a placeholder bench does not know, into bad
 * (empty: none). Only {lowercase_name} counts: other braces (a JSON argument) pass. */
static void tg_unknown_placeholder(const char *word, char *bad, size_t len) {
    bad[0] = 0;
    for (const char *o = strchr(word, '{'); o; o = strchr(o + 1, '{')) {
        size_t n = strspn(o + 1, "abcdefghijklmnopqrstuvwxyz_");
        if (!n || o[1 + n] != '}') continue;
        int known = 0;
        for (int i = 0; tg_placeholders[i]; i++) known |= strlen(tg_placeholders[i]) == n && !strncmp(o + 1, tg_placeholders[i], n);
        if (!known) {
            snprintf(bad, len, "%.*s", (int)(n + 2 < 64 ? n + 2 : 64), o);
            return;
        }
    }
}

/* launch: a list of words, each one argument of execvp (no shell: a scenario is data, and
 * a placeholder's value is never split or read as shell syntax). The errors' count. */
static int tg_check_launch(const cJSON *launch, const char *q, tg_err_fn fn, void *user) {
    if (cJSON_IsString(launch)) {
        tg_err(fn, user, q, "expected the command as a list of words, e.g. [\"{bench}\", \"serve\", \"--model\", \"{model}\", "
               "\"--port\", \"{port}\"]: a command line string would need a shell, and nothing in a scenario runs through one");
        return 1;
    }
    if (!cJSON_IsArray(launch) || cJSON_GetArraySize(launch) < 1) {
        tg_err(fn, user, q, "expected a non-empty list of words (the program, then its arguments), got %s",
               cJSON_IsArray(launch) ? "an empty list" : jv_type(launch));
        return 1;
    }
    int bad = 0, i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, launch) {
        char w[320], unknown[72];
        snprintf(w, sizeof(w), "%.300s[%d]", q, i++);
        if (!cJSON_IsString(it) || !it->valuestring[0]) {
            tg_err(fn, user, w, "expected a non-empty string (one argument), got %s", cJSON_IsString(it) ? "\"\"" : jv_type(it));
            bad++;
            continue;
        }
        tg_unknown_placeholder(it->valuestring, unknown, sizeof(unknown));
        if (unknown[0]) {
            tg_err(fn, user, w, "unknown placeholder %s (have: {bench}, {model}, {tokenizer}, {port})", unknown);
            bad++;
        }
    }
    return bad;
}

/* memory: "process" (the server's pid alone, the default) or "tree" (it and every process
 * below it), which needs a process to start from. The errors' count. */
static int tg_check_memory(const cJSON *h, const char *p, tg_err_fn fn, void *user) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(h, "memory");
    if (!v) return 0;
    char q[300];
    snprintf(q, sizeof(q), "%.200s.memory", p);
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "process") && strcmp(v->valuestring, "tree"))) {
        tg_err(fn, user, q, "expected \"process\" (the server's pid) or \"tree\" (it and all its descendants), got %s",
               cJSON_IsString(v) ? v->valuestring : jv_type(v));
        return 1;
    }
    if (!strcmp(v->valuestring, "tree") && !cJSON_GetObjectItemCaseSensitive(h, "launch") && !cJSON_GetObjectItemCaseSensitive(h, "pid")) {
        tg_err(fn, user, q, "\"tree\" sums the server's process tree: give launch or pid, whose tree it is");
        return 1;
    }
    return 0;
}

/* Every check of an http object; returns the count of errors. */
static int tg_check_http(const cJSON *h, const char *p, tg_err_fn fn, void *user) {
    char q[300];
    int bad = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, h) {
        if (!tg_is_key(it->string, tg_http_keys)) {
            snprintf(q, sizeof(q), "%.200s.%s", p, it->string);
            tg_err(fn, user, q, "unknown key \"%s\" (allowed: url, launch, health, ready_timeout_s, request_timeout_s, "
                   "stop_timeout_s, pid, model, concurrency, ignore_eos, metrics, memory)", it->string);
            bad++;
        }
    }
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(h, "url"), *launch = cJSON_GetObjectItemCaseSensitive(h, "launch");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(h, "pid");
    snprintf(q, sizeof(q), "%.200s.url", p);
    if (!url) {
        tg_err(fn, user, q, "required: the server's base URL, e.g. \"http://127.0.0.1:8080\"");
        bad++;
    } else if (!cJSON_IsString(url) || (strncmp(url->valuestring, "http://", 7) && strncmp(url->valuestring, "https://", 8))) {
        tg_err(fn, user, q, "expected a URL starting http:// or https://, got %s", cJSON_IsString(url) ? url->valuestring : jv_type(url));
        bad++;
    } else if (strstr(url->valuestring, "{port}") && !launch) {
        tg_err(fn, user, q, "{port} is a free port bench picks for a server it launches: give \"launch\", or the port");
        bad++;
    }
    if (launch) {
        snprintf(q, sizeof(q), "%.200s.launch", p);
        bad += tg_check_launch(launch, q, fn, user);
        if (pid) {
            snprintf(q, sizeof(q), "%.200s.pid", p);
            tg_err(fn, user, q, "a launched server's pid is the one bench starts: give launch or pid, not both");
            bad++;
        }
    }
    if (pid && (!cJSON_IsNumber(pid) || pid->valuedouble < 1 || pid->valuedouble > 4194304 ||
                pid->valuedouble != (double)(int)pid->valuedouble)) {
        snprintf(q, sizeof(q), "%.200s.pid", p);
        tg_err(fn, user, q, "expected a process id (a whole number from 1 to 4194304), got %s", jv_type(pid));
        bad++;
    }
    static const char *const secs[] = {"ready_timeout_s", "request_timeout_s", "stop_timeout_s"};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(h, secs[i]);
        /* from 1 ms: below it the client's millisecond timeout would round to 0, which curl
         * reads as no timeout at all */
        if (v && (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.001 && v->valuedouble <= 86400))) {
            snprintf(q, sizeof(q), "%.200s.%s", p, secs[i]);
            tg_err(fn, user, q, "expected seconds, a number from 0.001 to 86400, got %s",
                   cJSON_IsNumber(v) ? "a number out of range" : jv_type(v));
            bad++;
        }
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(h, "concurrency");
    if (v && (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 65536 || v->valuedouble != (double)(int)v->valuedouble)) {
        snprintf(q, sizeof(q), "%.200s.concurrency", p);
        tg_err(fn, user, q, "expected a whole number from 0 (the workload's max_batch, else every request) to 65536");
        bad++;
    }
    static const char *const strs[] = {"health", "model"};
    for (int i = 0; i < 2; i++) {
        v = cJSON_GetObjectItemCaseSensitive(h, strs[i]);
        if (v && (!cJSON_IsString(v) || (i == 0 && v->valuestring[0] != '/'))) {
            snprintf(q, sizeof(q), "%.200s.%s", p, strs[i]);
            tg_err(fn, user, q, i == 0 ? "expected a path starting with /, e.g. \"/health\"" : "expected a string");
            bad++;
        }
    }
    /* the server's /metrics read while it serves (target_metrics.h) */
    v = cJSON_GetObjectItemCaseSensitive(h, "metrics");
    if (v) {
        snprintf(q, sizeof(q), "%.200s.metrics", p);
        bad += tm_check(v, q, fn, user);
    }
    v = cJSON_GetObjectItemCaseSensitive(h, "ignore_eos");
    if (v && !cJSON_IsBool(v)) {
        snprintf(q, sizeof(q), "%.200s.ignore_eos", p);
        tg_err(fn, user, q, "expected true or false");
        bad++;
    }
    bad += tg_check_memory(h, p, fn, user);
    return bad;
}

static int tg_fill(const cJSON *o, tg_http *h, char *err, size_t errlen);

int tg_parse(const cJSON *j, const char *path, char **name, char **label, tg_http **http, tg_err_fn fn, void *user) {
    *name = *label = NULL;
    *http = NULL;
    char q[300];
    if (cJSON_IsString(j)) {
        if (strcmp(j->valuestring, "engine")) {
            tg_err(fn, user, path, "unknown target \"%s\" (have: \"engine\", or {\"label\": ..., \"http\": {...}})", j->valuestring);
            return -1;
        }
        *name = strdup("engine");
        *label = strdup("engine");
        return *name && *label ? 0 : -1;
    }
    if (!cJSON_IsObject(j)) {
        tg_err(fn, user, path, "expected \"engine\" or {\"label\": ..., \"http\": {\"url\": ...}}, got %s", jv_type(j));
        return -1;
    }
    int bad = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, j) {
        if (strcmp(it->string, "label") && strcmp(it->string, "http")) {
            snprintf(q, sizeof(q), "%.200s.%s", path, it->string);
            tg_err(fn, user, q, "unknown key \"%s\" (allowed: label, http)", it->string);
            bad++;
        }
    }
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(j, "label"), *h = cJSON_GetObjectItemCaseSensitive(j, "http");
    if (lb && (!cJSON_IsString(lb) || !lb->valuestring[0] || strpbrk(lb->valuestring, ",= "))) {
        snprintf(q, sizeof(q), "%.200s.label", path);
        tg_err(fn, user, q, "expected a name without ',', '=' or spaces (it names the variant)");
        bad++;
    }
    snprintf(q, sizeof(q), "%.200s.http", path);
    if (!cJSON_IsObject(h)) {
        tg_err(fn, user, q, "required: an object {\"url\": ..., \"launch\": ...}, got %s", h ? jv_type(h) : "nothing");
        return -1;
    }
    bad += tg_check_http(h, q, fn, user);
    if (bad) return -1;
    char e[512];
    *http = calloc(1, sizeof(**http));
    if (!*http || tg_fill(h, *http, e, sizeof(e))) {
        tg_err(fn, user, q, "%s", *http ? e : "out of memory");
        free(*http);
        *http = NULL;
        return -1;
    }
    *name = strdup("http");
    *label = strdup(cJSON_IsString(lb) ? lb->valuestring : "http");
    return *name && *label ? 0 : -1;
}

void tg_http_free(tg_http *h) {
    if (!h) return;
    free(h->url);
    free(h->health);
    free(h->model);
    for (int i = 0; h->launch && h->launch[i]; i++) free(h->launch[i]);
    free(h->launch);
    tm_free(&h->metrics);
    memset(h, 0, sizeof(*h));
    h->metrics.preset = -1;
}

static double tg_num(const cJSON *o, const char *k, double def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* A checked http object into h, defaults for what it leaves out. 0, or -1 with err. */
static int tg_fill(const cJSON *o, tg_http *h, char *err, size_t errlen) {
    memset(h, 0, sizeof(*h));
    h->metrics.preset = -1;
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(o, "url"), *health = cJSON_GetObjectItemCaseSensitive(o, "health");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model"), *launch = cJSON_GetObjectItemCaseSensitive(o, "launch");
    h->url = strdup(url->valuestring);
    h->health = strdup(cJSON_IsString(health) ? health->valuestring : "/health");
    h->model = cJSON_IsString(model) ? strdup(model->valuestring) : NULL;
    int oom = !h->url || !h->health || (cJSON_IsString(model) && !h->model);
    if (cJSON_IsArray(launch)) {
        int n = cJSON_GetArraySize(launch), i = 0;
        h->launch = calloc((size_t)n + 1, sizeof(char *));
        const cJSON *it;
        cJSON_ArrayForEach(it, launch) if (h->launch) oom |= !(h->launch[i++] = strdup(it->valuestring));
        oom |= !h->launch;
    }
    h->ready_timeout_s = tg_num(o, "ready_timeout_s", 120);
    h->request_timeout_s = tg_num(o, "request_timeout_s", 300);
    h->stop_timeout_s = tg_num(o, "stop_timeout_s", 10);
    h->pid = (int)tg_num(o, "pid", 0);
    h->concurrency = (int)tg_num(o, "concurrency", 0);
    const cJSON *ie = cJSON_GetObjectItemCaseSensitive(o, "ignore_eos");
    h->ignore_eos = ie ? cJSON_IsTrue(ie) : 1;
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(o, "memory");
    h->memory_tree = cJSON_IsString(mem) && !strcmp(mem->valuestring, "tree");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "metrics");
    if (oom || (m && tm_from_json(m, &h->metrics, err, errlen))) {
        if (oom) snprintf(err, errlen, "out of memory");
        tg_http_free(h);
        return -1;
    }
    return 0;
}

cJSON *tg_to_json(const tg_http *h) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = cJSON_AddStringToObject(o, "url", h->url) && cJSON_AddStringToObject(o, "health", h->health);
    if (ok && h->launch) {
        cJSON *l = cJSON_AddArrayToObject(o, "launch");
        for (int i = 0; l && h->launch[i]; i++) {
            cJSON *w = cJSON_CreateString(h->launch[i]);
            if (!w) l = NULL;
            else cJSON_AddItemToArray(l, w);
        }
        ok = l != NULL;
    }
    if (ok && h->pid) ok = cJSON_AddNumberToObject(o, "pid", h->pid) != NULL;
    if (ok && h->model) ok = cJSON_AddStringToObject(o, "model", h->model) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "ready_timeout_s", h->ready_timeout_s) &&
         cJSON_AddNumberToObject(o, "request_timeout_s", h->request_timeout_s) &&
         cJSON_AddNumberToObject(o, "stop_timeout_s", h->stop_timeout_s) && cJSON_AddNumberToObject(o, "concurrency", h->concurrency) &&
         cJSON_AddBoolToObject(o, "ignore_eos", h->ignore_eos) &&
         cJSON_AddStringToObject(o, "memory", h->memory_tree ? "tree" : "process");
    if (ok && h->metrics.n) {
        cJSON *m = tm_to_json(&h->metrics);
        if (m) cJSON_AddItemToObject(o, "metrics", m);
        ok = m != NULL;
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* tg_check_http's first error, for a reader that reports one. */
typedef struct tg_first {
    char *buf;
    size_t len;
    int n;
} tg_first;

static void tg_keep_first(void *user, const char *path, const char *msg) {
    tg_first *f = user;
    if (!f->n++) snprintf(f->buf, f->len, "%s: %s", path, msg);
}

int tg_from_json(const cJSON *o, tg_http *h, char *err, size_t errlen) {
    memset(h, 0, sizeof(*h));
    h->metrics.preset = -1;
    tg_first first = {err, errlen, 0};
    if (!cJSON_IsObject(o)) return bench_errf(err, errlen, "target.http: expected an object");
    if (tg_check_http(o, "target.http", tg_keep_first, &first)) return -1;
    return tg_fill(o, h, err, errlen);
}

char *tg_expand(const char *tmpl, const char *const *keys, const char *const *vals, int n) {
    size_t cap = strlen(tmpl) + 1, len = 0;
    for (int i = 0; i < n; i++) cap += 8 * (vals[i] ? strlen(vals[i]) : 0);   /* a placeholder used up to 8 times */
    char *out = malloc(cap);
    if (!out) return NULL;
    for (const char *p = tmpl; *p;) {
        int hit = -1;
        size_t kl = 0;
        for (int i = 0; *p == '{' && i < n; i++) {
            kl = strlen(keys[i]);
            if (!strncmp(p + 1, keys[i], kl) && p[1 + kl] == '}') {
                hit = i;
                break;
            }
        }
        const char *add = hit >= 0 ? (vals[hit] ? vals[hit] : "") : p;
        size_t al = hit >= 0 ? strlen(add) : 1;
        if (len + al + 1 > cap) {
            cap = (len + al + 1) * 2;
            char *b = realloc(out, cap);
            if (!b) {
                free(out);
                return NULL;
            }
            out = b;
        }
        memcpy(out + len, add, al);
        len += al;
        p += hit >= 0 ? kl + 2 : 1;
    }
    out[len] = 0;
    return out;
}
