/* The http target's client: a workload's requests to an OpenAI-compatible server's
 * /v1/completions, streamed (server-sent events, sse.h), many in flight at once on
 * libcurl's multi interface, each timed from outside: when it was sent, when each token
 * arrived, when it ended, and how it failed.
 *
 * A request: the prompt as token ids (exact prompt lengths; bench serve, llama-server and
 * vLLM take them), max_tokens, stream: true with stream_options.include_usage, and
 * ignore_eos when asked. A streamed event counts as tokens when its choice carries text or
 * "tokens" (ids, an extension bench serve and llama-server send): one arrival, as many
 * tokens as ids (one without ids). The stream ends at "data: [DONE]".
 *
 * Failures, one per request, never dropped, each of one kind (hc_err_name, docs/http.md):
 *   connect          the connection refused, or the host not found
 *   http             an HTTP status other than 200 and 3xx, or an error event in the stream (the server's message)
 *   redirect         a 3xx: never followed, named with its Location
 *   timeout          no whole answer within the time-out
 *   malformed        an event that is not the JSON of a completion chunk (text after the object, a usage or an
 *                    id that is not a whole number), or an event or line longer than SSE_MAX_EVENT
 *   closed           the connection lost, or the stream ended before [DONE] (an empty 200 too)
 *   content_type     a 200 whose Content-Type is not text/event-stream
 *   no_tokens        [DONE] with no token before it: no first token, so no TTFT to report
 *   too_many_tokens  more tokens than max_tokens, streamed or in usage.completion_tokens
 *   usage_mismatch   usage.completion_tokens disagrees with the tokens that came (hc_verify)
 *   other            libcurl's other errors, out of memory
 * A request ends at [DONE]: what follows it, and whether the server then closes the
 * connection, is not waited for.
 *
 * Requests go to opts.url and nowhere else: no proxy from the environment, no redirect,
 * http and https only. Text a server sent that goes into a message (an error body, a
 * Location, an event) is cut and escaped for a terminal (es_term, util/ut_term.h).
 */
#ifndef BENCH_HTTPC_H
#define BENCH_HTTPC_H

#include <stddef.h>
#include <stdint.h>

/* The kinds of failure; the values travel in REQ_FAIL events (events.h): new ones go last. */
enum { HC_OK, HC_ERR_CONNECT, HC_ERR_HTTP, HC_ERR_TIMEOUT, HC_ERR_MALFORMED, HC_ERR_CLOSED, HC_ERR_OTHER, HC_ERR_REDIRECT,
       HC_ERR_CONTENT_TYPE, HC_ERR_NO_TOKENS, HC_ERR_TOO_MANY_TOKENS, HC_ERR_USAGE_MISMATCH, HC_ERR_COUNT };
const char *hc_err_name(int err);       /* "ok", "connect", ... as listed above; "?" out of range */

typedef struct hc_req {
    const int *prompt;      /* (n_prompt) token ids, borrowed */
    int n_prompt;
    int max_tokens;         /* >= 1 */
    int64_t arrival_ns;     /* sent this long after hc_run starts; 0: at once */
    uint64_t seed;          /* the request's "seed" */
} hc_req;

typedef struct hc_result {
    int err;                /* HC_OK or HC_ERR_* */
    char msg[256];          /* what failed, "" when ok */
    long http_status;       /* 0: no answer */
    int64_t sent_ns, first_ns, end_ns;      /* CLOCK_MONOTONIC; first_ns 0: no token came */
    int n_tokens;           /* tokens received (ids, else one an event), at most max_tokens */
    int n_arrivals;         /* events that carried tokens */
    int64_t *arrival_ns;    /* (n_arrivals) when each came, owned */
    int *ids;               /* (n_ids) the ids, when the server sends them; owned */
    int n_ids;
    int usage_prompt, usage_completion;     /* the server's usage, checked (completion <= max_tokens); -1: none */
    char finish[16];        /* the last finish_reason, "" when none */
} hc_result;

typedef struct hc_opts {
    const char *url;        /* the server's base URL, "http://127.0.0.1:8080" (no trailing /v1) */
    const char *model;      /* the request's "model"; NULL: not sent */
    double timeout_s;       /* each request's whole time at most, rounded up to whole ms (1 ms at least); 0: none */
    int concurrency;        /* requests in flight at most; 0: no limit */
    double temperature, topp;
    int ignore_eos;         /* 1: send "ignore_eos": true */
    /* (optional) each request as it ends, in the order they end */
    void (*on_done)(void *user, int req, const hc_result *r);
    void *user;
} hc_opts;

/* Sends every request and waits for all; res (n entries) gets each one's result. Returns
 * 0 (a failed request is a result, not an error), or -1 with err when nothing could be
 * sent (libcurl failed to start, out of memory). hc_results_free releases res's arrays. */
int hc_run(const hc_opts *o, const hc_req *reqs, int n, hc_result *res, char *err, size_t errlen);
void hc_results_free(hc_result *res, int n);

/* GET url: 0 with *status (the HTTP status), or -1 with err when no answer came within
 * timeout_s (refused, reset, timed out). For readiness probes. */
int hc_get(const char *url, double timeout_s, long *status, char *err, size_t errlen);

/* GET url into *body (malloc'd, NUL-terminated, *len bytes) and *status, for reading a server's
 * /metrics: 0, or -1 with err when no answer came within timeout_s or the body passed max
 * bytes. A status other than 200 is the caller's to judge (the body is kept). */
int hc_fetch(const char *url, double timeout_s, size_t max, long *status, char **body, size_t *len, char *err, size_t errlen);

/* Parses one event's data (sse.h) of a completion stream into r: tokens (at t_ns), ids,
 * usage, finish_reason, for a request of max_tokens (>= 1). Returns 1 for "[DONE]", 0 for a
 * chunk, -1 with r->err and r->msg for anything else. r starts zeroed with usage_* -1.
 * Exposed for the tests and fuzz/fuzz_sse.c. */
int hc_chunk(hc_result *r, const char *data, size_t len, int64_t t_ns, int max_tokens);
/* The answer after [DONE], checked against itself: at least one token, and usage that agrees
 * with the tokens that came. With ids on every token-bearing event (bench serve's "tokens")
 * the count is exact and usage must equal it; with text only, an event may carry several
 * tokens (a server holds back an incomplete UTF-8 character and sends it with the next, or
 * sends several tokens a step), so usage must be at least the events counted (and at most
 * max_tokens, checked as it came). Returns 0, or -1 with r->err (the first failure stays). */
int hc_verify(hc_result *r);

#endif
