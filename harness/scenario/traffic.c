/* Serving traffic, the scenario's half: see traffic.h. */
#include "traffic.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "harness/scenario/jsonval.h"
#include "harness/scenario/confine.h"

/* ======================================================================
 * Errors: the scenario's form, "<file>: <JSON path>: <message>"
 * ====================================================================== */

typedef struct tf_ctx {
    const char *file;
    sc_errors *errs;
    int n0;
} tf_ctx;

static void tf_err(tf_ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void tf_err(tf_ctx *c, const char *path, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t len = strlen(c->file) + strlen(path) + strlen(msg) + 8;
    char *line = malloc(len);
    char **nv = realloc(c->errs->v, (size_t)(c->errs->n + 1) * sizeof(char *));
    if (nv) c->errs->v = nv;
    if (!line || !nv) {
        free(line);
        return;
    }
    snprintf(line, len, "%s: %s: %s", c->file, path, msg);
    c->errs->v[c->errs->n++] = line;
}

static void tf_keys(tf_ctx *c, const cJSON *o, const char *path, const char *const *allowed, const char *want) {
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= !strcmp(it->string, allowed[i]);
        if (!ok) tf_err(c, path, "unknown key \"%s\": expected %s", it->string, want);
    }
}

/* o.key as a number in (lo, hi] (lo_open) or [lo, hi]; absent: *out untouched, 0 (or an
 * error when required). -1 on an error. */
static int tf_num(tf_ctx *c, const cJSON *o, const char *key, const char *path, int required, double lo, int lo_open,
                  double hi, int integer, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char p[256];
    snprintf(p, sizeof(p), "%s.%s", path, key);
    const char *what = integer ? "an integer" : "a number";
    if (!v) {
        if (required) tf_err(c, p, "required: %s %s%g .. %g", what, lo_open ? "more than " : "", lo, hi);
        return required ? -1 : 0;
    }
    if (!cJSON_IsNumber(v) || (integer && v->valuedouble != floor(v->valuedouble)) ||
        !(lo_open ? v->valuedouble > lo : v->valuedouble >= lo) || v->valuedouble > hi) {
        char got[64];
        if (cJSON_IsNumber(v)) snprintf(got, sizeof(got), "%g", v->valuedouble);
        else snprintf(got, sizeof(got), "%s", jv_type(v));
        tf_err(c, p, "expected %s %s%g .. %g, got %s", what, lo_open ? "more than " : "", lo, hi, got);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

/* {"fixed": X} | {"uniform": [LO, HI]} of numbers in [lo, hi]. */
static void tf_range(tf_ctx *c, const cJSON *o, const char *key, const char *path, double lo, double hi, int integer,
                     double *a, double *b) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    char p[256];
    snprintf(p, sizeof(p), "%s.%s", path, key);
    const char *want = "{\"fixed\": X} or {\"uniform\": [LO, HI]}";
    if (!j) {
        tf_err(c, p, "required: %s", want);
        return;
    }
    if (!cJSON_IsObject(j) || cJSON_GetArraySize(j) != 1) {
        tf_err(c, p, "expected %s, got %s", want, cJSON_IsObject(j) ? "an object without exactly one key" : jv_type(j));
        return;
    }
    const cJSON *v = j->child;
    char q[300];
    snprintf(q, sizeof(q), "%s.%s", p, v->string);
    if (!strcmp(v->string, "fixed")) {
        if (!tf_num(c, j, "fixed", p, 1, lo, 0, hi, integer, a)) *b = *a;
    } else if (!strcmp(v->string, "uniform")) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(v->child) || !cJSON_IsNumber(v->child->next)) {
            tf_err(c, q, "expected [LO, HI] (two numbers, LO <= HI), got %s", jv_type(v));
            return;
        }
        double x = v->child->valuedouble, y = v->child->next->valuedouble;
        if (x < lo || y > hi || y < x || (integer && (x != floor(x) || y != floor(y)))) {
            tf_err(c, q, "[%g, %g]: expected %s %g <= LO <= HI <= %g", x, y, integer ? "integers" : "numbers", lo, hi);
            return;
        }
        *a = x;
        *b = y;
    } else {
        tf_err(c, p, "unknown key \"%s\": expected %s", v->string, want);
    }
}

/* ======================================================================
 * The keys
 * ====================================================================== */

