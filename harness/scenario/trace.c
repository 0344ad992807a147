/* Recorded request traces: see trace.h for the formats and the rules. */
#include "trace.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/scenario/jsonval.h"
#include "harness/scenario/confine.h"

/* ======================================================================
 * The formats: one row each
 * ====================================================================== */

static tr_format_def tr_formats[TR_FORMAT_MAX] = {
    [TR_MOONCAKE] = {.name = "mooncake", .about = "JSON Lines, kvcache-ai/Mooncake (FAST'25): times in ms, prefix hash ids",
                     .syntax = TR_JSONL, .col = {"timestamp", "input_length", "output_length", "hash_ids"},
                     .shape = "{\"timestamp\": MS, \"input_length\": N, \"output_length\": N, \"hash_ids\": [...]}",
                     .unit = TR_TIME_MS, .block_tokens = TR_MOONCAKE_BLOCK},
    [TR_AZURE] = {.name = "azure", .about = "CSV, Azure LLM inference trace 2023 (code, conv): dated times",
                  .syntax = TR_CSV, .col = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"},
                  .shape = "TIMESTAMP,ContextTokens,GeneratedTokens", .unit = TR_TIME_DATE, .origin = "the first row's day"},
    [TR_BURSTGPT] = {.name = "burstgpt", .about = "CSV, HPMLL/BurstGPT: times in s",
                     .syntax = TR_CSV, .col = {"Timestamp", "Request tokens", "Response tokens"},
                     .shape = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type", .unit = TR_TIME_S,
                     .origin = "the first day's 0:00"},
    [TR_SHAREGPT] = {.name = "sharegpt", .about = "CSV, microsoft/sarathi-serve's length files: no times",
                     .syntax = TR_CSV, .col = {NULL, "num_prefill_tokens", "num_decode_tokens"},
                     .shape = "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio"},
};
static int tr_n_formats = TR_FORMAT_BUILTIN;

int tr_format_count(void) { return tr_n_formats; }

const tr_format_def *tr_format_get(tr_format f) { return f >= 0 && (int)f < tr_n_formats ? &tr_formats[f] : NULL; }

int tr_format_from_name(const char *name) {
    for (int i = 0; name && i < tr_n_formats; i++)
        if (!strcmp(name, tr_formats[i].name)) return i;
    return -1;
}

const char *tr_format_name(tr_format f) { return tr_format_get(f) ? tr_formats[f].name : "?"; }

