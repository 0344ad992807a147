/* safetensors: the reader on crafted bad inputs (one per failure class, each
 * error naming its file and field), a hand-built Hugging Face directory with a
 * BPE tokenizer.json, and the writer -> reader round trip of stories260K
 * (tensors byte for byte after undoing HF's q/k order, the vocabulary exactly),
 * sharded and not, plus the writer's failures leaving nothing behind. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "engines/core/model/hf_names.h"
#include "engines/core/model/model.h"
#include "engines/core/model/model_write.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

static char tmp[512];
static int counter;

static int setup(void **state) {
    (void)state;
    return tu_tmpdir(tmp, sizeof(tmp)) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    tu_rmtree(tmp);
    return 0;
}

/* ---- fixture helpers ---- */

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    write_file(p, text, strlen(text));
}

/* A fresh directory under tmp. */
static void new_dir(char *buf, size_t len, const char *what) {
    snprintf(buf, len, "%s/%s-%d", tmp, what, counter++);
    assert_int_equal(mkdir(buf, 0755), 0);
}

/* A .safetensors file: the given header length, header text and data_len bytes of pattern. */
static void write_st_raw(const char *path, uint64_t hlen, const char *header, size_t data_len) {
    size_t hl = strlen(header), total = 8 + hl + data_len;
    unsigned char *b = malloc(total);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (unsigned char)(i * 7 + 3);
    write_file(path, b, total);
    free(b);
}

static void write_st(const char *path, const char *header, size_t data_len) {
    write_st_raw(path, strlen(header), header, data_len);
}

/* A config.json of the tiny shape; extra: more keys (each at most once). */
#define CONFIG_JSON(extra) \
    "{\"architectures\": [\"LlamaForCausalLM\"], " \
    "\"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, " \
    "\"vocab_size\": 8, \"max_position_embeddings\": 16, \"rms_norm_eps\": 1e-05" extra "}"
#define TINY_KEYS ", \"hidden_size\": 4, \"model_type\": \"llama\""

static const char *good_config = CONFIG_JSON(TINY_KEYS ", \"num_key_value_heads\": 1, \"tie_word_embeddings\": false, \"_name_or_path\": \"tiny-hf\"");

/* Expects model_open to fail with an error naming `file` and saying `what`. */
static void expect_error(const char *path, const char *file, const char *what) {
    model *m = (model *)1;
    char err[1024] = "";
    assert_int_equal(model_open(path, NULL, &m, err, sizeof(err)), -1);
    assert_null(m);
    printf("[ INFO     ] %s\n", err);
    if (!strstr(err, file)) fail_msg("error does not name %s: %s", file, err);
    if (!strstr(err, what)) fail_msg("error \"%s\" does not say \"%s\"", err, what);
}

/* A directory with good_config and model.safetensors holding `header` + data_len bytes; path of the file in st. */
static void bad_dir(char *dir, size_t dlen, char *st, size_t slen, const char *header, size_t data_len) {
    new_dir(dir, dlen, "bad");
    write_text(dir, "config.json", good_config);
    snprintf(st, slen, "%s/model.safetensors", dir);
    write_st(st, header, data_len);
}

/* ---- the reader's failure classes ---- */

static void test_truncated_header_length(void **state) {
    (void)state;
    char d[600], st[700];
    new_dir(d, sizeof(d), "trunc");
    write_text(d, "config.json", good_config);
    snprintf(st, sizeof(st), "%s/model.safetensors", d);
    write_file(st, "\x10\0\0\0\0", 5);
    expect_error(d, st, "shorter than the 8-byte header length");
}

static void test_header_length_beyond_file(void **state) {
    (void)state;
    char d[600], st[700];
    bad_dir(d, sizeof(d), st, sizeof(st), "{}", 0);
    write_st_raw(st, 1000, "{}", 10);
    expect_error(d, st, "header length 1000 (offset 0) runs past the end of the file");
    write_st_raw(st, 1ull << 40, "{}", 10); /* refused before anything is allocated */
    expect_error(d, st, "header length 1099511627776 (offset 0) is more than the 100 MB");
    write_st_raw(st, 1ull << 60, "{}", 10); /* the case: 2^60 */
    expect_error(d, st, "header length 1152921504606846976 (offset 0) is more than the 100 MB");
}

static void test_invalid_json(void **state) {
    (void)state;
    char d[600], st[700];
    bad_dir(d, sizeof(d), st, sizeof(st), "{\"model.norm.weight\": {\"dtype\": \"F32\", ", 0);
    expect_error(d, st, "the header is not valid JSON");
    bad_dir(d, sizeof(d), st, sizeof(st), "{} x", 0);
    expect_error(d, st, "unexpected bytes after the JSON value, at byte offset 11");
    bad_dir(d, sizeof(d), st, sizeof(st), "[1, 2]", 0);
    expect_error(d, st, "expected a JSON object");
}

