/* A fixed pool of worker threads that run one parallel-for at a time.
 *
 * A decode step calls tp_run about ten times per layer, each job lasting tens of
 * microseconds, so waking a sleeping thread (a futex round trip, 10-50 us on a
 * VM) on every call would cost as much as the work. Workers therefore spin on a
 * generation counter for a bounded time after each job and only then sleep on a
 * condition variable. The bound matters: this machine has two cores shared with
 * other work, and a worker that spun forever would steal the core from them.
 *
 * Protocol (one job at a time; tp_run is not reentrant and has one caller):
 *   caller: writes fn/arg/n_tasks, next = 0, pending = n_workers, then gen++
 *           (release); wakes sleepers; runs tasks itself; waits for pending == 0.
 *   worker: sees gen change (acquire), claims tasks with fetch_add on `next`
 *           until it passes n_tasks, then decrements `pending`.
 * Every worker takes part in every job (if only to find no task left), which is
 * what makes it safe for the caller to overwrite the job fields for the next
 * call once pending reaches 0.
 *
 * Lost wake-ups are ruled out Dekker-style with seq_cst operations: a sleeper
 * increments `sleepers` and then re-reads `gen` under the mutex; the caller bumps
 * `gen` and then reads `sleepers`; one of the two must see the other's write.
 * The same pattern protects the caller's own sleep on `pending` (`caller_waits`).
 */
#include "threadpool.h"
#include "util/ut_clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define tp_cpu_relax() _mm_pause()
#else
#define tp_cpu_relax() ((void)0)
#endif

/* How long a thread spins before sleeping. Long enough to cover the gaps
 * between the matmuls of a decode step, short enough that an idle pool gives
 * its cores back within a fraction of a millisecond. */
#define TP_SPIN_NS 200000L

struct tp_pool {
    int n_threads;              /* including the caller */
    int n_started;              /* workers actually started (n_threads - 1 unless create failed) */
    pthread_t *workers;         /* (n_threads - 1) */

    /* the current job: written by the caller before gen is bumped */
    bench_task_fn fn;
    void *arg;
    int n_tasks;

    atomic_uint gen;            /* job generation; bumped once per job */
    atomic_int next;            /* next unclaimed task index */
    atomic_int pending;         /* workers that have not finished the current job */
    atomic_int sleepers;        /* workers inside (or entering) the condvar wait */
    atomic_int caller_waits;    /* 1 while the caller sleeps on done_cv */
    atomic_int stop;            /* set once, by tp_destroy */

    pthread_mutex_t mu;
    pthread_cond_t work_cv;     /* gen changed or stop */
    pthread_cond_t done_cv;     /* pending reached 0 */
};

static long tp_now_ns(void) { return (long)ut_now_ns(); }

/* Claims and runs tasks of the current job until none are left. */
static void tp_drain(tp_pool *p) {
    bench_task_fn fn = p->fn;
    void *arg = p->arg;
    int n = p->n_tasks;
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= n) break;
        fn(arg, i, n);
    }
}

/* Spins until a new job (or stop) is published; returns 0 if the spin budget ran out first. */
static int tp_spin_gen(tp_pool *p, unsigned seen) {
    long deadline = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen ||
            atomic_load_explicit(&p->stop, memory_order_relaxed))
            return 1;
        tp_cpu_relax();
        if ((i & 255) == 0) { /* reading the clock every few hundred pauses keeps its cost out of the loop */
            long now = tp_now_ns();
            if (!deadline) deadline = now + TP_SPIN_NS;
            else if (now > deadline) return 0;
        }
    }
}

static void *tp_worker(void *vp) {
    tp_pool *p = vp;
    /* Not a load of gen: a worker that starts late would take the first job,
     * already published, for an old one and never join it. gen is 0 until the
     * first tp_run, which cannot happen before tp_create returns. */
    unsigned seen = 0;
    for (;;) {
        if (!tp_spin_gen(p, seen)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->work_cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        tp_drain(p);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waits)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

tp_pool *tp_create(int n_threads) {
    if (n_threads < 1) return NULL;
    tp_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_waits, 0);
    atomic_init(&p->stop, 0);
    int have_mu = 0, have_work = 0, have_done = 0;
    if (pthread_mutex_init(&p->mu, NULL)) goto err;
    have_mu = 1;
    if (pthread_cond_init(&p->work_cv, NULL)) goto err;
    have_work = 1;
    if (pthread_cond_init(&p->done_cv, NULL)) goto err;
    have_done = 1;
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) goto err;
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, tp_worker, p)) goto err;
            p->n_started++;
        }
    }
    return p;
err:
    if (p->n_started) {
        /* tp_destroy's join path needs the sync objects, which all exist once a worker started */
        tp_destroy(p);
        return NULL;
    }
    if (have_done) pthread_cond_destroy(&p->done_cv);
    if (have_work) pthread_cond_destroy(&p->work_cv);
    if (have_mu) pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
    return NULL;
}

void tp_destroy(tp_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->work_cv);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}

int tp_threads(const tp_pool *p) { return p ? p->n_threads : 1; }

void tp_run(void *vp, bench_task_fn fn, void *arg, int n_tasks) {
    tp_pool *p = vp;
    if (n_tasks <= 0) return;
    /* One task (or no workers) gains nothing from a hand-off. */
    if (!p || p->n_started == 0 || n_tasks == 1) {
        for (int i = 0; i < n_tasks; i++) fn(arg, i, n_tasks);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->pending, p->n_started, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes the job and orders against the sleepers read */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
    }

    tp_drain(p);

    long deadline = 0;
    for (unsigned i = 1; atomic_load_explicit(&p->pending, memory_order_acquire) != 0; i++) {
        tp_cpu_relax();
        if ((i & 255) == 0) {
            long now = tp_now_ns();
            if (!deadline) deadline = now + TP_SPIN_NS;
            else if (now > deadline) {
                pthread_mutex_lock(&p->mu);
                atomic_store(&p->caller_waits, 1);
                while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->done_cv, &p->mu);
                atomic_store(&p->caller_waits, 0);
                pthread_mutex_unlock(&p->mu);
                break;
            }
        }
    }
}
