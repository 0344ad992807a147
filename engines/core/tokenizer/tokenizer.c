/* SentencePiece BPE encoding and decoding over a model_vocab.
 *
 * Encoding, as SentencePiece's BPE model (and llama.cpp's SPM tokenizer,
 * llama2.c's encode()) does it:
 *   1. a space is prepended to non-empty text when the vocabulary asks for it;
 *   2. spaces become U+2581 when the vocabulary writes them so (GGUF, HF);
 *      llama2.c's exporter wrote U+2581 back as ' ', and then it is the other
 *      way round: a U+2581 in the text becomes ' ';
 *   3. the text is split into UTF-8 characters, one symbol each;
 *   4. the adjacent pair whose concatenation is a piece with the highest score
 *      is merged (ties: the leftmost), until no pair is a piece;
 *   5. each symbol becomes its piece's id, or, when a single character is not
 *      a piece, its bytes' <0xNN> tokens (byte fallback), or <unk>.
 * Step 4 keeps candidate pairs in a max-heap and drops stale entries when they
 * surface, so a prompt of n characters costs O(n log n), not llama2.c's O(n^2).
 *
 * Which pieces text can become: SentencePiece matches text only against
 * NORMAL, USER and UNUSED pieces; control (<s>), unknown (<unk>) and byte
 * (<0x41>) pieces are never produced from their spelling in the text. The
 * lookup table therefore holds only those types. (llama2.c looks up every
 * piece, so "<s>" typed in a prompt could merge into BOS there if the vocab
 * held the intermediate pieces; the Llama-2 vocabularies do not.)
 */
#include "tokenizer.h"
#include "bpe.h"
#include "engines/abi/module.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define SPACE_SYM "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space */

struct tokenizer {
    int n;                  /* vocabulary size */
    int bos, eos, unk;      /* -1 when the vocabulary has none */
    int add_space_prefix;
    int space_sym;          /* 1: pieces spell spaces as U+2581 */

    /* pieces, all in one blob */
    char *blob;             /* (sum of piece lengths + n) bytes, NUL-separated */
    uint32_t *off, *len;    /* (n) each piece's offset in blob and length in bytes */
    float *scores;          /* (n) */
    int32_t *types;         /* (n) TOKEN_* */

    /* piece -> id, open addressing with linear probing, mergeable types only */
    int32_t *slots;         /* (mask + 1) id, or -1 for an empty slot */
    uint32_t mask;          /* capacity - 1; capacity a power of two >= 2n */

    int32_t byte_id[256];   /* id of <0xNN>, -1 when absent */
    uint32_t max_piece;     /* bytes of normalised text one id stands for, at most: the longest piece, or 4 (a character) */

    /* decoding: what each id prints */
    char *dec;              /* NUL-separated decoded texts */
    uint32_t *dec_off;      /* (n) offset of id's text in dec */

    bpe *bpe;               /* byte-level BPE; NULL: SentencePiece */
    model_norm normalize;   /* Unicode form the text is put in first (tokenizer.json's normalizer) */
    char warn[640];         /* what --tokenizer-fallback does not honour, or "" */
};

/* ---- lookup table ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a: short keys, good enough spread */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* Id of the piece s[0..n), or -1. */
static int lookup(const tokenizer *t, const char *s, size_t n) {
    for (uint32_t i = (uint32_t)hash_bytes(s, n) & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->slots[i];
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(t->blob + t->off[id], s, n) == 0) return id;
    }
}

static int mergeable(int32_t type) {
    return type != TOKEN_CONTROL && type != TOKEN_UNKNOWN && type != TOKEN_BYTE;
}

static int byte_piece_value(const char *p, size_t n) {
    if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* ---- construction ---- */

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    free(t->blob);
    free(t->off);
    free(t->len);
    free(t->scores);
    free(t->types);
    free(t->slots);
    free(t->dec);
    free(t->dec_off);
    bpe_free(t->bpe);
    free(t);
}

