/* Prometheus text format 0.0.4: see prom.h. */
#include "prom.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engines/abi/module.h"

const char *prom_type_name(prom_type t) {
    static const char *const n[] = {"untyped", "counter", "gauge", "histogram", "summary"};
    return t >= PROM_UNTYPED && t <= PROM_SUMMARY ? n[t] : "?";
}

/* ======================================================================
 * The state of one parse
 * ====================================================================== */

typedef struct pr_family {
    size_t name;            /* offset in the pool */
    prom_type type;
} pr_family;

typedef struct pr_state {
    prom_doc *d;
    const char *p, *end;    /* the line being read, without its "\n" */
    int line;
    pr_family *fam;         /* (n_fam) every # TYPE */
    int n_fam, cap_fam;
    int cap_s, cap_l;
    size_t *name_off, *fam_off;     /* (cap_s) each sample's name and family in the pool, until the end */
    char *err;
    size_t errlen;
} pr_state;

static int pr_fail(pr_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pr_fail(pr_state *st, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return bench_errf(st->err, st->errlen, "line %d: %s", st->line, msg);
}

/* The byte at p in words, for a message: the server's bytes never reach a terminal raw. */
static const char *pr_show(pr_state *st, char *buf, size_t len) {
    if (st->p >= st->end) return "the end of the line";
    unsigned char c = (unsigned char)*st->p;
    if (c > 0x20 && c < 0x7f) snprintf(buf, len, "'%c'", c);
    else snprintf(buf, len, "byte 0x%02x", c);
    return buf;
}

/* n bytes at s, cut at 40, with anything but printable ASCII as \xNN: for a message. */
static const char *pr_quote(const char *s, size_t n, char *buf, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < n && i < 40 && o + 5 < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') buf[o++] = (char)c;
        else o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
    }
    if (n > 40 && o + 4 < len) o += (size_t)snprintf(buf + o, len - o, "...");
    buf[o] = 0;
    return buf;
}

/* Copies n bytes to the pool, NUL-terminated; its offset. The pool was sized for the body
 * (prom_parse): every string is a piece of one line, unescaping only shortens it, and each
 * is followed in the body by at least one byte its NUL takes the place of. */
static size_t pr_keep(pr_state *st, const char *s, size_t n) {
    prom_doc *d = st->d;
    size_t at = d->pool_len;
    memcpy(d->pool + at, s, n);
    d->pool[at + n] = 0;
    d->pool_len += n + 1;
    return at;
}

static void pr_blanks(pr_state *st) {
    while (st->p < st->end && (*st->p == ' ' || *st->p == '\t')) st->p++;
}

static int pr_name_char(char c, int first, int colon) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

/* A metric (colon 1) or label name at p; its length (0: none there). */
static size_t pr_name(pr_state *st, int colon) {
    const char *q = st->p;
    if (q >= st->end || !pr_name_char(*q, 1, colon)) return 0;
    while (q < st->end && pr_name_char(*q, 0, colon)) q++;
    return (size_t)(q - st->p);
}

/* ======================================================================
 * Numbers
 * ====================================================================== */

/* A number as Go's strconv.ParseFloat reads the format's values: decimal with an optional
 * fraction and exponent, or NaN / Inf with a sign, in any case. strtod alone would also take
 * hex floats, "infinity" and "nan(...)", which no exposition writes. Returns 0 with *v. */
static int pr_number(const char *s, size_t n, double *v) {
    size_t i = 0;
    int sign = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? -1 : 1;
    if (n - i == 3 && !strncasecmp(s + i, "inf", 3)) {
        *v = sign < 0 ? -INFINITY : INFINITY;
        return 0;
    }
    if (n - i == 3 && !strncasecmp(s + i, "nan", 3)) {
        *v = NAN;
        return 0;
    }
    size_t digits = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++, digits++;
    if (i < n && s[i] == '.')
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) digits++;
    if (!digits) return -1;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t e = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++, e++;
        if (!e) return -1;
    }
    if (i != n || n > 400) return -1;   /* 400: digits past double's precision are noise, and the copy below is bounded */
    char tmp[401];
    memcpy(tmp, s, n);
    tmp[n] = 0;
    *v = strtod(tmp, NULL);
    return 0;
}

