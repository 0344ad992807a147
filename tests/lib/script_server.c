/* A loopback HTTP server that answers from a script: see script_server.h. */
#include "tests/lib/script_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* The longest wait for a request's bytes or for room to write, ms. */
#define SS_IO_MS 10000

struct ss_server {
    int fd, port;
    int stop[2];            /* a byte on stop[1] ends the thread */
    char *reply;
    size_t len;
    int hold;
    pthread_t th;
    pthread_mutex_t mu;
    int answered;
};

/* Waits for events on fd or a stop; 1 when fd is ready, 0 on stop or after ms. */
static int ss_wait(ss_server *s, int fd, short events, int ms) {
    struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = s->stop[0], .events = POLLIN}};
    int r;
    while ((r = poll(p, 2, ms)) < 0 && errno == EINTR) {}
    return r > 0 && !p[1].revents && p[0].revents;
}

/* Reads the request's head and body; returns 1 for GET /health, 0 for another request,
 * -1 when it never came whole. */
static int ss_read_request(ss_server *s, int c) {
    char buf[65536];
    size_t n = 0, need = 0;
    char *end = NULL;
    while (!end || n < need) {
        if (n + 1 >= sizeof(buf) || !ss_wait(s, c, POLLIN, SS_IO_MS)) return -1;
        ssize_t r = read(c, buf + n, sizeof(buf) - 1 - n);
        if (r <= 0) return -1;
        n += (size_t)r;
        buf[n] = 0;
        if (!end && (end = strstr(buf, "\r\n\r\n"))) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            need = (size_t)(end + 4 - buf) + (cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
        }
    }
    return !strncmp(buf, "GET /health ", 12);
}

/* Writes len bytes; stops early when the client has gone (its close, or a stop). */
static void ss_write(ss_server *s, int c, const char *p, size_t len) {
    while (len && ss_wait(s, c, POLLOUT, SS_IO_MS)) {
        ssize_t w = send(c, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        len -= (size_t)w;
    }
}

/* Keeps c open until the client closes it (a read of 0 or an error), a stop, or SS_HOLD_S. */
static void ss_hold(ss_server *s, int c) {
    char sink[4096];
    for (int waited = 0; waited < SS_HOLD_S * 10; waited++) {
        if (!ss_wait(s, c, POLLIN, 100)) {
            struct pollfd st = {.fd = s->stop[0], .events = POLLIN};
            if (poll(&st, 1, 0) > 0) return;
            continue;
        }
        if (read(c, sink, sizeof(sink)) <= 0) return;
    }
}

static void ss_serve(ss_server *s, int c) {
    int health = ss_read_request(s, c);
    if (health == 1) {
        static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        ss_write(s, c, ok, sizeof(ok) - 1);
    } else if (health == 0) {
        pthread_mutex_lock(&s->mu);
        s->answered++;
        pthread_mutex_unlock(&s->mu);
        ss_write(s, c, s->reply, s->len);
        if (s->hold) ss_hold(s, c);
    }
    /* no RST for bytes still unread: say we are done, then drain what is left briefly */
    shutdown(c, SHUT_WR);
    char sink[4096];
    while (ss_wait(s, c, POLLIN, 200) && read(c, sink, sizeof(sink)) > 0) {}
    close(c);
}

static void *ss_main(void *arg) {
    ss_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = s->stop[0], .events = POLLIN}};
        if (poll(p, 2, 1000) < 0 && errno != EINTR) break;
        if (p[1].revents) break;
        if (!p[0].revents) continue;
        int c = accept(s->fd, NULL, NULL);
        if (c >= 0) ss_serve(s, c);
    }
    return NULL;
}

ss_server *ss_start(const char *reply, size_t len, int hold) {
    ss_server *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    s->stop[0] = s->stop[1] = -1;
    s->hold = hold;
    pthread_mutex_init(&s->mu, NULL);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(s->fd, 16) ||
        getsockname(s->fd, (struct sockaddr *)&sa, &sl) || pipe2(s->stop, O_CLOEXEC))
        goto err;
    s->port = ntohs(sa.sin_port);
    if (reply && len) {
        if (!(s->reply = malloc(len))) goto err;
        memcpy(s->reply, reply, len);
        s->len = len;
    }
    if (pthread_create(&s->th, NULL, ss_main, s)) goto err;
    return s;
err:
    fprintf(stderr, "ss_start: %s\n", strerror(errno));
    if (s->fd >= 0) close(s->fd);
    if (s->stop[0] >= 0) close(s->stop[0]), close(s->stop[1]);
    pthread_mutex_destroy(&s->mu);
    free(s->reply);
    free(s);
    return NULL;
}

int ss_port(const ss_server *s) { return s->port; }

int ss_answered(ss_server *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->answered;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void ss_stop(ss_server *s) {
    if (!s) return;
    if (write(s->stop[1], "x", 1) != 1) {}
    pthread_join(s->th, NULL);
    close(s->fd);
    close(s->stop[0]);
    close(s->stop[1]);
    pthread_mutex_destroy(&s->mu);
    free(s->reply);
    free(s);
}

/* The room a buffer of len bytes (and its NUL) has: the power of two at or above, 64 at
 * least; ss_append keeps to it, so that many appends cost linear time. */
static size_t ss_cap(size_t len) {
    size_t c = 64;
    while (c < len + 1) c *= 2;
    return c;
}

void ss_append(char **buf, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) abort();
    char *b = *buf;
    if (!b || ss_cap(*len + (size_t)n) > ss_cap(*len)) b = realloc(*buf, ss_cap(*len + (size_t)n));
    if (!b) abort();
    va_start(ap, fmt);
    vsnprintf(b + *len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    *buf = b;
    *len += (size_t)n;
}
