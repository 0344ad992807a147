/* The llama2.c tokenizer.bin vocabulary (a model_vocab is freed by model.c, its owner).
 *
 * Byte layout of tokenizer.bin (little endian, no header magic, no token count):
 *   offset 0   int32   max_token_length   (bytes of the longest piece)
 *   offset 4   per token, until the end of the file:
 *                float32 score        (merge priority, higher merges first)
 *                int32   len          (bytes of the piece, 0 <= len <= max_token_length)
 *                len bytes            (the piece, UTF-8, no NUL; spaces written as ' ')
 * Ids are positions in the file. The format has no token types, no special ids
 * and no flags: llama2.c's exporter always writes the SentencePiece layout
 * <unk>=0, <s>=1, </s>=2, then byte tokens <0x00>..<0xFF>, so those are derived.
 */
#include "util/ut_fs.h"
#include "model.h"
#include "engines/abi/module.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "<0xNN>" with two hex digits: SentencePiece's byte-fallback pieces. */
static int is_byte_piece(const char *p, int len) {
    return len == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && p[5] == '>' &&
           isxdigit((unsigned char)p[3]) && isxdigit((unsigned char)p[4]);
}

static int32_t rd_i32(const unsigned char *p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t i;
    memcpy(&i, &u, 4);
    return i;
}

static float rd_f32(const unsigned char *p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The whole file in memory: tokenizer.bin files are small (434 KB for 32000
 * tokens), and one pass over a buffer makes every bound check a subtraction. Read from the
 * descriptor opened and checked here, so that *id is the file whose bytes these are. */
#define VOCAB_MAX_BYTES ((size_t)1 << 30)
static int read_file(const char *path, unsigned char **out, size_t *size, model_file_id *id, char *err, size_t errlen) {
    *out = NULL;
    int fd = model_open_regular(path, err, errlen);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return bench_errf(err, errlen, "%s: cannot open: %s", path, strerror(e));
    }
    *id = model_fd_id(fd);
    *out = (unsigned char *)ut_slurp_file(f, path, VOCAB_MAX_BYTES, size, err, errlen);
    fclose(f);
    return *out ? 0 : -1;
}

int model_vocab_load_llama2c(const char *path, int expected_n, model_vocab *v, char *err, size_t errlen) {
    unsigned char *buf = NULL;
    size_t size = 0;
    memset(v, 0, sizeof(*v));
    if (read_file(path, &buf, &size, &v->source_id, err, errlen)) return -1;

    if (size < 4) {
        bench_errf(err, errlen, "%s: %zu bytes, too short for the max_token_length header (4 bytes)", path, size);
        goto err;
    }
    int32_t max_len = rd_i32(buf);
    if (max_len <= 0) {
        bench_errf(err, errlen, "%s: offset 0: max_token_length %d is not positive", path, max_len);
        goto err;
    }

    /* First pass: count and check every record, so the arrays are allocated once. */
    size_t off = 4;
    int64_t count = 0;
    while (off < size) {
        if (size - off < 8) {
            bench_errf(err, errlen, "%s: offset %zu: token %lld: truncated record header (%zu bytes left, 8 needed)",
                       path, off, (long long)count, size - off);
            goto err;
        }
        float score = rd_f32(buf + off);
        int32_t len = rd_i32(buf + off + 4);
        if (isnan(score)) {
            bench_errf(err, errlen, "%s: offset %zu: token %lld: score is NaN", path, off, (long long)count);
            goto err;
        }
        if (len < 0 || len > max_len) {
            bench_errf(err, errlen, "%s: offset %zu: token %lld: length %d outside 0..max_token_length %d",
                       path, off + 4, (long long)count, len, max_len);
            goto err;
        }
        if ((size_t)len > size - off - 8) {
            bench_errf(err, errlen, "%s: offset %zu: token %lld: length %d runs past the end of the file (%zu bytes left)",
                       path, off + 4, (long long)count, len, size - off - 8);
            goto err;
        }
        off += 8 + (size_t)len;
        if (++count > INT32_MAX) {
            bench_errf(err, errlen, "%s: more than %d tokens", path, INT32_MAX);
            goto err;
        }
    }
    if (count == 0) {
        bench_errf(err, errlen, "%s: holds no tokens", path);
        goto err;
    }
    if (expected_n > 0 && count != expected_n) {
        bench_errf(err, errlen, "%s: holds %lld tokens, the model's vocabulary has %d", path, (long long)count, expected_n);
        goto err;
    }

    int n = (int)count;
    v->tokens = calloc((size_t)n, sizeof(*v->tokens));
    v->scores = malloc((size_t)n * sizeof(*v->scores));
    v->types = malloc((size_t)n * sizeof(*v->types));
    if (!v->tokens || !v->scores || !v->types) {
        bench_errf(err, errlen, "%s: out of memory for %d tokens", path, n);
        goto err;
    }
    v->n = n; /* from here model_vocab_free frees the pieces filled so far */

    off = 4;
    for (int i = 0; i < n; i++) {
        int32_t len = rd_i32(buf + off + 4);
        char *piece = malloc((size_t)len + 1);
        if (!piece) {
            bench_errf(err, errlen, "%s: out of memory for token %d", path, i);
            goto err;
        }
        memcpy(piece, buf + off + 8, (size_t)len);
        piece[len] = '\0';
        v->tokens[i] = piece;
        v->scores[i] = rd_f32(buf + off);
        if (i == 0) v->types[i] = TOKEN_UNKNOWN;
        else if (i == 1 || i == 2) v->types[i] = TOKEN_CONTROL;
        else if (is_byte_piece(piece, len)) v->types[i] = TOKEN_BYTE;
        else v->types[i] = TOKEN_NORMAL;
        off += 8 + (size_t)len;
    }
    /* The exporter's fixed layout; a vocabulary smaller than 3 has no such ids. */
    v->unk = n > 0 ? 0 : -1;
    v->bos = n > 1 ? 1 : -1;
    v->eos = n > 2 ? 2 : -1;
    v->add_space_prefix = 1;
    if (!(v->model = strdup("llama"))) {
        bench_errf(err, errlen, "%s: out of memory", path);
        goto err;
    }
    free(buf);
    return 0;

err:
    free(buf);
    model_vocab_free(v);
    return -1;
}