/* A timestamp: a whole number of milliseconds, optionally signed. */
static int pr_timestamp(const char *s, size_t n, int64_t *ms) {
    size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
    if (i == n || n - i > 18) return -1;    /* 18 digits cannot overflow int64 */
    int64_t x = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        x = x * 10 + (s[i] - '0');
    }
    *ms = s[0] == '-' ? -x : x;
    return 0;
}

/* The token at p, up to a blank or the end of the line. */
static size_t pr_token(pr_state *st) {
    const char *q = st->p;
    while (q < st->end && *q != ' ' && *q != '\t') q++;
    return (size_t)(q - st->p);
}

/* ======================================================================
 * Comments and # TYPE
 * ====================================================================== */

static int pr_family_of(const pr_state *st, const char *name, size_t n) {
    for (int i = st->n_fam - 1; i >= 0; i--) {
        const char *f = st->d->pool + st->fam[i].name;
        if (strlen(f) == n && !memcmp(f, name, n)) return i;
    }
    return -1;
}

static int pr_comment(pr_state *st) {
    st->p++;
    pr_blanks(st);
    size_t kw = pr_token(st);
    int is_type = kw == 4 && !memcmp(st->p, "TYPE", 4), is_help = kw == 4 && !memcmp(st->p, "HELP", 4);
    if (!is_type && !is_help) return 0;     /* a comment */
    st->p += kw;
    pr_blanks(st);
    size_t n = pr_name(st, 1);
    char show[32];
    if (!n || (st->p + n < st->end && st->p[n] != ' ' && st->p[n] != '\t'))
        return pr_fail(st, "# %s: expected a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), got %s", is_type ? "TYPE" : "HELP",
                       pr_show(st, show, sizeof(show)));
    if (is_help) return 0;                  /* any text, escaped or not: not kept */
    const char *name = st->p;
    st->p += n;
    pr_blanks(st);
    size_t tl = pr_token(st);
    static const char *const types[] = {"untyped", "counter", "gauge", "histogram", "summary"};
    char q[200];
    int t = -1;
    for (int i = 0; i < 5; i++)
        if (strlen(types[i]) == tl && !memcmp(st->p, types[i], tl)) t = i;
    if (t < 0)
        return pr_fail(st, "# TYPE %.*s: expected counter, gauge, histogram, summary or untyped, got \"%s\"", (int)n, name,
                       pr_quote(st->p, tl, q, sizeof(q)));
    const char *after = st->p + tl;
    st->p = after;
    pr_blanks(st);
    if (st->p != st->end) return pr_fail(st, "# TYPE %.*s %s: expected the end of the line after the type", (int)n, name, types[t]);
    if (pr_family_of(st, name, n) >= 0) return pr_fail(st, "# TYPE %.*s: a second TYPE line for that name", (int)n, name);
    if (st->n_fam == st->cap_fam) {
        int cap = st->cap_fam ? st->cap_fam * 2 : 32;
        pr_family *f = realloc(st->fam, (size_t)cap * sizeof(*f));
        if (!f) return pr_fail(st, "out of memory");
        st->fam = f;
        st->cap_fam = cap;
    }
    st->fam[st->n_fam++] = (pr_family){.name = pr_keep(st, name, n), .type = (prom_type)t};
    return 0;
}

/* ======================================================================
 * Samples
 * ====================================================================== */

/* A quoted label value at p (after its '"'), unescaped into the pool; its offset in *off. */
static int pr_label_value(pr_state *st, size_t *off, const char *label) {
    prom_doc *d = st->d;
    size_t at = d->pool_len, n = 0;
    for (;;) {
        if (st->p >= st->end) return pr_fail(st, "label %s: the value's closing '\"' is missing", label);
        char c = *st->p++;
        if (c == '"') break;
        if (c == '\\') {
            char e = st->p < st->end ? *st->p++ : 0;
            if (e == 'n') c = '\n';
            else if (e == '\\' || e == '"') c = e;
            else return pr_fail(st, "label %s: unknown escape in the value (have: \\\\, \\\", \\n)", label);
        }
        d->pool[at + n++] = c;
    }
    d->pool[at + n] = 0;
    d->pool_len += n + 1;
    *off = at;
    return 0;
}

