/* Scratch kept per thread: see scratch.h. */
#include "scratch.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct kn_scratch_set {
    void *p[KN_SCRATCH_N];
    size_t cap[KN_SCRATCH_N];
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

void *kn_scratch(int slot, size_t need) {
    pthread_once(&kn_scratch_once, kn_scratch_init);
    if (!kn_scratch_ok || slot < 0 || slot >= KN_SCRATCH_N) return NULL;
    kn_scratch_set *s = pthread_getspecific(kn_scratch_key);
    if (!s) {
        if (!(s = calloc(1, sizeof(*s)))) return NULL;
        if (pthread_setspecific(kn_scratch_key, s)) {
            free(s);
            return NULL;
        }
    }
    need = need ? (need + 63) & ~(size_t)63 : 64;   /* aligned_alloc's size: a multiple of 64, not 0 */
    if (s->cap[slot] < need) {
        void *p = aligned_alloc(64, need);
        if (!p) return NULL;
        free(s->p[slot]);
        s->p[slot] = p;
        s->cap[slot] = need;
    }
    return s->p[slot];
}

