/* Synthetic models: the shape table, the vocabulary, determinism, the table of formats bench
 * writes (model_writers: every row in every dtype it holds reopening as its format with the
 * right shape, a dtype it does not hold refused, the suffix rule), the values the generator
 * promises, and 1000 decoded tokens of the tiny shape staying finite. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engines/core/runtime/engine.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/model/model_write.h"
#include "engines/core/synth/synth.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

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

/* Writes a synth model under tmp and returns its path in buf. */
static const char *synth_to(const char *shape, bench_dtype dt, const char *format, uint64_t seed, const char *name,
                            char *buf, size_t len) {
    snprintf(buf, len, "%s/%s", tmp, name);
    synth_spec spec = {.shape = shape, .dtype = dt, .format = format, .seed = seed};
    char err[1024] = "";
    if (synth_write(&spec, buf, err, sizeof(err))) fail_msg("synth_write %s %s %s: %s", shape, bench_dtype_name(dt), format, err);
    return buf;
}

/* Opens what synth wrote in format, with its vocabulary from beside it where the format keeps it there. */
static model *open_model(const char *path, const char *format) {
    char tok[1024], err[1024] = "";
    const model_writer *w = model_writer_find(format);
    assert_non_null(w);
    if (w->vocab_path) assert_int_equal(w->vocab_path(path, tok, sizeof(tok)), 0);
    model *m = NULL;
    if (model_open(path, w->vocab_path ? tok : NULL, &m, err, sizeof(err))) fail_msg("model_open %s: %s", path, err);
    return m;
}

static uint8_t *read_all(const char *path, size_t *len) {
    char err[256];
    uint8_t *b = (uint8_t *)ut_slurp(path, SIZE_MAX, len, err, sizeof(err));
    if (!b) fail_msg("%s", err);
    return b;
}

