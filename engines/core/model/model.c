/* Model description: format dispatch, the llama2.c checkpoint parser, and the
 * helpers every format parser shares.
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
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"

const char *model_format_name(model_format f) {
    switch (f) {
    case MODEL_FORMAT_LLAMA2C: return "llama2c";
    case MODEL_FORMAT_GGUF: return "gguf";
    case MODEL_FORMAT_SAFETENSORS: return "safetensors";
    }
    return "?";
}

const char *model_norm_name(model_norm n) {
    switch (n) {
    case MODEL_NORM_NONE: return "none";
    case MODEL_NORM_NFC: return "NFC";
    case MODEL_NORM_NFD: return "NFD";
    case MODEL_NORM_NFKC: return "NFKC";
    case MODEL_NORM_NFKD: return "NFKD";
    }
    return "?";
}

/* ---- shared helpers ---- */

int64_t model_tensor_nelems(int n_dims, const int64_t *ne) {
    if (n_dims < 1 || n_dims > MODEL_MAX_DIMS) return -1;
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] <= 0 || n > INT64_MAX / ne[i]) return -1;
        n *= ne[i];
    }
    return n;
}

static const char *file_kind(mode_t mode) {
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

int model_open_regular(const char *path, char *err, size_t errlen) {
    /* O_NONBLOCK: opening a FIFO for reading blocks until a writer comes, and the
     * check on the kind of file needs the descriptor; reads of a regular file ignore it */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        bench_errf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        bench_errf(err, errlen, "%s: is %s, expected a regular file", path, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int model_find_file(const model *m, const char *path) {
    for (int i = 0; i < m->n_files; i++)
        if (strcmp(m->files[i], path) == 0) return i;
    return -1;
}

model_file_id model_fd_id(int fd) {
    struct stat st;
    if (fstat(fd, &st)) return (model_file_id){0, 0};
    return (model_file_id){(unsigned long long)st.st_dev, (unsigned long long)st.st_ino};
}

int model_add_file(model *m, const char *path, model_file_id id) {
    int i = model_find_file(m, path);
    if (i >= 0) return m->file_ids[i].dev == id.dev && m->file_ids[i].ino == id.ino ? i : -1;
    char **files = realloc(m->files, (size_t)(m->n_files + 1) * sizeof(*files));
    if (!files) return -1;
    m->files = files;
    model_file_id *ids = realloc(m->file_ids, (size_t)(m->n_files + 1) * sizeof(*ids));
    if (!ids) return -1;
    m->file_ids = ids;
    if (!(files[m->n_files] = strdup(path))) return -1;
    ids[m->n_files] = id;
    return m->n_files++;
}

int model_reopen_file(const model *m, const char *path, int flags, char *err, size_t errlen) {
    int i = model_find_file(m, path);
    if (i < 0) return bench_errf(err, errlen, "%s: not one of the files of model %s; not read", path, m->name ? m->name : "?");
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return bench_errf(err, errlen, "%s: %s", path, strerror(e));
    }
    const model_file_id *id = &m->file_ids[i];
    if ((unsigned long long)st.st_dev != id->dev || (unsigned long long)st.st_ino != id->ino) {
        close(fd);
        return bench_errf(err, errlen, "%s is not the file the model was read from (device %llu inode %llu then, device %llu "
                          "inode %llu now): it was replaced since; not read", path, id->dev, id->ino,
                          (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    }
    return fd;
}

/* ---- the name index: registering and finding a tensor cost O(1), not O(tensors) ---- */

static uint32_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* The slot holding name, or the empty slot where it would go. */
static uint32_t index_slot(const model *m, const char *name) {
    uint32_t s = name_hash(name) & m->tindex_mask;
    while (m->tindex[s] >= 0 && strcmp(m->tensors[m->tindex[s]].name, name)) s = (s + 1) & m->tindex_mask;
    return s;
}

/* An index of at least twice as many slots as want tensors, holding the first n. */
static int index_build(model *m, int want) {
    uint32_t size = 16;
    while (size < 2u * (uint32_t)want && size < (1u << 31)) size *= 2;
    int32_t *t = malloc((size_t)size * sizeof(*t));
    if (!t) return -1;
    memset(t, 0xff, (size_t)size * sizeof(*t));
    free(m->tindex);
    m->tindex = t;
    m->tindex_mask = size - 1;
    m->n_indexed = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        uint32_t s = index_slot(m, m->tensors[i].name);
        if (m->tindex[s] < 0) m->tindex[s] = i; /* a duplicate keeps the first, as the scan did */
        m->n_indexed++;
    }
    return 0;
}

int model_reindex(model *m) { return index_build(m, m->n_tensors); }

int model_add_tensor(model *m, const char *name, bench_dtype dt, int n_dims, const int64_t *ne,
                     int file, uint64_t offset, char *err, size_t errlen) {
    const char *fname = (file >= 0 && file < m->n_files) ? m->files[file] : "?";
    if ((unsigned)dt >= BENCH_DTYPE_COUNT)
        return bench_errf(err, errlen, "%s: tensor %s: unknown dtype %d", fname, name, (int)dt);
    int64_t n = model_tensor_nelems(n_dims, ne);
    if (n < 0)
        return bench_errf(err, errlen, "%s: tensor %s: shape has %d dims or a product that overflows",
                          fname, name, n_dims);
    if (ne[0] % (int64_t)bench_dtype_block_elems(dt))
        return bench_errf(err, errlen, "%s: tensor %s: row of %lld elements is not a whole number of %s blocks",
                          fname, name, (long long)ne[0], bench_dtype_name(dt));
    uint64_t blocks = (uint64_t)n / bench_dtype_block_elems(dt);
    if (blocks > UINT64_MAX / bench_dtype_block_bytes(dt))
        return bench_errf(err, errlen, "%s: tensor %s: byte size overflows", fname, name);
    if (m->n_tensors >= INT32_MAX / 2) return bench_errf(err, errlen, "%s: tensor %s: too many tensors", fname, name);
    if ((!m->tindex || m->n_indexed != m->n_tensors || 2u * ((uint32_t)m->n_tensors + 1) > m->tindex_mask + 1) &&
        index_build(m, 2 * (m->n_tensors + 1)))
        return bench_errf(err, errlen, "%s: out of memory", fname);
    uint32_t slot = index_slot(m, name);
    if (m->tindex[slot] >= 0) return bench_errf(err, errlen, "%s: tensor %s appears twice", fname, name);
    if (m->n_tensors == m->cap_tensors) {
        int cap = m->cap_tensors ? 2 * m->cap_tensors : 16;
        model_tensor *nt = realloc(m->tensors, (size_t)cap * sizeof(*nt));
        if (!nt) return bench_errf(err, errlen, "%s: out of memory", fname);
        m->tensors = nt;
        m->cap_tensors = cap;
    }
    model_tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof(*t));
    if (!(t->name = strdup(name))) return bench_errf(err, errlen, "%s: out of memory", fname);
    t->dtype = dt;
    t->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) t->ne[i] = ne[i];
    t->file = file;
    t->offset = offset;
    t->nbytes = blocks * bench_dtype_block_bytes(dt);
    m->tindex[slot] = m->n_tensors;
    m->n_tensors++;
    m->n_indexed++;
    return 0;
}

const model_tensor *model_find(const model *m, const char *name) {
    if (m->tindex && m->n_indexed == m->n_tensors) {
        int32_t i = m->tindex[index_slot(m, name)];
        return i >= 0 ? &m->tensors[i] : NULL;
    }
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

uint64_t model_weight_bytes(const model *m) {
    uint64_t b = 0;
    for (int i = 0; i < m->n_tensors; i++) b += m->tensors[i].nbytes;
    return b;
}

uint64_t model_param_count(const model *m) {
    uint64_t n = 0;
    for (int i = 0; i < m->n_tensors; i++) n += (uint64_t)model_tensor_nelems(m->tensors[i].n_dims, m->tensors[i].ne);
    return n;
}

void model_free(model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_files; i++) free(m->files[i]);
    free(m->files);
    free(m->file_ids);
    for (int i = 0; i < m->n_tensors; i++) free(m->tensors[i].name);
    free(m->tensors);
    free(m->tindex);
    model_vocab_free(&m->vocab);
    free(m->name);
    free(m);
}

/* ---- validation ---- */

static int expect_tensor(const model *m, const char *name, int64_t cols, int64_t rows, char *err, size_t errlen) {
    const model_tensor *t = model_find(m, name);
    const char *f = m->n_files ? m->files[0] : "model";
    if (!t) return bench_errf(err, errlen, "%s: missing tensor %s", f, name);
    int64_t got_rows = t->n_dims >= 2 ? t->ne[1] : 1;
    for (int i = 2; i < t->n_dims; i++)
        if (t->ne[i] != 1) got_rows = -1;
    if (t->ne[0] != cols || got_rows != rows) {
        /* every dimension as the file has it: a 3-D tensor is not "[256, -1]" */
        char shape[96] = "";
        for (int i = 0; i < t->n_dims && i < MODEL_MAX_DIMS; i++)
            snprintf(shape + strlen(shape), sizeof(shape) - strlen(shape), "%s%lld", i ? ", " : "", (long long)t->ne[i]);
        return bench_errf(err, errlen, "%s: tensor %s has shape [%s] (%d-D), expected [%lld, %lld] (cols, rows)",
                          m->files[t->file], name, shape, t->n_dims, (long long)cols, (long long)rows);
    }
    if (rows == 1 && t->dtype != BENCH_F32)
        return bench_errf(err, errlen, "%s: tensor %s: norm weights must be f32, found %s",
                          m->files[t->file], name, bench_dtype_name(t->dtype));
    return 0;
}

int model_validate(const model *m, char *err, size_t errlen) {
    const model_config *c = &m->cfg;
    const char *f = m->n_files ? m->files[0] : "model";
    struct { const char *key; int v; } need[] = {
        {"dim", c->dim}, {"hidden_dim", c->hidden_dim}, {"n_layers", c->n_layers}, {"n_heads", c->n_heads},
        {"n_kv_heads", c->n_kv_heads}, {"vocab_size", c->vocab_size}, {"seq_len", c->seq_len},
    };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (need[i].v <= 0)
            return bench_errf(err, errlen, "%s: model %s is %d, expected a positive number", f, need[i].key, need[i].v);
    if (c->dim % c->n_heads || c->n_heads % c->n_kv_heads)
        return bench_errf(err, errlen, "%s: dim %d, n_heads %d, n_kv_heads %d: heads must divide dim and kv heads must divide heads",
                          f, c->dim, c->n_heads, c->n_kv_heads);
    if (c->n_layers > MODEL_MAX_LAYERS)
        return bench_errf(err, errlen, "%s: model n_layers is %d, expected at most %d (the largest models have ~130)", f, c->n_layers,
                          MODEL_MAX_LAYERS);
    int hd = c->dim / c->n_heads;
    if (hd % 2) return bench_errf(err, errlen, "%s: head size %d is odd; RoPE needs pairs", f, hd);
    if (!(c->norm_eps > 0) || !(c->rope_theta > 0) || !isfinite(c->norm_eps) || !isfinite(c->rope_theta))
        return bench_errf(err, errlen, "%s: rms epsilon %g and rope theta %g must be positive and finite", f, c->norm_eps, c->rope_theta);
    int kv_dim = c->n_kv_heads * hd;
    char name[96];
    if (expect_tensor(m, "token_embd.weight", c->dim, c->vocab_size, err, errlen)) return -1;
    if (expect_tensor(m, "output_norm.weight", c->dim, 1, err, errlen)) return -1;
    if (model_find(m, "output.weight") && expect_tensor(m, "output.weight", c->dim, c->vocab_size, err, errlen)) return -1;
    /* Llama 3's long-context RoPE: one divisor per pair of a head */
    if (model_find(m, "rope_freqs.weight") && expect_tensor(m, "rope_freqs.weight", hd / 2, 1, err, errlen)) return -1;
    for (int l = 0; l < c->n_layers; l++) {
        struct { const char *n; int64_t cols, rows; } lt[] = {
            {"attn_norm", c->dim, 1}, {"attn_q", c->dim, c->dim}, {"attn_k", c->dim, kv_dim},
            {"attn_v", c->dim, kv_dim}, {"attn_output", c->dim, c->dim}, {"ffn_norm", c->dim, 1},
            {"ffn_gate", c->dim, c->hidden_dim}, {"ffn_down", c->hidden_dim, c->dim}, {"ffn_up", c->dim, c->hidden_dim},
        };
        for (size_t i = 0; i < sizeof(lt) / sizeof(lt[0]); i++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", l, lt[i].n);
            if (expect_tensor(m, name, lt[i].cols, lt[i].rows, err, errlen)) return -1;
        }
    }
    if (m->vocab.n && m->vocab.n != c->vocab_size)
        return bench_errf(err, errlen, "%s: the vocabulary has %d tokens, the model %d", f, m->vocab.n, c->vocab_size);
    return 0;
}

/* ---- llama2.c checkpoint ---- */

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

/* ---- dispatch ---- */

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int model_open_vocab(const char *path, model **out, char *err, size_t errlen) {
    *out = NULL;
    model *m = calloc(1, sizeof(*m));
    if (!m) return bench_errf(err, errlen, "%s: out of memory", path);
    struct stat st;
    char tj[4096];
    uint8_t magic[4] = {0};
    int rc;
    if (stat(path, &st)) { bench_errf(err, errlen, "%s: %s", path, strerror(errno)); goto err; }
    if (S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(tj, sizeof(tj), "%s/tokenizer.json", path) >= sizeof(tj)) { bench_errf(err, errlen, "%s: path too long", path); goto err; }
        rc = safetensors_read_tokenizer(tj, m, err, errlen);
    } else if (has_suffix(path, ".json")) {
        rc = safetensors_read_tokenizer(path, m, err, errlen);
    } else {
        int fd = model_open_regular(path, err, errlen);
        if (fd < 0) goto err;
        ssize_t got = pread(fd, magic, 4, 0);
        close(fd);
        if (got == 4 && memcmp(magic, "GGUF", 4) == 0) rc = gguf_open(path, m, err, errlen);
        else rc = model_vocab_load_llama2c(path, 0, &m->vocab, err, errlen);
    }
    if (rc) goto err;
    if (m->vocab.n == 0) { bench_errf(err, errlen, "%s: holds no vocabulary", path); goto err; }
    *out = m;
    return 0;
err:
    model_free(m);
    return -1;
}

