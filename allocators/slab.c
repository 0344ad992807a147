/* slab: size classes over 64 KiB slabs, per-thread caches, mmap for large sizes.
 * See slab.h for the glossary and the invariants. */
#include "allocators/slab.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLAB_DEFAULT_REGION ((size_t)1 << 30)
#define LARGE_MAGIC 0x1a29e5ab1a29e5abull
#define FREED_TAG 0x5ab0f4eed5ab0f4eull   /* xor'ed with the address into a free block's 2nd word (debug) */

typedef struct slab_block { struct slab_block *next; } slab_block;

typedef struct slab_bin {
    slab_block *head;
    uint32_t count;     /* blocks on head's list */
    uint32_t limit;     /* above it, batch blocks go back to central; 2 * batch at first, doubled
                           (up to bin_cap) when the bin overflows after having refilled */
    uint32_t refilled;  /* 1: the bin took a batch from central since it last overflowed */
} slab_bin;

/* Counters written by one thread and read by slab_get_stats from another: relaxed
 * atomics, which compile to plain loads and stores here, keep that race defined. */
typedef struct tc_stats {
    _Atomic uint64_t allocs, frees, large_allocs, failed;
    _Atomic uint64_t refills, flushes;   /* trips to a central list (each one lock round trip) */
    _Atomic int64_t live;   /* B; negative where this thread frees what others allocated */
    _Atomic int64_t peak;   /* B; max of live */
} tc_stats;

typedef struct slab_tcache {
    slab_bin bins[SLAB_NCLASS];
    slab *owner;
    struct slab_tcache *next, *prev;   /* owner's registry, under reg_lock */
    tc_stats st;
} slab_tcache;

typedef struct slab_central {
    pthread_mutex_t lock;
    slab_block *free;   /* blocks given back by tcaches */
    size_t n_free;
    char *bump, *bump_end;   /* the class's newest slab, carved on demand */
    size_t carved;           /* blocks ever carved */
} __attribute__((aligned(64))) slab_central;

typedef struct large_hdr {
    uint64_t magic;
    void *map;           /* the mapping's start */
    size_t map_len;      /* B */
    size_t size;         /* B, as requested */
    struct large_hdr *next, *prev;   /* live large blocks, under large_lock */
} large_hdr;

struct slab {
    char *base;               /* 64 KiB aligned */
    size_t region;            /* B */
    size_t n_slabs;           /* region / SLAB_BYTES */
    _Atomic size_t slabs_used;
    uint8_t *class_of;        /* (n_slabs) class index + 1, 0 = not given out */
    void *raw; size_t raw_len;   /* the reservation as mapped */
    uint64_t id;              /* unique per create: keys the thread-local fast lookup */
    pthread_key_t key;
    slab_central central[SLAB_NCLASS];

    pthread_mutex_t reg_lock;
    slab_tcache *caches;      /* live tcaches */
    alloc_stats retired;      /* folded in from threads that exited */
    int64_t retired_peak;
    uint64_t retired_refills, retired_flushes;

    pthread_mutex_t large_lock;
    large_hdr *large_live;
    /* Freed mappings kept for reuse, by size: bucket b holds mappings of 2^b pages,
     * linked through their first word. Large mappings are 2^b pages long for this. */
    void *lcache[48];
    size_t lcache_bytes, lcache_cap;   /* B cached, B at most */
    _Atomic uint64_t large_reserved;   /* B in large mappings, live and cached */
};

static size_t class_size[SLAB_NCLASS];
static uint32_t class_batch[SLAB_NCLASS];
static uint32_t class_bin_cap[SLAB_NCLASS];
static uint8_t small_class[1024 / 16 + 1];    /* [(size + 15) / 16] = the class of size, for size <= 1 KiB */   /* most a bin's limit grows to: max(2 * batch, SLAB_BIN_MAX_BYTES / C) */
static pthread_once_t classes_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t next_id = 1;

static inline unsigned class_index(size_t size);

