/* The GGUF container: header, key/value pairs, tensor infos (gguf_read.h has the layout). */
#include "gguf_read.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader copies little-endian arrays as they are: little-endian hosts only"
#endif

const char *gguf_value_type_name(uint32_t t) {
    static const char *n[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                              "string", "array", "u64", "i64", "f64"};
    return t < GV_COUNT ? n[t] : "unknown";
}

#define gv_name gguf_value_type_name

/* Bytes of a fixed-size value, 0 for string/array/unknown. */
static uint64_t gv_size(uint32_t t) {
    switch (t) {
    case GV_U8: case GV_I8: case GV_BOOL: return 1;
    case GV_U16: case GV_I16: return 2;
    case GV_U32: case GV_I32: case GV_F32: return 4;
    case GV_U64: case GV_I64: case GV_F64: return 8;
    default: return 0;
    }
}

/* ---- buffered reader over pread: the header is read in small pieces ---- */

#define RD_BUF (64 * 1024)

static uint64_t rd_left(const gg_rd *r) { return r->size - r->pos; }

static int rd_bytes(gg_rd *r, void *dst, uint64_t n, const char *what) {
    if (n > rd_left(r))
        return bench_errf(r->err, r->errlen, "%s: truncated: %s at offset %llu needs %llu bytes, the file ends at %llu",
                          r->path, what, (unsigned long long)r->pos, (unsigned long long)n, (unsigned long long)r->size);
    unsigned char *d = dst;
    while (n > 0) {
        if (r->pos < r->buf_off || r->pos >= r->buf_off + r->buf_len) {
            ssize_t got = pread(r->fd, r->buf, RD_BUF, (off_t)r->pos);
            if (got <= 0)
                return bench_errf(r->err, r->errlen, "%s: read at offset %llu: %s", r->path,
                                  (unsigned long long)r->pos, got < 0 ? strerror(errno) : "unexpected end of file");
            r->buf_off = r->pos;
            r->buf_len = (size_t)got;
        }
        size_t at = (size_t)(r->pos - r->buf_off), take = r->buf_len - at;
        if (take > n) take = (size_t)n;
        memcpy(d, r->buf + at, take);
        d += take;
        r->pos += take;
        n -= take;
    }
    return 0;
}

static int rd_skip(gg_rd *r, uint64_t n, const char *what) {
    if (n > rd_left(r))
        return bench_errf(r->err, r->errlen, "%s: truncated: %s at offset %llu needs %llu bytes, the file ends at %llu",
                          r->path, what, (unsigned long long)r->pos, (unsigned long long)n, (unsigned long long)r->size);
    r->pos += n;
    return 0;
}

static int rd_u32(gg_rd *r, uint32_t *v, const char *what) { return rd_bytes(r, v, 4, what); }
static int rd_u64(gg_rd *r, uint64_t *v, const char *what) { return rd_bytes(r, v, 8, what); }

/* Reads a string's length and checks it against the file before anything is allocated. */
static int rd_strlen(gg_rd *r, uint64_t *len, const char *what) {
    uint64_t at = r->pos;
    if (rd_u64(r, len, what)) return -1;
    if (*len > rd_left(r))
        return bench_errf(r->err, r->errlen, "%s: %s: string length %llu at offset %llu runs past the end of the file (%llu bytes)",
                          r->path, what, (unsigned long long)*len, (unsigned long long)at, (unsigned long long)r->size);
    return 0;
}

/* Reads a string into a new NUL-terminated buffer; max_len 0: no limit but the file's. */
static int rd_str(gg_rd *r, char **out, uint64_t max_len, const char *what) {
    uint64_t len;
    *out = NULL;
    if (rd_strlen(r, &len, what)) return -1;
    if (max_len && len > max_len)
        return bench_errf(r->err, r->errlen, "%s: %s at offset %llu is %llu bytes long, at most %llu expected",
                          r->path, what, (unsigned long long)(r->pos - 8), (unsigned long long)len, (unsigned long long)max_len);
    char *s = malloc((size_t)len + 1);
    if (!s) return bench_errf(r->err, r->errlen, "%s: out of memory reading %s", r->path, what);
    if (rd_bytes(r, s, len, what)) { free(s); return -1; }
    s[len] = 0;
    *out = s;
    return 0;
}