static int pr_labels(pr_state *st, int si) {
    prom_doc *d = st->d;
    char show[32];
    st->p++;    /* '{' */
    for (;;) {
        pr_blanks(st);
        if (st->p < st->end && *st->p == '}') break;
        size_t n = pr_name(st, 0);
        if (!n) return pr_fail(st, "expected a label name ([a-zA-Z_][a-zA-Z0-9_]*) or '}', got %s", pr_show(st, show, sizeof(show)));
        if (d->s[si].n_labels == PROM_MAX_LABELS) return pr_fail(st, "more than %d labels on one sample", PROM_MAX_LABELS);
        size_t name = pr_keep(st, st->p, n);
        const char *lname = d->pool + name;
        st->p += n;
        pr_blanks(st);
        if (st->p >= st->end || *st->p != '=')
            return pr_fail(st, "label %s: expected '=' after its name, got %s", lname, pr_show(st, show, sizeof(show)));
        st->p++;
        pr_blanks(st);
        if (st->p >= st->end || *st->p != '"')
            return pr_fail(st, "label %s: expected a value in double quotes, got %s", lname, pr_show(st, show, sizeof(show)));
        st->p++;
        size_t value = 0;
        if (pr_label_value(st, &value, lname)) return -1;
        for (int i = d->n_labels - d->s[si].n_labels; i < d->n_labels; i++)
            if (!strcmp((const char *)d->labels[i].name, lname)) return pr_fail(st, "label %s: given twice", lname);
        if (d->n_labels == st->cap_l) {
            int cap = st->cap_l ? st->cap_l * 2 : 64;
            prom_label *l = realloc(d->labels, (size_t)cap * sizeof(*l));
            if (!l) return pr_fail(st, "out of memory");
            d->labels = l;
            st->cap_l = cap;
        }
        /* pool pointers are final: the pool never moves */
        d->labels[d->n_labels++] = (prom_label){.name = lname, .value = d->pool + value};
        d->s[si].n_labels++;
        pr_blanks(st);
        if (st->p < st->end && *st->p == ',') {
            st->p++;
            continue;
        }
        if (st->p < st->end && *st->p == '}') break;
        return pr_fail(st, "label %s: expected ',' or '}' after its value, got %s", lname, pr_show(st, show, sizeof(show)));
    }
    st->p++;    /* '}' */
    return 0;
}

static const char *pr_label(const prom_doc *d, const prom_sample *s, int first, const char *name) {
    for (int i = 0; i < s->n_labels; i++)
        if (!strcmp(d->labels[first + i].name, name)) return d->labels[first + i].value;
    return NULL;
}

/* The family of sample si: its own # TYPE, or a histogram's or summary's for the suffixed
 * series, which must then carry their label (le, quantile). */