static void classes_init(void) {
    for (unsigned i = 0; i < SLAB_NCLASS; i++) {
        if (i < 8) {
            class_size[i] = 16 * (i + 1);
        } else {
            unsigned b = 7 + (i - 8) / 4, j = (i - 8) % 4 + 1;
            class_size[i] = ((size_t)1 << b) + j * ((size_t)1 << (b - 2));
        }
        /* About 8 KiB moved per lock, at least 4 blocks, at most 64. */
        size_t bt = 8192 / class_size[i];
        class_batch[i] = (uint32_t)(bt < 4 ? 4 : bt > 64 ? 64 : bt);
        size_t cap = SLAB_BIN_MAX_BYTES / class_size[i];
        class_bin_cap[i] = (uint32_t)(cap > 2 * class_batch[i] ? cap : 2 * class_batch[i]);
    }
    for (size_t k = 0; k <= 1024 / 16; k++) small_class[k] = (uint8_t)class_index(k ? k * 16 : 1);
}

/* size in [1, SLAB_MAX_CLASS] -> class index */
static inline unsigned class_index(size_t size) {
    if (size <= 128) return (unsigned)((size - 1) >> 4);
    unsigned b = alloc_log2(size - 1);
    return 8 + (b - 7) * 4 + (unsigned)((size - 1) >> (b - 2)) - 4;
}

/* The class for (size, align), or -1 for the large path. size 0 and align 0 are taken
 * as 1 and 16. The common requests (up to 1 KiB, alignment up to 16) cost one load. */
static inline int class_for(size_t size, size_t align) {
    if (__builtin_expect(align <= 16, 1)) {
        if (__builtin_expect(size <= 1024, 1)) return small_class[(size + 15) >> 4];
        return size <= SLAB_MAX_CLASS ? (int)class_index(size) : -1;
    }
    if (align > SLAB_MAX_ALIGN) return -1;
    size_t s = size < align ? align : size;
    if (s > SLAB_MAX_CLASS) return -1;
    unsigned c = class_index(s);
    while (c < SLAB_NCLASS && (class_size[c] & (align - 1))) c++;
    return c < SLAB_NCLASS ? (int)c : -1;
}

size_t slab_block_size(size_t size, size_t align) {
    pthread_once(&classes_once, classes_init);
    if (size == 0) size = 1;
    if (align == 0) align = 16;
    int c = class_for(size, align);
    return c < 0 ? 0 : class_size[c];
}

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static inline uint64_t freed_tag(const void *p) { return (uint64_t)(uintptr_t)p ^ FREED_TAG; }

/* ---------------------------------------------------------------- thread caches */

static void tcache_flush_all(slab *s, slab_tcache *tc);

/* Thread exit: the cache's blocks go back to central, its counts to retired. */
static void tcache_destructor(void *arg) {
    slab_tcache *tc = arg;
    slab *s = tc->owner;
    tcache_flush_all(s, tc);
    pthread_mutex_lock(&s->reg_lock);
    if (tc->prev) tc->prev->next = tc->next; else s->caches = tc->next;
    if (tc->next) tc->next->prev = tc->prev;
    s->retired.allocs += atomic_load_explicit(&tc->st.allocs, memory_order_relaxed);
    s->retired.frees += atomic_load_explicit(&tc->st.frees, memory_order_relaxed);
    s->retired.large_allocs += atomic_load_explicit(&tc->st.large_allocs, memory_order_relaxed);
    s->retired.failed += atomic_load_explicit(&tc->st.failed, memory_order_relaxed);
    s->retired_refills += atomic_load_explicit(&tc->st.refills, memory_order_relaxed);
    s->retired_flushes += atomic_load_explicit(&tc->st.flushes, memory_order_relaxed);
    s->retired.bytes_live += (uint64_t)atomic_load_explicit(&tc->st.live, memory_order_relaxed);
    s->retired_peak += atomic_load_explicit(&tc->st.peak, memory_order_relaxed);
    pthread_mutex_unlock(&s->reg_lock);
    free(tc);
}

