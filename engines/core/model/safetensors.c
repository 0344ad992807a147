/* Safetensors reader: a .safetensors file, a sharded model's index, or a
 * Hugging Face Llama model directory, with its config.json and tokenizer.json.
 *
 * Byte layout of a .safetensors file (little endian):
 *   offset 0      u64   N, the length of the JSON header in bytes
 *          8      N bytes of UTF-8 JSON, padded at the end with spaces:
 *                   {"__metadata__": {"key": "value", ...},                (optional, ignored)
 *                    "<HF tensor name>": {"dtype": "F32" | "F16" | "BF16" | ...,
 *                                         "shape": [d0, d1, ...],          (row-major: d0 outermost)
 *                                         "data_offsets": [begin, end]},   (bytes, from offset 8 + N)
 *                    ...}
 *          8 + N  the tensor bytes
 * model.safetensors.index.json: {"metadata": {"total_size": n}, "weight_map": {"<HF name>": "<shard file>", ...}},
 * the shards lying beside it.
 * config.json gives the shape (hidden_size, num_hidden_layers, ...), tokenizer.json the
 * vocabulary: HF's "BPE" model (vocab: piece -> id; Llama's SentencePiece BPE) or
 * "Unigram" model (vocab: [[piece, score], ...]), plus added_tokens. What bench writes
 * (safetensors_write.c) also carries model.bench, which keeps what HF's formats
 * cannot say: token types, special ids, and how the pieces spell a space.
 *
 * Every length and offset read from a file is checked against the file before it
 * is used to allocate or to index; errors name the file and the field.
 */
#include "model.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "hf_bpe.h"
#include "hf_names.h"

#define ST_MAX_HEADER (100ull << 20) /* bytes: real headers are at most a few MB; more is corruption */
#define ST_MAX_JSON (1ull << 30)     /* bytes of an index or tokenizer.json (Llama-3's tokenizer.json is 9 MB) */
#define ST_MAX_CONFIG (16ull << 20)  /* bytes of config.json (real ones are a few KB) */
#define ST_MAX_EXACT (1ll << 53)     /* integers a JSON number (a double) holds exactly */
#define ST_PATH 4096
#define ST_SPACE_SYM "\xe2\x96\x81"  /* U+2581, SentencePiece's space */

/* ---- small helpers ---- */

static const cJSON *js_get(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key); }

/* A JSON number that is an integer in [lo, hi] (hi <= 2^53). */
static int js_int(const cJSON *j, int64_t lo, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi)) return -1;
    int64_t v = (int64_t)d;
    if ((double)v != d) return -1;
    *out = v;
    return 0;
}

/* What a JSON value is, for messages: the number, or its kind. */
static const char *js_show(const cJSON *j, char *buf, size_t len) {
    if (!j) return "absent";
    if (cJSON_IsNumber(j)) { snprintf(buf, len, "%.17g", j->valuedouble); return buf; }
    if (cJSON_IsString(j)) { snprintf(buf, len, "\"%.60s\"", j->valuestring); return buf; }
    if (cJSON_IsBool(j)) return cJSON_IsTrue(j) ? "true" : "false";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "invalid";
}

