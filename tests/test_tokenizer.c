/* Tokenizer and llama2.c vocabulary: llama.cpp's SentencePiece test set on the
 * Llama-2 vocabulary read two ways (llama2.c tokenizer.bin, GGUF), llama2.c's
 * encoding of the reference prompt, decoding, and one test per vocab file error. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/model/model.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

#define MAX_IDS 4096

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

/* A llama2.c vocabulary from the shared folder, or skip() naming the missing file. */
static tokenizer *llama2c_tokenizer(const char *rel) {
    char p[1024], err[1024] = "";
    if (!tu_shared(rel, p, sizeof(p))) {
        skip();
    }
    model_vocab v;
    if (model_vocab_load_llama2c(p, 0, &v, err, sizeof(err))) fail_msg("%s", err);
    tokenizer *t = NULL;
    if (tokenizer_create(&v, &t, err, sizeof(err))) fail_msg("%s", err);
    model_vocab_free(&v);
    return t;
}

static tokenizer *gguf_tokenizer(const char *rel) {
    char p[1024], err[1024] = "";
    if (!tu_shared(rel, p, sizeof(p))) {
        skip();
    }
    model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    if (gguf_open(p, m, err, sizeof(err))) {
        model_free(m);
        fail_msg("%s", err);
    }
    tokenizer *t = NULL;
    int rc = tokenizer_create(&m->vocab, &t, err, sizeof(err));
    model_free(m); /* the tokenizer holds its own copy */
    if (rc) fail_msg("%s", err);
    return t;
}

/* Concatenated decoding of ids[0..n), each piece following its predecessor. */
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

/* ---- llama.cpp's test set ---- */

#define SEP "\n__ggml_vocab_test__\n"

/* Runs every case of ggml-vocab-llama-spm.gguf.inp/.out through t; returns the failures.
 * Each input is the text between separator lines: the newline that ends an input's
 * last line belongs to the separator, so "" and "\n" are distinct inputs. */
static int run_llama_cpp_cases(const tokenizer *t, const char *vocab_name) {
    char pi[1024], po[1024];
    if (!tu_shared("thirdparty/ggml-vocab-llama-spm.gguf.inp", pi, sizeof(pi)) ||
        !tu_shared("thirdparty/ggml-vocab-llama-spm.gguf.out", po, sizeof(po))) {
        skip();
    }
    char *inp = slurp(pi, NULL), *out = slurp(po, NULL);
    assert_non_null(inp);
    assert_non_null(out);

    int cases = 0, failed = 0;
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
            printf("[ MISMATCH ] %s case %d\n", vocab_name, cases);
            print_escaped("    text:     ", ip);
            print_ids("    expected:", want, nw);
            if (ng < 0) printf("    got: error %s\n", err);
            else print_ids("    got:     ", got, ng);
        }
    }
    assert_int_equal(*op, '\0'); /* as many expected lines as inputs */
    printf("[ INFO     ] llama.cpp vocab test set, %s: %d of %d cases pass\n", vocab_name, cases - failed, cases);
    free(got);
    free(want);
    free(inp);
    free(out);
    assert_true(cases >= 40);
    return failed;
}

static void test_llama_cpp_set_llama2c_vocab(void **state) {
    (void)state;
    tokenizer *t = llama2c_tokenizer("models/tokenizer.bin");
    int failed = run_llama_cpp_cases(t, "tokenizer.bin (llama2.c)");
    tokenizer_free(t);
    assert_int_equal(failed, 0);
}

static void test_llama_cpp_set_gguf_vocab(void **state) {
    (void)state;
    tokenizer *t = gguf_tokenizer("thirdparty/ggml-vocab-llama-spm.gguf");
    int failed = run_llama_cpp_cases(t, "ggml-vocab-llama-spm.gguf");
    tokenizer_free(t);
    assert_int_equal(failed, 0);
}

/* ---- llama2.c's reference prompt ---- */

/* "The little dog" with BOS, as llama2.c's run.c encoded it for the oracle run:
 * the ids lead oracle/greedy_dog.ids.txt. */
