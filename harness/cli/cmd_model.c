/* bench model: info, convert, synth, shapes.
 *
 * Reports go to stdout; progress and notes to stderr. Conversion reads each
 * tensor with pread when its writer asks for it (no loader module: a
 * conversion is a stream, not a benchmark) and converts 2-D weights row by row
 * through f32 (kn_dequant_row -> kn_quant_row). The writers write atomically.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/ut_parse.h"
#include "commands.h"
#include "engines/abi/module.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/model/model.h"
#include "engines/core/model/model_write.h"
#include "engines/core/synth/synth.h"
#include "engines/core/compute/threadpool.h"
#include "util/ut_clock.h"

static double now_s(void) { return (double)ut_now_ns() * 1e-9; }

/* 1234567 -> "1.23 M"; units of 1000 (parameters, bytes as disks count them) */
static const char *human(double v, char *buf, size_t len) {
    static const char *u[] = {"", " K", " M", " G", " T"};
    int i = 0;
    while (v >= 1000.0 && i < 4) v /= 1000.0, i++;
    snprintf(buf, len, i ? "%.2f%s" : "%.0f%s", v, u[i]);
    return buf;
}

static void usage(FILE *f) {
    char formats[128];
    fprintf(f,
            "usage: bench model <info|convert|synth|shapes> [options]   (bench model <sub> --help for each)\n\n"
            "  info FILE [--tokenizer F] [--tensors] [--check]\n"
            "                                          print a model's format, shape, dtypes and sizes\n"
            "  convert IN OUT [--dtype T] [--tokenizer F] [--shard SIZE]\n"
            "                                          write IN as OUT, in the format OUT's name says (%s)\n"
            "  synth --shape NAME [--dtype T] [--format F] [--seed S] -o PATH\n"
            "                                          write a deterministic model of a named shape\n"
            "  shapes                                  list the synth shapes\n\n"
            "examples:\n"
            "  bench model info ../shared/models/stories260K.bin --tokenizer ../shared/models/tok512.bin\n"
            "  bench model convert ../shared/models/stories260K.bin stories260K-q8_0.gguf --dtype q8_0 \\\n"
            "                      --tokenizer ../shared/models/tok512.bin\n"
            "  bench model synth --shape llama-110m --dtype f16 --format gguf -o results/models/llama-110m-f16.gguf\n",
            model_writer_names(formats, sizeof formats, ", "));
}

/* ======================= info ======================= */

static void info_usage(FILE *f) {
    fprintf(f,
            "usage: bench model info FILE [--tokenizer F] [--tensors] [--check]\n\n"
            "Prints the format, name, files, shape (context as the file declares it and as the\n"
            "engine uses it), RoPE style, classifier, parameters, bytes per dtype and the vocabulary.\n"
            "FILE: a llama2.c checkpoint, a .gguf, a .safetensors file, a model.safetensors.index.json,\n"
            "or a directory holding safetensors and config.json.\n\n"
            "  --tokenizer F  a llama2.c tokenizer.bin, replacing the model's vocabulary\n"
            "  --tensors      also list every tensor: name, dtype, shape (cols x rows), file, offset, bytes\n"
            "  --check        read every weight and report the tensors holding NaN or Inf (exit 1 if any)\n\n"
            "examples:\n"
            "  bench model info ../shared/models/stories260K.bin\n"
            "  bench model info ../shared/thirdparty/stories260K-f32.gguf --tensors\n");
}

static int pread_full(int fd, void *buf, uint64_t n, uint64_t off);

/* --check: every weight dequantized row by row (through the same kn_dequant_row the
 * forward uses) and looked at for NaN or Inf; one line per tensor that holds one, with
 * the first such element. Returns the number of such tensors, or -1 when a file cannot
 * be read (err says why). */
