/* bench serve's server: see server.h. */
#include "server.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "harness/net/batcher.h"
#include "harness/net/chat_tmpl.h"
#include "harness/net/oai_req.h"
#include "harness/net/stopstr.h"
#include "harness/net/netlib.h"
#include "util/ut_buf.h"
#include "util/ut_clock.h"

/* A request body larger than this is refused (413): a prompt of ids is ~7 bytes an id. */
#define HS_MAX_BODY (8u << 20)
/* Idle connections (nothing sent, nothing read) are closed after this; MHD's own timer. */
#define HS_IDLE_TIMEOUT_S 120
/* hs_stop lets the answers still owed go out for this long; then it cuts the connections
 * (under the http target's stop_timeout_s, 10 s, after which it kills the server) */
#define HS_STOP_GRACE_NS (5 * 1000000000LL)
/* The watchdog's period: a late connection is shut this long after its deadline, at most. */
#define HS_GUARD_TICK_NS (250 * 1000000LL)
/* It logs the connections it shut at most this often (a flood must not flood the log). */
#define HS_GUARD_LOG_NS (10 * 1000000000LL)

typedef struct hs_sock hs_sock;

struct hs_server {
    struct MHD_Daemon *d;
    engine *e;
    int port;
    char model_name[256];
    char fault[32];
    int header_timeout_s, body_timeout_s;
    hb_batcher *b;                  /* the engine thread: batcher.h */
    int max_batch;                  /* requests decoded together at most */
    int lenient;                    /* unknown request fields accepted (named in a header), not refused */
    ct_bound chat;                  /* the chat template; chat.t NULL: chat refused with chat_refusal */
    char chat_refusal[800];
    char template_line[160];        /* the X-Bench-Chat-Template header: name and where it came from */
    char fingerprint[96];           /* a chat answer's system_fingerprint: the same, shorter */
    /* all below under mu */
    pthread_mutex_t mu;
    pthread_cond_t ev_cv;           /* CLOCK_MONOTONIC: a request answered, or the server stops */
    int stopping;
    int active;                     /* requests received whole and not yet answered to the end */
    uint64_t next_id;               /* completion ids, "cmpl-<n>" */
    int died_once;                  /* fault "die": only the first stream */
    hs_sock *socks;                 /* the open connections, for their deadlines */
    pthread_t guard;                /* hs_guard: shuts the connections past their deadline */
    int guard_started;
    uint64_t cut;                   /* connections shut since the last log line */
    int64_t cut_logged_ns;
};

/* ======================================================================
 * The server's state
 * ====================================================================== */

const char *hs_failed(hs_server *s) { return s->b ? hb_failed(s->b) : NULL; }

static int hs_stopping(hs_server *s) {
    pthread_mutex_lock(&s->mu);
    int st = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return st || hs_failed(s);
}

static int hs_is_fault(const hs_server *s, const char *f) { return !strcmp(s->fault, f); }

/* An error's "type" for its HTTP status. */
static const char *hs_error_type(int code) {
    return code == 503 ? "unavailable_error" : code == 400 ? "invalid_request_error" : "server_error";
}

/* ======================================================================
 * Generation: each choice's tokens from the engine thread (batcher.h), as they come
 * ====================================================================== */

enum { HS_G_RUN, HS_G_TAIL, HS_G_DONE };
enum { HS_FIN_NONE, HS_FIN_LENGTH, HS_FIN_STOP };

/* One of a request's n choices: its own job (sequence), ids and text. */
typedef struct hs_choice {
    hb_job *job;            /* submitted to the engine thread; released with the gen */
    int *toks;              /* (max_new) ids generated */
    int n;                  /* ids so far */
    int fin;                /* HS_FIN_*: how it ended; NONE while it runs */
    ut_buf text;            /* decoded so far, cut before a stop string */
    size_t checked;         /* text searched for stop strings up to here */
    size_t sent;            /* streamed: bytes of text sent */
} hs_choice;

typedef struct hs_gen {
    hs_server *s;
    or_req r;
    hs_choice ch[OR_MAX_N]; /* (r.n) */
    int fd;                 /* the client's socket, watched while a job waits; -1: none */
    int state;              /* HS_G_* */
    int turn;               /* streamed: the choice whose next token is taken next (round robin) */
    int opened;             /* streamed chat: the role chunks are out */
    int code;               /* a failed job's HTTP status (hb_job_error) */
    uint64_t id;
    long created;
    char *out;              /* (out_cap) bytes to send */
    size_t out_len, out_off, out_cap;
    char fail[1024];        /* an engine failure, sent as an error event */
} hs_gen;

static void hs_gen_free(hs_gen *g) {
    if (!g) return;
    for (int i = 0; i < OR_MAX_N; i++) {
        hb_release(g->ch[i].job);
        free(g->ch[i].toks);
        ut_buf_free(&g->ch[i].text);
    }
    or_req_free(&g->r);
    free(g->out);
    free(g);
}

