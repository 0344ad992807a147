/* kv "block": a paged cache as vLLM lays it out. One pool of fixed-size blocks
 * is allocated at start-up; each sequence holds a block table; attention reads
 * K/V through the table (common/kv_paged.c), with no gather-copy.
 *
 * Glossary:
 *   block    bs token rows, every layer, K and V (common/kv_paged.h)
 *   ref      the number of sequences whose table holds the block
 *   fill     the positions of the block that hold a token
 *   hashed   a full block registered in the prefix cache under the chain hash
 *            H(block j) = hash(H(block j-1), its bs token ids)
 *   cached   ref == 0 and hashed: kept for a future prefix hit, evicted LRU-first
 * Each block is in exactly one state:
 *   free (on the free stack)  |  in use (ref > 0)  |  cached (ref == 0, hashed, on the LRU list)
 * Invariants (checked after every release in debug builds):
 *   n_free + n_in_use + n_cached == n_blocks
 *   ref(b) == the number of tables holding b
 *   tokens_held == sum of fill over blocks not free
 *   waste = (n_in_use + n_cached) * bs - tokens_held <= (bs - 1) per sequence
 * Positions are appended, never rewritten: a write into a shared partial block
 * (after fork) first copies it (copy-on-write); full blocks are never written again. */
#include "common/kv_paged.h"
#include "engines/abi/alloc.h"

typedef struct block_opts {
    int64_t block_size;
    uint64_t pool_tokens, pool_bytes;
    int prefix_cache, touch;
} block_opts;

static const bench_option block_options[] = {
    BENCH_OPTION_INT(block_opts, block_size, "16", 1, 1 << 20, "tokens per block (at most the context)"),
    BENCH_OPTION_POOL(block_opts, pool_tokens, "0", "pool size in tokens, rounded up to whole blocks (0: max_seqs x the context in whole blocks)"),
    BENCH_OPTION_POOL(block_opts, pool_bytes, "0", "pool size in bytes, rounded down to whole blocks (0: use pool_tokens)"),
    BENCH_OPTION_BOOL(block_opts, prefix_cache, "1", "share full blocks between sequences with the same prefix (hash of prefix + block)"),
    BENCH_OPTION_BOOL(block_opts, touch, "1", "write every page of the pool at start-up"),
    BENCH_OPTION_END,
};

typedef struct blk {
    uint64_t hash;          /* chain hash, when hashed */
    int ref, fill, hashed;
    int hnext;              /* next block in the hash bucket, -1 */
    int prev, next;         /* LRU list links while cached, -1 */
} blk;

typedef struct bseq {
    int *table;             /* (max_blocks) block ids */
    int n_blocks;
    int len;                /* positions reserved */
    int stored;             /* positions every layer has stored */
    int *ids;               /* (max_pos) token ids told */
    int n_ids;              /* ids known for positions [0, n_ids) */
    int n_hashed;           /* leading full blocks whose chain hash is known */
    uint64_t last_hash;     /* chain hash of block n_hashed - 1; the seed when none */
} bseq;

typedef struct block_ctx {
    bench_kv_shape shape;
    const bench_host *host;
    int bs, n_blocks, max_blocks, cache;
    kvp_pool pool;          /* n_blocks * bs rows */
    blk *blocks;            /* (n_blocks) */
    int *block_ids;         /* (n_blocks, bs) token ids of hashed blocks, to confirm a hash hit */
    int *free_stack, n_free;
    int lru_head, lru_tail; /* least recently released cached block first */
    int *buckets, bucket_mask;
    bseq *seqs;             /* (max_seqs) */
    int *seq_mem;           /* backing of every table and ids array */
    float *scratch;         /* (n_threads, kvq_scores_per_task) attention scores */
    size_t scratch_bytes;
    int n_in_use, n_cached, peak_in_use;
    uint64_t tokens_held, peak_tokens_held, peak_waste_tokens;
    uint64_t cow_copies, prefix_hit_tokens, evictions, alloc_failures;
} block_ctx;

#define CHAIN_SEED 0x9e3779b97f4a7c15ull

/* ---- hashing and the prefix cache ---- */

