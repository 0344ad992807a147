/* kv "token": one slot per token, as SGLang's TokenToKVPool lays it out. A flat
 * pool of token slots with a free-slot stack (O(1) allocate and free), a
 * request-to-slots map per sequence, attention through the slot indices
 * (common/kv_paged.c with blocks of one token), and prefix sharing through a
 * radix tree over token ids.
 *
 * Glossary:
 *   slot     one token row, every layer, K and V
 *   private  a slot only its sequence knows (not in the tree)
 *   node     a radix tree edge: a run of token ids and the slots holding them
 *   lock     the number of live sequences whose prefix runs through a node;
 *            an unlocked leaf is evictable, least recently used first
 * Every slot is in exactly one place: the free stack, one sequence's private
 * positions [n_tree, len), or one tree node. Invariant (checked after every release
 * in debug builds): n_free + sum(len - n_tree) + sum(node len) == n_slots.
 * A sequence's positions [0, n_tree) are tree slots on the path to its locked node.
 * Waste is 0 by construction: a slot is taken for a position only when it is reserved. */
#include "common/kv_paged.h"
#include "engines/abi/alloc.h"

typedef struct token_opts {
    uint64_t pool_tokens, pool_bytes;
    int prefix_cache, touch;
} token_opts;

static const bench_option token_options[] = {
    BENCH_OPTION_POOL(token_opts, pool_tokens, "0", "pool size in token slots (0: max_seqs x context)"),
    BENCH_OPTION_POOL(token_opts, pool_bytes, "0", "pool size in bytes, rounded down to whole slots (0: use pool_tokens)"),
    BENCH_OPTION_BOOL(token_opts, prefix_cache, "1", "keep finished prefixes in a radix tree and share them"),
    BENCH_OPTION_BOOL(token_opts, touch, "1", "write every page of the pool at start-up"),
    BENCH_OPTION_END,
};

typedef struct rnode {
    struct rnode *parent, *child, *next;    /* first child, next sibling */
    int *ids, *slots;                       /* (len) the edge's token ids and their slots */
    int len;
    int lock;
    uint64_t last_use;
} rnode;

typedef struct tseq {
    int *slots;             /* (max_pos) slot of each position */
    int *ids;               /* (max_pos) token ids told */
    int len;                /* positions reserved */
    int stored;             /* positions every layer has stored */
    int n_ids;              /* ids known for positions [0, n_ids) */
    int n_tree;             /* positions [0, n_tree) are tree slots */
    rnode *lock;            /* deepest locked node; NULL: none */
} tseq;

typedef struct token_ctx {
    bench_kv_shape shape;
    const bench_host *host;
    int n_slots, cache;
    kvp_pool pool;          /* n_slots rows */
    int *free_stack, n_free;
    tseq *seqs;             /* (max_seqs) */
    int *seq_mem;           /* backing of every slots and ids array */
    int *match;             /* (max_pos) slots found by a tree walk */
    rnode root;             /* len 0, never evicted */
    int n_nodes;
    uint64_t tick;          /* LRU clock */
    float *scratch;         /* (n_threads, kvq_scores_per_task) attention scores */
    size_t scratch_bytes;
    int tree_slots, peak_in_use;
    uint64_t prefix_hit_tokens, evicted_slots, bytes_copied, alloc_failures;
} token_ctx;

/* ---- the radix tree ---- */

/* Splits node x after its first k ids: a new parent holds them. */
static rnode *split(token_ctx *c, rnode *x, int k) {
    rnode *m = calloc(1, sizeof(*m));
    int *ids = malloc((size_t)k * sizeof(int)), *slots = malloc((size_t)k * sizeof(int));
    if (!m || !ids || !slots) { free(m); free(ids); free(slots); return NULL; }
    memcpy(ids, x->ids, (size_t)k * sizeof(int));
    memcpy(slots, x->slots, (size_t)k * sizeof(int));
    *m = (rnode){.parent = x->parent, .child = x, .next = x->next, .ids = ids, .slots = slots, .len = k,
                 .lock = x->lock, .last_use = x->last_use};
    rnode **link = &x->parent->child;
    while (*link != x) link = &(*link)->next;
    *link = m;
    memmove(x->ids, x->ids + k, (size_t)(x->len - k) * sizeof(int));
    memmove(x->slots, x->slots + k, (size_t)(x->len - k) * sizeof(int));
    x->len -= k;
    x->parent = m;
    x->next = NULL;
    c->n_nodes++;
    return m;
}

