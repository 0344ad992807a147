/* The http target's client: see httpc.h. */
#include "util/ut_clock.h"
#include "httpc.h"

#include <cJSON.h>
#include <curl/curl.h>

#include "harness/net/netlib.h"
#include "util/ut_term.h"
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sse.h"

/* The most of an error answer's body kept for its message. */
#define HC_ERR_BODY 2048

const char *hc_err_name(int err) {
    static const char *const n[HC_ERR_COUNT] = {
        [HC_OK] = "ok", [HC_ERR_CONNECT] = "connect", [HC_ERR_HTTP] = "http", [HC_ERR_TIMEOUT] = "timeout",
        [HC_ERR_MALFORMED] = "malformed", [HC_ERR_CLOSED] = "closed", [HC_ERR_OTHER] = "other", [HC_ERR_REDIRECT] = "redirect",
        [HC_ERR_CONTENT_TYPE] = "content_type", [HC_ERR_NO_TOKENS] = "no_tokens", [HC_ERR_TOO_MANY_TOKENS] = "too_many_tokens",
        [HC_ERR_USAGE_MISMATCH] = "usage_mismatch"};
    return err >= 0 && err < HC_ERR_COUNT ? n[err] : "?";
}

static int64_t hc_now(void) { return ut_now_ns(); }