static int hs_out(hs_gen *g, const char *text) {
    size_t n = strlen(text);
    if (g->out_len + n > g->out_cap) {
        size_t c = g->out_cap ? g->out_cap : 1024;
        while (c < g->out_len + n) c *= 2;
        char *b = realloc(g->out, c);
        if (!b) return -1;
        g->out = b;
        g->out_cap = c;
    }
    memcpy(g->out + g->out_len, text, n);
    g->out_len += n;
    return 0;
}

static const char *hs_text(const hs_choice *c) { return c->text.p ? c->text.p : ""; }

/* The text of token id after prev (empty without a vocabulary). */
static void hs_piece(const hs_gen *g, int prev, int id, char *buf, size_t len) {
    const tokenizer *tok = engine_tokenizer(g->s->e);
    buf[0] = 0;
    if (!tok) return;
    const char *p = tokenizer_decode(tok, prev, id, buf, len);
    if (p != buf) snprintf(buf, len, "%s", p ? p : "");
}

static int hs_is_stop_id(const hs_gen *g, int tok) {
    for (int i = 0; i < g->r.n_stop_ids; i++)
        if (g->r.stop_ids[i] == tok) return 1;
    return 0;
}

enum { HS_NEXT_TOKEN = 0, HS_NEXT_END = 1, HS_NEXT_GONE = 2, HS_NEXT_FAIL = -1 };

/* A token just taken into c's text, and whether it ends c: a stop id (its text left out), a
 * stop string (the text cut before it), or the job's last token. A choice that stops early
 * gives its job back (hb_finish): the engine makes no more of it. */
static int hs_add_token(hs_gen *g, hs_choice *c, int tok, int last) {
    int prev = c->n ? c->toks[c->n - 1] : g->r.ids[g->r.n_prompt - 1];
    c->toks[c->n++] = tok;
    if (hs_is_stop_id(g, tok)) {
        c->fin = HS_FIN_STOP;
        hb_finish(c->job);
        return HS_NEXT_TOKEN;
    }
    char piece[256];
    hs_piece(g, prev, tok, piece, sizeof(piece));
    if (ut_buf_append(&c->text, piece, strlen(piece))) {
        g->code = 500;
        snprintf(g->fail, sizeof(g->fail), "out of memory");
        return HS_NEXT_FAIL;
    }
    long at = stop_find(hs_text(c), c->text.len, c->checked, (const char *const *)g->r.stop, g->r.n_stop);
    c->checked = c->text.len;
    if (at >= 0) {
        c->text.len = (size_t)at;
        c->text.p[at] = 0;
        c->fin = HS_FIN_STOP;
        hb_finish(c->job);
    } else if (last) {
        c->fin = hb_job_eos(c->job) ? HS_FIN_STOP : HS_FIN_LENGTH;
    }
    return HS_NEXT_TOKEN;
}

/* Choice c's next token (HS_NEXT_TOKEN; c->fin set when it was its last), or its end with no
 * more (HS_NEXT_END), the client gone (HS_NEXT_GONE), or its failure (HS_NEXT_FAIL, g->code
 * and g->fail). */
static int hs_take(hs_gen *g, hs_choice *c) {
    int tok, last;
    switch (hb_next(c->job, c->n, g->fd, &tok, &last)) {
    case HB_TOKEN: return hs_add_token(g, c, tok, last);
    case HB_END:
        c->fin = hb_job_eos(c->job) ? HS_FIN_STOP : HS_FIN_LENGTH;
        return HS_NEXT_END;
    case HB_GONE: return HS_NEXT_GONE;
    default:
        g->code = hb_job_error(c->job, g->fail, sizeof(g->fail));
        return HS_NEXT_FAIL;
    }
}

static const char *hs_finish_reason(const hs_choice *c) { return c->fin == HS_FIN_STOP ? "stop" : "length"; }

