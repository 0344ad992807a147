/* Scratch kept per thread: see scratch.h. */
#include "scratch.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct kn_scratch_set {
    void *p[KN_SCRATCH_N];
    size_t cap[KN_SCRATCH_N];
    unsigned job;           /* kn_scratch_job */
    struct {                /* what KN_SCRATCH_X holds; job 0: nothing */
        unsigned job;
        int kind, n, cols;
        const void *x, *buf;
    } key;
} kn_scratch_set;

static pthread_key_t kn_scratch_key;
static pthread_once_t kn_scratch_once = PTHREAD_ONCE_INIT;
static int kn_scratch_ok;

static void kn_scratch_drop(void *v) {
    kn_scratch_set *s = v;
    for (int i = 0; i < KN_SCRATCH_N; i++) free(s->p[i]);
    free(s);
}

static void kn_scratch_init(void) { kn_scratch_ok = pthread_key_create(&kn_scratch_key, kn_scratch_drop) == 0; }

/* This thread's set, made on first use; NULL when it cannot be. */
static kn_scratch_set *kn_set(void) {
    pthread_once(&kn_scratch_once, kn_scratch_init);
    if (!kn_scratch_ok) return NULL;
    kn_scratch_set *s = pthread_getspecific(kn_scratch_key);
    if (!s) {
        if (!(s = calloc(1, sizeof(*s)))) return NULL;
        if (pthread_setspecific(kn_scratch_key, s)) {
            free(s);
            return NULL;
        }
    }
    return s;
}

void *kn_scratch(int slot, size_t need) {
    kn_scratch_set *s = slot >= 0 && slot < KN_SCRATCH_N ? kn_set() : NULL;
    if (!s) return NULL;
    need = need ? (need + 63) & ~(size_t)63 : 64;   /* aligned_alloc's size: a multiple of 64, not 0 */
    if (s->cap[slot] < need) {
        /* the new block is had before the old is freed, so a grown KN_SCRATCH_X never has the
         * address its key holds */
        void *p = aligned_alloc(64, need);
        if (!p) return NULL;
        free(s->p[slot]);
        s->p[slot] = p;
        s->cap[slot] = need;
    }
    return s->p[slot];
}

void kn_scratch_job(unsigned job) {
    kn_scratch_set *s = kn_set();
    if (s) s->job = job;
}

void *kn_scratch_x(int kind, const void *x, int n, int cols, size_t need, int *kept) {
    *kept = 0;
    kn_scratch_set *s = kn_set();
    void *p = s ? kn_scratch(KN_SCRATCH_X, need) : NULL;
    if (!p) return NULL;
    *kept = s->job && s->key.job == s->job && s->key.kind == kind && s->key.x == x && s->key.n == n &&
            s->key.cols == cols && s->key.buf == p;
    if (!*kept) {
        s->key.job = s->job;
        s->key.kind = kind;
        s->key.x = x;
        s->key.n = n;
        s->key.cols = cols;
        s->key.buf = p;
    }
    return p;
}
