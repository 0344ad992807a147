/* A server-sent events parser (the WHATWG "event stream" format), for the streamed answers
 * of an OpenAI-compatible /v1/completions. A pure function of the bytes it is fed: the same
 * events come out however the stream is cut into chunks, so it is tested on byte strings.
 *
 *   stream  = lines separated by "\n", "\r\n" or "\r"
 *   "data: X"     appends X (one leading space dropped) to the event's data; several data
 *                 lines join with "\n"
 *   ":..."        a comment (keep-alive), ignored
 *   "event:", "id:", "retry:", any other field: ignored (OpenAI streams use data only)
 *   ""            a blank line dispatches the event, when it has data
 * At the end of the stream an event without its blank line is dropped, as the format says;
 * sse_pending tells the caller there was one (a stream cut mid-event).
 */
#ifndef BENCH_SSE_H
#define BENCH_SSE_H

#include <stddef.h>

/* The longest line or event accepted, bytes: a server sending more is broken, not slow. */
#define SSE_MAX_EVENT (1u << 20)

typedef struct sse_parser {
    char *line;             /* (line_cap) the line being read, not terminated */
    size_t line_len, line_cap;
    char *data;             /* (data_cap) the event's data so far, NUL-terminated */
    size_t data_len, data_cap;
    int has_data;           /* a data line was seen since the last dispatch */
    int last_cr;            /* the previous byte ended a line with "\r": a "\n" next is its pair */
    int failed;             /* a line or event past SSE_MAX_EVENT, or out of memory: sse_feed returns -1 from then on */
} sse_parser;

/* Called for each event with its data (NUL-terminated, len bytes); returns 0 to go on,
 * non-zero to stop (sse_feed then returns that value). */
typedef int (*sse_event_fn)(void *user, const char *data, size_t len);

void sse_init(sse_parser *p);
void sse_free(sse_parser *p);       /* frees the buffers; p may be NULL */
/* Feeds n bytes; dispatches every event they complete. Returns 0, a callback's non-zero
 * value, or -1 when a line or event is longer than SSE_MAX_EVENT or memory ran out. */
int sse_feed(sse_parser *p, const char *bytes, size_t n, sse_event_fn fn, void *user);
/* 1 when bytes of an event that was never dispatched remain (the stream ended mid-event). */
int sse_pending(const sse_parser *p);

#endif