static int hc_fail(hc_result *r, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int hc_fail(hc_result *r, int err, const char *fmt, ...) {
    if (r->err) return -1;  /* the first cause is the one */
    r->err = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
    va_end(ap);
    return -1;
}

static pthread_once_t hc_once = PTHREAD_ONCE_INIT;
static CURLcode hc_init_rc;
static char hc_load_err[600];
/* libcurl is loaded here, at the first request, not linked (netlib.h) */
static void hc_global_init(void) {
    if (nl_curl_load(hc_load_err, sizeof(hc_load_err))) {
        hc_init_rc = CURLE_FAILED_INIT;
        return;
    }
    hc_init_rc = nl_c.global_init(CURL_GLOBAL_DEFAULT);
    if (hc_init_rc != CURLE_OK) snprintf(hc_load_err, sizeof(hc_load_err), "libcurl: %s", nl_c.easy_strerror(hc_init_rc));
}

/* ======================================================================
 * One event of the stream
 * ====================================================================== */

/* Server text quoted in a message: this many bytes of it at most, escaped (es_term), so that a
 * hostile body neither floods the summary nor drives the terminal. */
#define HC_QUOTE 160
typedef struct hc_quoted {
    char s[HC_QUOTE + 1];
} hc_quoted;

static hc_quoted hc_quote(const char *text) {
    hc_quoted q;
    es_term(q.s, sizeof(q.s), text);
    return q;
}

/* Grows *arr (elements of size sz) for one more past n: doubles at 0, 16, 32, ... */
static int hc_grow(void **arr, int n, size_t sz) {
    if (n && (n < 16 || (n & (n - 1)))) return 0;
    size_t cap = n ? (size_t)n * 2 : 16;
    void *a = realloc(*arr, cap * sz);
    if (!a) return -1;
    *arr = a;
    return 0;
}

/* One token-bearing event at t: count tokens, and ids, the event's "tokens" array (NULL: text only). */
static int hc_push(hc_result *r, int64_t t, const cJSON *ids, int count) {
    if (hc_grow((void **)&r->arrival_ns, r->n_arrivals, sizeof(*r->arrival_ns))) return hc_fail(r, HC_ERR_OTHER, "out of memory");
    r->arrival_ns[r->n_arrivals++] = t;
    if (!r->first_ns) r->first_ns = t;
    const cJSON *id;
    cJSON_ArrayForEach(id, ids) {
        if (hc_grow((void **)&r->ids, r->n_ids, sizeof(*r->ids))) return hc_fail(r, HC_ERR_OTHER, "out of memory");
        r->ids[r->n_ids++] = (int)id->valuedouble;
    }
    r->n_tokens += count;
    return 0;
}

static int hc_whole(double v, double max) { return isfinite(v) && v >= 0 && v <= max && v == floor(v); }

/* One of the event's choices: its tokens (an event with text or ids), its finish_reason. */
static int hc_choice(hc_result *r, const cJSON *ch, int64_t t, int max_tokens) {
    if (!cJSON_IsObject(ch)) return hc_fail(r, HC_ERR_MALFORMED, "malformed event: a choice is not an object");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(ch, "text"), *toks = cJSON_GetObjectItemCaseSensitive(ch, "tokens"),
                *fin = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
    if (text && !cJSON_IsString(text) && !cJSON_IsNull(text))
        return hc_fail(r, HC_ERR_MALFORMED, "malformed event: \"text\" is not a string");
    if (toks && !cJSON_IsArray(toks) && !cJSON_IsNull(toks))
        return hc_fail(r, HC_ERR_MALFORMED, "malformed event: \"tokens\" is not an array");
    const cJSON *list = cJSON_IsArray(toks) ? toks : NULL, *id;
    cJSON_ArrayForEach(id, list)
        if (!cJSON_IsNumber(id) || !hc_whole(id->valuedouble, INT_MAX))
            return hc_fail(r, HC_ERR_MALFORMED, "malformed event: \"tokens\" holds something other than a token id");
    int n = cJSON_IsArray(toks) ? cJSON_GetArraySize(toks) : 0;
    if (n || (cJSON_IsString(text) && text->valuestring[0])) {
        int count = n ? n : 1;
        if (count > max_tokens - r->n_tokens)
            return hc_fail(r, HC_ERR_TOO_MANY_TOKENS, "the server sent more than the %d tokens asked for (max_tokens)", max_tokens);
        if (hc_push(r, t, n ? toks : NULL, count)) return -1;
    }
    if (cJSON_IsString(fin)) snprintf(r->finish, sizeof(r->finish), "%s", fin->valuestring);
    return 0;
}

/* usage.<key>, when there: a whole number from 0 to max (more is too_many_tokens when
 * too_many, else malformed). *out untouched when absent or null. */
static int hc_usage_field(hc_result *r, const cJSON *usage, const char *key, double max, int too_many, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(usage, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !hc_whole(v->valuedouble, INFINITY))
        return hc_fail(r, HC_ERR_MALFORMED, "malformed event: usage.%s is not a whole number from 0", key);
    if (v->valuedouble > max)
        return hc_fail(r, too_many ? HC_ERR_TOO_MANY_TOKENS : HC_ERR_MALFORMED, "usage.%s is %.6g, more than %s%.0f", key,
                       v->valuedouble, too_many ? "the max_tokens asked for, " : "", max);
    *out = (int)v->valuedouble;
    return 0;
}

/* p past JSON's blanks (allowed between tokens, and so after the object), end at most. */
static const char *hc_skip_blank(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* The chunk's object: an error event, usage, choices. */
static int hc_object(hc_result *r, const cJSON *o, const char *data, int64_t t_ns, int max_tokens) {
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (er) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(er, "message");
        return hc_fail(r, HC_ERR_HTTP, "the server's error event: %s", hc_quote(cJSON_IsString(m) ? m->valuestring : "(no message)").s);
    }
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(o, "usage");
    if (cJSON_IsObject(usage) && (hc_usage_field(r, usage, "prompt_tokens", INT_MAX, 0, &r->usage_prompt) ||
                                  hc_usage_field(r, usage, "completion_tokens", max_tokens, 1, &r->usage_completion)))
        return -1;
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices"), *ch;
    if (!cJSON_IsArray(choices)) {
        if (cJSON_IsObject(usage)) return 0;
        return hc_fail(r, HC_ERR_MALFORMED, "malformed event: no \"choices\" array: %s", hc_quote(data).s);
    }
    cJSON_ArrayForEach(ch, choices)
        if (hc_choice(r, ch, t_ns, max_tokens)) return -1;
    return 0;
}

int hc_chunk(hc_result *r, const char *data, size_t len, int64_t t_ns, int max_tokens) {
    if (len == 6 && !memcmp(data, "[DONE]", 6)) return 1;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    int rc;
    if (!cJSON_IsObject(o)) rc = hc_fail(r, HC_ERR_MALFORMED, "malformed event: not a JSON object: %s", hc_quote(data).s);
    else if ((end = hc_skip_blank(end, data + len)) != data + len)
        rc = hc_fail(r, HC_ERR_MALFORMED, "malformed event: text after the JSON object: %s", hc_quote(end).s);
    else rc = hc_object(r, o, data, t_ns, max_tokens);
    cJSON_Delete(o);
    return rc;
}

int hc_verify(hc_result *r) {
    if (r->err) return -1;
    if (!r->n_tokens) return hc_fail(r, HC_ERR_NO_TOKENS, "no token came before [DONE]");
    if (r->usage_completion < 0) return 0;
    if (r->n_ids == r->n_tokens && r->usage_completion != r->n_tokens)
        return hc_fail(r, HC_ERR_USAGE_MISMATCH, "usage.completion_tokens is %d, but %d token ids came", r->usage_completion,
                       r->n_tokens);
    if (r->usage_completion < r->n_tokens)
        return hc_fail(r, HC_ERR_USAGE_MISMATCH, "usage.completion_tokens is %d, but %d events carried tokens", r->usage_completion,
                       r->n_tokens);
    return 0;
}

/* ======================================================================
 * One transfer
 * ====================================================================== */

typedef struct hc_xfer {
    CURL *h;
    hc_result *r;
    int max_tokens;         /* the request's */
    sse_parser sse;
    struct curl_slist *hdr;
    char *body;             /* the request's JSON */
    char errbody[HC_ERR_BODY];
    size_t errlen;
    int done;               /* [DONE] seen: the transfer was stopped there, a success */
    int checked;            /* the status and Content-Type were looked at */
    char curlerr[CURL_ERROR_SIZE];
} hc_xfer;

/* sse_feed's callback: 1 at [DONE] stops the feed (and the transfer), -1 a failure in r. */
static int hc_on_event(void *user, const char *data, size_t len) {
    hc_xfer *x = user;
    int rc = hc_chunk(x->r, data, len, hc_now(), x->max_tokens);
    if (rc == 1) x->done = 1;
    return rc;
}

/* 1 when the Content-Type ct is the media type want (case aside; parameters such as
 * "; charset=utf-8" allowed). */
static int hc_media_is(const char *ct, const char *want) {
    size_t n = strlen(want);
    if (!ct || strncasecmp(ct, want, n)) return 0;
    ct += n;
    while (*ct == ' ' || *ct == '\t') ct++;
    return *ct == 0 || *ct == ';';
}

/* The answer's head, at its first body bytes: the status, and a 200's Content-Type. */
static void hc_check_head(hc_xfer *x) {
    x->checked = 1;
    nl_c.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->r->http_status);
    if (x->r->http_status != 200) return;
    char *ct = NULL;
    nl_c.easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct);
    if (!hc_media_is(ct, "text/event-stream"))
        hc_fail(x->r, HC_ERR_CONTENT_TYPE, "the answer's Content-Type is %s, not text/event-stream (a streamed completion)",
                ct ? hc_quote(ct).s : "missing");
}

