/* GGUF container reader: the file's header, its key/value pairs and its tensor infos,
 * with no knowledge of what a llama model is (gguf.c maps those onto a model). It is the
 * fuzz target's entry (fuzz/targets.h, fzt_gguf).
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
#ifndef GGUF_READ_H
#define GGUF_READ_H

#include <stddef.h>
#include <stdint.h>

#include "engines/abi/dtype.h"
#include "engines/core/model/model.h"

/* value types of the key/value pairs */
enum {
    GV_U8 = 0, GV_I8, GV_U16, GV_I16, GV_U32, GV_I32, GV_F32, GV_BOOL,
    GV_STRING, GV_ARRAY, GV_U64, GV_I64, GV_F64, GV_COUNT
};

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 1024      /* ggml allows 64; longer names are surely corruption */
#define GGUF_MAX_ARRAY_DEPTH 4

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

/* One tensor info, as the file states it (offset relative to the data section). */
typedef struct gguf_tensor_info {
    char *name;                 /* malloc'd; the caller owns it after gguf_read_tensor */
    uint32_t n_dims;            /* 1..MODEL_MAX_DIMS */
    int64_t ne[MODEL_MAX_DIMS]; /* (n_dims) ne[0] innermost, each >= 1, product fits int64 */
    uint32_t ggml_type;
    bench_dtype dtype;          /* the ggml type as bench holds it */
    uint64_t offset;            /* from the data section's start; a multiple of the alignment */
} gguf_tensor_info;

/* An open GGUF file: the header and the pairs read, the tensor infos next in line. */
typedef struct gguf_file {
    gg_rd r;                    /* the file and the position of the next tensor info */
    uint32_t version;           /* 2 or 3 */
    uint64_t n_tensors;
    uint64_t n_kv;
    gg_kv *kvs;                 /* (n_kv) in file order, no key twice */
    uint64_t alignment;         /* general.alignment or 32: a power of two */
    gg_vocab_arrays va;         /* the tokenizer arrays (the only arrays kept) */
    uint64_t tensors_read;      /* tensor infos read so far */
} gguf_file;

/* Opens path and reads the header and every key/value pair (each count and length checked
 * against the file's size first; duplicate keys and a bad alignment refused). 0, or -1 with
 * err naming the file; either way gguf_read_close frees what was read. */
int gguf_read_open(const char *path, gguf_file *g, char *err, size_t errlen);
/* The next tensor info (g->tensors_read < g->n_tensors), checked: dims, shape, a type
 * bench reads, the offset's alignment. 0 or -1 with the error in g's err. */
int gguf_read_tensor(gguf_file *g, gguf_tensor_info *ti);
/* Where the data section starts: after the tensor infos, aligned. Valid once every tensor
 * info was read. */
uint64_t gguf_data_start(const gguf_file *g);
void gguf_read_close(gguf_file *g);
/* The container alone, end to end: open, every tensor info, close (the fuzz target). */
int gguf_scan(const char *path, char *err, size_t errlen);

/* ---- the pairs ---- */
const char *gguf_value_type_name(uint32_t t);
const gg_kv *gguf_find(const gguf_file *g, const char *key);
/* An integer key as a positive int; *v untouched when the key is absent. */
int gguf_get_count(const gguf_file *g, const char *key, int *v);
/* A number key as a float; *v untouched when absent. */
int gguf_get_float(const gguf_file *g, const char *key, float *v);
/* A token id: absent, or all ones (llama.cpp's "none"), gives -1. */
int gguf_get_token(const gguf_file *g, const char *key, int n_tokens, int *v);

#endif