static int path_join(char *out, size_t len, const char *dir, const char *name) {
    int n = snprintf(out, len, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* The whole file, NUL-terminated; at most max bytes. */
static int slurp(const char *path, uint64_t max, char **out, size_t *len, char *err, size_t errlen) {
    *out = NULL;
    *len = 0;
    int fd = model_open_regular(path, err, errlen);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return bench_errf(err, errlen, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return bench_errf(err, errlen, "%s: %lld bytes, more than the %llu this reader accepts", path,
                          (long long)st.st_size, (unsigned long long)max);
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return bench_errf(err, errlen, "%s: out of memory for %zu bytes", path, n);
    }
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            free(buf);
            close(fd);
            return bench_errf(err, errlen, "%s: read at offset %zu: %s", path, got, r < 0 ? strerror(e) : "unexpected end of file");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* Parses text[0..len) as one JSON value followed by nothing but whitespace.
 * base: the file offset of text[0], so the message points into the file. */
static cJSON *parse_json(const char *path, const char *what, const char *text, size_t len, uint64_t base,
                         char *err, size_t errlen) {
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    if (!j) {
        bench_errf(err, errlen, "%s: %s is not valid JSON (the parser stopped at byte offset %llu)", path, what,
                   (unsigned long long)(base + at));
        return NULL;
    }
    for (size_t i = at; i < len; i++)
        if (!isspace((unsigned char)text[i])) {
            bench_errf(err, errlen, "%s: %s: unexpected bytes after the JSON value, at byte offset %llu", path, what,
                       (unsigned long long)(base + i));
            cJSON_Delete(j);
            return NULL;
        }
    return j;
}

static cJSON *read_json(const char *path, uint64_t max, char *err, size_t errlen) {
    char *text;
    size_t len;
    if (slurp(path, max, &text, &len, err, errlen)) return NULL;
    cJSON *j = parse_json(path, "the file", text, len, 0, err, errlen);
    free(text);
    return j;
}

/* ---- config.json ---- */

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* cJSON finds the first of two equal keys, Python's json the last: a file they would read differently is refused. */
static int dup_key(const cJSON *obj, const char *path, char *err, size_t errlen) {
    int n = cJSON_GetArraySize(obj), i = 0, rc = 0;
    if (n < 2) return 0;
    const char **keys = malloc((size_t)n * sizeof(*keys));
    if (!keys) return bench_errf(err, errlen, "%s: out of memory", path);
    for (const cJSON *a = obj->child; a; a = a->next) keys[i++] = a->string;
    qsort(keys, (size_t)n, sizeof(*keys), cmp_str_ptr);
    for (i = 1; i < n && !rc; i++)
        if (!strcmp(keys[i - 1], keys[i])) rc = bench_errf(err, errlen, "%s: key \"%s\" appears twice", path, keys[i]);
    free(keys);
    return rc;
}

/* Parses the shape; *config stays owned by the caller (the vocabulary reads its token ids). */
static int read_config(model *m, const char *path, cJSON **config, int *tied, char *err, size_t errlen) {
    char b[96];
    cJSON *c = read_json(path, ST_MAX_CONFIG, err, errlen);
    *config = c;
    if (!c) return -1;
    if (!cJSON_IsObject(c)) return bench_errf(err, errlen, "%s: expected a JSON object", path);
    if (dup_key(c, path, err, errlen)) return -1;
    const cJSON *mt = js_get(c, "model_type");
    /* Another architecture's extra tensors (biases, ...) would be skipped as unknown
     * names and the model would run wrong: refuse it here. */
    if (mt && (!cJSON_IsString(mt) || (strcmp(mt->valuestring, "llama") && strcmp(mt->valuestring, "mistral"))))
        return bench_errf(err, errlen, "%s: model_type is %s; only llama (and mistral) models are supported",
                          path, js_show(mt, b, sizeof(b)));
    model_config *cfg = &m->cfg;
    const struct { const char *key; int *dst; int required; } ints[] = {
        {"hidden_size", &cfg->dim, 1},
        {"intermediate_size", &cfg->hidden_dim, 1},
        {"num_hidden_layers", &cfg->n_layers, 1},
        {"num_attention_heads", &cfg->n_heads, 1},
        {"num_key_value_heads", &cfg->n_kv_heads, 0},
        {"vocab_size", &cfg->vocab_size, 1},
        {"max_position_embeddings", &cfg->seq_len_header, 1},
    };
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        const cJSON *j = js_get(c, ints[i].key);
        int64_t v;
        if (!j && !ints[i].required) continue;
        if (!j) return bench_errf(err, errlen, "%s: missing key \"%s\"", path, ints[i].key);
        if (js_int(j, 1, INT_MAX, &v))
            return bench_errf(err, errlen, "%s: key \"%s\" is %s, expected an integer 1..%d", path, ints[i].key,
                              js_show(j, b, sizeof(b)), INT_MAX);
        *ints[i].dst = (int)v;
    }
    if (!cfg->n_kv_heads) cfg->n_kv_heads = cfg->n_heads; /* HF's default: no GQA */
    const cJSON *hd = js_get(c, "head_dim");
    int64_t hdv;
    if (hd && !cJSON_IsNull(hd) && (js_int(hd, 1, INT_MAX, &hdv) || cfg->dim % cfg->n_heads || hdv != cfg->dim / cfg->n_heads))
        return bench_errf(err, errlen, "%s: key \"head_dim\" is %s, but hidden_size / num_attention_heads is %d / %d: "
                          "only head_dim = hidden_size / num_attention_heads is supported", path,
                          js_show(hd, b, sizeof(b)), cfg->dim, cfg->n_heads);
    const cJSON *eps = js_get(c, "rms_norm_eps"), *theta = js_get(c, "rope_theta");
    if (!eps) return bench_errf(err, errlen, "%s: missing key \"rms_norm_eps\"", path);
    if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0) || !isfinite(eps->valuedouble))
        return bench_errf(err, errlen, "%s: key \"rms_norm_eps\" is %s, expected a positive number", path, js_show(eps, b, sizeof(b)));
    cfg->norm_eps = (float)eps->valuedouble;
    cfg->rope_theta = 10000.0f; /* HF's default */
    if (theta && !cJSON_IsNull(theta)) {
        if (!cJSON_IsNumber(theta) || !(theta->valuedouble > 0) || !isfinite(theta->valuedouble))
            return bench_errf(err, errlen, "%s: key \"rope_theta\" is %s, expected a positive number", path, js_show(theta, b, sizeof(b)));
        cfg->rope_theta = (float)theta->valuedouble;
    }
    /* RoPE scaling: linear is read; llama3, yarn, dynamic and the rest are refused rather
     * than run with unscaled positions. */
    const cJSON *rs = js_get(c, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        const cJSON *ty = cJSON_IsObject(rs) ? js_get(rs, "rope_type") : NULL;
        if (!ty && cJSON_IsObject(rs)) ty = js_get(rs, "type");
        const cJSON *fac = cJSON_IsObject(rs) ? js_get(rs, "factor") : NULL;
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "linear"))
            return bench_errf(err, errlen, "%s: key \"rope_scaling\" is %s: only linear RoPE scaling is read", path,
                              js_show(rs, b, sizeof(b)));
        if (!cJSON_IsNumber(fac) || !(fac->valuedouble > 0) || !isfinite(fac->valuedouble))
            return bench_errf(err, errlen, "%s: key \"rope_scaling\" has factor %s, expected a positive number", path,
                              js_show(fac, b, sizeof(b)));
        if (fac->valuedouble != 1.0) cfg->rope_linear = (float)fac->valuedouble;
    }
    cfg->seq_len = cfg->seq_len_header;
    cfg->rope = ROPE_HALF;
    const cJSON *tie = js_get(c, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie) && !cJSON_IsNull(tie))
        return bench_errf(err, errlen, "%s: key \"tie_word_embeddings\" is %s, expected true or false", path, js_show(tie, b, sizeof(b)));
    *tied = cJSON_IsTrue(tie);
    const cJSON *nm = js_get(c, "_name_or_path");
    if (cJSON_IsString(nm) && nm->valuestring[0] && !(m->name = strdup(nm->valuestring)))
        return bench_errf(err, errlen, "%s: out of memory", path);
    return 0;
}

