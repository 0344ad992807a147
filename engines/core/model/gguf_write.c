/* GGUF v3 writer: the layout gguf.c reads (see there), llama architecture.
 *
 * Keys written, all that llama.cpp needs to run the file:
 *   general.architecture "llama", general.name, general.alignment (32),
 *   general.file_type (llama.cpp's LLAMA_FTYPE of the most common weight dtype),
 *   general.quantization_version 2 (when any tensor is block-quantised),
 *   llama.context_length, embedding_length, block_count, feed_forward_length,
 *   attention.head_count, attention.head_count_kv, rope.dimension_count,
 *   rope.freq_base, attention.layer_norm_rms_epsilon, vocab_size,
 *   rope.scaling.type "linear" and rope.scaling.factor (when the model has linear scaling),
 *   tokenizer.ggml.model "llama", tokens, scores, token_type, bos/eos/unknown
 *   token ids and add_space_prefix (when the model has a vocabulary), and
 *   tokenizer.chat_template when the vocabulary has one.
 * Pieces are written with SentencePiece's U+2581 for spaces, as llama.cpp's
 * converter does, whichever the source stored (llama2.c's tokenizer.bin stores ' ').
 * q/k rows are written in the interleaved layout: rows filled in HF's order are
 * permuted back.
 *
 * The file is written beside its name and renamed into place, so a failed
 * write leaves no file behind.
 */
#include "model_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "hf_names.h"

#define GW_ALIGNMENT 32

enum { GV_U32 = 4, GV_I32 = 5, GV_F32 = 6, GV_BOOL = 7, GV_STRING = 8, GV_ARRAY = 9 };

/* ggml's type numbers (gguf.c has the table of names). */
static uint32_t ggml_type_of(bench_dtype t) {
    switch (t) {
    case BENCH_F16: return 1;
    case BENCH_Q4_0: return 2;
    case BENCH_Q4_1: return 3;
    case BENCH_Q5_0: return 6;
    case BENCH_Q5_1: return 7;
    case BENCH_Q8_0: return 8;
    case BENCH_Q2_K: return 10;
    case BENCH_Q3_K: return 11;
    case BENCH_Q4_K: return 12;
    case BENCH_Q5_K: return 13;
    case BENCH_Q6_K: return 14;
    case BENCH_BF16: return 30;
    default: return 0;
    }
}

/* llama.cpp's LLAMA_FTYPE: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9,
 * Q2_K 10, Q3_K_M 12, Q4_K_M 15, Q5_K_M 17, Q6_K 18, BF16 32 (a file kept in K-quants
 * says _M: the mix llama-quantize makes by default). */
static uint32_t file_type_of(bench_dtype t) {
    switch (t) {
    case BENCH_F16: return 1;
    case BENCH_Q4_0: return 2;
    case BENCH_Q4_1: return 3;
    case BENCH_Q8_0: return 7;
    case BENCH_Q5_0: return 8;
    case BENCH_Q5_1: return 9;
    case BENCH_Q2_K: return 10;
    case BENCH_Q3_K: return 12;
    case BENCH_Q4_K: return 15;
    case BENCH_Q5_K: return 17;
    case BENCH_Q6_K: return 18;
    case BENCH_BF16: return 32;
    default: return 0;
    }
}

/* ---- buffered output with sticky error: the header is many small writes ---- */

typedef struct gw {
    const char *path;
    char tmp[4096];
    FILE *f;
    uint64_t pos;
    int failed;         /* errno of the first failed write, sticky */
} gw;

static void gw_bytes(gw *w, const void *p, size_t n) {
    if (w->failed || n == 0) return;
    if (fwrite(p, 1, n, w->f) != n) w->failed = errno ? errno : EIO;
    w->pos += n;
}
static void gw_u32(gw *w, uint32_t v) { gw_bytes(w, &v, 4); }
static void gw_u64(gw *w, uint64_t v) { gw_bytes(w, &v, 8); }
static void gw_str(gw *w, const char *s) {
    uint64_t n = strlen(s);
    gw_u64(w, n);
    gw_bytes(w, s, n);
}

/* A piece as llama.cpp stores it: ' ' -> U+2581. */
static void gw_piece(gw *w, const char *s) {
    uint64_t n = 0;
    for (const char *p = s; *p; p++) n += *p == ' ' ? 3 : 1;
    gw_u64(w, n);
    for (const char *p = s; *p; p++) {
        if (*p == ' ') gw_bytes(w, "\xe2\x96\x81", 3);
        else gw_bytes(w, p, 1);
    }
}

