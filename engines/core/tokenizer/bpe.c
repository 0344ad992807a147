/* Byte-level BPE encoding (see bpe.h). */
#include "bpe.h"
#include "pretok.h"
#include "unicode.h"
#include "engines/abi/module.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bpe {
    int n;                  /* vocabulary size */
    int unk;                /* -1 when none */
    int ignore_merges;      /* a word that is a token is taken whole (Llama 3) */
    pretok *pre;
    char *pre_source;       /* the file the split patterns came from, or NULL */

    /* tokens: piece -> id over every token (the first id wins a duplicate) */
    char *blob;             /* pieces, NUL-separated */
    uint32_t *off, *len;    /* (n) */
    int32_t *slots;         /* (mask + 1) id or -1 */
    uint32_t mask;

    /* merges: (left, right) -> rank, keyed on left's bytes then right's */
    char *mblob;            /* left bytes then right bytes, per merge */
    uint32_t *moff;         /* (n_merges) */
    uint16_t *mll, *mrl;    /* (n_merges) left and right lengths */
    int32_t *mslots;        /* (mmask + 1) rank or -1 */
    uint32_t mmask;
    int n_merges;

    /* the byte-level alphabet */
    char bl[256][2];        /* UTF-8 of byte b's code point (1 or 2 bytes) */
    uint8_t bl_len[256];
    int32_t byte_tok[256];  /* token of that one-character piece, or -1 */

    int32_t *user;          /* (n_user) TOKEN_USER ids, longest piece first (the cut order) */
    int n_user;
};

/* ---- hashing ---- */

static uint64_t fnv(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}
#define FNV0 1469598103934665603ull

static uint64_t hash_pair(const char *l, size_t ll, const char *r, size_t rl) {
    uint64_t h = fnv(FNV0, l, ll);
    h ^= 0x1ff; /* no byte value: the split point is part of the key */
    h *= 1099511628211ull;
    h = fnv(h, r, rl);
    return h ^ (h >> 29);
}

static int tok_lookup(const bpe *b, const char *s, size_t n) {
    uint64_t h = fnv(FNV0, s, n);
    for (uint32_t i = (uint32_t)(h ^ (h >> 29)) & b->mask;; i = (i + 1) & b->mask) {
        int32_t id = b->slots[i];
        if (id < 0) return -1;
        if (b->len[id] == n && memcmp(b->blob + b->off[id], s, n) == 0) return id;
    }
}

static int merge_rank(const bpe *b, const char *l, size_t ll, const char *r, size_t rl) {
    for (uint32_t i = (uint32_t)hash_pair(l, ll, r, rl) & b->mmask;; i = (i + 1) & b->mmask) {
        int32_t k = b->mslots[i];
        if (k < 0) return -1;
        const char *key = b->mblob + b->moff[k];
        if (b->mll[k] == ll && b->mrl[k] == rl && memcmp(key, l, ll) == 0 && memcmp(key + ll, r, rl) == 0) return k;
    }
}

/* ---- construction ---- */

void bpe_free(bpe *b) {
    if (!b) return;
    pretok_free(b->pre);
    free(b->pre_source);
    free(b->blob);
    free(b->off);
    free(b->len);
    free(b->slots);
    free(b->mblob);
    free(b->moff);
    free(b->mll);
    free(b->mrl);
    free(b->mslots);
    free(b->user);
    free(b);
}

static uint32_t table_size(uint64_t n) {
    uint32_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    return cap;
}

typedef struct { uint32_t len; int32_t id; } len_id;

