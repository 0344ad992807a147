/* Tests of the thread pool: every task runs exactly once, on every path of the
 * hand-off (spinning workers, sleeping workers, a sleeping caller), with pools
 * created and used at once (workers that start late) and torn down at once.
 * No timing assertions: the machine is shared and noisy. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "engines/core/compute/threadpool.h"

typedef struct count_job {
    atomic_int *hits;       /* (n_tasks) times each task ran */
    int n_tasks;            /* what fn must be told */
    atomic_int bad_n;       /* calls that saw a different n_tasks */
    int sleep_task;         /* task that sleeps (-1: none), to make the caller wait long */
    long sleep_ns;
} count_job;

static void count_task(void *arg, int task, int n_tasks) {
    count_job *j = arg;
    if (n_tasks != j->n_tasks || task < 0 || task >= n_tasks) {
        atomic_fetch_add(&j->bad_n, 1);
        return;
    }
    if (task == j->sleep_task) {
        struct timespec ts = {0, j->sleep_ns};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_add(&j->hits[task], 1);
}

/* Runs n_tasks tasks `runs` times and checks each ran once per run. */
static void check_runs(tp_pool *p, int n_tasks, int runs, long pause_ns, int sleep_task) {
    count_job j = {.n_tasks = n_tasks, .sleep_task = sleep_task, .sleep_ns = 1000000};
    atomic_init(&j.bad_n, 0);
    j.hits = calloc(n_tasks > 0 ? (size_t)n_tasks : 1, sizeof *j.hits);
    assert_non_null(j.hits);
    for (int r = 0; r < runs; r++) {
        for (int i = 0; i < n_tasks; i++) atomic_store(&j.hits[i], 0);
        tp_run(p, count_task, &j, n_tasks);
        for (int i = 0; i < n_tasks; i++)
            if (atomic_load(&j.hits[i]) != 1)
                fail_msg("threads=%d n_tasks=%d run %d: task %d ran %d times", tp_threads(p), n_tasks, r, i,
                         atomic_load(&j.hits[i]));
        if (pause_ns) {
            struct timespec ts = {pause_ns / 1000000000L, pause_ns % 1000000000L};
            nanosleep(&ts, NULL);
        }
    }
    assert_int_equal(atomic_load(&j.bad_n), 0);
    free(j.hits);
}

static const int task_counts[] = {0, 1, 7, 1000};

/* Back-to-back runs: workers stay in their spin phase. */
static void test_every_task_once(void **state) {
    (void)state;
    for (int t = 1; t <= 4; t++) {
        tp_pool *p = tp_create(t);
        assert_non_null(p);
        assert_int_equal(tp_threads(p), t);
        for (size_t i = 0; i < sizeof task_counts / sizeof task_counts[0]; i++) check_runs(p, task_counts[i], 300, 0, -1);
        tp_destroy(p);
    }
}

/* The caller alone. */
static void test_null_pool(void **state) {
    (void)state;
    assert_int_equal(tp_threads(NULL), 1);
    for (size_t i = 0; i < sizeof task_counts / sizeof task_counts[0]; i++) check_runs(NULL, task_counts[i], 3, 0, -1);
    tp_destroy(NULL);
}

/* Pauses longer than the spin budget between runs: workers must be woken from
 * their condvar sleep each time. */
static void test_sleeping_workers(void **state) {
    (void)state;
    for (int t = 2; t <= 3; t++) {
        tp_pool *p = tp_create(t);
        assert_non_null(p);
        check_runs(p, 7, 20, 2000000, -1);
        check_runs(p, 1000, 10, 1000000, -1);
        tp_destroy(p);
    }
}

/* One slow task: whoever does not run it waits past the spin budget and sleeps;
 * when a worker runs it, the caller sleeps on the done condvar. */
static void test_sleeping_caller(void **state) {
    (void)state;
    tp_pool *p = tp_create(2);
    assert_non_null(p);
    check_runs(p, 2, 20, 0, 0);
    check_runs(p, 2, 20, 0, 1);
    check_runs(p, 7, 10, 0, 6);
    tp_destroy(p);
}

/* A pool used the moment it is created, while its workers may not have
 * started yet, and destroyed the moment it is done with. */
static void test_create_run_destroy(void **state) {
    (void)state;
    for (int i = 0; i < 200; i++) {
        tp_pool *p = tp_create(1 + i % 4);
        assert_non_null(p);
        check_runs(p, 7, 1, 0, -1);
        tp_destroy(p);
    }
    for (int i = 0; i < 50; i++) tp_destroy(tp_create(1 + i % 4)); /* never used */
}

static void test_bad_args(void **state) {
    (void)state;
    assert_null(tp_create(0));
    assert_null(tp_create(-3));
    tp_pool *p = tp_create(2);
    assert_non_null(p);
    check_runs(p, -5, 2, 0, -1); /* negative counts run nothing */
    tp_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_task_once),
        cmocka_unit_test(test_null_pool),
        cmocka_unit_test(test_sleeping_workers),
        cmocka_unit_test(test_sleeping_caller),
        cmocka_unit_test(test_create_run_destroy),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
