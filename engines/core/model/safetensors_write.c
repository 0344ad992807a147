/* Safetensors writer: a Hugging Face Llama model directory.
 *
 *   dir/config.json                    LlamaForCausalLM's config (the keys safetensors.c reads, and HF's usual ones)
 *   dir/tokenizer.json                 the vocabulary (when there is one), see below
 *   dir/model.safetensors              every tensor, or, when they exceed shard_bytes:
 *   dir/model-0000i-of-0000n.safetensors + dir/model.safetensors.index.json
 *
 * Each .safetensors file: u64 header length N, N bytes of JSON padded with spaces
 * so the data starts at a multiple of 8, then the tensors back to back. The
 * safetensors library refuses holes between tensors, so alignment comes from the
 * order instead, as its own serializer does it: within a file the f32 tensors
 * come first, then the 2-byte ones (all sizes are whole elements), so every
 * tensor starts at a multiple of its element size. fill is therefore called in
 * file order, which may differ from the array's.
 *
 * tokenizer.json is HF's SentencePiece form: a "Unigram" model whose vocab holds
 * every piece with its score (printed with the fewest digits that read back to the
 * same float), added_tokens for the control and user tokens, and Llama's
 * normalizer (Prepend "▁", Replace " " -> "▁") and decoder. model.bench keeps what
 * HF's fields cannot: token types, bos/eos/unk, add_space_prefix, and piece_space
 * " " when the pieces spell a space ' ' (llama2.c's tokenizer.bin) and the file
 * spells it "▁" for HF. It sits inside "model" because HF's tokenizers rejects
 * unknown top-level keys (its Tokenizer visitor skips a key without its value),
 * while the model object is parsed through a buffered value that tolerates them.
 *
 * Everything is written into a fresh directory beside dir and renamed into place
 * at the end: a failed write leaves nothing at dir. An existing dir is replaced
 * only when it holds nothing but these files (an earlier output); anything else
 * in it is never deleted.
 */
#include "model_write.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "hf_names.h"
#include "util/ut_buf.h"

#define SW_PATH 4096
#define SW_SPACE_SYM "\xe2\x96\x81" /* U+2581, SentencePiece's space */
#define SW_MAX_SHARDS 99999         /* five digits in model-0000i-of-0000n */

/* ---- a growing text buffer; an allocation failure is remembered and reported once ---- */

typedef struct sw_buf {
    ut_buf t;
    int oom;
} sw_buf;

static void sb_add(sw_buf *b, const char *s, size_t n) {
    if (!b->oom && ut_buf_append(&b->t, s, n)) b->oom = 1;
}

static void sb_puts(sw_buf *b, const char *s) { sb_add(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void sb_printf(sw_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (!b->oom && ut_buf_vprintf(&b->t, fmt, ap)) b->oom = 1;
    va_end(ap);
}

/* A JSON string; space_sym: write ' ' as U+2581. */
static void sb_str(sw_buf *b, const char *s, int space_sym) {
    sb_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            sb_add(b, e, 2);
        } else if (*p < 0x20) {
            sb_printf(b, "\\u%04x", *p);
        } else if (*p == ' ' && space_sym) {
            sb_puts(b, SW_SPACE_SYM);
        } else {
            sb_add(b, (const char *)p, 1);
        }
    }
    sb_add(b, "\"", 1);
}

/* The shortest decimal that reads back (strtod, then to float, as safetensors.c
 * reads it) to exactly f: 1e-05 rather than 9.99999975e-06. f must be finite. */
static void sb_float(sw_buf *b, float f) {
    char s[32];
    if (f == truncf(f) && fabsf(f) < 1e9f && !signbit(f)) { /* 10000, not 1e+04 */
        snprintf(s, sizeof(s), "%.0f", (double)f);
        sb_puts(b, s);
        return;
    }
    for (int p = 1; p <= 9; p++) {
        snprintf(s, sizeof(s), "%.*g", p, (double)f);
        float r = (float)strtod(s, NULL);
        if (memcmp(&r, &f, sizeof(f)) == 0) break;
    }
    sb_puts(b, s);
}

/* ---- files ---- */