/* One slot per thread remembers the last allocator used, so the common case (one
 * allocator per process) costs a compare instead of pthread_getspecific. Initial-exec:
 * in a dlopen'ed module the default (general-dynamic) model makes every access a call
 * to __tls_get_addr; these 16 bytes fit in the static TLS glibc keeps for dlopen. */
static _Thread_local __attribute__((tls_model("initial-exec"))) struct { uint64_t id; slab_tcache *tc; } slab_tl;

__attribute__((noinline)) static slab_tcache *tcache_slow(slab *s) {
    slab_tcache *tc = pthread_getspecific(s->key);
    if (!tc) {
        tc = calloc(1, sizeof(*tc));
        if (!tc) return NULL;
        tc->owner = s;
        for (unsigned i = 0; i < SLAB_NCLASS; i++) tc->bins[i].limit = 2 * class_batch[i];
        pthread_mutex_lock(&s->reg_lock);
        tc->next = s->caches;
        if (s->caches) s->caches->prev = tc;
        s->caches = tc;
        pthread_mutex_unlock(&s->reg_lock);
        if (pthread_setspecific(s->key, tc)) {
            tcache_destructor(tc);
            return NULL;
        }
    }
    slab_tl.id = s->id;
    slab_tl.tc = tc;
    return tc;
}

static inline slab_tcache *tcache_get(slab *s) {
    if (__builtin_expect(slab_tl.id == s->id, 1)) return slab_tl.tc;
    return tcache_slow(s);
}

#define TC_ADD(field, v) atomic_store_explicit(&(field), atomic_load_explicit(&(field), memory_order_relaxed) + (v), memory_order_relaxed)

static inline void tc_count_alloc(slab_tcache *tc, size_t size) {
#if BENCH_ALLOC_STATS
    TC_ADD(tc->st.allocs, 1);
    int64_t live = atomic_load_explicit(&tc->st.live, memory_order_relaxed) + (int64_t)size;
    atomic_store_explicit(&tc->st.live, live, memory_order_relaxed);
    if (live > atomic_load_explicit(&tc->st.peak, memory_order_relaxed))
        atomic_store_explicit(&tc->st.peak, live, memory_order_relaxed);
#else
    (void)tc, (void)size;
#endif
}

static inline void tc_count_free(slab_tcache *tc, size_t size) {
#if BENCH_ALLOC_STATS
    TC_ADD(tc->st.frees, 1);
    TC_ADD(tc->st.live, -(int64_t)size);
#else
    (void)tc, (void)size;
#endif
}

/* ---------------------------------------------------------------- central lists */

/* Gives a new slab to class c; called with central[c].lock held. */
static int central_new_slab(slab *s, unsigned c) {
    size_t i = atomic_fetch_add(&s->slabs_used, 1);
    if (i >= s->n_slabs) {
        atomic_fetch_sub(&s->slabs_used, 1);
        return -1;
    }
    s->class_of[i] = (uint8_t)(c + 1);
    slab_central *k = &s->central[c];
    k->bump = s->base + (i << SLAB_SHIFT);
    k->bump_end = k->bump + (SLAB_BYTES / class_size[c]) * class_size[c];
    return 0;
}

/* Fills bin c with up to batch blocks from central; returns one block, or NULL when out of memory. */
__attribute__((noinline)) static slab_block *tcache_refill(slab *s, slab_tcache *tc, unsigned c) {
    slab_central *k = &s->central[c];
    size_t cs = class_size[c];
    uint32_t want = class_batch[c], got = 0;
    slab_block *head = NULL;
    pthread_mutex_lock(&k->lock);
    while (got < want && k->free) {
        slab_block *b = k->free;
        k->free = b->next;
        b->next = head;
        head = b;
        got++;
    }
    k->n_free -= got;
    while (got < want) {
        if (k->bump == k->bump_end && central_new_slab(s, c)) break;
        slab_block *b = (slab_block *)k->bump;
        k->bump += cs;
        k->carved++;
        if (BENCH_ALLOC_DEBUG) ((uint64_t *)b)[1] = freed_tag(b);
        b->next = head;
        head = b;
        got++;
    }
    pthread_mutex_unlock(&k->lock);
    ALLOC_STAT(TC_ADD(tc->st.refills, 1));
    if (!head) return NULL;
    tc->bins[c].head = head->next;
    tc->bins[c].count = got - 1;
    tc->bins[c].refilled = 1;
    return head;
}

