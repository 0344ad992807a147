/* The http target's client: see httpc.h. */
#include "util/ut_clock.h"
#include "httpc.h"

#include <cJSON.h>
#include <curl/curl.h>

#include "harness/net/netlib.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sse.h"

/* The most of an error answer's body kept for its message. */
#define HC_ERR_BODY 2048

const char *hc_err_name(int err) {
    static const char *n[] = {"ok", "connect", "http", "timeout", "malformed", "closed", "other"};
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

static int hc_push(hc_result *r, int64_t t, const int *ids, int n) {
    if ((r->n_arrivals & (r->n_arrivals - 1)) == 0) {     /* grows at 0, 1, 2, 4 ... */
        size_t cap = r->n_arrivals ? (size_t)r->n_arrivals * 2 : 16;
        int64_t *a = realloc(r->arrival_ns, cap * sizeof(*a));
        if (!a) return hc_fail(r, HC_ERR_OTHER, "out of memory");
        r->arrival_ns = a;
    }
    r->arrival_ns[r->n_arrivals++] = t;
    if (!r->first_ns) r->first_ns = t;
    for (int i = 0; i < n; i++) {
        if ((r->n_ids & (r->n_ids - 1)) == 0) {
            size_t cap = r->n_ids ? (size_t)r->n_ids * 2 : 16;
            int *b = realloc(r->ids, cap * sizeof(*b));
            if (!b) return hc_fail(r, HC_ERR_OTHER, "out of memory");
            r->ids = b;
        }
        r->ids[r->n_ids++] = ids[i];
    }
    r->n_tokens += n > 0 ? n : 1;
    return 0;
}

int hc_chunk(hc_result *r, const char *data, size_t len, int64_t t_ns) {
    if (len == 6 && !memcmp(data, "[DONE]", 6)) return 1;
    cJSON *o = cJSON_ParseWithLength(data, len);
    int rc = 0;
    if (!cJSON_IsObject(o)) {
        rc = hc_fail(r, HC_ERR_MALFORMED, "malformed event: not a JSON object: %.80s", data);
        goto out;
    }
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (er) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(er, "message");
        rc = hc_fail(r, HC_ERR_HTTP, "the server's error event: %.200s", cJSON_IsString(m) ? m->valuestring : "(no message)");
        goto out;
    }
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(o, "usage");
    if (cJSON_IsObject(usage)) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens"),
                    *c = cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens");
        if (cJSON_IsNumber(p)) r->usage_prompt = p->valueint;
        if (cJSON_IsNumber(c)) r->usage_completion = c->valueint;
    }
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices");
    if (!cJSON_IsArray(choices)) {
        if (!cJSON_IsObject(usage)) rc = hc_fail(r, HC_ERR_MALFORMED, "malformed event: no \"choices\" array: %.80s", data);
        goto out;
    }
    const cJSON *ch;
    cJSON_ArrayForEach(ch, choices) {
        if (!cJSON_IsObject(ch)) {
            rc = hc_fail(r, HC_ERR_MALFORMED, "malformed event: a choice is not an object");
            goto out;
        }
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(ch, "text"), *toks = cJSON_GetObjectItemCaseSensitive(ch, "tokens"),
                    *fin = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
        int ids[64], n = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, toks) {
            if (!cJSON_IsNumber(t)) {
                rc = hc_fail(r, HC_ERR_MALFORMED, "malformed event: \"tokens\" holds a non-number");
                goto out;
            }
            if (n < 64) ids[n++] = t->valueint;
        }
        if (n || (cJSON_IsString(text) && text->valuestring[0])) {
            if (hc_push(r, t_ns, ids, n)) {
                rc = -1;
                goto out;
            }
        }
        if (cJSON_IsString(fin)) snprintf(r->finish, sizeof(r->finish), "%s", fin->valuestring);
    }
out:
    cJSON_Delete(o);
    return rc;
}

/* ======================================================================
 * One transfer
 * ====================================================================== */