static uint64_t chain_hash(uint64_t parent, const int *ids, int n) {
    uint64_t h = parent ^ 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)ids[i]) * 0x100000001b3ull;
    h ^= h >> 33; /* a final mix: FNV's low bits pick the bucket */
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static int hash_find(const block_ctx *c, uint64_t h, const int *ids) {
    for (int b = c->buckets[h & (uint64_t)c->bucket_mask]; b >= 0; b = c->blocks[b].hnext)
        if (c->blocks[b].hash == h && !memcmp(c->block_ids + (size_t)b * c->bs, ids, (size_t)c->bs * sizeof(int)))
            return b;
    return -1;
}

static void hash_insert(block_ctx *c, int b, uint64_t h, const int *ids) {
    int *bucket = &c->buckets[h & (uint64_t)c->bucket_mask];
    c->blocks[b].hash = h;
    c->blocks[b].hashed = 1;
    c->blocks[b].hnext = *bucket;
    *bucket = b;
    memcpy(c->block_ids + (size_t)b * c->bs, ids, (size_t)c->bs * sizeof(int));
}

static void hash_remove(block_ctx *c, int b) {
    int *link = &c->buckets[c->blocks[b].hash & (uint64_t)c->bucket_mask];
    while (*link != b) link = &c->blocks[*link].hnext;
    *link = c->blocks[b].hnext;
    c->blocks[b].hashed = 0;
    c->blocks[b].hnext = -1;
}

static void lru_remove(block_ctx *c, int b) {
    blk *x = &c->blocks[b];
    if (x->prev >= 0) c->blocks[x->prev].next = x->next; else c->lru_head = x->next;
    if (x->next >= 0) c->blocks[x->next].prev = x->prev; else c->lru_tail = x->prev;
    x->prev = x->next = -1;
}

static void lru_push(block_ctx *c, int b) {
    blk *x = &c->blocks[b];
    x->prev = c->lru_tail;
    x->next = -1;
    if (c->lru_tail >= 0) c->blocks[c->lru_tail].next = b; else c->lru_head = b;
    c->lru_tail = b;
}

/* ---- the block allocator ---- */

/* A block with ref 1: from the free stack, else the least recently used cached one. -1: pool full. */
static int blk_alloc(block_ctx *c) {
    int b;
    if (c->n_free > 0) {
        b = c->free_stack[--c->n_free];
    } else if (c->lru_head >= 0) {
        b = c->lru_head;
        lru_remove(c, b);
        hash_remove(c, b);
        c->n_cached--;
        c->tokens_held -= (uint64_t)c->blocks[b].fill;
        c->evictions++;
    } else {
        c->alloc_failures++;
        return -1;
    }
    c->blocks[b] = (blk){.ref = 1, .hnext = -1, .prev = -1, .next = -1};
    if (++c->n_in_use > c->peak_in_use) c->peak_in_use = c->n_in_use;
    return b;
}

static void blk_ref(block_ctx *c, int b) {
    blk *x = &c->blocks[b];
    if (x->ref++ == 0) { /* a cached block comes back into use */
        lru_remove(c, b);
        c->n_cached--;
        if (++c->n_in_use > c->peak_in_use) c->peak_in_use = c->n_in_use;
    }
}

static void blk_unref(block_ctx *c, int b) {
    blk *x = &c->blocks[b];
    if (--x->ref > 0) return;
    c->n_in_use--;
    if (x->hashed) {
        lru_push(c, b);
        c->n_cached++;
    } else {
        c->tokens_held -= (uint64_t)x->fill;
        x->fill = 0;
        c->free_stack[c->n_free++] = b;
    }
}

static void set_fill(block_ctx *c, int b, int fill) {
    c->tokens_held += (uint64_t)fill - (uint64_t)c->blocks[b].fill;
    c->blocks[b].fill = fill;
}

static void note_peaks(block_ctx *c) {
    uint64_t waste = (uint64_t)(c->n_in_use + c->n_cached) * (uint64_t)c->bs - c->tokens_held;
    if (c->tokens_held > c->peak_tokens_held) c->peak_tokens_held = c->tokens_held;
    if (waste > c->peak_waste_tokens) c->peak_waste_tokens = waste;
}

