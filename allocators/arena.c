/* arena: bump allocation over mmap'd chunks. See arena.h for the invariants. */
#include "allocators/arena.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct arena_chunk {
    struct arena_chunk *next;
    size_t size;   /* B, whole mapping including this header */
    size_t top;    /* offset of the first free byte; only current for chunks before cur */
};

/* Header rounded to 64 so the first block of a chunk is cache-line aligned. */
#define ARENA_HDR ((sizeof(arena_chunk) + 63) & ~(size_t)63)
#define ARENA_DEFAULT_CHUNK ((size_t)1 << 20)

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static arena_chunk *chunk_map(arena *a, size_t size) {
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    arena_chunk *c = m;
    c->next = NULL;
    c->size = size;
    c->top = ARENA_HDR;
    ALLOC_POISON((char *)c + ARENA_HDR, size - ARENA_HDR);
    a->n_chunks++;
    ALLOC_STAT(a->st.bytes_reserved += size);
    return c;
}

static void enter_chunk(arena *a, arena_chunk *c) {
    a->cur = c;
    a->ptr = (char *)c + ARENA_HDR;
    a->end = (char *)c + c->size;
}

arena *arena_create(size_t chunk_size, int grow) {
    size_t pg = page_size();
    if (chunk_size == 0) chunk_size = ARENA_DEFAULT_CHUNK;
    if (chunk_size < 2 * ARENA_HDR) chunk_size = 2 * ARENA_HDR;
    if (chunk_size > SIZE_MAX - pg) return NULL;
    chunk_size = alloc_align_up(chunk_size, pg);
    arena *a = calloc(1, sizeof(*a));
    if (!a) return NULL;
    a->chunk_size = chunk_size;
    a->grow = grow != 0;
    a->first = chunk_map(a, chunk_size);
    if (!a->first) goto err;
    enter_chunk(a, a->first);
    a->first_data = a->ptr;
    a->first_end = a->end;
    return a;
err:
    free(a);
    return NULL;
}

void arena_destroy(arena *a) {
    if (!a) return;
    for (arena_chunk *c = a->first, *n; c; c = n) {
        n = c->next;
        ALLOC_UNPOISON(c, c->size);
        munmap(c, c->size);
    }
    free(a);
}

/* Brings st.bytes_peak up to date before bytes_live drops or is read (see "peak" in arena.h). */
static inline void settle_peak(arena *a) {
    ALLOC_STAT(if (a->st.bytes_live > a->st.bytes_peak) a->st.bytes_peak = a->st.bytes_live);
    (void)a;
}

/* cur is full: takes the first later chunk the request fits in (chunks skipped on the
 * way stay empty until the next reset), else maps one; NULL when that fails. */
static void *find_chunk(arena *a, size_t size, size_t align) {
    a->cur->top = (size_t)(a->ptr - (char *)a->cur);
    for (arena_chunk *c = a->cur->next; c; c = c->next) {
        uintptr_t p = alloc_align_up((uintptr_t)c + ARENA_HDR, align);
        if (p <= (uintptr_t)c + c->size && size <= (uintptr_t)c + c->size - p) {
            enter_chunk(a, c);
            return (void *)p;
        }
        c->top = ARENA_HDR;
    }
    if (!a->grow) return NULL;
    /* Big enough for this request whatever the alignment: the block starts at most
     * align-1 bytes after the header, and mmap gives page alignment. */
    size_t pg = page_size();
    if (size > SIZE_MAX - ARENA_HDR - align - pg) return NULL;
    size_t need = alloc_align_up(ARENA_HDR + (align - 1) + size, pg);
    arena_chunk *c = chunk_map(a, need > a->chunk_size ? need : a->chunk_size);
    if (!c) return NULL;
    ALLOC_STAT(if (need > a->chunk_size) a->st.large_allocs++);
    c->next = a->cur->next;
    a->cur->next = c;
    enter_chunk(a, c);
    return (void *)alloc_align_up((uintptr_t)a->ptr, align);
}

/* arena_alloc's slow path (arena.h): size and align as the fast path normalised them. */
void *arena_alloc_slow(arena *a, size_t size, size_t align) {
    char *p = find_chunk(a, size, align);
    if (!p) {
        ALLOC_STAT(a->st.failed++);
        return NULL;
    }
    a->ptr = p + size;
    ALLOC_UNPOISON(p, size);
    ALLOC_STAT(a->st.allocs++; a->st.bytes_live += size);
    return p;
}

arena_pos arena_mark(const arena *a) {
    arena_pos m = {.chunk = a->cur, .top = (size_t)(a->ptr - (char *)a->cur), .bytes_live = 0};
#if BENCH_ALLOC_STATS
    m.bytes_live = a->st.bytes_live;
#endif
    return m;
}