static void test_data_offsets_beyond_file(void **state) {
    (void)state;
    char d[600], st[700];
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 12);
    expect_error(d, st, "tensor model.norm.weight: data_offsets [0, 16] run past the end of the file");
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [16, 0]}}", 16);
    expect_error(d, st, "tensor model.norm.weight: data_offsets is not [begin, end]");
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, -16]}}", 16);
    expect_error(d, st, "data_offsets is not [begin, end]");
}

static void test_shape_size_mismatch(void **state) {
    (void)state;
    char d[600], st[700];
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.embed_tokens.weight\": {\"dtype\": \"F32\", \"shape\": [8, 4], \"data_offsets\": [0, 64]}}", 64);
    expect_error(d, st, "tensor model.embed_tokens.weight: data_offsets [0, 64] hold 64 bytes, but shape [8, 4] of F32 needs 128");
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.embed_tokens.weight\": {\"dtype\": \"F32\", \"shape\": [8, 0], \"data_offsets\": [0, 0]}}", 0);
    expect_error(d, st, "tensor model.embed_tokens.weight: shape[1] is 0, expected a positive integer");
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.embed_tokens.weight\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4);
    expect_error(d, st, "shape has 5 dimensions, expected 1..4");
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.embed_tokens.weight\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 4]}}", 4);
    expect_error(d, st, "overflows");
}

static void test_unknown_dtype(void **state) {
    (void)state;
    char d[600], st[700];
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.layers.0.self_attn.q_proj.weight\": {\"dtype\": \"I64\", \"shape\": [4, 4], \"data_offsets\": [0, 128]}}", 128);
    expect_error(d, st, "tensor model.layers.0.self_attn.q_proj.weight: dtype \"I64\" is not supported");
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.layers.0.self_attn.q_proj.weight\": {\"shape\": [4, 4], \"data_offsets\": [0, 64]}}", 64);
    expect_error(d, st, "tensor model.layers.0.self_attn.q_proj.weight: dtype is absent");
    /* a layer the config does not have */
    bad_dir(d, sizeof(d), st, sizeof(st),
            "{\"model.layers.3.input_layernorm.weight\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 16);
    expect_error(d, st, "is in layer 3, but config.json has num_hidden_layers 1");
}