/* Walks the longest prefix of ids[0..n) in the tree, splitting the last edge where
 * the match ends inside it (a split failing for memory just ends the match early).
 * Writes the slots of the matched positions to c->match and returns their number;
 * *end is the node where the match ends. */
static int descend(token_ctx *c, const int *ids, int n, rnode **end) {
    rnode *x = &c->root;
    int i = 0;
    c->tick++;
    while (i < n) {
        rnode *ch = x->child;
        while (ch && ch->ids[0] != ids[i]) ch = ch->next;
        if (!ch) break;
        int k = 0;
        while (k < ch->len && i + k < n && ch->ids[k] == ids[i + k]) k++;
        if (k < ch->len && !(ch = split(c, ch, k))) break;
        memcpy(c->match + i, ch->slots, (size_t)k * sizeof(int));
        ch->last_use = c->tick;
        i += k;
        x = ch;
    }
    *end = x;
    return i;
}

static void lock_path(rnode *x, int delta) {
    for (; x; x = x->parent) x->lock += delta;
}

/* The least recently used unlocked leaf (a linear walk: the tree holds a node per
 * distinct suffix, few next to the slots). NULL when every leaf is locked. */
static rnode *lru_leaf(rnode *x, rnode *best) {
    for (rnode *ch = x->child; ch; ch = ch->next) {
        if (!ch->child) {
            if (ch->lock == 0 && (!best || ch->last_use < best->last_use)) best = ch;
        } else {
            best = lru_leaf(ch, best);
        }
    }
    return best;
}

static void node_free(rnode *x) {
    if (!x) return;
    free(x->ids);
    free(x->slots);
    free(x);
}

static int evict_one(token_ctx *c) {
    rnode *x = lru_leaf(&c->root, NULL);
    if (!x) return 0;
    for (int i = 0; i < x->len; i++) c->free_stack[c->n_free++] = x->slots[i];
    rnode **link = &x->parent->child;
    while (*link != x) link = &(*link)->next;
    *link = x->next;
    int n = x->len;
    c->tree_slots -= n;
    c->evicted_slots += (uint64_t)n;
    c->n_nodes--;
    node_free(x);
    return n;
}

static void tree_free(rnode *x) {
    rnode *ch = x->child;
    while (ch) {
        rnode *next = ch->next;
        tree_free(ch);
        node_free(ch);
        ch = next;
    }
}

/* Hands positions [0, P) of q to the tree, P = what is stored with known ids:
 * positions the tree already holds give their private slot back and take the
 * tree's (same ids at the same positions: the same K/V); the rest becomes a new
 * leaf. Then q locks its new deepest node instead of the old one. */
static void tree_insert(token_ctx *c, tseq *q) {
    int p = q->stored < q->n_ids ? q->stored : q->n_ids;
    if (!c->cache || p <= q->n_tree) return;
    rnode *x;
    int m = descend(c, q->ids, p, &x);
    for (int i = q->n_tree; i < m; i++)
        if (q->slots[i] != c->match[i]) {
            c->free_stack[c->n_free++] = q->slots[i];
            q->slots[i] = c->match[i];
        }
    if (m < p) {
        rnode *leaf = calloc(1, sizeof(*leaf));
        int *ids = malloc((size_t)(p - m) * sizeof(int)), *slots = malloc((size_t)(p - m) * sizeof(int));
        if (leaf && ids && slots) {
            memcpy(ids, q->ids + m, (size_t)(p - m) * sizeof(int));
            memcpy(slots, q->slots + m, (size_t)(p - m) * sizeof(int));
            *leaf = (rnode){.parent = x, .next = x->child, .ids = ids, .slots = slots, .len = p - m, .last_use = c->tick};
            x->child = leaf;
            c->tree_slots += p - m;
            c->n_nodes++;
            x = leaf;
            m = p;
        } else { /* out of memory: the rest stays private, nothing is lost */
            free(leaf); free(ids); free(slots);
        }
    }
    lock_path(x, 1);
    if (q->lock) lock_path(q->lock, -1);
    q->lock = x;
    q->n_tree = m;
}

/* ---- the module ---- */

static void token_destroy(void *ctx);

