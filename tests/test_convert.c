/* bench model convert and info: stories260K through gguf, safetensors and back
 * to llama2.c with every f32 tensor byte and the vocabulary kept; conversions
 * to f16/bf16/q8_0 with the dtypes asked for and values within tolerance;
 * sharding; the errors. Runs the command in-process through cmd_model. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engines/core/model/hf_names.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/model/model.h"
#include "engines/core/model/model_write.h"
#include "harness/cli/commands.h"
#include "tests/lib/testutil.h"

typedef struct fixture {
    char model[512], tok[512], tmp[512];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok))) {
        free(f);
        *state = NULL;
        return 0;
    }
    if (!tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

#define NEED_FIXTURE(f) do { if (!(f)) { skip(); } } while (0)

/* Runs `bench model ARGS...` in-process; returns its exit status. */
static int run_model(const char *a0, ...) {
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)"model";
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && argc < 15; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    fflush(stdout);
    int rc = cmd_model(argc, argv);
    fflush(stdout);
    return rc;
}

/* Same, with stdout captured into a malloc'd string. */
static char *run_model_capture(int *rc, const char *a0, const char *a1, const char *a2, const char *a3) {
    char path[] = "/tmp/bench-test-convert-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    *rc = run_model(a0, a1, a2, a3, NULL);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(pread(fd, s, (size_t)n, 0), n);
    s[n] = '\0';
    close(fd);
    unlink(path);
    fputs(s, stdout);
    return s;
}

static model *open_model(const char *path, const char *tok) {
    model *m = NULL;
    char err[1024] = "";
    if (model_open(path, tok, &m, err, sizeof(err))) fail_msg("model_open %s: %s", path, err);
    return m;
}

static void *read_tensor(const model *m, const model_tensor *t) {
    void *b = malloc(t->nbytes ? t->nbytes : 1);
    assert_non_null(b);
    int fd = open(m->files[t->file], O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, b, t->nbytes, (off_t)t->offset), (ssize_t)t->nbytes);
    close(fd);
    return b;
}

/* Tensor bytes in the interleaved q/k layout, whatever layout the model keeps. */
static void *read_interleaved(const model *m, const model_tensor *t) {
    void *b = read_tensor(m, t);
    int heads = hf_rope_heads(t->name, &m->cfg);
    if (m->cfg.rope != ROPE_HALF || !heads) return b;
    void *o = malloc(t->nbytes);
    assert_non_null(o);
    assert_int_equal(hf_permute_rows(o, b, heads, t->ne[1], bench_dtype_row_bytes(t->dtype, t->ne[0]), 0), 0);
    free(b);
    return o;
}

static void same_config(const model *a, const model *b) {
    assert_int_equal(a->cfg.dim, b->cfg.dim);
    assert_int_equal(a->cfg.hidden_dim, b->cfg.hidden_dim);
    assert_int_equal(a->cfg.n_layers, b->cfg.n_layers);
    assert_int_equal(a->cfg.n_heads, b->cfg.n_heads);
    assert_int_equal(a->cfg.n_kv_heads, b->cfg.n_kv_heads);
    assert_int_equal(a->cfg.vocab_size, b->cfg.vocab_size);
    assert_int_equal(a->cfg.seq_len_header, b->cfg.seq_len_header);
    assert_true(a->cfg.rope_theta == b->cfg.rope_theta);
    assert_true(fabsf(a->cfg.norm_eps - b->cfg.norm_eps) <= 1e-9f);
}

/* Every tensor of a, by name, has the same bytes in b (q/k compared in one layout). */
static void same_tensors(const model *a, const model *b, const char *what) {
    assert_int_equal(a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        const model_tensor *ta = &a->tensors[i], *tb = model_find(b, ta->name);
        if (!tb) fail_msg("%s: tensor %s is missing", what, ta->name);
        assert_int_equal(ta->dtype, tb->dtype);
        assert_int_equal(ta->nbytes, tb->nbytes);
        for (int d = 0; d < 2; d++) assert_int_equal(ta->ne[d], tb->ne[d]);
        void *x = read_interleaved(a, ta), *y = read_interleaved(b, tb);
        if (memcmp(x, y, ta->nbytes)) fail_msg("%s: tensor %s differs", what, ta->name);
        free(x);
        free(y);
    }
}

/* Pieces compared with SentencePiece's U+2581 read as ' ' (llama2.c writes ' '). */
static void norm_piece(const char *s, char *out, size_t len) {
    size_t o = 0;
    while (*s && o + 1 < len) {
        if (!strncmp(s, "\xe2\x96\x81", 3)) out[o++] = ' ', s += 3;
        else out[o++] = *s++;
    }
    out[o] = '\0';
}