/* Gives n blocks from the head of bin c back to central. */
static void tcache_flush(slab *s, slab_tcache *tc, unsigned c, uint32_t n) {
    slab_bin *bin = &tc->bins[c];
    if (n == 0 || !bin->head) return;
    slab_block *first = bin->head, *last = first;
    uint32_t moved = 1;
    while (moved < n && last->next) { last = last->next; moved++; }
    bin->head = last->next;
    bin->count -= moved;
    slab_central *k = &s->central[c];
    pthread_mutex_lock(&k->lock);
    last->next = k->free;
    k->free = first;
    k->n_free += moved;
    pthread_mutex_unlock(&k->lock);
    ALLOC_STAT(TC_ADD(tc->st.flushes, 1));
}

static void tcache_flush_all(slab *s, slab_tcache *tc) {
    for (unsigned c = 0; c < SLAB_NCLASS; c++) tcache_flush(s, tc, c, tc->bins[c].count);
}

/* ---------------------------------------------------------------- large blocks */

static void *large_alloc(slab *s, slab_tcache *tc, size_t size, size_t align) {
    size_t pg = page_size();
    if (align < pg) align = pg;   /* the block starts a page so the header has the page before it */
    if (size > ((size_t)1 << 46)) return NULL;
    /* Rounded up to 2^b pages: only the pages used get touched, and any cached mapping of
     * bucket b fits any request of bucket b. */
    unsigned bucket = alloc_log2_up((pg + size + (align - pg) + pg - 1) / pg);
    size_t len = pg << bucket;
    void *map = NULL;
    pthread_mutex_lock(&s->large_lock);
    if ((map = s->lcache[bucket])) {
        s->lcache[bucket] = *(void **)map;
        s->lcache_bytes -= len;
    }
    pthread_mutex_unlock(&s->large_lock);
    if (!map) {
        map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED) return NULL;
        atomic_fetch_add(&s->large_reserved, len);
    }
    char *p = (char *)alloc_align_up((uintptr_t)map + pg, align);
    large_hdr *h = (large_hdr *)(p - sizeof(large_hdr));
    h->magic = LARGE_MAGIC;
    h->map = map;
    h->map_len = len;
    h->size = size;
    h->prev = NULL;
    pthread_mutex_lock(&s->large_lock);
    h->next = s->large_live;
    if (h->next) h->next->prev = h;
    s->large_live = h;
    pthread_mutex_unlock(&s->large_lock);
    ALLOC_STAT(TC_ADD(tc->st.large_allocs, 1));
    return p;
}

static int large_is_live(slab *s, const void *p) {
    const large_hdr *want = (const large_hdr *)((const char *)p - sizeof(large_hdr));
    int found = 0;
    pthread_mutex_lock(&s->large_lock);
    for (large_hdr *h = s->large_live; h && !found; h = h->next) found = h == want;
    pthread_mutex_unlock(&s->large_lock);
    return found;
}

static void large_free(slab *s, void *p, size_t size) {
    /* Look the pointer up without reading it: after a double free its page may be gone. */
    if (BENCH_ALLOC_DEBUG && !large_is_live(s, p))
        alloc_misuse("slab", "free of %p (%zu B): not a live block of this allocator "
                     "(double free, or a pointer from another allocator)", p, size);
    large_hdr *h = (large_hdr *)((char *)p - sizeof(large_hdr));
    if (BENCH_ALLOC_DEBUG && h->size != size)
        alloc_misuse("slab", "free of %p with size %zu, allocated with %zu", p, size, h->size);
    void *map = h->map;
    size_t len = h->map_len;
    pthread_mutex_lock(&s->large_lock);
    if (h->prev) h->prev->next = h->next; else s->large_live = h->next;
    if (h->next) h->next->prev = h->prev;
    h->magic = 0;
    int cached = 0;
    if (s->lcache_bytes + len <= s->lcache_cap) {
        unsigned bucket = alloc_log2(len / page_size());
        *(void **)map = s->lcache[bucket];
        s->lcache[bucket] = map;
        s->lcache_bytes += len;
        cached = 1;
    }
    pthread_mutex_unlock(&s->large_lock);
    if (!cached) {
        munmap(map, len);
        atomic_fetch_sub(&s->large_reserved, len);
    }
}