static int check_weights(const model *m, char *err, size_t errlen) {
    int bad_tensors = -1, *fds = calloc((size_t)(m->n_files ? m->n_files : 1), sizeof(int));
    uint8_t *rows_buf = NULL;
    float *row = NULL;
    if (!fds) return bench_errf(err, errlen, "out of memory");
    for (int f = 0; f < m->n_files; f++) fds[f] = -1;
    for (int f = 0; f < m->n_files; f++)
        if ((fds[f] = model_open_regular(m->files[f], err, errlen)) < 0) goto out;
    bad_tensors = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *t = &m->tensors[i];
        int64_t cols = t->ne[0], rows = model_tensor_nelems(t->n_dims, t->ne) / cols;
        size_t rb = bench_dtype_row_bytes(t->dtype, cols);
        int64_t chunk = (int64_t)((4u << 20) / rb) > 0 ? (int64_t)((4u << 20) / rb) : 1; /* rows per read: ~4 MiB */
        if (chunk > rows) chunk = rows;
        uint8_t *nb = realloc(rows_buf, (size_t)chunk * rb);
        float *nr = nb ? realloc(row, (size_t)cols * sizeof(float)) : NULL;
        if (nb) rows_buf = nb;
        if (nr) row = nr;
        if (!nb || !nr) {
            bad_tensors = -1;
            bench_errf(err, errlen, "out of memory for tensor %s", t->name);
            goto out;
        }
        int found = 0;
        for (int64_t r0 = 0; r0 < rows && !found; r0 += chunk) {
            int64_t nrows = rows - r0 < chunk ? rows - r0 : chunk;
            if (pread_full(fds[t->file], rows_buf, (uint64_t)nrows * rb, t->offset + (uint64_t)r0 * rb)) {
                bad_tensors = -1;
                bench_errf(err, errlen, "%s: reading tensor %s: %s", m->files[t->file], t->name, strerror(errno));
                goto out;
            }
            for (int64_t r = 0; r < nrows && !found; r++) {
                kn_dequant_row(t->dtype, rows_buf + (size_t)r * rb, row, (int)cols);
                for (int64_t c = 0; c < cols; c++)
                    if (!isfinite(row[c])) {
                        printf("%-12s tensor %s (%s): row %lld, element %lld is %g\n", "not finite", t->name,
                               bench_dtype_name(t->dtype), (long long)(r0 + r), (long long)c, row[c]);
                        found = 1;
                        break;
                    }
            }
        }
        bad_tensors += found;
    }
out:
    for (int f = 0; f < m->n_files; f++)
        if (fds[f] >= 0) close(fds[f]);
    free(fds);
    free(rows_buf);
    free(row);
    return bad_tensors;
}

/* The vocabulary's and the tokenizer's lines, as for a model with weights. */
static void info_vocab(const model *m) {
    if (m->vocab.n)
        printf("%-12s %d tokens, bos %d, eos %d, unk %d, add_space_prefix %d\n", "vocab", m->vocab.n, m->vocab.bos,
               m->vocab.eos, m->vocab.unk, m->vocab.add_space_prefix);
    else
        printf("%-12s none in the file (give --tokenizer tokenizer.bin)\n", "vocab");
    if (m->vocab.n)
        printf("%-12s model %s, pre %s, %d merges%s%s%s%s\n", "tokenizer", m->vocab.model ? m->vocab.model : "(absent)",
               m->vocab.pre ? m->vocab.pre : m->vocab.n_pre_patterns ? "(tokenizer.json patterns)" : "(absent)", m->vocab.n_merges,
               m->vocab.normalize ? ", normalizer " : "", m->vocab.normalize ? model_norm_name(m->vocab.normalize) : "",
               m->vocab.unsupported ? "; not supported: " : "", m->vocab.unsupported ? m->vocab.unsupported : "");
}

/* A file with a vocabulary and no tensors: what it holds, and plainly that it has no weights. */
static void info_vocab_only(const char *path, const model *m) {
    printf("%-12s %s\n", "file", path);
    printf("%-12s %s, vocabulary only\n", "format", model_format_name(m->format));
    printf("%-12s %s\n", "name", m->name ? m->name : "");
    printf("%-12s none: no tensors (bench tokenize reads the vocabulary; bench generate and bench run need a model "
           "with weights)\n", "weights");
    info_vocab(m);
}

