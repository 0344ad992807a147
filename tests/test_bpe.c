/* Byte-level BPE and the vocabulary-only GGUF files: llama.cpp's tokenizer test sets
 * (thirdparty/vocab: gpt-2, starcoder, falcon, deepseek-llm, deepseek-coder, mpt,
 * refact, and phi-3 which is SentencePiece), decode(encode(text)) == text, the
 * pre-tokenizer's split rules on hand-checked texts (llama-bpe, qwen2: no vocabulary
 * file), a hand-written tokenizer.json, and one test per class of bad input. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engines/core/model/model.h"
#include "engines/core/model/model_write.h"
#include "engines/core/tokenizer/pretok.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "engines/core/tokenizer/unicode.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

#define MAX_IDS 8192

static char tmp[512];

static int setup(void **state) {
    (void)state;
    return tu_tmpdir(tmp, sizeof(tmp)) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    tu_rmtree(tmp);
    return 0;
}

/* ---- helpers ---- */

static char *slurp(const char *path, size_t *len) {
    char err[256];
    return ut_slurp(path, SIZE_MAX, len, err, sizeof(err));
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* The vocabulary of a GGUF file (no tensors needed). */
static model *open_vocab(const char *path) {
    char err[1024] = "";
    model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    if (gguf_open(path, m, err, sizeof(err))) {
        model_free(m);
        fail_msg("%s", err);
    }
    return m;
}

static tokenizer *vocab_tokenizer(const char *name) {
    char rel[256], p[1024], err[1024] = "";
    snprintf(rel, sizeof(rel), "thirdparty/vocab/ggml-vocab-%s.gguf", name);
    if (!tu_shared(rel, p, sizeof(p))) skip();
    model *m = open_vocab(p);
    tokenizer *t = NULL;
    int rc = tokenizer_create(&m->vocab, &t, err, sizeof(err));
    model_free(m);
    if (rc) fail_msg("%s: %s", p, err);
    return t;
}

static char *decode_all(const tokenizer *t, const int *ids, int n) {
    size_t cap = 64, len = 0;
    char *s = malloc(cap), buf[64];
    assert_non_null(s);
    for (int i = 0; i < n; i++) {
        const char *p = tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i], buf, sizeof(buf));
        size_t l = strlen(p);
        if (len + l + 1 > cap) {
            while (len + l + 1 > cap) cap *= 2;
            s = realloc(s, cap);
            assert_non_null(s);
        }
        memcpy(s + len, p, l);
        len += l;
    }
    s[len] = '\0';
    return s;
}

static void print_escaped(const char *label, const char *s) {
    printf("%s\"", label);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20) printf("\\x%02x", c);
        else putchar(c);
    }
    printf("\"\n");
}

static void print_ids(const char *label, const int *ids, int n) {
    printf("%s", label);
    for (int i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");
}

/* ---- llama.cpp's test sets ---- */

#define SEP "\n__ggml_vocab_test__\n"

/* Runs every case of ggml-vocab-NAME.gguf.inp/.out; each input is the text between
 * separator lines (the newline ending an input belongs to the separator). Also checks
 * that every input decodes back to itself. Returns the failures. */
static int run_set(const char *name) {
    char ri[256], ro[256], pi[1024], po[1024];
    snprintf(ri, sizeof(ri), "thirdparty/vocab/ggml-vocab-%s.gguf.inp", name);
    snprintf(ro, sizeof(ro), "thirdparty/vocab/ggml-vocab-%s.gguf.out", name);
    if (!tu_shared(ri, pi, sizeof(pi)) || !tu_shared(ro, po, sizeof(po))) skip();
    tokenizer *t = vocab_tokenizer(name);
    /* a gpt2-model vocabulary must never be tokenized as SentencePiece */
    assert_string_equal(tokenizer_kind(t), strcmp(name, "phi-3") ? "byte-level BPE" : "sentencepiece");
    char *inp = slurp(pi, NULL), *out = slurp(po, NULL);
    assert_non_null(inp);
    assert_non_null(out);
    int cases = 0, failed = 0, roundtrips = 0;
    char *ip = inp, *op = out;
    int *got = malloc(MAX_IDS * sizeof(int)), *want = malloc(MAX_IDS * sizeof(int));
    assert_non_null(got);
    assert_non_null(want);
    for (char *sep; (sep = strstr(ip, SEP)); ip = sep + strlen(SEP)) {
        *sep = '\0';
        char *nl = strchr(op, '\n');
        if (!nl) fail_msg("%s: fewer expected lines than inputs (%d inputs so far)", po, cases + 1);
        *nl = '\0';
        int nw = 0, k;
        for (char *q = op; nw < MAX_IDS && sscanf(q, "%d%n", &want[nw], &k) == 1; q += k) nw++;
        op = nl + 1;

        char err[512] = "";
        int ng = tokenizer_encode(t, ip, 0, 0, got, MAX_IDS, err, sizeof(err));
        cases++;
        if (ng != nw || memcmp(got, want, (size_t)nw * sizeof(int)) != 0) {
            failed++;
            printf("[ MISMATCH ] %s case %d\n", name, cases);
            print_escaped("    text:     ", ip);
            print_ids("    expected:", want, nw);
            if (ng < 0) printf("    got: error %s\n", err);
            else print_ids("    got:     ", got, ng);
            continue;
        }
        /* SentencePiece adds a leading space that its decoding keeps without a BOS before it */
        if (!strcmp(tokenizer_kind(t), "byte-level BPE")) {
            char *back = decode_all(t, got, ng);
            if (strcmp(back, ip) != 0) {
                failed++;
                printf("[ MISMATCH ] %s case %d: decode(encode(text)) != text\n", name, cases);
                print_escaped("    text: ", ip);
                print_escaped("    back: ", back);
            } else
                roundtrips++;
            free(back);
        }
    }
    assert_int_equal(*op, '\0'); /* as many expected lines as inputs */
    printf("[ INFO     ] llama.cpp vocab test set %s (%s): %d of %d cases give the expected ids; %d decode back exactly\n",
           name, tokenizer_kind(t), cases - failed, cases, roundtrips);
    free(got);
    free(want);
    free(inp);
    free(out);
    tokenizer_free(t);
    assert_true(cases >= 20);
    return failed;
}

#define SET_TEST(fn, name) \
    static void fn(void **state) { (void)state; assert_int_equal(run_set(name), 0); }
SET_TEST(test_set_gpt2, "gpt-2")
SET_TEST(test_set_starcoder, "starcoder")
SET_TEST(test_set_falcon, "falcon")
SET_TEST(test_set_deepseek_llm, "deepseek-llm")
SET_TEST(test_set_deepseek_coder, "deepseek-coder")
SET_TEST(test_set_mpt, "mpt")
SET_TEST(test_set_refact, "refact")
SET_TEST(test_set_phi3, "phi-3")


/* ---- decode(encode(text)) on a long text with every kind of character ---- */

static void test_roundtrip_long_and_invalid_utf8(void **state) {
    (void)state;
    tokenizer *t = vocab_tokenizer("gpt-2");
    /* invalid UTF-8 (a stray continuation byte, a truncated sequence) keeps its bytes */
    const char *unit = "The quick brown fox's 12345 jumps!!  \n\n\tÉmigré naïveté 🦙 東京 \x80 \xe6\x9d x\xc3 ";
    size_t ul = strlen(unit), reps = 200000 / ul;
    char *text = malloc(ul * reps + 1);
    assert_non_null(text);
    for (size_t i = 0; i < reps; i++) memcpy(text + i * ul, unit, ul);
    text[ul * reps] = '\0';
    int max = (int)(ul * reps) + 2;
    int *ids = malloc((size_t)max * sizeof(int));
    assert_non_null(ids);
    char err[256] = "";
    int n = tokenizer_encode(t, text, 0, 0, ids, max, err, sizeof(err));
    if (n < 0) fail_msg("%s", err);
    char *back = decode_all(t, ids, n);
    assert_string_equal(back, text);
    /* the unit tokenizes the same each time it repeats: the split never crosses units
     * here since each ends in a space followed by a letter */
    printf("[ INFO     ] gpt-2: %zu bytes -> %d tokens, decoded back exactly\n", ul * reps, n);
    free(back);
    free(ids);
    free(text);
    tokenizer_free(t);
}

/* Random input through two families: no crash, exact round trip. gpt-2 gets random bytes
 * (1..255, so a C string; mostly invalid UTF-8), deepseek-llm random code points: its
 * vocabulary spells some bytes only with user-defined tokens ("\xc3\xb9" is one), which
 * decode as their text, so a lone byte 0xF9 cannot come back from it. */
static void test_random_text(void **state) {
    (void)state;
    const char *names[] = {"gpt-2", "deepseek-llm"};
    for (int v = 0; v < 2; v++) {
        tokenizer *t = vocab_tokenizer(names[v]);
        size_t n = 1 << 16;
        char *text = malloc(n + 4);
        assert_non_null(text);
        uint64_t x = 0x9E3779B97F4A7C15ull + (uint64_t)v;
        for (size_t i = 0; i < n;) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            if (v == 0) {
                text[i++] = (char)(1 + (x >> 33) % 255);
                continue;
            }
            /* a code point: half ASCII, half anywhere in U+0080..U+10FFFF but surrogates */
            uint32_t cp = (x >> 63) ? 1 + (uint32_t)(x >> 33) % 127 : 0x80 + (uint32_t)(x >> 33) % (0x110000 - 0x80);
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            i += unicode_encode(cp, text + i);
        }
        text[n] = '\0';
        for (size_t i = n; i > n - 4; i--) /* a code point cut at the end would be invalid */
            if (((unsigned char)text[i - 1] & 0xC0) != 0x80) {
                if ((unsigned char)text[i - 1] >= 0xC0) text[i - 1] = '\0';
                break;
            }
        int *ids = malloc((n + 1) * sizeof(int));
        assert_non_null(ids);
        char err[256] = "";
        int k = tokenizer_encode(t, text, 0, 0, ids, (int)n + 1, err, sizeof(err));
        if (k < 0) fail_msg("%s: %s", names[v], err);
        char *back = decode_all(t, ids, k);
        assert_string_equal(back, text);
        free(back);
        free(ids);
        free(text);
        tokenizer_free(t);
    }
}

