/* The vocabulary of synthetic models: deterministic SentencePiece-style pieces.
 *
 * Layout of a vocabulary of n tokens (what llama2.c's exporter and Llama-2's
 * SentencePiece model use, so every reader's fixed assumptions hold):
 *   0          <unk>             TOKEN_UNKNOWN
 *   1, 2       <s>, </s>         TOKEN_CONTROL (bos, eos)
 *   3..258     <0x00>..<0xFF>    TOKEN_BYTE, the byte fallback
 *   259..      multi-character pieces, scores 0, -1, -2, ... (higher merges first)
 *   last       single characters (U+2581, letters, digits, punctuation), lowest scores
 * Multi-character pieces come in this order until n is reached:
 *   1. "▁word" for common English words, each preceded by the prefixes it is
 *      merged through ("▁t", "▁th" before "▁the"), interleaved with common
 *      inner-word pieces ("er", "ing"), so the ranks look like learned merges;
 *   2. capitalised sentence-start words ("▁The");
 *   3. every lowercase string of length 2, 3, 4 and the "▁"-prefixed ones of
 *      length 1, 2, 3, in that order: enough for Llama-3's 128256 tokens.
 * Single characters are what the merges start from, so they are reserved first
 * and placed last, as in Llama-2's vocabulary.
 *
 * Why round trips are exact: every byte has a token, merges only join pieces
 * whose text is the concatenation, and decoding prints each piece's text with
 * U+2581 as ' '. The exceptions are SentencePiece's own: a NUL byte, and a U+2581
 * in the text (it decodes as a space).
 */
#include "synth_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/module.h"

#define SPACE_SYM "\xe2\x96\x81" /* U+2581, SentencePiece's space */
#define SV_FIRST_PIECE 259      /* 3 specials + 256 bytes */
#define SV_MAX_PIECE 64         /* bytes of the longest generated piece */

/* Common English words, most frequent first (a list written for this file). */
static const char *const sv_words[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are",
    "with", "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by",
    "not", "word", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when",
    "up", "use", "your", "how", "said", "an", "each", "she", "which", "do", "their", "time", "if",
    "will", "way", "about", "many", "then", "them", "write", "would", "like", "so", "these", "her",
    "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go", "come",
    "did", "number", "sound", "no", "most", "people", "my", "over", "know", "water", "than", "call",
    "first", "who", "may", "down", "side", "been", "now", "find", "any", "new", "work", "part", "take",
    "get", "place", "made", "live", "where", "after", "back", "little", "only", "round", "man", "year",
    "came", "show", "every", "good", "me", "give", "our", "under", "name", "very", "through", "just",
    "form", "sentence", "great", "think", "say", "help", "low", "line", "differ", "turn", "cause",
    "much", "mean", "before", "move", "right", "boy", "old", "too", "same", "tell", "does", "set",
    "three", "want", "air", "well", "also", "play", "small", "end", "put", "home", "read", "hand",
    "port", "large", "spell", "add", "even", "land", "here", "must", "big", "high", "such", "follow",
    "act", "why", "ask", "men", "change", "went", "light", "kind", "off", "need", "house", "picture",
    "try", "us", "again", "animal", "point", "mother", "world", "near", "build", "self", "earth",
    "father", "head", "stand", "own", "page", "should", "country", "found", "answer", "school", "grow",
    "study", "still", "learn", "plant", "cover", "food", "sun", "four", "between", "state", "keep",
    "eye", "never", "last", "let", "thought", "city", "tree", "cross", "farm", "hard", "start", "might",
    "story", "saw", "far", "sea", "draw", "left", "late", "run", "while", "press", "close", "night",
    "real", "life", "few", "north", "open", "seem", "together", "next", "white", "children", "begin",
    "got", "walk", "example", "ease", "paper", "group", "always", "music", "those", "both", "mark",
    "often", "letter", "until", "mile", "river", "car", "feet", "care", "second", "book", "carry",
    "took", "science", "eat", "room", "friend", "began", "idea", "fish", "mountain", "stop", "once",
    "base", "hear", "horse", "cut", "sure", "watch", "color", "face", "wood", "main", "enough", "plain",
    "girl", "usual", "young", "ready", "above", "ever", "red", "list", "though", "feel", "talk", "bird",
    "soon", "body", "dog", "family", "direct", "pose", "leave", "song", "measure", "door", "product",
    "black", "short", "numeral", "class", "wind", "question", "happen", "complete", "ship", "area",
    "half", "rock", "order", "fire", "south", "problem", "piece", "told", "knew", "pass", "since", "top",
    "whole", "king", "space", "heard", "best", "hour", "better", "true", "during", "hundred", "five",
    "remember", "step", "early", "hold", "west", "ground", "interest", "reach", "fast", "verb", "sing",
    "listen", "six", "table", "travel", "less", "morning", "ten", "simple", "several", "vowel",
    "toward", "war", "lay", "against", "pattern", "slow", "center", "love", "person", "money", "serve",
    "appear", "road", "map", "rain", "rule", "govern", "pull", "cold", "notice", "voice", "unit",
    "power", "town", "fine", "certain", "fly", "fall", "lead", "cry", "dark", "machine", "note", "wait",
    "plan", "figure", "star", "box", "noun", "field", "rest", "correct", "able", "pound", "done",
    "beauty", "drive", "stood", "contain", "front", "teach", "week", "final", "gave", "green", "oh",
    "quick", "develop", "ocean", "warm", "free", "minute", "strong", "special", "mind", "behind",
    "clear", "tail", "produce", "fact", "street", "inch", "multiply", "nothing", "course", "stay",
    "wheel", "full", "force", "blue", "object", "decide", "surface", "deep", "moon", "island", "foot",
    "system", "busy", "test", "record", "boat", "common", "gold", "possible", "plane", "stead", "dry",
    "wonder", "laugh", "thousand", "ago", "ran", "check", "game", "shape", "equate", "hot", "miss",
    "brought", "heat", "snow", "tire", "bring", "yes", "distant", "fill", "east", "paint", "language",
    "among", "happy", "sad", "mom", "dad", "play", "ball", "cat", "toy", "sky", "park", "tiny", "lily",
    "ben", "tom", "sue", "hug", "smile", "nice", "pretty", "went", "felt", "saw", "wanted", "looked",
    "played", "said", "asked", "liked", "loved", "named", "upon", "day", "once", "very",
};