static int same_file(const char *a, const char *b) {
    size_t la, lb;
    uint8_t *x = read_all(a, &la), *y = read_all(b, &lb);
    int same = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* Files equal, or directories whose files are equal (safetensors). */
static int same_output(const char *a, const char *b) {
    DIR *d = opendir(a);
    if (!d) return same_file(a, b);
    int same = 1, n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char pa[1024], pb[1024];
        snprintf(pa, sizeof(pa), "%s/%s", a, e->d_name);
        snprintf(pb, sizeof(pb), "%s/%s", b, e->d_name);
        if (access(pb, R_OK)) same = 0;
        else same &= same_file(pa, pb);
        n++;
    }
    closedir(d);
    return same && n > 0;
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

/* ---- the shape table ---- */

static void test_shapes(void **state) {
    (void)state;
    const synth_shape *t = synth_find_shape("tiny");
    assert_non_null(t);
    /* stories260K's header */
    assert_int_equal(t->cfg.dim, 64);
    assert_int_equal(t->cfg.hidden_dim, 172);
    assert_int_equal(t->cfg.n_layers, 5);
    assert_int_equal(t->cfg.n_heads, 8);
    assert_int_equal(t->cfg.n_kv_heads, 4);
    assert_int_equal(t->cfg.vocab_size, 512);
    assert_int_equal(t->cfg.seq_len, 512);
    assert_true(t->tied);
    const char *need[] = {"llama-110m", "tinyllama-1.1b", "llama-3.2-1b"};
    for (size_t i = 0; i < 3; i++) assert_non_null(synth_find_shape(need[i]));
    const synth_shape *l3 = synth_find_shape("llama-3.2-1b");
    assert_true(l3->cfg.n_kv_heads < l3->cfg.n_heads);
    assert_true(l3->cfg.rope_theta == 500000.0f);
    assert_null(synth_find_shape("nope"));
    assert_null(synth_find_shape(NULL));
    int n = 0;
    for (const synth_shape *s = synth_shapes; s->name; s++, n++) {
        const model_config *c = &s->cfg;
        assert_true(c->dim > 0 && c->n_heads > 0 && c->n_kv_heads > 0);
        assert_int_equal(c->dim % c->n_heads, 0);
        assert_int_equal(c->n_heads % c->n_kv_heads, 0);
        assert_int_equal((c->dim / c->n_heads) % 2, 0);
        assert_int_equal(c->seq_len, c->seq_len_header);
        assert_int_equal(c->rope, ROPE_INTERLEAVED);
        assert_non_null(s->about);
        for (const synth_shape *o = synth_shapes; o < s; o++) assert_string_not_equal(o->name, s->name);
    }
    assert_true(n >= 4);
}

/* ---- the vocabulary ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void check_vocab(int n) {
    model_vocab v;
    char err[256];
    assert_int_equal(synth_vocab_build(n, &v, err, sizeof(err)), 0);
    assert_int_equal(v.n, n);
    assert_int_equal(v.unk, 0);
    assert_int_equal(v.bos, 1);
    assert_int_equal(v.eos, 2);
    assert_int_equal(v.add_space_prefix, 1);
    assert_string_equal(v.tokens[0], "<unk>");
    assert_string_equal(v.tokens[1], "<s>");
    assert_int_equal(v.types[1], TOKEN_CONTROL);
    for (int b = 0; b < 256; b++) {
        char want[8];
        snprintf(want, sizeof(want), "<0x%02X>", b);
        assert_string_equal(v.tokens[3 + b], want);
        assert_int_equal(v.types[3 + b], TOKEN_BYTE);
    }
    for (int i = 260; i < n; i++) assert_true(v.scores[i] < v.scores[i - 1]);
    /* distinct pieces */
    char **sorted = malloc((size_t)n * sizeof(*sorted));
    assert_non_null(sorted);
    memcpy(sorted, v.tokens, (size_t)n * sizeof(*sorted));
    qsort(sorted, (size_t)n, sizeof(*sorted), cmp_str);
    for (int i = 1; i < n; i++)
        if (!strcmp(sorted[i], sorted[i - 1])) fail_msg("vocab %d: piece \"%s\" twice", n, sorted[i]);
    /* Every multi-character piece is reachable by BPE: it splits into two pieces. */
    for (int i = 259; i < n; i++) {
        const char *p = v.tokens[i];
        size_t l = strlen(p);
        int single = l == 1 || !strcmp(p, "\xe2\x96\x81");
        if (single) continue;
        int ok = 0;
        for (size_t k = 1; k < l && !ok; k++) {
            if (((unsigned char)p[k] & 0xc0) == 0x80) continue; /* not a character boundary */
            char *a = strndup(p, k);
            const char *b = p + k;
            assert_non_null(a);
            ok = bsearch(&a, sorted, (size_t)n, sizeof(*sorted), cmp_str) &&
                 bsearch(&b, sorted, (size_t)n, sizeof(*sorted), cmp_str);
            free(a);
        }
        if (!ok) fail_msg("vocab %d: piece %d \"%s\" cannot be reached by a merge", n, i, p);
    }
    free(sorted);
    model_vocab_free(&v);
}

static void test_vocab_layout(void **state) {
    (void)state;
    check_vocab(512);
    check_vocab(32000);
    check_vocab(128256);
    model_vocab v;
    char err[256] = "";
    assert_int_equal(synth_vocab_build(100, &v, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "259"));
    assert_int_equal(v.n, 0);
}

/* Encodes with BOS, decodes each id after its predecessor, returns the text (malloc'd). */
static char *round_trip(const tokenizer *t, const char *text, int *n_ids) {
    size_t tl = strlen(text);
    int max = (int)(4 * tl + 8);
    int *ids = malloc((size_t)max * sizeof(int));
    char *out = malloc(4 * tl + 8), err[256], buf[16];
    assert_non_null(ids);
    assert_non_null(out);
    int n = tokenizer_encode(t, text, 1, 0, ids, max, err, sizeof(err));
    if (n < 0) fail_msg("encode: %s", err);
    size_t pos = 0;
    for (int i = 1; i < n; i++) {
        const char *s = tokenizer_decode(t, ids[i - 1], ids[i], buf, sizeof(buf));
        size_t l = strlen(s);
        assert_true(pos + l < 4 * tl + 8);
        memcpy(out + pos, s, l);
        pos += l;
    }
    out[pos] = '\0';
    free(ids);
    *n_ids = n - 1;
    return out;
}

