/* The model container: tensors by name (an O(1) index), the files they point into, the
 * vocabulary's lifetime, and the checks every format shares (shapes, model_validate). It
 * knows no file format: the readers (gguf.c, safetensors.c, llama2c.c, vocab.c) fill a model
 * through these helpers, and model_open.c picks the reader, so no reader is called from here.
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
#include "util/ut_vec.h"

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
    /* The readers take the header in 64 KiB reads; the kernel's readahead (8 MiB on a
     * virtio disk) would bring the first tensors in behind them as small folios, which the
     * weights' mapping then maps 4 KiB at a time (loader_mmap.c, huge=1): 38 of 59 MiB of
     * llama-110m q4_0 so. The reads this descriptor serves are its own, no more. */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
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
    if (UT_VEC_RESERVE(m->tensors, m->cap_tensors, m->n_tensors + 1)) return bench_errf(err, errlen, "%s: out of memory", fname);
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

bench_dtype model_main_dtype(const model_tensor *tensors, int n) {
    uint64_t bytes[BENCH_DTYPE_COUNT] = {0};
    for (int i = 0; i < n; i++)
        if (tensors[i].n_dims >= 2 && (unsigned)tensors[i].dtype < BENCH_DTYPE_COUNT) bytes[tensors[i].dtype] += tensors[i].nbytes;
    bench_dtype best = BENCH_F32;
    for (int t = 1; t < BENCH_DTYPE_COUNT; t++)
        if (bytes[t] > bytes[best]) best = (bench_dtype)t;
    return best;
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

void model_vocab_free(model_vocab *v) {
    if (!v) return;
    if (v->tokens)
        for (int i = 0; i < v->n; i++) free(v->tokens[i]);
    free(v->tokens);
    free(v->scores);
    free(v->types);
    free(v->model);
    free(v->pre);
    if (v->merges)
        for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->merges);
    if (v->pre_patterns)
        for (int i = 0; i < v->n_pre_patterns; i++) free(v->pre_patterns[i]);
    free(v->pre_patterns);
    free(v->pre_source);
    free(v->unsupported);
    free(v->chat_template);
    memset(v, 0, sizeof(*v));
}