static cJSON *hs_usage(const hs_gen *g) {
    cJSON *u = cJSON_CreateObject();
    int out = 0;
    for (int i = 0; i < g->r.n; i++) out += g->ch[i].n;
    cJSON_AddNumberToObject(u, "prompt_tokens", g->r.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", out);
    cJSON_AddNumberToObject(u, "total_tokens", g->r.n_prompt + out);
    return u;
}

static cJSON *hs_envelope(const hs_gen *g, int chunk) {
    cJSON *o = cJSON_CreateObject();
    int chat = g->r.kind == OR_CHAT;
    char id[48];
    snprintf(id, sizeof(id), "%s-%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)g->id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", !chat ? "text_completion" : chunk ? "chat.completion.chunk" : "chat.completion");
    cJSON_AddNumberToObject(o, "created", (double)g->created);
    cJSON_AddStringToObject(o, "model", g->s->model_name);
    if (chat) cJSON_AddStringToObject(o, "system_fingerprint", g->s->fingerprint);
    return o;
}

/* A choice's object: index, the text (chat: in "message" or, streamed, "delta"), the ids
 * (an extension: exactly the tokens, n_ids of them from first_id), and its finish_reason
 * when fin (else null). */
static cJSON *hs_choice_json(const hs_gen *g, int i, const char *text, int first_id, int n_ids, int chunk, int fin) {
    const hs_choice *c = &g->ch[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", i);
    if (g->r.kind == OR_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(o, chunk ? "delta" : "message");
        if (!chunk) cJSON_AddStringToObject(m, "role", "assistant");
        if (text) cJSON_AddStringToObject(m, "content", text);
    } else {
        cJSON_AddStringToObject(o, "text", text ? text : "");
    }
    cJSON *t = cJSON_AddArrayToObject(o, "tokens");
    for (int k = first_id; k < first_id + n_ids; k++) cJSON_AddItemToArray(t, cJSON_CreateNumber(c->toks[k]));
    cJSON_AddNullToObject(o, "logprobs");
    if (fin) cJSON_AddStringToObject(o, "finish_reason", hs_finish_reason(c));
    else cJSON_AddNullToObject(o, "finish_reason");
    return o;
}

/* One "data: {...}\n\n" event of o (consumed). */
static int hs_event(hs_gen *g, cJSON *o) {
    char *js = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    int rc = !js || hs_out(g, "data: ") || hs_out(g, js) || hs_out(g, "\n\n");
    free(js);
    return rc ? -1 : 0;
}

/* The event for choice i after a token (with_token) or its end without one: the text that
 * can go now (all of it once the choice ended; else what cannot be the start of a stop
 * string or a part of a character). */
static int hs_chunk(hs_gen *g, int i, int with_token) {
    hs_choice *c = &g->ch[i];
    size_t upto = c->text.len;
    if (!c->fin) upto -= stop_holdback(hs_text(c), c->text.len, (const char *const *)g->r.stop, g->r.n_stop);
    if (upto < c->sent) upto = c->sent;     /* a stop string cut below what went: nothing more to send */
    char *delta = strndup(hs_text(c) + c->sent, upto - c->sent);
    if (!delta) return -1;
    c->sent = upto;
    cJSON *o = hs_envelope(g, 1), *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON_AddItemToArray(choices, hs_choice_json(g, i, delta, c->n - 1, with_token, 1, c->fin != HS_FIN_NONE));
    free(delta);
    return hs_event(g, o);
}

/* A streamed chat's first events: each choice's role, as OpenAI's streams begin. */
static int hs_open_chat(hs_gen *g) {
    for (int i = 0; i < g->r.n; i++) {
        cJSON *o = hs_envelope(g, 1), *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
        cJSON_AddItemToArray(choices, c);
        cJSON_AddNumberToObject(c, "index", i);
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        cJSON_AddStringToObject(d, "role", "assistant");
        cJSON_AddStringToObject(d, "content", "");
        cJSON_AddNullToObject(c, "logprobs");
        cJSON_AddNullToObject(c, "finish_reason");
        if (hs_event(g, o)) return -1;
    }
    return 0;
}

/* The stream's end: usage when asked, then [DONE]. */
static int hs_tail(hs_gen *g) {
    if (g->r.usage) {
        cJSON *o = hs_envelope(g, 1);
        cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToObject(o, "usage", hs_usage(g));
        if (hs_event(g, o)) return -1;
    }
    return hs_out(g, "data: [DONE]\n\n");
}

/* An error event: the stream has begun (200), so the failure goes in it. */
static int hs_error_event(hs_gen *g) {
    char msg[1400];
    cJSON *o = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(er, "message", g->fail);
    cJSON_AddStringToObject(er, "type", hs_error_type(g->code));
    cJSON_AddNumberToObject(er, "code", g->code);
    char *js = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    snprintf(msg, sizeof(msg), "data: %s\n\n", js ? js : "{}");
    free(js);
    return hs_out(g, msg);
}

/* The choice whose token comes next, round robin over those still running; -1: none. */
static int hs_next_choice(hs_gen *g) {
    for (int k = 0; k < g->r.n; k++) {
        int i = (g->turn + k) % g->r.n;
        if (!g->ch[i].fin) {
            g->turn = (i + 1) % g->r.n;
            return i;
        }
    }
    return -1;
}

/* The test hooks that cut or spoil a stream after choice 0's tokens; 1 when it must end now. */
static int hs_stream_fault(hs_gen *g, const hs_choice *c) {
    if (c != &g->ch[0]) return 0;
    if (c->n == 3 && hs_is_fault(g->s, "close-early")) return 1;
    if (c->n == 3 && hs_is_fault(g->s, "die") && !g->s->died_once) {
        g->s->died_once = 1;
        fprintf(stderr, "bench serve: test hook: dying mid-stream\n");
        _exit(7);
    }
    return 0;
}

/* The next event into g->out: a token's, a choice's end, or an error's. 0, or -1 to cut the stream. */
static int hs_stream_event(hs_gen *g) {
    if (g->r.kind == OR_CHAT && !g->opened) {
        g->opened = 1;
        return hs_open_chat(g);
    }
    int i = hs_next_choice(g);
    if (i < 0) {
        g->state = HS_G_TAIL;
        return 0;
    }
    hs_choice *c = &g->ch[i];
    int rc = hs_take(g, c);
    if (rc == HS_NEXT_GONE) return -1;      /* the client hung up: hs_gen_free cancels the jobs */
    if (rc == HS_NEXT_FAIL) {
        g->state = HS_G_DONE;
        return hs_error_event(g);
    }
    int running = 0;
    for (int k = 0; k < g->r.n; k++) running += !g->ch[k].fin;
    if (!running) g->state = HS_G_TAIL;
    if (rc == HS_NEXT_END) return hs_chunk(g, i, 0);
    if (hs_stream_fault(g, c)) return -1;
    if (c->n == 2 && i == 0 && hs_is_fault(g->s, "malformed")) return hs_out(g, "data: {\"choices\": [ {\"text\": \n\n");
    return hs_chunk(g, i, 1);
}

/* MHD's content reader: one event a call, made when the last is sent. */
static ssize_t hs_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    hs_gen *g = cls;
    (void)pos;
    while (g->out_off == g->out_len) {
        g->out_off = g->out_len = 0;
        switch (g->state) {
        case HS_G_DONE: return MHD_CONTENT_READER_END_OF_STREAM;
        case HS_G_TAIL:
            g->state = HS_G_DONE;
            if (hs_tail(g)) return MHD_CONTENT_READER_END_WITH_ERROR;
            break;
        default:
            if (hs_stream_event(g)) return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t n = g->out_len - g->out_off;
    if (n > max) n = max;
    memcpy(buf, g->out + g->out_off, n);
    g->out_off += n;
    return (ssize_t)n;
}

static void hs_stream_free(void *cls) { hs_gen_free(cls); }

/* ======================================================================
 * HTTP
 * ====================================================================== */

typedef struct hs_conn {
    char *body;             /* (cap) the request body so far */
    size_t len, cap;
    int too_big;
    int counted;            /* received whole: counted in s->active until it completes */
} hs_conn;

/* ======================================================================
 * Connections: deadlines and limits
 *
 * MHD's own timeout is an idle timeout: a client that sends one header byte every few
 * seconds would hold its connection (and, a thousand of them, every connection) forever.
 * So each connection owes, by a deadline, its headers (from its start, or from the end of
 * its last request when kept alive) and then its body; hs_guard shuts the late ones. While
 * a request waits for the engine, runs or streams, it owes nothing.
 * ====================================================================== */

enum { HS_P_HEADERS, HS_P_BODY, HS_P_BUSY, HS_P_CUT };

struct hs_sock {
    int fd;                 /* MHD's; shut (never closed) here, while MHD has not closed it */
    int phase;              /* HS_P_*: what the connection owes */
    int64_t deadline_ns;    /* the headers or the body whole by then */
    hs_sock *prev, *next;
};

/* Called by MHD around each connection; the socket is closed after CLOSED returns, so a
 * hs_sock in s->socks always names an open socket of that connection. */
static void hs_sock_track(hs_server *s, void **socket_ctx, enum MHD_ConnectionNotificationCode code, int fd) {
    hs_sock *k = *socket_ctx;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!k) return;
        pthread_mutex_lock(&s->mu);
        if (k->prev) k->prev->next = k->next;
        else s->socks = k->next;
        if (k->next) k->next->prev = k->prev;
        pthread_mutex_unlock(&s->mu);
        free(k);
        *socket_ctx = NULL;
        return;
    }
    if (!(k = calloc(1, sizeof(*k)))) return;      /* untracked: MHD's idle timeout still applies */
    k->fd = fd;
    k->phase = HS_P_HEADERS;
    k->deadline_ns = ut_now_ns() + (int64_t)s->header_timeout_s * 1000000000;
    pthread_mutex_lock(&s->mu);
    k->next = s->socks;
    if (s->socks) s->socks->prev = k;
    s->socks = k;
    pthread_mutex_unlock(&s->mu);
    *socket_ctx = k;
}

/* What connection c owes now (HS_P_*), and its deadline for it. */
static void hs_sock_phase(hs_server *s, struct MHD_Connection *c, int phase) {
    const union MHD_ConnectionInfo *ci = nl_m.get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    hs_sock *k = ci ? ci->socket_context : NULL;
    if (!k) return;
    int64_t secs = phase == HS_P_HEADERS ? s->header_timeout_s : s->body_timeout_s;
    pthread_mutex_lock(&s->mu);
    if (k->phase != HS_P_CUT) {
        k->phase = phase;
        k->deadline_ns = ut_now_ns() + secs * 1000000000;
    }
    pthread_mutex_unlock(&s->mu);
}

static void hs_ev_wait(hs_server *s, int64_t until_ns) {
    struct timespec ts = {.tv_sec = (time_t)(until_ns / 1000000000), .tv_nsec = (long)(until_ns % 1000000000)};
    pthread_cond_timedwait(&s->ev_cv, &s->mu, &ts);
}

/* The watchdog: shuts every connection past its deadline. MHD's thread then reads the end
 * of the stream and closes the connection, and its slot is free for the next client. */
static void hs_guard_log(hs_server *s, int64_t now) {
    fprintf(stderr, "bench serve: closed %llu connection%s that did not send a whole request in time "
            "(headers within %d s, body within %d s)\n", (unsigned long long)s->cut, s->cut == 1 ? "" : "s",
            s->header_timeout_s, s->body_timeout_s);
    s->cut = 0;
    s->cut_logged_ns = now;
}

static void *hs_guard(void *arg) {
    hs_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        int64_t now = ut_now_ns();
        for (hs_sock *k = s->socks; k; k = k->next) {
            if ((k->phase != HS_P_HEADERS && k->phase != HS_P_BODY) || now < k->deadline_ns) continue;
            shutdown(k->fd, SHUT_RDWR);
            k->phase = HS_P_CUT;
            s->cut++;
        }
        if (s->cut && (!s->cut_logged_ns || now - s->cut_logged_ns >= HS_GUARD_LOG_NS)) hs_guard_log(s, now);
        hs_ev_wait(s, now + HS_GUARD_TICK_NS);
    }
    if (s->cut) hs_guard_log(s, ut_now_ns());       /* those not yet told */
    pthread_mutex_unlock(&s->mu);
    return NULL;
}