static void check_round_trips(int vocab_n) {
    model_vocab v;
    char err[256];
    assert_int_equal(synth_vocab_build(vocab_n, &v, err, sizeof(err)), 0);
    tokenizer *t = NULL;
    if (tokenizer_create(&v, &t, err, sizeof(err))) fail_msg("tokenizer_create: %s", err);
    model_vocab_free(&v);
    static const char *texts[] = {
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
        "The quick brown fox jumps over the lazy dog!",
        "  two leading spaces, trailing  ", "tabs\tand\nnewlines\r\n", "a", " ",
        "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 emoji",
        "<s> and </s> and <unk> typed as text", "<0x41> looks like a byte token",
        "bad utf-8: \xff\xfe \xc3 \xe6\x97 end", "1234567890 +-*/ {}[] ~`@#$%^&",
    };
    int english_ids = 0;
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        int n;
        char *back = round_trip(t, texts[i], &n);
        if (strcmp(back, texts[i])) fail_msg("vocab %d: \"%s\" came back as \"%s\"", vocab_n, texts[i], back);
        if (i == 0) english_ids = n;
        free(back);
    }
    /* English compresses: fewer tokens than characters (a vocabulary that merges) */
    size_t l0 = strlen(texts[0]);
    printf("[ INFO     ] vocab %d: %zu bytes of English -> %d tokens\n", vocab_n, l0, english_ids);
    assert_true((size_t)english_ids < (vocab_n > 512 ? l0 / 3 : l0 * 2 / 3));
    /* arbitrary bytes (no NUL; no U+2581, which SentencePiece reads as a space) */
    uint64_t s = 12345;
    char text[200];
    for (int r = 0; r < 300; r++) {
        int len = 1 + (int)(r % 150);
        for (int k = 0; k < len; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int c = 1 + (int)((s >> 33) % 255);
            if (r % 3 == 0) c = 32 + (int)((s >> 33) % 95); /* printable ASCII: exercises merges */
            text[k] = (char)c;
        }
        text[len] = '\0';
        for (char *p = text; (p = strstr(p, "\xe2\x96\x81"));) p[0] = 'x';
        int n;
        char *back = round_trip(t, text, &n);
        if (strcmp(back, text)) fail_msg("vocab %d: random text %d of %d bytes did not come back", vocab_n, r, len);
        free(back);
    }
    tokenizer_free(t);
}

static void test_vocab_round_trip(void **state) {
    (void)state;
    check_round_trips(512);
    check_round_trips(32000);
}

/* ---- the fast row conversion gives kn_quant_row's bytes ---- */

static void test_quant_row_exact(void **state) {
    (void)state;
    enum { N = 4096 };
    float *x = malloc(N * sizeof(float));
    uint8_t *a = malloc(N * 4), *b = malloc(N * 4);
    assert_non_null(x);
    assert_non_null(a);
    assert_non_null(b);
    uint64_t r = 99;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < N; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(r >> 11) * 0x1p-53 * 2.0 - 1.0;
            /* magnitudes from 2^-30 (f16 subnormals and underflow) to 2^17 (f16 overflow) */
            x[i] = (float)(u * ldexp(1.0, (int)(r % 48) - 30));
        }
        if (round == 0) /* q8_0 ties: amax 127 gives d = 1, so k + 0.5 lands exactly halfway */
            for (int i = 0; i < N; i++) x[i] = i % 32 == 0 ? 127.0f : (float)((i % 255) - 127) + (i & 1 ? 0.5f : -0.5f);
        if (round == 1) /* f16 ties: halfway between two f16 values */
            for (int i = 0; i < N; i++) x[i] = (1.0f + (float)(2 * (i % 1024) + 1) * 0x1p-11f) * (i & 1 ? 1.0f : -1.0f);
        if (round == 2) /* an all-zero block and tiny blocks */
            for (int i = 0; i < N; i++) x[i] = i < 64 ? 0.0f : (float)(i % 7) * 1e-30f;
        const bench_dtype dts[] = {BENCH_F16, BENCH_Q8_0, BENCH_BF16, BENCH_F32};
        for (size_t k = 0; k < 4; k++) {
            size_t nb = bench_dtype_row_bytes(dts[k], N);
            memset(a, 0x55, nb);
            memset(b, 0xaa, nb);
            kn_quant_row(dts[k], x, a, N);
            synth_quant_row(dts[k], x, b, N);
            if (memcmp(a, b, nb)) fail_msg("round %d: synth_quant_row(%s) differs from kn_quant_row", round, bench_dtype_name(dts[k]));
        }
    }
    printf("[ INFO     ] synth_quant_row on ISA %s matches kn_quant_row\n", kn_isa());
    free(x);
    free(a);
    free(b);
}