int tf_scale_len(int len, double scale, int cap) {
    double v = llround((double)len * scale);
    if (cap > 0 && v > cap) v = cap;
    return v < 1 ? 1 : v > TR_MAX_TOKENS ? TR_MAX_TOKENS : (int)v;
}

int tf_block_tokens(const tr_trace *t, double scale) {
    if (!t || !t->block_tokens) return 0;
    long long b = llround(t->block_tokens * scale);
    return b < 1 ? 1 : (int)b;
}

int tf_hash_needed(int max_prompt, double length_scale) {
    long long bt = llround(TR_MOONCAKE_BLOCK * length_scale), cap = max_prompt > 0 ? max_prompt : TR_MAX_TOKENS;
    if (bt < 1) bt = 1;
    return (int)((cap + bt - 1) / bt);
}

/* Decimal digits of v >= 0 as cJSON prints it: at most 17 significant ones ("%1.17g"). */
static size_t tf_digits(double v) {
    size_t n = 1;
    for (; v >= 10 && n < 17; v /= 10) n++;
    return n;
}

size_t tf_trace_spec_bytes(const tr_trace *t) {
    /* a row: t_s (up to 17 digits, a point and an exponent: 24) and three ints (8 digits
     * each, TR_MAX_TOKENS), each with ", " */
    size_t b = 1024 + (size_t)t->n * (26 + 3 * 10);
    for (size_t k = 0; k < t->n_hash; k++) b += tf_digits((double)t->hash[k]) + 2;
    return b;
}

int tf_has_trace(const cJSON *j) { return cJSON_GetObjectItemCaseSensitive(j, "trace") != NULL; }