/* ---- key/value pairs ---- */

static int skip_value(gg_rd *r, const char *key, uint32_t type, int depth);

static int skip_array(gg_rd *r, const char *key, int depth) {
    uint32_t et;
    uint64_t n;
    if (rd_u32(r, &et, "array element type") || rd_u64(r, &n, "array length")) return -1;
    if (et >= GV_COUNT)
        return bench_errf(r->err, r->errlen, "%s: key %s: array element type %u is unknown", r->path, key, et);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return bench_errf(r->err, r->errlen, "%s: key %s: arrays nested deeper than %d", r->path, key, GGUF_MAX_ARRAY_DEPTH);
    uint64_t esz = gv_size(et);
    if (esz) {
        if (n > rd_left(r) / esz)
            return bench_errf(r->err, r->errlen, "%s: key %s: array of %llu %s values at offset %llu runs past the end of the file (%llu bytes)",
                              r->path, key, (unsigned long long)n, gv_name(et), (unsigned long long)r->pos, (unsigned long long)r->size);
        return rd_skip(r, n * esz, "array");
    }
    /* A string element takes at least its 8-byte length, an array its 12-byte head. */
    uint64_t min = et == GV_STRING ? 8 : 12;
    if (n > rd_left(r) / min)
        return bench_errf(r->err, r->errlen, "%s: key %s: array of %llu %s values at offset %llu runs past the end of the file (%llu bytes)",
                          r->path, key, (unsigned long long)n, gv_name(et), (unsigned long long)r->pos, (unsigned long long)r->size);
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(r, key, et, depth + 1)) return -1;
    return 0;
}

static int skip_value(gg_rd *r, const char *key, uint32_t type, int depth) {
    uint64_t len;
    switch (type) {
    case GV_STRING:
        if (rd_strlen(r, &len, key)) return -1;
        return rd_skip(r, len, key);
    case GV_ARRAY:
        return skip_array(r, key, depth);
    default:
        if (!gv_size(type))
            return bench_errf(r->err, r->errlen, "%s: key %s: value type %u is unknown", r->path, key, type);
        return rd_skip(r, gv_size(type), key);
    }
}

/* Reads one of the tokenizer arrays whose contents we keep (which: 0 tokens, 1 scores,
 * 2 token types, 3 merges). */