static void same_vocab(const model_vocab *a, const model_vocab *b, const char *what) {
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->bos, b->bos);
    assert_int_equal(a->eos, b->eos);
    for (int i = 0; i < a->n; i++) {
        char x[256], y[256];
        norm_piece(a->tokens[i], x, sizeof(x));
        norm_piece(b->tokens[i], y, sizeof(y));
        if (strcmp(x, y)) fail_msg("%s: token %d is \"%s\", was \"%s\"", what, i, y, x);
        if (a->scores[i] != b->scores[i]) fail_msg("%s: token %d score %g, was %g", what, i, b->scores[i], a->scores[i]);
        if (a->types && b->types && a->types[i] != b->types[i])
            fail_msg("%s: token %d type %d, was %d", what, i, b->types[i], a->types[i]);
    }
}

/* ---- the f32 round trip: .bin -> gguf -> safetensors -> .bin / gguf ---- */

static void test_round_trip(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char a[600], b[600], c[600], ctok[600], d[600];
    snprintf(a, sizeof(a), "%s/a.gguf", f->tmp);
    snprintf(b, sizeof(b), "%s/b-hf", f->tmp);
    snprintf(c, sizeof(c), "%s/c.bin", f->tmp);
    snprintf(ctok, sizeof(ctok), "%s/c.tokenizer.bin", f->tmp);
    snprintf(d, sizeof(d), "%s/d.gguf", f->tmp);
    assert_int_equal(run_model("convert", f->model, a, "--tokenizer", f->tok, NULL), 0);
    assert_int_equal(run_model("convert", a, b, NULL), 0);
    assert_int_equal(run_model("convert", b, c, NULL), 0);
    assert_int_equal(run_model("convert", b, d, NULL), 0);

    model *m0 = open_model(f->model, f->tok), *ma = open_model(a, NULL), *mb = open_model(b, NULL),
          *mc = open_model(c, ctok), *md = open_model(d, NULL);
    model *all[] = {ma, mb, mc, md};
    const char *names[] = {"gguf", "safetensors", "llama2c", "gguf from safetensors"};
    for (int i = 0; i < 4; i++) {
        same_config(m0, all[i]);
        same_tensors(m0, all[i], names[i]);
        same_vocab(&m0->vocab, &all[i]->vocab, names[i]);
    }
    assert_int_equal(ma->format, MODEL_FORMAT_GGUF);
    assert_int_equal(mb->format, MODEL_FORMAT_SAFETENSORS);
    assert_int_equal(mc->format, MODEL_FORMAT_LLAMA2C);
    /* llama2c -> llama2c: the tokenizer file is rewritten byte for byte */
    size_t n0 = 0, n1 = 0;
    FILE *x = fopen(f->tok, "rb"), *y = fopen(ctok, "rb");
    assert_non_null(x);
    assert_non_null(y);
    char bx[8192], by[8192];
    n0 = fread(bx, 1, sizeof(bx), x);
    n1 = fread(by, 1, sizeof(by), y);
    fclose(x);
    fclose(y);
    assert_int_equal(n0, n1);
    assert_memory_equal(bx, by, n0);
    for (int i = 0; i < 4; i++) model_free(all[i]);
    model_free(m0);
}

/* ---- reduced precision ---- */

/* Largest error a conversion may make on x, given the max |x| of its q8_0 / q4_0 block. */
static double tolerance(bench_dtype dt, float x, float block_amax) {
    switch (dt) {
    case BENCH_F16: return fabs(x) * 0x1p-11 + 0x1p-25;
    case BENCH_BF16: return fabs(x) * 0x1p-8;
    case BENCH_Q8_0: return 0.57 * block_amax / 127.0 + 1e-9; /* d/2, plus the clamp when d rounds down */
    case BENCH_Q4_0: return 1.001 * block_amax / 8.0 + 1e-9;  /* d, where +8 d is clamped to +7 d (quant.h) */
    default: return 0.0;
    }
}