static void test_config_errors(void **state) {
    (void)state;
    char d[600], st[700], cfg[700];
    bad_dir(d, sizeof(d), st, sizeof(st), "{}", 0);
    snprintf(cfg, sizeof(cfg), "%s/config.json", d);
    write_text(d, "config.json", "{\"hidden_size\": 4, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
                                 "\"vocab_size\": 8, \"max_position_embeddings\": 16, \"rms_norm_eps\": 1e-5}");
    expect_error(d, cfg, "missing key \"intermediate_size\"");
    write_text(d, "config.json", CONFIG_JSON(", \"hidden_size\": -4"));
    expect_error(d, cfg, "key \"hidden_size\" is -4, expected an integer");
    write_text(d, "config.json", CONFIG_JSON(TINY_KEYS ", \"rope_theta\": \"big\""));
    expect_error(d, cfg, "key \"rope_theta\" is \"big\"");
    write_text(d, "config.json", CONFIG_JSON(", \"hidden_size\": 4, \"model_type\": \"qwen2\""));
    expect_error(d, cfg, "model_type is \"qwen2\"");
    write_text(d, "config.json", CONFIG_JSON(TINY_KEYS ", \"head_dim\": 4"));
    expect_error(d, cfg, "key \"head_dim\" is 4");
    /* RoPE scaling other than linear is refused, naming it */
    write_text(d, "config.json", CONFIG_JSON(TINY_KEYS ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}"));
    expect_error(d, cfg, "only linear RoPE scaling is read");
    write_text(d, "config.json", CONFIG_JSON(TINY_KEYS ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 0}"));
    expect_error(d, cfg, "has factor 0, expected a positive number");
    write_text(d, "config.json", CONFIG_JSON(TINY_KEYS ", \"vocab_size\": 9"));
    expect_error(d, cfg, "key \"vocab_size\" appears twice");
    write_text(d, "config.json", "{\"hidden_size\": 4,");
    expect_error(d, cfg, "not valid JSON");
    unlink(cfg);
    expect_error(d, cfg, "No such file");
}

static void test_index_errors(void **state) {
    (void)state;
    char d[600], st[700], idx[700];
    new_dir(d, sizeof(d), "index");
    write_text(d, "config.json", good_config);
    snprintf(idx, sizeof(idx), "%s/model.safetensors.index.json", d);
    write_text(d, "model.safetensors.index.json",
               "{\"metadata\": {\"total_size\": 16}, \"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}");
    expect_error(d, idx, "weight_map: tensor model.norm.weight is in shard");
    expect_error(d, "model-00001-of-00002.safetensors", "No such file");
    /* a map that disagrees with its shard */
    snprintf(st, sizeof(st), "%s/model-00001-of-00002.safetensors", d);
    write_st(st, "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 16);
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\", "
               "\"lm_head.weight\": \"model-00001-of-00002.safetensors\"}}");
    expect_error(d, idx, "weight_map puts tensor lm_head.weight in");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"model.norm.weight\": \"../x.safetensors\"}}");
    expect_error(d, idx, "is not a file name beside the index");
    write_text(d, "model.safetensors.index.json", "{\"metadata\": {}}");
    expect_error(d, idx, "weight_map is absent");
    /* the index named directly */
    expect_error(idx, idx, "weight_map is absent");
    char e[600];
    new_dir(e, sizeof(e), "empty");
    expect_error(e, e, "holds neither model.safetensors nor model.safetensors.index.json");
}

static void test_tokenizer_errors(void **state) {
    (void)state;
    char d[600], st[700], tok[700];
    bad_dir(d, sizeof(d), st, sizeof(st), "{}", 0);
    snprintf(tok, sizeof(tok), "%s/tokenizer.json", d);
    write_text(d, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1000000}}}");
    expect_error(d, tok, "model.vocab: token \"b\" has id 1000000, expected 0..7");
    write_text(d, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}}}");
    expect_error(d, tok, "id 0 is given to both \"a\" and \"b\"");
    write_text(d, "tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}");
    expect_error(d, tok, "model.type \"WordPiece\" is not supported");
    write_text(d, "tokenizer.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0], [\"b\"]]}}");
    expect_error(d, tok, "model.vocab[1]: expected [piece, finite score]");
    write_text(d, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": 0, \"content\": \"z\"}]}");
    expect_error(d, tok, "added_tokens[0]: id 0 is \"z\" here but \"a\" in model.vocab");
    write_text(d, "tokenizer.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]], \"bench\": {\"token_types\": [1, 2]}}}");
    expect_error(d, tok, "model.bench.token_types has 2 entries, the vocabulary 8");
}

/* ---- a hand-built Hugging Face directory ---- */

typedef struct tiny_tensor {
    const char *name, *dtype;
    int64_t rows, cols; /* cols 0: 1-D [rows] */
    int esz;
} tiny_tensor;

static const tiny_tensor tiny[] = {
    {"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", 1, 0, 4}, /* not a weight: skipped */
    {"lm_head.weight", "F32", 8, 4, 4},
    {"model.layers.0.input_layernorm.weight", "F32", 4, 0, 4},
    {"model.layers.0.mlp.down_proj.weight", "F32", 4, 8, 4},
    {"model.layers.0.mlp.gate_proj.weight", "F32", 8, 4, 4},
    {"model.layers.0.mlp.up_proj.weight", "F32", 8, 4, 4},
    {"model.layers.0.post_attention_layernorm.weight", "F32", 4, 0, 4},
    {"model.layers.0.self_attn.k_proj.weight", "F32", 2, 4, 4},
    {"model.layers.0.self_attn.o_proj.weight", "F32", 4, 4, 4},
    {"model.layers.0.self_attn.v_proj.weight", "F32", 2, 4, 4},
    {"model.norm.weight", "F32", 4, 0, 4},
    {"model.embed_tokens.weight", "BF16", 8, 4, 2},
    {"model.layers.0.self_attn.q_proj.weight", "F16", 4, 4, 2},
};
#define N_TINY ((int)(sizeof(tiny) / sizeof(tiny[0])))

static const char *tiny_tokenizer =
    "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
    " \"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}, {\"id\": 1, \"content\": \"<s>\", \"special\": true},\n"
    "                  {\"id\": 2, \"content\": \"</s>\", \"special\": true}, {\"id\": 7, \"content\": \"<extra>\", \"special\": false}],\n"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\xe2\x96\x81\"},\n"
    "                {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]},\n"
    " \"pre_tokenizer\": null,\n"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", \"byte_fallback\": true,\n"
    "           \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"<0x41>\": 3, \"\xe2\x96\x81" "a\": 4, \"b\": 5},\n"
    "           \"merges\": [\"\xe2\x96\x81 a\", \"\xe2\x96\x81" "a b\"]}}\n";