/* ---- determinism ---- */

static void test_determinism(void **state) {
    (void)state;
    struct { const char *format; bench_dtype dt; const char *ext; } cases[] = {
        {"gguf", BENCH_F32, "gguf"}, {"gguf", BENCH_Q8_0, "gguf"}, {"safetensors", BENCH_BF16, "st"}, {"llama2c", BENCH_F32, "bin"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char a[1024], b[1024], c[1024], n[64];
        snprintf(n, sizeof(n), "det-a-%zu.%s", i, cases[i].ext);
        synth_to("tiny", cases[i].dt, cases[i].format, 5, n, a, sizeof(a));
        snprintf(n, sizeof(n), "det-b-%zu.%s", i, cases[i].ext);
        synth_to("tiny", cases[i].dt, cases[i].format, 5, n, b, sizeof(b));
        snprintf(n, sizeof(n), "det-c-%zu.%s", i, cases[i].ext);
        synth_to("tiny", cases[i].dt, cases[i].format, 6, n, c, sizeof(c));
        if (!same_output(a, b)) fail_msg("%s %s: seed 5 twice gave different bytes", cases[i].format, bench_dtype_name(cases[i].dt));
        if (same_output(a, c)) fail_msg("%s %s: seeds 5 and 6 gave the same bytes", cases[i].format, bench_dtype_name(cases[i].dt));
        if (!strcmp(cases[i].format, "llama2c")) {
            char ta[1100], tb[1100];
            llama2c_tokenizer_path(a, ta, sizeof(ta));
            llama2c_tokenizer_path(b, tb, sizeof(tb));
            assert_true(same_file(ta, tb));
        }
    }
}

/* ---- every format bench writes (model_writers), in every dtype it holds ---- */

/* The table itself: names, the suffix rule, the texts the help and messages read. */
static void test_writers_table(void **state) {
    (void)state;
    int folders = 0, rows = 0;
    for (const model_writer *w = model_writers; w->write; w++, rows++) {
        const char *name = model_writer_name(w);
        if (model_writer_find(name) != w) fail_msg("row %d: %s finds another row", rows, name);
        if (!model_writer_holds(w, BENCH_F32)) fail_msg("%s: does not hold f32, which the norms are", name);
        if (!w->vocab_path != !w->vocab_write) fail_msg("%s: vocab_path and vocab_write go together", name);
        char p[64];
        snprintf(p, sizeof(p), "dir/model%s", w->suffix ? w->suffix : "");
        if (model_writer_for_path(p) != w) fail_msg("%s: %s picks %s", name, p, model_writer_name(model_writer_for_path(p)));
        folders += !w->suffix;
    }
    assert_int_equal(folders, 1); /* one row takes every path no row's ending names */
    assert_null(model_writer_find("onnx"));
    assert_null(model_writer_find(NULL));
    /* today's rows, as the help and the messages have said them */
    char buf[256];
    assert_string_equal(model_writer_names(buf, sizeof buf, ", "), "gguf, safetensors, llama2c");
    assert_string_equal(model_writer_suffix_rule(buf, sizeof buf), ".gguf -> gguf, .bin -> llama2c, else safetensors");
    assert_string_equal(model_writer_name(model_writer_for_path("x.gguf.tmp1")), "safetensors"); /* the ending decides */
    const model_writer *st = model_writer_find("safetensors"), *l2c = model_writer_find("llama2c");
    assert_string_equal(model_writer_refusal(st, BENCH_Q8_0, buf, sizeof buf), "format safetensors holds f32, f16 and bf16, not q8_0");
    assert_string_equal(model_writer_refusal(l2c, BENCH_F16, buf, sizeof buf), "format llama2c holds f32 only, not f16");
    assert_string_equal(model_writer_dtype_text(model_writer_find("gguf"), buf, sizeof buf), "every dtype bench reads");
    assert_string_equal(model_writer_names(buf, 8, ", "), "gguf, s"); /* truncated to the buffer */
}

/* The tiny shape in every dtype each row holds (and synth writes): it reopens as the row's
 * format, with the shape, the vocabulary and the dtypes asked for; and a dtype the row does
 * not hold is refused, naming the format and what it holds, with nothing written. */
static void test_formats_reopen(void **state) {
    (void)state;
    const synth_shape *sh = synth_find_shape("tiny");
    for (const model_writer *fw = model_writers; fw->write; fw++) {
        const char *format = model_writer_name(fw);
        int refused = 0;
        for (int d = 0; d < BENCH_DTYPE_COUNT; d++) {
            bench_dtype dt = (bench_dtype)d;
            if (!bench_dtype_writable(dt)) continue; /* synth writes these only; see test_writers_read_only */
            char p[1024], n[64], err[1024] = "";
            snprintf(n, sizeof(n), "fmt-%s-%s%s", format, bench_dtype_name(dt), fw->suffix ? fw->suffix : "");
            if (!model_writer_holds(fw, dt)) {
                if (refused++) continue; /* one is enough */
                snprintf(p, sizeof(p), "%s/%s", tmp, n);
                synth_spec spec = {.shape = "tiny", .dtype = dt, .format = format};
                assert_int_equal(synth_write(&spec, p, err, sizeof(err)), -1);
                printf("[ INFO     ] %s\n", err);
                char held[160], want[256];
                snprintf(want, sizeof(want), "format %s holds %s, not %s", format,
                         model_writer_dtype_text(fw, held, sizeof held), bench_dtype_name(dt));
                if (!strstr(err, want)) fail_msg("error \"%s\" does not say \"%s\"", err, want);
                for (int h = 0; h < BENCH_DTYPE_COUNT; h++) /* each dtype it holds, by name */
                    if (model_writer_holds(fw, (bench_dtype)h) && !strstr(err, bench_dtype_name((bench_dtype)h)))
                        fail_msg("error \"%s\" does not name %s", err, bench_dtype_name((bench_dtype)h));
                assert_int_equal(access(p, F_OK), -1);
                continue;
            }
            synth_to("tiny", dt, format, 1, n, p, sizeof(p));
            assert_ptr_equal(model_writer_for_path(p), fw); /* the row's ending picks the row back */
            model *m = open_model(p, format);
            if (m->format != fw->format)
                fail_msg("%s: wrote %s, model_open reads %s", p, format, model_format_name(m->format));
            if (model_validate(m, err, sizeof(err))) fail_msg("%s: %s", p, err);
            const model_config *c = &m->cfg, *w = &sh->cfg;
            assert_int_equal(c->dim, w->dim);
            assert_int_equal(c->hidden_dim, w->hidden_dim);
            assert_int_equal(c->n_layers, w->n_layers);
            assert_int_equal(c->n_heads, w->n_heads);
            assert_int_equal(c->n_kv_heads, w->n_kv_heads);
            assert_int_equal(c->vocab_size, w->vocab_size);
            assert_int_equal(c->seq_len_header, w->seq_len);
            assert_true(fabsf(c->rope_theta - w->rope_theta) < 1e-3f);
            assert_true(fabsf(c->norm_eps - w->norm_eps) < 1e-9f);
            assert_null(model_find(m, "output.weight")); /* tiny is tied */
            assert_int_equal(m->n_tensors, 2 + 9 * w->n_layers);
            assert_int_equal(m->vocab.n, 512); /* inside, or beside where the row keeps it there */
            assert_int_equal(m->vocab.bos, 1);
            assert_int_equal(m->vocab.eos, 2);
            for (int k = 0; k < m->n_tensors; k++) {
                const model_tensor *t = &m->tensors[k];
                int is_norm = t->n_dims == 1 || t->ne[1] == 1;
                bench_dtype want = is_norm ? BENCH_F32 : synth_weight_dtype(dt, t->ne[0]);
                if (t->dtype != want)
                    fail_msg("%s: tensor %s is %s, expected %s", p, t->name, bench_dtype_name(t->dtype), bench_dtype_name(want));
            }
            /* q8_0: ffn_down has 172 columns, not whole blocks: f16 */
            if (bench_dtype_is_quant(dt)) assert_int_equal(model_find(m, "blk.0.ffn_down.weight")->dtype, BENCH_F16);
            if (bench_dtype_is_quant(dt)) assert_int_equal(model_find(m, "blk.0.attn_q.weight")->dtype, dt);
            model_free(m);
        }
    }
}

/* ---- a row's dtypes that synth does not write (gguf's k-quants...): the writer itself ---- */

#define RO_DIM 256 /* whole blocks of every dtype's, the k-quants' 256 included */

static int fill_zero(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen) {
    (void)user, (void)i, (void)err, (void)errlen;
    memset(dst, 0, (size_t)nbytes); /* a zero scale: every dtype's zero */
    return 0;
}

/* A one-layer llama of RO_DIM everywhere, its matrices in dt, norms f32, no vocabulary. */
static int ro_tensors(model_tensor *t, bench_dtype dt) {
    static const char *const mats[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
                                       "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.0.ffn_gate.weight",
                                       "blk.0.ffn_down.weight", "blk.0.ffn_up.weight"};
    static const char *const norms[] = {"output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"};
    int n = 0;
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++, n++)
        t[n] = (model_tensor){.name = (char *)mats[i], .dtype = dt, .n_dims = 2, .ne = {RO_DIM, RO_DIM},
                              .nbytes = RO_DIM * bench_dtype_row_bytes(dt, RO_DIM)};
    for (size_t i = 0; i < sizeof norms / sizeof *norms; i++, n++)
        t[n] = (model_tensor){.name = (char *)norms[i], .dtype = BENCH_F32, .n_dims = 1, .ne = {RO_DIM},
                              .nbytes = RO_DIM * sizeof(float)};
    return n;
}