const char *tr_format_list(void) {
    static char list[TR_FORMAT_MAX * 24];
    size_t used = 0;
    list[0] = 0;
    for (int i = 0; i < tr_n_formats && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", tr_formats[i].name);
    return list;
}

int tr_format_add(const tr_format_def *d, char *err, size_t errlen) {
    const char *why = NULL;
    if (!d->name || !d->name[0]) why = "no name";
    else if (tr_format_from_name(d->name) >= 0) why = "the name is taken";
    else if (strlen(d->name) > 20) why = "a name longer than 20 bytes";
    else if (!d->col[TR_COL_IN]) why = "no input column";
    else if (!d->col[TR_COL_OUT] && d->output_tokens <= 0) why = "no output column and no output_tokens";
    else if (d->col[TR_COL_HASH] && (d->syntax != TR_JSONL || d->block_tokens <= 0))
        why = "hash ids are read from JSON Lines, with block_tokens > 0";
    else if (!d->shape) why = "no shape for messages";
    else if (tr_n_formats == TR_FORMAT_MAX) why = "the table is full";
    if (why) {
        snprintf(err, errlen, "trace format \"%s\": %s", d->name ? d->name : "", why);
        return -1;
    }
    tr_formats[tr_n_formats] = *d;
    return tr_n_formats++;
}

/* ======================================================================
 * The reader's state: the rows kept so far, and where it is in the text
 * ====================================================================== */

typedef struct tr_rd {
    const char *name;
    const tr_format_def *f; /* the format's row */
    char *err;
    size_t errlen;
    const tr_window *w;
    tr_trace *t;
    int cap;                /* of t->r */
    size_t hash_cap;        /* of t->hash */
    int line;               /* the current line, 1-based */
    const char *ls;         /* its first byte */
    double t0, t_prev;      /* the first kept row's raw time, the previous row's */
    int have_t0, have_prev;
    int done;               /* the window is full */
    long long day0;         /* TR_TIME_DATE: the first row's day, -1 before it */
} tr_rd;

static int tr_fail(tr_rd *rd, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "<file>:<line>:<col>: <message>"; at NULL: no column. Returns -1. */
static int tr_fail(tr_rd *rd, const char *at, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (at) snprintf(rd->err, rd->errlen, "%s:%d:%d: %s", rd->name, rd->line, (int)(at - rd->ls) + 1, msg);
    else snprintf(rd->err, rd->errlen, "%s:%d: %s", rd->name, rd->line, msg);
    return -1;
}

/* A field's text for a message: at most 40 bytes of it. */
static void tr_quote(char *buf, size_t len, const char *s, size_t n) {
    snprintf(buf, len, "%.*s%s", (int)(n > 40 ? 40 : n), s, n > 40 ? "..." : "");
}

/* Keeps one row (its time raw, in s) unless the window is full; 0 or -1. */
static int tr_keep(tr_rd *rd, double t_raw, int input, int output, const int64_t *hash, int n_hash, const char *at) {
    tr_trace *t = rd->t;
    if (t->timed) {
        if (rd->have_prev && t_raw < rd->t_prev)
            return tr_fail(rd, at, "timestamp %.7g s is before the previous row's %.7g s: expected rows in arrival order",
                           t_raw, rd->t_prev);
        rd->t_prev = t_raw;
        rd->have_prev = 1;
    }
    if (!input || !output) {
        t->dropped++;
        return 0;
    }
    if (!rd->have_t0) {
        rd->t0 = t_raw;
        rd->have_t0 = 1;
    }
    double ts = t->timed ? t_raw - rd->t0 : 0;
    if (rd->w && rd->w->max_seconds > 0 && ts > rd->w->max_seconds) {
        rd->done = 1;
        return 0;
    }
    if (t->n == rd->cap) {
        int nc = rd->cap ? rd->cap * 2 : 256;
        tr_req *nr = realloc(t->r, (size_t)nc * sizeof(*nr));
        if (!nr) return tr_fail(rd, NULL, "out of memory for %d rows", nc);
        t->r = nr;
        rd->cap = nc;
    }
    if (t->n_hash + (size_t)n_hash > rd->hash_cap) {
        size_t nc = rd->hash_cap ? rd->hash_cap * 2 : 4096;
        while (nc < t->n_hash + (size_t)n_hash) nc *= 2;
        int64_t *nh = realloc(t->hash, nc * sizeof(*nh));
        if (!nh) return tr_fail(rd, NULL, "out of memory for %zu hash ids", nc);
        t->hash = nh;
        rd->hash_cap = nc;
    }
    if (n_hash) memcpy(t->hash + t->n_hash, hash, (size_t)n_hash * sizeof(*hash));
    t->r[t->n++] = (tr_req){.t_s = ts, .input = input, .output = output, .n_hash = n_hash, .hash_at = t->n_hash,
                            .line = rd->line};
    t->n_hash += (size_t)n_hash;
    if (rd->w && rd->w->max_requests > 0 && t->n >= rd->w->max_requests) rd->done = 1;
    return 0;
}

/* ======================================================================
 * JSON Lines: the row's keys name the fields
 * ====================================================================== */

/* Where "key" is in the line (for the column), else the line's start. */
static const char *tr_key_at(const char *ls, size_t n, const char *key) {
    char pat[64];
    size_t k = (size_t)snprintf(pat, sizeof(pat), "\"%s\"", key);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(ls + i, pat, k)) return ls + i;
    return ls;
}

/* An integral JSON number in [lo, hi]. */
static int tr_json_int(const cJSON *v, double lo, double hi, double *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) return -1;
    *out = v->valuedouble;
    return 0;
}

