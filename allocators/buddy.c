/* buddy: binary buddy allocator over one reserved region. See buddy.h for the invariants. */
#include "allocators/buddy.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BUDDY_DEFAULT_REGION ((size_t)1 << 30)
#define BUDDY_DEFAULT_MIN ((size_t)64)
#define BUDDY_MAX_REGION ((size_t)1 << 46)
#define BUDDY_CACHE_MAX_BLOCK ((size_t)1 << 20)   /* B; larger blocks are never held back */
#define BUDDY_CACHE_MAX 64

typedef struct buddy_node { struct buddy_node *next, *prev; } buddy_node;

struct buddy {
    char *base;              /* region start, aligned to region */
    size_t region;           /* B, 2^R */
    unsigned min_shift;      /* log2(min_block) */
    unsigned max_order;      /* K */
    uint64_t nonempty;       /* bit k: free list k non-empty */
    buddy_node *lists[64];   /* (K+1) free lists */
    size_t list_len[64];     /* (K+1) */
    uint64_t *bits;          /* free bits, then alloc bits: each 2^(K+1) bits, orders packed */
    size_t bits_words;       /* uint64 words per bitmap */
    void *bits_map; size_t bits_len;
    /* Freed blocks held back from coalescing, per order, newest last: a block freed and
     * wanted again at once (the common case) costs no split/merge chain. Their alloc
     * bits stay set; buddy_flush frees them for real. */
    void *cache[64][BUDDY_CACHE_MAX];
    unsigned cache_n[64];
    unsigned cache_cap;       /* blocks per order, <= BUDDY_CACHE_MAX */
    unsigned cache_orders;    /* orders 0 .. cache_orders-1 are cached */
    int locked;
    pthread_mutex_t lock;
    size_t high_water;       /* B from base: end of the highest block handed out */
#if BENCH_ALLOC_STATS
    alloc_stats st;
#endif
};

/* Bit index of (k, i): order k's bits start after those of orders 0..k-1, which hold
 * 2^K + 2^(K-1) + ... + 2^(K-k+1) = 2^(K+1) - 2^(K-k+1) bits. */
static inline size_t bit_index(const buddy *b, unsigned k, size_t i) {
    return ((size_t)2 << b->max_order) - ((size_t)2 << (b->max_order - k)) + i;
}
static inline uint64_t *fbits(const buddy *b) { return b->bits; }
static inline uint64_t *abits(const buddy *b) { return b->bits + b->bits_words; }
static inline int bit_get(const uint64_t *m, size_t i) { return (int)((m[i >> 6] >> (i & 63)) & 1); }
static inline void bit_set(uint64_t *m, size_t i) { m[i >> 6] |= (uint64_t)1 << (i & 63); }
static inline void bit_clr(uint64_t *m, size_t i) { m[i >> 6] &= ~((uint64_t)1 << (i & 63)); }

static inline void list_push(buddy *b, unsigned k, size_t off) {
    buddy_node *n = (buddy_node *)(b->base + off);
    n->prev = NULL;
    n->next = b->lists[k];
    if (n->next) n->next->prev = n;
    b->lists[k] = n;
    b->list_len[k]++;
    b->nonempty |= (uint64_t)1 << k;
    bit_set(fbits(b), bit_index(b, k, off >> (b->min_shift + k)));
}

static inline void list_remove(buddy *b, unsigned k, buddy_node *n) {
    if (n->prev) n->prev->next = n->next; else b->lists[k] = n->next;
    if (n->next) n->next->prev = n->prev;
    if (--b->list_len[k] == 0) b->nonempty &= ~((uint64_t)1 << k);
    size_t off = (size_t)((char *)n - b->base);
    bit_clr(fbits(b), bit_index(b, k, off >> (b->min_shift + k)));
}