static void tf_parse_trace(tf_ctx *c, const cJSON *j, sc_requests *r, tf_traffic *t) {
    const char *p = ".workload.requests.trace";
    static const char *const keys[] = {"file", "format", "requests", "seconds", "time_scale", "length_scale", "max_prompt",
                                       "max_output", NULL};
    if (!cJSON_IsObject(j)) {
        tf_err(c, p, "expected {\"file\": PATH, \"format\": FORMAT, ...} (FORMAT: %s), got %s", tr_format_list(), jv_type(j));
        return;
    }
    int n0 = c->errs->n;
    tf_keys(c, j, p, keys, "file, format, requests, seconds, time_scale, length_scale, max_prompt, max_output");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "file"), *fm = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (!cJSON_IsString(f) || !f->valuestring[0])
        tf_err(c, ".workload.requests.trace.file", "%s: expected the trace's path (a string, relative to the current directory)",
               f ? "not a path" : "required");
    int fmt = cJSON_IsString(fm) ? tr_format_from_name(fm->valuestring) : -1;
    if (fmt < 0)
        tf_err(c, ".workload.requests.trace.format", "%s%s%s: expected one of %s", fm ? "unknown format" : "required",
               cJSON_IsString(fm) ? " " : "", cJSON_IsString(fm) ? fm->valuestring : "", tr_format_list());
    double nreq = 0, secs = 0, mp = 0, mo = 0;
    t->time_scale = t->length_scale = 1;
    tf_num(c, j, "requests", p, 0, 1, 0, TF_MAX_REQUESTS, 1, &nreq);
    tf_num(c, j, "seconds", p, 0, 0, 1, 1e9, 0, &secs);
    tf_num(c, j, "time_scale", p, 0, 0, 1, 1e6, 0, &t->time_scale);
    tf_num(c, j, "length_scale", p, 0, 0, 1, 1e3, 0, &t->length_scale);
    tf_num(c, j, "max_prompt", p, 0, 1, 0, TR_MAX_TOKENS, 1, &mp);
    tf_num(c, j, "max_output", p, 0, 1, 0, TR_MAX_TOKENS, 1, &mo);
    t->max_prompt = (int)mp;
    t->max_output = (int)mo;
    if (c->errs->n > n0) return;
    t->trace_file = strdup(f->valuestring);
    char e[2048], what[64];
    /* checked and opened by one call: nothing swapped in between is read (confine.h) */
    snprintf(what, sizeof(what), "a %s trace", tr_format_name((tr_format)fmt));
    int fd = cf_open_checked(c->file, f->valuestring, what, e, sizeof(e));
    if (fd < 0) {
        tf_err(c, ".workload.requests.trace.file", "%s", e);
        return;
    }
    /* the worker spec carries the requests: at most as many as a scenario may have (one
     * more read to tell a longer trace) */
    tr_window w = {.max_requests = nreq > 0 ? (int)nreq : TF_MAX_REQUESTS + 1, .max_seconds = secs,
                   .max_hash = tf_hash_needed(t->max_prompt, t->length_scale)};
    int rc = tr_read_fd(fd, f->valuestring, (tr_format)fmt, &w, &t->trace, e, sizeof(e));
    close(fd);
    if (rc) {
        tf_err(c, ".workload.requests.trace.file", "%s", e);
        return;
    }
    const tr_trace *tr = t->trace;
    if (tr->n > TF_MAX_REQUESTS) {
        tf_err(c, ".workload.requests.trace", "%s has more than %d requests%s: give a window, \"requests\": N or \"seconds\": S",
               f->valuestring, TF_MAX_REQUESTS, secs > 0 ? " within the seconds given" : "");
        return;
    }
    /* rows are in time order: the last is the latest; scaled, it must still fit in ns */
    if (tr->timed && tr->r[tr->n - 1].t_s / t->time_scale > TR_MAX_SECONDS) {
        tf_err(c, ".workload.requests.trace.time_scale", "%g: the row at %s:%d, %.6g s from the first, would arrive %.6g s in: "
               "expected at most %.0e s (a larger time_scale)", t->time_scale, f->valuestring, tr->r[tr->n - 1].line,
               tr->r[tr->n - 1].t_s, tr->r[tr->n - 1].t_s / t->time_scale, TR_MAX_SECONDS);
        return;
    }
    size_t bytes = tf_trace_spec_bytes(tr);
    if (bytes > TF_MAX_SPEC_BYTES) {
        tf_err(c, ".workload.requests.trace", "%s: %d rows and %zu hash ids make about %zu MiB of worker spec: expected at most %llu "
               "MiB (give \"max_prompt\", which drops the hash ids past it, or a window, \"requests\": N or \"seconds\": S)",
               f->valuestring, tr->n, tr->n_hash, bytes >> 20, TF_MAX_SPEC_BYTES >> 20);
        return;
    }
    r->count = tr->n;
    int plo = TR_MAX_TOKENS, phi = 1, olo = TR_MAX_TOKENS, ohi = 1;
    for (int i = 0; i < tr->n; i++) {
        int a = tf_scale_len(tr->r[i].input, t->length_scale, t->max_prompt);
        int b = tf_scale_len(tr->r[i].output, t->length_scale, t->max_output);
        plo = a < plo ? a : plo;
        phi = a > phi ? a : phi;
        olo = b < olo ? b : olo;
        ohi = b > ohi ? b : ohi;
    }
    /* the lengths' range, for the context check and the table; the rows are the requests */
    r->prompt_len = (sc_dist){.kind = SC_DIST_UNIFORM, .lo = plo, .hi = phi};
    r->output_len = (sc_dist){.kind = SC_DIST_UNIFORM, .lo = olo, .hi = ohi};
}

static void tf_parse_arrival(tf_ctx *c, const cJSON *j, tf_traffic *t) {
    const char *p = ".workload.requests.arrival";
    static const char *const keys[] = {"process", "rate", "burstiness", "rate_end", NULL};
    tf_keys(c, j, p, keys, "process, rate, burstiness, rate_end");
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "process");
    int k = cJSON_IsString(pr) ? ar_kind_from_name(pr->valuestring) : -1;
    if (k < 0) {
        tf_err(c, ".workload.requests.arrival.process", "%s%s%s: expected \"poisson\", \"gamma\", \"constant\", \"ramp\" or \"all\"",
               cJSON_IsString(pr) ? "unknown process \"" : "expected a string, got ", cJSON_IsString(pr) ? pr->valuestring : jv_type(pr),
               cJSON_IsString(pr) ? "\"" : "");
        return;
    }
    t->has_arrival = 1;
    t->arrival = (ar_spec){.kind = (ar_kind)k, .burstiness = 1};
    tf_num(c, j, "rate", p, k != AR_ALL, AR_MIN_RATE, 0, AR_MAX_RATE, 0, &t->arrival.rate);
    if (k == AR_GAMMA) tf_num(c, j, "burstiness", p, 0, 0, 1, 1e6, 0, &t->arrival.burstiness);
    else if (cJSON_GetObjectItemCaseSensitive(j, "burstiness"))
        tf_err(c, ".workload.requests.arrival.burstiness", "only with \"process\": \"gamma\"");
    if (k == AR_RAMP) tf_num(c, j, "rate_end", p, 1, AR_MIN_RATE, 0, AR_MAX_RATE, 0, &t->arrival.rate_end);
    else if (cJSON_GetObjectItemCaseSensitive(j, "rate_end"))
        tf_err(c, ".workload.requests.arrival.rate_end", "only with \"process\": \"ramp\"");
    if (k == AR_ALL && cJSON_GetObjectItemCaseSensitive(j, "rate"))
        tf_err(c, ".workload.requests.arrival.rate", "not with \"process\": \"all\" (every request at 0)");
}