static void test_tok512_reference_prompt(void **state) {
    (void)state;
    char p[1024];
    if (!tu_shared("oracle/greedy_dog.ids.txt", p, sizeof(p))) {
        skip();
    }
    int oracle[256];
    int no = tu_read_ints(p, oracle, 256);
    assert_true(no > 8);
    tokenizer *t = llama2c_tokenizer("models/tok512.bin");
    assert_int_equal(tokenizer_vocab_size(t), 512);
    int ids[64];
    char err[256] = "";
    int n = tokenizer_encode(t, "The little dog", 1, 0, ids, 64, err, sizeof(err));
    static const int want[] = {1, 291, 376, 400, 428}; /* BOS " The" " little" " do" "g" */
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want, sizeof(want));
    assert_memory_equal(ids, oracle, sizeof(want));
    /* The oracle's text is the decoding of its ids after BOS. */
    char *text = decode_all(t, ids, n);
    assert_string_equal(text, "The little dog");
    free(text);
    tokenizer_free(t);
}

/* The oracle's printed text is the decoding of its ids. */
static void test_tok512_decode_oracle(void **state) {
    (void)state;
    char p[1024], pt[1024];
    if (!tu_shared("oracle/greedy_dog.ids.txt", p, sizeof(p)) || !tu_shared("oracle/greedy_dog.txt", pt, sizeof(pt))) {
        skip();
    }
    int ids[512];
    int n = tu_read_ints(p, ids, 512);
    assert_true(n > 1);
    tokenizer *t = llama2c_tokenizer("models/tok512.bin");
    char *text = decode_all(t, ids, n);
    char *want = slurp(pt, NULL);
    assert_non_null(want);
    /* the reference printed a final newline after the text */
    size_t wl = strlen(want);
    while (wl && want[wl - 1] == '\n' && strlen(text) < wl) want[--wl] = '\0';
    assert_string_equal(text, want);
    free(want);
    free(text);
    tokenizer_free(t);
}

/* ---- decoding ---- */

static const char *samples[] = {
    "Hello world",
    " leading space and  two",
    "tabs\tand\nnewlines\n\n",
    "Führer, naïve café, Ελληνικά, русский, 日本語のテキスト",
    "emoji 🦙 and 😁 and 🚀 fall back to bytes",
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
    "   ",
    "x",
};

static void roundtrip(const tokenizer *t, const char *name) {
    int *ids = malloc(MAX_IDS * sizeof(int));
    assert_non_null(ids);
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        char err[256] = "";
        int n = tokenizer_encode(t, samples[i], 1, 0, ids, MAX_IDS, err, sizeof(err));
        if (n < 0) fail_msg("%s: %s", name, err);
        char *back = decode_all(t, ids, n);
        if (strcmp(back, samples[i]) != 0) {
            print_escaped("    text:    ", samples[i]);
            print_escaped("    decoded: ", back);
            fail_msg("%s: decode(encode(text)) differs for sample %zu", name, i);
        }
        free(back);
    }
    free(ids);
}

static void test_roundtrip_32000(void **state) {
    (void)state;
    tokenizer *t = llama2c_tokenizer("models/tokenizer.bin");
    roundtrip(t, "tokenizer.bin");
    tokenizer_free(t);
}

static void test_roundtrip_512(void **state) {
    (void)state;
    tokenizer *t = llama2c_tokenizer("models/tok512.bin");
    roundtrip(t, "tok512.bin");
    tokenizer_free(t);
}

static void test_decode_pieces(void **state) {
    (void)state;
    tokenizer *t = llama2c_tokenizer("models/tokenizer.bin");
    char buf[16];
    assert_int_equal(tokenizer_bos(t), 1);
    assert_int_equal(tokenizer_eos(t), 2);
    assert_string_equal(tokenizer_decode(t, -1, 1, buf, sizeof(buf)), ""); /* control tokens print nothing */
    assert_string_equal(tokenizer_decode(t, -1, 2, buf, sizeof(buf)), "");
    assert_string_equal(tokenizer_decode(t, -1, 13, buf, sizeof(buf)), "\n"); /* <0x0A> */
    assert_string_equal(tokenizer_decode(t, -1, 15043, buf, sizeof(buf)), " Hello");
    assert_string_equal(tokenizer_decode(t, 1, 15043, buf, sizeof(buf)), "Hello"); /* space after BOS dropped */
    assert_string_equal(tokenizer_decode(t, 1, 13, buf, sizeof(buf)), "\n");
    assert_string_equal(tokenizer_decode(t, -1, -5, buf, sizeof(buf)), "");
    assert_string_equal(tokenizer_decode(t, -1, 32000, buf, sizeof(buf)), "");
    tokenizer_free(t);
}