static int token_create(const bench_kv_shape *shape, const void *opts, const bench_host *host,
                        void **out, char *err, size_t errlen) {
    const token_opts *o = opts;
    int rc = kvq_check_shape(shape, KVP_CACHE_TYPES, "kv token", err, errlen);
    if (rc) return rc;
    token_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv token: out of memory");
    c->shape = *shape;
    c->host = host;
    c->cache = o->prefix_cache;
    uint64_t pool_tokens = o->pool_tokens, pool_bytes = o->pool_bytes;
    int touch = o->touch;
    rc = -BENCH_ERR_INVALID;
    if (pool_tokens && pool_bytes) {
        bench_errf(err, errlen, "kv token: options pool_tokens and pool_bytes: give one of them, not both");
        goto err;
    }
    if (shape->pool_bytes && (pool_tokens || pool_bytes)) {
        bench_errf(err, errlen, "kv token: option %s and the host's KV budget both size the pool: give one of them",
                   pool_tokens ? "pool_tokens" : "pool_bytes");
        goto err;
    }
    if (shape->pool_bytes) pool_bytes = shape->pool_bytes;
    size_t tb = kvp_token_bytes(shape);
    uint64_t slots = pool_bytes ? pool_bytes / tb : pool_tokens ? pool_tokens : (uint64_t)shape->max_seqs * (uint64_t)shape->max_pos;
    if (slots < 1) {
        bench_errf(err, errlen, "kv token: a pool of %llu bytes holds no slot of %zu bytes (raise pool_bytes or the budget)",
                   (unsigned long long)pool_bytes, tb);
        goto err;
    }
    if (slots > (uint64_t)INT32_MAX / 2) {
        bench_errf(err, errlen, "kv token: a pool of %llu slots of %zu bytes is too large: at most %d slots",
                   (unsigned long long)slots, tb, INT32_MAX / 2);
        goto err;
    }
    c->n_slots = (int)slots;
    c->free_stack = malloc((size_t)c->n_slots * sizeof(int));
    c->seqs = calloc((size_t)shape->max_seqs, sizeof(*c->seqs));
    c->seq_mem = malloc((size_t)shape->max_seqs * 2u * (size_t)shape->max_pos * sizeof(int));
    c->match = malloc((size_t)shape->max_pos * sizeof(int));
    int tasks = host && host->n_threads > 0 ? host->n_threads : 1;
    c->scratch_bytes = (size_t)tasks * kvq_scores_per_task(shape) * sizeof(float);
    c->scratch = bench_alloc(host ? host->alloc : NULL, c->scratch_bytes, 64);
    if (!c->free_stack || !c->seqs || !c->seq_mem || !c->match || !c->scratch) {
        rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv token: out of memory");
        goto err;
    }
    for (int i = 0; i < c->n_slots; i++) c->free_stack[i] = c->n_slots - 1 - i; /* slot 0 on top */
    c->n_free = c->n_slots;
    for (int s = 0; s < shape->max_seqs; s++) {
        c->seqs[s].slots = c->seq_mem + (size_t)s * 2u * (size_t)shape->max_pos;
        c->seqs[s].ids = c->seqs[s].slots + shape->max_pos;
    }
    if ((rc = kvp_pool_create(&c->pool, shape, c->n_slots, host, touch, "kv token", err, errlen))) goto err;
    *out = c;
    return 0;
err:
    token_destroy(c);
    return rc;
}

#ifndef NDEBUG
static int tree_count(const rnode *x, int *n_nodes) {
    int s = x->len;
    for (const rnode *ch = x->child; ch; ch = ch->next) { s += tree_count(ch, n_nodes); ++*n_nodes; }
    return s;
}
static void check_invariants(const token_ctx *c) {
    int priv = 0, nodes = 0;
    for (int s = 0; s < c->shape.max_seqs; s++) priv += c->seqs[s].len - c->seqs[s].n_tree;
    int tree = tree_count(&c->root, &nodes);
    const char *broken = NULL;
    if (tree != c->tree_slots || nodes != c->n_nodes) broken = "tree slot and node counts";
    else if (c->n_free + priv + tree != c->n_slots) broken = "n_free + private + tree == n_slots";
    if (broken) { bench_logf(c->host, "kv token: invariant broken: %s", broken); abort(); }
}
#else
static void check_invariants(const token_ctx *c) { (void)c; }
#endif

static int seq_ok(const token_ctx *c, int seq, char *err, size_t errlen) {
    if (seq < 0 || seq >= c->shape.max_seqs)
        return bench_errf(err, errlen, "kv token: sequence %d out of range 0..%d", seq, c->shape.max_seqs - 1);
    return 0;
}