/* Writes the tiny model; returns the header length (data starts at 8 + it). */
static uint64_t write_tiny(const char *dir) {
    char h[4096] = "{\"__metadata__\": {\"format\": \"pt\"}";
    uint64_t off = 0;
    for (int i = 0; i < N_TINY; i++) {
        uint64_t nb = (uint64_t)tiny[i].rows * (uint64_t)(tiny[i].cols ? tiny[i].cols : 1) * (uint64_t)tiny[i].esz;
        char dims[64];
        if (tiny[i].cols) snprintf(dims, sizeof(dims), "%lld, %lld", (long long)tiny[i].rows, (long long)tiny[i].cols);
        else snprintf(dims, sizeof(dims), "%lld", (long long)tiny[i].rows);
        snprintf(h + strlen(h), sizeof(h) - strlen(h), ", \"%s\": {\"dtype\": \"%s\", \"shape\": [%s], \"data_offsets\": [%llu, %llu]}",
                 tiny[i].name, tiny[i].dtype, dims, (unsigned long long)off, (unsigned long long)(off + nb));
        off += nb;
    }
    strcat(h, "}   "); /* trailing spaces, as HF pads */
    char st[700];
    snprintf(st, sizeof(st), "%s/model.safetensors", dir);
    write_st(st, h, (size_t)off);
    write_text(dir, "tokenizer.json", tiny_tokenizer);
    return strlen(h);
}