int tf_point_check(double v, double prev, int first, int conc, char *why, size_t len) {
    int ok = conc ? v >= 1 && v <= TF_MAX_SWEEP_CONC && v == floor(v) : v >= AR_MIN_RATE && v <= TF_MAX_SWEEP_RATE;
    if (!ok) {
        if (conc) snprintf(why, len, "expected a whole number of requests in flight, 1 .. %d", TF_MAX_SWEEP_CONC);
        else snprintf(why, len, "expected a rate %g .. %g requests/s (below %g, arrival times overflow)", AR_MIN_RATE, TF_MAX_SWEEP_RATE,
                      AR_MIN_RATE);
        return -1;
    }
    if (!first && v <= prev) {
        snprintf(why, len, "expected more than the previous one, %g (ascending)", prev);
        return -1;
    }
    return 0;
}

int tf_points_parse(const char *text, int conc, double *v, int *n, char *err, size_t errlen) {
    int count = 1;
    for (const char *p = text; *p; p++) count += *p == ',';
    if (count > TF_MAX_RATES)
        return bench_errf(err, errlen, "%d %s: expected at most %d", count, conc ? "caps" : "rates", TF_MAX_RATES);
    *n = 0;
    for (const char *p = text;; p++) {
        size_t k = strcspn(p, ",");
        char word[64], *end, why[160];
        snprintf(word, sizeof(word), "%.*s", (int)(k < sizeof(word) - 1 ? k : sizeof(word) - 1), p);
        double x = strtod(word, &end);
        if (!k || k >= sizeof(word) || end == word || *end)
            return bench_errf(err, errlen, "entry %d, \"%.*s\": expected a number", *n + 1, (int)(k > 40 ? 40 : k), p);
        if (tf_point_check(x, *n ? v[*n - 1] : 0, !*n, conc, why, sizeof(why)))
            return bench_errf(err, errlen, "entry %d, \"%s\": %s", *n + 1, word, why);
        v[(*n)++] = x;
        p += k;
        if (!*p) return 0;
    }
}

static void tf_parse_sessions(tf_ctx *c, const cJSON *j, tf_traffic *t) {
    const char *p = ".workload.requests.sessions";
    if (!cJSON_IsObject(j)) {
        tf_err(c, p, "expected {\"turns\": {\"uniform\": [LO, HI]}, \"think_ms\": {\"fixed\": MS}}, got %s", jv_type(j));
        return;
    }
    static const char *const keys[] = {"turns", "think_ms", NULL};
    tf_keys(c, j, p, keys, "turns, think_ms");
    double a = 0, b = 0;
    tf_range(c, j, "turns", p, 1, 1000, 1, &a, &b);
    t->turns_lo = (int)a;
    t->turns_hi = (int)b;
    tf_range(c, j, "think_ms", p, 0, 3.6e6, 0, &t->think_lo_ms, &t->think_hi_ms);
    t->sessions = 1;
}

/* A JSON list of sweep points (tf_point_check) into v[0 .. *n); 0, or -1 after an error. */
static int tf_parse_points(tf_ctx *c, const cJSON *j, const char *p, int conc, double *v, int *n) {
    int count = cJSON_GetArraySize(j);
    const char *what = conc ? "caps (requests in flight, ascending)" : "rates (requests/s, ascending)";
    *n = 0;
    if (!cJSON_IsArray(j)) {
        tf_err(c, p, "expected a list of 1 .. %d %s, got %s", TF_MAX_RATES, what, jv_type(j));
        return -1;
    }
    if (count < 1 || count > TF_MAX_RATES) {
        tf_err(c, p, "%d entries: expected a list of 1 .. %d %s", count, TF_MAX_RATES, what);
        return -1;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, j) {
        char why[160];
        if (!cJSON_IsNumber(it)) {
            tf_err(c, p, "[%d]: expected a number, got %s", *n, jv_type(it));
            return -1;
        }
        if (tf_point_check(it->valuedouble, *n ? v[*n - 1] : 0, !*n, conc, why, sizeof(why))) {
            tf_err(c, p, "[%d]: %g: %s", *n, it->valuedouble, why);
            return -1;
        }
        v[(*n)++] = it->valuedouble;
    }
    return 0;
}