int tokenizer_create(const model_vocab *v, tokenizer **out, char *err, size_t errlen) {
    return tokenizer_create_ex(v, 0, out, err, errlen);
}

const char *tokenizer_warning(const tokenizer *t) { return t->warn; }
const char *tokenizer_kind(const tokenizer *t) { return t->bpe ? "byte-level BPE" : "sentencepiece"; }

#define SUPPORTED_MODELS "\"llama\" (SentencePiece) and \"gpt2\" (byte-level BPE)"

int tokenizer_create_ex(const model_vocab *v, unsigned flags, tokenizer **out, char *err, size_t errlen) {
    *out = NULL;
    if (!v || v->n <= 0 || !v->tokens || !v->scores)
        return bench_errf(err, errlen, "tokenizer: the model has no vocabulary");
    /* Which tokenizer: never a guess unless the caller asked for one. */
    int is_bpe = 0;
    char warn[sizeof(((tokenizer *)0)->warn)] = "";
    if (v->unsupported) {
        if (!(flags & TOKENIZER_FALLBACK))
            return bench_errf(err, errlen, "tokenizer: the vocabulary asks for what bench does not do: %s "
                              "(--tokenizer-fallback to tokenize without it)", v->unsupported);
        snprintf(warn, sizeof(warn), "warning: --tokenizer-fallback: not honoured: %s; ids may differ from the model's own tokenizer",
                 v->unsupported);
    }
    if (v->model && !strcmp(v->model, "gpt2")) {
        is_bpe = 1;
    } else if (!v->model || strcmp(v->model, "llama")) {
        if (!(flags & TOKENIZER_FALLBACK)) {
            if (!v->model)
                return bench_errf(err, errlen, "tokenizer: the vocabulary does not say which tokenizer it uses "
                                  "(tokenizer.ggml.model is absent); supported: " SUPPORTED_MODELS
                                  ", or --tokenizer-fallback to use SentencePiece");
            return bench_errf(err, errlen, "tokenizer: tokenizer.ggml.model \"%s\" is not supported; supported: "
                              SUPPORTED_MODELS ", or --tokenizer-fallback to use SentencePiece", v->model);
        }
        snprintf(warn, sizeof(warn), "warning: tokenizer.ggml.model %s%s%s is not supported; --tokenizer-fallback: "
                 "tokenizing as SentencePiece, so ids may differ from the model's own tokenizer",
                 v->model ? "\"" : "", v->model ? v->model : "is absent", v->model ? "\"" : "");
    }
    if (v->n > (1 << 28)) return bench_errf(err, errlen, "tokenizer: %d tokens is more than supported", v->n);
    int n = v->n;
    tokenizer *t = calloc(1, sizeof(*t));
    if (!t) return bench_errf(err, errlen, "tokenizer: out of memory");
    t->n = n;
    t->bos = v->bos >= 0 && v->bos < n ? v->bos : -1;
    t->eos = v->eos >= 0 && v->eos < n ? v->eos : -1;
    t->unk = v->unk >= 0 && v->unk < n ? v->unk : -1;
    t->add_space_prefix = v->add_space_prefix;
    t->normalize = v->normalize;
    memcpy(t->warn, warn, sizeof(warn));
    if (is_bpe && bpe_create(v, (flags & TOKENIZER_FALLBACK) != 0, &t->bpe, t->warn, sizeof(t->warn), err, errlen)) goto err;

    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!v->tokens[i]) {
            bench_errf(err, errlen, "tokenizer: token %d has no text", i);
            goto err;
        }
        size_t l = strlen(v->tokens[i]);
        if (l > UINT32_MAX / 4 || total > UINT32_MAX / 4) {
            bench_errf(err, errlen, "tokenizer: token %d: the pieces exceed 1 GiB", i);
            goto err;
        }
        total += l + 1;
    }
    uint32_t cap = 1;
    while (cap < 2u * (uint32_t)n) cap <<= 1;
    t->mask = cap - 1;
    t->blob = malloc(total);
    t->dec = malloc(total);
    t->off = malloc((size_t)n * sizeof(*t->off));
    t->len = malloc((size_t)n * sizeof(*t->len));
    t->dec_off = malloc((size_t)n * sizeof(*t->dec_off));
    t->scores = malloc((size_t)n * sizeof(*t->scores));
    t->types = malloc((size_t)n * sizeof(*t->types));
    t->slots = malloc((size_t)cap * sizeof(*t->slots));
    if (!t->blob || !t->dec || !t->off || !t->len || !t->dec_off || !t->scores || !t->types || !t->slots) {
        bench_errf(err, errlen, "tokenizer: out of memory for %d tokens", n);
        goto err;
    }
    memset(t->slots, 0xff, (size_t)cap * sizeof(*t->slots));
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;

    size_t pos = 0;
    t->max_piece = 4;     /* <unk> stands for one character, at most 4 bytes */
    for (int i = 0; i < n; i++) {
        size_t l = strlen(v->tokens[i]);
        /* every piece, not only those encoding can make: a bound, never short (a byte-level
         * piece stands for at most as many bytes as it has; <0xNN> for one) */
        if (l > t->max_piece) t->max_piece = (uint32_t)l;
        memcpy(t->blob + pos, v->tokens[i], l + 1);
        t->off[i] = (uint32_t)pos;
        t->len[i] = (uint32_t)l;
        pos += l + 1;
        t->scores[i] = v->scores[i];
        t->types[i] = v->types ? v->types[i] : TOKEN_NORMAL;
        if (i == t->unk && t->types[i] == TOKEN_NORMAL) t->types[i] = TOKEN_UNKNOWN;
        if ((i == t->bos || i == t->eos) && t->types[i] == TOKEN_NORMAL) t->types[i] = TOKEN_CONTROL;
        if (strstr(v->tokens[i], SPACE_SYM)) t->space_sym = 1;
    }

    for (int i = 0; i < n; i++) {
        const char *p = t->blob + t->off[i];
        /* A vocabulary without types (all NORMAL) still spells its byte tokens <0xNN>. */
        int bv = byte_piece_value(p, t->len[i]);
        if (bv >= 0 && (t->types[i] == TOKEN_BYTE || t->types[i] == TOKEN_NORMAL) && t->byte_id[bv] < 0) {
            t->byte_id[bv] = i;
            if (t->types[i] == TOKEN_NORMAL) t->types[i] = TOKEN_BYTE;
        }
        if (!mergeable(t->types[i])) continue;
        /* Duplicated pieces: the first id wins, as it is the one with the higher score
         * in a SentencePiece vocabulary (pieces are sorted by score). */
        uint32_t s = (uint32_t)hash_bytes(p, t->len[i]) & t->mask;
        for (; t->slots[s] >= 0; s = (s + 1) & t->mask)
            if (t->len[t->slots[s]] == t->len[i] && memcmp(t->blob + t->off[t->slots[s]], p, t->len[i]) == 0) break;
        if (t->slots[s] < 0) t->slots[s] = i;
    }

    /* Decoded texts: never longer than the pieces, since U+2581 (3 bytes) becomes 1. */
    pos = 0;
    for (int i = 0; i < n; i++) {
        const char *p = t->blob + t->off[i];
        t->dec_off[i] = (uint32_t)pos;
        if (t->types[i] == TOKEN_CONTROL || (t->bpe && t->types[i] == TOKEN_UNKNOWN)) {
            /* prints nothing */
        } else if (t->bpe) {
            /* byte-level: the bytes the piece stands for; a user-defined token is its text */
            size_t l = t->types[i] == TOKEN_USER ? t->len[i] : bpe_piece_bytes(p, t->len[i], t->dec + pos);
            if (t->types[i] == TOKEN_USER) memcpy(t->dec + pos, p, l);
            /* a 0x00 byte cannot live in a C string: the text stops before it */
            pos += strnlen(t->dec + pos, l);
        } else if (t->types[i] == TOKEN_BYTE) {
            int bv = byte_piece_value(p, t->len[i]);
            if (bv > 0) t->dec[pos++] = (char)bv; /* <0x00> cannot live in a C string: prints nothing */
        } else {
            for (size_t k = 0; k < t->len[i];) {
                if (t->len[i] - k >= 3 && memcmp(p + k, SPACE_SYM, 3) == 0) {
                    t->dec[pos++] = ' ';
                    k += 3;
                } else
                    t->dec[pos++] = p[k++];
            }
        }
        t->dec[pos++] = '\0';
    }
    *out = t;
    return 0;