buddy *buddy_create(size_t region, size_t min_block, unsigned cache, int locked) {
    if (region == 0) region = BUDDY_DEFAULT_REGION;
    if (min_block == 0) min_block = BUDDY_DEFAULT_MIN;
    if (region > BUDDY_MAX_REGION || !alloc_is_pow2(min_block) || min_block < sizeof(buddy_node)) return NULL;
    region = (size_t)1 << alloc_log2_up(region);
    if (region < min_block) region = min_block;
    buddy *b = calloc(1, sizeof(*b));
    if (!b) return NULL;
    b->region = region;
    b->min_shift = alloc_log2(min_block);
    b->max_order = alloc_log2(region) - b->min_shift;
    b->locked = locked != 0;
    b->cache_cap = cache > BUDDY_CACHE_MAX ? BUDDY_CACHE_MAX : cache;
    for (unsigned k = 0; k <= b->max_order && ((size_t)1 << (b->min_shift + k)) <= BUDDY_CACHE_MAX_BLOCK; k++)
        b->cache_orders = k + 1;
    if (b->locked && pthread_mutex_init(&b->lock, NULL)) { free(b); return NULL; }
    /* Reserve twice the region and keep the aligned half, so every block is aligned to its size. */
    size_t len = 2 * region;
    char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) goto err;
    b->base = (char *)alloc_align_up((uintptr_t)raw, region);
    if (b->base > raw) munmap(raw, (size_t)(b->base - raw));
    if (raw + len > b->base + region) munmap(b->base + region, (size_t)(raw + len - (b->base + region)));
    size_t nbits = (size_t)2 << b->max_order;
    b->bits_words = (nbits + 63) / 64;
    b->bits_len = alloc_align_up(2 * b->bits_words * sizeof(uint64_t), 4096);
    b->bits_map = mmap(NULL, b->bits_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b->bits_map == MAP_FAILED) { b->bits_map = NULL; goto err; }
    b->bits = b->bits_map;
    list_push(b, b->max_order, 0);
    return b;
err:
    buddy_destroy(b);
    return NULL;
}

void buddy_destroy(buddy *b) {
    if (!b) return;
    if (b->base) munmap(b->base, b->region);
    if (b->bits_map) munmap(b->bits_map, b->bits_len);
    if (b->locked) pthread_mutex_destroy(&b->lock);
    free(b);
}

static void release(buddy *b, unsigned k, size_t off);

static inline void lock(buddy *b) { if (b->locked) pthread_mutex_lock(&b->lock); }
static inline void unlock(buddy *b) { if (b->locked) pthread_mutex_unlock(&b->lock); }

void *buddy_alloc(buddy *b, size_t size, size_t align) {
    if (size == 0) size = 1;
    if (align == 0) align = 16;
    if (BENCH_ALLOC_DEBUG && !alloc_is_pow2(align)) alloc_misuse("buddy", "alignment %zu is not a power of two", align);
    size_t need = size > align ? size : align;
    unsigned want = alloc_log2_up(need);
    want = want > b->min_shift ? want - b->min_shift : 0;
    lock(b);
    if (want < b->cache_orders && b->cache_n[want]) {
        void *p = b->cache[want][--b->cache_n[want]];
        ALLOC_STAT_ALLOC(&b->st, size);
        unlock(b);
        return p;
    }
    uint64_t avail = want <= b->max_order ? b->nonempty >> want : 0;
    if (!avail) {
        ALLOC_STAT(b->st.failed++);
        unlock(b);
        return NULL;
    }
    unsigned k = want + (unsigned)__builtin_ctzll(avail);
    buddy_node *n = b->lists[k];
    list_remove(b, k, n);
    size_t off = (size_t)((char *)n - b->base);
    /* Split down to the wanted order: each upper half becomes a free block one order lower. */
    while (k > want) {
        k--;
        list_push(b, k, off + ((size_t)1 << (b->min_shift + k)));
    }
    bit_set(abits(b), bit_index(b, k, off >> (b->min_shift + k)));
    size_t end = off + ((size_t)1 << (b->min_shift + k));
    if (end > b->high_water) b->high_water = end;
    ALLOC_STAT_ALLOC(&b->st, size);
    unlock(b);
    return n;
}