static int write_all(int fd, const void *buf, size_t n, const char *path, char *err, size_t errlen) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return bench_errf(err, errlen, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int create_file(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    return fd;
}

/* fsync before close: the rename that publishes the directory must not outrun its contents. */
static int close_file(int fd, const char *path, char *err, size_t errlen) {
    int rc = fsync(fd), e = errno;
    if (!rc) model_write_drop_cache(fd);
    if (close(fd) && !rc) rc = -1, e = errno;
    return rc ? bench_errf(err, errlen, "%s: %s", path, strerror(e)) : 0;
}

static int write_text_file(const char *dir, const char *name, const sw_buf *b, char *err, size_t errlen) {
    char path[SW_PATH];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) return bench_errf(err, errlen, "%s: path too long", dir);
    if (b->oom) return bench_errf(err, errlen, "%s: out of memory", path);
    int fd = create_file(path, err, errlen);
    if (fd < 0) return -1;
    if (write_all(fd, b->t.p, b->t.len, path, err, errlen)) {
        close(fd);
        return -1;
    }
    return close_file(fd, path, err, errlen);
}

/* The names this writer puts in a directory: an existing directory holding only these is an earlier output. */
static int is_our_file(const char *name) {
    int i, n, end = 0;
    if (!strcmp(name, "config.json") || !strcmp(name, "tokenizer.json") || !strcmp(name, "model.safetensors") ||
        !strcmp(name, "model.safetensors.index.json"))
        return 1;
    return sscanf(name, "model-%5d-of-%5d.safetensors%n", &i, &n, &end) == 2 && end > 0 && name[end] == '\0';
}

/* 0: dir is absent or an empty directory; 1: a directory of our files only; -1: something else. */
static int dir_state(const char *dir) {
    struct stat st;
    if (lstat(dir, &st)) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return -1;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int state = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            if (!is_our_file(e->d_name)) {
                state = -1;
                break;
            }
            state = 1;
        }
    closedir(d);
    return state;
}

/* Removes a directory this writer made, or an earlier output it replaced. Only the
 * files this writer names are unlinked: anything else keeps the directory. */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (is_our_file(e->d_name)) unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(dir);
}

/* ---- the plan: which tensor goes where ---- */

typedef struct sw_item {
    int src;                /* index into src->tensors */
    char hf[160];           /* HF name */
    int rope_heads;         /* heads whose q/k rows are permuted to HF's order, 0: none */
    int shard;
    uint64_t offset;        /* from the start of its file's data */
} sw_item;

static const char *st_dtype_name(bench_dtype dt) {
    return dt == BENCH_F32 ? "F32" : dt == BENCH_F16 ? "F16" : "BF16";
}

static const char *torch_dtype_name(bench_dtype dt) {
    return dt == BENCH_F32 ? "float32" : dt == BENCH_F16 ? "float16" : "bfloat16";
}

/* Checks every tensor and names it; the plan is made before anything is written. */
static int plan_items(const char *dir, const model_write_src *src, sw_item *it, char *err, size_t errlen) {
    const model_config *c = src->cfg;
    for (int i = 0; i < src->n_tensors; i++) {
        const model_tensor *t = &src->tensors[i];
        it[i].src = i;
        if (bench_dtype_is_quant(t->dtype))
            return bench_errf(err, errlen, "%s: tensor %s: safetensors holds f32, f16 and bf16, not %s", dir, t->name,
                              bench_dtype_name(t->dtype));
        if (t->dtype != BENCH_F32 && t->dtype != BENCH_F16 && t->dtype != BENCH_BF16)
            return bench_errf(err, errlen, "%s: tensor %s: dtype %d has no safetensors name", dir, t->name, (int)t->dtype);
        if (hf_name_from_gguf(t->name, it[i].hf, sizeof(it[i].hf)))
            return bench_errf(err, errlen, "%s: tensor %s has no Hugging Face Llama name", dir, t->name);
        int64_t n = model_tensor_nelems(t->n_dims, t->ne);
        if (n < 0 || t->nbytes != (uint64_t)n * bench_dtype_block_bytes(t->dtype))
            return bench_errf(err, errlen, "%s: tensor %s: %llu bytes do not match its shape and dtype %s", dir, t->name,
                              (unsigned long long)t->nbytes, bench_dtype_name(t->dtype));
        if (t->nbytes > SIZE_MAX / 2)
            return bench_errf(err, errlen, "%s: tensor %s of %llu bytes does not fit in memory", dir, t->name, (unsigned long long)t->nbytes);
        it[i].rope_heads = c->rope == ROPE_INTERLEAVED ? hf_rope_heads(t->name, c) : 0;
        if (it[i].rope_heads) {
            int64_t rows = t->n_dims >= 2 ? n / t->ne[0] : 1;
            if (rows % (2 * (int64_t)it[i].rope_heads))
                return bench_errf(err, errlen, "%s: tensor %s: %lld rows do not split into %d heads of pairs", dir, t->name,
                                  (long long)rows, it[i].rope_heads);
        }
    }
    return 0;
}