static int read_vocab_array(gg_rd *r, const char *key, gg_vocab_arrays *va, int which) {
    static const uint32_t want[] = {GV_STRING, GV_F32, GV_I32, GV_STRING};
    uint32_t et;
    uint64_t n, at = r->pos;
    if (rd_u32(r, &et, "array element type") || rd_u64(r, &n, "array length")) return -1;
    if (et != want[which] && !(which == 2 && et == GV_U32))
        return bench_errf(r->err, r->errlen, "%s: key %s is an array of %s, expected %s",
                          r->path, key, gv_name(et), gv_name(want[which]));
    uint64_t min = which == 0 || which == 3 ? 8 : 4;
    if (n > rd_left(r) / min)
        return bench_errf(r->err, r->errlen, "%s: key %s: array of %llu values at offset %llu runs past the end of the file (%llu bytes)",
                          r->path, key, (unsigned long long)n, (unsigned long long)at, (unsigned long long)r->size);
    if (n > INT_MAX)
        return bench_errf(r->err, r->errlen, "%s: key %s holds %llu tokens, at most %d supported", r->path, key, (unsigned long long)n, INT_MAX);
    if (which == 3) {
        /* Each merge is two pieces and a space: its length is checked by rd_str against
         * the bytes left, and its shape when the tokenizer is built. */
        va->merges = calloc(n ? n : 1, sizeof(char *));
        if (!va->merges) return bench_errf(r->err, r->errlen, "%s: out of memory reading %s", r->path, key);
        va->n_merges = n;
        va->have_merges = 1;
        for (uint64_t i = 0; i < n; i++)
            if (rd_str(r, &va->merges[i], 0, key)) return -1;
    } else if (which == 0) {
        va->tokens = calloc(n ? n : 1, sizeof(char *));
        if (!va->tokens) return bench_errf(r->err, r->errlen, "%s: out of memory reading %s", r->path, key);
        va->n_tokens = n;   /* set first: a half-read array is freed by its count */
        va->have_tokens = 1;
        for (uint64_t i = 0; i < n; i++)
            if (rd_str(r, &va->tokens[i], 0, key)) return -1;
    } else if (which == 1) {
        if (!(va->scores = malloc((n ? n : 1) * sizeof(float))))
            return bench_errf(r->err, r->errlen, "%s: out of memory reading %s", r->path, key);
        va->n_scores = n;
        va->have_scores = 1;
        if (rd_bytes(r, va->scores, n * 4, key)) return -1;
    } else {
        if (!(va->types = malloc((n ? n : 1) * sizeof(int32_t))))
            return bench_errf(r->err, r->errlen, "%s: out of memory reading %s", r->path, key);
        va->n_types = n;
        va->have_types = 1;
        if (rd_bytes(r, va->types, n * 4, key)) return -1;
    }
    return 0;
}

static int read_kv(gg_rd *r, gg_kv *kv, gg_vocab_arrays *va) {
    if (rd_str(r, &kv->key, GGUF_MAX_NAME, "key name")) return -1;
    if (rd_u32(r, &kv->type, kv->key)) return -1;
    const char *k = kv->key;
    uint32_t t = kv->type;
    switch (t) {
    case GV_U8: { uint8_t x; if (rd_bytes(r, &x, 1, k)) return -1; kv->v.u = x; break; }
    case GV_BOOL: { uint8_t x; if (rd_bytes(r, &x, 1, k)) return -1; kv->v.u = x != 0; break; }
    case GV_I8: { int8_t x; if (rd_bytes(r, &x, 1, k)) return -1; kv->v.i = x; break; }
    case GV_U16: { uint16_t x; if (rd_bytes(r, &x, 2, k)) return -1; kv->v.u = x; break; }
    case GV_I16: { int16_t x; if (rd_bytes(r, &x, 2, k)) return -1; kv->v.i = x; break; }
    case GV_U32: { uint32_t x; if (rd_bytes(r, &x, 4, k)) return -1; kv->v.u = x; break; }
    case GV_I32: { int32_t x; if (rd_bytes(r, &x, 4, k)) return -1; kv->v.i = x; break; }
    case GV_U64: { uint64_t x; if (rd_bytes(r, &x, 8, k)) return -1; kv->v.u = x; break; }
    case GV_I64: { int64_t x; if (rd_bytes(r, &x, 8, k)) return -1; kv->v.i = x; break; }
    case GV_F32: { float x; if (rd_bytes(r, &x, 4, k)) return -1; kv->v.f = x; break; }
    case GV_F64: { double x; if (rd_bytes(r, &x, 8, k)) return -1; kv->v.f = x; break; }
    case GV_STRING: return rd_str(r, &kv->str, 0, k);
    case GV_ARRAY: {
        /* Peek at the array's head so the table can say what it held. */
        uint64_t at = r->pos;
        if (rd_u32(r, &kv->arr_type, "array element type") || rd_u64(r, &kv->arr_n, "array length")) return -1;
        r->pos = at;
        int which = strcmp(k, "tokenizer.ggml.tokens") == 0 ? 0 : strcmp(k, "tokenizer.ggml.scores") == 0 ? 1
                  : strcmp(k, "tokenizer.ggml.token_type") == 0 ? 2 : strcmp(k, "tokenizer.ggml.merges") == 0 ? 3 : -1;
        if (which >= 0 && (which == 0 ? va->have_tokens : which == 1 ? va->have_scores : which == 2 ? va->have_types : va->have_merges))
            return bench_errf(r->err, r->errlen, "%s: duplicate key %s", r->path, k);
        return which >= 0 ? read_vocab_array(r, k, va, which) : skip_array(r, k, 0);
    }
    default:
        return bench_errf(r->err, r->errlen, "%s: key %s at offset %llu has unknown value type %u",
                          r->path, k, (unsigned long long)(r->pos - 4), t);
    }
    return 0;
}