static const char *tr_json_type(const cJSON *v) {
    if (!v) return "nothing (the key is missing)";
    return cJSON_IsNumber(v) ? "a number out of range or not an integer" : jv_type(v);
}

/* What a time unit calls its numbers in messages, and s per number. */
static const char *tr_unit_name(tr_time_unit u) { return u == TR_TIME_MS ? "ms" : "s"; }
static double tr_unit_s(tr_time_unit u) { return u == TR_TIME_MS ? 1e-3 : 1; }
static const char *tr_origin(const tr_format_def *f) { return f->origin ? f->origin : "the trace's start"; }

/* The row's time key into *ts (raw, in the format's unit); 0 or -1. A date is a CSV thing:
 * a JSON Lines row's time is a number. */
static int tr_jsonl_time(tr_rd *rd, const cJSON *j, const char *ls, size_t n, double *ts) {
    const tr_format_def *f = rd->f;
    const char *key = f->col[TR_COL_TIME], *u = tr_unit_name(f->unit);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || !isfinite(v->valuedouble))
        return tr_fail(rd, tr_key_at(ls, n, key), "field \"%s\": expected %s from %s (a number >= 0), got %s", key, u,
                       tr_origin(f), tr_json_type(v));
    *ts = v->valuedouble;
    double scale = tr_unit_s(f->unit);
    if (*ts * scale > TR_MAX_SECONDS)
        return tr_fail(rd, tr_key_at(ls, n, key), "field \"%s\": %.6g %s: expected at most %.0e %s (%.0e s, about 31 years "
                       "from %s)", key, *ts, u, TR_MAX_SECONDS / scale, u, TR_MAX_SECONDS, tr_origin(f));
    return 0;
}

/* The row's hash ids key: ceil(in / block) integers, the first max_hash kept in *ids
 * (malloc'd, the caller frees), *keep of them. 0 or -1. */
static int tr_jsonl_hash(tr_rd *rd, const cJSON *j, const char *ls, size_t n, double in, int64_t **ids, int *keep) {
    const tr_format_def *f = rd->f;
    const char *key = f->col[TR_COL_HASH];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    const char *hat = tr_key_at(ls, n, key);
    if (!cJSON_IsArray(v))
        return tr_fail(rd, hat, "field \"%s\": expected a list of block ids (integers >= 0), got %s", key, tr_json_type(v));
    int nh = cJSON_GetArraySize(v), want = (int)((in + f->block_tokens - 1) / f->block_tokens);
    if (nh != want)
        return tr_fail(rd, hat, "field \"%s\": %d ids for %s %.0f: expected ceil(%.0f / %d) = %d, one a block", key, nh,
                       f->col[TR_COL_IN], in, in, f->block_tokens, want);
    *keep = rd->w && rd->w->max_hash > 0 && rd->w->max_hash < nh ? rd->w->max_hash : nh;
    if (!(*ids = malloc(((size_t)*keep + 1) * sizeof(**ids)))) return tr_fail(rd, NULL, "out of memory");
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        double id;
        if (tr_json_int(it, 0, 0x1p53, &id))
            return tr_fail(rd, hat, "field \"%s\"[%d]: expected an integer >= 0, got %s", key, k, tr_json_type(it));
        if (k < *keep) (*ids)[k] = (int64_t)id;
        k++;
    }
    return 0;
}

