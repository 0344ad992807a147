/* The /metrics scraper: see scrape.h. */
#include "scrape.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engines/abi/module.h"
#include "harness/net/httpc.h"
#include "harness/net/prom.h"
#include "harness/scenario/events.h"
#include "harness/scenario/target.h"
#include "harness/scenario/target_metrics.h"
#include "util/ut_clock.h"

/* A /metrics body past this is refused as a failed read: PROM_MAX_BODY bounds the parser too. */
#define SCR_MAX_BODY PROM_MAX_BODY

struct scr_scraper {
    const tm_spec *spec;    /* the target's (borrowed) */
    prom_doc sel[TM_MAX_SERIES], alt[TM_MAX_SERIES];    /* (spec.n) each series' name and fallback as selectors */
    char *url;
    const sv_sink *sink;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;               /* under mu */
    int64_t first_ns;       /* when scr_start made the first read: the ticks count from it */
};

static void scr_send(scr_scraper *s, int64_t t, int64_t a, int64_t b, const char *name, double v) {
    bench_event ev = bench_event_make(BENCH_EV_SCRAPE, 0, t, a, b, name, NULL, v);
    s->sink->send(s->sink->user, &ev);
}

static double scr_pick(const prom_doc *body, const prom_doc *sel) {
    double v;
    const prom_sample *q = &sel->s[0];
    return prom_sum(body, q->name, q->labels, q->n_labels, &v) ? v : NAN;
}

/* One read: every series, or the failure. */
static void scr_read(scr_scraper *s) {
    char err[400] = "", *body = NULL;
    size_t len = 0;
    long status = 0;
    /* a read may take up to the period (at least 1 s, at most 10): a stalled server is a failed read */
    double timeout = s->spec->period_s < 1 ? 1 : s->spec->period_s > 10 ? 10 : s->spec->period_s;
    prom_doc d = {0};
    int rc = hc_fetch(s->url, timeout, SCR_MAX_BODY, &status, &body, &len, err, sizeof(err));
    int64_t t = ut_now_ns();
    if (rc == 0 && status != 200) rc = -1, snprintf(err, sizeof(err), "%s: HTTP %ld", s->url, status);
    char perr[300];
    if (rc == 0 && prom_parse(body, len, &d, perr, sizeof(perr))) rc = -1, snprintf(err, sizeof(err), "%s: %s", s->url, perr);
    free(body);
    if (rc) {
        scr_send(s, t, -1, 0, err, 0);
        return;
    }
    for (int i = 0; i < s->spec->n; i++) {
        double v = scr_pick(&d, &s->sel[i]);
        int how = BENCH_SCR_NAME;
        if (isnan(v) && s->alt[i].n) {
            v = scr_pick(&d, &s->alt[i]);
            how = BENCH_SCR_FALLBACK;
        }
        /* a NaN the server wrote counts as absent: no figure can use it */
        if (isnan(v)) how = BENCH_SCR_ABSENT;
        scr_send(s, t, i, how, s->spec->s[i].name, v);
    }
    prom_free(&d);
}

/* The reads after the first (scr_start's), a period apart, and one when stopped. */
static void *scr_main(void *arg) {
    scr_scraper *s = arg;
    int64_t period = (int64_t)(s->spec->period_s * 1e9), next = s->first_ns;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        /* the next tick after now: ticks a slow read missed are skipped */
        int64_t now = ut_now_ns();
        next += period;
        if (next <= now) next = now + period - (now - next) % period;
        struct timespec ts = {.tv_sec = (time_t)(next / 1000000000LL), .tv_nsec = (long)(next % 1000000000LL)};
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT) {}
        if (s->stop) break;
        pthread_mutex_unlock(&s->mu);
        scr_read(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    scr_read(s);    /* the end of the repetition */
    return NULL;
}

static void scr_free(scr_scraper *s) {
    for (int i = 0; i < TM_MAX_SERIES; i++) {
        prom_free(&s->sel[i]);
        prom_free(&s->alt[i]);
    }
    free(s->url);
    free(s);
}

int scr_start(const tm_spec *spec, const char *base_url, const char *port, const sv_sink *sink, scr_scraper **out, char *err,
              size_t errlen) {
    *out = NULL;
    if (!spec->n) return 0;
    scr_scraper *s = calloc(1, sizeof(*s));
    if (!s) return bench_errf(err, errlen, "out of memory");
    s->spec = spec;
    for (int i = 0; i < s->spec->n; i++) {
        char e[400];
        if (prom_selector(s->spec->s[i].name, &s->sel[i], e, sizeof(e)) ||
            (s->spec->s[i].fallback && prom_selector(s->spec->s[i].fallback, &s->alt[i], e, sizeof(e)))) {
            scr_free(s);
            return bench_errf(err, errlen, "target.http.metrics.series: %s", e);
        }
    }
    if (s->spec->url) {
        const char *keys[] = {"port"}, *vals[] = {port};
        s->url = tg_expand(s->spec->url, keys, vals, 1);
    } else {
        size_t n = strlen(base_url);
        while (n && base_url[n - 1] == '/') n--;    /* no doubled slash */
        if ((s->url = malloc(n + sizeof("/metrics")))) snprintf(s->url, n + sizeof("/metrics"), "%.*s/metrics", (int)n, base_url);
    }
    if (!s->url) {
        scr_free(s);
        return bench_errf(err, errlen, "out of memory");
    }
    s->sink = sink;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);    /* the ticks are ut_now_ns */
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < s->spec->n; i++) scr_send(s, ut_now_ns(), i, BENCH_SCR_DECLARE, s->spec->s[i].name, 0);
    /* the first read here, before the caller sends a request: the server's state at rest. Made
     * by the thread, it raced the first requests, and on a busy machine it could come after one
     * was admitted (test_bench_preset failed so once, under the sanitizers in `make test`). */
    s->first_ns = ut_now_ns();
    scr_read(s);
    int e = pthread_create(&s->th, NULL, scr_main, s);
    if (e) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        scr_free(s);
        return bench_errf(err, errlen, "the /metrics reader's thread: %s", strerror(e));
    }
    fprintf(stderr, "bench worker: reading %s every %g s (%d series)\n", s->url, s->spec->period_s, s->spec->n);
    *out = s;
    return 0;
}

void scr_stop(scr_scraper *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    scr_free(s);
}