static void test_writers_read_only(void **state) {
    (void)state;
    model_config cfg = {.dim = RO_DIM, .hidden_dim = RO_DIM, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2,
                        .vocab_size = RO_DIM, .seq_len = 16, .seq_len_header = 16, .rope_theta = 10000.0f,
                        .norm_eps = 1e-5f, .rope = ROPE_INTERLEAVED};
    model_vocab none = {0};
    int checked = 0;
    for (const model_writer *w = model_writers; w->write; w++)
        for (int d = 0; d < BENCH_DTYPE_COUNT; d++) {
            bench_dtype dt = (bench_dtype)d;
            if (!model_writer_holds(w, dt) || bench_dtype_writable(dt)) continue; /* those: test_formats_reopen */
            model_tensor t[16];
            model_write_src src = {.name = "ro", .cfg = &cfg, .vocab = &none, .n_tensors = ro_tensors(t, dt), .tensors = t,
                                   .fill = fill_zero};
            char p[1024], err[1024] = "";
            snprintf(p, sizeof(p), "%s/ro-%s-%s%s", tmp, model_writer_name(w), bench_dtype_name(dt), w->suffix ? w->suffix : "");
            if (w->write(p, &src, 0, err, sizeof(err)))
                fail_msg("format %s says it holds %s, but its writer refuses it: %s", model_writer_name(w), bench_dtype_name(dt), err);
            model *m = NULL;
            if (model_open(p, NULL, &m, err, sizeof(err))) fail_msg("model_open %s: %s", p, err);
            assert_int_equal(m->format, w->format);
            const model_tensor *q = model_find(m, "blk.0.attn_q.weight");
            assert_non_null(q);
            if (q->dtype != dt) fail_msg("%s: attn_q is %s, written as %s", p, bench_dtype_name(q->dtype), bench_dtype_name(dt));
            model_free(m);
            checked++;
        }
    printf("[ INFO     ] %d (format, dtype) pairs that synth does not write, written and reopened\n", checked);
}