static int pr_family_check(pr_state *st, int si, int first_label, const char *name, size_t n) {
    prom_doc *d = st->d;
    prom_sample *s = &d->s[si];
    st->fam_off[si] = st->name_off[si];
    s->type = PROM_UNTYPED;
    int f = pr_family_of(st, name, n);
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (int k = 0; f < 0 && k < 3; k++) {
        size_t sl = strlen(sfx[k]);
        if (n <= sl || memcmp(name + n - sl, sfx[k], sl)) continue;
        int g = pr_family_of(st, name, n - sl);
        if (g >= 0 && (st->fam[g].type == PROM_HISTOGRAM || (k && st->fam[g].type == PROM_SUMMARY))) {
            f = g;
            if (k == 0) {
                const char *le = pr_label(d, s, first_label, "le");
                double v;
                if (!le || pr_number(le, strlen(le), &v))
                    return pr_fail(st, "%.*s: a histogram's bucket needs an \"le\" label holding a number (the bucket's upper bound)",
                                   (int)n, name);
            }
        }
    }
    if (f < 0) return 0;
    s->type = st->fam[f].type;
    st->fam_off[si] = st->fam[f].name;
    if (s->type == PROM_HISTOGRAM && strlen(d->pool + st->fam[f].name) == n)
        return pr_fail(st, "%.*s: a histogram's samples are %.*s_bucket, _sum and _count, not the bare name", (int)n, name, (int)n, name);
    if (s->type == PROM_SUMMARY && strlen(d->pool + st->fam[f].name) == n) {
        const char *q = pr_label(d, s, first_label, "quantile");
        double v;
        if (!q || pr_number(q, strlen(q), &v))
            return pr_fail(st, "%.*s: a summary's quantiles need a \"quantile\" label holding a number", (int)n, name);
    }
    return 0;
}

static int pr_sample(pr_state *st) {
    prom_doc *d = st->d;
    char show[32], q[200];
    size_t n = pr_name(st, 1);
    if (!n) return pr_fail(st, "expected a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), '#' or a blank line, got %s", pr_show(st, show, sizeof(show)));
    if (d->n == PROM_MAX_SAMPLES) return pr_fail(st, "more than %d samples", PROM_MAX_SAMPLES);
    if (d->n == st->cap_s) {
        int cap = st->cap_s ? st->cap_s * 2 : 64;
        /* each grows alone: one that moved stays valid (and freed) when the next fails */
        prom_sample *s = realloc(d->s, (size_t)cap * sizeof(*s));
        if (!s) return pr_fail(st, "out of memory");
        d->s = s;
        size_t *no = realloc(st->name_off, (size_t)cap * sizeof(*no));
        if (!no) return pr_fail(st, "out of memory");
        st->name_off = no;
        size_t *fo = realloc(st->fam_off, (size_t)cap * sizeof(*fo));
        if (!fo) return pr_fail(st, "out of memory");
        st->fam_off = fo;
        st->cap_s = cap;
    }
    int si = d->n++, first_label = d->n_labels;
    prom_sample *s = &d->s[si];
    memset(s, 0, sizeof(*s));
    s->line = st->line;
    const char *name = st->p;
    st->name_off[si] = pr_keep(st, name, n);
    st->p += n;
    if (st->p < st->end && *st->p != ' ' && *st->p != '\t' && *st->p != '{')
        return pr_fail(st, "%.*s: expected '{', a blank or the value after the name, got %s", (int)n, name, pr_show(st, show, sizeof(show)));
    pr_blanks(st);
    if (st->p < st->end && *st->p == '{' && pr_labels(st, si)) return -1;
    s = &d->s[si];
    pr_blanks(st);
    size_t vl = pr_token(st);
    if (!vl) return pr_fail(st, "%.*s: the value is missing", (int)n, name);
    if (pr_number(st->p, vl, &s->value))
        return pr_fail(st, "%.*s: expected a number (e.g. 1, -2.5e-3, NaN, +Inf), got \"%s\"", (int)n, name,
                       pr_quote(st->p, vl, q, sizeof(q)));
    st->p += vl;
    pr_blanks(st);
    size_t tl = pr_token(st);
    if (tl) {
        if (pr_timestamp(st->p, tl, &s->ts_ms))
            return pr_fail(st, "%.*s: expected a timestamp (whole milliseconds) or the end of the line, got \"%s\"", (int)n, name,
                           pr_quote(st->p, tl, q, sizeof(q)));
        s->has_ts = 1;
        st->p += tl;
        pr_blanks(st);
        if (st->p != st->end) return pr_fail(st, "%.*s: expected the end of the line after the timestamp", (int)n, name);
    }
    return pr_family_check(st, si, first_label, name, n);
}

/* ======================================================================
 * The body
 * ====================================================================== */

void prom_free(prom_doc *d) {
    if (!d) return;
    free(d->s);
    free(d->labels);
    free(d->pool);
    memset(d, 0, sizeof(*d));
}