/* ---- one .safetensors file ---- */

static int st_dtype(const char *s, bench_dtype *dt) {
    if (!strcmp(s, "F32")) *dt = BENCH_F32;
    else if (!strcmp(s, "F16")) *dt = BENCH_F16;
    else if (!strcmp(s, "BF16")) *dt = BENCH_BF16;
    else return -1;
    return 0;
}

static const char *shape_str(int n_dims, const int64_t *ne, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = '\0';
    for (int i = n_dims - 1; i >= 0 && o < len; i--) {
        int w = snprintf(buf + o, len - o, "%s%lld", i == n_dims - 1 ? "[" : ", ", (long long)ne[i]);
        if (w < 0) break;
        o += (size_t)w;
    }
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

/* Adds the tensors of one file whose names map to GGUF's; skip_lm_head: the
 * classifier is tied, so a stored lm_head.weight is a copy of the embedding. */
static int read_file(model *m, const char *path, int skip_lm_head, char *err, size_t errlen) {
    int rc = -1, fd = -1;
    char *h = NULL, b[96], sh[96];
    cJSON *root = NULL;
    fd = model_open_regular(path, err, errlen);
    if (fd < 0) goto out;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) { bench_errf(err, errlen, "%s: not a regular file", path); goto out; }
    uint64_t size = (uint64_t)st.st_size;
    unsigned char lb[8];
    if (size < 8 || pread(fd, lb, 8, 0) != 8) {
        bench_errf(err, errlen, "%s: file of %llu bytes is shorter than the 8-byte header length", path, (unsigned long long)size);
        goto out;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lb[i];
    if (hlen > ST_MAX_HEADER) {
        bench_errf(err, errlen, "%s: header length %llu (offset 0) is more than the %llu MB this reader accepts: not a safetensors file?",
                   path, (unsigned long long)hlen, ST_MAX_HEADER >> 20);
        goto out;
    }
    if (hlen > size - 8) {
        bench_errf(err, errlen, "%s: header length %llu (offset 0) runs past the end of the file (%llu bytes)", path,
                   (unsigned long long)hlen, (unsigned long long)size);
        goto out;
    }
    if (!(h = malloc((size_t)hlen + 1))) { bench_errf(err, errlen, "%s: out of memory for the %llu-byte header", path, (unsigned long long)hlen); goto out; }
    for (uint64_t got = 0; got < hlen;) {
        ssize_t r = pread(fd, h + got, (size_t)(hlen - got), (off_t)(8 + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { bench_errf(err, errlen, "%s: reading the header: %s", path, r < 0 ? strerror(errno) : "unexpected end of file"); goto out; }
        got += (uint64_t)r;
    }
    h[hlen] = '\0';
    if (!(root = parse_json(path, "the header", h, (size_t)hlen, 8, err, errlen))) goto out;
    if (!cJSON_IsObject(root)) { bench_errf(err, errlen, "%s: the header is %s, expected a JSON object", path, js_show(root, b, sizeof(b))); goto out; }
    uint64_t data_start = 8 + hlen, data_len = size - data_start;
    int file = model_add_file(m, path, model_fd_id(fd));
    if (file < 0) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }

    for (const cJSON *t = root->child; t; t = t->next) {
        const char *hf = t->string;
        char gg[160];
        if (!strcmp(hf, "__metadata__")) continue;
        /* rotary_emb.inv_freq and the like: nothing the forward pass reads */
        if (hf_name_to_gguf(hf, gg, sizeof(gg))) continue;
        if (skip_lm_head && !strcmp(gg, "output.weight")) continue;
        if (!cJSON_IsObject(t)) { bench_errf(err, errlen, "%s: tensor %s is %s, expected an object", path, hf, js_show(t, b, sizeof(b))); goto out; }
        const cJSON *dj = js_get(t, "dtype"), *sj = js_get(t, "shape"), *oj = js_get(t, "data_offsets");
        bench_dtype dt;
        if (!cJSON_IsString(dj)) { bench_errf(err, errlen, "%s: tensor %s: dtype is %s, expected a string", path, hf, js_show(dj, b, sizeof(b))); goto out; }
        if (st_dtype(dj->valuestring, &dt)) {
            bench_errf(err, errlen, "%s: tensor %s: dtype \"%s\" is not supported (F32, F16 and BF16 are)", path, hf, dj->valuestring);
            goto out;
        }
        int n_dims = cJSON_IsArray(sj) ? cJSON_GetArraySize(sj) : -1;
        if (n_dims < 0) {
            bench_errf(err, errlen, "%s: tensor %s: shape is %s, expected an array", path, hf, js_show(sj, b, sizeof(b)));
            goto out;
        }
        if (n_dims < 1 || n_dims > MODEL_MAX_DIMS) {
            bench_errf(err, errlen, "%s: tensor %s: shape has %d dimensions, expected 1..%d", path, hf, n_dims, MODEL_MAX_DIMS);
            goto out;
        }
        int64_t ne[MODEL_MAX_DIMS] = {0};
        int d = 0;
        for (const cJSON *e = sj->child; e; e = e->next, d++)
            if (js_int(e, 1, ST_MAX_EXACT, &ne[n_dims - 1 - d])) {
                bench_errf(err, errlen, "%s: tensor %s: shape[%d] is %s, expected a positive integer", path, hf, d, js_show(e, b, sizeof(b)));
                goto out;
            }
        int64_t nel = model_tensor_nelems(n_dims, ne);
        uint64_t esz = bench_dtype_block_bytes(dt);
        if (nel < 0 || (uint64_t)nel > UINT64_MAX / esz) {
            bench_errf(err, errlen, "%s: tensor %s: shape %s overflows", path, hf, shape_str(n_dims, ne, sh, sizeof(sh)));
            goto out;
        }
        uint64_t need = (uint64_t)nel * esz;
        int64_t ob, oe;
        if (!cJSON_IsArray(oj) || cJSON_GetArraySize(oj) != 2 || js_int(oj->child, 0, ST_MAX_EXACT, &ob) ||
            js_int(oj->child->next, 0, ST_MAX_EXACT, &oe) || ob > oe) {
            bench_errf(err, errlen, "%s: tensor %s: data_offsets is not [begin, end] with 0 <= begin <= end", path, hf);
            goto out;
        }
        if ((uint64_t)oe > data_len) {
            bench_errf(err, errlen, "%s: tensor %s: data_offsets [%lld, %lld] run past the end of the file "
                       "(%llu bytes of data after the %llu-byte header)", path, hf, (long long)ob, (long long)oe,
                       (unsigned long long)data_len, (unsigned long long)data_start);
            goto out;
        }
        if ((uint64_t)(oe - ob) != need) {
            bench_errf(err, errlen, "%s: tensor %s: data_offsets [%lld, %lld] hold %llu bytes, but shape %s of %s needs %llu",
                       path, hf, (long long)ob, (long long)oe, (unsigned long long)(oe - ob),
                       shape_str(n_dims, ne, sh, sizeof(sh)), dj->valuestring, (unsigned long long)need);
            goto out;
        }
        int layer;
        if (sscanf(gg, "blk.%d.", &layer) == 1 && layer >= m->cfg.n_layers) {
            bench_errf(err, errlen, "%s: tensor %s is in layer %d, but config.json has num_hidden_layers %d", path, hf,
                       layer, m->cfg.n_layers);
            goto out;
        }
        if (model_add_tensor(m, gg, dt, n_dims, ne, file, data_start + (uint64_t)ob, err, errlen)) goto out;
    }
    rc = 0;
out:
    if (fd >= 0) close(fd);
    free(h);
    cJSON_Delete(root);
    return rc;
}

/* ---- model.safetensors.index.json ---- */

static int read_index(model *m, const char *path, const char *dir, int skip_lm_head, char *err, size_t errlen) {
    int rc = -1;
    const char **shards = NULL;
    int n_shards = 0;
    char sp[ST_PATH], b[96];
    cJSON *root = read_json(path, ST_MAX_JSON, err, errlen);
    if (!root) return -1;
    const cJSON *wm = js_get(root, "weight_map");
    if (!cJSON_IsObject(wm) || !wm->child) {
        bench_errf(err, errlen, "%s: weight_map is %s, expected an object naming each tensor's shard", path,
                   wm && cJSON_IsObject(wm) ? "empty" : js_show(wm, b, sizeof(b)));
        goto out;
    }
    if (!(shards = malloc((size_t)cJSON_GetArraySize(wm) * sizeof(*shards)))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
    /* The shards in the order the map first names them. */
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e)) {
            bench_errf(err, errlen, "%s: weight_map: tensor %s is mapped to %s, expected a shard file name", path, e->string, js_show(e, b, sizeof(b)));
            goto out;
        }
        const char *s = e->valuestring;
        if (!s[0] || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")) {
            bench_errf(err, errlen, "%s: weight_map: tensor %s: shard \"%s\" is not a file name beside the index", path, e->string, s);
            goto out;
        }
        int seen = 0;
        for (int i = 0; i < n_shards && !seen; i++) seen = !strcmp(shards[i], s);
        if (seen) continue;
        if (path_join(sp, sizeof(sp), dir, s)) { bench_errf(err, errlen, "%s: weight_map: shard path %s/%s is too long", path, dir, s); goto out; }
        if (access(sp, R_OK)) {
            bench_errf(err, errlen, "%s: weight_map: tensor %s is in shard %s: %s", path, e->string, sp, strerror(errno));
            goto out;
        }
        shards[n_shards++] = s;
        if (read_file(m, sp, skip_lm_head, err, errlen)) goto out;
    }
    /* Each tensor is where the map says: a map that disagrees with its shards is stale. */
    for (const cJSON *e = wm->child; e; e = e->next) {
        char gg[160];
        if (hf_name_to_gguf(e->string, gg, sizeof(gg)) || (skip_lm_head && !strcmp(gg, "output.weight"))) continue;
        const model_tensor *t = model_find(m, gg);
        path_join(sp, sizeof(sp), dir, e->valuestring);
        if (!t) {
            bench_errf(err, errlen, "%s: weight_map puts tensor %s in %s, which does not hold it", path, e->string, sp);
            goto out;
        }
        if (strcmp(m->files[t->file], sp)) {
            bench_errf(err, errlen, "%s: weight_map puts tensor %s in %s, but %s holds it", path, e->string, sp, m->files[t->file]);
            goto out;
        }
    }
    rc = 0;
out:
    free(shards);
    cJSON_Delete(root);
    return rc;
}

