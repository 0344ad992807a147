/* Allocator workloads, the worker's half: one workload on one allocator. See alloc_workload.h. */
#include "alloc_workload.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engines/core/runtime/alloc_trace.h"
#include "engines/abi/alloc.h"
#include "engines/core/runtime/modreg.h"
#include "harness/scenario/events.h"
#include "harness/scenario/scenario.h"
#include "harness/scenario/spec_opts.h"
#include "harness/scenario/stats.h"
#include "util/ut_clock.h"

/* ======================================================================
 * The worker: one workload on one allocator
 * ====================================================================== */

static uint64_t aw_rng(uint64_t *s) {
    /* xorshift64*: enough for sizes and permutations, and the same on every machine */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

enum { AW_NSIZES = 1 << 16 };

/* The calls of one pass, copied out of the iface into locals by every loop below: an
 * indirect call may write any memory, so r->ai->alloc and r->ctx read through r would be
 * loaded again after every call; from locals they stay in registers. */
typedef struct aw_fns {
    void *(*alloc)(void *ctx, size_t size, size_t align);
    void (*free)(void *ctx, void *p, size_t size);
    void (*reset)(void *ctx);   /* NULL: the allocator has none */
    void *ctx;
} aw_fns;

typedef struct aw_run {
    aw_fns f;                   /* what the loops call: the allocator's module, or the null allocator (floor) */
    const bench_alloc_iface *ai;
    void *ctx;
    int locked;                 /* prodcon on an allocator not safe under threads: calls under mu */
    pthread_mutex_t mu;
    const aw_workload *w;
    void **slot;                /* (n_slot) live blocks */
    uint64_t *slot_size;        /* (n_slot) */
    size_t n_slot;
    uint64_t *sizes;            /* (AW_NSIZES) drawn sizes, cycled */
    size_t size_i;
    uint32_t *perm;             /* (live) random free order */
    const at_trace *trace;
    uint64_t peak_live;         /* B */
    _Atomic uint64_t a_live_bytes, a_live_blocks;   /* prodcon */
    /* timing */
    int timed;
    int64_t t_last;
    double *batch_ns;           /* (cap_batch) ns per op of each timed batch, clock cost removed */
    size_t n_batch, cap_batch;
    int64_t overhead_ns;        /* one clock read, median */
    uint64_t clock_reads;
} aw_run;

/* The end of a batch of AW_BATCH ops: one clock read. Out of line, so the loops that
 * count down to it stay small; it runs once per 64 ops. */
__attribute__((noinline)) static void aw_batch_end(aw_run *r) {
    int64_t t = ut_now_ns();
    if (r->timed && r->n_batch < r->cap_batch) {
        double d = (double)(t - r->t_last - r->overhead_ns);
        r->batch_ns[r->n_batch++] = (d > 0 ? d : 0) / AW_BATCH;
    }
    r->clock_reads++;
    r->t_last = t;
}

_Static_assert(AW_BATCH % 2 == 0, "churn and prodcon count their ops two at a time");

/* One op done: `left` counts down, in a register, the ops to the end of the batch. */
#define AW_TICK(r, left) do { if (--(left) == 0) { aw_batch_end(r); (left) = AW_BATCH; } } while (0)

/* What the workload writes into a new block. t is a constant in each caller below
 * (they are instantiated once per touch mode), so the test costs nothing per op. */
static inline __attribute__((always_inline)) void aw_touch_t(void *p, uint64_t size, aw_touch t) {
    if (t == AW_TOUCH_FIRST) *(volatile char *)p = 1;
    else if (t == AW_TOUCH_PAGES)
        for (uint64_t o = 0; o < size; o += 4096) ((volatile char *)p)[o] = 1;
}

/* churn: alloc, touch, free, ops/2 times. An allocator with reset() (whose free is a
 * no-op) is reset once per batch (32 pairs), when nothing is live: an engine resets
 * its arena once per step after many allocations, and a reset after every pair would
 * time a reset per allocation. -1: out of memory. */
static inline __attribute__((always_inline)) int aw_churn_t(aw_run *r, uint64_t ops, aw_touch t) {
    const aw_fns f = r->f;
    const uint64_t fixed = r->w->size, align = r->w->align, *sizes = r->sizes;
    size_t si = r->size_i;
    uint64_t peak = r->peak_live;
    int left = AW_BATCH, rc = 0;
    for (uint64_t i = 0; i < ops / 2; i++) {
        uint64_t sz = fixed ? fixed : sizes[si++ & (AW_NSIZES - 1)];
        void *p = f.alloc(f.ctx, (size_t)sz, (size_t)align);
        if (__builtin_expect(!p, 0)) {
            rc = -1;
            break;
        }
        aw_touch_t(p, sz, t);
        peak = sz > peak ? sz : peak;
        f.free(f.ctx, p, (size_t)sz);
        left -= 2;
        if (left == 0) {
            if (f.reset) f.reset(f.ctx);
            aw_batch_end(r);
            left = AW_BATCH;
        }
    }
    if (f.reset && left != AW_BATCH) f.reset(f.ctx);
    r->size_i = si;
    r->peak_live = peak;
    return rc;
}

/* lifo, fifo, random: rounds of `live` allocations, then their frees in the pattern's
 * order; an allocator with reset() is reset at the end of each round. -1: out of memory. */
static inline __attribute__((always_inline)) int aw_rounds_t(aw_run *r, uint64_t ops, aw_touch t) {
    const aw_fns f = r->f;
    const aw_workload *w = r->w;
    const uint64_t fixed = w->size, align = w->align, *sizes = r->sizes;
    void **slot = r->slot;
    uint64_t *slot_size = r->slot_size;
    const uint32_t *perm = r->perm;
    const aw_pattern pat = w->pattern;
    const uint64_t live = (uint64_t)w->live;
    size_t si = r->size_i;
    uint64_t peak = r->peak_live, done = 0;
    int left = AW_BATCH;
    while (done < ops) {
        uint64_t k = (ops - done) / 2, bytes = 0;
        if (k > live) k = live;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t sz = fixed ? fixed : sizes[si++ & (AW_NSIZES - 1)];
            void *p = f.alloc(f.ctx, (size_t)sz, (size_t)align);
            if (__builtin_expect(!p, 0)) {
                r->size_i = si;
                return -1;
            }
            aw_touch_t(p, sz, t);
            slot[i] = p;
            slot_size[i] = sz;
            bytes += sz;   /* every alloc of a round comes before its first free: the round's peak */
            AW_TICK(r, left);
        }
        peak = bytes > peak ? bytes : peak;
        if (pat == AW_LIFO) {
            for (uint64_t i = k; i-- > 0;) {
                f.free(f.ctx, slot[i], (size_t)slot_size[i]);
                AW_TICK(r, left);
            }
        } else if (pat == AW_FIFO) {
            for (uint64_t i = 0; i < k; i++) {
                f.free(f.ctx, slot[i], (size_t)slot_size[i]);
                AW_TICK(r, left);
            }
        } else {
            for (uint64_t i = 0; i < live; i++) {
                uint32_t s = perm[i];
                if (s >= k) continue;
                f.free(f.ctx, slot[s], (size_t)slot_size[s]);
                AW_TICK(r, left);
            }
        }
        if (f.reset) f.reset(f.ctx);
        done += 2 * k;
    }
    r->size_i = si;
    r->peak_live = peak;
    return 0;
}