static int tr_jsonl_row(tr_rd *rd, const char *ls, size_t n) {
    const tr_format_def *f = rd->f;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(ls, n, &end, 0);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        if (!at || at < ls || at > ls + n) at = ls;
        return tr_fail(rd, at, "not a JSON object: expected %s", f->shape);
    }
    int rc = -1, keep = 0;
    int64_t *ids = NULL;
    double ts = 0, len[2] = {0, f->output_tokens};
    if (!cJSON_IsObject(j)) {
        tr_fail(rd, ls, "expected a JSON object, got %s", tr_json_type(j));
        goto out;
    }
    if (end && (size_t)(end - ls) < n) {
        const char *e = end;
        while (e < ls + n && (*e == ' ' || *e == '\t')) e++;
        if (e < ls + n) {
            tr_fail(rd, e, "text after the JSON object: expected one object a line");
            goto out;
        }
    }
    if (f->col[TR_COL_TIME] && tr_jsonl_time(rd, j, ls, n, &ts)) goto out;
    for (int k = 0; k < 2; k++) {
        const char *key = f->col[TR_COL_IN + k];
        if (!key) continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
        if (tr_json_int(v, 0, TR_MAX_TOKENS, &len[k])) {
            tr_fail(rd, tr_key_at(ls, n, key), "field \"%s\": expected an integer 0 .. %d (tokens), got %s", key,
                    TR_MAX_TOKENS, tr_json_type(v));
            goto out;
        }
    }
    if (f->col[TR_COL_HASH] && tr_jsonl_hash(rd, j, ls, n, len[0], &ids, &keep)) goto out;
    rc = tr_keep(rd, ts * tr_unit_s(f->unit), (int)len[0], (int)len[1], ids, keep, ls);
out:
    free(ids);
    cJSON_Delete(j);
    return rc;
}

/* ======================================================================
 * CSV: the header names the columns
 * ====================================================================== */

#define TR_MAX_FIELDS 64

typedef struct tr_csv {
    const char *const *want;    /* (TR_NCOL) the format's columns' header names (tr_format_def.col) */
    const char *header;         /* the expected header, for messages */
    int col[TR_NCOL];           /* their indices in the file */
    int n_fields;               /* of the header */
} tr_csv;

/* Splits [ls, ls + n) at commas: starts and lengths. Returns the field count (at most max + 1). */
static int tr_split(const char *ls, size_t n, const char **fs, size_t *fl, int max) {
    int k = 0;
    const char *s = ls, *e = ls + n;
    for (;;) {
        const char *c = memchr(s, ',', (size_t)(e - s));
        if (k < max) {
            fs[k] = s;
            fl[k] = (size_t)((c ? c : e) - s);
        }
        k++;
        if (!c) return k;
        s = c + 1;
    }
}

static int tr_csv_header(tr_rd *rd, tr_csv *c, const char *ls, size_t n) {
    const char *fs[TR_MAX_FIELDS];
    size_t fl[TR_MAX_FIELDS];
    int k = tr_split(ls, n, fs, fl, TR_MAX_FIELDS);
    if (k > TR_MAX_FIELDS) return tr_fail(rd, ls, "header: %d columns: expected at most %d", k, TR_MAX_FIELDS);
    c->n_fields = k;
    for (int w = 0; w < TR_NCOL; w++) {
        c->col[w] = -1;
        if (!c->want[w]) continue;
        for (int i = 0; i < k; i++)
            if (fl[i] == strlen(c->want[w]) && !memcmp(fs[i], c->want[w], fl[i])) c->col[w] = i;
        if (c->col[w] < 0) {
            char got[64];
            tr_quote(got, sizeof(got), ls, n);
            return tr_fail(rd, ls, "header: no column \"%s\": expected a %s header (%s), got \"%s\"", c->want[w],
                           tr_format_name(rd->t->format), c->header, got);
        }
    }
    return 0;
}