static const gg_kv *kv_find(const gg_kv *kvs, uint64_t n, const char *key) {
    for (uint64_t i = 0; i < n; i++)
        if (strcmp(kvs[i].key, key) == 0) return &kvs[i];
    return NULL;
}

static int kv_is_int(uint32_t t) {
    return t == GV_U8 || t == GV_I8 || t == GV_U16 || t == GV_I16 || t == GV_U32 || t == GV_I32 || t == GV_U64 || t == GV_I64;
}
static int kv_is_signed(uint32_t t) { return t == GV_I8 || t == GV_I16 || t == GV_I32 || t == GV_I64; }

/* An integer key as a positive int; *v untouched when the key is absent. */
static int kv_get_count(const char *path, const gg_kv *kvs, uint64_t n, const char *key, int *v, char *err, size_t errlen) {
    const gg_kv *kv = kv_find(kvs, n, key);
    if (!kv) return 0;
    if (!kv_is_int(kv->type))
        return bench_errf(err, errlen, "%s: key %s has type %s, expected an integer", path, key, gv_name(kv->type));
    int neg = kv_is_signed(kv->type) && kv->v.i < 0;
    if (neg || kv->v.u == 0 || kv->v.u > INT_MAX)
        return bench_errf(err, errlen, "%s: key %s is %lld, expected 1..%d", path, key,
                          neg ? (long long)kv->v.i : (long long)kv->v.u, INT_MAX);
    *v = (int)kv->v.u;
    return 0;
}

static int kv_get_float(const char *path, const gg_kv *kvs, uint64_t n, const char *key, float *v, char *err, size_t errlen) {
    const gg_kv *kv = kv_find(kvs, n, key);
    if (!kv) return 0;
    if (kv->type == GV_F32 || kv->type == GV_F64) *v = (float)kv->v.f;
    else if (kv_is_int(kv->type)) *v = kv_is_signed(kv->type) ? (float)kv->v.i : (float)kv->v.u;
    else return bench_errf(err, errlen, "%s: key %s has type %s, expected a number", path, key, gv_name(kv->type));
    return 0;
}

/* A token id: absent, or all ones (llama.cpp's "none"), gives -1. */
static int kv_get_token(const char *path, const gg_kv *kvs, uint64_t n, const char *key, int n_tokens, int *v,
                        char *err, size_t errlen) {
    const gg_kv *kv = kv_find(kvs, n, key);
    *v = -1;
    if (!kv) return 0;
    if (!kv_is_int(kv->type))
        return bench_errf(err, errlen, "%s: key %s has type %s, expected an integer", path, key, gv_name(kv->type));
    if ((kv_is_signed(kv->type) && kv->v.i < 0) || kv->v.u == UINT32_MAX || kv->v.u == UINT64_MAX) return 0;
    if (kv->v.u >= (uint64_t)n_tokens)
        return bench_errf(err, errlen, "%s: key %s is %llu, the vocabulary has %d tokens", path, key,
                          (unsigned long long)kv->v.u, n_tokens);
    *v = (int)kv->v.u;
    return 0;
}

static int cmp_kv_ptr(const void *a, const void *b) {
    return strcmp((*(const gg_kv *const *)a)->key, (*(const gg_kv *const *)b)->key);
}

/* ---- tensor types ---- */

/* ggml's type numbers (ggml.h's enum ggml_type), with the names llama.cpp prints;
 * NULL where a number was retired. bench reads those with a bench_dtype. */