/* Greedy: a shard is closed when the next tensor would take it past shard_bytes. Returns the shard count. */
static int plan_shards(const model_write_src *src, sw_item *it, uint64_t shard_bytes) {
    uint64_t total = 0, cur = 0;
    for (int i = 0; i < src->n_tensors; i++) total += src->tensors[i].nbytes;
    int shard = 0, sharded = shard_bytes > 0 && total > shard_bytes;
    for (int i = 0; i < src->n_tensors; i++) {
        uint64_t nb = src->tensors[i].nbytes;
        if (sharded && cur > 0 && nb > shard_bytes - (cur < shard_bytes ? cur : shard_bytes)) {
            shard++;
            cur = 0;
        }
        it[i].shard = shard;
        cur += nb;
    }
    return shard + 1;
}

static void shard_name(char *buf, size_t len, int shard, int n_shards) {
    if (n_shards == 1) snprintf(buf, len, "model.safetensors");
    else snprintf(buf, len, "model-%05d-of-%05d.safetensors", shard + 1, n_shards);
}

/* ---- one .safetensors file ---- */

/* order: the items of this shard in file order (f32 first). */
static int write_shard(const char *tmp, const char *fname, const model_write_src *src, sw_item *it, const int *order,
                       int n, void *buf, void *perm, char *err, size_t errlen) {
    char path[SW_PATH];
    if (snprintf(path, sizeof(path), "%s/%s", tmp, fname) >= (int)sizeof(path)) return bench_errf(err, errlen, "%s: path too long", tmp);
    sw_buf h = {0};
    uint64_t off = 0;
    sb_puts(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int k = 0; k < n; k++) {
        sw_item *x = &it[order[k]];
        const model_tensor *t = &src->tensors[x->src];
        x->offset = off;
        sb_puts(&h, ",");
        sb_str(&h, x->hf, 0);
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
        for (int d = t->n_dims - 1; d >= 0; d--) sb_printf(&h, "%s%lld", d == t->n_dims - 1 ? "" : ",", (long long)t->ne[d]);
        sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + t->nbytes));
        off += t->nbytes;
    }
    sb_puts(&h, "}");
    while ((8 + h.t.len) % 8) sb_puts(&h, " ");
    if (h.oom) {
        free(h.t.p);
        return bench_errf(err, errlen, "%s: out of memory for the header", path);
    }
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)((uint64_t)h.t.len >> (8 * i));
    int fd = create_file(path, err, errlen);
    int rc = -1;
    if (fd < 0) goto out;
    if (write_all(fd, lb, 8, path, err, errlen) || write_all(fd, h.t.p, h.t.len, path, err, errlen)) goto out;
    for (int k = 0; k < n; k++) {
        const sw_item *x = &it[order[k]];
        const model_tensor *t = &src->tensors[x->src];
        if (src->fill(src->user, x->src, buf, t->nbytes, err, errlen)) goto out;
        const void *data = buf;
        if (x->rope_heads) {
            int64_t rows = model_tensor_nelems(t->n_dims, t->ne) / t->ne[0];
            hf_permute_rows(perm, buf, x->rope_heads, rows, (size_t)(t->nbytes / (uint64_t)rows), 1);
            data = perm;
        }
        if (write_all(fd, data, (size_t)t->nbytes, path, err, errlen)) goto out;
    }
    rc = close_file(fd, path, err, errlen);
    fd = -1;
out:
    if (fd >= 0) close(fd);
    free(h.t.p);
    return rc;
}