/* Headers an answer to g carries (g NULL: none): the chat template used, the fields taken
 * and not acted on. */
static void hs_headers(struct MHD_Response *r, const hs_gen *g) {
    if (!g) return;
    if (g->r.kind == OR_CHAT) nl_m.add_response_header(r, "X-Bench-Chat-Template", g->s->template_line);
    if (g->r.ignored[0]) nl_m.add_response_header(r, "X-Bench-Ignored-Fields", g->r.ignored);
}

static enum MHD_Result hs_send(struct MHD_Connection *c, unsigned code, const char *type, char *text, const hs_gen *g) {
    struct MHD_Response *r = nl_m.create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    nl_m.add_response_header(r, "Content-Type", type);
    hs_headers(r, g);
    enum MHD_Result rc = nl_m.queue_response(c, code, r);
    nl_m.destroy_response(r);
    return rc;
}

static enum MHD_Result hs_json(struct MHD_Connection *c, unsigned code, cJSON *o, const hs_gen *g) {
    char *js = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!js) return MHD_NO;
    size_t n = strlen(js);
    char *t = realloc(js, n + 2);
    if (!t) {
        free(js);
        return MHD_NO;
    }
    memcpy(t + n, "\n", 2);
    return hs_send(c, code, "application/json", t, g);
}