static int by_length_desc(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    return x->len != y->len ? (x->len < y->len ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

static int build_merges(bpe *b, const model_vocab *v, char *err, size_t errlen) {
    size_t total = 0;
    for (int i = 0; i < v->n_merges; i++) {
        if (!v->merges[i]) return bench_errf(err, errlen, "BPE: merge %d is missing", i);
        total += strlen(v->merges[i]);
        if (total > UINT32_MAX / 2) return bench_errf(err, errlen, "BPE: the merges exceed 2 GiB");
    }
    int n = v->n_merges;
    b->mmask = table_size((uint64_t)n) - 1;
    b->mblob = malloc(total + 1);
    b->moff = malloc(((size_t)n + 1) * sizeof(*b->moff));
    b->mll = malloc(((size_t)n + 1) * sizeof(*b->mll));
    b->mrl = malloc(((size_t)n + 1) * sizeof(*b->mrl));
    b->mslots = malloc(((size_t)b->mmask + 1) * sizeof(*b->mslots));
    if (!b->mblob || !b->moff || !b->mll || !b->mrl || !b->mslots)
        return bench_errf(err, errlen, "BPE: out of memory for %d merges", n);
    memset(b->mslots, 0xff, ((size_t)b->mmask + 1) * sizeof(*b->mslots));
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        const char *m = v->merges[i];
        size_t l = strlen(m);
        /* "left right": the first space after the first byte splits, as llama.cpp reads it */
        const char *sp = l > 1 ? memchr(m + 1, ' ', l - 1) : NULL;
        if (!sp || sp + 1 == m + l)
            return bench_errf(err, errlen, "BPE: merge %d \"%.60s\": expected two pieces separated by a space", i, m);
        size_t ll = (size_t)(sp - m), rl = l - ll - 1;
        if (ll > UINT16_MAX || rl > UINT16_MAX)
            return bench_errf(err, errlen, "BPE: merge %d: a piece of more than %d bytes", i, UINT16_MAX);
        memcpy(b->mblob + pos, m, ll);
        memcpy(b->mblob + pos + ll, sp + 1, rl);
        b->moff[i] = (uint32_t)pos;
        b->mll[i] = (uint16_t)ll;
        b->mrl[i] = (uint16_t)rl;
        pos += ll + rl;
        /* a repeated merge keeps its first (best) rank */
        uint32_t s = (uint32_t)hash_pair(m, ll, sp + 1, rl) & b->mmask;
        for (; b->mslots[s] >= 0; s = (s + 1) & b->mmask) {
            int32_t k = b->mslots[s];
            if (b->mll[k] == ll && b->mrl[k] == rl && memcmp(b->mblob + b->moff[k], b->mblob + b->moff[i], ll + rl) == 0) break;
        }
        if (b->mslots[s] < 0) b->mslots[s] = i;
    }
    b->n_merges = n;
    return 0;
}

/* "<file>: pre_tokenizer: <err>" for an error about the patterns of a tokenizer.json. */
static void prefix_source(const char *source, char *err, size_t errlen) {
    if (!source || !errlen) return;
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", err);
    snprintf(err, errlen, "%s: pre_tokenizer: %s", source, msg);
}

int bpe_create(const model_vocab *v, int fallback, bpe **out, char *warn, size_t warnlen, char *err, size_t errlen) {
    *out = NULL;
    if (!v || v->n <= 0 || !v->tokens) return bench_errf(err, errlen, "BPE: the model has no vocabulary");
    if (v->n_merges <= 0 || !v->merges)
        return bench_errf(err, errlen, "BPE: the vocabulary has no merges (tokenizer.ggml.merges, or model.merges in tokenizer.json)");
    bpe *b = calloc(1, sizeof(*b));
    if (!b) return bench_errf(err, errlen, "BPE: out of memory");
    int n = v->n;
    b->n = n;
    b->unk = v->unk >= 0 && v->unk < n ? v->unk : -1;

    /* -- pre-tokenizer -- */
    if (v->n_pre_patterns > 0) {
        if (pretok_create((const char *const *)v->pre_patterns, v->n_pre_patterns, &b->pre, err, errlen)) {
            prefix_source(v->pre_source, err, errlen);
            goto err;
        }
        if (v->pre_source && !(b->pre_source = strdup(v->pre_source))) {
            bench_errf(err, errlen, "BPE: out of memory");
            goto err;
        }
        b->ignore_merges = v->ignore_merges;
    } else if (pretok_name_known(v->pre)) {
        if (pretok_create_named(v->pre, &b->pre, err, errlen)) goto err;
        b->ignore_merges = pretok_name_ignores_merges(v->pre);
    } else if (fallback) {
        size_t wl = strnlen(warn, warnlen); /* after what the caller wrote there */
        if (wl + 1 < warnlen && wl) warn[wl++] = '\n';
        bench_errf(warn + wl, warnlen - wl, "warning: tokenizer.ggml.pre %s%s%s is not known (known: %s); --tokenizer-fallback: "
                   "splitting with gpt-2's rules, so ids may differ from the model's own tokenizer",
                   v->pre ? "\"" : "", v->pre ? v->pre : "is absent", v->pre ? "\"" : "", pretok_names());
        if (pretok_create_named("gpt-2", &b->pre, err, errlen)) goto err;
    } else {
        if (!v->pre) bench_errf(err, errlen, "BPE: tokenizer.ggml.pre is absent; known: %s (or --tokenizer-fallback to split as gpt-2)", pretok_names());
        else bench_errf(err, errlen, "BPE: tokenizer.ggml.pre \"%s\" is not known; known: %s (or --tokenizer-fallback to split as gpt-2)", v->pre, pretok_names());
        goto err;
    }

    /* -- tokens -- */
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!v->tokens[i]) {
            bench_errf(err, errlen, "BPE: token %d has no text", i);
            goto err;
        }
        total += strlen(v->tokens[i]) + 1;
        if (total > UINT32_MAX / 2) {
            bench_errf(err, errlen, "BPE: token %d: the pieces exceed 2 GiB", i);
            goto err;
        }
    }
    b->mask = table_size((uint64_t)n) - 1;
    b->blob = malloc(total);
    b->off = malloc((size_t)n * sizeof(*b->off));
    b->len = malloc((size_t)n * sizeof(*b->len));
    b->slots = malloc(((size_t)b->mask + 1) * sizeof(*b->slots));
    b->user = malloc((size_t)n * sizeof(*b->user));
    if (!b->blob || !b->off || !b->len || !b->slots || !b->user) {
        bench_errf(err, errlen, "BPE: out of memory for %d tokens", n);
        goto err;
    }
    memset(b->slots, 0xff, ((size_t)b->mask + 1) * sizeof(*b->slots));
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(v->tokens[i]);
        memcpy(b->blob + pos, v->tokens[i], l + 1);
        b->off[i] = (uint32_t)pos;
        b->len[i] = (uint32_t)l;
        pos += l + 1;
        uint64_t h = fnv(FNV0, v->tokens[i], l);
        uint32_t s = (uint32_t)(h ^ (h >> 29)) & b->mask;
        for (; b->slots[s] >= 0; s = (s + 1) & b->mask)
            if (b->len[b->slots[s]] == l && memcmp(b->blob + b->off[b->slots[s]], v->tokens[i], l) == 0) break;
        if (b->slots[s] < 0) b->slots[s] = i;
        if (v->types && v->types[i] == TOKEN_USER && l > 0) b->user[b->n_user++] = i;
    }
    if (b->n_user > 1) {
        len_id *li = malloc((size_t)b->n_user * sizeof(*li));
        if (!li) {
            bench_errf(err, errlen, "BPE: out of memory for %d tokens", n);
            goto err;
        }
        for (int i = 0; i < b->n_user; i++) li[i] = (len_id){b->len[b->user[i]], b->user[i]};
        qsort(li, (size_t)b->n_user, sizeof(*li), by_length_desc);
        for (int i = 0; i < b->n_user; i++) b->user[i] = li[i].id;
        free(li);
    }
    for (int c = 0; c < 256; c++) {
        char u[4];
        size_t k = unicode_encode(unicode_byte_to_cp((uint8_t)c), u);
        memcpy(b->bl[c], u, k);
        b->bl_len[c] = (uint8_t)k;
        b->byte_tok[c] = tok_lookup(b, u, k);
    }

    if (build_merges(b, v, err, errlen)) goto err;
    *out = b;
    return 0;