/* ---------------------------------------------------------------- public */

slab *slab_create(size_t region, size_t large_cache) {
    pthread_once(&classes_once, classes_init);
    if (region == 0) region = SLAB_DEFAULT_REGION;
    if (region > ((size_t)1 << 46)) return NULL;
    region = alloc_align_up(region, SLAB_BYTES);
    slab *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    int key_made = 0, locks = 0;
    s->region = region;
    s->n_slabs = region >> SLAB_SHIFT;
    s->id = atomic_fetch_add(&next_id, 1);
    s->class_of = calloc(s->n_slabs, 1);
    if (!s->class_of) goto err;
    s->lcache_cap = large_cache;
    /* Over-reserve by one slab so the base can be aligned to SLAB_BYTES. */
    s->raw_len = region + SLAB_BYTES;
    s->raw = mmap(NULL, s->raw_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s->raw == MAP_FAILED) { s->raw = NULL; goto err; }
    s->base = (char *)alloc_align_up((uintptr_t)s->raw, SLAB_BYTES);
    if (pthread_key_create(&s->key, tcache_destructor)) goto err;
    key_made = 1;
    for (unsigned c = 0; c < SLAB_NCLASS; c++, locks++)
        if (pthread_mutex_init(&s->central[c].lock, NULL)) goto err;
    if (pthread_mutex_init(&s->reg_lock, NULL)) goto err;
    locks++;
    if (pthread_mutex_init(&s->large_lock, NULL)) goto err;
    locks++;
    return s;
err:
    for (int c = 0; c < locks && c < SLAB_NCLASS; c++) pthread_mutex_destroy(&s->central[c].lock);
    if (locks > SLAB_NCLASS) pthread_mutex_destroy(&s->reg_lock);
    if (key_made) pthread_key_delete(s->key);
    if (s->raw) munmap(s->raw, s->raw_len);
    free(s->class_of);
    free(s);
    return NULL;
}

void slab_destroy(slab *s) {
    if (!s) return;
    /* Deleting the key first: no destructor may run on a tcache freed below. */
    pthread_key_delete(s->key);
    for (slab_tcache *tc = s->caches, *n; tc; tc = n) {
        n = tc->next;
        free(tc);
    }
    if (slab_tl.id == s->id) slab_tl.id = 0;
    for (large_hdr *h = s->large_live, *n; h; h = n) {
        n = h->next;
        munmap(h->map, h->map_len);
    }
    size_t pg = page_size();
    for (unsigned b = 0; b < 48; b++)
        for (void *m = s->lcache[b], *n; m; m = n) {
            n = *(void **)m;
            munmap(m, pg << b);
        }
    for (unsigned c = 0; c < SLAB_NCLASS; c++) pthread_mutex_destroy(&s->central[c].lock);
    pthread_mutex_destroy(&s->reg_lock);
    pthread_mutex_destroy(&s->large_lock);
    munmap(s->raw, s->raw_len);
    free(s->class_of);
    free(s);
}