static int model_info(int argc, char **argv) {
    const char *path = NULL, *tok = NULL;
    int tensors = 0, check = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { info_usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok = argv[++i];
        else if (!strcmp(argv[i], "--tensors")) tensors = 1;
        else if (!strcmp(argv[i], "--check")) check = 1;
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "bench model info: unknown or incomplete argument \"%s\"\n", argv[i]);
            info_usage(stderr);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "bench model info: expected a model FILE\n");
        info_usage(stderr);
        return 2;
    }
    model *m = NULL;
    char err[1024], h1[32], h2[32];
    if (model_open(path, tok, &m, err, sizeof(err))) {
        /* a vocabulary-only GGUF (llama.cpp's ggml-vocab-*.gguf): its tokenizer, and that it has no
         * weights. GGUF only: a safetensors folder that fails would still have its tokenizer.json */
        char verr[256];
        if (!tok && !model_open_vocab(path, &m, verr, sizeof(verr)) && m->format == MODEL_FORMAT_GGUF && !m->n_tensors) {
            info_vocab_only(path, m);
            model_free(m);
            return 0;
        }
        model_free(m);
        fprintf(stderr, "bench model info: %s\n", err);
        return 1;
    }
    const model_config *c = &m->cfg;
    printf("%-12s %s\n", "file", path);
    printf("%-12s %s\n", "format", model_format_name(m->format));
    printf("%-12s %s\n", "name", m->name ? m->name : "");
    printf("%-12s %d\n", "files", m->n_files);
    for (int i = 0; m->n_files > 1 && i < m->n_files; i++) printf("%-12s   %d: %s\n", "", i, m->files[i]);
    printf("%-12s dim %d, hidden %d, layers %d, heads %d, kv heads %d, head_dim %d, vocab %d\n", "shape", c->dim,
           c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->n_heads ? c->dim / c->n_heads : 0, c->vocab_size);
    printf("%-12s %d declared, %d used\n", "context", c->seq_len_header, c->seq_len);
    printf("%-12s %s, theta %g", "rope",
           c->rope == ROPE_HALF ? "half (HF rotate_half q/k rows)" : "interleaved (llama2.c/GGUF q/k rows)", c->rope_theta);
    if (c->rope_linear > 0.0f) printf(", linear scaling %g", c->rope_linear);
    if (model_find(m, "rope_freqs.weight")) printf(", frequency factors (rope_freqs.weight)");
    printf("\n");
    printf("%-12s %g\n", "norm eps", c->norm_eps);
    printf("%-12s %s\n", "classifier", model_find(m, "output.weight") ? "separate (output.weight)" : "tied to token_embd");
    uint64_t params = model_param_count(m), bytes = model_weight_bytes(m);
    printf("%-12s %s (%llu)\n", "params", human((double)params, h1, sizeof(h1)), (unsigned long long)params);
    printf("%-12s %sB (%llu bytes)\n", "weights", human((double)bytes, h1, sizeof(h1)), (unsigned long long)bytes);
    int first = 1;
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++) {
        int n = 0;
        uint64_t b = 0, e = 0;
        for (int i = 0; i < m->n_tensors; i++)
            if (m->tensors[i].dtype == (bench_dtype)t) {
                n++;
                b += m->tensors[i].nbytes;
                e += (uint64_t)model_tensor_nelems(m->tensors[i].n_dims, m->tensors[i].ne);
            }
        if (!n) continue;
        printf("%-12s %-5s %4d tensors, %s params, %sB (%llu bytes)\n", first ? "dtypes" : "", bench_dtype_name((bench_dtype)t),
               n, human((double)e, h1, sizeof(h1)), human((double)b, h2, sizeof(h2)), (unsigned long long)b);
        first = 0;
    }
    info_vocab(m);
    if (tensors) {
        printf("\n%-32s %-5s %-14s %4s %12s %12s\n", "tensor", "dtype", "shape", "file", "offset", "bytes");
        for (int i = 0; i < m->n_tensors; i++) {
            const model_tensor *t = &m->tensors[i];
            char shape[64] = "";
            for (int d = 0; d < t->n_dims; d++)
                snprintf(shape + strlen(shape), sizeof(shape) - strlen(shape), "%s%lld", d ? "x" : "", (long long)t->ne[d]);
            printf("%-32s %-5s %-14s %4d %12llu %12llu\n", t->name, bench_dtype_name(t->dtype), shape, t->file,
                   (unsigned long long)t->offset, (unsigned long long)t->nbytes);
        }
    }
    int rc = 0;
    if (check) {
        int bad = check_weights(m, err, sizeof(err));
        if (bad < 0) {
            fprintf(stderr, "bench model info: --check: %s\n", err);
            rc = 1;
        } else if (bad) {
            printf("%-12s %d of %d tensors hold NaN or Inf\n", "check", bad, m->n_tensors);
            rc = 1;
        } else
            printf("%-12s %d tensors, every weight finite\n", "check", m->n_tensors);
    }
    model_free(m);
    return rc;
}

/* ======================= the formats bench writes (model_writers) ======================= */

/* The dtype a format holds when it holds one only (llama2c: f32), or -1. */
static int writer_only_dtype(const model_writer *w) {
    int only = -1;
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++)
        if (model_writer_holds(w, (bench_dtype)t)) {
            if (only >= 0) return -1;
            only = t;
        }
    return only;
}