static void test_tiny_hf_dir(void **state) {
    (void)state;
    char d[600], st[700];
    new_dir(d, sizeof(d), "tiny");
    write_text(d, "config.json", good_config);
    uint64_t hlen = write_tiny(d);
    snprintf(st, sizeof(st), "%s/model.safetensors", d);

    model *m = NULL;
    char err[1024] = "";
    if (model_open(d, NULL, &m, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(m->format, MODEL_FORMAT_SAFETENSORS);
    assert_string_equal(m->name, "tiny-hf");
    assert_int_equal(m->n_files, 1);
    assert_string_equal(m->files[0], st);
    const model_config *c = &m->cfg;
    assert_int_equal(c->dim, 4);
    assert_int_equal(c->hidden_dim, 8);
    assert_int_equal(c->n_layers, 1);
    assert_int_equal(c->n_heads, 2);
    assert_int_equal(c->n_kv_heads, 1);
    assert_int_equal(c->vocab_size, 8);
    assert_int_equal(c->seq_len, 16);
    assert_int_equal(c->seq_len_header, 16);
    assert_true(c->rope_theta == 10000.0f); /* absent: HF's default */
    assert_true(c->norm_eps == 1e-5f);
    assert_int_equal(c->rope, ROPE_HALF);

    /* every weight, inv_freq skipped, in llama.cpp's order */
    assert_int_equal(m->n_tensors, N_TINY - 1);
    assert_string_equal(m->tensors[0].name, "token_embd.weight");
    assert_string_equal(m->tensors[1].name, "blk.0.attn_norm.weight");
    assert_string_equal(m->tensors[2].name, "blk.0.attn_q.weight");
    assert_string_equal(m->tensors[m->n_tensors - 2].name, "output_norm.weight");
    assert_string_equal(m->tensors[m->n_tensors - 1].name, "output.weight");
    const model_tensor *e = model_find(m, "token_embd.weight"), *q = model_find(m, "blk.0.attn_q.weight"),
                       *k = model_find(m, "blk.0.attn_k.weight"), *n = model_find(m, "blk.0.ffn_norm.weight");
    assert_non_null(e);
    assert_int_equal(e->dtype, BENCH_BF16);
    assert_int_equal(e->n_dims, 2);
    assert_int_equal(e->ne[0], 4);
    assert_int_equal(e->ne[1], 8);
    assert_int_equal(e->nbytes, 64);
    assert_int_equal(q->dtype, BENCH_F16);
    assert_int_equal(k->ne[0], 4);
    assert_int_equal(k->ne[1], 2);
    assert_int_equal(n->n_dims, 1);
    assert_int_equal(n->ne[0], 4);
    /* offsets are absolute: the embedding is the second-to-last in the file */
    uint64_t off = 0;
    for (int i = 0; i < N_TINY - 2; i++) off += (uint64_t)tiny[i].rows * (uint64_t)(tiny[i].cols ? tiny[i].cols : 1) * (uint64_t)tiny[i].esz;
    assert_int_equal(e->offset, 8 + hlen + off);

    /* the BPE vocabulary: score -id, types from added_tokens and <0xNN>, the hole at 6 a placeholder */
    const model_vocab *v = &m->vocab;
    assert_int_equal(v->n, 8);
    const char *want[] = {"<unk>", "<s>", "</s>", "<0x41>", ("\xe2\x96\x81" "a"), "b", "[PAD6]", "<extra>"};
    const int types[] = {TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL, TOKEN_BYTE, TOKEN_NORMAL, TOKEN_NORMAL, TOKEN_UNUSED, TOKEN_USER};
    for (int i = 0; i < 8; i++) {
        assert_string_equal(v->tokens[i], want[i]);
        assert_true(v->scores[i] == -(float)i);
        assert_int_equal(v->types[i], types[i]);
    }
    assert_int_equal(v->bos, 1);
    assert_int_equal(v->eos, 2);
    assert_int_equal(v->unk, 0);
    assert_int_equal(v->add_space_prefix, 1);
    model_free(m);

    /* tied: a stored lm_head is the embedding's copy and is dropped; the file itself opens too */
    write_text(d, "config.json", CONFIG_JSON(TINY_KEYS ", \"num_key_value_heads\": 1, \"tie_word_embeddings\": true"));
    if (model_open(st, NULL, &m, err, sizeof(err))) fail_msg("%s", err);
    assert_null(model_find(m, "output.weight"));
    assert_int_equal(m->n_tensors, N_TINY - 2);
    assert_string_equal(m->name, "model.safetensors"); /* no _name_or_path: the file's name */
    model_free(m);

    /* no num_key_value_heads: as many as the query heads (HF's default); no tokenizer.json: no vocabulary */
    write_text(d, "config.json", CONFIG_JSON(TINY_KEYS));
    char tok[700];
    snprintf(tok, sizeof(tok), "%s/tokenizer.json", d);
    unlink(tok);
    model *raw = calloc(1, sizeof(*raw));
    assert_non_null(raw);
    if (safetensors_open(d, raw, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(raw->cfg.n_kv_heads, 2);
    assert_int_equal(raw->vocab.n, 0);
    assert_int_equal(raw->vocab.bos, -1);
    assert_string_equal(raw->name, strrchr(d, '/') + 1); /* the directory's name */
    model_free(raw);
}

/* ---- writer -> reader round trips ---- */

typedef struct file_src {
    const model *m;
    int fail_at;        /* fill fails on this tensor; -1: never */
    int calls;
} file_src;

static int fill_from_file(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen) {
    file_src *f = user;
    const model_tensor *t = &f->m->tensors[i];
    f->calls++;
    if (i == f->fail_at) return bench_errf(err, errlen, "test: fill fails on tensor %s", t->name);
    if (nbytes != t->nbytes) return bench_errf(err, errlen, "test: %s: asked for %llu bytes", t->name, (unsigned long long)nbytes);
    int fd = open(f->m->files[t->file], O_RDONLY);
    if (fd < 0) return bench_errf(err, errlen, "test: cannot open %s", f->m->files[t->file]);
    ssize_t got = pread(fd, dst, nbytes, (off_t)t->offset);
    close(fd);
    return got == (ssize_t)nbytes ? 0 : bench_errf(err, errlen, "test: short read of %s", t->name);
}

static model_write_src src_of(const model *m, file_src *fs) {
    fs->m = m;
    fs->fail_at = -1;
    fs->calls = 0;
    return (model_write_src){.name = m->name, .cfg = &m->cfg, .vocab = &m->vocab, .n_tensors = m->n_tensors,
                             .tensors = m->tensors, .fill = fill_from_file, .user = fs};
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

static void same_model(const model *a, const model *b, int raw_bytes, const char *what) {
    assert_int_equal(a->cfg.dim, b->cfg.dim);
    assert_int_equal(a->cfg.hidden_dim, b->cfg.hidden_dim);
    assert_int_equal(a->cfg.n_layers, b->cfg.n_layers);
    assert_int_equal(a->cfg.n_heads, b->cfg.n_heads);
    assert_int_equal(a->cfg.n_kv_heads, b->cfg.n_kv_heads);
    assert_int_equal(a->cfg.vocab_size, b->cfg.vocab_size);
    assert_int_equal(a->cfg.seq_len_header, b->cfg.seq_len_header);
    assert_true(a->cfg.rope_theta == b->cfg.rope_theta);
    assert_true(a->cfg.norm_eps == b->cfg.norm_eps);
    assert_int_equal(b->cfg.rope, ROPE_HALF);
    assert_int_equal(a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        const model_tensor *ta = &a->tensors[i], *tb = model_find(b, ta->name);
        if (!tb) fail_msg("%s: tensor %s is missing", what, ta->name);
        assert_int_equal(ta->dtype, tb->dtype);
        assert_int_equal(ta->n_dims, tb->n_dims);
        for (int d = 0; d < MODEL_MAX_DIMS; d++) assert_int_equal(ta->ne[d], tb->ne[d]);
        assert_int_equal(ta->nbytes, tb->nbytes);
        /* the data is aligned for in-place use: 8 for the file's data, the element size for each tensor */
        assert_int_equal(tb->offset % bench_dtype_block_bytes(tb->dtype), 0);
        void *x = raw_bytes ? read_tensor(a, ta) : read_interleaved(a, ta);
        void *y = raw_bytes ? read_tensor(b, tb) : read_interleaved(b, tb);
        if (memcmp(x, y, ta->nbytes)) fail_msg("%s: tensor %s differs", what, ta->name);
        free(x);
        free(y);
    }
    const model_vocab *va = &a->vocab, *vb = &b->vocab;
    assert_int_equal(va->n, vb->n);
    assert_int_equal(va->bos, vb->bos);
    assert_int_equal(va->eos, vb->eos);
    assert_int_equal(va->unk, vb->unk);
    assert_int_equal(va->add_space_prefix, vb->add_space_prefix);
    for (int i = 0; i < va->n; i++) {
        if (strcmp(va->tokens[i], vb->tokens[i])) fail_msg("%s: token %d is \"%s\", was \"%s\"", what, i, vb->tokens[i], va->tokens[i]);
        if (memcmp(&va->scores[i], &vb->scores[i], sizeof(float)))
            fail_msg("%s: token %d score %.9g, was %.9g", what, i, vb->scores[i], va->scores[i]);
        if (va->types[i] != vb->types[i]) fail_msg("%s: token %d type %d, was %d", what, i, vb->types[i], va->types[i]);
    }
}

static int count_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static cJSON *load_json(const char *dir, const char *name) {
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    char err[800];
    char *s = ut_slurp(p, SIZE_MAX, NULL, err, sizeof(err));
    if (!s) fail_msg("%s", err);
    cJSON *j = cJSON_Parse(s);
    free(s);
    assert_non_null(j);
    return j;
}

static void test_round_trip(void **state) {
    (void)state;
    char mp[512], tp[512], a[600], b[600], c[600], err[1024] = "";
    if (!tu_shared("models/stories260K.bin", mp, sizeof(mp)) || !tu_shared("models/tok512.bin", tp, sizeof(tp))) skip();
    model *m0 = NULL, *ma = NULL, *mb = NULL, *mc = NULL;
    if (model_open(mp, tp, &m0, err, sizeof(err))) fail_msg("%s", err);
    file_src fs;
    model_write_src src = src_of(m0, &fs);

    /* one file: llama2.c's interleaved q/k rows become HF's */
    snprintf(a, sizeof(a), "%s/rt-a", tmp);
    if (safetensors_write(a, &src, 0, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(fs.calls, m0->n_tensors);
    if (model_open(a, NULL, &ma, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(ma->n_files, 1);
    assert_string_equal(ma->name, m0->name);
    same_model(m0, ma, 0, "safetensors");

    /* HF's files: config.json is a LlamaForCausalLM's; tokenizer.json has nothing at the top HF would refuse */
    cJSON *cfg = load_json(a, "config.json"), *tok = load_json(a, "tokenizer.json");
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(cfg, "architectures"), 0)->valuestring, "LlamaForCausalLM");
    assert_string_equal(cJSON_GetObjectItem(cfg, "model_type")->valuestring, "llama");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cfg, "tie_word_embeddings")));
    assert_int_equal(cJSON_GetObjectItem(cfg, "bos_token_id")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(cfg, "torch_dtype")->valuestring, "float32");
    const char *top[] = {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model"};
    for (cJSON *k = tok->child; k; k = k->next) {
        int known = 0;
        for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++) known |= !strcmp(k->string, top[i]);
        if (!known) fail_msg("tokenizer.json has top-level key \"%s\", which HF's tokenizers cannot skip", k->string);
    }
    cJSON *tm = cJSON_GetObjectItem(tok, "model");
    assert_string_equal(cJSON_GetObjectItem(tm, "type")->valuestring, "Unigram");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(tm, "vocab")), 512);
    /* tok512 spells spaces ' ': HF's pieces say U+2581, model.bench says how to undo it */
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(tm, "bench"), "piece_space")->valuestring, " ");
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(tm, "vocab"), 259), 0)->valuestring, "\xe2\x96\x81t");
    cJSON_Delete(cfg);
    cJSON_Delete(tok);

    /* shards of 300 KB, and the same bytes */
    snprintf(b, sizeof(b), "%s/rt-b", tmp);
    if (safetensors_write(b, &src, 300000, err, sizeof(err))) fail_msg("%s", err);
    if (model_open(b, NULL, &mb, err, sizeof(err))) fail_msg("%s", err);
    printf("[ INFO     ] 1 MB model in shards of 300 KB: %d files\n", mb->n_files);
    assert_true(mb->n_files >= 3);
    same_model(m0, mb, 0, "sharded safetensors");
    cJSON *idx = load_json(b, "model.safetensors.index.json");
    char first[64];
    snprintf(first, sizeof(first), "model-00001-of-%05d.safetensors", mb->n_files);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(idx, "weight_map"), "model.embed_tokens.weight")->valuestring, first);
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(idx, "metadata"), "total_size")->valuedouble == (double)model_weight_bytes(m0));
    cJSON_Delete(idx);

    /* HF layout in, HF layout out: rows written as they are */
    file_src fs2;
    model_write_src src2 = src_of(ma, &fs2);
    snprintf(c, sizeof(c), "%s/rt-c/", tmp); /* a trailing slash names the same directory */
    if (safetensors_write(c, &src2, 0, err, sizeof(err))) fail_msg("%s", err);
    if (model_open(c, NULL, &mc, err, sizeof(err))) fail_msg("%s", err);
    same_model(ma, mc, 1, "safetensors -> safetensors");
    model_free(mc);
    /* writing it again replaces the earlier output, and leaves no temporary directory */
    if (safetensors_write(c, &src2, 200000, err, sizeof(err))) fail_msg("%s", err);
    if (model_open(c, NULL, &mc, err, sizeof(err))) fail_msg("%s", err);
    assert_true(mc->n_files > 1);
    same_model(ma, mc, 1, "safetensors -> sharded safetensors, replacing");
    assert_int_equal(count_prefix(tmp, "rt-c.tmp"), 0);

    model_free(mc);
    model_free(mb);
    model_free(ma);
    model_free(m0);
}