static enum MHD_Result hs_error(struct MHD_Connection *c, unsigned code, const char *type, const char *msg) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNumberToObject(e, "code", code);
    return hs_json(c, code, o, NULL);
}

/* r (taken) submitted to the engine thread, one job a choice (choice i seeded seed + i, so
 * that sampled choices differ and each is reproducible); NULL with *code and msg when refused. */
static hs_gen *hs_gen_new(hs_server *s, struct MHD_Connection *c, or_req *r, int *code, char *msg, size_t len) {
    hs_gen *g = calloc(1, sizeof(*g));
    if (!g) {
        *code = 500;
        snprintf(msg, len, "out of memory");
        or_req_free(r);
        return NULL;
    }
    g->s = s;
    g->r = *r;
    memset(r, 0, sizeof(*r));
    const union MHD_ConnectionInfo *ci = nl_m.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    g->fd = ci ? ci->connect_fd : -1;
    pthread_mutex_lock(&s->mu);
    g->id = s->next_id++;
    pthread_mutex_unlock(&s->mu);
    g->created = (long)time(NULL);
    for (int i = 0; i < g->r.n; i++) {
        hb_params p = {.prompt = g->r.ids, .n_prompt = g->r.n_prompt, .max_new = g->r.max_new, .temperature = g->r.temperature,
                       .topp = g->r.topp, .seed = g->r.seed + (uint64_t)i, .ignore_eos = g->r.ignore_eos};
        if (!(g->ch[i].toks = malloc((size_t)g->r.max_new * sizeof(int)))) {
            *code = 500;
            snprintf(msg, len, "out of memory");
        }
        if (!g->ch[i].toks || !(g->ch[i].job = hb_submit(s->b, &p, code, msg, len))) {
            hs_gen_free(g);
            return NULL;
        }
    }
    return g;
}