#ifndef NDEBUG
/* The invariants of the glossary; aborts with the one that broke (a module bug). */
static void check_invariants(const block_ctx *c) {
    int *refs = calloc((size_t)c->n_blocks, sizeof(int));
    if (!refs) return;
    for (int s = 0; s < c->shape.max_seqs; s++)
        for (int j = 0; j < c->seqs[s].n_blocks; j++) refs[c->seqs[s].table[j]]++;
    int in_use = 0, cached = 0;
    uint64_t held = 0;
    const char *broken = NULL;
    for (int b = 0; b < c->n_blocks && !broken; b++) {
        const blk *x = &c->blocks[b];
        if (x->ref != refs[b]) broken = "ref == tables holding the block";
        in_use += x->ref > 0;
        cached += x->ref == 0 && x->hashed;
        if (x->ref > 0 || x->hashed) held += (uint64_t)x->fill;
    }
    if (!broken && c->n_free + in_use + cached != c->n_blocks) broken = "n_free + n_in_use + n_cached == n_blocks";
    if (!broken && (in_use != c->n_in_use || cached != c->n_cached)) broken = "counts of blocks in use and cached";
    if (!broken && held != c->tokens_held) broken = "tokens_held == sum of fill";
    free(refs);
    if (broken) { bench_logf(c->host, "kv block: invariant broken: %s", broken); abort(); }
}
#else
static void check_invariants(const block_ctx *c) { (void)c; }
#endif

/* ---- the module ---- */

static void block_destroy(void *ctx);

static int block_create(const bench_kv_shape *shape, const void *opts, const bench_host *host,
                        void **out, char *err, size_t errlen) {
    const block_opts *o = opts;
    int rc = kvq_check_shape(shape, KVP_CACHE_TYPES, "kv block", err, errlen);
    if (rc) return rc;
    block_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv block: out of memory");
    c->shape = *shape;
    c->host = host;
    c->lru_head = c->lru_tail = -1;
    c->cache = o->prefix_cache;
    uint64_t bs = (uint64_t)o->block_size, pool_tokens = o->pool_tokens, pool_bytes = o->pool_bytes;
    int touch = o->touch;
    rc = -BENCH_ERR_INVALID;
    if (bs > (uint64_t)shape->max_pos) {
        bench_errf(err, errlen, "kv block: option block_size=%llu: expected 1..%d (the context)", (unsigned long long)bs, shape->max_pos);
        goto err;
    }
    if (pool_tokens && pool_bytes) {
        bench_errf(err, errlen, "kv block: options pool_tokens and pool_bytes: give one of them, not both");
        goto err;
    }
    if (shape->pool_bytes && (pool_tokens || pool_bytes)) {
        bench_errf(err, errlen, "kv block: option %s and the host's KV budget both size the pool: give one of them",
                   pool_tokens ? "pool_tokens" : "pool_bytes");
        goto err;
    }
    if (shape->pool_bytes) pool_bytes = shape->pool_bytes;
    c->bs = (int)bs;
    size_t block_bytes = kvp_token_bytes(shape) * (size_t)bs;
    /* the default holds every sequence at full context, as prealloc does */
    uint64_t blocks = pool_bytes    ? pool_bytes / block_bytes
                    : pool_tokens   ? (pool_tokens + bs - 1) / bs
                                    : (uint64_t)shape->max_seqs * (((uint64_t)shape->max_pos + bs - 1) / bs);
    if (blocks < 1) {
        bench_errf(err, errlen, "kv block: a pool of %llu bytes holds no block of %zu bytes (raise pool_bytes or the budget, "
                   "or lower block_size)", (unsigned long long)pool_bytes, block_bytes);
        goto err;
    }
    if (blocks > (uint64_t)(INT32_MAX / 2) / bs) {
        bench_errf(err, errlen, "kv block: a pool of %llu blocks of %zu bytes is too large: at most %llu blocks",
                   (unsigned long long)blocks, block_bytes, (unsigned long long)((INT32_MAX / 2) / bs));
        goto err;
    }
    c->n_blocks = (int)blocks;
    c->max_blocks = (shape->max_pos + c->bs - 1) / c->bs;
    int nb = 1;
    while (nb < 2 * c->n_blocks) nb <<= 1;
    c->bucket_mask = nb - 1;
    c->blocks = calloc((size_t)c->n_blocks, sizeof(*c->blocks));
    c->block_ids = calloc((size_t)c->n_blocks * (size_t)c->bs, sizeof(int));
    c->free_stack = malloc((size_t)c->n_blocks * sizeof(int));
    c->buckets = malloc((size_t)nb * sizeof(int));
    c->seqs = calloc((size_t)shape->max_seqs, sizeof(*c->seqs));
    c->seq_mem = malloc((size_t)shape->max_seqs * ((size_t)c->max_blocks + (size_t)shape->max_pos) * sizeof(int));
    int tasks = host && host->n_threads > 0 ? host->n_threads : 1;
    c->scratch_bytes = (size_t)tasks * kvq_scores_per_task(shape) * sizeof(float);
    c->scratch = bench_alloc(host ? host->alloc : NULL, c->scratch_bytes, 64);
    if (!c->blocks || !c->block_ids || !c->free_stack || !c->buckets || !c->seqs || !c->seq_mem || !c->scratch) {
        rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv block: out of memory");
        goto err;
    }
    for (int i = 0; i < nb; i++) c->buckets[i] = -1;
    /* popped from the top: block 0 first */
    for (int b = 0; b < c->n_blocks; b++) {
        c->blocks[b] = (blk){.hnext = -1, .prev = -1, .next = -1};
        c->free_stack[b] = c->n_blocks - 1 - b;
    }
    c->n_free = c->n_blocks;
    for (int s = 0; s < shape->max_seqs; s++) {
        c->seqs[s].table = c->seq_mem + (size_t)s * ((size_t)c->max_blocks + (size_t)shape->max_pos);
        c->seqs[s].ids = c->seqs[s].table + c->max_blocks;
        c->seqs[s].last_hash = CHAIN_SEED;
    }
    if ((rc = kvp_pool_create(&c->pool, shape, c->n_blocks * c->bs, host, touch, "kv block", err, errlen))) goto err;
    *out = c;
    return 0;
err:
    block_destroy(c);
    return rc;
}