err:
    tokenizer_free(t);
    return -1;
}

int tokenizer_bos(const tokenizer *t) { return t->bos; }
int tokenizer_eos(const tokenizer *t) { return t->eos; }
int tokenizer_vocab_size(const tokenizer *t) { return t->n; }

/* ---- encoding ---- */

/* How many bytes of the caller's text one byte of the normalised text stands for, at most.
 * SentencePiece: a space becomes U+2581 or stays, never shorter; where the pieces spell
 * spaces ' ', a U+2581 in the text (3 bytes) becomes 1. A Unicode normalizer deletes no
 * character and composes at most 4 code points (the longest canonical decomposition) into
 * one, each from a character of at most 4 bytes: 16 bytes into at least 1. */
static size_t text_per_norm_byte(const tokenizer *t) {
    size_t f = !t->bpe && !t->space_sym ? 3 : 1;
    return t->normalize != MODEL_NORM_NONE ? 16 * f : f;
}

size_t tokenizer_max_text_bytes(const tokenizer *t, int n_tokens) {
    if (n_tokens <= 0) return 0;
    size_t per_id = t->max_piece * text_per_norm_byte(t);
    return (size_t)n_tokens > SIZE_MAX / per_id ? SIZE_MAX : (size_t)n_tokens * per_id;
}