/* Under ASan, poisons everything after (c, top) so a use of a dropped block is caught. */
static void poison_after(arena *a, arena_chunk *c, size_t top) {
#if defined(__SANITIZE_ADDRESS__)
    ALLOC_POISON((char *)c + top, c->size - top);
    for (c = c->next; c; c = c->next) ALLOC_POISON((char *)c + ARENA_HDR, c->size - ARENA_HDR);
#else
    (void)a, (void)c, (void)top;
#endif
}

void arena_rollback(arena *a, arena_pos m) {
    arena_chunk *c = m.chunk;
    if (BENCH_ALLOC_DEBUG) {
        /* The mark must name cur or a chunk before it, at or below where we are now. */
        arena_chunk *it = a->first;
        while (it && it != c && it != a->cur) it = it->next;
        if (it != c)
            alloc_misuse("arena", "rollback to a mark that is not from this arena or lies after the current position");
        if (m.top < ARENA_HDR || m.top > c->size ||
            (c == a->cur && (char *)c + m.top > a->ptr))
            alloc_misuse("arena", "rollback to a mark ahead of the current position (taken before a reset or a rollback?)");
    }
    enter_chunk(a, c);
    a->ptr = (char *)c + m.top;
    poison_after(a, c, m.top);
    settle_peak(a);
#if BENCH_ALLOC_STATS
    /* frees counts nothing here: a rollback drops blocks, not frees them one by one. */
    a->st.bytes_live = m.bytes_live;
#endif
}

/* arena_reset under ASan (arena.h): the same, and every chunk poisoned again. */
void arena_reset_poison(arena *a) {
    enter_chunk(a, a->first);
    poison_after(a, a->first, ARENA_HDR);
}

int arena_owns(const arena *a, const void *p) {
    const char *q = p;
    for (const arena_chunk *c = a->first; c; c = c->next) {
        const char *lo = (const char *)c + ARENA_HDR;
        const char *hi = c == a->cur ? a->ptr : (const char *)c + c->top;
        if (q >= lo && q < hi) return 1;
        if (c == a->cur) break;
    }
    return 0;
}

void arena_verify_free_debug(const arena *a, const void *p, size_t size) {
    if (!arena_owns(a, p))
        alloc_misuse("arena", "free of %p (%zu B): not a live block of this arena "
                     "(another allocator's pointer, or used after reset/rollback)", p, size);
    if (size && !arena_owns(a, (const char *)p + size - 1))
        alloc_misuse("arena", "free of %p with size %zu: the block does not extend that far", p, size);
}

int arena_check(const arena *a, char *err, size_t errlen) {
    if (!a) return 0;
    int seen_cur = 0;
    size_t n = 0;
    uint64_t reserved = 0;
    for (const arena_chunk *c = a->first; c; c = c->next, n++) {
        reserved += c->size;
        if (c->size < 2 * ARENA_HDR || (uintptr_t)c % page_size())
            return snprintf(err, errlen, "arena: chunk %zu: bad size %zu or address %p", n, c->size, (void *)c), -1;
        if (!seen_cur && (c->top < ARENA_HDR || c->top > c->size))
            return snprintf(err, errlen, "arena: chunk %zu: top %zu outside [%zu, %zu]", n, c->top, (size_t)ARENA_HDR, c->size), -1;
        if (c == a->cur) {
            seen_cur = 1;
            if (a->ptr < (char *)c + ARENA_HDR || a->ptr > (char *)c + c->size || a->end != (char *)c + c->size)
                return snprintf(err, errlen, "arena: ptr/end outside the current chunk"), -1;
        }
    }
    if (!seen_cur) return snprintf(err, errlen, "arena: current chunk not in the list"), -1;
    if (n != a->n_chunks) return snprintf(err, errlen, "arena: %zu chunks listed, %zu counted", n, a->n_chunks), -1;
    if (a->first_data != (char *)a->first + ARENA_HDR || a->first_end != (char *)a->first + a->first->size)
        return snprintf(err, errlen, "arena: reset position is not the first chunk's data"), -1;
#if BENCH_ALLOC_STATS
    if (reserved != a->st.bytes_reserved)
        return snprintf(err, errlen, "arena: reserved %llu != sum of chunks %llu",
                        (unsigned long long)a->st.bytes_reserved, (unsigned long long)reserved), -1;
#else
    (void)reserved;
#endif
    return 0;
}

void arena_get_stats(const arena *a, alloc_stats *out) {
    memset(out, 0, sizeof(*out));
#if BENCH_ALLOC_STATS
    *out = a->st;
    if (out->bytes_live > out->bytes_peak) out->bytes_peak = out->bytes_live;   /* the lagging peak */
#else
    (void)a;
#endif
}

size_t arena_chunk_count(const arena *a) { return a->n_chunks; }