static int seq_ok(const block_ctx *c, int seq, char *err, size_t errlen) {
    if (seq < 0 || seq >= c->shape.max_seqs)
        return bench_errf(err, errlen, "kv block: sequence %d out of range 0..%d", seq, c->shape.max_seqs - 1);
    return 0;
}

static int block_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    block_ctx *c = ctx;
    if (seq_ok(c, seq, err, errlen)) return -1;
    if (n_pos > c->shape.max_pos)
        return bench_errf(err, errlen, "kv block: position %d is past the context of %d", n_pos - 1, c->shape.max_pos);
    bseq *q = &c->seqs[seq];
    if (n_pos <= q->len) return 0;
    /* copy-on-write: the next position lands in a partial block another sequence holds */
    if (q->len % c->bs && c->blocks[q->table[q->n_blocks - 1]].ref > 1) {
        int old = q->table[q->n_blocks - 1], nb = blk_alloc(c);
        if (nb < 0) return bench_errf(err, errlen, "kv block: the pool of %d blocks is full (copy-on-write of sequence %d)", c->n_blocks, seq);
        kvp_copy_rows(&c->shape, &c->pool, nb * c->bs, old * c->bs, c->blocks[old].fill);
        set_fill(c, nb, c->blocks[old].fill);
        blk_unref(c, old);
        q->table[q->n_blocks - 1] = nb;
        c->cow_copies++;
    }
    int need = (n_pos + c->bs - 1) / c->bs, had = q->n_blocks;
    while (q->n_blocks < need) {
        int b = blk_alloc(c);
        if (b < 0) {
            while (q->n_blocks > had) blk_unref(c, q->table[--q->n_blocks]);
            return bench_errf(err, errlen, "kv block: the pool of %d blocks is full (%d in use, sequence %d needs %d more)",
                              c->n_blocks, c->n_in_use, seq, need - had);
        }
        q->table[q->n_blocks++] = b;
    }
    for (int j = q->len / c->bs; j < need; j++) {
        int f = n_pos - j * c->bs;
        set_fill(c, q->table[j], f < c->bs ? f : c->bs);
    }
    q->len = n_pos;
    note_peaks(c);
    return 0;
}