static void tf_parse_sweep(tf_ctx *c, const cJSON *j, const cJSON *req, tf_traffic *t) {
    const char *p = ".workload.requests.sweep";
    if (!cJSON_IsObject(j)) {
        tf_err(c, p, "expected {\"rates\": [R, ...]} or {\"knee\": {\"lo\": R, \"hi\": R}}, got %s", jv_type(j));
        return;
    }
    static const char *const keys[] = {"rates", "concurrency", "knee", "target_pct", "warmup_requests", "min_requests", "min_seconds",
                                       "windows", "steady_tolerance", NULL};
    tf_keys(c, j, p, keys, "rates, concurrency, knee, target_pct, warmup_requests, min_requests, min_seconds, windows, steady_tolerance");
    t->has_sweep = 1;
    t->target_pct = 90;
    t->windows = 4;
    t->steady_tolerance = 0.25;
    t->knee_resolution = 0.05;
    t->knee_points = 12;
    t->knee_max_reps = 8;
    const cJSON *rates = cJSON_GetObjectItemCaseSensitive(j, "rates"), *knee = cJSON_GetObjectItemCaseSensitive(j, "knee");
    const cJSON *conc = cJSON_GetObjectItemCaseSensitive(j, "concurrency");
    if (!rates && !knee && !conc)
        tf_err(c, p, "expected \"rates\" (a list of requests/s), \"concurrency\" (a list of caps), \"knee\" ({\"lo\": R, \"hi\": R}) or several");
    double cv[TF_MAX_RATES];
    if (conc && !tf_parse_points(c, conc, ".workload.requests.sweep.concurrency", 1, cv, &t->n_conc))
        for (int i = 0; i < t->n_conc; i++) t->conc[i] = (int)cv[i];
    if (rates) tf_parse_points(c, rates, ".workload.requests.sweep.rates", 0, t->rates, &t->n_rates);
    if (knee) {
        const char *kp = ".workload.requests.sweep.knee";
        static const char *const kk[] = {"lo", "hi", "resolution", "points", "max_repetitions", NULL};
        if (!cJSON_IsObject(knee)) {
            tf_err(c, kp, "expected {\"lo\": R, \"hi\": R, ...}, got %s", jv_type(knee));
        } else {
            tf_keys(c, knee, kp, kk, "lo, hi, resolution, points, max_repetitions");
            double pts = t->knee_points, mr = t->knee_max_reps;
            tf_num(c, knee, "lo", kp, 1, AR_MIN_RATE, 0, TF_MAX_SWEEP_RATE, 0, &t->knee_lo);
            tf_num(c, knee, "hi", kp, 1, AR_MIN_RATE, 0, TF_MAX_SWEEP_RATE, 0, &t->knee_hi);
            tf_num(c, knee, "resolution", kp, 0, 0, 1, 10, 0, &t->knee_resolution);
            tf_num(c, knee, "points", kp, 0, 2, 0, 32, 1, &pts);
            tf_num(c, knee, "max_repetitions", kp, 0, 1, 0, 256, 1, &mr);
            t->knee_points = (int)pts;
            t->knee_max_reps = (int)mr;
            if (t->knee_lo > 0 && t->knee_hi > 0 && t->knee_hi <= t->knee_lo)
                tf_err(c, kp, "lo %g, hi %g: expected lo < hi", t->knee_lo, t->knee_hi);
        }
    }
    double wr = 0, mr = 0;
    tf_num(c, j, "target_pct", p, 0, 0, 1, 100, 0, &t->target_pct);
    tf_num(c, j, "warmup_requests", p, 0, 0, 0, 1e5, 1, &wr);
    tf_num(c, j, "min_requests", p, 0, 0, 0, 1e5, 1, &mr);
    tf_num(c, j, "min_seconds", p, 0, 0, 0, 1e6, 0, &t->min_seconds);
    double w = t->windows;
    tf_num(c, j, "windows", p, 0, 2, 0, 100, 1, &w);
    tf_num(c, j, "steady_tolerance", p, 0, 0, 1, 10, 0, &t->steady_tolerance);
    t->warmup_requests = (int)wr;
    t->min_requests = (int)mr;
    t->windows = (int)w;
    if (!cJSON_GetObjectItemCaseSensitive(req, "targets"))
        tf_err(c, p, "needs \"targets\" ({\"ttft_ms\": MS, \"tpot_ms\": MS}): goodput is the share of requests within them");
}