static int fill_zero(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen) {
    memset(dst, 0, (size_t)nbytes);
    return 0;
}

/* A vocabulary with everything JSON and HF make hard: escapes, odd floats, every type, unusual ids. */
static void test_vocab_exact(void **state) {
    (void)state;
    static const char *pieces[] = {"<pad>", "a\"b\\c", "\x01\n\t\x1f", "\xe2\x96\x81x y", "  ", "<0x0A>", "<s>", "</s>", "\xc3\xa9t\xc3\xa9", "z"};
    const int n = (int)(sizeof(pieces) / sizeof(pieces[0]));
    float scores[] = {0.1f, -0.0f, 3.4028235e38f, -1e-45f, 1.17549435e-38f, -123456.789f, 1e-5f, 0.0f, -7.0f, 1.0f / 3.0f};
    int32_t types[] = {TOKEN_UNUSED, TOKEN_NORMAL, TOKEN_USER, TOKEN_NORMAL, TOKEN_NORMAL, TOKEN_BYTE, TOKEN_CONTROL, TOKEN_CONTROL, TOKEN_NORMAL, TOKEN_UNKNOWN};
    model_vocab v = {.n = n, .tokens = (char **)pieces, .scores = scores, .types = types, .bos = 6, .eos = 7, .unk = -1, .add_space_prefix = 0};
    model_config cfg = {.dim = 2, .hidden_dim = 4, .n_layers = 1, .n_heads = 1, .n_kv_heads = 1, .vocab_size = n,
                        .seq_len = 8, .seq_len_header = 8, .rope_theta = 500000.0f, .norm_eps = 1e-6f, .rope = ROPE_INTERLEAVED};
    model_tensor t = {.name = (char *)"token_embd.weight", .dtype = BENCH_F32, .n_dims = 2, .ne = {2, n}, .nbytes = (uint64_t)n * 8};
    char d[600], err[1024] = "";
    for (int variant = 0; variant < 2; variant++) {
        /* variant 1: no piece has U+2581, so ' ' is written as U+2581 for HF and undone on reading */
        if (variant == 1) pieces[3] = "x y";
        snprintf(d, sizeof(d), "%s/vocab-%d", tmp, variant);
        model_write_src src = {.name = "odd vocab", .cfg = &cfg, .vocab = &v, .n_tensors = 1, .tensors = &t,
                               .fill = fill_zero, .user = NULL};
        if (safetensors_write(d, &src, 0, err, sizeof(err))) fail_msg("%s", err);
        model *m = calloc(1, sizeof(*m));
        assert_non_null(m);
        if (safetensors_open(d, m, err, sizeof(err))) fail_msg("%s", err);
        assert_string_equal(m->name, "odd vocab");
        assert_true(m->cfg.rope_theta == 500000.0f);
        assert_true(m->cfg.norm_eps == 1e-6f);
        assert_int_equal(m->vocab.n, n);
        for (int i = 0; i < n; i++) {
            assert_string_equal(m->vocab.tokens[i], pieces[i]);
            if (memcmp(&m->vocab.scores[i], &scores[i], sizeof(float)))
                fail_msg("token %d: score %.9g, was %.9g", i, m->vocab.scores[i], scores[i]);
            assert_int_equal(m->vocab.types[i], types[i]);
        }
        assert_int_equal(m->vocab.bos, 6);
        assert_int_equal(m->vocab.eos, 7);
        assert_int_equal(m->vocab.unk, -1);
        assert_int_equal(m->vocab.add_space_prefix, 0);
        model_free(m);
    }
    pieces[3] = "\xe2\x96\x81x y";
}