static size_t hc_write(char *p, size_t size, size_t nmemb, void *user) {
    hc_xfer *x = user;
    size_t n = size * nmemb;
    if (!x->checked) hc_check_head(x);
    if (x->r->http_status != 200) {     /* an error answer: keep its start for the message */
        size_t k = n < sizeof(x->errbody) - 1 - x->errlen ? n : sizeof(x->errbody) - 1 - x->errlen;
        memcpy(x->errbody + x->errlen, p, k);
        x->errlen += k;
        x->errbody[x->errlen] = 0;
        return n;
    }
    if (x->r->err || x->done) return CURL_WRITEFUNC_ERROR;
    int rc = sse_feed(&x->sse, p, n, hc_on_event, x);
    if (rc == 0) return n;
    /* [DONE]: stop reading here, whether or not the server closes the connection (a
     * CURLE_WRITE_ERROR that hc_finish takes for a success) */
    if (rc < 0 && !x->r->err) hc_fail(x->r, HC_ERR_MALFORMED, "malformed stream: a line or event longer than %u bytes", SSE_MAX_EVENT);
    return CURL_WRITEFUNC_ERROR;
}

static char *hc_body(const hc_opts *o, const hc_req *q) {
    cJSON *j = cJSON_CreateObject();
    if (o->model) cJSON_AddStringToObject(j, "model", o->model);
    cJSON *p = cJSON_AddArrayToObject(j, "prompt");
    for (int i = 0; i < q->n_prompt; i++) cJSON_AddItemToArray(p, cJSON_CreateNumber(q->prompt[i]));
    cJSON_AddNumberToObject(j, "max_tokens", q->max_tokens);
    cJSON_AddNumberToObject(j, "temperature", o->temperature);
    cJSON_AddNumberToObject(j, "top_p", o->topp > 0 && o->topp <= 1 ? o->topp : 1.0);
    cJSON_AddNumberToObject(j, "seed", (double)(q->seed & ((1ull << 53) - 1)));
    cJSON_AddTrueToObject(j, "stream");
    cJSON_AddTrueToObject(cJSON_AddObjectToObject(j, "stream_options"), "include_usage");
    if (o->ignore_eos) cJSON_AddTrueToObject(j, "ignore_eos");
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

/* s seconds as curl's milliseconds, rounded up: a small time-out stays one (curl's 0 is
 * "none"); capped at 2^31 - 1 ms (24 days). */
static long hc_ms(double s) {
    double ms = ceil(s * 1000);
    return ms < 1 ? 1 : ms > INT32_MAX ? INT32_MAX : (long)ms;
}

/* The options every request of bench's has: to the URL named and nowhere else. */
static void hc_confine(CURL *h, double timeout_s, char *errbuf) {
    nl_c.easy_setopt(h, CURLOPT_NOPROXY, "*");
    nl_c.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    nl_c.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    nl_c.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    nl_c.easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (timeout_s > 0) nl_c.easy_setopt(h, CURLOPT_TIMEOUT_MS, hc_ms(timeout_s));
    nl_c.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_s > 0 && timeout_s < 10 ? hc_ms(timeout_s) : 10000L);
}