/* ---- config.json ---- */

static void build_config(sw_buf *b, const model_write_src *src, int tied) {
    const model_config *c = src->cfg;
    const model_vocab *v = src->vocab && src->vocab->n > 0 ? src->vocab : NULL;
    bench_dtype dt = BENCH_F32;
    for (int i = 0; i < src->n_tensors; i++)
        if (!strcmp(src->tensors[i].name, "token_embd.weight")) dt = src->tensors[i].dtype;
    sb_puts(b, "{\n");
    if (src->name) {
        sb_puts(b, "  \"_name_or_path\": ");
        sb_str(b, src->name, 0);
        sb_puts(b, ",\n");
    }
    sb_puts(b, "  \"architectures\": [\"LlamaForCausalLM\"],\n  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n");
    if (v && v->bos >= 0) sb_printf(b, "  \"bos_token_id\": %d,\n", v->bos);
    else sb_puts(b, "  \"bos_token_id\": null,\n");
    if (v && v->eos >= 0) sb_printf(b, "  \"eos_token_id\": %d,\n", v->eos);
    else sb_puts(b, "  \"eos_token_id\": null,\n");
    sb_printf(b, "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n  \"initializer_range\": 0.02,\n"
                 "  \"intermediate_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"mlp_bias\": false,\n"
                 "  \"model_type\": \"llama\",\n  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n"
                 "  \"num_key_value_heads\": %d,\n  \"pretraining_tp\": 1,\n  \"rms_norm_eps\": ",
              c->dim / c->n_heads, c->dim, c->hidden_dim, c->seq_len, c->n_heads, c->n_layers, c->n_kv_heads);
    sb_float(b, c->norm_eps);
    sb_puts(b, ",\n  \"rope_scaling\": null,\n  \"rope_theta\": ");
    sb_float(b, c->rope_theta);
    sb_printf(b, ",\n  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n  \"use_cache\": true,\n  \"vocab_size\": %d\n}\n",
              tied ? "true" : "false", torch_dtype_name(dt), c->vocab_size);
}

/* ---- tokenizer.json ---- */