static int token_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    token_ctx *c = ctx;
    if (seq_ok(c, seq, err, errlen)) return -1;
    if (n_pos > c->shape.max_pos)
        return bench_errf(err, errlen, "kv token: position %d is past the context of %d", n_pos - 1, c->shape.max_pos);
    tseq *q = &c->seqs[seq];
    int need = n_pos - q->len;
    if (need <= 0) return 0;
    while (c->n_free < need)
        if (!evict_one(c)) {
            c->alloc_failures++;
            return bench_errf(err, errlen, "kv token: the pool of %d slots is full (%d free, sequence %d needs %d)",
                              c->n_slots, c->n_free, seq, need);
        }
    for (int p = q->len; p < n_pos; p++) q->slots[p] = c->free_stack[--c->n_free];
    q->len = n_pos;
    if (c->n_slots - c->n_free > c->peak_in_use) c->peak_in_use = c->n_slots - c->n_free;
    return 0;
}

static void token_tokens(void *ctx, int seq, int pos0, int n, const int *ids) {
    token_ctx *c = ctx;
    if (seq < 0 || seq >= c->shape.max_seqs || pos0 < 0 || n < 0 || pos0 + n > c->shape.max_pos) return;
    tseq *q = &c->seqs[seq];
    if (pos0 > q->n_ids) return; /* a gap: the tree keys on a whole prefix */
    memcpy(q->ids + pos0, ids, (size_t)n * sizeof(int));
    if (pos0 + n > q->n_ids) q->n_ids = pos0 + n;
}

static void token_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    token_ctx *c = ctx;
    tseq *q = &c->seqs[seq];
    kvp_store(&c->shape, &c->pool, q->slots, 1, layer, pos0, n, k, v);
    if (layer == c->shape.n_layers - 1) {
        if (pos0 + n > q->stored) q->stored = pos0 + n;
        /* after a prefill, share the prompt at once with sequences that start meanwhile
         * (SGLang caches unfinished requests too); decode steps wait for the release */
        if (n > 1) tree_insert(c, q);
    }
}

static void token_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    token_ctx *c = ctx;
    kvp_attend(&c->shape, c->host, &c->pool, c->seqs[seq].slots, 1, layer, pos0, n, q, out, c->scratch);
}

static void seq_clear(tseq *q) {
    int *slots = q->slots, *ids = q->ids;
    *q = (tseq){.slots = slots, .ids = ids};
}

static void token_release(void *ctx, int seq) {
    token_ctx *c = ctx;
    if (seq < 0 || seq >= c->shape.max_seqs) return;
    tseq *q = &c->seqs[seq];
    tree_insert(c, q);
    for (int p = q->n_tree; p < q->len; p++) c->free_stack[c->n_free++] = q->slots[p];
    if (q->lock) lock_path(q->lock, -1);
    seq_clear(q);
    check_invariants(c);
}

static int token_share_prefix(void *ctx, int seq, const int *ids, int n, char *err, size_t errlen) {
    token_ctx *c = ctx;
    if (seq_ok(c, seq, err, errlen)) return -1;
    tseq *q = &c->seqs[seq];
    if (q->len) return bench_errf(err, errlen, "kv token: share_prefix: sequence %d holds %d positions; expected an empty one", seq, q->len);
    if (n > c->shape.max_pos) n = c->shape.max_pos;
    if (!c->cache || n < 2) return 0;
    rnode *x;
    int m = descend(c, ids, n - 1, &x);
    memcpy(q->slots, c->match, (size_t)m * sizeof(int));
    memcpy(q->ids, ids, (size_t)m * sizeof(int));
    q->len = q->stored = q->n_ids = q->n_tree = m;
    lock_path(x, 1);
    q->lock = x;
    c->prefix_hit_tokens += (uint64_t)m;
    return m;
}

/* The stored prefix with known ids goes through the tree (shared, locked);
 * private positions past it are copied into fresh slots. */
static int token_fork(void *ctx, int src, int dst, char *err, size_t errlen) {
    token_ctx *c = ctx;
    if (seq_ok(c, src, err, errlen) || seq_ok(c, dst, err, errlen)) return -1;
    if (src == dst) return bench_errf(err, errlen, "kv token: fork: source and destination are both sequence %d", src);
    tseq *s = &c->seqs[src], *d = &c->seqs[dst];
    if (d->len) return bench_errf(err, errlen, "kv token: fork: sequence %d holds %d positions; expected an empty one", dst, d->len);
    tree_insert(c, s);
    int priv = s->len - s->n_tree;
    while (c->n_free < priv)
        if (!evict_one(c)) return bench_errf(err, errlen, "kv token: fork: the pool of %d slots is full", c->n_slots);
    memcpy(d->ids, s->ids, (size_t)s->n_ids * sizeof(int));
    memcpy(d->slots, s->slots, (size_t)s->n_tree * sizeof(int));
    for (int p = s->n_tree; p < s->len; p++) {
        d->slots[p] = c->free_stack[--c->n_free];
        kvp_copy_rows(&c->shape, &c->pool, d->slots[p], s->slots[p], 1);
    }
    c->bytes_copied += (uint64_t)priv * kvp_token_bytes(&c->shape);
    d->len = s->len;
    d->stored = s->stored;
    d->n_ids = s->n_ids;
    d->n_tree = s->n_tree;
    d->lock = s->lock;
    if (d->lock) lock_path(d->lock, 1);
    if (c->n_slots - c->n_free > c->peak_in_use) c->peak_in_use = c->n_slots - c->n_free;
    return 0;
}

