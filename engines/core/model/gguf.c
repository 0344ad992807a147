/* GGUF reader (llama.cpp's model file format), versions 2 and 3.
 *
 * Byte layout, little endian throughout:
 *   offset 0   char[4]   magic "GGUF"
 *          4   u32       version (2 or 3; 1 had 32-bit counts and is not read)
 *          8   u64       n_tensors
 *         16   u64       n_kv
 *         24   n_kv x key/value:
 *                  string key            (string = u64 length + bytes, no NUL)
 *                  u32    value type     (0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32,
 *                                         7 bool (1 byte), 8 string, 9 array, 10 u64, 11 i64, 12 f64)
 *                  value                 (array = u32 element type, u64 count, count values)
 *              n_tensors x tensor info:
 *                  string name
 *                  u32    n_dims         (1..4)
 *                  u64    ne[n_dims]     (ne[0] innermost)
 *                  u32    ggml type      (read here: 0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1,
 *                                         8 Q8_0, 10 Q2_K, 11 Q3_K, 12 Q4_K, 13 Q5_K, 14 Q6_K, 30 BF16)
 *                  u64    offset         (from the start of the data section; a multiple of the alignment)
 *              padding to a multiple of general.alignment (u32 key, default 32, a power of two)
 *   data_start tensor data
 *
 * Every count and length read from the file is checked against the bytes that
 * remain before anything is allocated for it, so a corrupt header costs an
 * error message, never a huge allocation or a long loop.
 */
#include "model.h"

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

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader copies little-endian arrays as they are: little-endian hosts only"
#endif

enum {
    GV_U8 = 0, GV_I8, GV_U16, GV_I16, GV_U32, GV_I32, GV_F32, GV_BOOL,
    GV_STRING, GV_ARRAY, GV_U64, GV_I64, GV_F64, GV_COUNT
};

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 1024      /* ggml allows 64; longer names are surely corruption */
#define GGUF_MAX_ARRAY_DEPTH 4

static const char *gv_name(uint32_t t) {
    static const char *n[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                              "string", "array", "u64", "i64", "f64"};
    return t < GV_COUNT ? n[t] : "unknown";
}

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

typedef struct gg_rd {
    int fd;
    const char *path;
    uint64_t size;          /* file length, bytes */
    uint64_t pos;           /* offset of the next byte to read; pos <= size */
    uint64_t buf_off;       /* file offset of buf[0] */
    size_t buf_len;         /* valid bytes in buf */
    unsigned char *buf;     /* (RD_BUF) */
    char *err;
    size_t errlen;
} gg_rd;

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

typedef struct gg_kv {
    char *key;
    uint32_t type;                              /* GV_* */
    union { uint64_t u; int64_t i; double f; } v; /* scalars: u for unsigned and bool, i signed, f float */
    char *str;                                  /* GV_STRING */
    uint32_t arr_type;                          /* GV_ARRAY: element type and count */
    uint64_t arr_n;
} gg_kv;

/* What the vocabulary arrays hold while the header is parsed. */
typedef struct gg_vocab_arrays {
    uint64_t n_tokens, n_scores, n_types, n_merges;
    char **tokens;
    float *scores;
    int32_t *types;
    char **merges;          /* tokenizer.ggml.merges: byte-level BPE's "left right" pairs */
    int have_tokens, have_scores, have_types, have_merges;
} gg_vocab_arrays;

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

/* ---- the parser ---- */