void buddy_free(buddy *b, void *p, size_t size) {
    if (!p) return;
    if (size == 0) size = 1;
    size_t off = (size_t)((uintptr_t)p - (uintptr_t)b->base);
    if (off >= b->region) {
        if (BENCH_ALLOC_DEBUG)
            alloc_misuse("buddy", "free of %p (%zu B): outside the region [%p, %p) (a pointer from another allocator?)",
                         p, size, (void *)b->base, (void *)(b->base + b->region));
        return;
    }
    lock(b);
    unsigned k = alloc_log2_up(size);
    k = k > b->min_shift ? k - b->min_shift : 0;
    /* The block's order is the lowest at which an allocated block starts here; alignment
     * may have made it larger than the size asks for. */
    while (k <= b->max_order && !((off & (((size_t)1 << (b->min_shift + k)) - 1)) == 0 &&
                                  bit_get(abits(b), bit_index(b, k, off >> (b->min_shift + k)))))
        k++;
    if (k > b->max_order || (off & (((size_t)1 << (b->min_shift + k)) - 1))) {
        unlock(b);
        if (BENCH_ALLOC_DEBUG)
            alloc_misuse("buddy", "free of %p (%zu B): no allocated block starts there (double free, "
                         "wrong size, or an interior pointer)", p, size);
        return;
    }
    if (k < b->cache_orders) {
        if (BENCH_ALLOC_DEBUG)
            for (unsigned i = 0; i < b->cache_n[k]; i++)
                if (b->cache[k][i] == p) {
                    unlock(b);
                    alloc_misuse("buddy", "double free of %p (%zu B)", p, size);
                }
        if (b->cache_n[k] < b->cache_cap) {
            b->cache[k][b->cache_n[k]++] = p;
            ALLOC_STAT_FREE(&b->st, size);
            unlock(b);
            return;
        }
    }
    release(b, k, off);
    ALLOC_STAT_FREE(&b->st, size);
    unlock(b);
}

/* Gives block (k, off) back for real: clears its alloc bit and merges it with free buddies. */
static void release(buddy *b, unsigned k, size_t off) {
    bit_clr(abits(b), bit_index(b, k, off >> (b->min_shift + k)));
    /* Merge with the buddy while it is free as a whole at the same order. */
    while (k < b->max_order) {
        size_t bud = off ^ ((size_t)1 << (b->min_shift + k));
        if (!bit_get(fbits(b), bit_index(b, k, bud >> (b->min_shift + k)))) break;
        list_remove(b, k, (buddy_node *)(b->base + bud));
        off &= ~((size_t)1 << (b->min_shift + k));
        k++;
    }
    list_push(b, k, off);
}

void buddy_flush(buddy *b) {
    lock(b);
    for (unsigned k = 0; k < b->cache_orders; k++)
        while (b->cache_n[k]) release(b, k, (size_t)((char *)b->cache[k][--b->cache_n[k]] - b->base));
    unlock(b);
}

int buddy_owns(const buddy *b, const void *p) {
    return (size_t)((uintptr_t)p - (uintptr_t)b->base) < b->region;
}
size_t buddy_region(const buddy *b) { return b->region; }
size_t buddy_min_block(const buddy *b) { return (size_t)1 << b->min_shift; }
unsigned buddy_max_order(const buddy *b) { return b->max_order; }

long buddy_free_count(buddy *b, unsigned k) {
    if (k > b->max_order) return -1;
    lock(b);
    long n = (long)b->list_len[k];
    unlock(b);
    return n;
}

/* Counts set bits of order k in bitmap m. */
static size_t count_order(const buddy *b, const uint64_t *m, unsigned k) {
    size_t lo = bit_index(b, k, 0), hi = lo + ((size_t)1 << (b->max_order - k)), n = 0;
    for (size_t i = lo; i < hi;) {
        if ((i & 63) == 0 && hi - i >= 64) {
            n += (size_t)__builtin_popcountll(m[i >> 6]);
            i += 64;
        } else {
            n += (size_t)bit_get(m, i);
            i++;
        }
    }
    return n;
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); rc = -1; goto out; } while (0)

