/* A loopback HTTP server that answers from a script, for testing the http client against
 * servers that misbehave in exact ways (tests/test_net.c, tests/test_http_target.c):
 *   GET /health     200 "ok", then the connection closes;
 *   anything else   the request is read whole (headers and Content-Length body), then the
 *                   script's bytes are written as they are (status line, headers, body: what
 *                   they say is the test's business), then the connection closes, or with
 *                   hold it stays open until the client closes it, ss_stop, or SS_HOLD_S.
 * One thread, one connection at a time, on 127.0.0.1 at a port the kernel picks; every wait
 * is bounded. */
#ifndef BENCH_TEST_SCRIPT_SERVER_H
#define BENCH_TEST_SCRIPT_SERVER_H

#include <stddef.h>

/* The longest a held connection stays open, seconds. */
#define SS_HOLD_S 60

typedef struct ss_server ss_server;

/* Starts a server answering with reply (len bytes, copied; NULL or 0: nothing); NULL when
 * no socket or thread could be had (the reason on stderr). */
ss_server *ss_start(const char *reply, size_t len, int hold);
int ss_port(const ss_server *s);
/* Requests other than /health answered so far. */
int ss_answered(ss_server *s);
/* Stops the thread, closes everything, frees s (NULL is fine). */
void ss_stop(ss_server *s);

/* A reply built with printf-like pieces: appends to *buf (NULL at first, then grown by this
 * alone; free() it), *len bytes without the NUL; aborts on out of memory (a test helper). */
void ss_append(char **buf, size_t *len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
