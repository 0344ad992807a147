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

#include "harness/spec/jsonval.h"
#include "harness/spec/confine.h"

static const char *const tr_names[TR_FORMAT_COUNT] = {"mooncake", "azure", "burstgpt", "sharegpt"};

int tr_format_from_name(const char *name) {
    for (int i = 0; name && i < TR_FORMAT_COUNT; i++)
        if (!strcmp(name, tr_names[i])) return i;
    return -1;
}

const char *tr_format_name(tr_format f) { return f >= 0 && f < TR_FORMAT_COUNT ? tr_names[f] : "?"; }

const char *tr_format_list(void) { return "mooncake, azure, burstgpt, sharegpt"; }

/* ======================================================================
 * The reader's state: the rows kept so far, and where it is in the text
 * ====================================================================== */

typedef struct tr_rd {
    const char *name;
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
    long long day0;         /* azure: the first row's day, -1 before it */
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
 * Mooncake: JSON Lines
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

static int tr_mooncake_row(tr_rd *rd, const char *ls, size_t n) {
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(ls, n, &end, 0);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        if (!at || at < ls || at > ls + n) at = ls;
        return tr_fail(rd, at, "not a JSON object: expected {\"timestamp\": MS, \"input_length\": N, \"output_length\": N, "
                       "\"hash_ids\": [...]}");
    }
    int rc = -1;
    int64_t *ids = NULL;
    double ts = 0, in = 0, out = 0;
    const cJSON *v;
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
    v = cJSON_GetObjectItemCaseSensitive(j, "timestamp");
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || !isfinite(v->valuedouble)) {
        tr_fail(rd, tr_key_at(ls, n, "timestamp"), "field \"timestamp\": expected ms from the trace's start (a number >= 0), got %s",
                tr_json_type(v));
        goto out;
    }
    ts = v->valuedouble;
    if (ts * 1e-3 > TR_MAX_SECONDS) {
        tr_fail(rd, tr_key_at(ls, n, "timestamp"), "field \"timestamp\": %.6g ms: expected at most %.0e ms (%.0e s, about 31 years "
                "from the trace's start)", ts, TR_MAX_SECONDS * 1e3, TR_MAX_SECONDS);
        goto out;
    }
    static const char *const lens[] = {"input_length", "output_length"};
    for (int k = 0; k < 2; k++) {
        v = cJSON_GetObjectItemCaseSensitive(j, lens[k]);
        if (tr_json_int(v, 0, TR_MAX_TOKENS, k ? &out : &in)) {
            tr_fail(rd, tr_key_at(ls, n, lens[k]), "field \"%s\": expected an integer 0 .. %d (tokens), got %s", lens[k],
                    TR_MAX_TOKENS, tr_json_type(v));
            goto out;
        }
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "hash_ids");
    const char *hat = tr_key_at(ls, n, "hash_ids");
    if (!cJSON_IsArray(v)) {
        tr_fail(rd, hat, "field \"hash_ids\": expected a list of block ids (integers >= 0), got %s", tr_json_type(v));
        goto out;
    }
    int nh = cJSON_GetArraySize(v), want = (int)((in + TR_MOONCAKE_BLOCK - 1) / TR_MOONCAKE_BLOCK);
    if (nh != want) {
        tr_fail(rd, hat, "field \"hash_ids\": %d ids for input_length %.0f: expected ceil(%.0f / %d) = %d, one a block",
                nh, in, in, TR_MOONCAKE_BLOCK, want);
        goto out;
    }
    int keep = rd->w && rd->w->max_hash > 0 && rd->w->max_hash < nh ? rd->w->max_hash : nh;
    ids = malloc(((size_t)keep + 1) * sizeof(*ids));
    if (!ids) {
        tr_fail(rd, NULL, "out of memory");
        goto out;
    }
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        double id;
        if (tr_json_int(it, 0, 0x1p53, &id)) {
            tr_fail(rd, hat, "field \"hash_ids\"[%d]: expected an integer >= 0, got %s", k, tr_json_type(it));
            goto out;
        }
        if (k < keep) ids[k] = (int64_t)id;
        k++;
    }
    rc = tr_keep(rd, ts * 1e-3, (int)in, (int)out, ids, keep, ls);
out:
    free(ids);
    cJSON_Delete(j);
    return rc;
}

/* ======================================================================
 * CSV: the header names the columns
 * ====================================================================== */

enum { TR_COL_TIME, TR_COL_IN, TR_COL_OUT, TR_NCOL };
#define TR_MAX_FIELDS 64

typedef struct tr_csv {
    const char *want[TR_NCOL];  /* header names of the time, input and output columns; time NULL: none */
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
    int i = c->col[TR_COL_TIME], az = rd->t->format == TR_AZURE;
    char why[96];
    const char *want = az ? tr_azure_time(f, n, &rd->day0, t, why, sizeof(why)) : NULL;
    if (!az && isnan(*t = tr_seconds(f, n))) want = "seconds (a number >= 0)";
    char got[64];
    tr_quote(got, sizeof(got), f, n);
    if (want) return tr_fail(rd, f, "column \"%s\" (field %d): expected %s, got \"%s\"", c->want[TR_COL_TIME], i + 1, want, got);
    if (*t > TR_MAX_SECONDS)
        return tr_fail(rd, f, "column \"%s\" (field %d): \"%s\" is %.6g s from %s: expected at most %.0e s (about 31 years)",
                       c->want[TR_COL_TIME], i + 1, got, *t, az ? "the first row's day" : "the first day's 0:00", TR_MAX_SECONDS);
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
    int in, out;
    if (tr_field_int(rd, c, TR_COL_IN, fs[c->col[TR_COL_IN]], fl[c->col[TR_COL_IN]], &in) ||
        tr_field_int(rd, c, TR_COL_OUT, fs[c->col[TR_COL_OUT]], fl[c->col[TR_COL_OUT]], &out))
        return -1;
    return tr_keep(rd, t, in, out, NULL, 0, ls);
}

static void tr_csv_shape(tr_format f, tr_csv *c) {
    memset(c, 0, sizeof(*c));
    switch (f) {
    case TR_AZURE:
        *c = (tr_csv){.want = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}, .header = "TIMESTAMP,ContextTokens,GeneratedTokens"};
        break;
    case TR_BURSTGPT:
        *c = (tr_csv){.want = {"Timestamp", "Request tokens", "Response tokens"},
                      .header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"};
        break;
    default:
        *c = (tr_csv){.want = {NULL, "num_prefill_tokens", "num_decode_tokens"},
                      .header = "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio"};
        break;
    }
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
    tr_rd rd = {.name = name, .err = err, .errlen = errlen, .w = w, .day0 = -1};
    if (f < 0 || f >= TR_FORMAT_COUNT) {
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
    t->timed = f != TR_SHAREGPT;
    t->block_tokens = f == TR_MOONCAKE ? TR_MOONCAKE_BLOCK : 0;
    tr_csv c;
    tr_csv_shape(f, &c);
    int header = f != TR_MOONCAKE;
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
            int rc = header ? tr_csv_header(&rd, &c, p, n) : f == TR_MOONCAKE ? tr_mooncake_row(&rd, p, n) : tr_csv_row(&rd, &c, p, n);
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