int model_open(const char *path, const char *tokenizer_path, model **out, char *err, size_t errlen) {
    *out = NULL;
    model *m = calloc(1, sizeof(*m));
    if (!m) return bench_errf(err, errlen, "%s: out of memory", path);
    struct stat st;
    if (stat(path, &st)) { bench_errf(err, errlen, "%s: %s", path, strerror(errno)); goto err; }
    int rc;
    if (S_ISDIR(st.st_mode) || has_suffix(path, ".safetensors") || has_suffix(path, ".json")) {
        rc = safetensors_open(path, m, err, errlen);
    } else {
        uint8_t magic[4] = {0};
        int fd = model_open_regular(path, err, errlen);
        if (fd < 0) goto err;
        ssize_t got = pread(fd, magic, 4, 0);
        close(fd);
        if (got == 4 && memcmp(magic, "GGUF", 4) == 0) rc = gguf_open(path, m, err, errlen);
        else rc = llama2c_open(path, m, err, errlen);
    }
    if (rc) goto err;
    if (!m->name) {
        const char *base = strrchr(path, '/');
        m->name = strdup(base ? base + 1 : path);
    }
    if (tokenizer_path) {
        model_vocab_free(&m->vocab);
        if (model_vocab_load_llama2c(tokenizer_path, m->cfg.vocab_size, &m->vocab, err, errlen)) goto err;
    }
    /* llama.cpp's vocabulary-only GGUF files: a tokenizer and no weights (model_open_vocab reads them) */
    if (m->format == MODEL_FORMAT_GGUF && !m->n_tensors && m->vocab.n) {
        bench_errf(err, errlen, "%s: a vocabulary-only file (%d tokens, no tensors): it holds no weights to run; "
                   "bench model info and bench tokenize read it, generate and run need a model with weights", path, m->vocab.n);
        goto err;
    }
    if (model_validate(m, err, errlen)) goto err;
    *out = m;
    return 0;
err:
    model_free(m);
    return -1;
}