/* An integer field in [0, TR_MAX_TOKENS]. */
static int tr_field_int(tr_rd *rd, const tr_csv *c, int w, const char *s, size_t n, int *out) {
    char buf[48], *end;
    long long v = -1;
    if (n && n < sizeof(buf) && s[0] >= '0' && s[0] <= '9') {
        memcpy(buf, s, n);
        buf[n] = 0;
        errno = 0;
        v = strtoll(buf, &end, 10);
        if (*end || errno) v = -1;
    }
    if (v < 0 || v > TR_MAX_TOKENS) {
        char got[64];
        tr_quote(got, sizeof(got), s, n);
        return tr_fail(rd, s, "column \"%s\" (field %d): expected an integer 0 .. %d (tokens), got \"%s\"", c->want[w],
                       c->col[w] + 1, TR_MAX_TOKENS, got);
    }
    *out = (int)v;
    return 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's days_from_civil). */
static long long tr_days(long long y, unsigned m, unsigned d) {
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long long)doe - 719468;
}

static int tr_leap(long long y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int tr_month_days(long long y, int m) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return days[m - 1] + (m == 2 && tr_leap(y));
}

/* Azure's "YYYY-MM-DD HH:MM:SS[.fraction]" as *t, s since 0:00 of the first row's day (the
 * zone does not matter: only differences are used; counting from that day rather than
 * 1970 keeps the 100 ns digits, which a double of 1.7e9 s would round to 240 ns). *day0:
 * the first row's day, set by it (-1 until then). NULL, or what was expected instead (in
 * why, or a constant). */
static const char *tr_azure_time(const char *s, size_t n, long long *day0, double *t, char *why, size_t whylen) {
    const char *shape_want = "a time \"YYYY-MM-DD HH:MM:SS[.fraction]\"";
    char buf[64];
    if (n < 19 || n >= sizeof(buf)) return shape_want;
    memcpy(buf, s, n);
    buf[n] = 0;
    static const char shape[] = "dddd-dd-dd dd:dd:dd";
    for (int i = 0; i < 19; i++)
        if (shape[i] == 'd' ? (buf[i] < '0' || buf[i] > '9') : buf[i] != shape[i]) return shape_want;
    double frac = 0;
    if (n > 19) {
        if (buf[19] != '.' || n == 20) return shape_want;
        double scale = 0.1;
        for (size_t i = 20; i < n; i++, scale *= 0.1) {
            if (buf[i] < '0' || buf[i] > '9') return shape_want;
            frac += (buf[i] - '0') * scale;
        }
    }
    int y = atoi(buf), mo = atoi(buf + 5), d = atoi(buf + 8), h = atoi(buf + 11), mi = atoi(buf + 14), sec = atoi(buf + 17);
    if (y < 1 || mo < 1 || mo > 12) return "a date of year 0001 .. 9999 and month 01 .. 12 (YYYY-MM-DD)";
    if (d < 1 || d > tr_month_days(y, mo)) {
        snprintf(why, whylen, "a day 01 .. %02d (%04d-%02d has %d days)", tr_month_days(y, mo), y, mo, tr_month_days(y, mo));
        return why;
    }
    if (h > 23 || mi > 59 || sec > 60) return "a time of day 00:00:00 .. 23:59:60 (YYYY-MM-DD HH:MM:SS)";
    long long day = tr_days(y, (unsigned)mo, (unsigned)d);
    if (*day0 < 0) *day0 = day;
    *t = (double)(day - *day0) * 86400.0 + h * 3600.0 + mi * 60.0 + sec + frac;
    return NULL;
}

/* BurstGPT's seconds: a decimal number >= 0. NAN when it is not one. */
static double tr_seconds(const char *s, size_t n) {
    char buf[48], *end;
    if (!n || n >= sizeof(buf) || !((s[0] >= '0' && s[0] <= '9') || s[0] == '.')) return NAN;
    memcpy(buf, s, n);
    buf[n] = 0;
    errno = 0;
    double v = strtod(buf, &end);
    return *end || errno || !isfinite(v) ? NAN : v;
}

