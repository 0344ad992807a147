/* Writes the fuzz targets' model seeds with bench's own writers: one micro model
 * (dim 8, 1 layer, 2 heads / 1 KV head, 16 tokens) as GGUF f32 and f16, the f32 one
 * again with one extra tensor of every block-quantised type bench reads (micro_blocks:
 * Q4_0..Q8_0 and Q2_K..Q6_K, which bench cannot quantise to, written as raw blocks so
 * the fuzzer starts inside those types' paths), a safetensors directory, and a
 * llama2.c checkpoint with its tokenizer.bin, each a few KB, in the input layouts
 * fuzz/fuzz_*.c expect.
 * Usage: mkseeds OUTDIR   (make fuzz-seeds; the results are committed in fuzz/corpus) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engines/core/model/model.h"
#include "engines/core/model/model_write.h"
#include "util/ut_fs.h"

#define DIM 8
#define HID 16
#define NKV 1
#define HD 4
#define VOCAB 16

static model_tensor T[32];
static int NT;

static void add(const char *name, bench_dtype dt, int64_t cols, int64_t rows) {
    model_tensor *t = &T[NT++];
    t->name = (char *)name;
    t->dtype = dt;
    t->n_dims = rows == 1 ? 1 : 2;
    t->ne[0] = cols;
    t->ne[1] = rows;
    /* cols is a whole number of blocks for every dtype used here */
    t->nbytes = (uint64_t)(cols * rows) / bench_dtype_block_elems(dt) * bench_dtype_block_bytes(dt);
}

static int fill(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen) {
    (void)user; (void)err; (void)errlen;
    if (T[i].dtype == BENCH_F32) {
        float *f = dst;
        for (uint64_t k = 0; k < nbytes / 4; k++) f[k] = T[i].n_dims == 1 ? 1.0f : (float)((int)(k * 7 + (uint64_t)i) % 13 - 6) / 32.0f;
    } else if (T[i].dtype == BENCH_F16) {
        memset(dst, 0x30, nbytes); /* small f16 values */
    } else {
        /* raw blocks: any bytes are a valid block (f16 scales included), so a pattern
         * that varies within a block is as good as a quantised matrix here */
        uint8_t *b = dst;
        for (uint64_t k = 0; k < nbytes; k++) b[k] = (uint8_t)(k * 37 + (uint64_t)i * 11);
    }
    return 0;
}

static void make_tensors(bench_dtype dt, int tied) {
    NT = 0;
    add("token_embd.weight", dt, DIM, VOCAB);
    add("blk.0.attn_norm.weight", BENCH_F32, DIM, 1);
    add("blk.0.attn_q.weight", dt, DIM, DIM);
    add("blk.0.attn_k.weight", dt, DIM, NKV * HD);
    add("blk.0.attn_v.weight", dt, DIM, NKV * HD);
    add("blk.0.attn_output.weight", dt, DIM, DIM);
    add("blk.0.ffn_norm.weight", BENCH_F32, DIM, 1);
    add("blk.0.ffn_gate.weight", dt, DIM, HID);
    add("blk.0.ffn_down.weight", dt, HID, DIM);
    add("blk.0.ffn_up.weight", dt, DIM, HID);
    add("output_norm.weight", BENCH_F32, DIM, 1);
    if (!tied) add("output.weight", dt, DIM, VOCAB);
}

static char *slurp(const char *p, size_t *n) {
    char err[512];
    char *b = ut_slurp(p, SIZE_MAX, n, err, sizeof(err));
    if (!b) { fprintf(stderr, "%s\n", err); exit(1); }
    return b;
}

