/* llama2.c checkpoint reader.
 *
 * llama2.c checkpoint (v0), little endian:
 *   offset 0   int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
 *              (vocab_size < 0: the classifier is stored separately, "unshared")
 *   offset 28  f32 token_embedding (vocab, dim)
 *              f32 rms_att (layer, dim)
 *              f32 wq (layer, n_heads*hd, dim), wk (layer, kv_dim, dim), wv (layer, kv_dim, dim)
 *              f32 wo (layer, dim, n_heads*hd)
 *              f32 rms_ffn (layer, dim)
 *              f32 w1 (layer, hidden, dim), w2 (layer, dim, hidden), w3 (layer, hidden, dim)
 *              f32 rms_final (dim)
 *              f32 freq_cis_real (seq_len, hd/2), freq_cis_imag (seq_len, hd/2)  (unused: RoPE is computed)
 *              f32 wcls (vocab, dim)  only when unshared
 * Each layer's slice of a stacked array becomes its own tensor, pointing into the file.
 */
#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"

int llama2c_open(const char *path, model *m, char *err, size_t errlen) {
    int fd = model_open_regular(path, err, errlen);
    if (fd < 0) return -1;
    int32_t h[7];
    struct stat st;
    ssize_t got = pread(fd, h, sizeof(h), 0);
    int fst = fstat(fd, &st);
    model_file_id fid = {(unsigned long long)st.st_dev, (unsigned long long)st.st_ino};
    close(fd);
    if (fst) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    if (got != (ssize_t)sizeof(h))
        return bench_errf(err, errlen, "%s: file of %lld bytes is shorter than the 28-byte llama2.c header",
                          path, (long long)st.st_size);
    static const char *hname[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    int shared = h[5] > 0;
    /* A negative vocab size means "separate classifier"; INT32_MIN has no positive. */
    if (h[5] == INT32_MIN)
        return bench_errf(err, errlen, "%s: header field vocab_size (offset 20) is %d, expected 1..%d or its negative: not a llama2.c checkpoint",
                          path, h[5], 1 << 24);
    if (h[5] < 0) h[5] = -h[5];
    for (int i = 0; i < 7; i++)
        if (h[i] <= 0 || h[i] > (1 << 24))
            return bench_errf(err, errlen, "%s: header field %s (offset %d) is %d, expected 1..%d: not a llama2.c checkpoint",
                              path, hname[i], i * 4, h[i], 1 << 24);
    model_config *c = &m->cfg;
    c->dim = h[0]; c->hidden_dim = h[1]; c->n_layers = h[2]; c->n_heads = h[3]; c->n_kv_heads = h[4];
    c->vocab_size = h[5]; c->seq_len = c->seq_len_header = h[6];
    c->rope_theta = 10000.0f;   /* llama2.c hard-codes these */
    c->norm_eps = 1e-5f;
    c->rope = ROPE_INTERLEAVED;
    if (c->dim % c->n_heads || c->n_heads % c->n_kv_heads)
        return bench_errf(err, errlen, "%s: dim %d, n_heads %d, n_kv_heads %d do not divide", path, c->dim, c->n_heads, c->n_kv_heads);
    m->format = MODEL_FORMAT_LLAMA2C;
    int file = model_add_file(m, path, fid);
    if (file < 0) return bench_errf(err, errlen, "%s: out of memory", path);

    /* 64-bit offsets: a 7B checkpoint is > 4 GiB. */
    int64_t dim = c->dim, hd = c->dim / c->n_heads, kv = c->n_kv_heads * hd, hid = c->hidden_dim, L = c->n_layers;
    /* Check the size the header implies before making a tensor per layer: a
     * corrupt header must not cost millions of allocations. 128-bit: it can overflow 64. */
    unsigned __int128 need = (unsigned __int128)c->vocab_size * dim * (shared ? 1 : 2) + dim + (unsigned __int128)c->seq_len * hd +
                             (unsigned __int128)L * (2 * dim + 2 * (unsigned __int128)dim * dim + 2 * (unsigned __int128)dim * kv +
                                                    3 * (unsigned __int128)dim * hid);
    need = need * 4 + 28;
    if (need > (unsigned __int128)st.st_size) {
        if (need >> 64) return bench_errf(err, errlen, "%s: the header's shape needs more than 2^64 bytes, the file has %lld", path, (long long)st.st_size);
        return bench_errf(err, errlen, "%s: the header's shape needs %llu bytes, the file has %lld (truncated?)",
                          path, (unsigned long long)need, (long long)st.st_size);
    }
    if (L > MODEL_MAX_LAYERS) /* the file is large enough for them: refused before a tensor per layer is made */
        return bench_errf(err, errlen, "%s: header field n_layers (offset 8) is %d, expected 1..%d", path, c->n_layers, MODEL_MAX_LAYERS);
    uint64_t off = 28;
    char name[96];
#define ADD(nm, cols, rows) do { \
        int64_t ne_[2] = {(cols), (rows)}; \
        if (model_add_tensor(m, (nm), BENCH_F32, (rows) == 1 ? 1 : 2, ne_, file, off, err, errlen)) return -1; \
        off += (uint64_t)(cols) * (uint64_t)(rows) * 4; } while (0)
#define ADD_LAYERS(suffix, cols, rows) do { \
        for (int64_t l_ = 0; l_ < L; l_++) { snprintf(name, sizeof(name), "blk.%lld.%s.weight", (long long)l_, suffix); ADD(name, cols, rows); } \
    } while (0)
    ADD("token_embd.weight", dim, c->vocab_size);
    ADD_LAYERS("attn_norm", dim, 1);
    ADD_LAYERS("attn_q", dim, dim);
    ADD_LAYERS("attn_k", dim, kv);
    ADD_LAYERS("attn_v", dim, kv);
    ADD_LAYERS("attn_output", dim, dim);
    ADD_LAYERS("ffn_norm", dim, 1);
    ADD_LAYERS("ffn_gate", dim, hid);
    ADD_LAYERS("ffn_down", hid, dim);
    ADD_LAYERS("ffn_up", dim, hid);
    ADD("output_norm.weight", dim, 1);
    off += (uint64_t)c->seq_len * (uint64_t)hd * 4; /* freq_cis_real and freq_cis_imag, (seq_len, hd/2) each */
    if (!shared) ADD("output.weight", dim, c->vocab_size);
#undef ADD_LAYERS
#undef ADD
    if (off > (uint64_t)st.st_size)
        return bench_errf(err, errlen, "%s: the header's shape needs %llu bytes, the file has %lld (truncated?)",
                          path, (unsigned long long)off, (long long)st.st_size);
    return 0;
}