/* The formats' names for which has(row) holds, sep between them. */
static const char *writer_names_if(char *buf, size_t len, const char *sep, int (*has)(const model_writer *)) {
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (const model_writer *w = model_writers; w->write; w++) {
        if (!has(w) || used >= len) continue;
        int n = snprintf(buf + used, used < len ? len - used : 0, "%s%s", used ? sep : "", model_writer_name(w));
        if (n > 0) used += (size_t)n;
    }
    return buf;
}

static int writer_shards(const model_writer *w) { return w->can_shard; }

/* One entry per format, for convert's and synth's help: the ending that picks it (path is
 * what the help calls the output), what it writes, the dtypes it holds, where its vocabulary
 * goes, and (with shard, the help's words for it) whether it shards. The rows with an ending
 * first; the folder's last ("anything else"). */
static void writers_help(FILE *f, const char *path, const char *shard) {
    for (int folder = 0; folder < 2; folder++)
        for (const model_writer *w = model_writers; w->write; w++) {
            if ((w->suffix == NULL) != folder) continue;
            char head[64], dts[160], example[64], beside[96], vocab[128] = "";
            if (w->suffix) snprintf(head, sizeof head, "%s ending in %s", path, w->suffix);
            else snprintf(head, sizeof head, "anything else");
            snprintf(example, sizeof example, "%s%s", path, w->suffix ? w->suffix : "");
            if (w->vocab_path && !w->vocab_path(example, beside, sizeof beside))
                snprintf(vocab, sizeof vocab, "; the vocabulary as %s", beside);
            fprintf(f, "  %-20s  %s: %s\n  %-20s  (%s%s%s)\n", head, model_writer_name(w), w->about, "",
                    model_writer_dtype_text(w, dts, sizeof dts), vocab, w->can_shard && shard ? shard : "");
        }
}

/* ======================= convert ======================= */

static void convert_usage(FILE *f) {
    char dtypes[64], shard[64], only[128] = "";
    synth_dtype_names(dtypes, sizeof dtypes, "|", "|");
    writer_names_if(shard, sizeof shard, ", ", writer_shards);
    for (const model_writer *w = model_writers; w->write; w++) {
        int t = writer_only_dtype(w);
        size_t used = strlen(only);
        if (t >= 0)
            snprintf(only + used, sizeof only - used, "; %s for %s", bench_dtype_name((bench_dtype)t),
                     w->suffix ? w->suffix : "a folder");
    }
    fprintf(f,
            "usage: bench model convert IN OUT [--dtype %s] [--tokenizer F] [--shard SIZE]\n\n"
            "Writes the model IN (any format bench reads) as OUT, in the format OUT's name says:\n", dtypes);
    writers_help(f, "OUT", "; --shard splits it");
    fprintf(f,
            "Files are written under a temporary name and renamed: a failed conversion leaves nothing.\n\n"
            "  --dtype T      dtype of the 2-D weights (default: as in IN%s). Norms stay f32.\n"
            "                 q8_0 and q4_0 need rows of whole 32-element blocks; other rows are written as f16,\n"
            "                 as llama.cpp's quantizer does.\n"
            "  --tokenizer F  a llama2.c tokenizer.bin: the vocabulary to write (IN's own otherwise)\n"
            "  --shard SIZE   %s only: split into files of at most SIZE (e.g. 2g, 500m)\n\n"
            "examples:\n"
            "  bench model convert ../shared/models/stories260K.bin stories260K.gguf --tokenizer ../shared/models/tok512.bin\n"
            "  bench model convert stories260K.gguf stories260K-hf --dtype bf16\n"
            "  bench model convert stories260K-hf stories260K-back.bin\n", only, shard);
}

typedef struct convert_ctx {
    const model *m;
    const model_tensor *out;    /* (m->n_tensors) the tensors as written: same order, dtype maybe changed */
    int *fds;                   /* (m->n_files) */
    void *scratch;              /* a source tensor's bytes, when it is converted */
    size_t scratch_len;
    tp_pool *pool;
} convert_ctx;

static int pread_full(int fd, void *buf, uint64_t n, uint64_t off) {
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO; /* the file shrank since it was opened */
            return -1;
        }
        p += r;
        n -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

typedef struct convert_job {
    const uint8_t *src;
    uint8_t *dst;
    bench_dtype sdt, ddt;
    int64_t cols, rows;
    size_t srow, drow;          /* bytes per row in each dtype */
    int n_tasks;
    _Atomic int64_t first_bad;  /* quantizing: the first element (row-major) that is NaN or Inf, or INT64_MAX */
} convert_job;

/* *at = min(*at, v) */
static void atomic_min64(_Atomic int64_t *at, int64_t v) {
    int64_t cur = atomic_load(at);
    while (v < cur && !atomic_compare_exchange_weak(at, &cur, v)) {}
}