/* ---- values: what the generator promises, the same in every format ---- */

static void test_values(void **state) {
    (void)state;
    char g[1024], l[1024], s[1024];
    synth_to("tiny", BENCH_F32, "gguf", 9, "val.gguf", g, sizeof(g));
    synth_to("tiny", BENCH_F32, "llama2c", 9, "val.bin", l, sizeof(l));
    synth_to("tiny", BENCH_BF16, "safetensors", 9, "val.st", s, sizeof(s));
    model *mg = open_model(g, "gguf"), *ml = open_model(l, "llama2c"), *ms = open_model(s, "safetensors");
    const synth_shape *sh = synth_find_shape("tiny");
    int layers = sh->cfg.n_layers;
    for (int k = 0; k < mg->n_tensors; k++) {
        const model_tensor *t = &mg->tensors[k], *tl = model_find(ml, t->name), *ts = model_find(ms, t->name);
        assert_non_null(tl);
        assert_non_null(ts);
        float *x = read_tensor(mg, t), *y = read_tensor(ml, tl);
        assert_int_equal(t->nbytes, tl->nbytes);
        if (memcmp(x, y, t->nbytes)) fail_msg("tensor %s differs between gguf and llama2c", t->name);
        int64_t n = t->ne[0] * (t->n_dims > 1 ? t->ne[1] : 1);
        if (t->n_dims == 1 || t->ne[1] == 1) {
            for (int64_t i = 0; i < n; i++) assert_true(x[i] == 1.0f);
        } else {
            int res = strstr(t->name, "attn_output") || strstr(t->name, "ffn_down");
            /* the same float expression as synth.c, so the same rounding */
            float gain = res ? 1.0f / sqrtf(2.0f * (float)layers) : 1.0f;
            float a = sqrtf(3.0f) * gain / sqrtf((float)t->ne[0]);
            double ss = 0;
            for (int64_t i = 0; i < n; i++) {
                if (!(fabsf(x[i]) <= a)) fail_msg("%s[%lld] = %g outside [-%g, %g]", t->name, (long long)i, x[i], a, a);
                ss += (double)x[i] * x[i];
            }
            double rms = sqrt(ss / (double)n), want = a / sqrt(3.0);
            if (fabs(rms / want - 1.0) > 0.05) fail_msg("%s: rms %g, expected %g", t->name, rms, want);
            for (int64_t i = 0; i < n; i += 97) assert_true(x[i] == synth_weight_value(9, t->name, a, (uint64_t)i));
            /* bf16 safetensors: the same values rounded (q/k rows permuted to HF's order: compare others) */
            if (!strstr(t->name, "attn_q") && !strstr(t->name, "attn_k")) {
                uint16_t *z = read_tensor(ms, ts);
                for (int64_t i = 0; i < n; i++) assert_true(z[i] == bench_f32_to_bf16(x[i]));
                free(z);
            }
        }
        free(x);
        free(y);
    }
    model_free(mg);
    model_free(ml);
    model_free(ms);
}