static void block_tokens(void *ctx, int seq, int pos0, int n, const int *ids) {
    block_ctx *c = ctx;
    if (seq < 0 || seq >= c->shape.max_seqs || pos0 < 0 || n < 0 || pos0 + n > c->shape.max_pos) return;
    bseq *q = &c->seqs[seq];
    if (pos0 > q->n_ids) return; /* a gap: the chain hash cannot go past it */
    memcpy(q->ids + pos0, ids, (size_t)n * sizeof(int));
    if (pos0 + n > q->n_ids) q->n_ids = pos0 + n;
}

/* Registers the full blocks whose K/V and ids are all known. A block whose
 * hash another block already holds (two sequences computed the same prefix at
 * once) stays unregistered, as in vLLM. */
static void register_blocks(block_ctx *c, bseq *q) {
    int known = q->stored < q->n_ids ? q->stored : q->n_ids;
    while ((q->n_hashed + 1) * c->bs <= known) {
        int j = q->n_hashed, b = q->table[j];
        const int *ids = q->ids + (size_t)j * c->bs;
        uint64_t h = chain_hash(q->last_hash, ids, c->bs);
        if (c->cache && !c->blocks[b].hashed && hash_find(c, h, ids) < 0) hash_insert(c, b, h, ids);
        q->last_hash = h;
        q->n_hashed++;
    }
}

static void block_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    block_ctx *c = ctx;
    bseq *q = &c->seqs[seq];
    kvp_store(&c->shape, &c->pool, q->table, c->bs, layer, pos0, n, k, v);
    if (layer == c->shape.n_layers - 1) {
        if (pos0 + n > q->stored) q->stored = pos0 + n;
        register_blocks(c, q);
    }
}

static void block_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    block_ctx *c = ctx;
    kvp_attend(&c->shape, c->host, &c->pool, c->seqs[seq].table, c->bs, layer, pos0, n, q, out, c->scratch);
}

static void seq_clear(bseq *q) {
    int *table = q->table, *ids = q->ids;
    *q = (bseq){.table = table, .ids = ids, .last_hash = CHAIN_SEED};
}

/* Frees the tail first so that, among one sequence's cached blocks, the deepest
 * are evicted first (a prefix is worth nothing without its head). */
static void block_release(void *ctx, int seq) {
    block_ctx *c = ctx;
    if (seq < 0 || seq >= c->shape.max_seqs) return;
    bseq *q = &c->seqs[seq];
    for (int j = q->n_blocks - 1; j >= 0; j--) blk_unref(c, q->table[j]);
    seq_clear(q);
    check_invariants(c);
}

static int block_share_prefix(void *ctx, int seq, const int *ids, int n, char *err, size_t errlen) {
    block_ctx *c = ctx;
    if (seq_ok(c, seq, err, errlen)) return -1;
    bseq *q = &c->seqs[seq];
    if (q->len) return bench_errf(err, errlen, "kv block: share_prefix: sequence %d holds %d positions; expected an empty one", seq, q->len);
    if (n > c->shape.max_pos) n = c->shape.max_pos;
    if (!c->cache || n < 1) return 0;
    int j = 0, limit = (n - 1) / c->bs;
    uint64_t h = CHAIN_SEED;
    for (; j < limit; j++) {
        uint64_t hj = chain_hash(h, ids + (size_t)j * c->bs, c->bs);
        int b = hash_find(c, hj, ids + (size_t)j * c->bs);
        if (b < 0) break;
        blk_ref(c, b);
        q->table[j] = b;
        h = hj;
    }
    int m = j * c->bs;
    q->n_blocks = j;
    q->len = q->stored = q->n_ids = m;
    memcpy(q->ids, ids, (size_t)m * sizeof(int));
    q->n_hashed = j;
    q->last_hash = h;
    c->prefix_hit_tokens += (uint64_t)m;
    note_peaks(c);
    return m;
}

static int block_fork(void *ctx, int src, int dst, char *err, size_t errlen) {
    block_ctx *c = ctx;
    if (seq_ok(c, src, err, errlen) || seq_ok(c, dst, err, errlen)) return -1;
    if (src == dst) return bench_errf(err, errlen, "kv block: fork: source and destination are both sequence %d", src);
    bseq *s = &c->seqs[src], *d = &c->seqs[dst];
    if (d->len) return bench_errf(err, errlen, "kv block: fork: sequence %d holds %d positions; expected an empty one", dst, d->len);
    for (int j = 0; j < s->n_blocks; j++) blk_ref(c, s->table[j]);
    memcpy(d->table, s->table, (size_t)s->n_blocks * sizeof(int));
    memcpy(d->ids, s->ids, (size_t)s->n_ids * sizeof(int));
    int *table = d->table, *ids = d->ids;
    *d = *s;
    d->table = table;
    d->ids = ids;
    return 0;
}