/* The loops, one copy per touch mode. noinline: the floor pass and the allocator's
 * pass run the very same machine code, through the same indirect calls. */
__attribute__((noinline)) static int aw_run_rounds(aw_run *r, uint64_t ops) {
    int churn = r->w->pattern == AW_CHURN;
    switch (r->w->touch) {
    case AW_TOUCH_NONE: return churn ? aw_churn_t(r, ops, AW_TOUCH_NONE) : aw_rounds_t(r, ops, AW_TOUCH_NONE);
    case AW_TOUCH_FIRST: return churn ? aw_churn_t(r, ops, AW_TOUCH_FIRST) : aw_rounds_t(r, ops, AW_TOUCH_FIRST);
    default: return churn ? aw_churn_t(r, ops, AW_TOUCH_PAGES) : aw_rounds_t(r, ops, AW_TOUCH_PAGES);
    }
}

/* A trace, rounds times. Blocks a trace leaves live are freed after each round (untimed ops). */
__attribute__((noinline)) static int aw_run_trace(aw_run *r, int rounds) {
    const aw_fns f = r->f;
    const at_trace *t = r->trace;
    const aw_touch touch = r->w->touch;
    void **slot = r->slot;
    uint64_t *slot_size = r->slot_size;
    uint64_t live = 0, peak = r->peak_live;
    int left = AW_BATCH;
    for (int rd = 0; rd < rounds; rd++) {
        for (size_t i = 0; i < t->n; i++) {
            const at_op *op = &t->v[i];
            if (op->kind == AT_ALLOC) {
                void *p = f.alloc(f.ctx, (size_t)op->size, (size_t)op->align);
                if (!p) return -1;
                if (touch == AW_TOUCH_FIRST) aw_touch_t(p, op->size, AW_TOUCH_FIRST);
                else if (touch == AW_TOUCH_PAGES) aw_touch_t(p, op->size, AW_TOUCH_PAGES);
                slot[op->id] = p;
                slot_size[op->id] = op->size;
                live += op->size;
                peak = live > peak ? live : peak;
                AW_TICK(r, left);
            } else if (op->kind == AT_FREE) {
                f.free(f.ctx, slot[op->id], (size_t)slot_size[op->id]);
                slot[op->id] = NULL;
                live -= slot_size[op->id];
                AW_TICK(r, left);
            } else if (f.reset) {
                f.reset(f.ctx);
                memset(slot, 0, t->n_ids * sizeof(void *));
                live = 0;
            } else {
                for (uint32_t b = 0; b < t->n_ids; b++)
                    if (slot[b]) f.free(f.ctx, slot[b], (size_t)slot_size[b]), live -= slot_size[b], slot[b] = NULL;
            }
        }
        for (uint32_t b = 0; b < t->n_ids; b++)
            if (slot[b]) f.free(f.ctx, slot[b], (size_t)slot_size[b]), live -= slot_size[b], slot[b] = NULL;
        if (f.reset) f.reset(f.ctx);
    }
    r->peak_live = peak;
    return 0;
}