/* The time column of a CSV row into *t (s); 0 or -1 with the message at the field. */
static int tr_csv_time(tr_rd *rd, const tr_csv *c, const char *f, size_t n, double *t) {
    int i = c->col[TR_COL_TIME], az = rd->f->unit == TR_TIME_DATE;
    char why[96];
    const char *want = az ? tr_azure_time(f, n, &rd->day0, t, why, sizeof(why)) : NULL;
    if (!az && isnan(*t = tr_seconds(f, n))) want = rd->f->unit == TR_TIME_MS ? "ms (a number >= 0)" : "seconds (a number >= 0)";
    if (!az) *t *= tr_unit_s(rd->f->unit);
    char got[64];
    tr_quote(got, sizeof(got), f, n);
    if (want) return tr_fail(rd, f, "column \"%s\" (field %d): expected %s, got \"%s\"", c->want[TR_COL_TIME], i + 1, want, got);
    if (*t > TR_MAX_SECONDS)
        return tr_fail(rd, f, "column \"%s\" (field %d): \"%s\" is %.6g s from %s: expected at most %.0e s (about 31 years)",
                       c->want[TR_COL_TIME], i + 1, got, *t, tr_origin(rd->f), TR_MAX_SECONDS);
    return 0;
}

static int tr_csv_row(tr_rd *rd, const tr_csv *c, const char *ls, size_t n) {
    const char *fs[TR_MAX_FIELDS];
    size_t fl[TR_MAX_FIELDS];
    int k = tr_split(ls, n, fs, fl, TR_MAX_FIELDS);
    if (k != c->n_fields)
        return tr_fail(rd, k > c->n_fields && k <= TR_MAX_FIELDS ? fs[c->n_fields] - 1 : ls + n,
                       "%d fields: expected %d, as the header has (%s)", k, c->n_fields, c->header);
    double t = 0;
    if (c->want[TR_COL_TIME] && tr_csv_time(rd, c, fs[c->col[TR_COL_TIME]], fl[c->col[TR_COL_TIME]], &t)) return -1;
    int in, out = rd->f->output_tokens;
    if (tr_field_int(rd, c, TR_COL_IN, fs[c->col[TR_COL_IN]], fl[c->col[TR_COL_IN]], &in) ||
        (c->want[TR_COL_OUT] && tr_field_int(rd, c, TR_COL_OUT, fs[c->col[TR_COL_OUT]], fl[c->col[TR_COL_OUT]], &out)))
        return -1;
    return tr_keep(rd, t, in, out, NULL, 0, ls);
}

/* ======================================================================
 * The file
 * ====================================================================== */

/* Where the line starting at p ends: at LF, CR LF or a lone CR (as Python's universal
 * newlines: a file saved with old Mac line ends is lines too), else at e. */
static const char *tr_line_end(const char *p, const char *e) {
    while (p < e && *p != '\n' && *p != '\r') p++;
    return p;
}

void tr_free(tr_trace *t) {
    if (!t) return;
    free(t->r);
    free(t->hash);
    free(t);
}