typedef struct hc_xfer {
    CURL *h;
    hc_result *r;
    sse_parser sse;
    struct curl_slist *hdr;
    char *body;             /* the request's JSON */
    char errbody[HC_ERR_BODY];
    size_t errlen;
    int done;               /* [DONE] seen */
    int checked;            /* the status was looked at */
    char curlerr[CURL_ERROR_SIZE];
} hc_xfer;

static int hc_on_event(void *user, const char *data, size_t len) {
    hc_xfer *x = user;
    if (x->done) return 0;      /* anything after [DONE] is not ours to judge */
    int rc = hc_chunk(x->r, data, len, hc_now());
    if (rc == 1) x->done = 1;
    return rc < 0 ? -1 : 0;
}

static size_t hc_write(char *p, size_t size, size_t nmemb, void *user) {
    hc_xfer *x = user;
    size_t n = size * nmemb;
    if (!x->checked) {
        nl_c.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->r->http_status);
        x->checked = 1;
    }
    if (x->r->http_status != 200) {     /* an error answer: keep its start for the message */
        size_t k = n < sizeof(x->errbody) - 1 - x->errlen ? n : sizeof(x->errbody) - 1 - x->errlen;
        memcpy(x->errbody + x->errlen, p, k);
        x->errlen += k;
        x->errbody[x->errlen] = 0;
        return n;
    }
    if (sse_feed(&x->sse, p, n, hc_on_event, x)) {
        if (!x->r->err) hc_fail(x->r, HC_ERR_MALFORMED, "malformed stream: a line or event longer than %u bytes", SSE_MAX_EVENT);
        return CURL_WRITEFUNC_ERROR;
    }
    return n;
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

/* The options every request of bench's has: to the URL named and nowhere else. */
static void hc_confine(CURL *h, double timeout_s, char *errbuf) {
    nl_c.easy_setopt(h, CURLOPT_NOPROXY, "*");
    nl_c.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    nl_c.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    nl_c.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    nl_c.easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (timeout_s > 0) nl_c.easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    nl_c.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_s > 0 && timeout_s < 10 ? timeout_s * 1000 : 10000));
}

static int hc_start(const hc_opts *o, const char *url, const hc_req *q, hc_result *r, hc_xfer *x) {
    memset(x, 0, sizeof(*x));
    x->r = r;
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

/* What a finished transfer was. */
static void hc_finish(hc_xfer *x, CURLcode cc) {
    hc_result *r = x->r;
    r->end_ns = hc_now();
    if (r->err) return;     /* the write callback named it (malformed) */
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
    if (r->http_status != 200) {
        /* the server's own message where it gave one ({"error": {"message": ...}}) */
        cJSON *j = cJSON_Parse(x->errbody);
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message");
        hc_fail(r, HC_ERR_HTTP, "HTTP %ld: %.200s", r->http_status, cJSON_IsString(m) ? m->valuestring : x->errbody);
        cJSON_Delete(j);
        return;
    }
    if (!x->done) hc_fail(r, HC_ERR_CLOSED, "the stream ended before [DONE], after %d tokens", r->n_tokens);
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

int hc_get(const char *url, double timeout_s, long *status, char *err, size_t errlen) {
    pthread_once(&hc_once, hc_global_init);
    if (hc_init_rc != CURLE_OK)
        return snprintf(err, errlen, "%s", hc_load_err[0] ? hc_load_err : nl_c.easy_strerror(hc_init_rc)), -1;
    CURL *h = nl_c.easy_init();
    if (!h) return snprintf(err, errlen, "out of memory"), -1;
    char cerr[CURL_ERROR_SIZE] = "";
    nl_c.easy_setopt(h, CURLOPT_URL, url);
    nl_c.easy_setopt(h, CURLOPT_WRITEFUNCTION, hc_discard);
    hc_confine(h, timeout_s, cerr);
    CURLcode cc = nl_c.easy_perform(h);
    *status = 0;
    if (cc == CURLE_OK) nl_c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    else snprintf(err, errlen, "%s: %s", url, cerr[0] ? cerr : nl_c.easy_strerror(cc));
    nl_c.easy_cleanup(h);
    return cc == CURLE_OK ? 0 : -1;
}