/* 1 when nl bytes of normalised text need more than room ids: each id stands for at most
 * max_piece bytes. Checked before the merges, so an over-long text costs one pass, not the
 * merges' memory (about 70 bytes a byte) and time. */
static int norm_too_long(const tokenizer *t, size_t nl, int room) {
    return room < 0 || nl / t->max_piece + (nl % t->max_piece != 0) > (size_t)room;
}

typedef struct {
    uint32_t start;         /* byte offset in the normalised text */
    uint32_t len;           /* bytes; 0 once merged into its left neighbour */
    int32_t prev, next;     /* neighbours in the live list, -1 at the ends */
} symbol;

typedef struct {
    float score;
    int32_t left, right;    /* symbol indices; left < right, so left orders by position */
    uint32_t size;          /* len(left) + len(right) when pushed: detects stale entries */
} bigram;

/* Heap order: higher score first, then the leftmost pair. */
static int bigram_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct {
    bigram *v;
    size_t n, cap;
} heap;

static void heap_push(heap *h, bigram b) {
    size_t i = h->n++; /* capacity is sized for the worst case up front */
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_before(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
}

static bigram heap_pop(heap *h) {
    bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

static void try_pair(const tokenizer *t, const char *text, const symbol *sym, int l, int r, heap *h) {
    if (l < 0 || r < 0) return;
    uint32_t size = sym[l].len + sym[r].len;
    int id = lookup(t, text + sym[l].start, size);
    if (id < 0) return;
    heap_push(h, (bigram){.score = t->scores[id], .left = l, .right = r, .size = size});
}

/* Bytes of the UTF-8 character that starts with byte c (1 for a stray continuation byte). */
static uint32_t utf8_len(unsigned char c) {
    return c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf8 ? 4 : 1;
}

/* text (*tl bytes) in the vocabulary's Unicode form: *out (utf8proc's malloc) and its *tl. */
static int unicode_normalize(const tokenizer *t, const char *text, size_t *tl, utf8proc_uint8_t **out, char *err, size_t errlen) {
    int opt = UTF8PROC_STABLE;
    switch (t->normalize) {
    case MODEL_NORM_NFC: opt |= UTF8PROC_COMPOSE; break;
    case MODEL_NORM_NFD: opt |= UTF8PROC_DECOMPOSE; break;
    case MODEL_NORM_NFKC: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case MODEL_NORM_NFKD: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    case MODEL_NORM_NONE: break;
    }
    if (*tl > (size_t)PTRDIFF_MAX / 8) return bench_errf(err, errlen, "tokenizer: text of %zu bytes is too long", *tl);
    utf8proc_ssize_t ul = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)*tl, out, (utf8proc_option_t)opt);
    if (ul < 0)
        return bench_errf(err, errlen, "tokenizer: the vocabulary's %s normalizer needs UTF-8 text: %s", model_norm_name(t->normalize),
                          utf8proc_errmsg(ul));
    *tl = (size_t)ul;
    return 0;
}

