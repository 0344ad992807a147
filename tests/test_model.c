/* model_open on bad llama2.c inputs: each failure class gives one clear error
 * naming the file and the problem. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/model/model.h"
#include "tests/lib/testutil.h"

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

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* Expects model_open to fail with an error that names the file and contains `what`. */
static void expect_error(const char *path, const char *tok, const char *what) {
    model *m = (model *)1;
    char err[1024] = "";
    assert_int_equal(model_open(path, tok, &m, err, sizeof(err)), -1);
    assert_null(m);
    printf("[ INFO     ] %s\n", err);
    if (!strstr(err, path) && !(tok && strstr(err, tok))) fail_msg("error does not name the file: %s", err);
    if (!strstr(err, what)) fail_msg("error \"%s\" does not say \"%s\"", err, what);
}

static void test_missing_file(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/nope.bin", tmp);
    expect_error(p, NULL, "No such file");
}

static void test_short_header(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/short.bin", tmp);
    write_file(p, "abc", 3);
    expect_error(p, NULL, "shorter than the 28-byte llama2.c header");
}

static void test_header_nonsense(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/bad.bin", tmp);
    int32_t h[7] = {64, 172, 5, 8, 4, 512, -3}; /* negative seq_len */
    write_file(p, h, sizeof(h));
    expect_error(p, NULL, "seq_len");
}

static void test_truncated_weights(void **state) {
    (void)state;
    char src[512], p[600];
    if (!tu_shared("models/stories260K.bin", src, sizeof(src))) skip();
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    static char buf[600000];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/trunc.bin", tmp);
    write_file(p, buf, n); /* about half of the 1 MB checkpoint */
    expect_error(p, NULL, "truncated");
}

static void test_shape_overflow(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/huge.bin", tmp);
    int32_t h[7] = {1 << 24, 1 << 24, 1 << 24, 1 << 20, 1 << 20, 1 << 24, 1 << 24};
    write_file(p, h, sizeof(h));
    expect_error(p, NULL, "bytes"); /* needs ~2^90 bytes: refused before anything is allocated */
}

static void test_tokenizer_size_mismatch(void **state) {
    (void)state;
    char model_path[512], tok[512];
    if (!tu_shared("models/stories260K.bin", model_path, sizeof(model_path)) ||
        !tu_shared("models/tokenizer.bin", tok, sizeof(tok)))
        skip();
    /* the 32000-token Llama vocabulary against a 512-token model */
    expect_error(model_path, tok, "512");
}

static void test_good_model_shape(void **state) {
    (void)state;
    char model_path[512], tok[512];
    if (!tu_shared("models/stories260K.bin", model_path, sizeof(model_path)) ||
        !tu_shared("models/tok512.bin", tok, sizeof(tok)))
        skip();
    model *m;
    char err[512];
    assert_int_equal(model_open(model_path, tok, &m, err, sizeof(err)), 0);
    assert_int_equal(m->format, MODEL_FORMAT_LLAMA2C);
    assert_int_equal(m->cfg.dim, 64);
    assert_int_equal(m->cfg.hidden_dim, 172);
    assert_int_equal(m->cfg.n_layers, 5);
    assert_int_equal(m->cfg.n_heads, 8);
    assert_int_equal(m->cfg.n_kv_heads, 4);
    assert_int_equal(m->cfg.vocab_size, 512);
    assert_int_equal(m->cfg.seq_len, 512);
    assert_int_equal(m->n_tensors, 2 + 9 * 5); /* shared classifier: no output.weight */
    assert_null(model_find(m, "output.weight"));
    assert_int_equal(m->vocab.n, 512);
    const model_tensor *wk = model_find(m, "blk.4.attn_k.weight");
    assert_non_null(wk);
    assert_int_equal(wk->ne[0], 64);
    assert_int_equal(wk->ne[1], 32);
    model_free(m);
}

/* A llama2.c header of 10000 layers of dim 2 with the bytes it implies (1.3 MB): it
 * passed the size check and validation (after 41 s of registering 90k tensors); a
 * layer count past MODEL_MAX_LAYERS is refused from the header now. */
static void test_absurd_layers(void **state) {
    (void)state;
    char p[600];
    snprintf(p, sizeof(p), "%s/layers.bin", tmp);
    int32_t h[7] = {2, 2, 10000, 1, 1, 4, 4};
    size_t need = 28 + 4 * (4 * 2 + 2 + 4 * 1 + 10000 * (2 * 2 + 2 * 4 + 2 * 4 + 3 * 4)) + 64;
    unsigned char *b = calloc(1, need);
    assert_non_null(b);
    memcpy(b, h, sizeof(h));
    write_file(p, b, need);
    free(b);
    expect_error(p, NULL, "header field n_layers (offset 8) is 10000, expected 1..1024");
}

/* rms epsilon and rope theta: positive is not enough, inf passed (x > 0). */
static void test_config_not_finite(void **state) {
    (void)state;
    char model_path[512], tok[512], err[512];
    if (!tu_shared("models/stories260K.bin", model_path, sizeof(model_path)) ||
        !tu_shared("models/tok512.bin", tok, sizeof(tok)))
        skip();
    model *m;
    assert_int_equal(model_open(model_path, tok, &m, err, sizeof(err)), 0);
    assert_int_equal(model_validate(m, err, sizeof(err)), 0);
    m->cfg.norm_eps = INFINITY;
    assert_int_equal(model_validate(m, err, sizeof(err)), -1);
    if (!strstr(err, "rms epsilon inf") || !strstr(err, "finite") || !strstr(err, model_path)) fail_msg("%s", err);
    m->cfg.norm_eps = 1e-5f;
    m->cfg.rope_theta = INFINITY;
    assert_int_equal(model_validate(m, err, sizeof(err)), -1);
    if (!strstr(err, "rope theta inf")) fail_msg("%s", err);
    m->cfg.rope_theta = NAN;
    assert_int_equal(model_validate(m, err, sizeof(err)), -1);
    m->cfg.rope_theta = 10000.0f;
    m->cfg.n_layers = MODEL_MAX_LAYERS + 1;
    assert_int_equal(model_validate(m, err, sizeof(err)), -1);
    if (!strstr(err, "n_layers is 1025, expected at most 1024")) fail_msg("%s", err);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_short_header),
        cmocka_unit_test(test_header_nonsense),
        cmocka_unit_test(test_truncated_weights),
        cmocka_unit_test(test_shape_overflow),
        cmocka_unit_test(test_tokenizer_size_mismatch),
        cmocka_unit_test(test_good_model_shape),
        cmocka_unit_test(test_absurd_layers),
        cmocka_unit_test(test_config_not_finite),
    };
    return cmocka_run_group_tests_name("model", tests, setup, teardown);
}