err:
    bpe_free(b);
    return -1;
}

/* ---- merging one word ---- */

typedef struct {
    uint32_t start, len;    /* bytes of the byte-level word */
    int32_t prev, next;
} sym;

typedef struct {
    int32_t rank, left, right;
    uint32_t size;          /* len(left) + len(right) when pushed: detects stale entries */
} cand;

static int cand_before(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

typedef struct {
    cand *v;
    size_t n;
} heap;

static void heap_push(heap *h, cand c) {
    size_t i = h->n++; /* sized for the worst case up front */
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_before(&c, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = c;
}

static cand heap_pop(heap *h) {
    cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && cand_before(&h->v[c + 1], &h->v[c])) c++;
        if (!cand_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

typedef struct {
    char *w;                /* the byte-level word */
    sym *s;
    heap h;
    size_t cap;             /* bytes of the original word the buffers hold */
} scratch;

static void try_pair(const bpe *b, scratch *sc, int l, int r) {
    if (l < 0 || r < 0) return;
    const sym *a = &sc->s[l], *c = &sc->s[r];
    int k = merge_rank(b, sc->w + a->start, a->len, sc->w + c->start, c->len);
    if (k >= 0) heap_push(&sc->h, (cand){.rank = k, .left = l, .right = r, .size = a->len + c->len});
}

#define EMIT(x)                                                                                   \
    do {                                                                                          \
        if (*n >= max_ids)                                                                        \
            return tok_too_many(err, errlen, max_ids);                                            \
        ids[(*n)++] = (x);                                                                        \
    } while (0)

/* Tokens of the byte-level characters of w[0..len): one per original byte. */
static int emit_bytes(const bpe *b, const char *w, size_t len, int *ids, int *n, int max_ids, char *err, size_t errlen) {
    for (size_t i = 0, cl; i < len; i += cl) {
        int byte = unicode_cp_to_byte(unicode_decode(w + i, len - i, &cl));
        int id = byte >= 0 ? b->byte_tok[byte] : -1;
        if (id < 0) id = b->unk;
        if (id < 0)
            return bench_errf(err, errlen, "tokenizer: byte 0x%02x: the vocabulary has no token for it and no <unk>", byte & 0xff);
        EMIT(id);
    }
    return 0;
}

static int encode_word(const bpe *b, scratch *sc, const char *word, size_t wl, int *ids, int *n, int max_ids,
                       char *err, size_t errlen) {
    if (wl > sc->cap) {
        size_t cap = wl < 256 ? 256 : wl;
        char *w = realloc(sc->w, 2 * cap);
        sym *s = realloc(sc->s, cap * sizeof(*s));
        if (w) sc->w = w;
        if (s) sc->s = s;
        cand *h = realloc(sc->h.v, 3 * cap * sizeof(*h));
        if (h) sc->h.v = h;
        if (!w || !s || !h) return bench_errf(err, errlen, "tokenizer: out of memory for a word of %zu bytes", wl);
        sc->cap = cap;
    }
    uint32_t wlen = 0;
    for (size_t i = 0; i < wl; i++) {
        uint8_t c = (uint8_t)word[i];
        sc->s[i] = (sym){.start = wlen, .len = b->bl_len[c], .prev = (int32_t)i - 1, .next = i + 1 < wl ? (int32_t)i + 1 : -1};
        memcpy(sc->w + wlen, b->bl[c], b->bl_len[c]);
        wlen += b->bl_len[c];
    }
    if (b->ignore_merges) {
        int id = tok_lookup(b, sc->w, wlen);
        if (id >= 0) {
            EMIT(id);
            return 0;
        }
    }
    sc->h.n = 0;
    for (size_t i = 0; i + 1 < wl; i++) try_pair(b, sc, (int)i, (int)i + 1);
    while (sc->h.n) {
        cand c = heap_pop(&sc->h);
        sym *l = &sc->s[c.left], *r = &sc->s[c.right];
        if (l->len == 0 || r->len == 0 || l->next != c.right || l->len + r->len != c.size) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sc->s[r->next].prev = c.left;
        try_pair(b, sc, l->prev, c.left);
        try_pair(b, sc, c.left, l->next);
    }
    for (int i = 0; i >= 0; i = sc->s[i].next) {
        const sym *s = &sc->s[i];
        int id = tok_lookup(b, sc->w + s->start, s->len);
        if (id >= 0) EMIT(id);
        else {
            int erc = emit_bytes(b, sc->w + s->start, s->len, ids, n, max_ids, err, errlen);
            if (erc) return erc;
        }
    }
    return 0;
}

/* A fragment with no user-defined token in it: pre-tokenize, then merge each word. */
static int encode_fragment(const bpe *b, scratch *sc, const char *text, size_t len, int *ids, int *n, int max_ids,
                           char *err, size_t errlen) {
    if (len == 0) return 0;
    int rc = -1;
    uint32_t *cps = malloc(len * sizeof(*cps));
    size_t *at = malloc((len + 1) * sizeof(*at)), *lens = NULL, n_pieces = 0, ncp = 0;
    if (!cps || !at) {
        bench_errf(err, errlen, "tokenizer: out of memory for %zu bytes of text", len);
        goto out;
    }
    for (size_t i = 0, cl; i < len; i += cl) {
        at[ncp] = i;
        cps[ncp++] = unicode_decode(text + i, len - i, &cl);
    }
    at[ncp] = len;
    if (pretok_split(b->pre, cps, ncp, &lens, &n_pieces, err, errlen)) {
        prefix_source(b->pre_source, err, errlen);
        goto out;
    }
    size_t c = 0;
    for (size_t k = 0; k < n_pieces; k++) {
        size_t from = at[c], to = at[c + lens[k]];
        c += lens[k];
        int wrc = encode_word(b, sc, text + from, to - from, ids, n, max_ids, err, errlen);
        if (wrc) {
            rc = wrc;
            goto out;
        }
    }
    rc = 0;
out:
    free(cps);
    free(at);
    free(lens);
    return rc;
}

typedef struct {
    size_t start, len;
    int id;                 /* a user-defined token, or -1 for text */
} frag;

typedef struct {
    int32_t rank;           /* index in b->user: longer pieces first */
    uint32_t len;
    size_t pos;
} occ;

static int occ_by_pos(const void *a, const void *b) {
    const occ *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Where user-defined tokens are cut out of the text, as llama.cpp's tokenizer_st_partition
 * does: token by token, longest first, each taking its leftmost occurrences that do not
 * overlap text already taken. The text not yet taken is a list of spans; each token is
 * searched (memmem, linear) in each span long enough to hold it, and a span it is found
 * in is split around it. Memory is one span and one accepted occurrence per token cut
 * out (at most len of each), never one entry per occurrence of every token: 2000 user
 * tokens a, aa, ... on 50k letters a used to store 98M occurrences (3.1 GB).
 * Returns the accepted ones by position in *out. */
typedef struct {
    size_t start, end;
} span;

static int find_user_tokens(const bpe *b, const char *text, size_t len, occ **out, size_t *n_out, char *err, size_t errlen) {
    occ *o = NULL;
    size_t no = 0, capo = 0;
    span *sp = NULL, *nsp = NULL;
    size_t nsp_n = 0, sp_n = 0, capsp = 0, longest = len;
    unsigned char seen[256] = {0};
    *out = NULL;
    *n_out = 0;
    if (b->n_user == 0 || len == 0) return 0;
    for (size_t i = 0; i < len; i++) seen[(unsigned char)text[i]] = 1;
    /* at most one more span than occurrences taken, and at most len occurrences */
    capsp = 16;
    sp = malloc(capsp * sizeof(*sp));
    nsp = malloc(capsp * sizeof(*nsp));
    if (!sp || !nsp) goto oom;
    sp[sp_n++] = (span){0, len};
    for (int u = 0; u < b->n_user && sp_n > 0; u++) {
        int32_t id = b->user[u];
        const char *tok = b->blob + b->off[id];
        size_t l = b->len[id];
        if (l > longest || !seen[(unsigned char)tok[0]]) continue;
        nsp_n = 0;
        longest = 0;
        for (size_t k = 0; k < sp_n; k++) {
            size_t s = sp[k].start, e = sp[k].end;
            for (;;) {
                const char *f = e - s >= l ? memmem(text + s, e - s, tok, l) : NULL;
                size_t p = f ? (size_t)(f - text) : e;
                /* the span before the occurrence (or all of what is left) stays free; +2:
                 * this piece and the one after the occurrence */
                if (nsp_n + 2 > capsp) {
                    size_t c = 2 * capsp;
                    span *a = realloc(sp, c * sizeof(*a));
                    if (!a) goto oom;
                    sp = a;
                    if (!(a = realloc(nsp, c * sizeof(*a)))) goto oom;
                    nsp = a;
                    capsp = c;
                }
                if (p > s) {
                    nsp[nsp_n++] = (span){s, p};
                    if (p - s > longest) longest = p - s;
                }
                if (!f) break;
                if (no == capo) {
                    size_t c = capo ? 2 * capo : 16;
                    occ *a = realloc(o, c * sizeof(*a));
                    if (!a) goto oom;
                    o = a;
                    capo = c;
                }
                o[no++] = (occ){u, (uint32_t)l, p};
                s = p + l;
            }
        }
        span *t = sp;
        sp = nsp;
        nsp = t;
        sp_n = nsp_n;
    }
    free(sp);
    free(nsp);
    if (no == 0) {
        free(o);
        return 0;
    }
    qsort(o, no, sizeof(*o), occ_by_pos);
    *out = o;
    *n_out = no;
    return 0;
oom:
    free(o);
    free(sp);
    free(nsp);
    return bench_errf(err, errlen, "tokenizer: out of memory for the user-defined tokens of %zu bytes of text", len);
}

int bpe_encode(const bpe *b, const char *text, size_t len, int *ids, int *n, int max_ids, char *err, size_t errlen) {
    scratch sc = {0};
    occ *o = NULL;
    size_t no = 0, pos = 0;
    int rc = -1;
    if (find_user_tokens(b, text, len, &o, &no, err, errlen)) return -1;
    for (size_t k = 0; k <= no; k++) {
        size_t next = k < no ? o[k].pos : len;
        int frc = encode_fragment(b, &sc, text + pos, next - pos, ids, n, max_ids, err, errlen);
        if (frc) {
            rc = frc;
            goto out;
        }
        if (k == no) break;
        if (*n >= max_ids) {
            rc = tok_too_many(err, errlen, max_ids);
            goto out;
        }
        ids[(*n)++] = b->user[o[k].rank];
        pos = o[k].pos + o[k].len;
    }
    rc = 0;
out:
    free(o);
    free(sc.w);
    free(sc.s);
    free(sc.h.v);
    return rc;
}

size_t bpe_piece_bytes(const char *piece, size_t len, char *out) {
    size_t o = 0;
    for (size_t i = 0, cl; i < len; i += cl) {
        uint32_t cp = unicode_decode(piece + i, len - i, &cl);
        int byte = unicode_cp_to_byte(cp);
        if (byte >= 0) out[o++] = (char)byte;
        else {
            memcpy(out + o, piece + i, cl);
            o += cl;
        }
    }
    return o;
}