/* Not streamed: every choice whole, in one JSON answer. */
static enum MHD_Result hs_complete_once(struct MHD_Connection *c, hs_gen *g) {
    int rc = HS_NEXT_TOKEN;
    for (int i = 0; i < g->r.n && (rc == HS_NEXT_TOKEN || rc == HS_NEXT_END); i++)
        while (!g->ch[i].fin && ((rc = hs_take(g, &g->ch[i])) == HS_NEXT_TOKEN || rc == HS_NEXT_END)) {}
    if (rc == HS_NEXT_GONE) {       /* nobody to answer: hs_gen_free cancels the jobs */
        hs_gen_free(g);
        return MHD_NO;
    }
    if (rc == HS_NEXT_FAIL) {
        enum MHD_Result mr = hs_error(c, (unsigned)g->code, hs_error_type(g->code), g->fail);
        hs_gen_free(g);
        return mr;
    }
    cJSON *o = hs_envelope(g, 0), *choices = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < g->r.n; i++) cJSON_AddItemToArray(choices, hs_choice_json(g, i, hs_text(&g->ch[i]), 0, g->ch[i].n, 0, 1));
    cJSON_AddItemToObject(o, "usage", hs_usage(g));
    enum MHD_Result mr = hs_json(c, 200, o, g);
    hs_gen_free(g);
    return mr;
}

static enum MHD_Result hs_completions(hs_server *s, struct MHD_Connection *c, hs_conn *k, or_kind kind) {
    if (k->too_big) {
        char msg[128];
        snprintf(msg, sizeof(msg), "the request body is larger than %u bytes", HS_MAX_BODY);
        return hs_error(c, 413, "invalid_request_error", msg);
    }
    if (hs_is_fault(s, "refuse")) return hs_error(c, 503, "server_error", "test hook: refusing every completion");
    if (hs_stopping(s)) {
        char msg[1200];
        const char *why = hs_failed(s);
        snprintf(msg, sizeof(msg), "the server is stopping%s%s", why ? ": " : "", why ? why : "");
        return hs_error(c, 503, "unavailable_error", msg);
    }
    const model *m = engine_model(s->e);
    or_ctx ctx = {.tok = engine_tokenizer(s->e), .vocab = m->cfg.vocab_size, .max_pos = engine_max_pos(s->e),
                  .chat = s->chat.t ? &s->chat : NULL, .chat_refusal = s->chat_refusal, .lenient = s->lenient};
    or_req r;
    char err[1600];
    if (or_parse(&ctx, kind, k->body ? k->body : "", k->len, &r, err, sizeof(err))) {
        or_req_free(&r);
        return hs_error(c, 400, "invalid_request_error", err);
    }
    int code;
    hs_gen *g = hs_gen_new(s, c, &r, &code, err, sizeof(err));
    if (!g) return hs_error(c, (unsigned)code, hs_error_type(code), err);
    if (!g->r.stream) return hs_complete_once(c, g);
    struct MHD_Response *resp = nl_m.create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, hs_stream_read, g, hs_stream_free);
    if (!resp) {
        hs_gen_free(g);
        return MHD_NO;
    }
    nl_m.add_response_header(resp, "Content-Type", "text/event-stream");
    nl_m.add_response_header(resp, "Cache-Control", "no-cache");
    hs_headers(resp, g);
    enum MHD_Result rc = nl_m.queue_response(c, 200, resp);
    nl_m.destroy_response(resp);
    return rc;
}