/* What slab_alloc's fast path does not do: an empty bin, a large block, no thread cache. */
__attribute__((noinline)) static void *slab_alloc_slow(slab *s, slab_tcache *tc, size_t size, size_t align, int c) {
    if (align == 0) align = 16;
    if (!tc && !(tc = tcache_get(s))) return NULL;
    void *p;
    if (c >= 0 && tc->bins[c].head) {
        /* the fast path did not know this thread's cache (another slab was used last) */
        slab_bin *bin = &tc->bins[c];
        slab_block *b = bin->head;
        bin->head = b->next;
        bin->count--;
        p = b;
    } else {
        p = c >= 0 ? tcache_refill(s, tc, (unsigned)c) : large_alloc(s, tc, size, align);
    }
    if (__builtin_expect(!p, 0)) {
        ALLOC_STAT(TC_ADD(tc->st.failed, 1));
        return NULL;
    }
    if (BENCH_ALLOC_DEBUG && c >= 0) ((uint64_t *)p)[1] = 0;
    tc_count_alloc(tc, size);
    return p;
}

/* The fast path: a small class and a non-empty bin; no call, no lock. */
void *slab_alloc(slab *s, size_t size, size_t align) {
    if (size == 0) size = 1;
    if (BENCH_ALLOC_DEBUG && align && !alloc_is_pow2(align)) alloc_misuse("slab", "alignment %zu is not a power of two", align);
    int c = class_for(size, align);   /* align 0 is taken as 16 there, and in the slow path */
    slab_tcache *tc = slab_tl.id == s->id ? slab_tl.tc : NULL;
    if (__builtin_expect(c >= 0 && tc != NULL, 1)) {
        slab_bin *bin = &tc->bins[c];
        slab_block *b = bin->head;
        if (__builtin_expect(b != NULL, 1)) {
            bin->head = b->next;
            bin->count--;
            if (BENCH_ALLOC_DEBUG) ((uint64_t *)b)[1] = 0;
            tc_count_alloc(tc, size);
            return b;
        }
    }
    return slab_alloc_slow(s, tc, size, align, c);
}

/* Debug checks of a small free: the block must start a block of a slab in use, the size
 * must fit its class, and it must not carry the tag free blocks carry. */
static void check_small_free(slab *s, const void *p, size_t size, size_t off) {
    unsigned cls = s->class_of[off >> SLAB_SHIFT];
    if (!cls)
        alloc_misuse("slab", "free of %p (%zu B): inside the slab region but in no slab in use", p, size);
    size_t cs = class_size[cls - 1];
    size_t in = off & (SLAB_BYTES - 1);
    if (in % cs || in / cs >= SLAB_BYTES / cs)
        alloc_misuse("slab", "free of %p (%zu B): not the start of a %zu B block (interior or foreign pointer)", p, size, cs);
    if (size > cs)
        alloc_misuse("slab", "free of %p with size %zu, but its block holds %zu B (wrong size)", p, size, cs);
    if (((const uint64_t *)p)[1] == freed_tag(p))
        alloc_misuse("slab", "double free of %p (%zu B)", p, size);
}

/* A bin above its limit gives a batch back to central. A bin that also had to refill
 * since it last overflowed holds a working set larger than its limit (a burst of
 * allocations, then their frees): its limit doubles, up to bin_cap, so the next burst
 * stays in the bin instead of paying two lock round trips per batch. A bin that only
 * frees (another thread allocates) never refills, and its limit stays. */
__attribute__((noinline)) static void bin_overflow(slab *s, slab_tcache *tc, unsigned c) {
    slab_bin *bin = &tc->bins[c];
    if (bin->refilled && bin->limit < class_bin_cap[c]) {
        bin->limit = bin->limit * 2 < class_bin_cap[c] ? bin->limit * 2 : class_bin_cap[c];
        bin->refilled = 0;
        if (bin->count <= bin->limit) return;
    }
    bin->refilled = 0;
    tcache_flush(s, tc, c, class_batch[c]);
}