static const struct { const char *name; int bench; } ggml_types[] = {
    [0] = {"F32", BENCH_F32},   [1] = {"F16", BENCH_F16},    [2] = {"Q4_0", BENCH_Q4_0},  [3] = {"Q4_1", BENCH_Q4_1},
    [6] = {"Q5_0", BENCH_Q5_0}, [7] = {"Q5_1", BENCH_Q5_1},  [8] = {"Q8_0", BENCH_Q8_0},  [9] = {"Q8_1", -1},
    [10] = {"Q2_K", BENCH_Q2_K}, [11] = {"Q3_K", BENCH_Q3_K}, [12] = {"Q4_K", BENCH_Q4_K}, [13] = {"Q5_K", BENCH_Q5_K},
    [14] = {"Q6_K", BENCH_Q6_K}, [15] = {"Q8_K", -1},     [16] = {"IQ2_XXS", -1}, [17] = {"IQ2_XS", -1},
    [18] = {"IQ3_XXS", -1},   [19] = {"IQ1_S", -1},      [20] = {"IQ4_NL", -1},  [21] = {"IQ3_S", -1},
    [22] = {"IQ2_S", -1},     [23] = {"IQ4_XS", -1},     [24] = {"I8", -1},      [25] = {"I16", -1},
    [26] = {"I32", -1},       [27] = {"I64", -1},        [28] = {"F64", -1},     [29] = {"IQ1_M", -1},
    [30] = {"BF16", BENCH_BF16}, [34] = {"TQ1_0", -1},   [35] = {"TQ2_0", -1},   [39] = {"MXFP4", -1},
};
#define GGML_NTYPES (sizeof ggml_types / sizeof ggml_types[0])

/* The names of the types read, for the refusal message. */
#define GGML_TYPES_READ "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K"

static const char *ggml_type_name(uint32_t t) {
    return t < GGML_NTYPES && ggml_types[t].name ? ggml_types[t].name : "unknown";
}

static int ggml_type_to_bench(uint32_t t, bench_dtype *out) {
    if (t >= GGML_NTYPES || !ggml_types[t].name || ggml_types[t].bench < 0) return -1;
    *out = (bench_dtype)ggml_types[t].bench;
    return 0;
}

/* ---- the container ---- */

/* magic, version and the two counts, each count checked against what is left of the file */
static int read_fixed_header(gguf_file *g) {
    gg_rd *r = &g->r;
    const char *path = r->path;
    char magic[4];
    if (rd_bytes(r, magic, 4, "magic")) return -1;
    if (memcmp(magic, "GGUF", 4) != 0)
        return bench_errf(r->err, r->errlen, "%s: bad magic %02x %02x %02x %02x, expected \"GGUF\": not a GGUF file", path,
                          (unsigned char)magic[0], (unsigned char)magic[1], (unsigned char)magic[2], (unsigned char)magic[3]);
    if (rd_u32(r, &g->version, "version")) return -1;
    if (g->version != 2 && g->version != 3) {
        uint32_t sw = __builtin_bswap32(g->version);
        if (sw == 2 || sw == 3)
            return bench_errf(r->err, r->errlen, "%s: big-endian GGUF (version %u byte-swapped) is not supported", path, sw);
        return bench_errf(r->err, r->errlen, "%s: GGUF version %u is not supported (2 and 3 are)", path, g->version);
    }
    if (rd_u64(r, &g->n_tensors, "tensor count") || rd_u64(r, &g->n_kv, "key/value count")) return -1;
    /* A key/value pair takes at least 13 bytes (key length, type, one byte), a
     * tensor info 32 (name length, n_dims, one dim, type, offset): the counts
     * must fit in what is left of the file before anything is allocated. */
    if (g->n_tensors > rd_left(r) / 32 || g->n_tensors > INT_MAX)
        return bench_errf(r->err, r->errlen, "%s: tensor count %llu cannot fit in a file of %llu bytes (each tensor info takes at least 32)",
                          path, (unsigned long long)g->n_tensors, (unsigned long long)r->size);
    if (g->n_kv > (rd_left(r) - g->n_tensors * 32) / 13)
        return bench_errf(r->err, r->errlen, "%s: key/value count %llu cannot fit in a file of %llu bytes (each pair takes at least 13)",
                          path, (unsigned long long)g->n_kv, (unsigned long long)r->size);
    return 0;
}

