/* Server-sent events: see sse.h. */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

void sse_init(sse_parser *p) { memset(p, 0, sizeof(*p)); }

void sse_free(sse_parser *p) {
    if (!p) return;
    free(p->line);
    free(p->data);
    memset(p, 0, sizeof(*p));
}

/* Room for need bytes (+1 for a NUL) in *buf, at most SSE_MAX_EVENT. */
static int sse_grow(char **buf, size_t *cap, size_t need) {
    if (need > SSE_MAX_EVENT) return -1;
    if (need + 1 <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need + 1) c *= 2;
    char *n = realloc(*buf, c);
    if (!n) return -1;
    *buf = n;
    *cap = c;
    return 0;
}

/* One complete line (without its end). */
static int sse_line(sse_parser *p, sse_event_fn fn, void *user) {
    const char *l = p->line;
    size_t n = p->line_len;
    if (n == 0) {
        if (!p->has_data) return 0;
        p->has_data = 0;
        size_t len = p->data_len;
        p->data_len = 0;
        p->data[len] = 0;
        return fn ? fn(user, p->data, len) : 0;
    }
    if (l[0] == ':') return 0;
    size_t colon = 0;
    while (colon < n && l[colon] != ':') colon++;
    if (colon != 4 || memcmp(l, "data", 4)) return 0;   /* another field, or a field with no value */
    size_t v = colon < n ? colon + 1 : n;
    if (v < n && l[v] == ' ') v++;
    size_t add = n - v + (p->has_data ? 1 : 0);
    if (sse_grow(&p->data, &p->data_cap, p->data_len + add)) return -1;
    if (p->has_data) p->data[p->data_len++] = '\n';
    memcpy(p->data + p->data_len, l + v, n - v);
    p->data_len += n - v;
    p->data[p->data_len] = 0;
    p->has_data = 1;
    return 0;
}

int sse_feed(sse_parser *p, const char *bytes, size_t n, sse_event_fn fn, void *user) {
    if (p->failed) return -1;
    for (size_t i = 0; i < n; i++) {
        char c = bytes[i];
        if (c == '\n' && p->last_cr) {
            p->last_cr = 0;
            continue;
        }
        p->last_cr = c == '\r';
        if (c == '\n' || c == '\r') {
            int rc = sse_line(p, fn, user);
            p->line_len = 0;
            if (rc < 0) p->failed = 1;
            if (rc) return rc;
            continue;
        }
        if (sse_grow(&p->line, &p->line_cap, p->line_len + 1)) {
            p->failed = 1;
            return -1;
        }
        p->line[p->line_len++] = c;
    }
    return 0;
}

int sse_pending(const sse_parser *p) { return p->line_len > 0 || p->has_data; }