/* What slab_free's fast path does not do: a large block, no thread cache. */
__attribute__((noinline)) static void slab_free_slow(slab *s, void *p, size_t size, size_t off) {
    slab_tcache *tc = tcache_get(s);
    if (off >= s->region) {
        large_free(s, p, size);
        if (tc) tc_count_free(tc, size);
        return;
    }
    if (BENCH_ALLOC_DEBUG) check_small_free(s, p, size, off);
    unsigned c = s->class_of[off >> SLAB_SHIFT] - 1u;
    slab_block *b = p;
    if (BENCH_ALLOC_DEBUG) ((uint64_t *)b)[1] = freed_tag(b);
    if (!tc) {
        /* No cache for this thread (out of memory): straight to central. */
        slab_central *k = &s->central[c];
        pthread_mutex_lock(&k->lock);
        b->next = k->free;
        k->free = b;
        k->n_free++;
        pthread_mutex_unlock(&k->lock);
        return;
    }
    slab_bin *bin = &tc->bins[c];
    b->next = bin->head;
    bin->head = b;
    if (++bin->count > bin->limit) bin_overflow(s, tc, c);
    tc_count_free(tc, size);
}

/* The fast path: a small block, this thread's cache known, the bin below its limit. */
void slab_free(slab *s, void *p, size_t size) {
    if (!p) return;
    if (size == 0) size = 1;
    size_t off = (size_t)((uintptr_t)p - (uintptr_t)s->base);
    slab_tcache *tc = slab_tl.id == s->id ? slab_tl.tc : NULL;
    if (__builtin_expect(off >= s->region || tc == NULL, 0)) {
        slab_free_slow(s, p, size, off);
        return;
    }
    if (BENCH_ALLOC_DEBUG) check_small_free(s, p, size, off);
    unsigned c = s->class_of[off >> SLAB_SHIFT] - 1u;
    slab_block *b = p;
    if (BENCH_ALLOC_DEBUG) ((uint64_t *)b)[1] = freed_tag(b);
    slab_bin *bin = &tc->bins[c];
    b->next = bin->head;
    bin->head = b;
    tc_count_free(tc, size);
    if (__builtin_expect(++bin->count > bin->limit, 0)) bin_overflow(s, tc, c);   /* a tail call: no frame here */
}

int slab_owns(slab *s, const void *p) {
    size_t off = (size_t)((uintptr_t)p - (uintptr_t)s->base);
    if (off < s->region) return s->class_of[off >> SLAB_SHIFT] != 0;
    return large_is_live(s, p);
}

/* ---------------------------------------------------------------- checker, stats */

/* Walks one free list: every block in a slab of class c, at a block boundary, seen once. */
static int check_list(slab *s, unsigned c, const slab_block *b, size_t expect, uint8_t *seen,
                      const char *what, char *err, size_t errlen) {
    size_t n = 0, cs = class_size[c];
    size_t used = atomic_load(&s->slabs_used);
    for (; b; b = b->next, n++) {
        size_t off = (size_t)((uintptr_t)b - (uintptr_t)s->base);
        if (off >= used << SLAB_SHIFT)
            return snprintf(err, errlen, "slab: %s of class %zu: block %p outside the slabs in use", what, cs, (const void *)b), -1;
        if (s->class_of[off >> SLAB_SHIFT] != c + 1)
            return snprintf(err, errlen, "slab: %s of class %zu: block %p in a slab of another class", what, cs, (const void *)b), -1;
        if ((off & (SLAB_BYTES - 1)) % cs)
            return snprintf(err, errlen, "slab: %s of class %zu: block %p not at a block boundary", what, cs, (const void *)b), -1;
        size_t bit = off >> 4;   /* every block start is a multiple of 16 */
        if (seen[bit >> 3] & (1u << (bit & 7)))
            return snprintf(err, errlen, "slab: %s of class %zu: block %p is free twice", what, cs, (const void *)b), -1;
        seen[bit >> 3] |= (uint8_t)(1u << (bit & 7));
        if (n > expect) break;
    }
    if (n != expect)
        return snprintf(err, errlen, "slab: %s of class %zu: %zu blocks listed, %zu counted", what, cs, n, expect), -1;
    return 0;
}