/* ---- 1000 decoded tokens stay finite ---- */

static void decode_1000(const char *path, const char *tokpath) {
    engine_spec spec = {.model_path = path, .tokenizer_path = tokpath, .threads = 1, .max_pos = 1024, .module_dir = tu_module_dir()};
    engine *e = NULL;
    char err[1024] = "";
    if (engine_create(&spec, &e, err, sizeof(err))) fail_msg("engine_create %s: %s", path, err);
    int vocab = engine_model(e)->cfg.vocab_size, tok = 1, distinct = 0;
    char seen[512] = {0};
    float *logits = NULL;
    for (int pos = 0; pos < 1000; pos++) {
        if (engine_forward(e, 0, &tok, 1, pos, &logits, err, sizeof(err))) fail_msg("%s: pos %d: %s", path, pos, err);
        double mean = 0, var = 0;
        int best = 0;
        for (int i = 0; i < vocab; i++) {
            if (!isfinite(logits[i])) fail_msg("%s: pos %d: logit %d is %g", path, pos, i, logits[i]);
            mean += logits[i];
            if (logits[i] > logits[best]) best = i;
        }
        mean /= vocab;
        for (int i = 0; i < vocab; i++) var += (logits[i] - mean) * (logits[i] - mean);
        var /= vocab;
        /* logits neither collapse nor blow up: the scaling keeps them O(1) */
        if (!(var > 1e-4 && var < 1e4)) fail_msg("%s: pos %d: logit variance %g", path, pos, var);
        if (best < 512 && !seen[best]) seen[best] = 1, distinct++;
        tok = best;
    }
    printf("[ INFO     ] %s: 1000 tokens decoded, all logits finite, %d distinct greedy tokens\n", path, distinct);
    engine_destroy(e);
}