static int hc_start(const hc_opts *o, const char *url, const hc_req *q, hc_result *r, hc_xfer *x) {
    memset(x, 0, sizeof(*x));
    x->r = r;
    x->max_tokens = q->max_tokens;
    sse_init(&x->sse);
    x->body = hc_body(o, q);
    x->h = nl_c.easy_init();
    x->hdr = nl_c.slist_append(NULL, "Content-Type: application/json");
    if (!x->body || !x->h || !x->hdr) return hc_fail(r, HC_ERR_OTHER, "out of memory");
    nl_c.easy_setopt(x->h, CURLOPT_URL, url);
    nl_c.easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
    nl_c.easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdr);
    nl_c.easy_setopt(x->h, CURLOPT_WRITEFUNCTION, hc_write);
    nl_c.easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    nl_c.easy_setopt(x->h, CURLOPT_PRIVATE, x);
    hc_confine(x->h, o->timeout_s, x->curlerr);
    r->sent_ns = hc_now();
    return 0;
}

static void hc_xfer_free(hc_xfer *x) {
    if (x->h) nl_c.easy_cleanup(x->h);
    nl_c.slist_free_all(x->hdr);
    free(x->body);
    sse_free(&x->sse);
    memset(x, 0, sizeof(*x));
}

/* An answer other than 200 (after the whole of it came): a redirect named with its
 * Location, else the status with the server's own message where it gave one
 * ({"error": {"message": ...}}), else the start of its body. */
static void hc_status_fail(hc_xfer *x) {
    hc_result *r = x->r;
    if (r->http_status >= 300 && r->http_status < 400) {
        char *loc = NULL;
        nl_c.easy_getinfo(x->h, CURLINFO_REDIRECT_URL, &loc);
        hc_fail(r, HC_ERR_REDIRECT, "HTTP %ld, a redirect to %s: not followed (requests go to the url named)", r->http_status,
                loc ? hc_quote(loc).s : "no Location");
        return;
    }
    cJSON *j = cJSON_Parse(x->errbody);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message");
    hc_fail(r, HC_ERR_HTTP, "HTTP %ld: %s", r->http_status, hc_quote(cJSON_IsString(m) ? m->valuestring : x->errbody).s);
    cJSON_Delete(j);
}