/* ---- tensor order: llama.cpp's (embedding, each block, head), whatever order the files list them in ---- */

static long tensor_rank(const char *g) {
    static const char *const layer_order[] = {"attn_norm.weight", "attn_q.weight", "attn_k.weight",
                                              "attn_v.weight", "attn_output.weight", "ffn_norm.weight",
                                              "ffn_gate.weight", "ffn_down.weight", "ffn_up.weight"};
    if (!strcmp(g, "token_embd.weight")) return 0;
    if (!strcmp(g, "output_norm.weight")) return LONG_MAX - 1;
    if (!strcmp(g, "output.weight")) return LONG_MAX;
    int layer, at = 0;
    if (sscanf(g, "blk.%d.%n", &layer, &at) == 1 && at > 0)
        for (long i = 0; i < 9; i++)
            if (!strcmp(g + at, layer_order[i])) return 1 + (long)layer * 16 + i;
    return LONG_MAX - 2;
}

static int cmp_tensor(const void *a, const void *b) {
    long x = tensor_rank(((const model_tensor *)a)->name), y = tensor_rank(((const model_tensor *)b)->name);
    return x < y ? -1 : x > y;
}

/* ---- tokenizer.json ---- */

static int is_byte_piece(const char *p) {
    return strlen(p) == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && isxdigit((unsigned char)p[3]) &&
           isxdigit((unsigned char)p[4]) && p[5] == '>';
}