static int pr_lines(pr_state *st, const char *buf, size_t len) {
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - (buf + at)) : len - at;
        st->line++;
        if (ll > PROM_MAX_LINE) return pr_fail(st, "longer than %u bytes", PROM_MAX_LINE);
        st->p = buf + at;
        st->end = st->p + ll;
        at += ll + 1;
        if (st->end > st->p && st->end[-1] == '\r') st->end--;
        if (memchr(st->p, 0, (size_t)(st->end - st->p))) return pr_fail(st, "a NUL byte: not text");
        pr_blanks(st);
        if (st->p == st->end) continue;
        if (*st->p == '#' ? pr_comment(st) : pr_sample(st)) return -1;
    }
    return 0;
}

int prom_parse(const char *buf, size_t len, prom_doc *d, char *err, size_t errlen) {
    memset(d, 0, sizeof(*d));
    if (len > PROM_MAX_BODY) return bench_errf(err, errlen, "the body is %zu bytes, more than %u", len, PROM_MAX_BODY);
    pr_state st = {.d = d, .err = err, .errlen = errlen};
    d->pool_cap = len + 2;
    d->pool = malloc(d->pool_cap);
    int rc = d->pool ? pr_lines(&st, buf, len) : bench_errf(err, errlen, "out of memory");
    if (rc == 0)
        for (int i = 0, l = 0; i < d->n; l += d->s[i].n_labels, i++) {
            d->s[i].name = d->pool + st.name_off[i];
            d->s[i].family = d->pool + st.fam_off[i];
            d->s[i].labels = d->s[i].n_labels ? d->labels + l : NULL;
        }
    free(st.fam);
    free(st.name_off);
    free(st.fam_off);
    if (rc) prom_free(d);
    return rc;
}

/* ======================================================================
 * Lookups
 * ====================================================================== */

int prom_find(const prom_doc *d, const char *name, const prom_label *sel, int n_sel, int from) {
    for (int i = from < 0 ? 0 : from; i < d->n; i++) {
        const prom_sample *s = &d->s[i];
        if (strcmp(s->name, name)) continue;
        int ok = 1;
        for (int k = 0; ok && k < n_sel; k++) {
            int hit = 0;
            for (int j = 0; !hit && j < s->n_labels; j++)
                hit = !strcmp(s->labels[j].name, sel[k].name) && !strcmp(s->labels[j].value, sel[k].value);
            ok = hit;
        }
        if (ok) return i;
    }
    return -1;
}

int prom_sum(const prom_doc *d, const char *name, const prom_label *sel, int n_sel, double *v) {
    int n = 0;
    double sum = 0;
    for (int i = prom_find(d, name, sel, n_sel, 0); i >= 0; i = prom_find(d, name, sel, n_sel, i + 1)) {
        sum += d->s[i].value;
        n++;
    }
    if (n) *v = sum;
    return n;
}

int prom_selector(const char *text, prom_doc *sel, char *err, size_t errlen) {
    memset(sel, 0, sizeof(*sel));
    size_t n = strlen(text);
    if (!n || strchr(text, '\n') || n > 1024)
        return bench_errf(err, errlen, "expected a metric name, optionally with labels: name{label=\"value\"}");
    char *line = malloc(n + 3);
    if (!line) return bench_errf(err, errlen, "out of memory");
    memcpy(line, text, n);
    memcpy(line + n, " 0", 3);      /* a sample line of value 0 */
    char e[400];
    int rc = prom_parse(line, n + 2, sel, e, sizeof(e));
    free(line);
    if (rc == 0 && sel->n == 1) return 0;
    prom_free(sel);
    /* the message without "line 1: "; text after the selector met the value this added */
    const char *m = strncmp(e, "line 1: ", 8) ? e : e + 8;
    if (rc == 0 || strstr(m, "expected a number") || strstr(m, "timestamp")) m = "expected a metric name, optionally with labels, and nothing after it";
    return bench_errf(err, errlen, "\"%.200s\": %s", text, m);
}