int tf_parse(const char *file, sc_errors *errs, const cJSON *j, sc_requests *r) {
    tf_ctx c = {.file = file, .errs = errs, .n0 = errs->n};
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "trace"), *se = cJSON_GetObjectItemCaseSensitive(j, "sessions");
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(j, "arrival"), *cc = cJSON_GetObjectItemCaseSensitive(j, "concurrency");
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(j, "sweep");
    int process = cJSON_IsObject(ar) && cJSON_GetObjectItemCaseSensitive(ar, "process");
    if (!tr && !se && !process && !cc && !sw) return 0;
    tf_traffic *t = calloc(1, sizeof(*t));
    if (!t) {
        tf_err(&c, ".workload.requests", "out of memory");
        return -1;
    }
    r->traffic = t;
    if (tr) {
        static const char *const synthetic[] = {"count", "prompt_len", "output_len", "shared_prefix", NULL};
        for (int i = 0; synthetic[i]; i++)
            if (cJSON_GetObjectItemCaseSensitive(j, synthetic[i])) {
                char p[96];
                snprintf(p, sizeof(p), ".workload.requests.%s", synthetic[i]);
                tf_err(&c, p, "not with \"trace\": the trace's rows are the requests (trace.requests and trace.seconds "
                       "choose how many; length_scale, max_prompt and max_output their lengths)");
            }
        if (se) tf_err(&c, ".workload.requests.sessions", "not with \"trace\": a trace's rows are single requests");
        tf_parse_trace(&c, tr, r, t);
    }
    if (se) {
        if (cJSON_GetObjectItemCaseSensitive(j, "shared_prefix"))
            tf_err(&c, ".workload.requests.shared_prefix", "not with \"sessions\": a conversation's earlier turns are its shared prefix");
        tf_parse_sessions(&c, se, t);
    }
    if (process) tf_parse_arrival(&c, ar, t);
    /* "all" given with a trace replaces its timestamps too, as any arrival does */
    if (tr && cJSON_IsString(ar) && !strcmp(ar->valuestring, "all")) {
        t->has_arrival = 1;
        t->arrival = (ar_spec){.kind = AR_ALL};
    }
    if (sw) tf_parse_sweep(&c, sw, j, t);
    double n = 0;
    if (!tf_num(&c, j, "concurrency", ".workload.requests", 0, 1, 0, 1e5, 1, &n)) t->concurrency = (int)n;
    return errs->n > c.n0 ? -1 : 0;
}

void tf_free(tf_traffic *t) {
    if (!t) return;
    tr_free(t->trace);
    free(t->trace_file);
    free(t);
}

long long tf_longest(const sc_requests *r) {
    const tf_traffic *t = r->traffic;
    long long turn = (long long)r->prompt_len.hi + r->output_len.hi;
    if (t && t->sessions) return turn * t->turns_hi - 1;
    return (long long)r->prefix_tokens + turn - 1;
}

/* ======================================================================
 * The worker spec
 * ====================================================================== */