/* every pair, then no key twice, then general.alignment */
static int read_pairs(gguf_file *g) {
    gg_rd *r = &g->r;
    const char *path = r->path;
    uint64_t n_kv = g->n_kv;
    g->n_kv = 0;    /* the count of pairs to free, as they are read */
    if (!(g->kvs = calloc(n_kv ? n_kv : 1, sizeof(*g->kvs)))) return bench_errf(r->err, r->errlen, "%s: out of memory", path);
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = i + 1;    /* counted first: the cleanup frees the partly read pair too */
        if (read_kv(r, &g->kvs[i], &g->va)) return -1;
    }
    if (n_kv > 1) {
        const gg_kv **sorted = malloc(n_kv * sizeof(*sorted));
        if (!sorted) return bench_errf(r->err, r->errlen, "%s: out of memory", path);
        for (uint64_t i = 0; i < n_kv; i++) sorted[i] = &g->kvs[i];
        qsort(sorted, n_kv, sizeof(*sorted), cmp_kv_ptr);
        for (uint64_t i = 1; i < n_kv; i++)
            if (strcmp(sorted[i - 1]->key, sorted[i]->key) == 0) {
                bench_errf(r->err, r->errlen, "%s: duplicate key %s", path, sorted[i]->key);
                free(sorted);
                return -1;
            }
        free(sorted);
    }
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gg_kv *al = kv_find(g->kvs, g->n_kv, "general.alignment");
    if (al) {
        if (!kv_is_int(al->type) || (kv_is_signed(al->type) && al->v.i < 0))
            return bench_errf(r->err, r->errlen, "%s: general.alignment has type %s, expected u32", path, gv_name(al->type));
        g->alignment = al->v.u;
        if (g->alignment == 0 || (g->alignment & (g->alignment - 1)) || g->alignment > (1u << 30))
            return bench_errf(r->err, r->errlen, "%s: general.alignment is %llu, expected a power of two", path,
                              (unsigned long long)g->alignment);
    }
    return 0;
}

int gguf_read_open(const char *path, gguf_file *g, char *err, size_t errlen) {
    memset(g, 0, sizeof(*g));
    g->r = (gg_rd){.fd = -1, .path = path, .err = err, .errlen = errlen};
    g->r.fd = model_open_regular(path, err, errlen);
    if (g->r.fd < 0) return -1;
    struct stat st;
    if (fstat(g->r.fd, &st)) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return bench_errf(err, errlen, "%s: not a regular file", path);
    g->r.size = (uint64_t)st.st_size;
    if (!(g->r.buf = malloc(RD_BUF))) return bench_errf(err, errlen, "%s: out of memory", path);
    return read_fixed_header(g) || read_pairs(g) ? -1 : 0;
}