int gguf_open(const char *path, model *m, char *err, size_t errlen) {
    gg_rd r = {.fd = -1, .path = path, .err = err, .errlen = errlen};
    gg_kv *kvs = NULL;
    const gg_kv **sorted = NULL;
    uint64_t n_kv = 0, n_tensors = 0;
    gg_vocab_arrays va = {0};
    char *tname = NULL;
    int rc = -1;

    r.fd = model_open_regular(path, err, errlen);
    if (r.fd < 0) goto out;
    struct stat st;
    if (fstat(r.fd, &st)) { bench_errf(err, errlen, "%s: %s", path, strerror(errno)); goto out; }
    if (!S_ISREG(st.st_mode)) { bench_errf(err, errlen, "%s: not a regular file", path); goto out; }
    r.size = (uint64_t)st.st_size;
    if (!(r.buf = malloc(RD_BUF))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }

    /* -- fixed header -- */
    char magic[4];
    uint32_t version;
    if (rd_bytes(&r, magic, 4, "magic")) goto out;
    if (memcmp(magic, "GGUF", 4) != 0) {
        bench_errf(err, errlen, "%s: bad magic %02x %02x %02x %02x, expected \"GGUF\": not a GGUF file", path,
                   (unsigned char)magic[0], (unsigned char)magic[1], (unsigned char)magic[2], (unsigned char)magic[3]);
        goto out;
    }
    if (rd_u32(&r, &version, "version")) goto out;
    if (version != 2 && version != 3) {
        uint32_t sw = __builtin_bswap32(version);
        if (sw == 2 || sw == 3) bench_errf(err, errlen, "%s: big-endian GGUF (version %u byte-swapped) is not supported", path, sw);
        else bench_errf(err, errlen, "%s: GGUF version %u is not supported (2 and 3 are)", path, version);
        goto out;
    }
    if (rd_u64(&r, &n_tensors, "tensor count") || rd_u64(&r, &n_kv, "key/value count")) goto out;
    /* A key/value pair takes at least 13 bytes (key length, type, one byte), a
     * tensor info 32 (name length, n_dims, one dim, type, offset): the counts
     * must fit in what is left of the file before anything is allocated. */
    if (n_tensors > rd_left(&r) / 32 || n_tensors > INT_MAX) {
        bench_errf(err, errlen, "%s: tensor count %llu cannot fit in a file of %llu bytes (each tensor info takes at least 32)",
                   path, (unsigned long long)n_tensors, (unsigned long long)r.size);
        goto out;
    }
    if (n_kv > (rd_left(&r) - n_tensors * 32) / 13) {
        bench_errf(err, errlen, "%s: key/value count %llu cannot fit in a file of %llu bytes (each pair takes at least 13)",
                   path, (unsigned long long)n_kv, (unsigned long long)r.size);
        goto out;
    }

    /* -- key/value pairs -- */
    if (!(kvs = calloc(n_kv ? n_kv : 1, sizeof(*kvs)))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
    for (uint64_t i = 0; i < n_kv; i++) {
        /* Counted first: the cleanup frees the partly read pair too. */
        if (read_kv(&r, &kvs[i], &va)) { n_kv = i + 1; goto out; }
    }
    if (n_kv > 1) {
        if (!(sorted = malloc(n_kv * sizeof(*sorted)))) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
        for (uint64_t i = 0; i < n_kv; i++) sorted[i] = &kvs[i];
        qsort(sorted, n_kv, sizeof(*sorted), cmp_kv_ptr);
        for (uint64_t i = 1; i < n_kv; i++)
            if (strcmp(sorted[i - 1]->key, sorted[i]->key) == 0) {
                bench_errf(err, errlen, "%s: duplicate key %s", path, sorted[i]->key);
                goto out;
            }
    }

    uint64_t alignment = GGUF_DEFAULT_ALIGNMENT;
    const gg_kv *al = kv_find(kvs, n_kv, "general.alignment");
    if (al) {
        if (!kv_is_int(al->type) || (kv_is_signed(al->type) && al->v.i < 0)) {
            bench_errf(err, errlen, "%s: general.alignment has type %s, expected u32", path, gv_name(al->type));
            goto out;
        }
        alignment = al->v.u;
        if (alignment == 0 || (alignment & (alignment - 1)) || alignment > (1u << 30)) {
            bench_errf(err, errlen, "%s: general.alignment is %llu, expected a power of two", path, (unsigned long long)alignment);
            goto out;
        }
    }
    const gg_kv *arch = kv_find(kvs, n_kv, "general.architecture");
    if (arch && arch->type != GV_STRING) {
        bench_errf(err, errlen, "%s: general.architecture has type %s, expected string", path, gv_name(arch->type));
        goto out;
    }
    if (arch && strcmp(arch->str, "llama") != 0 && n_tensors > 0) {
        bench_errf(err, errlen, "%s: general.architecture is \"%s\"; only llama models are supported", path, arch->str);
        goto out;
    }

    /* -- tensor infos -- */
    m->format = MODEL_FORMAT_GGUF;
    int file = model_add_file(m, path, model_fd_id(r.fd));
    if (file < 0) { bench_errf(err, errlen, "%s: out of memory", path); goto out; }
    for (uint64_t i = 0; i < n_tensors; i++) {
        uint64_t info_at = r.pos;
        uint32_t n_dims, type;
        uint64_t ne_u[MODEL_MAX_DIMS] = {0}, offset;
        int64_t ne[MODEL_MAX_DIMS] = {0};
        if (rd_str(&r, &tname, GGUF_MAX_NAME, "tensor name")) goto out;
        if (rd_u32(&r, &n_dims, tname)) goto out;
        if (n_dims < 1 || n_dims > MODEL_MAX_DIMS) {
            bench_errf(err, errlen, "%s: tensor %s (info at offset %llu) has %u dims, expected 1..%d",
                       path, tname, (unsigned long long)info_at, n_dims, MODEL_MAX_DIMS);
            goto out;
        }
        if (rd_bytes(&r, ne_u, 8ull * n_dims, tname)) goto out;
        for (uint32_t d = 0; d < n_dims; d++) {
            if (ne_u[d] == 0 || ne_u[d] > INT64_MAX) {
                bench_errf(err, errlen, "%s: tensor %s: dimension %u is %llu, expected 1..2^63-1",
                           path, tname, d, (unsigned long long)ne_u[d]);
                goto out;
            }
            ne[d] = (int64_t)ne_u[d];
        }
        if (model_tensor_nelems((int)n_dims, ne) < 0) {
            bench_errf(err, errlen, "%s: tensor %s: the product of its shape [%llu, %llu, %llu, %llu] overflows int64",
                       path, tname, (unsigned long long)ne_u[0], (unsigned long long)ne_u[1],
                       (unsigned long long)ne_u[2], (unsigned long long)ne_u[3]);
            goto out;
        }
        if (rd_u32(&r, &type, tname) || rd_u64(&r, &offset, tname)) goto out;
        bench_dtype dt;
        if (ggml_type_to_bench(type, &dt)) {
            bench_errf(err, errlen, "%s: tensor %s has ggml type %s (%u), which bench does not read (it reads " GGML_TYPES_READ ")",
                       path, tname, ggml_type_name(type), type);
            goto out;
        }
        if (offset % alignment) {
            bench_errf(err, errlen, "%s: tensor %s: data offset %llu is not a multiple of the alignment %llu",
                       path, tname, (unsigned long long)offset, (unsigned long long)alignment);
            goto out;
        }
        /* The offset is relative until the data section's start is known, below. */
        if (model_add_tensor(m, tname, dt, (int)n_dims, ne, file, offset, err, errlen)) goto out;
        free(tname);
        tname = NULL;
    }

    /* -- data section -- */
    uint64_t data_start = r.pos + (alignment - r.pos % alignment) % alignment;
    for (int i = 0; i < m->n_tensors; i++) {
        model_tensor *t = &m->tensors[i];
        uint64_t rel = t->offset;
        if (rel > r.size || data_start > r.size - rel || t->nbytes > r.size - rel - data_start) {
            bench_errf(err, errlen, "%s: tensor %s: %llu bytes at offset %llu (data section at %llu + %llu) run past the end of the file (%llu bytes)",
                       path, t->name, (unsigned long long)t->nbytes, (unsigned long long)(data_start + rel),
                       (unsigned long long)data_start, (unsigned long long)rel, (unsigned long long)r.size);
            goto out;
        }
        t->offset = data_start + rel;
    }

    /* -- hyperparameters: missing keys are model_validate's to report -- */
    const char *pfx = "llama";
    char key[128];
    model_config *c = &m->cfg;
    c->rope_theta = 10000.0f;
    c->norm_eps = 1e-5f;
    c->rope = ROPE_INTERLEAVED;
#define KEY(suffix) (snprintf(key, sizeof(key), "%s.%s", pfx, suffix), key)
    if (kv_get_count(path, kvs, n_kv, KEY("context_length"), &c->seq_len_header, err, errlen) ||
        kv_get_count(path, kvs, n_kv, KEY("embedding_length"), &c->dim, err, errlen) ||
        kv_get_count(path, kvs, n_kv, KEY("block_count"), &c->n_layers, err, errlen) ||
        kv_get_count(path, kvs, n_kv, KEY("feed_forward_length"), &c->hidden_dim, err, errlen) ||
        kv_get_count(path, kvs, n_kv, KEY("attention.head_count"), &c->n_heads, err, errlen) ||
        kv_get_count(path, kvs, n_kv, KEY("attention.head_count_kv"), &c->n_kv_heads, err, errlen) ||
        kv_get_count(path, kvs, n_kv, KEY("vocab_size"), &c->vocab_size, err, errlen) ||
        kv_get_float(path, kvs, n_kv, KEY("rope.freq_base"), &c->rope_theta, err, errlen) ||
        kv_get_float(path, kvs, n_kv, KEY("attention.layer_norm_rms_epsilon"), &c->norm_eps, err, errlen))
        goto out;
    if (!c->n_kv_heads) c->n_kv_heads = c->n_heads;
    c->seq_len = c->seq_len_header;
    int rope_dims = 0;
    if (kv_get_count(path, kvs, n_kv, KEY("rope.dimension_count"), &rope_dims, err, errlen)) goto out;
    if (rope_dims && c->dim && c->n_heads && c->dim % c->n_heads == 0 && rope_dims != c->dim / c->n_heads) {
        bench_errf(err, errlen, "%s: %s is %d but the head size is %d: partial rotary embeddings are not supported",
                   path, KEY("rope.dimension_count"), rope_dims, c->dim / c->n_heads);
        goto out;
    }
    /* head size: llama.cpp allows keys and values of another size than dim / heads */
    const char *hkeys[] = {"attention.key_length", "attention.value_length"};
    for (int i = 0; i < 2; i++) {
        int len = 0;
        if (kv_get_count(path, kvs, n_kv, KEY(hkeys[i]), &len, err, errlen)) goto out;
        if (len && c->dim && c->n_heads && len * c->n_heads != c->dim) {
            bench_errf(err, errlen, "%s: %s is %d but dim / heads is %d / %d: heads of another size than dim / heads "
                       "are not supported", path, key, len, c->dim, c->n_heads);
            goto out;
        }
    }
    /* RoPE scaling: linear is read; YaRN and LongRoPE are refused. Llama 3's long-context
     * scheme needs no key: its rope_freqs.weight tensor carries it (transformer.c). */
    float linear = 0.0f;
    if (kv_get_float(path, kvs, n_kv, KEY("rope.scale_linear"), &linear, err, errlen)) goto out; /* older files */
    const gg_kv *rst = kv_find(kvs, n_kv, KEY("rope.scaling.type"));
    if (rst) {
        if (rst->type != GV_STRING) {
            bench_errf(err, errlen, "%s: %s has type %s, expected string", path, key, gv_name(rst->type));
            goto out;
        }
        if (!strcmp(rst->str, "linear")) {
            if (kv_get_float(path, kvs, n_kv, KEY("rope.scaling.factor"), &linear, err, errlen)) goto out;
        } else if (strcmp(rst->str, "none") != 0) {
            bench_errf(err, errlen, "%s: %s.rope.scaling.type is \"%s\", which bench does not read (none and linear are; "
                       "Llama 3's rope_freqs.weight is)", path, pfx, rst->str);
            goto out;
        }
    }
    if (linear != 0.0f && linear != 1.0f) {
        if (!(linear > 0.0f) || !isfinite(linear)) {
            bench_errf(err, errlen, "%s: RoPE linear scaling factor %g, expected a positive number", path, linear);
            goto out;
        }
        c->rope_linear = linear;
    }
#undef KEY
    const gg_kv *gname = kv_find(kvs, n_kv, "general.name");
    if (gname && gname->type == GV_STRING && !(m->name = strdup(gname->str))) {
        bench_errf(err, errlen, "%s: out of memory", path);
        goto out;
    }

    /* -- vocabulary -- */
    if (va.have_tokens) {
        int n = (int)va.n_tokens;
        if (va.have_scores && va.n_scores != va.n_tokens) {
            bench_errf(err, errlen, "%s: tokenizer.ggml.scores has %llu entries, tokenizer.ggml.tokens %llu",
                       path, (unsigned long long)va.n_scores, (unsigned long long)va.n_tokens);
            goto out;
        }
        if (va.have_types && va.n_types != va.n_tokens) {
            bench_errf(err, errlen, "%s: tokenizer.ggml.token_type has %llu entries, tokenizer.ggml.tokens %llu",
                       path, (unsigned long long)va.n_types, (unsigned long long)va.n_tokens);
            goto out;
        }
        if (n == 0) { bench_errf(err, errlen, "%s: tokenizer.ggml.tokens is empty", path); goto out; }
        model_vocab *v = &m->vocab;
        if (!va.have_scores && !(va.scores = calloc((size_t)n, sizeof(float)))) goto oom;
        if (!va.have_types) {
            if (!(va.types = malloc((size_t)n * sizeof(int32_t)))) goto oom;
            for (int i = 0; i < n; i++) va.types[i] = TOKEN_NORMAL;
        }
        if (kv_get_token(path, kvs, n_kv, "tokenizer.ggml.bos_token_id", n, &v->bos, err, errlen) ||
            kv_get_token(path, kvs, n_kv, "tokenizer.ggml.eos_token_id", n, &v->eos, err, errlen) ||
            kv_get_token(path, kvs, n_kv, "tokenizer.ggml.unknown_token_id", n, &v->unk, err, errlen))
            goto out;
        const gg_kv *tm = kv_find(kvs, n_kv, "tokenizer.ggml.model"), *tp = kv_find(kvs, n_kv, "tokenizer.ggml.pre");
        if ((tm && tm->type != GV_STRING) || (tp && tp->type != GV_STRING)) {
            bench_errf(err, errlen, "%s: %s has type %s, expected string", path, tm && tm->type != GV_STRING ? tm->key : tp->key,
                       gv_name(tm && tm->type != GV_STRING ? tm->type : tp->type));
            goto out;
        }
        /* Absent model or pre stay NULL: the tokenizer names what is missing. */
        if ((tm && !(v->model = strdup(tm->str))) || (tp && !(v->pre = strdup(tp->str)))) goto oom;
        /* SentencePiece (llama.cpp's "llama" model) prepends a space unless told otherwise. */
        v->add_space_prefix = tm && strcmp(tm->str, "llama") == 0;
        const gg_kv *asp = kv_find(kvs, n_kv, "tokenizer.ggml.add_space_prefix");
        if (asp && asp->type == GV_BOOL) v->add_space_prefix = (int)asp->v.u;
        if (va.n_merges > INT_MAX) {
            bench_errf(err, errlen, "%s: tokenizer.ggml.merges holds %llu merges, at most %d supported", path,
                       (unsigned long long)va.n_merges, INT_MAX);
            goto out;
        }
        /* "left right": llama.cpp splits at the first space after the first byte */
        for (uint64_t i = 0; i < va.n_merges; i++) {
            const char *mg = va.merges[i], *sp = mg[0] ? strchr(mg + 1, ' ') : NULL;
            if (!sp || !sp[1]) {
                bench_errf(err, errlen, "%s: tokenizer.ggml.merges[%llu] is \"%.60s\", expected two pieces separated by a space",
                           path, (unsigned long long)i, mg);
                goto out;
            }
        }
        v->tokens = va.tokens; va.tokens = NULL; va.n_tokens = 0;
        v->scores = va.scores; va.scores = NULL;
        v->types = va.types; va.types = NULL;
        v->merges = va.merges; va.merges = NULL;
        v->n_merges = (int)va.n_merges; va.n_merges = 0;
        v->n = n;
    } else {
        m->vocab.bos = m->vocab.eos = m->vocab.unk = -1;
    }
    const model_tensor *emb = model_find(m, "token_embd.weight");
    if (emb && emb->n_dims >= 2 && emb->ne[1] <= INT_MAX) c->vocab_size = (int)emb->ne[1];
    else if (!c->vocab_size) c->vocab_size = m->vocab.n;
    rc = 0;
    goto out;
oom:
    bench_errf(err, errlen, "%s: out of memory", path);
out:
    if (r.fd >= 0) close(r.fd);
    free(r.buf);
    free(tname);
    free(sorted);
    for (uint64_t i = 0; kvs && i < n_kv; i++) { free(kvs[i].key); free(kvs[i].str); }
    free(kvs);
    for (uint64_t i = 0; va.tokens && i < va.n_tokens; i++) free(va.tokens[i]);
    free(va.tokens);
    free(va.scores);
    free(va.types);
    for (uint64_t i = 0; va.merges && i < va.n_merges; i++) free(va.merges[i]);
    free(va.merges);
    return rc;
}