#define CONVERT_CHUNK 512 /* elements at a time through f32; a multiple of the Q8_0 block */

static void convert_task(void *arg, int task, int n_tasks) {
    convert_job *j = arg;
    int64_t r0 = j->rows * task / n_tasks, r1 = j->rows * (task + 1) / n_tasks;
    size_t sbe = bench_dtype_block_elems(j->sdt), sbb = bench_dtype_block_bytes(j->sdt);
    size_t dbe = bench_dtype_block_elems(j->ddt), dbb = bench_dtype_block_bytes(j->ddt);
    float buf[CONVERT_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *s = j->src + (size_t)r * j->srow;
        uint8_t *d = j->dst + (size_t)r * j->drow;
        for (int64_t c0 = 0; c0 < j->cols; c0 += CONVERT_CHUNK) {
            int n = (int)(j->cols - c0 < CONVERT_CHUNK ? j->cols - c0 : CONVERT_CHUNK);
            kn_dequant_row(j->sdt, s + (size_t)c0 / sbe * sbb, buf, n);
            if (bench_dtype_is_quant(j->ddt))
                for (int k = 0; k < n; k++)
                    if (!isfinite(buf[k])) {
                        atomic_min64(&j->first_bad, r * j->cols + c0 + k);
                        break;
                    }
            synth_quant_row(j->ddt, buf, d + (size_t)c0 / dbe * dbb, n);
        }
    }
}

static int convert_fill(void *user, int i, void *dst, uint64_t nbytes, char *err, size_t errlen) {
    convert_ctx *c = user;
    const model_tensor *st = &c->m->tensors[i], *dt = &c->out[i];
    const char *file = c->m->files[st->file];
    if (nbytes != dt->nbytes)
        return bench_errf(err, errlen, "convert: tensor %s: the writer asked for %llu bytes, expected %llu", dt->name,
                          (unsigned long long)nbytes, (unsigned long long)dt->nbytes);
    void *src = dst;
    if (st->dtype != dt->dtype) {
        if (st->nbytes > c->scratch_len) {
            void *p = realloc(c->scratch, (size_t)st->nbytes);
            if (!p) return bench_errf(err, errlen, "%s: out of memory for tensor %s (%llu bytes)", file, st->name,
                                      (unsigned long long)st->nbytes);
            c->scratch = p;
            c->scratch_len = (size_t)st->nbytes;
        }
        src = c->scratch;
    }
    if (pread_full(c->fds[st->file], src, st->nbytes, st->offset))
        return bench_errf(err, errlen, "%s: reading tensor %s (%llu bytes at offset %llu): %s", file, st->name,
                          (unsigned long long)st->nbytes, (unsigned long long)st->offset, strerror(errno));
    if (src == dst) return 0;
    int64_t rows = model_tensor_nelems(st->n_dims, st->ne) / st->ne[0];
    convert_job job = {.src = src, .dst = dst, .sdt = st->dtype, .ddt = dt->dtype, .cols = st->ne[0], .rows = rows,
                       .srow = bench_dtype_row_bytes(st->dtype, st->ne[0]), .drow = bench_dtype_row_bytes(dt->dtype, st->ne[0])};
    atomic_init(&job.first_bad, INT64_MAX);
    int tasks = rows < 64 ? 1 : 4 * tp_threads(c->pool);
    tp_run(c->pool, convert_task, &job, tasks);
    int64_t bad = atomic_load(&job.first_bad);
    if (bad != INT64_MAX) {
        /* a block's scale is its largest |x|: NaN or Inf there makes the whole block
         * zeros (or garbage), silently; refused instead */
        int64_t be = (int64_t)bench_dtype_block_elems(dt->dtype), row = bad / job.cols, col = bad % job.cols;
        return bench_errf(err, errlen, "%s: tensor %s: block %lld (row %lld, elements %lld..%lld) holds NaN or Inf (element %lld); "
                          "%s would not keep it: refused", file, st->name, (long long)(bad / be), (long long)row,
                          (long long)(col / be * be), (long long)(col / be * be + be - 1), (long long)col, bench_dtype_name(dt->dtype));
    }
    return 0;
}