static int unlocked_slots(const rnode *x) {
    int s = 0;
    for (const rnode *ch = x->child; ch; ch = ch->next) s += (ch->lock == 0 ? ch->len : 0) + unlocked_slots(ch);
    return s;
}

static void token_memory(void *ctx, bench_kv_memory *m) {
    token_ctx *c = ctx;
    uint64_t tb = kvp_token_bytes(&c->shape);
    m->reserved = c->pool.bytes;
    m->used = (uint64_t)(c->n_slots - c->n_free) * tb;
    m->cached = (uint64_t)unlocked_slots(&c->root) * tb;  /* tree slots no sequence holds */
    m->wasted = 0;                                          /* one slot per token: nothing partial */
}

static void token_counters(void *ctx, const bench_counter_sink *s) {
    token_ctx *c = ctx;
    double tb = (double)kvp_token_bytes(&c->shape);
    int in_use = c->n_slots - c->n_free, cached = unlocked_slots(&c->root);
    bench_emit_as(s, "allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, 1);
    bench_emit_as(s, "grow_events", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, 0);
    bench_emit(s, "bytes_copied", "B", (double)c->bytes_copied);
    bench_emit(s, "bytes_reserved", "B", (double)c->pool.bytes);
    bench_emit(s, "bytes_used", "B", in_use * tb);
    bench_emit(s, "bytes_wasted", "B", 0);
    /* held for prefix reuse only (tree slots no sequence locks): evictable */
    bench_emit(s, "bytes_cached", "B", cached * tb);
    bench_emit(s, "bytes_used_peak", "B", c->peak_in_use * tb);
    bench_emit(s, "bytes_wasted_peak", "B", 0);
    bench_emit(s, "slots_total", "count", c->n_slots);
    bench_emit(s, "slots_in_use", "count", in_use);
    bench_emit(s, "slots_cached", "count", cached);
    bench_emit(s, "slots_free", "count", c->n_free);
    bench_emit(s, "slots_peak", "count", c->peak_in_use);
    bench_emit(s, "tree_nodes", "count", c->n_nodes);
    bench_emit(s, "prefix_hit_tokens", "tokens", (double)c->prefix_hit_tokens);
    bench_emit(s, "evictions", "count", (double)c->evicted_slots);
    bench_emit(s, "alloc_failures", "count", (double)c->alloc_failures);
}

static void token_destroy(void *ctx) {
    token_ctx *c = ctx;
    if (!c) return;
    tree_free(&c->root);
    kvp_pool_destroy(&c->pool, c->host);
    bench_free(c->host ? c->host->alloc : NULL, c->scratch, c->scratch_bytes);
    free(c->free_stack);
    free(c->seqs);
    free(c->seq_mem);
    free(c->match);
    free(c);
}

static const struct bench_kv_iface token_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .cache_types = KVP_CACHE_TYPES,
    .create = token_create,
    .reserve = token_reserve,
    .store = token_store,
    .attend = token_attend,
    .release = token_release,
    .memory = token_memory,
    .counters = token_counters,
    .destroy = token_destroy,
    .tokens = token_tokens,
    .share_prefix = token_share_prefix,
    .fork = token_fork,
};

static const bench_module token_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "kv",
    .name = "token",
    .summary = "token slots: free-slot stack, request-to-slot map, radix-tree prefix sharing (SGLang style)",
    .devices = KVP_DEVICE,
    .score = kvp_score,
    .caps = BENCH_CAP_KV_SHARED_POOL | BENCH_CAP_KV_PREFIX_SHARE | BENCH_CAP_KV_FORK,
    .options = token_options,
    .opts_size = sizeof(token_opts),
    .iface = &token_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &token_module; }