/* Pieces that live inside words, most useful first; interleaved with the words. */
static const char *const sv_inner[] = {
    "er", "in", "ed", "on", "an", "en", "at", "es", "or", "re", "ing", "ly", "ar", "al", "le", "it",
    "ion", "ent", "st", "ll", "ou", "ic", "is", "as", "ri", "ro", "om", "ation", "ter", "ers", "ness",
    "ment", "ful", "less", "ous", "ive", "able", "est", "ted", "ings", "ies", "ay", "ow", "ight",
    "ound", "ook", "ould", "ame", "ake", "ice", "ide", "ome", "ong", "own", "ue", "ure", "ver", "und",
};

typedef struct sv_builder {
    model_vocab *v;
    int limit;              /* stop adding multi-character pieces at this id */
    int32_t *slots;         /* open-addressing set of piece ids, -1 empty */
    uint32_t mask;
} sv_builder;

static uint64_t sv_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ^ (h >> 31);
}

/* Adds piece s unless present or full; returns -1 only on out of memory. */
static int sv_add(sv_builder *b, const char *s) {
    model_vocab *v = b->v;
    if (v->n >= b->limit) return 0;
    uint32_t i = (uint32_t)sv_hash(s) & b->mask;
    for (; b->slots[i] >= 0; i = (i + 1) & b->mask)
        if (strcmp(v->tokens[b->slots[i]], s) == 0) return 0;
    char *p = strdup(s);
    if (!p) return -1;
    int id = v->n++;
    v->tokens[id] = p;
    v->scores[id] = 0.0f; /* set once the order is final */
    v->types[id] = TOKEN_NORMAL;
    b->slots[i] = id;
    return 0;
}

/* Adds "▁" + word (when space) or word, after each of its shorter prefixes of two or
 * more characters, so that BPE can reach it one merge at a time. */
static int sv_add_chain(sv_builder *b, const char *word, int space) {
    char buf[SV_MAX_PIECE + 4];
    size_t pre = space ? strlen(SPACE_SYM) : 0, wl = strlen(word);
    if (wl + pre >= sizeof(buf)) return 0;
    memcpy(buf, SPACE_SYM, pre);
    for (size_t k = space ? 1 : 2; k <= wl; k++) {
        memcpy(buf + pre, word, k);
        buf[pre + k] = '\0';
        if (sv_add(b, buf)) return -1;
    }
    return 0;
}

/* Every lowercase string of length len, optionally "▁"-prefixed, in lexicographic order. */
static int sv_add_strings(sv_builder *b, int len, int space) {
    char buf[16];
    size_t pre = space ? strlen(SPACE_SYM) : 0;
    memcpy(buf, SPACE_SYM, pre);
    int idx[8] = {0};
    for (;;) {
        if (b->v->n >= b->limit) return 0;
        for (int k = 0; k < len; k++) buf[pre + (size_t)k] = (char)('a' + idx[k]);
        buf[pre + (size_t)len] = '\0';
        if (sv_add(b, buf)) return -1;
        int k = len - 1;
        while (k >= 0 && ++idx[k] == 26) idx[k--] = 0;
        if (k < 0) return 0;
    }
}