/* The GGUF vocabulary spells spaces U+2581: decoding turns them back into spaces. */
static void test_decode_gguf_space_symbol(void **state) {
    (void)state;
    tokenizer *t = gguf_tokenizer("thirdparty/ggml-vocab-llama-spm.gguf");
    char buf[16];
    assert_string_equal(tokenizer_decode(t, -1, 15043, buf, sizeof(buf)), " Hello");
    assert_string_equal(tokenizer_decode(t, 1, 15043, buf, sizeof(buf)), "Hello");
    assert_string_equal(tokenizer_decode(t, -1, 259, buf, sizeof(buf)), "  ");
    roundtrip(t, "ggml-vocab-llama-spm.gguf");
    tokenizer_free(t);
}

/* ---- encoding edges ---- */

/* SentencePiece reads U+2581 in the text as a space: both spellings of the Llama-2
 * vocabulary must agree on text that holds it. */
static void test_space_symbol_in_text(void **state) {
    (void)state;
    tokenizer *a = llama2c_tokenizer("models/tokenizer.bin");
    tokenizer *b = gguf_tokenizer("thirdparty/ggml-vocab-llama-spm.gguf");
    const char *text = "a\xe2\x96\x81" "b \xe2\x96\x81\xe2\x96\x81" "c";
    int ia[32], ib[32], ic[32];
    char err[256] = "";
    int na = tokenizer_encode(a, text, 0, 0, ia, 32, err, sizeof(err));
    int nb = tokenizer_encode(b, text, 0, 0, ib, 32, err, sizeof(err));
    int nc = tokenizer_encode(b, "a b   c", 0, 0, ic, 32, err, sizeof(err));
    assert_true(na > 0);
    assert_int_equal(na, nb);
    assert_memory_equal(ia, ib, (size_t)na * sizeof(int));
    assert_int_equal(na, nc);
    assert_memory_equal(ia, ic, (size_t)na * sizeof(int));
    tokenizer_free(a);
    tokenizer_free(b);
}

static void test_encode_bos_eos_and_limits(void **state) {
    (void)state;
    tokenizer *t = llama2c_tokenizer("models/tokenizer.bin");
    int ids[8];
    char err[256] = "";
    assert_int_equal(tokenizer_encode(t, "", 1, 1, ids, 8, err, sizeof(err)), 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 2);
    assert_int_equal(tokenizer_encode(t, "Hello world", 1, 1, ids, 8, err, sizeof(err)), 4);
    int want[] = {1, 15043, 3186, 2};
    assert_memory_equal(ids, want, sizeof(want));
    /* too small an output: an error, never a write past max_ids */
    assert_int_equal(tokenizer_encode(t, "Hello world", 1, 1, ids, 3, err, sizeof(err)), -TOK_ERR_TOO_MANY);
    assert_non_null(strstr(err, "more than 3 tokens"));
    /* control pieces typed in the text are text, not control tokens */
    int n = tokenizer_encode(t, "<s>", 0, 0, ids, 8, err, sizeof(err));
    assert_true(n > 0);
    for (int i = 0; i < n; i++) assert_int_not_equal(ids[i], 1);
    tokenizer_free(t);
}

/* A long prompt must not be quadratic: 400 KB of text encodes in well under a second. */
static void test_encode_long_text(void **state) {
    (void)state;
    tokenizer *t = llama2c_tokenizer("models/tokenizer.bin");
    const char *unit = "The quick brown fox jumps over the lazy dog. Émigré naïveté 🦙! ";
    size_t ul = strlen(unit), reps = 400000 / ul;
    char *text = malloc(ul * reps + 1);
    assert_non_null(text);
    for (size_t i = 0; i < reps; i++) memcpy(text + i * ul, unit, ul);
    text[ul * reps] = '\0';
    int max = (int)(ul * reps) + 2;
    int *ids = malloc((size_t)max * sizeof(int));
    assert_non_null(ids);
    char err[256] = "";
    int n = tokenizer_encode(t, text, 1, 0, ids, max, err, sizeof(err));
    if (n < 0) fail_msg("%s", err);
    char *back = decode_all(t, ids, n);
    assert_string_equal(back, text);
    free(back);
    free(ids);
    free(text);
    tokenizer_free(t);
}