static int build_tokenizer(sw_buf *b, const model_vocab *v, const char *dir, char *err, size_t errlen) {
    int has_sym = 0, has_space = 0, has_bytes = 0;
    if (!v->tokens || !v->scores) return bench_errf(err, errlen, "%s: the vocabulary has no pieces or no scores", dir);
    for (int i = 0; i < v->n; i++) {
        if (!v->tokens[i]) return bench_errf(err, errlen, "%s: token %d has no text", dir, i);
        if (!isfinite(v->scores[i]))
            return bench_errf(err, errlen, "%s: token %d has score %g, which JSON cannot hold", dir, i, v->scores[i]);
        has_sym |= strstr(v->tokens[i], SW_SPACE_SYM) != NULL;
        has_space |= strchr(v->tokens[i], ' ') != NULL;
        has_bytes |= v->types && v->types[i] == TOKEN_BYTE;
    }
    /* ' ' -> U+2581 is undone exactly by the reader only when no piece had a U+2581 of its own. */
    int sym = has_space && !has_sym;
    int bos = v->bos >= 0 && v->bos < v->n ? v->bos : -1;
    sb_puts(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [");
    int first = 1;
    for (int i = 0; i < v->n; i++) {
        int t = v->types ? v->types[i] : TOKEN_NORMAL;
        int special = t == TOKEN_CONTROL || t == TOKEN_UNKNOWN || i == v->bos || i == v->eos || i == v->unk;
        if (!special && t != TOKEN_USER) continue;
        sb_printf(b, "%s\n    {\"id\": %d, \"content\": ", first ? "" : ",", i);
        sb_str(b, v->tokens[i], sym);
        sb_printf(b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": %s}",
                  special ? "true" : "false");
        first = 0;
    }
    sb_puts(b, first ? "],\n" : "\n  ],\n");
    sb_puts(b, "  \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [");
    if (v->add_space_prefix) sb_puts(b, "{\"type\": \"Prepend\", \"prepend\": \"" SW_SPACE_SYM "\"}, ");
    sb_puts(b, "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" SW_SPACE_SYM "\"}]},\n");
    sb_puts(b, "  \"pre_tokenizer\": null,\n  \"post_processor\": ");
    if (bos >= 0) {
        /* HF's Llama: <s> before each sequence */
        sb_puts(b, "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": ");
        sb_str(b, v->tokens[bos], sym);
        sb_puts(b, ", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [{\"SpecialToken\": {\"id\": ");
        sb_str(b, v->tokens[bos], sym);
        sb_puts(b, ", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": ");
        sb_str(b, v->tokens[bos], sym);
        sb_puts(b, ", \"type_id\": 1}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}], \"special_tokens\": {");
        sb_str(b, v->tokens[bos], sym);
        sb_puts(b, ": {\"id\": ");
        sb_str(b, v->tokens[bos], sym);
        sb_printf(b, ", \"ids\": [%d], \"tokens\": [", bos);
        sb_str(b, v->tokens[bos], sym);
        sb_puts(b, "]}}},\n");
    } else {
        sb_puts(b, "null,\n");
    }
    sb_puts(b, "  \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \""
               SW_SPACE_SYM "\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}");
    if (v->add_space_prefix) sb_puts(b, ", {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}");
    sb_puts(b, "]},\n  \"model\": {\n    \"type\": \"Unigram\",\n    \"unk_id\": ");
    if (v->unk >= 0 && v->unk < v->n) sb_printf(b, "%d", v->unk);
    else sb_puts(b, "null");
    sb_printf(b, ",\n    \"byte_fallback\": %s,\n    \"bench\": {\"version\": 1, \"bos\": %d, \"eos\": %d, \"unk\": %d, "
                 "\"add_space_prefix\": %s, ", has_bytes ? "true" : "false", v->bos, v->eos, v->unk,
              v->add_space_prefix ? "true" : "false");
    if (sym) sb_puts(b, "\"piece_space\": \" \", ");
    sb_puts(b, "\"token_types\": [");
    for (int i = 0; i < v->n; i++) sb_printf(b, "%s%d", i ? "," : "", v->types ? (int)v->types[i] : TOKEN_NORMAL);
    sb_puts(b, "]},\n    \"vocab\": [");
    for (int i = 0; i < v->n; i++) {
        sb_puts(b, i ? ",\n      [" : "\n      [");
        sb_str(b, v->tokens[i], sym);
        sb_puts(b, ", ");
        sb_float(b, v->scores[i]);
        sb_puts(b, "]");
    }
    sb_puts(b, "\n    ]\n  }\n}\n");
    return 0;
}

/* ---- model.safetensors.index.json ---- */

static void build_index(sw_buf *b, const model_write_src *src, const sw_item *it, int n_shards) {
    uint64_t total = 0;
    char name[64];
    for (int i = 0; i < src->n_tensors; i++) total += src->tensors[i].nbytes;
    sb_printf(b, "{\n  \"metadata\": {\"total_size\": %llu},\n  \"weight_map\": {", (unsigned long long)total);
    for (int i = 0; i < src->n_tensors; i++) {
        shard_name(name, sizeof(name), it[i].shard, n_shards);
        sb_puts(b, i ? ",\n    " : "\n    ");
        sb_str(b, it[i].hf, 0);
        sb_printf(b, ": \"%s\"", name);
    }
    sb_puts(b, "\n  }\n}\n");
}

/* ---- the entry point ---- */

int safetensors_write(const char *dir, const model_write_src *src, uint64_t shard_bytes, char *err, size_t errlen) {
    const model_config *c = src->cfg;
    if (!c || c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->vocab_size <= 0 || c->seq_len <= 0 || c->dim % c->n_heads)
        return bench_errf(err, errlen, "%s: the model's shape has a field that is not positive, or heads that do not divide dim", dir);
    if (!(c->norm_eps > 0) || !isfinite(c->norm_eps) || !(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return bench_errf(err, errlen, "%s: rms epsilon %g and rope theta %g must be positive", dir, c->norm_eps, c->rope_theta);
    if (src->n_tensors <= 0) return bench_errf(err, errlen, "%s: the model has no tensors", dir);
    char final[SW_PATH], tmp[SW_PATH], old[SW_PATH] = "";
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--; /* "out/" and "out" name the same directory */
    if (dl + 32 >= sizeof(final)) return bench_errf(err, errlen, "%s: path too long", dir);
    memcpy(final, dir, dl);
    final[dl] = '\0';
    int state = dir_state(final);
    if (state < 0)
        return bench_errf(err, errlen, "%s: exists and is not an earlier safetensors output (only config.json, tokenizer.json "
                          "and model*.safetensors* are replaced); remove it or choose another name", final);

    int rc = -1, have_tmp = 0, *order = NULL;
    sw_item *it = calloc((size_t)src->n_tensors, sizeof(*it));
    void *buf = NULL, *perm = NULL;
    sw_buf text = {0};
    if (!it) return bench_errf(err, errlen, "%s: out of memory", final);
    if (plan_items(final, src, it, err, errlen)) goto out;
    int n_shards = plan_shards(src, it, shard_bytes);
    if (n_shards > SW_MAX_SHARDS) {
        bench_errf(err, errlen, "%s: %d shards of at most %llu bytes; at most %d are named", final, n_shards,
                   (unsigned long long)shard_bytes, SW_MAX_SHARDS);
        goto out;
    }
    uint64_t max_bytes = 1;
    int need_perm = 0;
    for (int i = 0; i < src->n_tensors; i++) {
        if (src->tensors[i].nbytes > max_bytes) max_bytes = src->tensors[i].nbytes;
        need_perm |= it[i].rope_heads != 0;
    }
    buf = malloc((size_t)max_bytes);
    perm = need_perm ? malloc((size_t)max_bytes) : NULL;
    order = malloc((size_t)src->n_tensors * sizeof(*order));
    if (!buf || (need_perm && !perm) || !order) {
        bench_errf(err, errlen, "%s: out of memory for a buffer of %llu bytes", final, (unsigned long long)max_bytes);
        goto out;
    }

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", final) >= (int)sizeof(tmp) || !mkdtemp(tmp)) {
        bench_errf(err, errlen, "%s: cannot create a temporary directory beside it: %s", final, strerror(errno));
        goto out;
    }
    have_tmp = 1;
    /* mkdtemp makes it 0700; a model directory is as readable as any other */
    if (chmod(tmp, 0755)) {
        bench_errf(err, errlen, "%s: %s", tmp, strerror(errno));
        goto out;
    }

    for (int s = 0; s < n_shards; s++) {
        int n = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < src->n_tensors; i++)
                if (it[i].shard == s && (src->tensors[i].dtype == BENCH_F32) == (pass == 0)) order[n++] = i;
        char name[64];
        shard_name(name, sizeof(name), s, n_shards);
        if (write_shard(tmp, name, src, it, order, n, buf, perm, err, errlen)) goto out;
    }
    if (n_shards > 1) {
        build_index(&text, src, it, n_shards);
        if (write_text_file(tmp, "model.safetensors.index.json", &text, err, errlen)) goto out;
        text.t.len = 0;
    }
    int tied = 1;
    for (int i = 0; i < src->n_tensors; i++) tied &= strcmp(src->tensors[i].name, "output.weight") != 0;
    build_config(&text, src, tied);
    if (write_text_file(tmp, "config.json", &text, err, errlen)) goto out;
    text.t.len = 0;
    if (src->vocab && src->vocab->n > 0) {
        if (build_tokenizer(&text, src->vocab, final, err, errlen) ||
            write_text_file(tmp, "tokenizer.json", &text, err, errlen))
            goto out;
    }

    if (state == 0) {
        /* rename replaces an empty directory, and nothing else */
        if (rename(tmp, final)) {
            bench_errf(err, errlen, "%s: cannot rename %s into place: %s", final, tmp, strerror(errno));
            goto out;
        }
    } else {
        /* An earlier output: swap the two in one step, then remove the old one. */
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE)) {
            bench_errf(err, errlen, "%s: cannot swap %s into place of the earlier output: %s", final, tmp, strerror(errno));
            goto out;
        }
        snprintf(old, sizeof(old), "%s", tmp);
    }
    have_tmp = 0;
    if (old[0]) remove_dir(old);
    rc = 0;
out:
    if (have_tmp) remove_dir(tmp);
    free(text.t.p);
    free(order);
    free(perm);
    free(buf);
    free(it);
    return rc;
}