static void check_converted(const model *m0, const model *m, bench_dtype want, const char *what) {
    assert_int_equal(m->n_tensors, m0->n_tensors);
    double worst = 0, worst_x = 0, worst_y = 0, worst_of_tol = 0;
    for (int i = 0; i < m0->n_tensors; i++) {
        const model_tensor *t0 = &m0->tensors[i], *t = model_find(m, t0->name);
        assert_non_null(t);
        int64_t cols = t0->ne[0], rows = t0->n_dims > 1 ? t0->ne[1] : 1;
        bench_dtype expect = rows == 1 ? BENCH_F32 : (bench_dtype_is_quant(want) && cols % 32) ? BENCH_F16 : want;
        if (t->dtype != expect)
            fail_msg("%s: tensor %s is %s, expected %s", what, t->name, bench_dtype_name(t->dtype), bench_dtype_name(expect));
        float *x = read_interleaved(m0, t0);
        uint8_t *y = read_interleaved(m, t);
        float *row = malloc((size_t)cols * sizeof(float));
        assert_non_null(row);
        size_t rb = bench_dtype_row_bytes(t->dtype, cols);
        for (int64_t r = 0; r < rows; r++) {
            kn_dequant_row(t->dtype, y + (size_t)r * rb, row, (int)cols);
            for (int64_t c = 0; c < cols; c++) {
                float xv = x[r * cols + c], amax = 0;
                if (bench_dtype_is_quant(t->dtype))
                    for (int64_t k = c / 32 * 32; k < c / 32 * 32 + 32; k++) amax = fmaxf(amax, fabsf(x[r * cols + k]));
                double e = fabs((double)row[c] - xv), tol = tolerance(t->dtype, xv, amax);
                if (e > tol) fail_msg("%s: %s[%lld][%lld] = %g, was %g (error %g > %g)", what, t->name, (long long)r,
                                      (long long)c, row[c], xv, e, tol);
                if (fabs(xv) > 1e-3 && e / fabs(xv) > worst) worst = e / fabs(xv), worst_x = xv, worst_y = row[c];
                if (tol > 0 && e / tol > worst_of_tol) worst_of_tol = e / tol;
            }
        }
        free(row);
        free(x);
        free(y);
    }
    /* the relative error alone reads like a failure where a small value rounds to 0 (1 = 100%):
     * say what it is measured against, and how close the worst value came to its tolerance */
    printf("[ INFO     ] %s: every value within its dtype's rounding bound (the largest error: %.2f of the bound); largest "
           "|converted - original| / |original| over |original| > 1e-3: %.3g (%g became %g)\n",
           what, worst_of_tol, worst, worst_x, worst_y);
}

static void test_dtypes(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    model *m0 = open_model(f->model, f->tok);
    struct { const char *dt, *out; bench_dtype want; } cases[] = {
        {"f16", "s-f16.gguf", BENCH_F16}, {"bf16", "s-bf16.gguf", BENCH_BF16}, {"q8_0", "s-q8_0.gguf", BENCH_Q8_0},
        {"q4_0", "s-q4_0.gguf", BENCH_Q4_0},
        {"f16", "s-f16-hf", BENCH_F16}, {"bf16", "s-bf16-hf", BENCH_BF16},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[600];
        snprintf(out, sizeof(out), "%s/%s", f->tmp, cases[i].out);
        assert_int_equal(run_model("convert", f->model, out, "--tokenizer", f->tok, "--dtype", cases[i].dt, NULL), 0);
        model *m = open_model(out, NULL);
        check_converted(m0, m, cases[i].want, cases[i].out);
        same_vocab(&m0->vocab, &m->vocab, cases[i].out);
        model_free(m);
    }
    /* Without --dtype the dtypes are kept: f16 gguf -> safetensors -> gguf gives the same bytes. */
    char a[600], b[600], c[600], q[600], qf[600];
    snprintf(a, sizeof(a), "%s/s-f16.gguf", f->tmp);
    snprintf(b, sizeof(b), "%s/s-f16-again-hf", f->tmp);
    snprintf(c, sizeof(c), "%s/s-f16-again.gguf", f->tmp);
    assert_int_equal(run_model("convert", a, b, NULL), 0);
    assert_int_equal(run_model("convert", b, c, NULL), 0);
    model *ma = open_model(a, NULL), *mb = open_model(b, NULL), *mc = open_model(c, NULL);
    same_tensors(ma, mb, "f16 gguf -> safetensors");
    same_tensors(ma, mc, "f16 gguf -> safetensors -> gguf");
    model_free(ma);
    model_free(mb);
    model_free(mc);
    /* q8_0 -> f32 is exact dequantisation: converting it back to q8_0 gives the same bytes */
    snprintf(q, sizeof(q), "%s/s-q8_0.gguf", f->tmp);
    snprintf(qf, sizeof(qf), "%s/s-q8_0-f32.gguf", f->tmp);
    snprintf(c, sizeof(c), "%s/s-q8_0-again.gguf", f->tmp);
    assert_int_equal(run_model("convert", q, qf, "--dtype", "f32", NULL), 0);
    assert_int_equal(run_model("convert", qf, c, "--dtype", "q8_0", NULL), 0);
    model *mq = open_model(q, NULL), *mq2 = open_model(c, NULL);
    same_tensors(mq, mq2, "q8_0 -> f32 -> q8_0");
    model_free(mq);
    model_free(mq2);
    /* the same for q4_0: its largest element lands exactly on -8 d, so d is found again */
    snprintf(q, sizeof(q), "%s/s-q4_0.gguf", f->tmp);
    snprintf(qf, sizeof(qf), "%s/s-q4_0-f32.gguf", f->tmp);
    snprintf(c, sizeof(c), "%s/s-q4_0-again.gguf", f->tmp);
    assert_int_equal(run_model("convert", q, qf, "--dtype", "f32", NULL), 0);
    assert_int_equal(run_model("convert", qf, c, "--dtype", "q4_0", NULL), 0);
    mq = open_model(q, NULL);
    mq2 = open_model(c, NULL);
    same_tensors(mq, mq2, "q4_0 -> f32 -> q4_0");
    model_free(mq);
    model_free(mq2);
    /* K-quants are read, not written */
    assert_int_equal(run_model("convert", q, c, "--dtype", "q4_k", NULL), 2);
    model_free(m0);
}