int tr_parse(const char *name, const char *text, size_t len, tr_format f, const tr_window *w, tr_trace **out,
             char *err, size_t errlen) {
    *out = NULL;
    tr_rd rd = {.name = name, .err = err, .errlen = errlen, .w = w, .day0 = -1, .f = tr_format_get(f)};
    if (!rd.f) {
        snprintf(err, errlen, "%s: unknown trace format %d: expected one of %s", name, (int)f, tr_format_list());
        return -1;
    }
    if (w && (w->max_requests < 0 || !(w->max_seconds >= 0) || w->max_hash < 0)) {
        snprintf(err, errlen, "%s: window of %d requests, %g s, %d hash ids a row: expected counts >= 0", name, w->max_requests,
                 w->max_seconds, w->max_hash);
        return -1;
    }
    tr_trace *t = rd.t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    t->format = f;
    t->timed = rd.f->col[TR_COL_TIME] != NULL;
    t->block_tokens = rd.f->col[TR_COL_HASH] ? rd.f->block_tokens : 0;
    tr_csv c = {.want = rd.f->col, .header = rd.f->shape};
    int csv = rd.f->syntax == TR_CSV, header = csv;
    const char *p = text, *e = text + len;
    while (p < e && !rd.done) {
        rd.line++;
        const char *le = tr_line_end(p, e);
        rd.ls = p;
        size_t n = (size_t)(le - p);
        const char *q = p;
        while (q < p + n && (*q == ' ' || *q == '\t')) q++;
        if (memchr(p, 0, n)) {
            tr_fail(&rd, (const char *)memchr(p, 0, n), "a NUL byte: expected text");
            goto fail;
        }
        if (q < p + n) {
            int rc = header ? tr_csv_header(&rd, &c, p, n) : csv ? tr_csv_row(&rd, &c, p, n) : tr_jsonl_row(&rd, p, n);
            if (rc) goto fail;
            header = 0;
        }
        p = le == e ? e : le + 1 + (*le == '\r' && le + 1 < e && le[1] == '\n');
    }
    if (header) {
        snprintf(err, errlen, "%s: empty: expected a %s header (%s) and rows", name, tr_format_name(f), c.header);
        goto fail;
    }
    if (!t->n) {
        snprintf(err, errlen, "%s: no requests in the %s trace (%d rows of 0 input or output tokens dropped)", name,
                 tr_format_name(f), t->dropped);
        goto fail;
    }
    *out = t;
    return 0;
fail:
    tr_free(t);
    return -1;
}

static int tr_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* err = the message; returns -1 */
static int tr_errf(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The whole of a regular file, up to TR_MAX_FILE bytes, from fd: 0 with *buf (malloc'd,
 * NUL-terminated) and *len, or -1 with err naming name. */
static int tr_slurp(int fd, const char *name, char **buf, size_t *len, char *err, size_t errlen) {
    struct stat st;
    *buf = NULL;
    if (fstat(fd, &st)) return tr_errf(err, errlen, "%s: %s", name, strerror(errno));
    if (!S_ISREG(st.st_mode)) return tr_errf(err, errlen, "%s: is %s, expected a regular file", name, cf_kind(st.st_mode));
    if ((unsigned long long)st.st_size > TR_MAX_FILE)
        return tr_errf(err, errlen, "%s: %lld bytes: expected at most %llu (cut the trace, or give a window)", name,
                        (long long)st.st_size, TR_MAX_FILE);
    size_t want = (size_t)st.st_size, got = 0;
    if (!(*buf = malloc(want + 1))) return tr_errf(err, errlen, "%s: out of memory for %zu bytes", name, want);
    while (got < want) {
        ssize_t k = read(fd, *buf + got, want - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            snprintf(err, errlen, "%s: read %zu of %zu bytes%s%s", name, got, want, k ? ": " : "", k ? strerror(errno) : "");
            free(*buf);
            *buf = NULL;
            return -1;
        }
        got += (size_t)k;
    }
    (*buf)[got] = 0;
    *len = got;
    return 0;
}

int tr_read_fd(int fd, const char *name, tr_format f, const tr_window *w, tr_trace **out, char *err, size_t errlen) {
    *out = NULL;
    char *buf;
    size_t len = 0;
    if (tr_slurp(fd, name, &buf, &len, err, errlen)) return -1;
    int rc = tr_parse(name, buf, len, f, w, out, err, errlen);
    free(buf);
    return rc;
}

int tr_read(const char *file, tr_format f, const tr_window *w, tr_trace **out, char *err, size_t errlen) {
    *out = NULL;
    /* O_NONBLOCK: a FIFO would block the open until a writer came; tr_slurp refuses it */
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s (a %s trace)", file, strerror(errno), tr_format_name(f));
        return -1;
    }
    int rc = tr_read_fd(fd, file, f, w, out, err, errlen);
    close(fd);
    return rc;
}