static void put(FILE *f, const void *p, size_t n) {
    if (fwrite(p, 1, n, f) != n) { perror("write"); exit(1); }
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: mkseeds OUTDIR\n"); return 2; }
    const char *out = argv[1];
    char err[1024], p[4096], q[4096];
    static const char *pieces[VOCAB] = {"<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "\xe2\x96\x81", "\xe2\x96\x81" "the", "a", "b", "c",
                                        "\xe2\x96\x81" "a", "th", "he", "e", "t", "h"};
    float scores[VOCAB];
    int32_t types[VOCAB];
    for (int i = 0; i < VOCAB; i++) {
        scores[i] = (float)-i;
        types[i] = i == 0 ? TOKEN_UNKNOWN : i < 3 ? TOKEN_CONTROL : i < 5 ? TOKEN_BYTE : TOKEN_NORMAL;
    }
    model_vocab v = {.n = VOCAB, .tokens = (char **)pieces, .scores = scores, .types = types, .bos = 1, .eos = 2, .unk = 0,
                     .add_space_prefix = 1};
    model_config cfg = {.dim = DIM, .hidden_dim = HID, .n_layers = 1, .n_heads = 2, .n_kv_heads = NKV, .vocab_size = VOCAB,
                        .seq_len = 8, .seq_len_header = 8, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .rope = ROPE_INTERLEAVED};
    model_write_src src = {.name = "micro", .cfg = &cfg, .vocab = &v, .fill = fill};

    /* GGUF: f32 tied, f16 untied */
    make_tensors(BENCH_F32, 1);
    src.n_tensors = NT; src.tensors = T;
    snprintf(p, sizeof(p), "%s/fuzz_gguf/micro_f32.gguf", out);
    if (gguf_write(p, &src, err, sizeof(err))) { fprintf(stderr, "%s\n", err); return 1; }
    make_tensors(BENCH_F16, 0);
    src.n_tensors = NT;
    snprintf(p, sizeof(p), "%s/fuzz_gguf/micro_f16.gguf", out);
    if (gguf_write(p, &src, err, sizeof(err))) { fprintf(stderr, "%s\n", err); return 1; }

    /* GGUF: f32 tied, plus one [256, 1] tensor per block-quantised type: model_validate
     * ignores tensors the architecture does not name, so the file still loads */
    make_tensors(BENCH_F32, 1);
    static const bench_dtype blocks[] = {BENCH_Q8_0, BENCH_Q4_0, BENCH_Q4_1, BENCH_Q5_0, BENCH_Q5_1,
                                         BENCH_Q2_K, BENCH_Q3_K, BENCH_Q4_K, BENCH_Q5_K, BENCH_Q6_K};
    static char names[sizeof(blocks) / sizeof(blocks[0])][32];
    for (size_t k = 0; k < sizeof(blocks) / sizeof(blocks[0]); k++) {
        snprintf(names[k], sizeof(names[k]), "extra.%s.weight", bench_dtype_name(blocks[k]));
        add(names[k], blocks[k], BENCH_QK_K, 1);
    }
    src.n_tensors = NT;
    snprintf(p, sizeof(p), "%s/fuzz_gguf/micro_blocks.gguf", out);
    if (gguf_write(p, &src, err, sizeof(err))) { fprintf(stderr, "%s\n", err); return 1; }

    /* llama2.c: CHECKPOINT "\n@@tok@@\n" TOKENIZER */
    make_tensors(BENCH_F32, 1);
    src.n_tensors = NT;
    snprintf(p, sizeof(p), "%s/tmp.bin", out);
    snprintf(q, sizeof(q), "%s/tmp.tok", out);
    if (llama2c_write(p, &src, err, sizeof(err)) || llama2c_write_tokenizer(q, &v, err, sizeof(err))) { fprintf(stderr, "%s\n", err); return 1; }
    {
        size_t n1, n2;
        char *a = slurp(p, &n1), *b = slurp(q, &n2), dst[4200];
        snprintf(dst, sizeof(dst), "%s/fuzz_llama2c/micro.bin", out);
        FILE *f = fopen(dst, "wb");
        if (!f) { perror(dst); return 1; }
        put(f, a, n1); put(f, "\n@@tok@@\n", 9); put(f, b, n2);
        fclose(f);
        free(a); free(b);
        remove(p); remove(q);
    }

    /* safetensors: FLAGS DATALEN CONFIG @@ HEADER @@ INDEX @@ TOKENIZER, the data section's
     * length in DATALEN (the target writes the length prefix and the zeros) */
    snprintf(p, sizeof(p), "%s/st", out);
    mkdir(p, 0755);
    if (safetensors_write(p, &src, 0, err, sizeof(err))) { fprintf(stderr, "%s\n", err); return 1; }
    {
        size_t nc, ns, nt;
        char cp[4200], sp[4200], tp[4200], dst[4200];
        snprintf(cp, sizeof(cp), "%s/config.json", p);
        snprintf(sp, sizeof(sp), "%s/model.safetensors", p);
        snprintf(tp, sizeof(tp), "%s/tokenizer.json", p);
        char *c = slurp(cp, &nc), *s = slurp(sp, &ns), *t = slurp(tp, &nt);
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--) hl = hl << 8 | (uint8_t)s[i];
        size_t data = ns - 8 - (size_t)hl;
        const char *index = "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {\"model.embed_tokens.weight\": "
                            "\"model-00001-of-00001.safetensors\"}}";
        for (int variant = 0; variant < 3; variant++) {
            /* 0: single file; 1: the same through an index; 2: the raw file, length prefix included */
            static const char *nm[] = {"micro_dir", "micro_index", "micro_raw"};
            unsigned char hdr[3] = {(unsigned char)(variant == 1 ? 2 : variant == 2 ? 1 : 0), (unsigned char)(data & 255),
                                    (unsigned char)(data >> 8)};
            snprintf(dst, sizeof(dst), "%s/fuzz_safetensors/%s", out, nm[variant]);
            FILE *f = fopen(dst, "wb");
            if (!f) { perror(dst); return 1; }
            put(f, hdr, 3);
            put(f, c, nc); put(f, "\n@@\n", 4);
            if (variant == 2) put(f, s, ns); else put(f, s + 8, (size_t)hl);
            put(f, "\n@@\n", 4);
            put(f, index, strlen(index)); put(f, "\n@@\n", 4);
            put(f, t, nt);
            fclose(f);
        }
        free(c); free(s); free(t);
        remove(cp); remove(sp); remove(tp);
        remove(p);
    }
    return 0;
}