static enum MHD_Result hs_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    hs_server *s = cls;
    (void)version;
    hs_conn *k = *con_cls;
    if (!k) {       /* the headers: the body, if any, comes in the calls after */
        if (!(k = calloc(1, sizeof(*k)))) return MHD_NO;
        *con_cls = k;
        hs_sock_phase(s, c, HS_P_BODY);
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (k->too_big || k->len + n > HS_MAX_BODY) {
            k->too_big = 1;
            return MHD_YES;
        }
        if (k->len + n + 1 > k->cap) {
            size_t cap = k->cap ? k->cap : 4096;
            while (cap < k->len + n + 1) cap *= 2;
            char *b = realloc(k->body, cap);
            if (!b) return MHD_NO;
            k->body = b;
            k->cap = cap;
        }
        memcpy(k->body + k->len, upload, n);
        k->len += n;
        k->body[k->len] = 0;
        return MHD_YES;
    }
    if (!k->counted) {      /* the request is whole: it owes nothing now, and hs_stop waits for its answer */
        k->counted = 1;
        hs_sock_phase(s, c, HS_P_BUSY);
        pthread_mutex_lock(&s->mu);
        s->active++;
        pthread_mutex_unlock(&s->mu);
    }
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health")) {
        if (!get) return hs_error(c, 405, "invalid_request_error", "/health: use GET");
        if (hs_is_fault(s, "never-ready")) return hs_error(c, 503, "unavailable_error", "test hook: never ready");
        if (hs_stopping(s)) return hs_error(c, 503, "unavailable_error", "the server is stopping");
        int running, waiting;
        hb_load(s->b, &running, &waiting);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "ok");
        cJSON_AddNumberToObject(o, "running", running);
        cJSON_AddNumberToObject(o, "waiting", waiting);
        return hs_json(c, 200, o, NULL);
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) return hs_error(c, 405, "invalid_request_error", "/metrics: use GET");
        char *text = hb_metrics(s->b);
        if (!text) return hs_error(c, 500, "server_error", "out of memory");
        return hs_send(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, NULL);
    }
    if (!strcmp(url, "/v1/models")) {
        if (!get) return hs_error(c, 405, "invalid_request_error", "/v1/models: use GET");
        cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "object", "list");
        cJSON_AddItemToArray(data, m);
        cJSON_AddStringToObject(m, "id", s->model_name);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddStringToObject(m, "owned_by", "bench");
        cJSON_AddNumberToObject(m, "max_model_len", engine_max_pos(s->e));
        return hs_json(c, 200, o, NULL);
    }
    if (!strcmp(url, "/v1/completions")) {
        if (!post) return hs_error(c, 405, "invalid_request_error", "/v1/completions: use POST");
        return hs_completions(s, c, k, OR_COMPLETION);
    }
    if (!strcmp(url, "/v1/chat/completions")) {
        if (!post) return hs_error(c, 405, "invalid_request_error", "/v1/chat/completions: use POST");
        return hs_completions(s, c, k, OR_CHAT);
    }
    char msg[300];
    snprintf(msg, sizeof(msg), "%.200s: no such endpoint (have: /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics)", url);
    return hs_error(c, 404, "not_found_error", msg);
}

/* Each token is its own small write: without TCP_NODELAY, Nagle's algorithm holds one back
 * until the client acknowledges the last, and the client's ITL would measure that. */
static void hs_connection(void *cls, struct MHD_Connection *c, void **socket_ctx, enum MHD_ConnectionNotificationCode code) {
    hs_server *s = cls;
    if (code != MHD_CONNECTION_NOTIFY_STARTED) {
        hs_sock_track(s, socket_ctx, code, -1);
        return;
    }
    const union MHD_ConnectionInfo *ci = nl_m.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return;
    int one = 1;
    setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    hs_sock_track(s, socket_ctx, code, ci->connect_fd);
}

static void hs_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    hs_server *s = cls;
    (void)why;
    hs_conn *k = *con_cls;
    if (k && k->counted) {
        pthread_mutex_lock(&s->mu);
        s->active--;
        pthread_cond_broadcast(&s->ev_cv);
        pthread_mutex_unlock(&s->mu);
    }
    if (k) free(k->body);
    free(k);
    *con_cls = NULL;
    hs_sock_phase(s, c, HS_P_HEADERS);     /* kept alive: the next request's headers are owed from now */
}

/* The engine thread (batcher.h). "slow" serves one request at a time unless max_batch
 * says otherwise: its tests want requests queued behind the one running. */
static int hs_start_engine(hs_server *s, engine *e, const hs_opts *o, char *err, size_t errlen) {
    int seqs = engine_max_seqs(e);
    int mb = o->max_batch ? o->max_batch : hs_is_fault(s, "slow") ? 1 : seqs;
    if (mb < 1) return bench_errf(err, errlen, "max_batch %d: expected at least 1", mb);
    /* a per-sequence kv module under a KV budget may have made fewer sequences than asked */
    s->max_batch = mb < seqs ? mb : seqs;
    const tokenizer *tok = engine_tokenizer(e);
    hb_opts bo = {.max_batch = s->max_batch, .reserve_output = o->reserve_output, .eos = tok ? tokenizer_eos(tok) : engine_model(e)->vocab.eos,
                  .gather = hs_is_fault(s, "gather"), .step_delay_ms = hs_is_fault(s, "slow") ? 50 : 0, .model_fault = o->model_fault};
    char e2[512];
    if (hb_create(e, &bo, &s->b, e2, sizeof(e2))) return bench_errf(err, errlen, "the engine thread: %s", e2);
    return 0;
}

/* The chat template: the one named (hs_opts.chat_template), else the model's recognised,
 * else "plain" for a model without one. A model's template bench does not recognise leaves
 * chat refused (with the reason, said once at start-up) and completions served. */