static int find_piece(const model_vocab *v, const char *piece) {
    for (int i = 0; i < v->n; i++)
        if (v->tokens[i] && !strcmp(v->tokens[i], piece)) return i;
    return -1;
}

static int is_type(const cJSON *j, const char *type) {
    const cJSON *t = js_get(j, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* SentencePiece's leading space, as HF spells it: a Prepend("▁") normalizer, or a
 * Metaspace pre-tokenizer that adds a prefix space. */
static int prepends_space(const cJSON *norm, const cJSON *pre) {
    if (is_type(norm, "Prepend")) {
        const cJSON *p = js_get(norm, "prepend");
        if (cJSON_IsString(p) && !strcmp(p->valuestring, ST_SPACE_SYM)) return 1;
    }
    if (is_type(norm, "Sequence"))
        for (const cJSON *n = js_get(norm, "normalizers") ? js_get(norm, "normalizers")->child : NULL; n; n = n->next)
            if (prepends_space(n, NULL)) return 1;
    if (is_type(pre, "Metaspace")) {
        const cJSON *aps = js_get(pre, "add_prefix_space"), *ps = js_get(pre, "prepend_scheme");
        if (cJSON_IsString(ps)) return strcmp(ps->valuestring, "never") != 0;
        return !aps || cJSON_IsTrue(aps);
    }
    if (is_type(pre, "Sequence"))
        for (const cJSON *p = js_get(pre, "pretokenizers") ? js_get(pre, "pretokenizers")->child : NULL; p; p = p->next)
            if (prepends_space(NULL, p)) return 1;
    return 0;
}

/* config.json's bos_token_id / eos_token_id (an id, or a list whose first is used); -1 if none fits. */
static int config_token(const cJSON *config, const char *key, int n) {
    const cJSON *j = js_get(config, key);
    int64_t v;
    if (cJSON_IsArray(j)) j = j->child;
    return j && !js_int(j, 0, n - 1, &v) ? (int)v : -1;
}

/* What bench wrote beside HF's fields (see safetensors_write.c). */
static int apply_bench_ext(model_vocab *v, const cJSON *ext, const char *path, const char *where, char *err, size_t errlen) {
    char b[96];
    const cJSON *tt = js_get(ext, "token_types");
    if (tt) {
        if (!cJSON_IsArray(tt) || cJSON_GetArraySize(tt) != v->n)
            return bench_errf(err, errlen, "%s: %s.token_types has %d entries, the vocabulary %d", path, where,
                              cJSON_IsArray(tt) ? cJSON_GetArraySize(tt) : -1, v->n);
        int i = 0;
        for (const cJSON *e = tt->child; e; e = e->next, i++) {
            int64_t t;
            if (js_int(e, TOKEN_NORMAL, TOKEN_BYTE, &t))
                return bench_errf(err, errlen, "%s: %s.token_types[%d] is %s, expected %d..%d", path, where, i,
                                  js_show(e, b, sizeof(b)), TOKEN_NORMAL, TOKEN_BYTE);
            v->types[i] = (int32_t)t;
        }
    }
    const struct { const char *key; int *dst; } ids[] = {{"bos", &v->bos}, {"eos", &v->eos}, {"unk", &v->unk}};
    for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
        const cJSON *j = js_get(ext, ids[k].key);
        int64_t id;
        if (!j) continue;
        if (js_int(j, -1, v->n - 1, &id))
            return bench_errf(err, errlen, "%s: %s.%s is %s, expected -1..%d", path, where, ids[k].key, js_show(j, b, sizeof(b)), v->n - 1);
        *ids[k].dst = (int)id;
    }
    const cJSON *asp = js_get(ext, "add_space_prefix");
    if (asp) {
        if (!cJSON_IsBool(asp)) return bench_errf(err, errlen, "%s: %s.add_space_prefix is %s, expected true or false", path, where, js_show(asp, b, sizeof(b)));
        v->add_space_prefix = cJSON_IsTrue(asp);
    }
    /* The pieces spelled spaces ' ' (llama2.c's tokenizer.bin does); the file spells them U+2581 for HF. */
    const cJSON *ps = js_get(ext, "piece_space");
    if (ps && !(cJSON_IsString(ps) && (!strcmp(ps->valuestring, " ") || !strcmp(ps->valuestring, ST_SPACE_SYM))))
        return bench_errf(err, errlen, "%s: %s.piece_space is %s, expected \" \" or \"" ST_SPACE_SYM "\"", path, where, js_show(ps, b, sizeof(b)));
    if (ps && !strcmp(ps->valuestring, " "))
        for (int i = 0; i < v->n; i++) {
            char *r = v->tokens[i], *w = r;
            while (*r) {
                if (!strncmp(r, ST_SPACE_SYM, 3)) *w++ = ' ', r += 3;
                else *w++ = *r++;
            }
            *w = '\0';
        }
    return 0;
}

/* Reads path into m->vocab; an absent file leaves no vocabulary. */
static int read_vocab(model *m, const char *path, const cJSON *config, char *err, size_t errlen) {
    model_vocab *v = &m->vocab;
    v->bos = v->eos = v->unk = -1;
    if (!file_exists(path) && errno == ENOENT) return 0;
    int rc = -1;
    char b[96];
    cJSON *root = read_json(path, ST_MAX_JSON, err, errlen);
    if (!root) return -1;
    const cJSON *mod = js_get(root, "model");
    if (!cJSON_IsObject(mod)) { bench_errf(err, errlen, "%s: model is %s, expected an object", path, js_show(mod, b, sizeof(b))); goto out; }
    const cJSON *type = js_get(mod, "type"), *vocab = js_get(mod, "vocab"), *added = js_get(root, "added_tokens");
    int unigram;
    if (cJSON_IsString(type)) {
        unigram = !strcmp(type->valuestring, "Unigram");
        if (!unigram && strcmp(type->valuestring, "BPE")) {
            bench_errf(err, errlen, "%s: model.type \"%s\" is not supported (BPE and Unigram are)", path, type->valuestring);
            goto out;
        }
    } else
        unigram = cJSON_IsArray(vocab); /* old files name no type: the vocab's shape tells */
    if (unigram ? !cJSON_IsArray(vocab) : !cJSON_IsObject(vocab)) {
        bench_errf(err, errlen, "%s: model.vocab is %s, expected %s", path, js_show(vocab, b, sizeof(b)),
                   unigram ? "an array of [piece, score]" : "an object of piece: id");
        goto out;
    }
    if (added && !cJSON_IsArray(added) && !cJSON_IsNull(added)) {
        bench_errf(err, errlen, "%s: added_tokens is %s, expected an array", path, js_show(added, b, sizeof(b)));
        goto out;
    }
    const char *where = "model.bench";
    const cJSON *ext = js_get(mod, "bench");
    if (!ext) ext = js_get(root, "bench"), where = "bench";
    if (ext && !cJSON_IsObject(ext)) { bench_errf(err, errlen, "%s: %s is %s, expected an object", path, where, js_show(ext, b, sizeof(b))); goto out; }

    /* Pass 1: the number of ids. Ids beyond both the entries and config.json's
     * vocab_size would be holes: refused, so a corrupt id cannot size the arrays. */
    int64_t n_entries = cJSON_GetArraySize(vocab), n_added = cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0;
    int64_t limit = n_entries + n_added > m->cfg.vocab_size ? n_entries + n_added : m->cfg.vocab_size;
    int64_t n = unigram ? n_entries : 0, id = 0;
    if (!unigram)
        for (const cJSON *e = vocab->child; e; e = e->next) {
            if (js_int(e, 0, limit - 1, &id)) {
                bench_errf(err, errlen, "%s: model.vocab: token \"%.60s\" has id %s, expected 0..%lld", path, e->string,
                           js_show(e, b, sizeof(b)), (long long)limit - 1);
                goto out;
            }
            if (id + 1 > n) n = id + 1;
        }
    int k = 0;
    for (const cJSON *a = cJSON_IsArray(added) ? added->child : NULL; a; a = a->next, k++) {
        const cJSON *aid = js_get(a, "id"), *ac = js_get(a, "content");
        if (js_int(aid, 0, limit - 1, &id) || !cJSON_IsString(ac)) {
            bench_errf(err, errlen, "%s: added_tokens[%d]: expected an id 0..%lld and a content string", path, k, (long long)limit - 1);
            goto out;
        }
        if (id + 1 > n) n = id + 1;
    }
    /* Embeddings padded past the tokenizer (vocab_size rounded up) get placeholder tokens, as llama.cpp's converter does. */
    if (n < m->cfg.vocab_size) n = m->cfg.vocab_size;
    if (n <= 0) { bench_errf(err, errlen, "%s: model.vocab is empty", path); goto out; }
    if (n > INT_MAX) { bench_errf(err, errlen, "%s: %lld tokens, at most %d supported", path, (long long)n, INT_MAX); goto out; }

    v->tokens = calloc((size_t)n, sizeof(*v->tokens));
    v->scores = calloc((size_t)n, sizeof(*v->scores));
    v->types = malloc((size_t)n * sizeof(*v->types));
    if (!v->tokens || !v->scores || !v->types) { bench_errf(err, errlen, "%s: out of memory for %lld tokens", path, (long long)n); goto out; }
    v->n = (int)n; /* from here model_vocab_free frees what is filled */
    for (int i = 0; i < v->n; i++) v->types[i] = TOKEN_NORMAL;

    /* Pass 2: the pieces. SentencePiece's Llama BPE ranks merges by id, so score = -id keeps the order. */
    int i = 0;
    for (const cJSON *e = vocab->child; e; e = e->next, i++) {
        const char *piece;
        float score;
        if (unigram) {
            const cJSON *p = cJSON_IsArray(e) ? e->child : NULL, *s = p ? p->next : NULL;
            if (!cJSON_IsString(p) || !cJSON_IsNumber(s) || !isfinite(s->valuedouble)) {
                bench_errf(err, errlen, "%s: model.vocab[%d]: expected [piece, finite score]", path, i);
                goto out;
            }
            id = i;
            piece = p->valuestring;
            score = (float)s->valuedouble;
        } else {
            if (js_int(e, 0, limit - 1, &id)) goto out; /* checked in pass 1 */
            piece = e->string;
            score = -(float)id;
            if (v->tokens[id]) {
                bench_errf(err, errlen, "%s: model.vocab: id %lld is given to both \"%.60s\" and \"%.60s\"", path,
                           (long long)id, v->tokens[id], piece);
                goto out;
            }
        }
        if (!(v->tokens[id] = strdup(piece))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
        v->scores[id] = score;
        if (is_byte_piece(piece)) v->types[id] = TOKEN_BYTE;
    }
    k = 0;
    for (const cJSON *a = cJSON_IsArray(added) ? added->child : NULL; a; a = a->next, k++) {
        if (js_int(js_get(a, "id"), 0, limit - 1, &id)) goto out; /* checked in pass 1 */
        const char *content = js_get(a, "content")->valuestring;
        if (!v->tokens[id]) {
            if (!(v->tokens[id] = strdup(content))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
            v->scores[id] = unigram ? 0.0f : -(float)id;
        } else if (strcmp(v->tokens[id], content)) {
            bench_errf(err, errlen, "%s: added_tokens[%d]: id %lld is \"%.60s\" here but \"%.60s\" in model.vocab", path, k,
                       (long long)id, content, v->tokens[id]);
            goto out;
        }
        v->types[id] = cJSON_IsTrue(js_get(a, "special")) ? TOKEN_CONTROL : TOKEN_USER;
    }
    for (int t = 0; t < v->n; t++)
        if (!v->tokens[t]) {
            char pad[32];
            snprintf(pad, sizeof(pad), "[PAD%d]", t);
            if (!(v->tokens[t] = strdup(pad))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
            v->scores[t] = unigram ? 0.0f : -(float)t;
            v->types[t] = TOKEN_UNUSED;
        }

    if (unigram) {
        const cJSON *u = js_get(mod, "unk_id");
        if (u && !cJSON_IsNull(u)) {
            if (js_int(u, 0, v->n - 1, &id)) { bench_errf(err, errlen, "%s: model.unk_id is %s, expected 0..%d", path, js_show(u, b, sizeof(b)), v->n - 1); goto out; }
            v->unk = (int)id;
        }
    } else {
        const cJSON *u = js_get(mod, "unk_token");
        if (cJSON_IsString(u)) v->unk = find_piece(v, u->valuestring);
    }
    if (v->unk >= 0) v->types[v->unk] = TOKEN_UNKNOWN;
    v->bos = find_piece(v, "<s>");
    v->eos = find_piece(v, "</s>");
    if (v->bos < 0) v->bos = config_token(config, "bos_token_id", v->n);
    if (v->eos < 0) v->eos = config_token(config, "eos_token_id", v->n);
    v->add_space_prefix = prepends_space(js_get(root, "normalizer"), js_get(root, "pre_tokenizer"));
    if (ext && apply_bench_ext(v, ext, path, where, err, errlen)) goto out;
    /* byte-level BPE (GPT-2 style) or SentencePiece-style pieces */
    int bl = unigram ? 0 : hf_bpe_read(root, v, path, err, errlen);
    if (bl < 0) goto out;
    if (!bl && !(v->model = strdup("llama"))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

int safetensors_read_tokenizer(const char *path, model *m, char *err, size_t errlen) {
    m->format = MODEL_FORMAT_SAFETENSORS;
    if (!file_exists(path)) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    return read_vocab(m, path, NULL, err, errlen);
}

/* ---- the entry point ---- */

int safetensors_open(const char *path, model *m, char *err, size_t errlen) {
    char dir[ST_PATH], main_path[ST_PATH], cfg_path[ST_PATH], tok_path[ST_PATH];
    cJSON *config = NULL;
    int rc = -1, is_dir, is_index, tied = 0;
    struct stat st;
    if (stat(path, &st)) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    size_t pl = strlen(path);
    if (pl >= sizeof(dir)) return bench_errf(err, errlen, "%s: path too long", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    is_dir = S_ISDIR(st.st_mode) || !strcmp(base, "config.json");
    if (S_ISDIR(st.st_mode)) {
        memcpy(dir, path, pl + 1);
    } else if (base == path) {
        strcpy(dir, ".");
    } else {
        size_t dl = (size_t)(base - path) - 1;
        memcpy(dir, path, dl ? dl : 1); /* "/x" lies in "/" */
        dir[dl ? dl : 1] = '\0';
    }
    while (strlen(dir) > 1 && dir[strlen(dir) - 1] == '/') dir[strlen(dir) - 1] = '\0';
    if (path_join(cfg_path, sizeof(cfg_path), dir, "config.json") || path_join(tok_path, sizeof(tok_path), dir, "tokenizer.json"))
        return bench_errf(err, errlen, "%s: path too long", path);
    if (is_dir) {
        if (path_join(main_path, sizeof(main_path), dir, "model.safetensors.index.json"))
            return bench_errf(err, errlen, "%s: path too long", path);
        is_index = file_exists(main_path);
        if (!is_index && (path_join(main_path, sizeof(main_path), dir, "model.safetensors") || !file_exists(main_path)))
            return bench_errf(err, errlen, "%s: holds neither model.safetensors nor model.safetensors.index.json", dir);
    } else {
        memcpy(main_path, path, pl + 1);
        is_index = pl >= 5 && !strcmp(path + pl - 5, ".json");
    }

    m->format = MODEL_FORMAT_SAFETENSORS;
    if (read_config(m, cfg_path, &config, &tied, err, errlen)) goto out;
    if (is_index ? read_index(m, main_path, dir, tied, err, errlen) : read_file(m, main_path, tied, err, errlen)) goto out;
    if (m->n_tensors > 1) {
        qsort(m->tensors, (size_t)m->n_tensors, sizeof(*m->tensors), cmp_tensor);
        if (model_reindex(m)) {
            bench_errf(err, errlen, "%s: out of memory", path);
            goto out;
        }
    }
    if (read_vocab(m, tok_path, config, err, errlen)) goto out;
    if (!m->name && is_dir) {
        const char *b = strrchr(dir, '/');
        b = b && b[1] ? b + 1 : dir;
        if (!(m->name = strdup(b))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
    }
    rc = 0;
out:
    cJSON_Delete(config);
    return rc;
}