static void test_decode_1000(void **state) {
    (void)state;
    char p[1024], tok[1100];
    synth_to("tiny", BENCH_F32, "llama2c", 0, "dec-f32.bin", p, sizeof(p));
    llama2c_tokenizer_path(p, tok, sizeof(tok));
    decode_1000(p, tok);
    synth_to("tiny", BENCH_F32, "gguf", 0, "dec-f32.gguf", p, sizeof(p));
    decode_1000(p, NULL);
    synth_to("tiny", BENCH_Q8_0, "gguf", 0, "dec-q8.gguf", p, sizeof(p));
    decode_1000(p, NULL);
}

/* ---- errors ---- */

static void expect_synth_error(const char *shape, bench_dtype dt, const char *format, const char *what) {
    char p[1024], err[1024] = "";
    snprintf(p, sizeof(p), "%s/err-out", tmp);
    synth_spec spec = {.shape = shape, .dtype = dt, .format = format};
    assert_int_equal(synth_write(&spec, p, err, sizeof(err)), -1);
    printf("[ INFO     ] %s\n", err);
    if (!strstr(err, what)) fail_msg("error \"%s\" does not say \"%s\"", err, what);
    if (!strstr(err, p)) fail_msg("error \"%s\" does not name the file", err);
    assert_int_equal(access(p, F_OK), -1); /* nothing written */
}

static void test_errors(void **state) {
    (void)state;
    expect_synth_error("huge", BENCH_F32, "gguf", "unknown synth shape \"huge\" (have: tiny, llama-110m");
    expect_synth_error("tiny", BENCH_F16, "llama2c", "llama2c holds f32 only");
    expect_synth_error("tiny", BENCH_Q8_0, "safetensors", "not q8_0");
    expect_synth_error("tiny", BENCH_F32, "onnx", "unknown format \"onnx\"");
    expect_synth_error("tiny", (bench_dtype)17, "gguf", "unknown dtype 17 (have: f32, f16, bf16, q8_0, q4_0)");
    expect_synth_error("tiny", BENCH_Q6_K, "gguf", "dtype q6_k is read, not written (have: f32, f16, bf16, q8_0, q4_0)");
    /* the list is dtype.h's writable types, in the messages and help of synth and convert */
    char names[64];
    synth_dtype_names(names, sizeof names, "|", "|");
    assert_string_equal(names, "f32|f16|bf16|q8_0|q4_0");
    synth_dtype_names(names, 12, ", ", " or ");
    assert_string_equal(names, "f32, f16, b");   /* truncated to the buffer */
    /* a directory that does not exist: the writer's error, no partial file */
    char p[1024], err[1024] = "";
    snprintf(p, sizeof(p), "%s/no/such/dir/x.bin", tmp);
    synth_spec spec = {.shape = "tiny", .dtype = BENCH_F32, .format = "llama2c"};
    assert_int_equal(synth_write(&spec, p, err, sizeof(err)), -1);
    assert_non_null(strstr(err, p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_vocab_layout),
        cmocka_unit_test(test_vocab_round_trip),
        cmocka_unit_test(test_quant_row_exact),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_writers_table),
        cmocka_unit_test(test_formats_reopen),
        cmocka_unit_test(test_writers_read_only),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_decode_1000),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