int slab_check(slab *s, char *err, size_t errlen) {
    if (!s) return 0;
    size_t used = atomic_load(&s->slabs_used);
    if (used > s->n_slabs) return snprintf(err, errlen, "slab: %zu slabs used of %zu", used, s->n_slabs), -1;
    uint8_t *seen = calloc((used << SLAB_SHIFT) / 16 / 8 + 1, 1);
    if (!seen) return snprintf(err, errlen, "slab: check: out of memory"), -1;
    int rc = 0;
    pthread_mutex_lock(&s->reg_lock);
    for (unsigned c = 0; c < SLAB_NCLASS && !rc; c++) {
        slab_central *k = &s->central[c];
        pthread_mutex_lock(&k->lock);
        size_t free_blocks = k->n_free;
        rc = check_list(s, c, k->free, k->n_free, seen, "central list", err, errlen);
        for (slab_tcache *tc = s->caches; tc && !rc; tc = tc->next) {
            const slab_bin *bin = &tc->bins[c];
            if (bin->limit < 2 * class_batch[c] || bin->limit > class_bin_cap[c] || bin->count > bin->limit) {
                rc = (snprintf(err, errlen, "slab: class %zu: bin holds %u, limit %u outside [%u, %u]", class_size[c],
                               bin->count, bin->limit, 2 * class_batch[c], class_bin_cap[c]), -1);
                break;
            }
            rc = check_list(s, c, bin->head, bin->count, seen, "thread cache", err, errlen);
            free_blocks += tc->bins[c].count;
        }
        if (!rc && free_blocks > k->carved)
            rc = (snprintf(err, errlen, "slab: class %zu: %zu free blocks but %zu carved", class_size[c], free_blocks, k->carved), -1);
        pthread_mutex_unlock(&k->lock);
    }
    pthread_mutex_unlock(&s->reg_lock);
    free(seen);
    if (rc) return rc;
    pthread_mutex_lock(&s->large_lock);
    for (large_hdr *h = s->large_live; h && !rc; h = h->next)
        if (h->magic != LARGE_MAGIC || (char *)h < (char *)h->map || (char *)(h + 1) + h->size > (char *)h->map + h->map_len)
            rc = (snprintf(err, errlen, "slab: large block %p: header damaged", (void *)(h + 1)), -1);
    pthread_mutex_unlock(&s->large_lock);
    return rc;
}

void slab_get_stats(slab *s, alloc_stats *out) {
    memset(out, 0, sizeof(*out));
#if BENCH_ALLOC_STATS
    pthread_mutex_lock(&s->reg_lock);
    *out = s->retired;
    int64_t live = (int64_t)s->retired.bytes_live, peak = s->retired_peak;
    for (slab_tcache *tc = s->caches; tc; tc = tc->next) {
        out->allocs += atomic_load_explicit(&tc->st.allocs, memory_order_relaxed);
        out->frees += atomic_load_explicit(&tc->st.frees, memory_order_relaxed);
        out->large_allocs += atomic_load_explicit(&tc->st.large_allocs, memory_order_relaxed);
        out->failed += atomic_load_explicit(&tc->st.failed, memory_order_relaxed);
        live += atomic_load_explicit(&tc->st.live, memory_order_relaxed);
        peak += atomic_load_explicit(&tc->st.peak, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->reg_lock);
    out->bytes_live = live > 0 ? (uint64_t)live : 0;
    out->bytes_peak = (uint64_t)(peak > live ? peak : live);
    out->bytes_reserved = (uint64_t)atomic_load(&s->slabs_used) * SLAB_BYTES + atomic_load(&s->large_reserved);
#else
    (void)s;
#endif
}

void slab_get_trips(slab *s, uint64_t *refills, uint64_t *flushes) {
    *refills = *flushes = 0;
#if BENCH_ALLOC_STATS
    pthread_mutex_lock(&s->reg_lock);
    *refills = s->retired_refills;
    *flushes = s->retired_flushes;
    for (slab_tcache *tc = s->caches; tc; tc = tc->next) {
        *refills += atomic_load_explicit(&tc->st.refills, memory_order_relaxed);
        *flushes += atomic_load_explicit(&tc->st.flushes, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->reg_lock);
#else
    (void)s;
#endif
}