/* What a finished transfer was. */
static void hc_finish(hc_xfer *x, CURLcode cc) {
    hc_result *r = x->r;
    r->end_ns = hc_now();
    if (r->err) return;     /* the write callback named it (malformed, content_type, too_many_tokens) */
    if (x->done) {          /* stopped at [DONE] by the write callback, or ended there */
        hc_verify(r);
        return;
    }
    const char *why = x->curlerr[0] ? x->curlerr : nl_c.easy_strerror(cc);
    switch (cc) {
    case CURLE_OK: break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        hc_fail(r, HC_ERR_CONNECT, "no connection: %s", why);
        return;
    case CURLE_OPERATION_TIMEDOUT: hc_fail(r, HC_ERR_TIMEOUT, "timed out: %s", why); return;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
        hc_fail(r, HC_ERR_CLOSED, "the connection closed early after %d tokens: %s", r->n_tokens, why);
        return;
    default: hc_fail(r, HC_ERR_OTHER, "%s", why); return;
    }
    /* the status again: an answer without a body never reached the write callback */
    nl_c.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &r->http_status);
    if (r->http_status != 200) hc_status_fail(x);
    else hc_fail(r, HC_ERR_CLOSED, "the stream ended before [DONE], after %d tokens", r->n_tokens);
}