static void kv_u32(gw *w, const char *k, uint32_t v) { gw_str(w, k); gw_u32(w, GV_U32); gw_u32(w, v); }
static void kv_f32(gw *w, const char *k, float v) { gw_str(w, k); gw_u32(w, GV_F32); gw_bytes(w, &v, 4); }
static void kv_str(gw *w, const char *k, const char *v) { gw_str(w, k); gw_u32(w, GV_STRING); gw_str(w, v); }
static void kv_bool(gw *w, const char *k, int v) {
    uint8_t b = v != 0;
    gw_str(w, k);
    gw_u32(w, GV_BOOL);
    gw_bytes(w, &b, 1);
}
static void kv_array_head(gw *w, const char *k, uint32_t elem_type, uint64_t n) {
    gw_str(w, k);
    gw_u32(w, GV_ARRAY);
    gw_u32(w, elem_type);
    gw_u64(w, n);
}

static void gw_pad(gw *w) {
    static const char zeros[GW_ALIGNMENT];
    gw_bytes(w, zeros, (GW_ALIGNMENT - w->pos % GW_ALIGNMENT) % GW_ALIGNMENT);
}

static uint64_t align_up(uint64_t x) { return (x + GW_ALIGNMENT - 1) / GW_ALIGNMENT * GW_ALIGNMENT; }

static int check_src(const char *path, const model_write_src *s, char *err, size_t errlen) {
    for (int i = 0; i < s->n_tensors; i++) {
        const model_tensor *t = &s->tensors[i];
        if ((unsigned)t->dtype >= BENCH_DTYPE_COUNT)
            return bench_errf(err, errlen, "%s: tensor %s has an unknown dtype %d", path, t->name, (int)t->dtype);
        if (t->n_dims < 1 || t->n_dims > MODEL_MAX_DIMS)
            return bench_errf(err, errlen, "%s: tensor %s has %d dims, expected 1..%d", path, t->name, t->n_dims, MODEL_MAX_DIMS);
        int64_t n = model_tensor_nelems(t->n_dims, t->ne);
        size_t row = bench_dtype_row_bytes(t->dtype, t->ne[0]);
        if (n < 0 || row == 0 || t->nbytes != (uint64_t)row * (uint64_t)(n / t->ne[0]))
            return bench_errf(err, errlen, "%s: tensor %s: %llu bytes do not hold its shape as %s", path, t->name,
                              (unsigned long long)t->nbytes, bench_dtype_name(t->dtype));
        if (hf_rope_heads(t->name, s->cfg) && s->cfg->rope == ROPE_HALF && t->ne[1] % (2 * hf_rope_heads(t->name, s->cfg)))
            return bench_errf(err, errlen, "%s: tensor %s: %lld rows are not a whole number of head pairs", path, t->name,
                              (long long)t->ne[1]);
    }
    const model_vocab *v = s->vocab;
    if (v && v->n > 0 && (!v->tokens || !v->scores))
        return bench_errf(err, errlen, "%s: the vocabulary has %d tokens but no pieces or scores", path, v->n);
    return 0;
}

static void write_header(gw *w, const model_write_src *s) {
    const model_config *c = s->cfg;
    const model_vocab *v = s->vocab && s->vocab->n > 0 ? s->vocab : NULL;
    int any_q8 = 0;
    for (int i = 0; i < s->n_tensors; i++) any_q8 |= bench_dtype_is_quant(s->tensors[i].dtype);
    /* general.* 3, llama.* 10, tokenizer.* 5 + the ids there are */
    int scaled = c->rope_linear > 0.0f; /* linear RoPE scaling: type and factor */
    uint64_t n_kv = 3 + (uint64_t)any_q8 + (s->name ? 1 : 0) + 10 + 2 * (uint64_t)scaled +
                    (v ? 5 + (uint64_t)(v->bos >= 0) + (uint64_t)(v->eos >= 0) + (uint64_t)(v->unk >= 0) +
                             (uint64_t)(v->chat_template != NULL) : 0);

    gw_bytes(w, "GGUF", 4);
    gw_u32(w, 3);
    gw_u64(w, (uint64_t)s->n_tensors);
    gw_u64(w, n_kv);

    kv_str(w, "general.architecture", "llama");
    if (s->name) kv_str(w, "general.name", s->name);
    kv_u32(w, "general.alignment", GW_ALIGNMENT);
    kv_u32(w, "general.file_type", file_type_of(model_main_dtype(s->tensors, s->n_tensors)));
    if (any_q8) kv_u32(w, "general.quantization_version", 2);
    kv_u32(w, "llama.context_length", (uint32_t)c->seq_len_header);
    kv_u32(w, "llama.embedding_length", (uint32_t)c->dim);
    kv_u32(w, "llama.block_count", (uint32_t)c->n_layers);
    kv_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden_dim);
    kv_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads);
    kv_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    kv_u32(w, "llama.rope.dimension_count", (uint32_t)(c->dim / c->n_heads));
    kv_f32(w, "llama.rope.freq_base", c->rope_theta);
    if (scaled) {
        kv_str(w, "llama.rope.scaling.type", "linear");
        kv_f32(w, "llama.rope.scaling.factor", c->rope_linear);
    }
    kv_f32(w, "llama.attention.layer_norm_rms_epsilon", c->norm_eps);
    kv_u32(w, "llama.vocab_size", (uint32_t)c->vocab_size);
    if (v) {
        kv_str(w, "tokenizer.ggml.model", "llama");
        kv_array_head(w, "tokenizer.ggml.tokens", GV_STRING, (uint64_t)v->n);
        for (int i = 0; i < v->n; i++) gw_piece(w, v->tokens[i]);
        kv_array_head(w, "tokenizer.ggml.scores", GV_F32, (uint64_t)v->n);
        gw_bytes(w, v->scores, (size_t)v->n * sizeof(float));
        kv_array_head(w, "tokenizer.ggml.token_type", GV_I32, (uint64_t)v->n);
        for (int i = 0; i < v->n; i++) gw_u32(w, (uint32_t)(v->types ? v->types[i] : TOKEN_NORMAL));
        if (v->bos >= 0) kv_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos);
        if (v->eos >= 0) kv_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
        if (v->unk >= 0) kv_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk);
        kv_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
        if (v->chat_template) kv_str(w, "tokenizer.chat_template", v->chat_template);
    }

    uint64_t off = 0;
    for (int i = 0; i < s->n_tensors; i++) {
        const model_tensor *t = &s->tensors[i];
        gw_str(w, t->name);
        gw_u32(w, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) gw_u64(w, (uint64_t)t->ne[d]);
        gw_u32(w, ggml_type_of(t->dtype));
        gw_u64(w, off);
        off = align_up(off + t->nbytes);
    }
    gw_pad(w);
}