/* A vocabulary without byte tokens spells an unknown character as one <unk>. */
static void test_unknown_without_byte_tokens(void **state) {
    (void)state;
    char *pieces[] = {"<unk>", "<s>", "</s>", " ", "a", "b", " a", "ab"};
    float scores[] = {0, 0, 0, -1, -2, -3, -4, -5};
    int32_t types[] = {TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL, TOKEN_NORMAL, TOKEN_NORMAL, TOKEN_NORMAL, TOKEN_NORMAL, TOKEN_NORMAL};
    model_vocab v = {.n = 8, .tokens = pieces, .scores = scores, .types = types, .bos = 1, .eos = 2, .unk = 0, .add_space_prefix = 1, .model = "llama"};
    tokenizer *t = NULL;
    char err[256] = "";
    assert_int_equal(tokenizer_create(&v, &t, err, sizeof(err)), 0);
    int ids[16];
    int n = tokenizer_encode(t, "ab€b", 0, 0, ids, 16, err, sizeof(err));
    /* " a" (score -4) merges before "ab" (-5): " a", "b", <unk> for €, "b" */
    int want[] = {6, 5, 0, 5};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want, sizeof(want));
    tokenizer_free(t);
}

/* ---- llama2.c vocabulary files ---- */

static void test_vocab_llama2c_types(void **state) {
    (void)state;
    char p[1024], err[512] = "";
    if (!tu_shared("models/tokenizer.bin", p, sizeof(p))) {
        skip();
    }
    model_vocab v;
    assert_int_equal(model_vocab_load_llama2c(p, 32000, &v, err, sizeof(err)), 0);
    assert_int_equal(v.n, 32000);
    assert_int_equal(v.types[0], TOKEN_UNKNOWN);
    assert_int_equal(v.types[1], TOKEN_CONTROL);
    assert_int_equal(v.types[2], TOKEN_CONTROL);
    for (int i = 3; i < 259; i++) assert_int_equal(v.types[i], TOKEN_BYTE);
    assert_int_equal(v.types[259], TOKEN_NORMAL);
    assert_string_equal(v.tokens[13], "<0x0A>");
    assert_string_equal(v.tokens[15043], " Hello");
    assert_int_equal(v.bos, 1);
    assert_int_equal(v.eos, 2);
    assert_int_equal(v.unk, 0);
    assert_int_equal(v.add_space_prefix, 1);
    model_vocab_free(&v);
    assert_null(v.tokens);
    model_vocab_free(&v); /* twice: a zeroed vocabulary is fine */
}

/* Writes a tokenizer.bin: max_len, then (score, len, bytes) for each piece. */
static void write_vocab(const char *path, int32_t max_len, int n, const char *const *pieces, size_t cut) {
    unsigned char buf[4096];
    size_t o = 0;
    memcpy(buf, &max_len, 4);
    o = 4;
    for (int i = 0; i < n; i++) {
        float s = (float)-i;
        int32_t l = (int32_t)strlen(pieces[i]);
        memcpy(buf + o, &s, 4);
        memcpy(buf + o + 4, &l, 4);
        memcpy(buf + o + 8, pieces[i], (size_t)l);
        o += 8 + (size_t)l;
    }
    write_file(path, buf, cut ? cut : o);
}

static void expect_vocab_error(const char *path, int expected_n, const char *what) {
    model_vocab v;
    char err[1024] = "";
    assert_int_equal(model_vocab_load_llama2c(path, expected_n, &v, err, sizeof(err)), -1);
    printf("[ INFO     ] %s\n", err);
    if (!strstr(err, path)) fail_msg("error does not name the file: %s", err);
    if (!strstr(err, what)) fail_msg("error \"%s\" does not say \"%s\"", err, what);
    assert_int_equal(v.n, 0);
    assert_null(v.tokens);
}