static int hs_chat_template(hs_server *s, const hs_opts *o, char *err, size_t errlen) {
    const model_vocab *v = &engine_model(s->e)->vocab;
    const ct_template *t = NULL;
    const char *source;
    if (o->chat_template) {
        char names[128];
        if (!(t = ct_find(o->chat_template)))
            return bench_errf(err, errlen, "chat template \"%s\": expected one of %s", o->chat_template, ct_names(names, sizeof(names)));
        source = "named by --chat-template";
    } else if (ct_detect(v->chat_template, &t, s->chat_refusal, sizeof(s->chat_refusal))) {
        fprintf(stderr, "bench serve: POST /v1/chat/completions will be refused: %s\n", s->chat_refusal);
        return 0;
    } else {
        source = v->chat_template ? "recognised in the model's tokenizer.chat_template" : "fallback: the model has no chat template";
    }
    ct_bind(t, v, &s->chat);
    snprintf(s->template_line, sizeof(s->template_line), "%s (%s)", ct_name(t), source);
    snprintf(s->fingerprint, sizeof(s->fingerprint), "bench-serve/chat-template=%s%s", ct_name(t),
             !o->chat_template && !v->chat_template ? "/fallback" : "");
    return 0;
}

int hs_start(engine *e, const hs_opts *o, hs_server **out, char *err, size_t errlen) {
    *out = NULL;
    const char *host = o && o->host ? o->host : "127.0.0.1";
    int port = o ? o->port : 0;
    if (port < 0 || port > 65535) return bench_errf(err, errlen, "port %d: expected 0 (any free port) to 65535", port);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return bench_errf(err, errlen, "host \"%s\": expected a dotted IPv4 address such as 127.0.0.1", host);
    hs_opts dflt = {0};
    if (!o) o = &dflt;
    int header_s = o->header_timeout_s ? o->header_timeout_s : HS_HEADER_TIMEOUT_S;
    int body_s = o->body_timeout_s ? o->body_timeout_s : HS_BODY_TIMEOUT_S;
    int max_conn = o->max_connections ? o->max_connections : HS_MAX_CONNECTIONS;
    int max_ip = o->max_per_ip ? o->max_per_ip : HS_MAX_PER_IP;
    if (header_s < 0 || body_s < 0 || max_conn < 0 || max_ip < 0)
        return bench_errf(err, errlen, "limits: expected whole numbers > 0 (header %d s, body %d s, connections %d, per address %d)",
                       header_s, body_s, max_conn, max_ip);
    if (nl_mhd_load(err, errlen)) return -1;   /* loaded here, not linked (netlib.h) */
    hs_server *s = calloc(1, sizeof(*s));
    if (!s) return bench_errf(err, errlen, "out of memory");
    s->e = e;
    snprintf(s->model_name, sizeof(s->model_name), "%s", o->model_name ? o->model_name : "bench");
    snprintf(s->fault, sizeof(s->fault), "%s", o->fault ? o->fault : "");
    s->header_timeout_s = header_s;
    s->body_timeout_s = body_s;
    s->lenient = o->lenient;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);     /* the deadlines are ut_now_ns */
    pthread_cond_init(&s->ev_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (hs_chat_template(s, o, err, errlen) || hs_start_engine(s, e, o, err, errlen)) {
        hs_stop(s);
        return -1;
    }
    s->d = nl_m.start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, 0, NULL, NULL,
                            hs_access, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED,
                            hs_completed, s, MHD_OPTION_NOTIFY_CONNECTION, hs_connection, s, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)HS_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT, (unsigned)max_conn,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)max_ip, MHD_OPTION_END);
    if (!s->d) {
        int p = port;
        hs_stop(s);
        return bench_errf(err, errlen, "cannot listen on %s:%d (taken, or not an address of this machine)", host, p);
    }
    if (pthread_create(&s->guard, NULL, hs_guard, s)) {
        hs_stop(s);
        return bench_errf(err, errlen, "cannot start the connection watchdog thread");
    }
    s->guard_started = 1;
    const union MHD_DaemonInfo *di = nl_m.get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : port;
    *out = s;
    return 0;
}

int hs_port(const hs_server *s) { return s->port; }

int hs_max_batch(const hs_server *s) { return s->max_batch; }

void hs_stop(hs_server *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->ev_cv);
    pthread_mutex_unlock(&s->mu);
    /* The requests waiting for the engine answer 503 and those running end at their next
     * token; MHD_stop_daemon would cut their connections before the answers are out. */
    if (s->b) hb_stop(s->b);
    pthread_mutex_lock(&s->mu);
    int64_t end = ut_now_ns() + HS_STOP_GRACE_NS;
    while (s->d && s->active > 0 && ut_now_ns() < end) hs_ev_wait(s, end);
    pthread_mutex_unlock(&s->mu);
    if (s->guard_started) pthread_join(s->guard, NULL);
    if (s->d) nl_m.stop_daemon(s->d);
    hb_destroy(s->b);       /* after the connections: each released its job */
    while (s->socks) {      /* none: MHD said CLOSED for each; kept honest all the same */
        hs_sock *k = s->socks;
        s->socks = k->next;
        free(k);
    }
    pthread_cond_destroy(&s->ev_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