int tokenizer_encode(const tokenizer *t, const char *text, int bos, int eos,
                     int *ids, int max_ids, char *err, size_t errlen) {
    int n_ids = 0, rc = -1;
#define EMIT(x)                                                                                          \
    do {                                                                                                 \
        if (n_ids >= max_ids) {                                                                          \
            rc = tok_too_many(err, errlen, max_ids);                                                     \
            goto err;                                                                                    \
        }                                                                                                \
        ids[n_ids++] = (x);                                                                              \
    } while (0)

    char *norm = NULL;
    utf8proc_uint8_t *uni = NULL;   /* the text in the vocabulary's Unicode form (utf8proc's malloc) */
    symbol *sym = NULL;
    heap h = {0};
    if (bos && t->bos < 0) return bench_errf(err, errlen, "tokenizer: the vocabulary has no BOS token");
    if (eos && t->eos < 0) return bench_errf(err, errlen, "tokenizer: the vocabulary has no EOS token");
    if (bos) EMIT(t->bos);

    size_t tl = strlen(text);
    int room = max_ids - n_ids - (eos != 0);     /* ids left for the text */
    if (norm_too_long(t, tl / text_per_norm_byte(t), room)) {
        rc = tok_too_many(err, errlen, max_ids);
        goto err;
    }
    /* 0: tokenizer.json's normalizer (NFC for Qwen2), before anything splits the text, as
     * Hugging Face's tokenizers does */
    if (t->normalize != MODEL_NORM_NONE && tl > 0) {
        if (unicode_normalize(t, text, &tl, &uni, err, errlen)) goto err;
        text = (const char *)uni;
    }
    if (t->bpe) {
        if (norm_too_long(t, tl, room)) {
            rc = tok_too_many(err, errlen, max_ids);
            goto err;
        }
        int brc = bpe_encode(t->bpe, text, tl, ids, &n_ids, max_ids, err, errlen);
        if (brc) {
            rc = brc;
            goto err;
        }
    } else if (tl > 0) {
        if (tl > (UINT32_MAX - 3) / 3 - 1) {
            bench_errf(err, errlen, "tokenizer: text of %zu bytes is too long", tl);
            goto err;
        }
        /* 1-2: normalise; each byte grows to at most 3 (a space to U+2581) */
        norm = malloc(3 * (tl + 1));
        if (!norm) {
            bench_errf(err, errlen, "tokenizer: out of memory for %zu bytes of text", tl);
            goto err;
        }
        size_t nl = 0;
        if (t->add_space_prefix) {
            memcpy(norm, t->space_sym ? SPACE_SYM : " ", t->space_sym ? 3 : 1);
            nl = t->space_sym ? 3 : 1;
        }
        for (size_t i = 0; i < tl; i++) {
            if (text[i] == ' ' && t->space_sym) {
                memcpy(norm + nl, SPACE_SYM, 3);
                nl += 3;
            } else if (!t->space_sym && tl - i >= 3 && memcmp(text + i, SPACE_SYM, 3) == 0) {
                /* SentencePiece reads a U+2581 in the text as a space; a vocabulary
                 * exported with ' ' for it must too, or the two spellings of one
                 * vocabulary would tokenize such text differently. */
                norm[nl++] = ' ';
                i += 2;
            } else
                norm[nl++] = text[i];
        }
        if (norm_too_long(t, nl, room)) {
            rc = tok_too_many(err, errlen, max_ids);
            goto err;
        }

        /* 3: one symbol per UTF-8 character. A malformed sequence is cut at the first
         * byte that is not a continuation byte, so it never swallows the next character. */
        sym = malloc(nl * sizeof(*sym));
        h.cap = 3 * nl; /* n - 1 initial pairs plus at most 2 per merge, n - 1 merges */
        h.v = malloc(h.cap * sizeof(*h.v));
        if (!sym || !h.v) {
            bench_errf(err, errlen, "tokenizer: out of memory for %zu bytes of text", tl);
            goto err;
        }
        int ns = 0;
        for (size_t i = 0; i < nl;) {
            uint32_t l = utf8_len((unsigned char)norm[i]), k = 1;
            while (k < l && i + k < nl && ((unsigned char)norm[i + k] & 0xc0) == 0x80) k++;
            sym[ns] = (symbol){.start = (uint32_t)i, .len = k, .prev = ns - 1, .next = i + k < nl ? ns + 1 : -1};
            ns++;
            i += k;
        }

        /* 4: merge the best pair until none is a piece */
        for (int i = 0; i + 1 < ns; i++) try_pair(t, norm, sym, i, i + 1, &h);
        while (h.n) {
            bigram b = heap_pop(&h);
            symbol *l = &sym[b.left], *r = &sym[b.right];
            /* stale: one side was merged away, or grew, since this pair was pushed */
            if (l->len == 0 || r->len == 0 || l->len + r->len != b.size) continue;
            l->len += r->len;
            r->len = 0;
            l->next = r->next;
            if (r->next >= 0) sym[r->next].prev = b.left;
            try_pair(t, norm, sym, l->prev, b.left, &h);
            try_pair(t, norm, sym, b.left, l->next, &h);
        }

        /* 5: symbols to ids */
        for (int i = 0; i >= 0 && ns > 0; i = sym[i].next) {
            const char *s = norm + sym[i].start;
            int id = lookup(t, s, sym[i].len);
            if (id >= 0) {
                EMIT(id);
                continue;
            }
            /* Only a single character can miss: every merge made a piece. */
            int all_bytes = 1;
            for (uint32_t k = 0; k < sym[i].len; k++) all_bytes &= t->byte_id[(unsigned char)s[k]] >= 0;
            if (all_bytes) {
                for (uint32_t k = 0; k < sym[i].len; k++) EMIT(t->byte_id[(unsigned char)s[k]]);
            } else if (t->unk >= 0) {
                EMIT(t->unk); /* SentencePiece: one <unk> per unknown character */
            } else {
                char hex[16] = "";
                for (uint32_t k = 0, hp = 0; k < sym[i].len && k < 4; k++)
                    hp += (uint32_t)snprintf(hex + hp, sizeof(hex) - hp, "%s%02x", k ? " " : "", (unsigned char)s[k]);
                bench_errf(err, errlen, "tokenizer: character with bytes [%s]: the vocabulary cannot spell it (no byte tokens, no <unk>)", hex);
                goto err;
            }
        }
    }
    if (eos) EMIT(t->eos);
    free(uni);
    free(norm);
    free(sym);
    free(h.v);
    return n_ids;

err:
    free(uni);
    free(norm);
    free(sym);
    free(h.v);
    return rc;
#undef EMIT
}

/* ---- decoding ---- */

const char *tokenizer_decode(const tokenizer *t, int prev, int id, char *buf, size_t buflen) {
    if (id < 0 || id >= t->n) return "";
    const char *s = t->dec + t->dec_off[id];
    /* SentencePiece's prefix space belongs to the first word, not to the text */
    if (!t->bpe && prev >= 0 && prev == t->bos && s[0] == ' ') s++;
    return s;
}
