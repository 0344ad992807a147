/* Writers of llama2.c's formats: the v0 checkpoint and tokenizer.bin.
 *
 * Checkpoint (little endian; the layout model.c's llama2c_open reads):
 *   int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
 *         (vocab_size negated when the classifier is stored: "unshared")
 *   f32   token_embd, then each per-layer family stacked over the layers
 *         (attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
 *         ffn_down, ffn_up), output_norm, freq_cis_real (seq_len, hd/2),
 *         freq_cis_imag (seq_len, hd/2), then output when unshared.
 * freq_cis[pos][i] = cos/sin(pos * theta^(-2i/hd)): what llama2.c's export.py
 * writes, from cfg->rope_theta (its files are not reproduced to the bit: torch's
 * f32 cos/sin are not correctly rounded). Readers that recompute RoPE ignore it, but early
 * llama2.c run.c versions read it, so it must be right.
 *
 * tokenizer.bin: int32 max_token_length, then per token f32 score, int32 len,
 * len bytes (see vocab.c).
 */
#include "model_write.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "hf_names.h"

/* ---- an output file written beside its final name and renamed into place ---- */

typedef struct l2c_out {
    const char *path;
    char tmp[4096];
    int fd;
} l2c_out;

static int out_open(l2c_out *o, const char *path, char *err, size_t errlen) {
    o->path = path;
    o->fd = -1;
    if (snprintf(o->tmp, sizeof(o->tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(o->tmp))
        return bench_errf(err, errlen, "%s: path too long", path);
    o->fd = mkostemp(o->tmp, O_CLOEXEC);
    if (o->fd < 0) o->tmp[0] = '\0';
    if (o->fd < 0) return bench_errf(err, errlen, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
    /* mkostemp makes the file 0600; a model is as readable as any file written with open() */
    if (fchmod(o->fd, 0644)) {
        int e = errno;
        close(o->fd);
        o->fd = -1;
        unlink(o->tmp);
        return bench_errf(err, errlen, "%s: %s", o->tmp, strerror(e));
    }
    return 0;
}

static int out_write(l2c_out *o, const void *buf, size_t n, char *err, size_t errlen) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(o->fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return bench_errf(err, errlen, "%s: write failed: %s", o->path, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsync before rename: after a crash the name holds the old file or the whole new one. */
static int out_commit(l2c_out *o, char *err, size_t errlen) {
    int rc = fsync(o->fd);
    int e = errno;
    if (!rc) model_write_drop_cache(o->fd);
    if (close(o->fd) && !rc) rc = -1, e = errno;
    o->fd = -1;
    if (rc) {
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return bench_errf(err, errlen, "%s: %s", o->path, strerror(e));
    }
    if (rename(o->tmp, o->path)) {
        e = errno;
        unlink(o->tmp);
        bench_errf(err, errlen, "%s: cannot rename %s into place: %s", o->path, o->tmp, strerror(e));
        o->tmp[0] = '\0';
        return -1;
    }
    o->tmp[0] = '\0';
    return 0;
}

static void out_abort(l2c_out *o) {
    if (o->fd >= 0) close(o->fd);
    o->fd = -1;
    if (o->tmp[0]) unlink(o->tmp);
}

/* ---- the checkpoint ---- */

/* One run of the file: a tensor family, stacked over the layers (layered) or alone. */
typedef struct l2c_part {
    const char *name;           /* GGUF name, or its per-layer suffix */
    int layered;
    int64_t cols, rows;
    int rope_heads;             /* heads whose rows RoPE rotates (q, k), else 0 */
} l2c_part;

static int find_tensor(const model_write_src *s, const char *name) {
    for (int i = 0; i < s->n_tensors; i++)
        if (strcmp(s->tensors[i].name, name) == 0) return i;
    return -1;
}

/* Index of the tensor the file needs here, checked for dtype and shape. */
static int l2c_tensor(const char *path, const model_write_src *s, const char *name, int64_t cols, int64_t rows,
                      char *used, char *err, size_t errlen) {
    int i = find_tensor(s, name);
    if (i < 0) return bench_errf(err, errlen, "%s: the model has no tensor %s, which a llama2.c checkpoint needs", path, name);
    const model_tensor *t = &s->tensors[i];
    int64_t trows = 1;
    for (int d = 1; d < t->n_dims; d++) trows *= t->ne[d];
    if (t->n_dims < 1 || t->ne[0] != cols || trows != rows)
        return bench_errf(err, errlen, "%s: tensor %s has shape [%lld, %lld], expected [%lld, %lld] (cols, rows)",
                          path, name, (long long)t->ne[0], (long long)trows, (long long)cols, (long long)rows);
    if (t->dtype != BENCH_F32)
        return bench_errf(err, errlen, "%s: tensor %s is %s; llama2.c checkpoints hold f32 only (convert with --dtype f32)",
                          path, name, bench_dtype_name(t->dtype));
    if (t->nbytes != (uint64_t)cols * (uint64_t)rows * 4)
        return bench_errf(err, errlen, "%s: tensor %s: %llu bytes, expected %llu", path, name,
                          (unsigned long long)t->nbytes, (unsigned long long)cols * (unsigned long long)rows * 4);
    used[i] = 1;
    return i;
}

/* Writes freq_cis_real then freq_cis_imag, (seq_len, hd/2) each. */
static int l2c_write_freqs(l2c_out *o, const model_config *c, int hd, char *err, size_t errlen) {
    int half = hd / 2;
    float *row = malloc((size_t)half * sizeof(float));
    float *freq = malloc((size_t)half * sizeof(float));
    if (!row || !freq) {
        free(row);
        free(freq);
        return bench_errf(err, errlen, "%s: out of memory", o->path);
    }
    /* Frequencies and angles in f32, as export.py computes them (torch, float32), so
     * the angles match its to the bit; only cos/sin may differ by an ulp. */
    for (int i = 0; i < half; i++) freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)hd);
    int rc = 0;
    for (int part = 0; part < 2 && !rc; part++)
        for (int pos = 0; pos < c->seq_len && !rc; pos++) {
            for (int i = 0; i < half; i++) {
                double angle = (double)((float)pos * freq[i]);
                row[i] = (float)(part == 0 ? cos(angle) : sin(angle));
            }
            rc = out_write(o, row, (size_t)half * sizeof(float), err, errlen);
        }
    free(row);
    free(freq);
    return rc;
}

int llama2c_write(const char *path, const model_write_src *src, char *err, size_t errlen) {
    const model_config *c = src->cfg;
    if (!c || c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->vocab_size <= 0 || c->seq_len <= 0)
        return bench_errf(err, errlen, "%s: the model's shape has a field that is not positive", path);
    if (c->dim % c->n_heads || c->n_heads % c->n_kv_heads || (c->dim / c->n_heads) % 2)
        return bench_errf(err, errlen, "%s: dim %d, n_heads %d, n_kv_heads %d: expected heads to divide dim into even "
                          "head sizes and kv heads to divide heads", path, c->dim, c->n_heads, c->n_kv_heads);
    int hd = c->dim / c->n_heads;
    int64_t dim = c->dim, kv = (int64_t)c->n_kv_heads * hd, hid = c->hidden_dim;
    int unshared = find_tensor(src, "output.weight") >= 0;

    const l2c_part parts[] = {
        {"token_embd.weight", 0, dim, c->vocab_size, 0},
        {"attn_norm", 1, dim, 1, 0},
        {"attn_q", 1, dim, dim, c->n_heads},
        {"attn_k", 1, dim, kv, c->n_kv_heads},
        {"attn_v", 1, dim, kv, 0},
        {"attn_output", 1, dim, dim, 0},
        {"ffn_norm", 1, dim, 1, 0},
        {"ffn_gate", 1, dim, hid, 0},
        {"ffn_down", 1, hid, dim, 0},
        {"ffn_up", 1, dim, hid, 0},
        {"output_norm.weight", 0, dim, 1, 0},
        {NULL, 0, 0, 0, 0}, /* freq_cis_real, freq_cis_imag */
        {"output.weight", 0, dim, c->vocab_size, 0},
    };
    const int n_parts = (int)(sizeof(parts) / sizeof(parts[0])) - (unshared ? 0 : 1);

    /* Check everything before creating the file. */
    char *used = calloc((size_t)src->n_tensors + 1, 1);
    if (!used) return bench_errf(err, errlen, "%s: out of memory", path);
    uint64_t max_bytes = 0;
    char name[128];
    for (int p = 0; p < n_parts; p++) {
        if (!parts[p].name) continue;
        for (int l = 0; l < (parts[p].layered ? c->n_layers : 1); l++) {
            if (parts[p].layered) snprintf(name, sizeof(name), "blk.%d.%s.weight", l, parts[p].name);
            else snprintf(name, sizeof(name), "%s", parts[p].name);
            int i = l2c_tensor(path, src, name, parts[p].cols, parts[p].rows, used, err, errlen);
            if (i < 0) {
                free(used);
                return -1;
            }
            if (src->tensors[i].nbytes > max_bytes) max_bytes = src->tensors[i].nbytes;
        }
    }
    for (int i = 0; i < src->n_tensors; i++)
        if (!used[i]) {
            bench_errf(err, errlen, "%s: tensor %s has no place in a llama2.c checkpoint", path, src->tensors[i].name);
            free(used);
            return -1;
        }
    free(used);
    if (max_bytes > SIZE_MAX) return bench_errf(err, errlen, "%s: a tensor of %llu bytes does not fit in memory", path, (unsigned long long)max_bytes);

    int rc = -1;
    int need_perm = c->rope == ROPE_HALF;
    void *buf = malloc(max_bytes ? (size_t)max_bytes : 1);
    void *perm = need_perm ? malloc(max_bytes ? (size_t)max_bytes : 1) : NULL;
    l2c_out o = {0};
    o.fd = -1;
    if (!buf || (need_perm && !perm)) {
        bench_errf(err, errlen, "%s: out of memory for a buffer of %llu bytes", path, (unsigned long long)max_bytes);
        goto done;
    }
    if (out_open(&o, path, err, errlen)) goto done;
    int32_t h[7] = {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
                    unshared ? -c->vocab_size : c->vocab_size, c->seq_len};
    if (out_write(&o, h, sizeof(h), err, errlen)) goto done;
    for (int p = 0; p < n_parts; p++) {
        if (!parts[p].name) {
            if (l2c_write_freqs(&o, c, hd, err, errlen)) goto done;
            continue;
        }
        for (int l = 0; l < (parts[p].layered ? c->n_layers : 1); l++) {
            if (parts[p].layered) snprintf(name, sizeof(name), "blk.%d.%s.weight", l, parts[p].name);
            else snprintf(name, sizeof(name), "%s", parts[p].name);
            int i = find_tensor(src, name);
            uint64_t nb = src->tensors[i].nbytes;
            if (src->fill(src->user, i, buf, nb, err, errlen)) goto done;
            void *rows = buf;
            if (need_perm && parts[p].rope_heads) {
                /* HF's rotate_half order back to llama2.c's interleaved pairs */
                if (hf_permute_rows(perm, buf, parts[p].rope_heads, parts[p].rows, (size_t)parts[p].cols * 4, 0)) {
                    bench_errf(err, errlen, "%s: tensor %s: %lld rows do not split into %d heads of pairs",
                               path, name, (long long)parts[p].rows, parts[p].rope_heads);
                    goto done;
                }
                rows = perm;
            }
            if (out_write(&o, rows, (size_t)nb, err, errlen)) goto done;
        }
    }
    rc = out_commit(&o, err, errlen);
done:
    if (rc) out_abort(&o);
    free(buf);
    free(perm);
    return rc;
}

/* ---- tokenizer.bin ---- */

const char *llama2c_lost(const model_write_src *src, char *buf, size_t len) {
    if (src->cfg->rope_theta != 10000.0f)
        snprintf(buf, len, "llama2.c checkpoints have no rope theta field; readers assume 10000, this model has %g "
                 "(only the freq_cis tables carry it)", src->cfg->rope_theta);
    else if (len)
        buf[0] = '\0';
    return buf;
}

int llama2c_tokenizer_path(const char *model_path, char *buf, size_t len) {
    size_t n = strlen(model_path);
    if (n >= 4 && strcmp(model_path + n - 4, ".bin") == 0) n -= 4;
    int w = snprintf(buf, len, "%.*s.tokenizer.bin", (int)n, model_path);
    return w < 0 || (size_t)w >= len ? -1 : 0;
}

#define L2C_SPACE_SYM "\xe2\x96\x81"

int llama2c_write_tokenizer(const char *path, const model_vocab *v, char *err, size_t errlen) {
    if (!v || v->n < 3 || !v->tokens || !v->scores)
        return bench_errf(err, errlen, "%s: the model has no vocabulary to write", path);
    if (v->bos != 1 || v->eos != 2 || (v->unk != 0 && v->unk != -1))
        return bench_errf(err, errlen, "%s: llama2.c's tokenizer.bin fixes <unk>=0, <s>=1, </s>=2; this vocabulary has "
                          "unk %d, bos %d, eos %d", path, v->unk, v->bos, v->eos);
    /* One buffer for the whole file: each piece shrinks when U+2581 (3 bytes) becomes ' '. */
    size_t total = 4;
    for (int i = 0; i < v->n; i++) {
        if (!v->tokens[i]) return bench_errf(err, errlen, "%s: token %d has no text", path, i);
        size_t l = strlen(v->tokens[i]);
        if (l > INT32_MAX || total > SIZE_MAX - 8 - l) return bench_errf(err, errlen, "%s: token %d is too long", path, i);
        total += 8 + l;
    }
    unsigned char *b = malloc(total);
    if (!b) return bench_errf(err, errlen, "%s: out of memory for %zu bytes", path, total);
    size_t pos = 4;
    int32_t max_len = 1;
    for (int i = 0; i < v->n; i++) {
        const char *t = v->tokens[i];
        size_t lenpos = pos + 4;
        memcpy(b + pos, &v->scores[i], 4);
        pos += 8;
        size_t start = pos;
        while (*t) {
            if (strncmp(t, L2C_SPACE_SYM, 3) == 0) {
                b[pos++] = ' ';
                t += 3;
            } else
                b[pos++] = (unsigned char)*t++;
        }
        int32_t l = (int32_t)(pos - start);
        memcpy(b + lenpos, &l, 4);
        if (l > max_len) max_len = l;
    }
    memcpy(b, &max_len, 4);
    l2c_out o = {0};
    o.fd = -1;
    int rc = -1;
    if (!out_open(&o, path, err, errlen) && !out_write(&o, b, pos, err, errlen)) rc = out_commit(&o, err, errlen);
    if (rc) out_abort(&o);
    free(b);
    return rc;
}