/* ---- producer/consumer: allocated on this thread, freed on another ---- */

enum { AW_RING = 4096 };

typedef struct aw_ring {
    _Atomic uint64_t head, tail;        /* head: next to write (producer), tail: next to read */
    void *v[AW_RING];
    aw_run *r;
    uint64_t n;                         /* blocks to pass */
} aw_ring;

static void aw_pc_free(aw_run *r, const aw_fns *f, void *p) {
    uint64_t sz = r->w->size ? r->w->size : 0;
    if (r->locked) pthread_mutex_lock(&r->mu);
    f->free(f->ctx, p, (size_t)sz);
    atomic_fetch_sub_explicit(&r->a_live_bytes, sz, memory_order_relaxed);
    if (atomic_fetch_sub_explicit(&r->a_live_blocks, 1, memory_order_relaxed) == 1 && f->reset && r->locked)
        f->reset(f->ctx);
    if (r->locked) pthread_mutex_unlock(&r->mu);
}

static void *aw_consumer(void *arg) {
    aw_ring *q = arg;
    const aw_fns f = q->r->f;
    for (uint64_t got = 0; got < q->n;) {
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
        if (t == atomic_load_explicit(&q->head, memory_order_acquire)) {
            sched_yield();
            continue;
        }
        void *p = q->v[t % AW_RING];
        atomic_store_explicit(&q->tail, t + 1, memory_order_release);
        aw_pc_free(q->r, &f, p);
        got++;
    }
    return NULL;
}