void tf_spec_add(cJSON *o, const sc_requests *r) {
    const tf_traffic *t = r->traffic;
    if (!t) return;
    cJSON *j = cJSON_AddObjectToObject(o, "traffic");
    if (t->has_arrival) {
        cJSON *a = cJSON_AddObjectToObject(j, "arrival");
        cJSON_AddStringToObject(a, "process", ar_kind_name(t->arrival.kind));
        cJSON_AddNumberToObject(a, "rate", t->arrival.rate);
        cJSON_AddNumberToObject(a, "rate_end", t->arrival.rate_end);
        cJSON_AddNumberToObject(a, "burstiness", t->arrival.burstiness);
    }
    cJSON_AddNumberToObject(j, "concurrency", t->concurrency);
    if (t->sessions) {
        cJSON *s = cJSON_AddObjectToObject(j, "sessions");
        cJSON_AddNumberToObject(s, "turns_lo", t->turns_lo);
        cJSON_AddNumberToObject(s, "turns_hi", t->turns_hi);
        cJSON_AddNumberToObject(s, "think_lo_ms", t->think_lo_ms);
        cJSON_AddNumberToObject(s, "think_hi_ms", t->think_hi_ms);
    }
    const tr_trace *tr = t->trace;
    if (!tr) return;
    cJSON *x = cJSON_AddObjectToObject(j, "trace");
    cJSON_AddStringToObject(x, "format", tr_format_name(tr->format));
    cJSON_AddBoolToObject(x, "timed", tr->timed);
    cJSON_AddNumberToObject(x, "block_tokens", tr->block_tokens);
    cJSON_AddNumberToObject(x, "time_scale", t->time_scale);
    cJSON_AddNumberToObject(x, "length_scale", t->length_scale);
    cJSON_AddNumberToObject(x, "max_prompt", t->max_prompt);
    cJSON_AddNumberToObject(x, "max_output", t->max_output);
    double *ts = malloc(((size_t)tr->n + 1) * sizeof(double));
    int *in = malloc(((size_t)tr->n + 1) * sizeof(int)), *out = malloc(((size_t)tr->n + 1) * sizeof(int));
    int *nh = malloc(((size_t)tr->n + 1) * sizeof(int));
    double *h = malloc((tr->n_hash + 1) * sizeof(double));
    if (ts && in && out && nh && h) {
        for (int i = 0; i < tr->n; i++) {
            ts[i] = tr->r[i].t_s;
            in[i] = tr->r[i].input;
            out[i] = tr->r[i].output;
            nh[i] = tr->r[i].n_hash;
        }
        for (size_t k = 0; k < tr->n_hash; k++) h[k] = (double)tr->hash[k];
        cJSON_AddItemToObject(x, "t_s", cJSON_CreateDoubleArray(ts, tr->n));
        cJSON_AddItemToObject(x, "input", cJSON_CreateIntArray(in, tr->n));
        cJSON_AddItemToObject(x, "output", cJSON_CreateIntArray(out, tr->n));
        cJSON_AddItemToObject(x, "n_hash", cJSON_CreateIntArray(nh, tr->n));
        cJSON_AddItemToObject(x, "hash", cJSON_CreateDoubleArray(h, (int)tr->n_hash));
    }
    free(ts);
    free(in);
    free(out);
    free(nh);
    free(h);
}

static int tf_rnum(const cJSON *o, const char *key, double lo, double hi, double *out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return bench_errf(err, errlen, "worker spec: requests.traffic: %s: expected a number %g .. %g", key, lo, hi);
    *out = v->valuedouble;
    return 0;
}

/* A list of n numbers in [lo, hi] into d (doubles) or i (ints). */
static int tf_rlist(const cJSON *o, const char *key, int n, double lo, double hi, double *d, int *iv, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key), *it;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n)
        return bench_errf(err, errlen, "worker spec: requests.traffic.trace.%s: expected a list of %d numbers", key, n);
    int k = 0;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= lo && it->valuedouble <= hi))
            return bench_errf(err, errlen, "worker spec: requests.traffic.trace.%s[%d]: expected %g .. %g", key, k, lo, hi);
        if (d) d[k] = it->valuedouble;
        else iv[k] = (int)it->valuedouble;
        k++;
    }
    return 0;
}