static int model_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *tok = NULL, *dtype_s = NULL, *shard_s = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { convert_usage(stdout); return 0; }
        else if (!strcmp(a, "--dtype") && v) dtype_s = v, i++;
        else if (!strcmp(a, "--tokenizer") && v) tok = v, i++;
        else if (!strcmp(a, "--shard") && v) shard_s = v, i++;
        else if (a[0] != '-' && !in) in = a;
        else if (a[0] != '-' && !out) out = a;
        else {
            fprintf(stderr, "bench model convert: unknown or incomplete argument \"%s\"\n", a);
            convert_usage(stderr);
            return 2;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "bench model convert: expected IN and OUT\n");
        convert_usage(stderr);
        return 2;
    }
    int want = -1;
    if (dtype_s && ((want = bench_dtype_parse(dtype_s)) < 0 || !bench_dtype_writable((bench_dtype)want))) {
        char dtypes[64];
        synth_dtype_names(dtypes, sizeof dtypes, ", ", " or ");
        fprintf(stderr, "bench model convert: --dtype %s: expected %s\n", dtype_s, dtypes);
        return 2;
    }
    uint64_t shard = 0;
    if (shard_s && ut_parse_size(shard_s, &shard)) {
        fprintf(stderr, "bench model convert: --shard %s: expected a size such as 2g or 500m\n", shard_s);
        return 2;
    }
    const model_writer *w = model_writer_for_path(out);
    char why[256];
    if (shard_s && !w->can_shard) {
        fprintf(stderr, "bench model convert: --shard applies to %s output only, not %s (%s)\n",
                writer_names_if(why, sizeof why, ", ", writer_shards), out, model_writer_name(w));
        return 2;
    }
    if (want >= 0 && !model_writer_holds(w, (bench_dtype)want)) {
        fprintf(stderr, "bench model convert: %s: %s\n", out, model_writer_refusal(w, (bench_dtype)want, why, sizeof why));
        return 2;
    }
    if (want < 0) want = writer_only_dtype(w); /* a format of one dtype: everything in it */

    int rc = 1;
    char err[1024], h1[32];
    model *m = NULL;
    model_tensor *ot = NULL;
    convert_ctx cx = {0};
    double t0 = now_s();
    if (model_open(in, tok, &m, err, sizeof(err))) {
        fprintf(stderr, "bench model convert: %s\n", err);
        return 1;
    }
    ot = calloc((size_t)m->n_tensors, sizeof(*ot));
    cx.fds = malloc((size_t)(m->n_files ? m->n_files : 1) * sizeof(int));
    if (!ot || !cx.fds) {
        fprintf(stderr, "bench model convert: out of memory\n");
        goto done;
    }
    for (int f = 0; f < m->n_files; f++) cx.fds[f] = -1;
    int fallback = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        ot[i] = m->tensors[i]; /* shallow: the name stays m's */
        int64_t cols = ot[i].ne[0], rows = model_tensor_nelems(ot[i].n_dims, ot[i].ne) / cols;
        if (want >= 0 && rows > 1) {
            ot[i].dtype = synth_weight_dtype((bench_dtype)want, cols);
            fallback += ot[i].dtype != (bench_dtype)want;
        } else if (rows == 1 && ot[i].dtype != BENCH_F32)
            ot[i].dtype = BENCH_F32; /* norms are f32 in every format we write */
        ot[i].nbytes = (uint64_t)rows * bench_dtype_row_bytes(ot[i].dtype, cols);
        if (!model_writer_holds(w, ot[i].dtype)) {
            fprintf(stderr, "bench model convert: %s: tensor %s: %s (give --dtype, one of them)\n", in, ot[i].name,
                    model_writer_refusal(w, ot[i].dtype, why, sizeof why));
            goto done;
        }
    }
    if (fallback)
        fprintf(stderr, "bench model convert: note: %d tensors have rows that are not whole %s blocks of 32; "
                        "written as f16\n", fallback, dtype_s);
    for (int f = 0; f < m->n_files; f++)
        if ((cx.fds[f] = open(m->files[f], O_RDONLY | O_CLOEXEC)) < 0) {
            fprintf(stderr, "bench model convert: %s: %s\n", m->files[f], strerror(errno));
            goto done;
        }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (!(cx.pool = tp_create(ncpu > 0 ? (int)ncpu : 1))) {
        fprintf(stderr, "bench model convert: cannot start threads\n");
        goto done;
    }
    cx.m = m;
    cx.out = ot;
    /* Write what the file declares, not what the engine would allow. */
    model_config cfg = m->cfg;
    cfg.seq_len = cfg.seq_len_header > 0 ? cfg.seq_len_header : cfg.seq_len;
    model_write_src src = {.name = m->name, .cfg = &cfg, .vocab = &m->vocab, .n_tensors = m->n_tensors,
                           .tensors = ot, .fill = convert_fill, .user = &cx};
    if (!m->vocab.n)
        fprintf(stderr, "bench model convert: note: %s has no vocabulary; %s will have none (give --tokenizer)\n", in, out);
    if (m->vocab.normalize)
        fprintf(stderr, "bench model convert: note: %s's tokenizer normalizes text to %s; %s will not (its format has no "
                "field for it), so its ids can differ on text not in that form\n", in, model_norm_name(m->vocab.normalize), out);
    if (w->lost && w->lost(&src, err, sizeof(err))[0]) fprintf(stderr, "bench model convert: note: %s\n", err);
    if (w->write(out, &src, shard, err, sizeof(err))) {
        fprintf(stderr, "bench model convert: %s\n", err);
        goto done;
    }
    char tokpath[4096] = "";
    if (w->vocab_path && m->vocab.n) { /* the vocabulary beside the model */
        if (w->vocab_path(out, tokpath, sizeof(tokpath)) || w->vocab_write(tokpath, &m->vocab, err, sizeof(err))) {
            fprintf(stderr, "bench model convert: note: the vocabulary was not written: %s\n", err);
            tokpath[0] = '\0';
        }
    }
    uint64_t bytes = 0;
    for (int i = 0; i < m->n_tensors; i++) bytes += ot[i].nbytes;
    double dt = now_s() - t0;
    printf("wrote %s: %s, %d tensors, %sB of weights, in %.2f s\n", out, model_writer_name(w),
           m->n_tensors, human((double)bytes, h1, sizeof(h1)), dt);
    if (tokpath[0]) printf("wrote %s: vocabulary of %d tokens\n", tokpath, m->vocab.n);
    rc = 0;