/* llama-bpe and qwen2 have test texts but no vocabulary: their rules at least split every
 * text into pieces that put it back together, with no error. (The ids are not checked.) */
static void test_untested_families_split(void **state) {
    (void)state;
    const char *sets[] = {"llama-bpe", "qwen2"};
    for (int s = 0; s < 2; s++) {
        char rel[256], p[1024], err[512] = "";
        snprintf(rel, sizeof(rel), "thirdparty/vocab/ggml-vocab-%s.gguf.inp", sets[s]);
        if (!tu_shared(rel, p, sizeof(p))) skip();
        char *inp = slurp(p, NULL);
        assert_non_null(inp);
        pretok *pt = NULL;
        if (pretok_create_named(sets[s], &pt, err, sizeof(err))) fail_msg("%s", err);
        int cases = 0;
        for (char *ip = inp, *sep; (sep = strstr(ip, SEP)); ip = sep + strlen(SEP)) {
            *sep = '\0';
            size_t len = strlen(ip), ncp = 0, total = 0;
            uint32_t *cps = malloc((len + 1) * sizeof(*cps));
            assert_non_null(cps);
            for (size_t i = 0, cl; i < len; i += cl) cps[ncp++] = unicode_decode(ip + i, len - i, &cl);
            size_t *lens = NULL, np = 0;
            if (pretok_split(pt, cps, ncp, &lens, &np, err, sizeof(err))) fail_msg("%s", err);
            for (size_t k = 0; k < np; k++) {
                assert_true(lens[k] > 0);
                total += lens[k];
            }
            assert_int_equal(total, ncp);
            free(lens);
            free(cps);
            cases++;
        }
        printf("[ INFO     ] %s: %d test texts split (no vocabulary file: ids unchecked)\n", sets[s], cases);
        assert_true(cases >= 20);
        pretok_free(pt);
        free(inp);
    }
}

/* ---- the pre-tokenizer's split rules ---- */

/* Splits text by a family's rules and compares with want (NULL-terminated). */
static void expect_split(const char *family, const char *text, const char *const *want) {
    pretok *p = NULL;
    char err[512] = "";
    if (pretok_create_named(family, &p, err, sizeof(err))) fail_msg("%s", err);
    size_t len = strlen(text), ncp = 0;
    uint32_t *cps = malloc((len + 1) * sizeof(*cps));
    size_t *at = malloc((len + 1) * sizeof(*at));
    assert_non_null(cps);
    assert_non_null(at);
    for (size_t i = 0, cl; i < len; i += cl) {
        at[ncp] = i;
        cps[ncp++] = unicode_decode(text + i, len - i, &cl);
    }
    at[ncp] = len;
    size_t *lens = NULL, np = 0;
    if (pretok_split(p, cps, ncp, &lens, &np, err, sizeof(err))) fail_msg("%s", err);
    size_t c = 0, k = 0;
    for (; k < np; k++) {
        size_t from = at[c], to = at[c + lens[k]];
        c += lens[k];
        if (!want[k]) fail_msg("%s: piece %zu \"%.*s\" is extra", family, k, (int)(to - from), text + from);
        if (strlen(want[k]) != to - from || memcmp(want[k], text + from, to - from))
            fail_msg("%s: piece %zu is \"%.*s\", expected \"%s\"", family, k, (int)(to - from), text + from, want[k]);
    }
    if (want[k]) fail_msg("%s: %zu pieces, expected more (next \"%s\")", family, np, want[k]);
    free(lens);
    free(cps);
    free(at);
    pretok_free(p);
}

/* Worked by hand from each family's regex (leftmost-first alternation, greedy). */
static void test_split_rules(void **state) {
    (void)state;
    const char *text = "Hello world's 12345\n\n  foo!!\nWE'RE";
    expect_split("gpt-2", text, (const char *const[]){"Hello", " world", "'s", " 12345", "\n\n ", " foo", "!!", "\n", "WE",
                                                        "'", "RE", NULL});
    /* Llama 3: contractions case-insensitive, digits in threes, newlines kept with the
     * punctuation before them */
    expect_split("llama-bpe", text, (const char *const[]){"Hello", " world", "'s", " ", "123", "45", "\n\n", " ", " foo",
                                                            "!!\n", "WE", "'RE", NULL});
    /* Qwen2: the same but one digit per piece */
    expect_split("qwen2", text, (const char *const[]){"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", "\n\n", " ",
                                                        " foo", "!!\n", "WE", "'RE", NULL});
    /* StarCoder: each digit alone first, then gpt-2's rules on what is left */
    expect_split("starcoder", "ab 42", (const char *const[]){"ab", " ", "4", "2", NULL});
    /* Falcon: punctuation runs first, then gpt-2's, then digits in threes */
    expect_split("falcon", "x+=1234;", (const char *const[]){"x", "+=", "123", "4", ";", NULL});
    /* deepseek-coder: line breaks alone, letters with one space, digits one by one; the CJK
     * rule comes after the letter rule and cuts the space off " 東京" again */
    expect_split("deepseek-coder", "a\nb 東京12", (const char *const[]){"a", "\n", "b", " ", "東京", "1", "2", NULL});
    /* Unicode classes: ï is a letter, 🦙 a symbol */
    expect_split("gpt-2", "naïve 🦙🦙 x", (const char *const[]){"naïve", " 🦙🦙", " x", NULL});
}