int hc_run(const hc_opts *o, const hc_req *reqs, int n, hc_result *res, char *err, size_t errlen) {
    pthread_once(&hc_once, hc_global_init);
    if (hc_init_rc != CURLE_OK)
        return snprintf(err, errlen, "%s", hc_load_err[0] ? hc_load_err : nl_c.easy_strerror(hc_init_rc)), -1;
    for (int i = 0; i < n; i++) {
        memset(&res[i], 0, sizeof(res[i]));
        res[i].usage_prompt = res[i].usage_completion = -1;
    }
    char url[2048];
    size_t ul = strlen(o->url);
    while (ul && o->url[ul - 1] == '/') ul--;
    if (snprintf(url, sizeof(url), "%.*s/v1/completions", (int)ul, o->url) >= (int)sizeof(url))
        return snprintf(err, errlen, "url %.64s...: longer than %zu bytes", o->url, sizeof(url) - 20), -1;
    CURLM *m = nl_c.multi_init();
    hc_xfer *x = calloc((size_t)(n > 0 ? n : 1), sizeof(*x));
    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (!m || !x || !order) {
        nl_c.multi_cleanup(m);
        free(x);
        free(order);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    /* sent in arrival order (stable: equal arrivals keep their index order) */
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && reqs[order[j]].arrival_ns < reqs[order[j - 1]].arrival_ns; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t t0 = hc_now();
    int next = 0, running = 0, finished = 0;
    while (finished < n) {
        int64_t now = hc_now();
        while (next < n && reqs[order[next]].arrival_ns <= now - t0 && (o->concurrency <= 0 || running < o->concurrency)) {
            int i = order[next++];
            if (hc_start(o, url, &reqs[i], &res[i], &x[i]) || nl_c.multi_add_handle(m, x[i].h) != CURLM_OK) {
                hc_fail(&res[i], HC_ERR_OTHER, "could not start the request");
                res[i].end_ns = hc_now();
                hc_xfer_free(&x[i]);
                finished++;
                if (o->on_done) o->on_done(o->user, i, &res[i]);
                continue;
            }
            running++;
        }
        int still = 0;
        nl_c.multi_perform(m, &still);
        CURLMsg *msg;
        int left;
        while ((msg = nl_c.multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            hc_xfer *xf = NULL;
            nl_c.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&xf);
            CURLcode cc = msg->data.result;
            nl_c.multi_remove_handle(m, xf->h);
            hc_finish(xf, cc);
            int i = (int)(xf - x);
            hc_xfer_free(xf);
            running--;
            finished++;
            if (o->on_done) o->on_done(o->user, i, &res[i]);
        }
        if (finished >= n) break;
        /* sleep until a socket is ready or the next arrival is due */
        int wait_ms = 100;
        if (next < n && (o->concurrency <= 0 || running < o->concurrency)) {
            int64_t due = t0 + reqs[order[next]].arrival_ns - hc_now();
            wait_ms = due <= 0 ? 0 : due < 100000000 ? (int)(due / 1000000) : 100;
        }
        if (running) nl_c.multi_poll(m, NULL, 0, wait_ms, NULL);
        else if (wait_ms > 0) {
            struct timespec d = {.tv_sec = 0, .tv_nsec = (long)wait_ms * 1000000};
            nanosleep(&d, NULL);
        }
    }
    for (int i = 0; i < n; i++)
        if (x[i].h) {
            nl_c.multi_remove_handle(m, x[i].h);
            hc_xfer_free(&x[i]);
        }
    nl_c.multi_cleanup(m);
    free(x);
    free(order);
    return 0;
}

void hc_results_free(hc_result *res, int n) {
    for (int i = 0; res && i < n; i++) {
        free(res[i].arrival_ns);
        free(res[i].ids);
        res[i].arrival_ns = NULL;
        res[i].ids = NULL;
    }
}

static size_t hc_discard(char *p, size_t size, size_t nmemb, void *user) {
    (void)p;
    (void)user;
    return size * nmemb;
}

/* One GET of url, its body to write(.., user); *status the HTTP code. 0, or -1 with err. */
static int hc_get_with(const char *url, double timeout_s, size_t (*write)(char *, size_t, size_t, void *), void *user,
                       long *status, char *err, size_t errlen) {
    char cerr[CURL_ERROR_SIZE] = "";
    *status = 0;
    pthread_once(&hc_once, hc_global_init);
    if (hc_init_rc != CURLE_OK)
        return snprintf(err, errlen, "%s", hc_load_err[0] ? hc_load_err : nl_c.easy_strerror(hc_init_rc)), -1;
    CURL *h = nl_c.easy_init();
    if (!h) return snprintf(err, errlen, "out of memory"), -1;
    nl_c.easy_setopt(h, CURLOPT_URL, url);
    nl_c.easy_setopt(h, CURLOPT_WRITEFUNCTION, write);
    nl_c.easy_setopt(h, CURLOPT_WRITEDATA, user);
    hc_confine(h, timeout_s, cerr);
    CURLcode cc = nl_c.easy_perform(h);
    if (cc == CURLE_OK) nl_c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    else snprintf(err, errlen, "%s: %s", url, cerr[0] ? cerr : nl_c.easy_strerror(cc));
    nl_c.easy_cleanup(h);
    return cc == CURLE_OK ? 0 : -1;
}

int hc_get(const char *url, double timeout_s, long *status, char *err, size_t errlen) {
    return hc_get_with(url, timeout_s, hc_discard, NULL, status, err, errlen);
}

/* A body kept up to its cap: past it the transfer stops (curl's write error). */
typedef struct hc_sink {
    char *p;
    size_t len, cap, max;
    int over;               /* stopped at max */
} hc_sink;

static size_t hc_keep(char *p, size_t size, size_t nmemb, void *user) {
    hc_sink *k = user;
    size_t n = size * nmemb;
    if (k->len + n > k->max) {
        k->over = 1;
        return 0;
    }
    if (k->len + n + 1 > k->cap) {
        size_t c = k->cap ? k->cap : 16384;
        while (c < k->len + n + 1) c *= 2;
        char *q = realloc(k->p, c);
        if (!q) return 0;
        k->p = q;
        k->cap = c;
    }
    memcpy(k->p + k->len, p, n);
    k->len += n;
    k->p[k->len] = 0;
    return n;
}

int hc_fetch(const char *url, double timeout_s, size_t max, long *status, char **body, size_t *len, char *err, size_t errlen) {
    *body = NULL;
    *len = 0;
    hc_sink k = {.max = max};
    if (hc_get_with(url, timeout_s, hc_keep, &k, status, err, errlen)) {
        if (k.over) snprintf(err, errlen, "%s: the body is over %zu bytes", url, max);
        free(k.p);
        return -1;
    }
    if (!k.p && !(k.p = calloc(1, 1))) return snprintf(err, errlen, "out of memory"), -1;
    *body = k.p;
    *len = k.len;
    return 0;
}