done:
    for (int f = 0; cx.fds && f < m->n_files; f++)
        if (cx.fds[f] >= 0) close(cx.fds[f]);
    free(cx.fds);
    free(cx.scratch);
    tp_destroy(cx.pool);
    free(ot);
    model_free(m);
    return rc;
}

/* ======================= synth ======================= */

static void synth_usage(FILE *f) {
    char dtypes[64], formats[128], rule[160];
    synth_dtype_names(dtypes, sizeof dtypes, "|", "|");
    fprintf(f,
            "usage: bench model synth --shape NAME [--dtype %s] [--format %s]\n"
            "                         [--seed S] -o PATH\n\n"
            "Writes a deterministic model of a named shape (bench model shapes lists them), like vLLM's\n"
            "--load-format dummy: the compute and memory behaviour of that shape, with no download.\n"
            "Same shape, dtype, format and seed -> the same bytes. Values are uniform, scaled by fan-in\n"
            "so activations stay finite however long it decodes; norms are 1. It carries a synthetic\n"
            "SentencePiece-style vocabulary (byte fallback, so any text encodes).\n\n"
            "The format: --format F, or else from PATH (%s):\n", dtypes, model_writer_names(formats, sizeof formats, "|"),
            model_writer_suffix_rule(rule, sizeof rule));
    writers_help(f, "PATH", NULL);
    fprintf(f,
            "\n"
            "  --dtype T    dtype of the 2-D weights (default f32); norms stay f32. q8_0 and q4_0 rows that\n"
            "               are not whole blocks of 32 are written as f16.\n"
            "  --format F   %s (default: from PATH, above)\n"
            "  --seed S     default 0\n\n"
            "examples:\n"
            "  bench model synth --shape tiny --dtype f32 --format gguf -o tiny.gguf\n"
            "  bench model synth --shape llama-110m --dtype f16 --format safetensors -o llama-110m-f16\n"
            "  bench model synth --shape tinyllama-1.1b --dtype q8_0 --seed 7 -o tinyllama-q8_0.gguf\n", formats);
}