static void test_regex_semantics(void **state) {
    (void)state;
    char err[512] = "";
    struct { const char *pat, *text; size_t want[8]; } cases[] = {
        {"a|ab", "ab", {1, 1, 0}},          /* leftmost-first: "a", then "b" unmatched */
        {"ab|a", "ab", {2, 0}},
        {"\\s+(?!\\S)", "  x", {1, 2, 0}},  /* the last space stays with x */
        {"x{2,3}", "xxxxxxx", {3, 3, 1, 0}},
        {"\\s+$", "a  \n", {1, 3, 0}},      /* $ is the end of the piece */
        {"[^a-c]+", "abzzc", {2, 2, 1, 0}},
        {"(?i:ab)", "xAbAB", {1, 2, 2, 0}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pretok *p = NULL;
        const char *pat = cases[i].pat;
        if (pretok_create(&pat, 1, &p, err, sizeof(err))) fail_msg("%s", err);
        uint32_t cps[16];
        size_t n = 0;
        for (const char *c = cases[i].text; *c; c++) cps[n++] = (unsigned char)*c;
        size_t *lens = NULL, np = 0;
        assert_int_equal(pretok_split(p, cps, n, &lens, &np, err, sizeof(err)), 0);
        size_t k = 0;
        for (; k < np; k++) {
            if (lens[k] != cases[i].want[k]) fail_msg("pattern %s on \"%s\": piece %zu has %zu code points, expected %zu", pat,
                                                      cases[i].text, k, lens[k], cases[i].want[k]);
        }
        assert_int_equal(cases[i].want[k], 0);
        free(lens);
        pretok_free(p);
    }
}

/* One test per class of pattern the matcher refuses: an error naming the pattern, never a guess. */
static void test_regex_refused(void **state) {
    (void)state;
    struct { const char *pat, *msg; } bad[] = {
        {"\\p{Lu}", "one-letter classes"},
        {"(?=a)", "this group is not supported"},
        {"a**", "nothing to repeat"},
        {"(ab", "missing )"},
        {"ab)", "unbalanced )"},
        {"[a-", "unterminated [...]"},
        {"[z-a]", "range out of order"},
        {"(a*)*", "can match empty"},
        {"\\d+", "escape is not supported"},
        {"a+?", "lazy and possessive"},
        {"(?!ab)", "one character or class"},
        {"x{99999999}", "repetition count too large"},
        {"x{9000}", "too many instructions"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pretok *p = NULL;
        char err[512] = "";
        assert_int_equal(pretok_create(&bad[i].pat, 1, &p, err, sizeof(err)), -1);
        assert_null(p);
        if (!strstr(err, bad[i].msg) || !strstr(err, bad[i].pat)) fail_msg("pattern %s: error \"%s\", expected \"%s\"", bad[i].pat, err, bad[i].msg);
    }
    pretok *p = NULL;
    char err[512] = "";
    assert_int_equal(pretok_create_named("nonesuch", &p, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "\"nonesuch\""));
    assert_non_null(strstr(err, "deepseek-coder"));
}

/* A pattern of tens of thousands of one-literal alternatives ("w0|w1|...", as a
 * tokenizer.json may hold) is refused at the node limit after a parse linear in it: each
 * literal is a character class, and the class array grew by one realloc a class, which
 * ASan's realloc (always a move) made quadratic: 50,000 alternatives took 342 s under ASan
 * and 0.4 s in the release build, now 1.3 s and 0.4 s. The alarm turns that back into a
 * failure, not a hang (a regression is only slow where realloc moves, as under ASan). */
static void test_regex_many_literals(void **state) {
    (void)state;
    alarm(120);
    enum { ALTS = 50000 };
    char *pat = malloc((size_t)ALTS * 8 + 1);
    assert_non_null(pat);
    size_t at = 0;
    for (int i = 0; i < ALTS; i++) at += (size_t)sprintf(pat + at, "%sw%d", i ? "|" : "", i);
    pretok *p = NULL;
    char err[512] = "";
    const char *pp = pat;
    assert_int_equal(pretok_create(&pp, 1, &p, err, sizeof(err)), -1);
    assert_null(p);
    if (!strstr(err, "more than 32768 atoms, groups and alternatives")) fail_msg("%s", err);
    free(pat);
    alarm(0);
}

/* Hostile patterns (a tokenizer.json is input): each is refused with an error naming
 * the limit, in bounded time and stack. Before the limits, the first two overflowed the
 * stack (recursion per group; a VLA per alternative) and the third never ended (an empty
 * group emits no instruction, so the instruction limit never tripped). */
static void test_regex_hostile(void **state) {
    (void)state;
    alarm(120); /* the old compiler looped ~10^12 times on the third: a hang fails the test */
    enum { DEEP = 200000, ALTS = 3000000 };
    char *deep = malloc(2 * DEEP + 2), *alts = malloc(ALTS + 1);
    assert_non_null(deep);
    assert_non_null(alts);
    memset(deep, '(', DEEP);
    deep[DEEP] = 'a';
    memset(deep + DEEP + 1, ')', DEEP);
    deep[2 * DEEP + 1] = '\0';
    memset(alts, '|', ALTS);
    alts[ALTS] = '\0';
    struct { const char *pat, *msg; } bad[] = {
        {deep, "groups nested deeper than 64"},
        {alts, "more than 32768 atoms, groups and alternatives"},
        {"((){999999}){999999}", "expand to more than 65536 compiled atoms"},
        {"(?:(?:){60000}){2}", "expand to more than 65536 compiled atoms"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pretok *p = NULL;
        char err[512] = "";
        assert_int_equal(pretok_create(&bad[i].pat, 1, &p, err, sizeof(err)), -1);
        assert_null(p);
        if (!strstr(err, bad[i].msg) || !strstr(err, "pre-tokenizer pattern \""))
            fail_msg("hostile pattern %zu: error \"%s\", expected \"%s\"", i, err, bad[i].msg);
        assert_null(strchr(err, '\n'));
    }
    /* inside the limits: 64 nested groups, 2000 alternatives (6000 instructions) */
    memset(deep, '(', 64);
    deep[64] = 'a';
    memset(deep + 65, ')', 64);
    deep[129] = '\0';
    for (int i = 0; i < 2000; i++) alts[2 * i] = 'a', alts[2 * i + 1] = '|';
    alts[3999] = '\0';
    const char *ok[] = {deep, alts};
    for (int i = 0; i < 2; i++) {
        pretok *p = NULL;
        char err[512] = "";
        if (pretok_create(&ok[i], 1, &p, err, sizeof(err))) fail_msg("%s", err);
        uint32_t cps[3] = {'a', 'b', 'a'};
        size_t *lens = NULL, np = 0;
        assert_int_equal(pretok_split(p, cps, 3, &lens, &np, err, sizeof(err)), 0);
        assert_int_equal(np, 3);
        free(lens);
        pretok_free(p);
    }
    deep[0] = '('; /* 65 levels */
    memmove(deep + 1, deep, 129);
    deep[130] = ')';
    deep[131] = '\0';
    pretok *p = NULL;
    char err[512] = "";
    const char *d65 = deep;
    assert_int_equal(pretok_create(&d65, 1, &p, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "nested deeper than 64"));
    free(deep);
    free(alts);
    alarm(0);
}

static size_t split_text(const pretok *p, const char *text, size_t **lens, char *err, size_t errlen, int *rc) {
    size_t n = strlen(text), np = 0;
    uint32_t *cps = malloc((n + 1) * sizeof(*cps));
    assert_non_null(cps);
    for (size_t i = 0; i < n; i++) cps[i] = (unsigned char)text[i];
    *rc = pretok_split(p, cps, n, lens, &np, err, errlen);
    free(cps);
    return np;
}

/* a*b|a on N letters a: each one-letter match was found only after the a*b thread had
 * scanned to the end, N^2/2 code points (29 s at 50k). The scan is counted and bounded:
 * the split fails with an error, after at most 2^20 + 64 N code points scanned. */
static void test_regex_rescan_bounded(void **state) {
    (void)state;
    alarm(300); /* the quadratic scan takes minutes under the sanitizers: fail rather than hang */
    enum { N = 50000 };
    char *text = malloc(N + 2);
    assert_non_null(text);
    memset(text, 'a', N);
    text[N] = '\0';
    const char *pat = "a*b|a";
    pretok *p = NULL;
    char err[512] = "";
    if (pretok_create(&pat, 1, &p, err, sizeof(err))) fail_msg("%s", err);
    size_t *lens = NULL;
    int rc;
    split_text(p, text, &lens, err, sizeof(err), &rc);
    if (rc != -1) fail_msg("a*b|a on %d letters: split, expected an error", N);
    assert_null(lens);
    if (!strstr(err, "\"a*b|a\"") || !strstr(err, "50000 code points") || !strstr(err, "steps"))
        fail_msg("error \"%s\"", err);
    /* short texts still split, with leftmost-first semantics */
    size_t np = split_text(p, "aab", &lens, err, sizeof(err), &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(np, 1);
    assert_int_equal(lens[0], 3);
    free(lens);
    np = split_text(p, "aaaa", &lens, err, sizeof(err), &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(np, 4);
    free(lens);
    pretok_free(p);
    /* the families' patterns on a long text of runs that make them look ahead
     * (spaces, newlines, digits, punctuation) stay inside the budget */
    static const char *const unit[] = {"     \n\n  x", "1234567 ", "!!!??  ", "hello world ", "\t\t\r\n   \n y"};
    for (size_t i = 0, k = 0; i + 16 < N; k++) {
        const char *u = unit[k % 5];
        size_t l = strlen(u);
        memcpy(text + i, u, l);
        i += l;
        text[i] = '\0';
    }
    static const char *const fam[] = {"gpt-2", "llama3", "qwen2", "deepseek-llm", "falcon"};
    for (int f = 0; f < 5; f++) {
        if (pretok_create_named(fam[f], &p, err, sizeof(err))) fail_msg("%s", err);
        split_text(p, text, &lens, err, sizeof(err), &rc);
        if (rc) fail_msg("%s: %s", fam[f], err);
        free(lens);
        pretok_free(p);
    }
    free(text);
    alarm(0);
}

/* ---- Unicode tables ---- */

static void test_unicode(void **state) {
    (void)state;
    struct { uint32_t cp; int cls; } c[] = {
        {'A', UCAT_L}, {'z', UCAT_L}, {'5', UCAT_N}, {'!', UCAT_P}, {'$', UCAT_S}, {' ', UCAT_Z}, {0, UCAT_C},
        {0xE9, UCAT_L}, {0x301, UCAT_M}, {0xB2, UCAT_N}, {0x4E00, UCAT_L}, {0x9FA5, UCAT_L}, {0xAC00, UCAT_L},
        {0x1F999, UCAT_S}, {0x0378, UCAT_NONE}, {0xE000, UCAT_C}, {0x10FFFD, UCAT_C}, {0x110000, UCAT_NONE},
        {0x2028, UCAT_Z}, {0x200B, UCAT_C}, {0xFF01, UCAT_P},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        if (unicode_class(c[i].cp) != c[i].cls) fail_msg("U+%04X: class %d, expected %d", c[i].cp, unicode_class(c[i].cp), c[i].cls);
    assert_true(unicode_is_space(' ') && unicode_is_space('\n') && unicode_is_space(0x85) && unicode_is_space(0x3000));
    assert_false(unicode_is_space(0x200B) || unicode_is_space('x') || unicode_is_space(0x1C));
    /* byte-level alphabet: a bijection with the printable bytes as themselves */
    int seen[512] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t cp = unicode_byte_to_cp((uint8_t)b);
        assert_true(cp < 512);
        assert_int_equal(seen[cp]++, 0);
        assert_int_equal(unicode_cp_to_byte(cp), b);
    }
    assert_int_equal(unicode_byte_to_cp(' '), 0x120);   /* Ġ */
    assert_int_equal(unicode_byte_to_cp('\n'), 0x10A);  /* Ċ */
    assert_int_equal(unicode_byte_to_cp('A'), 'A');
    assert_int_equal(unicode_cp_to_byte(0x144), -1);
    size_t l;
    assert_int_equal(unicode_decode("\xc3\xa9", 2, &l), 0xE9);
    assert_int_equal(l, 2);
    assert_int_equal(unicode_decode("\xc3", 1, &l), UNICODE_REPLACEMENT);
    assert_int_equal(l, 1);
    assert_int_equal(unicode_decode("\xc0\xaf", 2, &l), UNICODE_REPLACEMENT); /* overlong */
    assert_int_equal(unicode_decode("\xed\xa0\x80", 3, &l), UNICODE_REPLACEMENT); /* surrogate */
    assert_int_equal(unicode_decode("\xf0\x9f\xa6\x99", 4, &l), 0x1F999);
    assert_int_equal(l, 4);
}

/* ---- a hand-built GGUF vocabulary, and its failure classes ---- */

typedef struct {
    unsigned char *d;
    size_t n, cap;
    int n_kv;
} gb;

static void put(gb *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->d = realloc(b->d, b->cap);
        assert_non_null(b->d);
    }
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void u32(gb *b, uint32_t v) { put(b, &v, 4); }
static void u64(gb *b, uint64_t v) { put(b, &v, 8); }
static void str(gb *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
enum { T_U32 = 4, T_I32 = 5, T_STRING = 8, T_ARRAY = 9 };
static void kv_str(gb *b, const char *k, const char *v) { str(b, k); u32(b, T_STRING); str(b, v); b->n_kv++; }
static void kv_u32(gb *b, const char *k, uint32_t v) { str(b, k); u32(b, T_U32); u32(b, v); b->n_kv++; }
static void kv_strs(gb *b, const char *k, const char *const *v, int n) {
    str(b, k);
    u32(b, T_ARRAY);
    u32(b, T_STRING);
    u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) str(b, v[i]);
    b->n_kv++;
}

static const char *const toks[] = {"a", "b", "c", "ab", "abc", "\xc4\xa0", "\xc4\xa0" "ab", "<|end|>", "<sep>"};
static const int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 3, 4};
#define N_TOKS 9

/* What the vocabulary holds; a field left NULL (or -1) is not written. */
typedef struct {
    const char *model, *pre;
    const char *const *merges;
    int n_merges;
    int pre_u32;    /* write tokenizer.ggml.pre as a u32 */
    const char *const *toks; /* NULL: toks[] above */
    const int32_t *types;
    int n_toks;
} vspec;

static void write_vocab(const char *path, const vspec *s, void (*extra)(gb *)) {
    gb body = {0}, b = {0};
    if (s->model) kv_str(&body, "tokenizer.ggml.model", s->model);
    if (s->pre) {
        if (s->pre_u32) kv_u32(&body, "tokenizer.ggml.pre", 7);
        else kv_str(&body, "tokenizer.ggml.pre", s->pre);
    }
    int nt = s->toks ? s->n_toks : N_TOKS;
    kv_strs(&body, "tokenizer.ggml.tokens", s->toks ? s->toks : toks, nt);
    str(&body, "tokenizer.ggml.token_type");
    u32(&body, T_ARRAY);
    u32(&body, T_I32);
    u64(&body, (uint64_t)nt);
    put(&body, s->toks ? s->types : types, (size_t)nt * sizeof(int32_t));
    body.n_kv++;
    if (s->merges) kv_strs(&body, "tokenizer.ggml.merges", s->merges, s->n_merges);
    if (extra) extra(&body);
    put(&b, "GGUF", 4);
    u32(&b, 3);
    u64(&b, 0);
    u64(&b, (uint64_t)body.n_kv);
    put(&b, body.d, body.n);
    write_file(path, b.d, b.n);
    free(body.d);
    free(b.d);
}

static const char *const good_merges[] = {"a b", "ab c", "\xc4\xa0 ab"};

/* Opens the file and builds its tokenizer; returns the tokenizer or NULL with err. */
static tokenizer *try_tokenizer(const char *path, unsigned flags, char *err, size_t errlen) {
    model *m = NULL;
    tokenizer *t = NULL;
    if (model_open_vocab(path, &m, err, errlen) == 0) tokenizer_create_ex(&m->vocab, flags, &t, err, errlen);
    model_free(m);
    return t;
}

static void test_gguf_vocab_small(void **state) {
    (void)state;
    char path[600], err[1024] = "";
    snprintf(path, sizeof(path), "%s/v.gguf", tmp);
    write_vocab(path, &(vspec){.model = "gpt2", .pre = "gpt-2", .merges = good_merges, .n_merges = 3}, NULL);
    tokenizer *t = try_tokenizer(path, 0, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    assert_string_equal(tokenizer_warning(t), "");
    int ids[16];
    /* "abc" merges a+b (rank 0) then ab+c (rank 1); " ab" merges a+b then Ġ+ab; <sep> is
     * user-defined and cut out before the split; a control token typed is text */
    int n = tokenizer_encode(t, "abc ab<sep>ab", 0, 0, ids, 16, err, sizeof(err));
    if (n < 0) fail_msg("%s", err);
    int want[] = {4, 6, 8, 3};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want, sizeof(want));
    char *back = decode_all(t, ids, n);
    assert_string_equal(back, "abc ab<sep>ab");
    free(back);
    /* a byte with no token and no <unk>: an error naming the byte */
    assert_int_equal(tokenizer_encode(t, "abz", 0, 0, ids, 16, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "byte 0x7a"));
    assert_int_equal(tokenizer_encode(t, "<|end|>", 0, 0, ids, 16, err, sizeof(err)), -1);
    assert_int_equal(tokenizer_encode(t, "abc abc", 0, 0, ids, 1, err, sizeof(err)), -TOK_ERR_TOO_MANY);
    assert_non_null(strstr(err, "more than 1 tokens"));
    tokenizer_free(t);
}

/* User-defined tokens are cut out longest first over the whole text, as llama.cpp does,
 * not leftmost-longest: "bcd" wins over an earlier "ab" that overlaps it. */
static void test_user_token_order(void **state) {
    (void)state;
    static const char *const tk[] = {"a", "b", "c", "d", "cd", "ab", "bcd"};
    static const int32_t ty[] = {1, 1, 1, 1, 1, 4, 4};
    static const char *const mg[] = {"c d"};
    char path[600], err[1024] = "";
    snprintf(path, sizeof(path), "%s/user.gguf", tmp);
    write_vocab(path, &(vspec){.model = "gpt2", .pre = "gpt-2", .merges = mg, .n_merges = 1, .toks = tk, .types = ty, .n_toks = 7}, NULL);
    tokenizer *t = try_tokenizer(path, 0, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    struct { const char *text; int n; int want[8]; } c[] = {
        {"abcd", 2, {0, 6}},          /* a [bcd] */
        {"abab", 2, {5, 5}},          /* [ab][ab] */
        {"bcdbcdcd", 3, {6, 6, 4}},   /* [bcd][bcd] then c+d merged */
        {"cab", 2, {2, 5}},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        int ids[8];
        int n = tokenizer_encode(t, c[i].text, 0, 0, ids, 8, err, sizeof(err));
        if (n != c[i].n || memcmp(ids, c[i].want, (size_t)n * sizeof(int))) fail_msg("\"%s\": %d ids (%d %d %d), expected %d", c[i].text, n,
                                                                                  ids[0], n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1, c[i].n);
        char *back = decode_all(t, ids, n);
        assert_string_equal(back, c[i].text);
        free(back);
    }
    tokenizer_free(t);
}

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl) && line[kl] == ':') v = atol(line + kl + 1);
    if (f) fclose(f);
    return v;
}

/* User-defined tokens a, aa, ... on a long run of a: the cut is the same as before (the
 * longest first, leftmost), and the memory it takes does not grow with the number of
 * occurrences. Before, every occurrence of every token was stored: 299 tokens on 20k
 * letters were 5.9M entries (95 MB, 134 MB with the doubling); 2000 on 50k took 3.1 GB. */
static void test_user_tokens_memory(void **state) {
    (void)state;
    enum { NU = 300, LEN = 20000 };
    static const char *const mg[] = {"a a"};
    char *tk[NU];
    int32_t ty[NU];
    for (int i = 0; i < NU; i++) {
        tk[i] = malloc((size_t)i + 2);
        assert_non_null(tk[i]);
        memset(tk[i], 'a', (size_t)i + 1);
        tk[i][i + 1] = '\0';
        ty[i] = i == 0 ? 1 : 4; /* "a" normal, aa .. a x300 user-defined */
    }
    char path[600], err[1024] = "";
    snprintf(path, sizeof(path), "%s/user_many.gguf", tmp);
    write_vocab(path, &(vspec){.model = "gpt2", .pre = "gpt-2", .merges = mg, .n_merges = 1, .toks = (const char *const *)tk,
                               .types = ty, .n_toks = NU}, NULL);
    for (int i = 0; i < NU; i++) free(tk[i]);
    tokenizer *t = try_tokenizer(path, 0, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    char *text = malloc(LEN + 1);
    assert_non_null(text);
    memset(text, 'a', LEN);
    text[LEN] = '\0';
    /* the peak resident set from here on (Linux: writing 5 to clear_refs resets VmHWM) */
    FILE *cr = fopen("/proc/self/clear_refs", "w");
    int can_measure = cr && fputs("5", cr) >= 0;
    if (cr && fclose(cr)) can_measure = 0;
    long rss0 = status_kib("VmRSS");
    int ids[128];
    int n = tokenizer_encode(t, text, 0, 0, ids, 128, err, sizeof(err));
    long hwm = status_kib("VmHWM");
    if (n < 0) fail_msg("%s", err);
    /* 66 x a(300), then a(200) for the 200 letters left */
    assert_int_equal(n, LEN / NU + 1);
    for (int i = 0; i < LEN / NU; i++) assert_int_equal(ids[i], NU - 1);
    assert_int_equal(ids[LEN / NU], LEN % NU - 1);
    free(text);
    tokenizer_free(t);
    if (!can_measure || rss0 < 0 || hwm < 0) skip();
    if (hwm - rss0 > 32 * 1024) fail_msg("cutting user tokens out of %d bytes raised the resident set by %ld KiB (limit 32 MiB)", LEN, hwm - rss0);
}

static void expect_vocab_error(const char *name, const vspec *s, void (*extra)(gb *), unsigned flags, const char *msg) {
    char path[600], err[1024] = "";
    snprintf(path, sizeof(path), "%s/%s.gguf", tmp, name);
    write_vocab(path, s, extra);
    tokenizer *t = try_tokenizer(path, flags, err, sizeof(err));
    if (t) fail_msg("%s: opened, expected an error with \"%s\"", name, msg);
    if (!strstr(err, msg)) fail_msg("%s: error \"%s\", expected \"%s\"", name, err, msg);
    if (!strstr(err, path) && !strstr(err, "tokenizer")) fail_msg("%s: error \"%s\" names neither the file nor the tokenizer", name, err);
}

static void merges_u32(gb *b) {
    str(b, "tokenizer.ggml.merges");
    u32(b, T_ARRAY);
    u32(b, T_U32);
    u64(b, 2);
    u32(b, 1);
    u32(b, 2);
    b->n_kv++;
}
static void merges_count_past_end(gb *b) {
    str(b, "tokenizer.ggml.merges");
    u32(b, T_ARRAY);
    u32(b, T_STRING);
    u64(b, 1ull << 40);
    str(b, "a b");
    b->n_kv++;
}
static void merge_length_past_end(gb *b) {
    str(b, "tokenizer.ggml.merges");
    u32(b, T_ARRAY);
    u32(b, T_STRING);
    u64(b, 1);
    u64(b, 1ull << 40); /* one merge of 2^40 bytes */
    put(b, "a b", 3);
    b->n_kv++;
}
static void merges_twice(gb *b) { kv_strs(b, "tokenizer.ggml.merges", good_merges, 1); }

/* One test per failure class of the vocabulary's tokenizer keys. */
static void test_gguf_vocab_bad(void **state) {
    (void)state;
    const vspec ok = {.model = "gpt2", .pre = "gpt-2", .merges = good_merges, .n_merges = 3};
    vspec s;
    s = ok, s.merges = NULL;
    expect_vocab_error("merges_type", &s, merges_u32, 0, "tokenizer.ggml.merges is an array of u32, expected string");
    expect_vocab_error("merges_count", &s, merges_count_past_end, 0, "runs past the end of the file");
    expect_vocab_error("merge_length", &s, merge_length_past_end, 0, "runs past the end of the file");
    expect_vocab_error("merges_absent", &s, NULL, 0, "has no merges");
    expect_vocab_error("merges_twice", &ok, merges_twice, 0, "duplicate key tokenizer.ggml.merges");
    s = ok, s.merges = (const char *const[]){"a b", "abc"}, s.n_merges = 2;
    expect_vocab_error("merge_shape", &s, NULL, 0, "tokenizer.ggml.merges[1] is \"abc\", expected two pieces separated by a space");
    s = ok, s.merges = (const char *const[]){"a "}, s.n_merges = 1;
    expect_vocab_error("merge_empty_right", &s, NULL, 0, "tokenizer.ggml.merges[0] is \"a \"");
    s = ok, s.model = "bert";
    expect_vocab_error("model_unknown", &s, NULL, 0, "tokenizer.ggml.model \"bert\" is not supported; supported: \"llama\"");
    s = ok, s.model = NULL;
    expect_vocab_error("model_absent", &s, NULL, 0, "tokenizer.ggml.model is absent");
    s = ok, s.pre = "nonesuch";
    expect_vocab_error("pre_unknown", &s, NULL, 0, "tokenizer.ggml.pre \"nonesuch\" is not known; known: gpt-2");
    s = ok, s.pre = NULL;
    expect_vocab_error("pre_absent", &s, NULL, 0, "tokenizer.ggml.pre is absent");
    s = ok, s.pre_u32 = 1;
    expect_vocab_error("pre_type", &s, NULL, 0, "tokenizer.ggml.pre has type u32, expected string");
}

/* --tokenizer-fallback: tokenizes, and the warning names what is not honoured. */
static void test_fallback_warns(void **state) {
    (void)state;
    char path[600], err[1024] = "";
    snprintf(path, sizeof(path), "%s/f.gguf", tmp);
    write_vocab(path, &(vspec){.model = "gpt2", .pre = "nonesuch", .merges = good_merges, .n_merges = 3}, NULL);
    tokenizer *t = try_tokenizer(path, TOKENIZER_FALLBACK, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    assert_non_null(strstr(tokenizer_warning(t), "\"nonesuch\" is not known"));
    assert_non_null(strstr(tokenizer_warning(t), "gpt-2's rules"));
    int ids[8];
    assert_int_equal(tokenizer_encode(t, "abc ab", 0, 0, ids, 8, err, sizeof(err)), 2);
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 6);
    tokenizer_free(t);
    write_vocab(path, &(vspec){.model = "bert", .pre = "gpt-2", .merges = good_merges, .n_merges = 3}, NULL);
    t = try_tokenizer(path, TOKENIZER_FALLBACK, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    assert_non_null(strstr(tokenizer_warning(t), "\"bert\" is not supported"));
    assert_non_null(strstr(tokenizer_warning(t), "SentencePiece"));
    tokenizer_free(t);
}

/* ---- a hand-written tokenizer.json ---- */

#define TJ_HEAD "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n" \
    " \"added_tokens\": [{\"id\": 7, \"content\": \"<sep>\", \"special\": false},\n" \
    "                  {\"id\": 8, \"content\": \"<|end|>\", \"special\": true}],\n"
#define TJ_PRE " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [\n" \
    "   {\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\p{N}\"}, \"behavior\": \"Isolated\", \"invert\": false},\n" \
    "   {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}]},\n" \
    " \"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"},\n"
#define TJ_MODEL(merges) " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"byte_fallback\": false,\n" \
    "   \"ignore_merges\": false,\n" \
    "   \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3, \"abc\": 4, \"\\u0120\": 5, \"\\u0120ab\": 6,\n" \
    "             \"1\": 9, \"2\": 10, \"12\": 11},\n" \
    "   \"merges\": " merges "}}\n"

static int fill_zero(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen) {
    (void)user, (void)i, (void)err, (void)errlen;
    memset(dst, 0, (size_t)nbytes);
    return 0;
}

static tokenizer *json_tokenizer(const char *name, const char *json, unsigned flags, char *err, size_t errlen) {
    char dir[600], path[700];
    snprintf(dir, sizeof(dir), "%s/%s", tmp, name);
    char cmd[800];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    write_file(path, json, strlen(json));
    return try_tokenizer(dir, flags, err, errlen); /* the directory: tokenizer.json beside the weights */
}

static void test_tokenizer_json(void **state) {
    (void)state;
    const char *forms[] = {
        TJ_HEAD " \"normalizer\": null,\n" TJ_PRE TJ_MODEL("[\"a b\", \"ab c\", \"\\u0120 ab\", \"1 2\"]"),
        /* tokenizers >= 0.20 write each merge as a pair */
        TJ_HEAD " \"normalizer\": null,\n" TJ_PRE TJ_MODEL("[[\"a\", \"b\"], [\"ab\", \"c\"], [\"\\u0120\", \"ab\"], [\"1\", \"2\"]]"),
    };
    for (int f = 0; f < 2; f++) {
        char err[1024] = "";
        tokenizer *t = json_tokenizer(f ? "pairs" : "strings", forms[f], 0, err, sizeof(err));
        if (!t) fail_msg("%s", err);
        assert_string_equal(tokenizer_kind(t), "byte-level BPE");
        int ids[16];
        /* the Split on \p{N} keeps 1 and 2 apart, so their merge never applies */
        int n = tokenizer_encode(t, "abc ab<sep>12", 0, 0, ids, 16, err, sizeof(err));
        if (n < 0) fail_msg("%s", err);
        int want[] = {4, 6, 7, 9, 10};
        assert_int_equal(n, 5);
        assert_memory_equal(ids, want, sizeof(want));
        char *back = decode_all(t, ids, n);
        assert_string_equal(back, "abc ab<sep>12");
        free(back);
        tokenizer_free(t);
    }
    /* beside safetensors weights: the model's own reader takes the same path */
    {
        char d[600], tj[700], err[1024] = "";
        const char *pieces[12] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11"};
        float scores[12] = {0};
        int32_t ty[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
        model_vocab v = {.n = 12, .tokens = (char **)pieces, .scores = scores, .types = ty, .bos = -1, .eos = -1, .unk = -1};
        model_config cfg = {.dim = 2, .hidden_dim = 4, .n_layers = 1, .n_heads = 1, .n_kv_heads = 1, .vocab_size = 12,
                            .seq_len = 8, .seq_len_header = 8, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .rope = ROPE_INTERLEAVED};
        model_tensor te = {.name = (char *)"token_embd.weight", .dtype = BENCH_F32, .n_dims = 2, .ne = {2, 12}, .nbytes = 96};
        model_write_src src = {.name = "bpe", .cfg = &cfg, .vocab = &v, .n_tensors = 1, .tensors = &te, .fill = fill_zero};
        snprintf(d, sizeof(d), "%s/st", tmp);
        if (safetensors_write(d, &src, 0, err, sizeof(err))) fail_msg("%s", err);
        snprintf(tj, sizeof(tj), "%s/tokenizer.json", d);
        write_file(tj, forms[0], strlen(forms[0])); /* replaces the SentencePiece-style one written */
        model *m = calloc(1, sizeof(*m));
        assert_non_null(m);
        if (safetensors_open(d, m, err, sizeof(err))) fail_msg("%s", err);
        assert_string_equal(m->vocab.model, "gpt2");
        tokenizer *t = NULL;
        if (tokenizer_create(&m->vocab, &t, err, sizeof(err))) fail_msg("%s", err);
        model_free(m);
        int ids[16], want[] = {4, 6, 7, 9, 10};
        assert_int_equal(tokenizer_encode(t, "abc ab<sep>12", 0, 0, ids, 16, err, sizeof(err)), 5);
        assert_memory_equal(ids, want, sizeof(want));
        tokenizer_free(t);
    }
    /* a normalizer bench does not apply: refused naming it, or a warning under fallback
     * (NFC and the other Unicode forms are applied: test_unicode_normalizers) */
    const char *lower = TJ_HEAD " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"},"
                        " {\"type\": \"Lowercase\"}]},\n" TJ_PRE TJ_MODEL("[\"a b\"]");
    char err[1024] = "";
    assert_null(json_tokenizer("lower", lower, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "normalizer Lowercase"));
    tokenizer *t = json_tokenizer("lower2", lower, TOKENIZER_FALLBACK, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    assert_non_null(strstr(tokenizer_warning(t), "normalizer Lowercase"));
    tokenizer_free(t);
    /* malformed merges and patterns: errors naming the file and the field */
    assert_null(json_tokenizer("badmerge", TJ_HEAD " \"normalizer\": null,\n" TJ_PRE TJ_MODEL("[\"a b\", 5]"), 0, err, sizeof(err)));
    assert_non_null(strstr(err, "model.merges[1]"));
    assert_non_null(strstr(err, "tokenizer.json"));
    assert_null(json_tokenizer("nomerges", TJ_HEAD " \"normalizer\": null,\n" TJ_PRE TJ_MODEL("{}"), 0, err, sizeof(err)));
    assert_non_null(strstr(err, "model.merges is missing or not an array"));
    const char *badre = TJ_HEAD " \"normalizer\": null,\n"
        " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?<=a)b\"}, \"behavior\": \"Isolated\"},\n"
        " \"decoder\": {\"type\": \"ByteLevel\"},\n" TJ_MODEL("[\"a b\"]");
    assert_null(json_tokenizer("badre", badre, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "(?<=a)b"));
    /* hostile patterns: the errors name the file and the field, when compiled and when run */
    const char *deepre = TJ_HEAD " \"normalizer\": null,\n"
        " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))\"}, \"behavior\": \"Isolated\"},\n"
        " \"decoder\": {\"type\": \"ByteLevel\"},\n" TJ_MODEL("[\"a b\"]");
    assert_null(json_tokenizer("deepre", deepre, 0, err, sizeof(err)));
    if (!strstr(err, "deepre/tokenizer.json: pre_tokenizer: pre-tokenizer pattern") || !strstr(err, "nested deeper than 64")) fail_msg("%s", err);
    const char *rescan = TJ_HEAD " \"normalizer\": null,\n"
        " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a*b|a\"}, \"behavior\": \"Isolated\"},\n"
        " \"decoder\": {\"type\": \"ByteLevel\"},\n" TJ_MODEL("[\"a b\"]");
    t = json_tokenizer("rescan", rescan, 0, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    enum { NA = 50000 };
    char *as = malloc(NA + 1);
    assert_non_null(as);
    memset(as, 'a', NA);
    as[NA] = '\0';
    int *ids = malloc(NA * sizeof(*ids));
    assert_non_null(ids);
    alarm(300);
    assert_int_equal(tokenizer_encode(t, as, 0, 0, ids, NA, err, sizeof(err)), -1);
    alarm(0);
    if (!strstr(err, "rescan/tokenizer.json: pre_tokenizer: pre-tokenizer pattern \"a*b|a\"")) fail_msg("%s", err);
    free(as);
    free(ids);
    tokenizer_free(t);
}

/* bench tokenize opens a vocabulary-only file: ids on stdout, errors with a status. */
static void test_cli_tokenize(void **state) {
    (void)state;
    char p[1024], out[700];
    if (!tu_shared("thirdparty/vocab/ggml-vocab-gpt-2.gguf", p, sizeof(p))) skip();
    snprintf(out, sizeof(out), "%s/ids.txt", tmp);
    assert_int_equal(tu_bench(out, "tokenize --model '%s' --text 'Hello world' 2>/dev/null", p), 0);
    int ids[8];
    assert_int_equal(tu_read_ints(out, ids, 8), 2);
    assert_int_equal(ids[0], 15496); /* "Hello", " world" in GPT-2's vocabulary */
    assert_int_equal(ids[1], 995);
    assert_int_equal(tu_bench("/dev/null", "tokenize --model '%s/none.gguf' --text x 2>/dev/null", tmp), 1);
    assert_int_equal(tu_bench("/dev/null", "tokenize --model '%s' 2>/dev/null", p), 2);
}

/* ---- Unicode normalizers (Qwen2's tokenizer.json asks for NFC) ---- */

/* GPT-2's byte-to-character map of byte-level BPE: printable Latin-1 bytes are themselves,
 * the others U+0100 onwards in byte order. Appends b's character, JSON-escaped, to out. */
static size_t bl_put(unsigned char b, char *out) {
    int cp, n = 0;
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae) cp = b;
    else {
        cp = 256;
        for (int c = 0; c < b; c++) cp += !((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae);
    }
    if (cp == '"' || cp == '\\') out[n++] = '\\';
    if (cp < 0x80) out[n++] = (char)cp;
    else {
        out[n++] = (char)(0xc0 | (cp >> 6));
        out[n++] = (char)(0x80 | (cp & 0x3f));
    }
    return (size_t)n;
}

static size_t bl_str(const char *bytes, char *out) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)bytes; *p; p++) n += bl_put(*p, out + n);
    out[n] = 0;
    return n;
}

/* A Qwen2-style tokenizer.json (its Split regex, then ByteLevel without a regex) with the
 * 256 byte tokens as ids 0-255 and merges that make "café" (259), "한국" (264) and "fine"
 * (267) single tokens in their composed forms only; `norm` is the normalizer's JSON. */
static void write_norm_tj(const char *dir, const char *norm) {
    static const char *const merges[][2] = {
        {"\xc3", "\xa9"}, {"c", "a"}, {"ca", "f"}, {"caf", "\xc3\xa9"},                       /* é, café */
        {"\xed", "\x95"}, {"\xed\x95", "\x9c"}, {"\xea", "\xb5"}, {"\xea\xb5", "\xad"},      /* 한, 국 */
        {"\xed\x95\x9c", "\xea\xb5\xad"}, {"f", "i"}, {"fi", "n"}, {"fin", "e"}};
    size_t cap = 1 << 16, n = 0;
    char *j = malloc(cap), l[64], r[64];
    assert_non_null(j);
    n += (size_t)snprintf(j + n, cap - n,
        "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": %s,\n"
        " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [\n"
        "   {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
        "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false},\n"
        "   {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}]},\n"
        " \"decoder\": {\"type\": \"ByteLevel\"},\n"
        " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"byte_fallback\": false, \"ignore_merges\": false,\n"
        "   \"vocab\": {", norm);
    for (int b = 0; b < 256; b++) {
        j[n++] = '"';
        n += bl_put((unsigned char)b, j + n);
        n += (size_t)snprintf(j + n, cap - n, "\": %d, ", b);
    }
    for (int m = 0; m < 12; m++) {
        char both[16];
        snprintf(both, sizeof(both), "%s%s", merges[m][0], merges[m][1]);
        bl_str(both, l);
        n += (size_t)snprintf(j + n, cap - n, "\"%s\": %d%s", l, 256 + m, m < 11 ? ", " : "},\n   \"merges\": [");
    }
    for (int m = 0; m < 12; m++) {
        bl_str(merges[m][0], l);
        bl_str(merges[m][1], r);
        n += (size_t)snprintf(j + n, cap - n, "[\"%s\", \"%s\"]%s", l, r, m < 11 ? ", " : "]}}\n");
    }
    assert_true(n < cap);
    char cmd[800], path[700];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    write_file(path, j, n);
    free(j);
}

/* Each normalizer against the ids Hugging Face's tokenizers (tokenizers.js 0.2.0, Node 20)
 * gives for the same tokenizer.json: composed and decomposed Latin (café, Å three ways),
 * Hangul syllables and their jamo, the ligature ﬁ (compatibility), and marks reordered. */
static void test_unicode_normalizers(void **state) {
    (void)state;
    static const char *const texts[] = {
        "caf\xc3\xa9",                                                  /* café, composed */
        "cafe\xcc\x81",                                                 /* e + U+0301 */
        "\xed\x95\x9c\xea\xb5\xad",                                     /* 한국 */
        "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab\xe1\x84\x80\xe1\x85\xae\xe1\x86\xa8", /* its jamo */
        "\xef\xac\x81ne caf\xc3\xa9",                                   /* U+FB01 ne café */
        "\xc3\x85 \xe2\x84\xab A\xcc\x8a",                              /* U+00C5, U+212B, A + U+030A */
        "x\xcc\xa3\xcc\x87 \xe1\xb8\x8d\xcc\x87",                       /* x + dot below + dot above, ḍ + dot above */
    };
#define J(...) {__VA_ARGS__, -1}
    static const struct { const char *name, *norm; int want[7][20]; } cases[] = {
        {"none", "null", {J(259), J(258, 101, 204, 129), J(264),
                          J(225, 132, 146, 225, 133, 161, 225, 134, 171, 225, 132, 128, 225, 133, 174, 225, 134, 168),
                          J(239, 172, 129, 110, 101, 32, 259), J(195, 133, 32, 226, 132, 171, 32, 65, 204, 138),
                          J(120, 204, 163, 204, 135, 32, 225, 184, 141, 204, 135)}},
        {"nfc", "{\"type\": \"NFC\"}", {J(259), J(259), J(264), J(264), J(239, 172, 129, 110, 101, 32, 259),
                                        J(195, 133, 32, 195, 133, 32, 195, 133), J(225, 186, 139, 204, 163, 32, 225, 184, 141, 204, 135)}},
        {"nfd", "{\"type\": \"NFD\"}", {J(258, 101, 204, 129), J(258, 101, 204, 129),
                                        J(225, 132, 146, 225, 133, 161, 225, 134, 171, 225, 132, 128, 225, 133, 174, 225, 134, 168),
                                        J(225, 132, 146, 225, 133, 161, 225, 134, 171, 225, 132, 128, 225, 133, 174, 225, 134, 168),
                                        J(239, 172, 129, 110, 101, 32, 258, 101, 204, 129), J(65, 204, 138, 32, 65, 204, 138, 32, 65, 204, 138),
                                        J(120, 204, 163, 204, 135, 32, 100, 204, 163, 204, 135)}},
        {"nfkc", "{\"type\": \"NFKC\"}", {J(259), J(259), J(264), J(264), J(267, 32, 259), J(195, 133, 32, 195, 133, 32, 195, 133),
                                          J(225, 186, 139, 204, 163, 32, 225, 184, 141, 204, 135)}},
        {"nfkd", "{\"type\": \"NFKD\"}", {J(258, 101, 204, 129), J(258, 101, 204, 129),
                                          J(225, 132, 146, 225, 133, 161, 225, 134, 171, 225, 132, 128, 225, 133, 174, 225, 134, 168),
                                          J(225, 132, 146, 225, 133, 161, 225, 134, 171, 225, 132, 128, 225, 133, 174, 225, 134, 168),
                                          J(267, 32, 258, 101, 204, 129), J(65, 204, 138, 32, 65, 204, 138, 32, 65, 204, 138),
                                          J(120, 204, 163, 204, 135, 32, 100, 204, 163, 204, 135)}},
        /* a Sequence: NFC after NFKD is NFKC */
        {"seq", "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKD\"}, {\"type\": \"NFC\"}]}",
         {J(259), J(259), J(264), J(264), J(267, 32, 259), J(195, 133, 32, 195, 133, 32, 195, 133),
          J(225, 186, 139, 204, 163, 32, 225, 184, 141, 204, 135)}},
    };
#undef J
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char dir[600], err[1024] = "";
        snprintf(dir, sizeof(dir), "%s/norm_%s", tmp, cases[c].name);
        write_norm_tj(dir, cases[c].norm);
        tokenizer *t = try_tokenizer(dir, 0, err, sizeof(err));
        if (!t) fail_msg("%s: %s", cases[c].name, err);
        assert_string_equal(tokenizer_warning(t), "");
        for (int k = 0; k < 7; k++) {
            int ids[32], n = tokenizer_encode(t, texts[k], 0, 0, ids, 32, err, sizeof(err)), w = 0;
            if (n < 0) fail_msg("%s: %s", cases[c].name, err);
            while (cases[c].want[k][w] >= 0) w++;
            int same = n == w && !memcmp(ids, cases[c].want[k], (size_t)n * sizeof(int));
            if (!same) {
                fprintf(stderr, "%s, text %d: %d ids:", cases[c].name, k, n);
                for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n");
            }
            assert_true(same);
        }
        /* text that is not UTF-8 cannot be normalized: refused naming the normalizer */
        int ids[32];
        int n = tokenizer_encode(t, "caf\xff", 0, 0, ids, 32, err, sizeof(err));
        if (c == 0) assert_true(n > 0); /* byte-level BPE spells any bytes */
        else {
            assert_int_equal(n, -1);
            assert_non_null(strstr(err, "normalizer needs UTF-8 text"));
        }
        tokenizer_free(t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_gpt2),
        cmocka_unit_test(test_set_starcoder),
        cmocka_unit_test(test_set_falcon),
        cmocka_unit_test(test_set_deepseek_llm),
        cmocka_unit_test(test_set_deepseek_coder),
        cmocka_unit_test(test_set_mpt),
        cmocka_unit_test(test_set_refact),
        cmocka_unit_test(test_set_phi3),
        cmocka_unit_test(test_roundtrip_long_and_invalid_utf8),
        cmocka_unit_test(test_random_text),
        cmocka_unit_test(test_untested_families_split),
        cmocka_unit_test(test_split_rules),
        cmocka_unit_test(test_regex_semantics),
        cmocka_unit_test(test_regex_refused),
        cmocka_unit_test(test_regex_hostile),
        cmocka_unit_test(test_regex_many_literals),
        cmocka_unit_test(test_regex_rescan_bounded),
        cmocka_unit_test(test_unicode),
        cmocka_unit_test(test_gguf_vocab_small),
        cmocka_unit_test(test_gguf_vocab_bad),
        cmocka_unit_test(test_user_token_order),
        cmocka_unit_test(test_user_tokens_memory),
        cmocka_unit_test(test_fallback_warns),
        cmocka_unit_test(test_tokenizer_json),
        cmocka_unit_test(test_unicode_normalizers),
        cmocka_unit_test(test_cli_tokenize),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