/* ---- the writer's failures leave nothing ---- */

static void test_write_errors(void **state) {
    (void)state;
    char mp[512], tp[512], d[600], err[1024] = "";
    if (!tu_shared("models/stories260K.bin", mp, sizeof(mp)) || !tu_shared("models/tok512.bin", tp, sizeof(tp))) skip();
    model *m0 = NULL;
    if (model_open(mp, tp, &m0, err, sizeof(err))) fail_msg("%s", err);
    file_src fs;
    model_write_src src = src_of(m0, &fs);

    /* a fill that fails half-way */
    snprintf(d, sizeof(d), "%s/werr-fill", tmp);
    fs.fail_at = m0->n_tensors / 2;
    assert_int_equal(safetensors_write(d, &src, 300000, err, sizeof(err)), -1);
    printf("[ INFO     ] %s\n", err);
    assert_non_null(strstr(err, "fill fails"));
    assert_int_equal(access(d, F_OK), -1);
    assert_int_equal(count_prefix(tmp, "werr-fill"), 0);

    /* q8_0 has no safetensors dtype */
    model_tensor *ts = malloc((size_t)m0->n_tensors * sizeof(*ts));
    assert_non_null(ts);
    memcpy(ts, m0->tensors, (size_t)m0->n_tensors * sizeof(*ts));
    ts[1].dtype = BENCH_Q8_0;
    src.tensors = ts;
    fs.fail_at = -1;
    snprintf(d, sizeof(d), "%s/werr-q8", tmp);
    assert_int_equal(safetensors_write(d, &src, 0, err, sizeof(err)), -1);
    printf("[ INFO     ] %s\n", err);
    assert_non_null(strstr(err, "safetensors holds f32, f16 and bf16, not q8_0"));
    assert_int_equal(access(d, F_OK), -1);
    /* a tensor with no HF name */
    memcpy(ts, m0->tensors, (size_t)m0->n_tensors * sizeof(*ts));
    ts[2].name = (char *)"blk.0.attn_q_norm.weight";
    assert_int_equal(safetensors_write(d, &src, 0, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "has no Hugging Face Llama name"));
    assert_int_equal(access(d, F_OK), -1);
    free(ts);
    src.tensors = m0->tensors;

    /* a directory holding something else is never replaced */
    new_dir(d, sizeof(d), "werr-taken");
    write_text(d, "notes.txt", "mine");
    assert_int_equal(safetensors_write(d, &src, 0, err, sizeof(err)), -1);
    printf("[ INFO     ] %s\n", err);
    assert_non_null(strstr(err, "exists and is not an earlier safetensors output"));
    char notes[700];
    snprintf(notes, sizeof(notes), "%s/notes.txt", d);
    assert_int_equal(access(notes, R_OK), 0);
    /* nor is a file */
    snprintf(d, sizeof(d), "%s/werr-file", tmp);
    write_file(d, "x", 1);
    assert_int_equal(safetensors_write(d, &src, 0, err, sizeof(err)), -1);
    /* an empty directory is filled */
    new_dir(d, sizeof(d), "werr-empty");
    if (safetensors_write(d, &src, 0, err, sizeof(err))) fail_msg("%s", err);
    model *m = NULL;
    if (model_open(d, NULL, &m, err, sizeof(err))) fail_msg("%s", err);
    model_free(m);
    model_free(m0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_header_length),
        cmocka_unit_test(test_header_length_beyond_file),
        cmocka_unit_test(test_invalid_json),
        cmocka_unit_test(test_data_offsets_beyond_file),
        cmocka_unit_test(test_shape_size_mismatch),
        cmocka_unit_test(test_unknown_dtype),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_index_errors),
        cmocka_unit_test(test_tokenizer_errors),
        cmocka_unit_test(test_tiny_hf_dir),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_vocab_exact),
        cmocka_unit_test(test_write_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