static int model_synth(int argc, char **argv) {
    synth_spec spec = {.dtype = BENCH_F32};
    const char *out = NULL, *dtype_s = "f32";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { synth_usage(stdout); return 0; }
        else if (!strcmp(a, "--shape") && v) spec.shape = v, i++;
        else if (!strcmp(a, "--dtype") && v) dtype_s = v, i++;
        else if (!strcmp(a, "--format") && v) spec.format = v, i++;
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) out = v, i++;
        else if (!strcmp(a, "--seed") && v) {
            char *end;
            errno = 0;
            spec.seed = strtoull(v, &end, 0);
            if (errno || *end || !*v || v[0] == '-') {
                fprintf(stderr, "bench model synth: --seed %s: expected a non-negative integer\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "bench model synth: unknown or incomplete argument \"%s\"\n", a);
            synth_usage(stderr);
            return 2;
        }
    }
    if (!spec.shape || !out) {
        fprintf(stderr, "bench model synth: expected --shape NAME and -o PATH\n");
        synth_usage(stderr);
        return 2;
    }
    int dt = bench_dtype_parse(dtype_s);
    if (dt < 0 || !bench_dtype_writable((bench_dtype)dt)) {
        char dtypes[64];
        synth_dtype_names(dtypes, sizeof dtypes, ", ", " or ");
        fprintf(stderr, "bench model synth: --dtype %s: expected %s\n", dtype_s, dtypes);
        return 2;
    }
    spec.dtype = (bench_dtype)dt;
    if (!spec.format) spec.format = model_writer_name(model_writer_for_path(out));
    const synth_shape *sh = synth_find_shape(spec.shape);
    char err[1024], h1[32], h2[32];
    double t0 = now_s();
    if (synth_write(&spec, out, err, sizeof(err))) {
        fprintf(stderr, "bench model synth: %s\n", err);
        return 1;
    }
    double dt_s = now_s() - t0;
    /* Reopen: the report states what was written, as any reader sees it. */
    model *m = NULL;
    char tok[4096] = "";
    const model_writer *w = model_writer_find(spec.format); /* synth_write took the name */
    if (w->vocab_path) w->vocab_path(out, tok, sizeof(tok));
    if (model_open(out, tok[0] ? tok : NULL, &m, err, sizeof(err))) {
        fprintf(stderr, "bench model synth: wrote %s, but it does not reopen: %s\n", out, err);
        return 1;
    }
    uint64_t bytes = model_weight_bytes(m);
    printf("wrote %s: shape %s, %s, %s, seed %llu, %s params, %sB in %.2f s (%.0f MB/s)\n", out, sh->name,
           bench_dtype_name(spec.dtype), spec.format, (unsigned long long)spec.seed,
           human((double)model_param_count(m), h1, sizeof(h1)), human((double)bytes, h2, sizeof(h2)), dt_s,
           dt_s > 0 ? (double)bytes / dt_s / 1e6 : 0.0);
    if (tok[0]) printf("wrote %s: vocabulary of %d tokens\n", tok, m->vocab.n);
    model_free(m);
    return 0;
}

/* ======================= shapes ======================= */

static uint64_t shape_params(const synth_shape *s) {
    const model_config *c = &s->cfg;
    uint64_t d = (uint64_t)c->dim, kv = (uint64_t)c->n_kv_heads * (d / (uint64_t)c->n_heads), h = (uint64_t)c->hidden_dim;
    uint64_t layer = 2 * d + 2 * d * d + 2 * d * kv + 3 * d * h;
    return (uint64_t)c->vocab_size * d * (s->tied ? 1 : 2) + d + (uint64_t)c->n_layers * layer;
}

static int model_shapes(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench model shapes\n\nLists the shapes bench model synth writes, with their parameters and f32 size.\n\n"
                   "example:\n  bench model shapes\n");
            return 0;
        }
        fprintf(stderr, "bench model shapes: unknown argument \"%s\"\n", argv[i]);
        return 2;
    }
    char h1[32], h2[32];
    printf("%-15s %5s %6s %6s %5s %3s %7s %6s %7s %5s %8s %9s\n", "shape", "dim", "hidden", "layers", "heads", "kv",
           "vocab", "ctx", "theta", "tied", "params", "f32");
    for (const synth_shape *s = synth_shapes; s->name; s++) {
        const model_config *c = &s->cfg;
        uint64_t p = shape_params(s);
        printf("%-15s %5d %6d %6d %5d %3d %7d %6d %7g %5s %8s %8sB\n", s->name, c->dim, c->hidden_dim, c->n_layers,
               c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len, c->rope_theta, s->tied ? "yes" : "no",
               human((double)p, h1, sizeof(h1)), human((double)p * 4, h2, sizeof(h2)));
    }
    printf("\n");
    for (const synth_shape *s = synth_shapes; s->name; s++) printf("%-15s %s\n", s->name, s->about);
    return 0;
}

/* ======================= dispatch ======================= */

int cmd_model(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(sub, "info")) return model_info(argc - 1, argv + 1);
    if (!strcmp(sub, "convert")) return model_convert(argc - 1, argv + 1);
    if (!strcmp(sub, "synth")) return model_synth(argc - 1, argv + 1);
    if (!strcmp(sub, "shapes")) return model_shapes(argc - 1, argv + 1);
    fprintf(stderr, "bench model: unknown subcommand \"%s\" (have: info, convert, synth, shapes)\n\n", sub);
    usage(stderr);
    return 2;
}