int gguf_read_tensor(gguf_file *g, gguf_tensor_info *ti) {
    gg_rd *r = &g->r;
    const char *path = r->path;
    char *err = r->err;
    size_t errlen = r->errlen;
    uint64_t info_at = r->pos;
    uint64_t ne_u[MODEL_MAX_DIMS] = {0};
    memset(ti, 0, sizeof(*ti));
    char *tname = NULL;
    if (rd_str(r, &tname, GGUF_MAX_NAME, "tensor name")) return -1;
    if (rd_u32(r, &ti->n_dims, tname)) goto fail;
    if (ti->n_dims < 1 || ti->n_dims > MODEL_MAX_DIMS) {
        bench_errf(err, errlen, "%s: tensor %s (info at offset %llu) has %u dims, expected 1..%d",
                   path, tname, (unsigned long long)info_at, ti->n_dims, MODEL_MAX_DIMS);
        goto fail;
    }
    if (rd_bytes(r, ne_u, 8ull * ti->n_dims, tname)) goto fail;
    for (uint32_t d = 0; d < ti->n_dims; d++) {
        if (ne_u[d] == 0 || ne_u[d] > INT64_MAX) {
            bench_errf(err, errlen, "%s: tensor %s: dimension %u is %llu, expected 1..2^63-1",
                       path, tname, d, (unsigned long long)ne_u[d]);
            goto fail;
        }
        ti->ne[d] = (int64_t)ne_u[d];
    }
    if (model_tensor_nelems((int)ti->n_dims, ti->ne) < 0) {
        bench_errf(err, errlen, "%s: tensor %s: the product of its shape [%llu, %llu, %llu, %llu] overflows int64",
                   path, tname, (unsigned long long)ne_u[0], (unsigned long long)ne_u[1],
                   (unsigned long long)ne_u[2], (unsigned long long)ne_u[3]);
        goto fail;
    }
    if (rd_u32(r, &ti->ggml_type, tname) || rd_u64(r, &ti->offset, tname)) goto fail;
    if (ggml_type_to_bench(ti->ggml_type, &ti->dtype)) {
        bench_errf(err, errlen, "%s: tensor %s has ggml type %s (%u), which bench does not read (it reads " GGML_TYPES_READ ")",
                   path, tname, ggml_type_name(ti->ggml_type), ti->ggml_type);
        goto fail;
    }
    if (ti->offset % g->alignment) {
        bench_errf(err, errlen, "%s: tensor %s: data offset %llu is not a multiple of the alignment %llu",
                   path, tname, (unsigned long long)ti->offset, (unsigned long long)g->alignment);
        goto fail;
    }
    ti->name = tname;
    g->tensors_read++;
    return 0;
fail:
    free(tname);
    return -1;
}

uint64_t gguf_data_start(const gguf_file *g) {
    uint64_t pos = g->r.pos;
    return pos + (g->alignment - pos % g->alignment) % g->alignment;
}

void gguf_read_close(gguf_file *g) {
    if (g->r.fd >= 0) close(g->r.fd);
    free(g->r.buf);
    for (uint64_t i = 0; g->kvs && i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].str);
    }
    free(g->kvs);
    gg_vocab_arrays *va = &g->va;
    for (uint64_t i = 0; va->tokens && i < va->n_tokens; i++) free(va->tokens[i]);
    free(va->tokens);
    free(va->scores);
    free(va->types);
    for (uint64_t i = 0; va->merges && i < va->n_merges; i++) free(va->merges[i]);
    free(va->merges);
    memset(g, 0, sizeof(*g));
    g->r.fd = -1;
}

int gguf_scan(const char *path, char *err, size_t errlen) {
    gguf_file g;
    int rc = gguf_read_open(path, &g, err, errlen);
    while (!rc && g.tensors_read < g.n_tensors) {
        gguf_tensor_info ti;
        rc = gguf_read_tensor(&g, &ti);
        if (!rc) free(ti.name);
    }
    gguf_read_close(&g);
    return rc;
}

const gg_kv *gguf_find(const gguf_file *g, const char *key) { return kv_find(g->kvs, g->n_kv, key); }

int gguf_get_count(const gguf_file *g, const char *key, int *v) {
    return kv_get_count(g->r.path, g->kvs, g->n_kv, key, v, g->r.err, g->r.errlen);
}

int gguf_get_float(const gguf_file *g, const char *key, float *v) {
    return kv_get_float(g->r.path, g->kvs, g->n_kv, key, v, g->r.err, g->r.errlen);
}

int gguf_get_token(const gguf_file *g, const char *key, int n_tokens, int *v) {
    return kv_get_token(g->r.path, g->kvs, g->n_kv, key, n_tokens, v, g->r.err, g->r.errlen);
}