static void block_memory(void *ctx, bench_kv_memory *m) {
    block_ctx *c = ctx;
    uint64_t tb = kvp_token_bytes(&c->shape);
    uint64_t waste = (uint64_t)(c->n_in_use + c->n_cached) * (uint64_t)c->bs - c->tokens_held;
    m->reserved = c->pool.bytes;
    m->used = c->tokens_held * tb;
    m->cached = (uint64_t)c->n_cached * (uint64_t)c->bs * tb;   /* full blocks no sequence holds: evictable */
    m->wasted = waste * tb;
}

static void block_counters(void *ctx, const bench_counter_sink *s) {
    block_ctx *c = ctx;
    double tb = (double)kvp_token_bytes(&c->shape);
    uint64_t waste = (uint64_t)(c->n_in_use + c->n_cached) * (uint64_t)c->bs - c->tokens_held;
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, 1);
    bench_emit_as(s, "grow_events", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, 0);
    bench_emit(s, "bytes_copied", "B", (double)c->cow_copies * (double)c->bs * tb);
    bench_emit(s, "bytes_reserved", "B", (double)c->pool.bytes);
    bench_emit(s, "bytes_used", "B", (double)c->tokens_held * tb);
    bench_emit(s, "bytes_wasted", "B", (double)waste * tb);
    /* held for prefix reuse only (full blocks no sequence holds): evictable */
    bench_emit(s, "bytes_cached", "B", (double)c->n_cached * (double)c->bs * tb);
    bench_emit(s, "bytes_used_peak", "B", (double)c->peak_tokens_held * tb);
    bench_emit(s, "bytes_wasted_peak", "B", (double)c->peak_waste_tokens * tb);
    bench_emit(s, "block_size", "tokens", c->bs);
    bench_emit(s, "blocks_total", "count", c->n_blocks);
    bench_emit(s, "blocks_in_use", "count", c->n_in_use);
    bench_emit(s, "blocks_cached", "count", c->n_cached);
    bench_emit(s, "blocks_free", "count", c->n_free);
    bench_emit(s, "blocks_peak", "count", c->peak_in_use);
    bench_emit(s, "cow_copies", "count", (double)c->cow_copies);
    bench_emit(s, "prefix_hit_tokens", "tokens", (double)c->prefix_hit_tokens);
    bench_emit(s, "evictions", "count", (double)c->evictions);
    bench_emit(s, "alloc_failures", "count", (double)c->alloc_failures);
}

static void block_destroy(void *ctx) {
    block_ctx *c = ctx;
    if (!c) return;
    kvp_pool_destroy(&c->pool, c->host);
    bench_free(c->host ? c->host->alloc : NULL, c->scratch, c->scratch_bytes);
    free(c->blocks);
    free(c->block_ids);
    free(c->free_stack);
    free(c->buckets);
    free(c->seqs);
    free(c->seq_mem);
    free(c);
}

static const struct bench_kv_iface block_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .cache_types = KVP_CACHE_TYPES,
    .create = block_create,
    .reserve = block_reserve,
    .store = block_store,
    .attend = block_attend,
    .release = block_release,
    .memory = block_memory,
    .counters = block_counters,
    .destroy = block_destroy,
    .tokens = block_tokens,
    .share_prefix = block_share_prefix,
    .fork = block_fork,
};

static const bench_module block_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "kv",
    .name = "block",
    .summary = "paged cache: fixed-size blocks, block tables, prefix caching by block hash, copy-on-write (vLLM style)",
    .devices = KVP_DEVICE,
    .score = kvp_score,
    .caps = BENCH_CAP_KV_SHARED_POOL | BENCH_CAP_KV_PREFIX_SHARE | BENCH_CAP_KV_FORK,
    .options = block_options,
    .opts_size = sizeof(block_opts),
    .iface = &block_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &block_module; }
