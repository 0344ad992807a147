/* bench serve's server: an engine (engines/core/runtime/engine.h) behind an
 * OpenAI-compatible HTTP API, on libmicrohttpd.
 *
 *   POST /v1/completions   {"prompt": "text" | [ids], "max_tokens": N, "stream": bool,
 *                          "temperature": T, "top_p": P, "seed": S, "ignore_eos": bool,
 *                          "n": N, "stop": "s" | [...], "stop_token_ids": [ids],
 *                          "stream_options": {"include_usage": bool}} (oai_req.h: the fields)
 *                          stream: server-sent events, one token a chunk, each choice
 *                          carrying "tokens": [id] (an extension: the ids, exactly), the
 *                          last with finish_reason, then usage when asked, then [DONE]
 *   POST /v1/chat/completions  the same with "messages" for "prompt", rendered with the chat
 *                          template (chat_tmpl.h); chat.completion / chat.completion.chunk
 *                          objects ("message" / "delta")
 * n choices are n jobs (sequences) of the batcher; a stop string or stop id ends its choice
 * early (the text cut before it, finish_reason "stop") and gives its job back. Streamed,
 * text that may be the start of a stop string is held back until it is not.
 *   GET  /health           200 {"status": "ok", "running": N, "waiting": N}; 503 once stopping
 *   GET  /v1/models        the one model
 *   GET  /metrics          Prometheus text 0.0.4: load, KV, tokens, TTFT/TPOT histograms (batcher.c)
 * A bad request gets 400 and {"error": {"message", "type", "code"}}; the message names the
 * field and what was expected.
 *
 * Requests are batched: one engine thread owns the engine and runs the serving scheduler
 * (harness/net/batcher.h), up to max_batch requests decoded together; each connection's
 * thread submits its request and writes the tokens as they come. A client that hangs up
 * cancels its request (its KV freed).
 *
 * Hostile and slow clients: a connection must send its request line and headers within
 * header_timeout_s and its body within body_timeout_s of them, however slowly the bytes
 * trickle (a watchdog thread shuts the late ones down); connections are capped in all and
 * per client address. hs_stop answers the requests still waiting for the engine with 503
 * and lets those running end at their next token before it closes the connections.
 */
#ifndef BENCH_SERVER_H
#define BENCH_SERVER_H

#include <stddef.h>

#include "engines/core/runtime/engine.h"

typedef struct hs_opts {
    const char *host;           /* address to bind, dotted IPv4; NULL: 127.0.0.1 */
    int port;                   /* 0: an ephemeral port (hs_port says which) */
    const char *model_name;     /* the id /v1/models reports; NULL: "bench" */
    /* (test hook; NULL: none) misbehave on purpose, for the http target's fault tests:
     * "refuse" 503 to every completion; "close-early" a stream cut after 2 tokens;
     * "malformed" a stream whose second event is not JSON; "never-ready" /health 503;
     * "die" the process exits in the middle of the first stream; "slow" 50 ms a step and max_batch
     * 1 unless given, so that requests queue behind the one running; "gather" the first step
     * waits until max_batch requests are in, so that a test sees them batched on any machine */
    const char *fault;
    int max_batch;              /* requests decoded together at most; 0: the engine's sequences */
    /* POST /v1/chat/completions' template (chat_tmpl.h): a built-in's name; NULL: the model's
     * tokenizer.chat_template when bench recognises it, "plain" when the model has none */
    const char *chat_template;
    int lenient;                /* accept unknown request fields (named in X-Bench-Ignored-Fields) */
    double reserve_output;      /* sched_opts.reserve_output (0: admit on the prompt alone, as vLLM) */
    /* limits (0: the default in brackets) */
    int header_timeout_s;       /* [60] request line and headers complete within this (nginx client_header_timeout) */
    int body_timeout_s;         /* [60] the body complete within this after the headers (nginx client_body_timeout) */
    int max_connections;        /* [1020] connections at once, MHD's own default; more are closed on accept */
    int max_per_ip;             /* [256] connections at once from one client address */
    /* (optional) called after every step: nonzero when the model can no longer be
     * trusted (its mapped file changed under it), with msg saying why. The request fails
     * (500, msg) and the server takes no more (503); hs_failed says so. */
    int (*model_fault)(char *msg, size_t len);
} hs_opts;

#define HS_HEADER_TIMEOUT_S 60
#define HS_BODY_TIMEOUT_S 60
#define HS_MAX_CONNECTIONS 1020
#define HS_MAX_PER_IP 256

typedef struct hs_server hs_server;

/* Starts serving e (created with at least max_batch sequences; borrowed until hs_stop) on its
 * own threads. Returns 0, or -1 with err (the address is taken, a bad host). */
int hs_start(engine *e, const hs_opts *o, hs_server **out, char *err, size_t errlen);
int hs_port(const hs_server *s);
int hs_max_batch(const hs_server *s);   /* requests decoded together at most */
/* NULL, or why the server stopped taking requests (opts.model_fault's message). */
const char *hs_failed(hs_server *s);
/* Stops accepting, ends the requests in flight, joins the threads. s may be NULL. */
void hs_stop(hs_server *s);

#endif
