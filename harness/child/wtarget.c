/* The targets' shared helpers: see wtarget.h. */
#include "wtarget.h"

#include <stdio.h>

#include "engines/abi/module.h"
#include "harness/scenario/confine.h"
#include "util/ut_clock.h"

int wt_send(const wt_env *env, uint32_t type, int ack, int64_t t_ns, int64_t a, int64_t b, const char *name) {
    bench_event ev = bench_event_make(type, ack, t_ns ? t_ns : ut_now_ns(), a, b, name, NULL, 0);
    return env->write(env->user, &ev);
}

/* a counter's class and direction travel in a and b (events.h) */
void wt_counter(const wt_env *env, const char *name, const char *unit, int cls, int better, double v) {
    bench_event ev = bench_event_make(BENCH_EV_COUNTER, 0, ut_now_ns(), cls, better, name, unit, v);
    env->write(env->user, &ev);
}

/* a streamed event's failure to arrive shows at the next acked one, which stops the run */
static void wt_sink_send(void *user, const bench_event *ev) {
    const wt_env *env = user;
    env->write(env->user, ev);
}

sv_sink wt_sink(const wt_env *env) { return (sv_sink){.send = wt_sink_send, .user = (void *)env}; }

int wt_same_file(const char *path, const char *id, char *err, size_t errlen) {
    unsigned long long dev, ino;
    if (!path || !id) return 0;
    if (sscanf(id, "%llu:%llu", &dev, &ino) != 2) return bench_errf(err, errlen, "worker spec: %s: id \"%s\" is not dev:ino", path, id);
    char e[1024];
    if (cf_same_file(path, dev, ino, e, sizeof(e))) return bench_errf(err, errlen, "%s", e);
    return 0;
}

int wt_same_model_files(const ws_engine *s, char *err, size_t errlen) {
    int rc = wt_same_file(s->model, s->model_id, err, errlen);
    return rc ? rc : wt_same_file(s->tokenizer, s->tokenizer_id, err, errlen);
}