__attribute__((noinline)) static int aw_run_prodcon(aw_run *r, uint64_t ops) {
    aw_ring *q = calloc(1, sizeof(*q));
    if (!q) return -1;
    q->r = r;
    q->n = ops / 2;
    pthread_t th;
    if (pthread_create(&th, NULL, aw_consumer, q)) {
        free(q);
        return -1;
    }
    const aw_fns f = r->f;
    int rc = 0, left = AW_BATCH;
    uint64_t sz = r->w->size;   /* prodcon takes a fixed size: the consumer frees with it */
    for (uint64_t i = 0; i < q->n; i++) {
        uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
        while (h - atomic_load_explicit(&q->tail, memory_order_acquire) >= AW_RING) sched_yield();
        if (r->locked) pthread_mutex_lock(&r->mu);
        void *p = f.alloc(f.ctx, (size_t)sz, (size_t)r->w->align);
        /* counted live under the lock: else the consumer, freeing the last counted block,
         * could reset the arena between this alloc and its count, and p would be freed
         * after the reset (caught as misuse in debug builds) */
        uint64_t lb = 0;
        if (p) {
            lb = atomic_fetch_add_explicit(&r->a_live_bytes, sz, memory_order_relaxed) + sz;
            atomic_fetch_add_explicit(&r->a_live_blocks, 1, memory_order_relaxed);
        }
        if (r->locked) pthread_mutex_unlock(&r->mu);
        if (!p) {
            /* the consumer waits for q->n blocks: stop it by passing NULLs it will not free */
            rc = -1;
            break;
        }
        aw_touch_t(p, sz, r->w->touch);
        if (lb > r->peak_live) r->peak_live = lb;
        q->v[h % AW_RING] = p;
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
        /* one alloc here stands for two ops: it and its free on the other thread */
        left -= 2;
        if (left == 0) {
            aw_batch_end(r);
            left = AW_BATCH;
        }
    }
    if (rc) pthread_cancel(th);
    pthread_join(th, NULL);
    free(q);
    return rc;
}

/* ---- the driver's floor: the same loops on an allocator that does nothing ---- */

/* The null allocator: every alloc returns the one preallocated block (as large as the
 * workload's largest request, page aligned, every page touched), free and reset do
 * nothing. A pass on it costs what the driver costs per op (the indirect calls, the
 * size, the bookkeeping, the touch, the batch count) and nothing an allocator does. */
static void *aw_null_alloc(void *ctx, size_t size, size_t align) {
    (void)size, (void)align;
    return ctx;
}
static void aw_null_free(void *ctx, void *p, size_t size) { (void)ctx, (void)p, (void)size; }

/* The workload's largest request, B. */
static uint64_t aw_max_request(const aw_workload *w, const at_trace *t) {
    if (w->pattern == AW_TRACE) {
        uint64_t m = 1;
        for (size_t i = 0; i < t->n; i++)
            if (t->v[i].kind == AT_ALLOC && t->v[i].size > m) m = t->v[i].size;
        return m;
    }
    return w->size ? w->size : w->max;
}

/* ---- the worker's protocol side ---- */

typedef struct aw_wk {
    int ev_fd, ack_fd;
    int64_t t0;
} aw_wk;

/* a and b: HELLO's pid; a COUNTER's class and direction (events.h) */
static int aw_send_ab(aw_wk *c, uint32_t type, int ack, const char *name, const char *unit, double value, int64_t a,
                      int64_t b) {
    bench_event ev = bench_event_make(type, ack, ut_now_ns(), a, b, name, unit, value);
    if (c->ev_fd < 0) {
        static const char *n[] = {"?", "hello", "load_start", "load_end", "", "", "", "", "", "counter", "done", "error"};
        fprintf(stderr, "%9.3f ms  %-10s", (double)(ev.t_ns - c->t0) * 1e-6, type <= BENCH_EV_ERROR ? n[type] : "?");
        if (type == BENCH_EV_COUNTER) fprintf(stderr, " %s = %.6g %s", ev.name, value, ev.unit);
        if (type == BENCH_EV_ERROR) fprintf(stderr, " %s", name);
        fputc('\n', stderr);
        return 0;
    }
    ssize_t w;
    while ((w = write(c->ev_fd, &ev, sizeof(ev))) < 0 && errno == EINTR) {}
    if (w != (ssize_t)sizeof(ev)) return -1;
    if (ack) {
        char b;
        ssize_t r;
        while ((r = read(c->ack_fd, &b, 1)) < 0 && errno == EINTR) {}
        if (r != 1) return -1;
    }
    return 0;
}

static int aw_send(aw_wk *c, uint32_t type, int ack, const char *name, const char *unit, double value) {
    return aw_send_ab(c, type, ack, name, unit, value, type == BENCH_EV_HELLO ? getpid() : 0, 0);
}