int gguf_write(const char *path, const model_write_src *s, char *err, size_t errlen) {
    if (check_src(path, s, err, errlen)) return -1;
    gw w = {.path = path};
    void *buf = NULL, *perm = NULL;
    int rc = -1, fd = -1;
    if (snprintf(w.tmp, sizeof(w.tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(w.tmp))
        return bench_errf(err, errlen, "%s: path too long", path);
    if ((fd = mkostemp(w.tmp, O_CLOEXEC)) < 0) {
        w.tmp[0] = '\0';
        return bench_errf(err, errlen, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
    }
    /* mkostemp makes the file 0600; a model is as readable as any file written with open() */
    if (fchmod(fd, 0644) || !(w.f = fdopen(fd, "wb"))) {
        bench_errf(err, errlen, "%s: %s", w.tmp, strerror(errno));
        close(fd);
        goto done;
    }
    setvbuf(w.f, NULL, _IOFBF, 1 << 20);
    write_header(&w, s);

    uint64_t cap = 0;
    for (int i = 0; i < s->n_tensors; i++)
        if (s->tensors[i].nbytes > cap) cap = s->tensors[i].nbytes;
    if (!(buf = malloc(cap ? cap : 1)) || !(perm = malloc(cap ? cap : 1))) {
        bench_errf(err, errlen, "%s: out of memory for a %llu-byte tensor buffer", path, (unsigned long long)cap);
        goto done;
    }
    for (int i = 0; i < s->n_tensors && !w.failed; i++) {
        const model_tensor *t = &s->tensors[i];
        if (s->fill(s->user, i, buf, t->nbytes, err, errlen)) goto done;
        const void *out = buf;
        int heads = hf_rope_heads(t->name, s->cfg);
        if (heads && s->cfg->rope == ROPE_HALF) {
            hf_permute_rows(perm, buf, heads, t->ne[1], bench_dtype_row_bytes(t->dtype, t->ne[0]), 0);
            out = perm;
        }
        gw_bytes(&w, out, t->nbytes);
        gw_pad(&w);
    }
    if (!w.failed && fflush(w.f)) w.failed = errno;
    if (!w.failed && fsync(fileno(w.f))) w.failed = errno;
    if (!w.failed) model_write_drop_cache(fileno(w.f));
    if (w.failed) {
        bench_errf(err, errlen, "%s: write failed at byte %llu: %s", path, (unsigned long long)w.pos, strerror(w.failed));
        goto done;
    }
    int e = fclose(w.f) ? errno : 0;
    w.f = NULL;
    if (e) { bench_errf(err, errlen, "%s: %s", path, strerror(e)); goto done; }
    if (rename(w.tmp, path)) {
        bench_errf(err, errlen, "%s: cannot rename %s into place: %s", path, w.tmp, strerror(errno));
        goto done;
    }
    w.tmp[0] = '\0';
    rc = 0;
done:
    if (w.f) fclose(w.f);
    if (w.tmp[0]) unlink(w.tmp);
    free(buf);
    free(perm);
    return rc;
}