/* ---- sharded safetensors ---- */

static void test_shards(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char out[600];
    snprintf(out, sizeof(out), "%s/sharded-hf", f->tmp);
    assert_int_equal(run_model("convert", f->model, out, "--tokenizer", f->tok, "--shard", "300k", NULL), 0);
    model *m0 = open_model(f->model, f->tok), *m = open_model(out, NULL);
    printf("[ INFO     ] 1 MB model in shards of 300 KB: %d files\n", m->n_files);
    assert_true(m->n_files >= 3);
    same_tensors(m0, m, "sharded safetensors");
    same_vocab(&m0->vocab, &m->vocab, "sharded safetensors");
    model_free(m);
    model_free(m0);
}

/* ---- info ---- */

static void test_info(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    int rc;
    char *s = run_model_capture(&rc, "info", f->model, "--tokenizer", f->tok);
    assert_int_equal(rc, 0);
    const char *want[] = {"format       llama2c", "dim 64, hidden 172, layers 5, heads 8, kv heads 4, head_dim 8, vocab 512",
                          "512 declared, 512 used", "tied to token_embd", "f32", "512 tokens, bos 1, eos 2"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(s, want[i])) fail_msg("bench model info does not print \"%s\"", want[i]);
    free(s);
    char gg[600];
    snprintf(gg, sizeof(gg), "%s/info-q8.gguf", f->tmp);
    assert_int_equal(run_model("convert", f->model, gg, "--tokenizer", f->tok, "--dtype", "q8_0", NULL), 0);
    s = run_model_capture(&rc, "info", gg, "--tensors", NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(s, "format       gguf"));
    assert_non_null(strstr(s, "q8_0"));
    assert_non_null(strstr(s, "blk.4.ffn_down.weight"));
    free(s);
    s = run_model_capture(&rc, "shapes", NULL, NULL, NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(s, "tinyllama-1.1b"));
    free(s);
}

/* ---- errors ---- */

static void test_errors(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char p[600], q8[600];
    snprintf(p, sizeof(p), "%s/err.bin", f->tmp);
    assert_int_equal(run_model("convert", f->model, p, "--dtype", "f16", NULL), 2); /* llama2c is f32 only */
    assert_int_equal(access(p, F_OK), -1);
    snprintf(q8, sizeof(q8), "%s/err-q8.gguf", f->tmp);
    assert_int_equal(run_model("convert", f->model, q8, "--dtype", "q8_0", NULL), 0);
    snprintf(p, sizeof(p), "%s/err-hf", f->tmp);
    assert_int_equal(run_model("convert", q8, p, NULL), 1); /* q8_0 has no safetensors dtype */
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(run_model("convert", f->model, p, "--dtype", "int4", NULL), 2);
    assert_int_equal(run_model("convert", f->model, q8, "--shard", "1m", NULL), 2);
    assert_int_equal(run_model("convert", "/nonexistent/model.bin", q8, NULL), 1);
    snprintf(p, sizeof(p), "%s/no/such/dir/x.gguf", f->tmp);
    assert_int_equal(run_model("convert", f->model, p, NULL), 1);
    assert_int_equal(run_model("convert", f->model, NULL), 2);
    assert_int_equal(run_model("frobnicate", NULL), 2);
    assert_int_equal(run_model("info", NULL), 2);
    assert_int_equal(run_model("synth", "--shape", "tiny", NULL), 2);
    assert_int_equal(run_model("synth", "--shape", "tiny", "--seed", "-1", "-o", p, NULL), 2);
    for (const char *sub[] = {"info", "convert", "synth", "shapes", NULL}, **s = sub; *s; s++)
        assert_int_equal(run_model(*s, "--help", NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