static int tf_read_trace(const cJSON *x, tf_traffic *t, int count, char *err, size_t errlen) {
    const cJSON *fm = cJSON_GetObjectItemCaseSensitive(x, "format"), *timed = cJSON_GetObjectItemCaseSensitive(x, "timed");
    int fmt = cJSON_IsString(fm) ? tr_format_from_name(fm->valuestring) : -1;
    if (fmt < 0 || !cJSON_IsBool(timed)) return bench_errf(err, errlen, "worker spec: requests.traffic.trace: expected format and timed");
    double bt = 0, mp = 0, mo = 0, nh_total = 0;
    if (tf_rnum(x, "block_tokens", 0, TR_MAX_TOKENS, &bt, err, errlen) || tf_rnum(x, "time_scale", 1e-9, 1e6, &t->time_scale, err, errlen) ||
        tf_rnum(x, "length_scale", 1e-9, 1e3, &t->length_scale, err, errlen) ||
        tf_rnum(x, "max_prompt", 0, TR_MAX_TOKENS, &mp, err, errlen) || tf_rnum(x, "max_output", 0, TR_MAX_TOKENS, &mo, err, errlen))
        return -1;
    t->max_prompt = (int)mp;
    t->max_output = (int)mo;
    tr_trace *tr = t->trace = calloc(1, sizeof(*tr));
    if (!tr) return bench_errf(err, errlen, "out of memory");
    tr->format = (tr_format)fmt;
    tr->timed = cJSON_IsTrue(timed);
    tr->block_tokens = (int)bt;
    tr->n = count;
    tr->r = calloc((size_t)count, sizeof(*tr->r));
    double *ts = malloc((size_t)count * sizeof(double));
    int *in = malloc((size_t)count * sizeof(int)), *out = malloc((size_t)count * sizeof(int)), *nh = malloc((size_t)count * sizeof(int));
    int rc = -1;
    if (!tr->r || !ts || !in || !out || !nh) {
        bench_errf(err, errlen, "out of memory");
        goto out;
    }
    if (tf_rlist(x, "t_s", count, 0, 1e12, ts, NULL, err, errlen) || tf_rlist(x, "input", count, 1, TR_MAX_TOKENS, NULL, in, err, errlen) ||
        tf_rlist(x, "output", count, 1, TR_MAX_TOKENS, NULL, out, err, errlen) ||
        tf_rlist(x, "n_hash", count, 0, TR_MAX_TOKENS, NULL, nh, err, errlen))
        goto out;
    for (int i = 0; i < count; i++) {
        tr->r[i] = (tr_req){.t_s = ts[i], .input = in[i], .output = out[i], .n_hash = nh[i], .hash_at = (size_t)nh_total};
        nh_total += nh[i];
    }
    if (nh_total > 0x1p31) {
        bench_errf(err, errlen, "worker spec: requests.traffic.trace: %g hash ids: too many", nh_total);
        goto out;
    }
    tr->n_hash = (size_t)nh_total;
    double *h = malloc((tr->n_hash + 1) * sizeof(double));
    tr->hash = malloc((tr->n_hash + 1) * sizeof(int64_t));
    if (!h || !tr->hash) {
        free(h);
        bench_errf(err, errlen, "out of memory");
        goto out;
    }
    if (tf_rlist(x, "hash", (int)tr->n_hash, 0, 0x1p53, h, NULL, err, errlen)) {
        free(h);
        goto out;
    }
    for (size_t k = 0; k < tr->n_hash; k++) tr->hash[k] = (int64_t)h[k];
    free(h);
    rc = 0;
out:
    free(ts);
    free(in);
    free(out);
    free(nh);
    return rc;
}

int tf_spec_read(const cJSON *o, sc_requests *r, char *err, size_t errlen) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "traffic");
    if (!j) return 0;
    tf_traffic *t = r->traffic = calloc(1, sizeof(*t));
    if (!t) return bench_errf(err, errlen, "out of memory");
    double cc = 0;
    if (tf_rnum(j, "concurrency", 0, 1e5, &cc, err, errlen)) return -1;
    t->concurrency = (int)cc;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "arrival");
    if (a) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(a, "process");
        int k = cJSON_IsString(p) ? ar_kind_from_name(p->valuestring) : -1;
        if (k < 0) return bench_errf(err, errlen, "worker spec: requests.traffic.arrival.process: expected an arrival process");
        t->has_arrival = 1;
        t->arrival.kind = (ar_kind)k;
        if (tf_rnum(a, "rate", 0, 1e9, &t->arrival.rate, err, errlen) || tf_rnum(a, "rate_end", 0, 1e9, &t->arrival.rate_end, err, errlen) ||
            tf_rnum(a, "burstiness", 0, 1e6, &t->arrival.burstiness, err, errlen))
            return -1;
    }
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "sessions");
    if (s) {
        double lo = 1, hi = 1;
        if (tf_rnum(s, "turns_lo", 1, 1000, &lo, err, errlen) || tf_rnum(s, "turns_hi", lo, 1000, &hi, err, errlen) ||
            tf_rnum(s, "think_lo_ms", 0, 3.6e6, &t->think_lo_ms, err, errlen) ||
            tf_rnum(s, "think_hi_ms", t->think_lo_ms, 3.6e6, &t->think_hi_ms, err, errlen))
            return -1;
        t->sessions = 1;
        t->turns_lo = (int)lo;
        t->turns_hi = (int)hi;
    }
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "trace");
    if (x && tf_read_trace(x, t, r->count, err, errlen)) return -1;
    return 0;
}