/* One of the workload's own figures, with how bench compare judges it (engines/abi/module.h). */
static int aw_counter(aw_wk *c, const char *name, const char *unit, int cls, int better, double value) {
    return aw_send_ab(c, BENCH_EV_COUNTER, 0, name, unit, value, cls, better);
}

static void aw_emit_as(void *user, const char *name, const char *unit, int cls, int better, double v) {
    char n[96];
    snprintf(n, sizeof(n), "alloc.%s", name);
    aw_counter(user, n, unit, cls, better, v);
}

static void aw_emit(void *user, const char *name, const char *unit, double v) {
    aw_emit_as(user, name, unit, BENCH_CTR_UNIT, BENCH_BETTER_NONE, v);
}

static int aw_fail(aw_wk *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int aw_fail(aw_wk *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "bench worker: %s\n", msg);
    if (c->ev_fd >= 0) aw_send(c, BENCH_EV_ERROR, 0, msg, NULL, 0);
    return 1;
}

/* "VmRSS:" or "VmHWM:" of this process, in bytes; -1 when unreadable. */
static int64_t aw_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl)) {
            v = strtoll(line + kl, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The cost of one clock read: the median of back-to-back differences. */
static int64_t aw_clock_cost(void) {
    enum { N = 4001 };
    int64_t *d = malloc(N * sizeof(*d));
    if (!d) return 0;
    for (int i = 0; i < N; i++) {
        int64_t a = ut_now_ns();
        d[i] = ut_now_ns() - a;
    }
    qsort(d, N, sizeof(*d), cmp_i64);
    int64_t m = d[N / 2];
    free(d);
    return m;
}


static double aw_tv_ms(struct timeval t) { return (double)t.tv_sec * 1e3 + (double)t.tv_usec * 1e-3; }

/* One run of the workload: w->ops calls (a trace: w->rounds replays), or, for the
 * warm-up, `ops` calls (a trace: one replay). */
static int aw_go(aw_run *r, uint64_t ops, int rounds) {
    return r->w->pattern == AW_TRACE ? aw_run_trace(r, rounds)
         : r->w->pattern == AW_PRODCON ? aw_run_prodcon(r, ops) : aw_run_rounds(r, ops);
}

/* The figures of one timed pass, the clock's cost removed. */
typedef struct aw_timing {
    double ns_per_op;   /* ns, mean over the pass */
    double p50, p99;    /* ns per op, quantiles over the batches */
    size_t batches;
} aw_timing;

/* The untimed warm-up (warm ops), then the timed pass, on whatever r->f calls; getrusage
 * just around the timed pass when ru0/ru1 are given. Returns -1 when an alloc failed. */
static int aw_pass(aw_run *r, uint64_t warm, aw_timing *out, struct rusage *ru0, struct rusage *ru1) {
    memset(out, 0, sizeof(*out));
    r->timed = 0;
    int bad = aw_go(r, warm, 1);
    if (ru0) getrusage(RUSAGE_SELF, ru0);
    r->timed = 1;
    r->n_batch = 0;
    r->clock_reads = 0;
    int64_t t0 = ut_now_ns();
    r->t_last = t0;
    if (!bad) bad = aw_go(r, r->w->ops, r->w->rounds);
    int64_t t1 = ut_now_ns();
    if (ru1) getrusage(RUSAGE_SELF, ru1);
    r->timed = 0;
    double total_ns = (double)(t1 - t0) - (double)r->clock_reads * (double)r->overhead_ns;
    if (total_ns < 1) total_ns = 1;
    out->ns_per_op = total_ns / (double)r->w->ops;
    out->batches = r->n_batch;
    if (r->n_batch) {
        st_sort(r->batch_ns, (int)r->n_batch);
        out->p50 = st_quantile_sorted(r->batch_ns, (int)r->n_batch, 0.50);
        out->p99 = st_quantile_sorted(r->batch_ns, (int)r->n_batch, 0.99);
    }
    return bad ? -1 : 0;
}

/* The size table (AW_NSIZES draws of p(s) ~ s^-alpha on [min, max]) and the order the live
 * slots are visited in, both from the workload's seed. */
static void aw_draw(aw_run *r, const aw_workload *w) {
    uint64_t rng = w->seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < AW_NSIZES; i++) {
        /* inverse CDF of p(s) ~ s^-alpha on [min, max]; alpha 1 is uniform in log(s) */
        double u = (double)(aw_rng(&rng) >> 11) * 0x1.0p-53, lo = (double)w->min, hi = (double)w->max, s;
        if (fabs(w->alpha - 1.0) < 1e-9) s = lo * pow(hi / lo, u);
        else {
            double e = 1.0 - w->alpha;
            s = pow(pow(lo, e) + u * (pow(hi, e) - pow(lo, e)), 1.0 / e);
        }
        uint64_t si = (uint64_t)s;
        r->sizes[i] = si < w->min ? w->min : si > w->max ? w->max : si;
    }
    for (int i = 0; i < w->live; i++) r->perm[i] = (uint32_t)i;
    for (int i = w->live - 1; i > 0; i--) {
        int k = (int)(aw_rng(&rng) % (uint64_t)(i + 1));
        uint32_t t = r->perm[i];
        r->perm[i] = r->perm[k];
        r->perm[k] = t;
    }
}

/* The driver's floor: the same passes on the null allocator, twice (the lower counts:
 * a busy machine only ever adds), before the allocator's own pass and before the RSS
 * baseline, its block unmapped again so it is in no figure of the allocator's. 0 or -1
 * (the failure sent). */
static int aw_floor(aw_wk *c, aw_run *r, const aw_workload *w, const at_trace *trace, uint64_t warm, aw_timing *fl) {
    *fl = (aw_timing){0};
    size_t nb_len = (size_t)((aw_max_request(w, trace) + 4095) & ~(uint64_t)4095);
    void *nb = mmap(NULL, nb_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (nb == MAP_FAILED) {
        aw_fail(c, "cannot map the floor's %zu B block", nb_len);
        return -1;
    }
    for (size_t o = 0; o < nb_len; o += 4096) ((volatile char *)nb)[o] = 1;
    r->f = (aw_fns){.alloc = aw_null_alloc, .free = aw_null_free, .reset = NULL, .ctx = nb};
    for (int k = 0; k < 2; k++) {
        aw_timing ft;
        aw_pass(r, warm, &ft, NULL, NULL);   /* the null allocator never fails */
        if (k == 0 || ft.ns_per_op < fl->ns_per_op) *fl = ft;
    }
    munmap(nb, nb_len);
    r->peak_live = 0;
    r->size_i = 0;
    memset(r->slot, 0, r->n_slot * sizeof(*r->slot));
    atomic_store(&r->a_live_bytes, 0);
    atomic_store(&r->a_live_blocks, 0);
    return 0;
}

/* The allocator's figures as counters: time per op (and less the floor's), faults, CPU
 * time, peak live bytes, RSS growth and fragmentation. */
static void aw_report(aw_wk *c, const aw_run *r, const aw_workload *w, const aw_timing *tm, const aw_timing *fl,
                      const struct rusage *ru0, const struct rusage *ru1, int64_t rss0, int64_t hwm, int locked) {
    double ops = (double)w->ops;
    uint64_t minflt = (uint64_t)(ru1->ru_minflt - ru0->ru_minflt);
    aw_counter(c, "aw.ops", "count", BENCH_CTR_EXACT, BENCH_BETTER_NONE, ops);
    aw_counter(c, "aw.ns_per_op", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, tm->ns_per_op);
    aw_counter(c, "aw.ops_per_s", "ops/s", BENCH_CTR_TIME, BENCH_BETTER_HIGHER, 1e9 / tm->ns_per_op);
    if (tm->batches) {
        aw_counter(c, "aw.ns_op_p50", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, tm->p50);
        aw_counter(c, "aw.ns_op_p99", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, tm->p99);
    }
    aw_counter(c, "aw.batches", "count", BENCH_CTR_EXACT, BENCH_BETTER_NONE, (double)tm->batches);
    /* the floor, and the allocator's figures less the floor's same statistic */
    aw_counter(c, "aw.floor_ns_per_op", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, fl->ns_per_op);
    aw_counter(c, "aw.net_ns_per_op", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, tm->ns_per_op - fl->ns_per_op);
    if (tm->batches && fl->batches) {
        aw_counter(c, "aw.floor_ns_op_p50", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, fl->p50);
        aw_counter(c, "aw.floor_ns_op_p99", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, fl->p99);
        aw_counter(c, "aw.net_ns_op_p50", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, tm->p50 - fl->p50);
        aw_counter(c, "aw.net_ns_op_p99", "ns", BENCH_CTR_TIME, BENCH_BETTER_LOWER, tm->p99 - fl->p99);
    }
    aw_counter(c, "aw.timer_ns", "ns", BENCH_CTR_TIME, BENCH_BETTER_NONE, (double)r->overhead_ns);
    aw_counter(c, "aw.minflt", "count", BENCH_CTR_COUNT, BENCH_BETTER_LOWER, (double)minflt);
    aw_counter(c, "aw.minflt_per_op", "count", BENCH_CTR_TIME, BENCH_BETTER_LOWER, (double)minflt / ops);
    aw_counter(c, "aw.sys_ms", "ms", BENCH_CTR_TIME, BENCH_BETTER_LOWER, aw_tv_ms(ru1->ru_stime) - aw_tv_ms(ru0->ru_stime));
    aw_counter(c, "aw.user_ms", "ms", BENCH_CTR_TIME, BENCH_BETTER_LOWER, aw_tv_ms(ru1->ru_utime) - aw_tv_ms(ru0->ru_utime));
    aw_counter(c, "aw.peak_live_bytes", "B", BENCH_CTR_EXACT, BENCH_BETTER_NONE, (double)r->peak_live);
    if (rss0 >= 0 && hwm >= 0) {
        double grow = (double)(hwm > rss0 ? hwm - rss0 : 0);
        aw_counter(c, "aw.rss_growth_bytes", "B", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, grow);
        if (r->peak_live) aw_counter(c, "aw.fragmentation", "ratio", BENCH_CTR_BYTES, BENCH_BETTER_LOWER, grow / (double)r->peak_live);
    }
    aw_counter(c, "aw.locked", "bool", BENCH_CTR_EXACT, BENCH_BETTER_NONE, locked);
}

int aw_worker(const cJSON *j, const char *spec_name, int ev_fd, int ack_fd, const struct worker_opts *o) {
    (void)o;
    aw_wk c = {.ev_fd = ev_fd, .ack_fd = ack_fd, .t0 = ut_now_ns()};
    sc_errors errs = {0};
    aw_workload w = {0};
    aw_run r = {0};
    at_trace trace = {0};
    modreg_entry me = {0};
    bench_opt *typed = NULL;
    void *filled = NULL;
    int rc = 1;
    const cJSON *ja = j ? cJSON_GetObjectItemCaseSensitive(j, "alloc") : NULL;
    const cJSON *jo = j ? cJSON_GetObjectItemCaseSensitive(j, "alloc_opts") : NULL;
    const cJSON *jd = j ? cJSON_GetObjectItemCaseSensitive(j, "module_dir") : NULL;
    if (!cJSON_IsString(ja) || !cJSON_IsObject(jo) || !cJSON_IsString(jd)) {
        aw_fail(&c, "%s: not an allocator worker spec (want alloc, alloc_opts, module_dir, workload)", spec_name);
        goto out;
    }
    if (aw_workload_parse(spec_name, cJSON_GetObjectItemCaseSensitive(j, "workload"), ".workload", &w, &errs)) {
        aw_fail(&c, "%s", errs.n ? errs.v[0] : "bad workload");
        goto out;
    }
    if (aw_send(&c, BENCH_EV_HELLO, 1, NULL, NULL, 0)) goto out;
    aw_send(&c, BENCH_EV_LOAD_START, 0, NULL, NULL, 0);

    char err[512];
    bench_opts bo;
    /* the options as the parent checked them, typed: stored, nothing parsed (spec_opts.h) */
    if (so_opts_read(j, "alloc_opts", &bo, &typed, err, sizeof(err)) ||
        modreg_load(jd->valuestring, "alloc", ja->valuestring, &me, err, sizeof(err)) ||
        modreg_fill_opts(me.mod, &bo, &filled, err, sizeof(err))) {
        aw_fail(&c, "%s", err);
        goto out;
    }
    r.ai = me.mod->iface;
    r.w = &w;
    /* an allocator that does not declare itself thread-safe runs the producer/consumer pair
     * under one mutex, as a caller sharing it would have to */
    int locked = w.pattern == AW_PRODCON && !(me.mod->caps & BENCH_CAP_ALLOC_THREAD_SAFE);
    pthread_mutex_init(&r.mu, NULL);
    if (w.pattern == AW_PRODCON && !w.size) {
        aw_fail(&c, "%s: pattern prodcon takes a fixed \"size\" (the consumer frees with it)", spec_name);
        goto out;
    }
    if (w.pattern == AW_TRACE) {
        if (at_load(w.trace, &trace, err, sizeof(err))) {
            aw_fail(&c, "%s", err);
            goto out;
        }
        r.trace = &trace;
    }
    r.n_slot = w.pattern == AW_TRACE ? (trace.n_ids ? trace.n_ids : 1) : (size_t)w.live;
    r.slot = calloc(r.n_slot, sizeof(*r.slot));
    r.slot_size = calloc(r.n_slot, sizeof(*r.slot_size));
    r.sizes = malloc(AW_NSIZES * sizeof(*r.sizes));
    r.perm = malloc((size_t)w.live * sizeof(*r.perm));
    r.cap_batch = (size_t)(w.ops / AW_BATCH) + 1;
    r.batch_ns = malloc(r.cap_batch * sizeof(*r.batch_ns));
    if (!r.slot || !r.slot_size || !r.sizes || !r.perm || !r.batch_ns) {
        aw_fail(&c, "out of memory");
        goto out;
    }
    aw_draw(&r, &w);
    /* every page of the driver's own arrays is touched now, not inside the timing (not zeros:
     * the compiler may turn malloc + memset 0 into calloc, whose fresh pages stay untouched) */
    for (size_t i = 0; i < r.cap_batch; i++) r.batch_ns[i] = -1.0;
    r.overhead_ns = aw_clock_cost();
    if (r.ai->create(filled, &r.ctx, err, sizeof(err))) {
        aw_fail(&c, "%s", err);
        goto out;
    }
    if (aw_send(&c, BENCH_EV_LOAD_END, 1, NULL, NULL, 0)) goto out;

    /* warm-up: one round (a trace: one replay), untimed; then the timed pass */
    uint64_t warm = w.pattern == AW_CHURN || w.pattern == AW_PRODCON ? 2048 : 2 * (uint64_t)w.live;
    if (warm > w.ops) warm = w.ops;

    /* the driver's floor, before the allocator's own pass and the RSS baseline */
    aw_timing fl;
    if (aw_floor(&c, &r, &w, &trace, warm, &fl)) goto out;
    r.f = (aw_fns){.alloc = r.ai->alloc, .free = r.ai->free, .reset = r.ai->reset, .ctx = r.ctx};
    r.locked = locked;

    /* peak RSS from here on: VmHWM restarts at the current RSS (clear_refs 5, Linux 4.0+) */
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    int hwm_reset = fd >= 0 && write(fd, "5", 1) == 1;
    if (fd >= 0) close(fd);
    int64_t rss0 = aw_status_bytes("VmRSS:");

    struct rusage ru0, ru1;
    aw_timing tm;
    if (aw_pass(&r, warm, &tm, &ru0, &ru1)) {
        aw_fail(&c, "%s: out of memory (alloc returned NULL)", ja->valuestring);
        goto out;
    }
    int64_t hwm = aw_status_bytes(hwm_reset ? "VmHWM:" : "VmRSS:");
    aw_report(&c, &r, &w, &tm, &fl, &ru0, &ru1, rss0, hwm, locked);
    bench_counter_sink sink = {aw_emit, &c, aw_emit_as};
    bench_alloc_counters(&(bench_allocator){r.ai, r.ctx}, &sink);
    rc = aw_send(&c, BENCH_EV_DONE, 1, NULL, NULL, 0) ? 1 : 0;
out:
    if (r.ctx) r.ai->destroy(r.ctx);
    if (r.ai) pthread_mutex_destroy(&r.mu);
    free(r.slot);
    free(r.slot_size);
    free(r.sizes);
    free(r.perm);
    free(r.batch_ns);
    at_trace_free(&trace);
    free(typed);
    free(filled);
    modreg_entry_close(&me);
    aw_workload_free(&w);
    sc_errors_free(&errs);
    return rc;
}