static const char *const small[] = {"<unk>", "<s>", "</s>", "a", "bc"};

static void test_vocab_missing_file(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/nope.bin", tmp);
    expect_vocab_error(p, 0, "No such file");
}

static void test_vocab_short_header(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/short.bin", tmp);
    write_file(p, "ab", 2);
    expect_vocab_error(p, 0, "too short for the max_token_length header");
}

static void test_vocab_bad_max_len(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/maxlen.bin", tmp);
    write_vocab(p, 0, 5, small, 0);
    expect_vocab_error(p, 0, "max_token_length 0 is not positive");
}

static void test_vocab_truncated_record(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/trunc.bin", tmp);
    /* header 4 + <unk> 13 + <s> 11 + </s> 12 + "a" 9 = 49; cut 3 bytes into the next record */
    write_vocab(p, 5, 5, small, 52);
    expect_vocab_error(p, 0, "offset 49: token 4: truncated record header");
}

static void test_vocab_len_past_eof(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/pasteof.bin", tmp);
    write_vocab(p, 5, 5, small, 58); /* "bc" record: 8 header bytes, 1 of its 2 bytes */
    expect_vocab_error(p, 0, "offset 53: token 4: length 2 runs past the end of the file");
}

static void test_vocab_len_over_max(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/overmax.bin", tmp);
    write_vocab(p, 4, 5, small, 0); /* "<unk>" is 5 bytes */
    expect_vocab_error(p, 0, "offset 8: token 0: length 5 outside 0..max_token_length 4");
}

static void test_vocab_negative_len(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/neg.bin", tmp);
    unsigned char buf[12];
    int32_t ml = 8, l = -3;
    float s = 0;
    memcpy(buf, &ml, 4);
    memcpy(buf + 4, &s, 4);
    memcpy(buf + 8, &l, 4);
    write_file(p, buf, sizeof(buf));
    expect_vocab_error(p, 0, "length -3 outside");
}

static void test_vocab_wrong_count(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/count.bin", tmp);
    write_vocab(p, 5, 5, small, 0);
    expect_vocab_error(p, 32000, "holds 5 tokens, the model's vocabulary has 32000");
    model_vocab v;
    char err[256] = "";
    assert_int_equal(model_vocab_load_llama2c(p, 5, &v, err, sizeof(err)), 0);
    assert_int_equal(v.n, 5);
    assert_string_equal(v.tokens[4], "bc");
    model_vocab_free(&v);
}

static void test_vocab_tok512_against_model(void **state) {
    (void)state;
    char p[1024];
    if (!tu_shared("models/tok512.bin", p, sizeof(p))) {
        skip();
    }
    expect_vocab_error(p, 32000, "holds 512 tokens, the model's vocabulary has 32000");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_cpp_set_llama2c_vocab),
        cmocka_unit_test(test_llama_cpp_set_gguf_vocab),
        cmocka_unit_test(test_tok512_reference_prompt),
        cmocka_unit_test(test_tok512_decode_oracle),
        cmocka_unit_test(test_roundtrip_32000),
        cmocka_unit_test(test_roundtrip_512),
        cmocka_unit_test(test_decode_pieces),
        cmocka_unit_test(test_decode_gguf_space_symbol),
        cmocka_unit_test(test_space_symbol_in_text),
        cmocka_unit_test(test_encode_bos_eos_and_limits),
        cmocka_unit_test(test_encode_long_text),
        cmocka_unit_test(test_unknown_without_byte_tokens),
        cmocka_unit_test(test_vocab_llama2c_types),
        cmocka_unit_test(test_vocab_missing_file),
        cmocka_unit_test(test_vocab_short_header),
        cmocka_unit_test(test_vocab_bad_max_len),
        cmocka_unit_test(test_vocab_truncated_record),
        cmocka_unit_test(test_vocab_len_past_eof),
        cmocka_unit_test(test_vocab_len_over_max),
        cmocka_unit_test(test_vocab_negative_len),
        cmocka_unit_test(test_vocab_wrong_count),
        cmocka_unit_test(test_vocab_tok512_against_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