int synth_vocab_build(int n, model_vocab *v, char *err, size_t errlen) {
    memset(v, 0, sizeof(*v));
    /* 26^4 + 26^3 ... strings give ~500k pieces; beyond that the order would run out. */
    if (n < SV_FIRST_PIECE || n > 400000)
        return bench_errf(err, errlen, "synth vocabulary: %d tokens asked, expected 259..400000 "
                          "(3 specials and 256 byte tokens come first)", n);
    sv_builder b = {.v = v};
    uint32_t cap = 1;
    while (cap < 2u * (uint32_t)n) cap <<= 1;
    b.mask = cap - 1;
    b.slots = malloc((size_t)cap * sizeof(*b.slots));
    v->tokens = calloc((size_t)n, sizeof(*v->tokens));
    v->scores = malloc((size_t)n * sizeof(*v->scores));
    v->types = malloc((size_t)n * sizeof(*v->types));
    if (!b.slots || !v->tokens || !v->scores || !v->types) goto oom;
    memset(b.slots, 0xff, (size_t)cap * sizeof(*b.slots));

    static const char *const special[3] = {"<unk>", "<s>", "</s>"};
    static const int32_t special_type[3] = {TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL};
    for (int i = 0; i < 3; i++) {
        if (!(v->tokens[i] = strdup(special[i]))) goto oom;
        v->scores[i] = 0.0f;
        v->types[i] = special_type[i];
        v->n++;
    }
    for (int c = 0; c < 256; c++) {
        char buf[8];
        snprintf(buf, sizeof(buf), "<0x%02X>", c);
        if (!(v->tokens[v->n] = strdup(buf))) goto oom;
        v->scores[v->n] = 0.0f;
        v->types[v->n] = TOKEN_BYTE;
        v->n++;
    }
    v->unk = 0;
    v->bos = 1;
    v->eos = 2;
    v->add_space_prefix = 1;
    if (!(v->model = strdup("llama"))) goto oom;

    /* Single characters, reserved now (as many as fit) and moved to the end below. */
    char singles[80][4];
    int n_singles = 0;
    strcpy(singles[n_singles++], SPACE_SYM);
    for (const char *c = "etaoinshrdlucmfwypvbgkjqxz"; *c; c++) singles[n_singles][0] = *c, singles[n_singles++][1] = '\0';
    for (const char *c = ".,'\"!?-:;()"; *c; c++) singles[n_singles][0] = *c, singles[n_singles++][1] = '\0';
    for (const char *c = "TAISHWBMCDLFNOPRGEYJKUVQXZ0123456789"; *c; c++) singles[n_singles][0] = *c, singles[n_singles++][1] = '\0';
    if (n_singles > n - SV_FIRST_PIECE) n_singles = n - SV_FIRST_PIECE;

    b.limit = n - n_singles;
    size_t n_words = sizeof(sv_words) / sizeof(sv_words[0]), n_inner = sizeof(sv_inner) / sizeof(sv_inner[0]);
    for (size_t w = 0, in = 0; w < n_words; w++) {
        if (sv_add_chain(&b, sv_words[w], 1)) goto oom;
        if (w % 3 == 2 && in < n_inner && sv_add_chain(&b, sv_inner[in++], 0)) goto oom;
    }
    for (size_t w = 0; w < 120 && w < n_words; w++) {
        char cap_word[SV_MAX_PIECE];
        snprintf(cap_word, sizeof(cap_word), "%s", sv_words[w]);
        if (cap_word[0] >= 'a' && cap_word[0] <= 'z') cap_word[0] = (char)(cap_word[0] - 'a' + 'A');
        if (sv_add_chain(&b, cap_word, 1)) goto oom;
    }
    for (int len = 1; len <= 4 && v->n < b.limit; len++) {
        if (len >= 2 && sv_add_strings(&b, len, 0)) goto oom;
        if (len <= 3 && sv_add_strings(&b, len, 1)) goto oom;
    }
    if (v->n < b.limit) {
        bench_errf(err, errlen, "synth vocabulary: only %d distinct pieces could be made for %d tokens", v->n, n);
        goto fail;
    }
    b.limit = n;
    for (int i = 0; i < n_singles; i++)
        if (sv_add(&b, singles[i])) goto oom;
    if (v->n != n) { /* a single character collided with an earlier piece: cannot happen */
        bench_errf(err, errlen, "synth vocabulary: made %d tokens, expected %d", v->n, n);
        goto fail;
    }
    for (int i = SV_FIRST_PIECE; i < n; i++) v->scores[i] = (float)-(i - SV_FIRST_PIECE);
    free(b.slots);
    return 0;

oom:
    bench_errf(err, errlen, "synth vocabulary: out of memory for %d tokens", n);
fail:
    free(b.slots);
    model_vocab_free(v); /* frees the n pieces made so far */
    return -1;
}