int buddy_check(buddy *b, char *err, size_t errlen) {
    if (!b) return 0;
    int rc = 0;
    lock(b);
    uint64_t free_bytes = 0, alloc_bytes = 0;   /* region <= 2^46: no overflow */
    for (unsigned k = 0; k <= b->max_order; k++) {
        size_t bs = (size_t)1 << (b->min_shift + k), n = 0;
        const buddy_node *prev = NULL;
        for (const buddy_node *nd = b->lists[k]; nd; prev = nd, nd = nd->next, n++) {
            size_t off = (size_t)((const char *)nd - b->base);
            if (n > b->list_len[k]) FAIL("buddy: order %u: list longer than its count %zu (a cycle?)", k, b->list_len[k]);
            if (off >= b->region || off % bs) FAIL("buddy: order %u: free block at offset %zu not aligned to %zu", k, off, bs);
            if (nd->prev != prev) FAIL("buddy: order %u: broken back link at offset %zu", k, off);
            size_t i = off / bs;
            if (!bit_get(fbits(b), bit_index(b, k, i))) FAIL("buddy: order %u: listed block %zu has no free bit", k, i);
            if (k < b->max_order && bit_get(fbits(b), bit_index(b, k, i ^ 1)))
                FAIL("buddy: order %u: blocks %zu and %zu are free buddies, not merged", k, i, i ^ 1);
            if (bit_get(abits(b), bit_index(b, k, i))) FAIL("buddy: order %u: block %zu both free and allocated", k, i);
        }
        if (n != b->list_len[k]) FAIL("buddy: order %u: %zu listed, %zu counted", k, n, b->list_len[k]);
        if (!!(b->nonempty >> k & 1) != (n > 0)) FAIL("buddy: order %u: nonempty bit disagrees with the list", k);
        if (count_order(b, fbits(b), k) != n) FAIL("buddy: order %u: free bits disagree with the list", k);
        free_bytes += (uint64_t)n * bs;
        alloc_bytes += (uint64_t)count_order(b, abits(b), k) * bs;
    }
    for (unsigned k = 0; k < b->cache_orders; k++) {
        if (b->cache_n[k] > b->cache_cap) FAIL("buddy: order %u: %u cached blocks, cap %u", k, b->cache_n[k], b->cache_cap);
        for (unsigned i = 0; i < b->cache_n[k]; i++) {
            size_t off = (size_t)((char *)b->cache[k][i] - b->base), bs = (size_t)1 << (b->min_shift + k);
            if (off >= b->region || off % bs || !bit_get(abits(b), bit_index(b, k, off / bs)))
                FAIL("buddy: order %u: cached block at offset %zu is not an allocated block of that order", k, off);
            for (unsigned j = 0; j < i; j++)
                if (b->cache[k][j] == b->cache[k][i]) FAIL("buddy: order %u: block at offset %zu cached twice", k, off);
        }
    }
    if (free_bytes + alloc_bytes != b->region)
        FAIL("buddy: free %llu B + allocated %llu B != region %zu B",
             (unsigned long long)free_bytes, (unsigned long long)alloc_bytes, b->region);
#if BENCH_ALLOC_STATS
    if (b->st.bytes_live > alloc_bytes) FAIL("buddy: live bytes exceed the allocated blocks");
#endif
out:
    unlock(b);
    return rc;
}

void buddy_get_stats(buddy *b, alloc_stats *out) {
    memset(out, 0, sizeof(*out));
#if BENCH_ALLOC_STATS
    lock(b);
    *out = b->st;
    out->bytes_reserved = alloc_align_up(b->high_water, 4096);
    unlock(b);
#else
    (void)b;
#endif
}
