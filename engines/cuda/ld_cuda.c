#include "ld_cuda.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/cuda/cu_util.h"

int ldc_init(ldc *c, const char *mod, const bench_host *host, char *err, size_t errlen) {
    memset(c, 0, sizeof(*c));
    c->mod = mod;
    if (!cu_probe(err, errlen)) return -1;
    if (!host || !host->stream)
        return bench_errf(err, errlen, "%s: built for CUDA: run it with the cuda device (--device cuda)", mod);
    c->stream = host->stream;
    c->host = host;
    return 0;
}

int ldc_begin(ldc *c, const char *const *files, int n_files, const bench_tensor_ref *t, int n, const void **data,
              char *err, size_t errlen) {
    c->t0_ns = cu_now_ns();
    c->fds = malloc((size_t)(n_files > 0 ? n_files : 1) * sizeof(int));
    c->file_bytes = calloc((size_t)(n_files > 0 ? n_files : 1), sizeof(uint64_t));
    c->dst = malloc((size_t)(n > 0 ? n : 1) * sizeof(uint64_t));
    uint64_t *nb = malloc((size_t)(n > 0 ? n : 1) * sizeof(uint64_t));
    if (!c->fds || !c->file_bytes || !c->dst || !nb) {
        free(nb);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "%s: out of memory", c->mod);
    }
    for (int f = 0; f < n_files; f++) c->fds[f] = -1;
    c->n_files = n_files;
    for (int f = 0; f < n_files; f++) {
        struct stat st;
        if ((c->fds[f] = bench_open_model_file(c->host, files[f], O_RDONLY, err, errlen)) < 0) {
            free(nb);
            return -BENCH_ERR_IO;
        }
        if (fstat(c->fds[f], &st)) {
            free(nb);
            return bench_errf(err, errlen, "%s: %s", files[f], strerror(errno));
        }
        c->file_bytes[f] = (uint64_t)st.st_size;
    }
    for (int i = 0; i < n; i++) {
        if (t[i].file < 0 || t[i].file >= n_files || t[i].offset > c->file_bytes[t[i].file] ||
            t[i].nbytes > c->file_bytes[t[i].file] - t[i].offset) {
            int f = t[i].file >= 0 && t[i].file < n_files ? t[i].file : 0;
            bench_errf(err, errlen, "%s: tensor %s [%llu, +%llu) lies past the end of the file (%llu bytes)",
                       n_files ? files[f] : "?", t[i].name, (unsigned long long)t[i].offset,
                       (unsigned long long)t[i].nbytes, (unsigned long long)c->file_bytes[f]);
            free(nb);
            return -1;
        }
        nb[i] = t[i].nbytes;
    }
    c->dev_bytes = stg_layout(nb, n, LDC_ALIGN, c->dst);
    free(nb);
    if (!c->dev_bytes) return bench_errf(err, errlen, "%s: the tensors' sizes overflow", c->mod);
    cudaError_t e = cudaMalloc(&c->dev, (size_t)c->dev_bytes);
    if (e != cudaSuccess) {
        c->dev = NULL;
        char what[128];
        snprintf(what, sizeof(what), "%s: cudaMalloc of %llu bytes for the weights", c->mod, (unsigned long long)c->dev_bytes);
        return cu_fail(err, errlen, what, e);
    }
    for (int i = 0; i < n; i++) data[i] = (const uint8_t *)c->dev + c->dst[i];
    return 0;
}

stg_piece *ldc_pieces(const ldc *c, const bench_tensor_ref *t, int n) {
    stg_piece *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(*p));
    for (int i = 0; p && i < n; i++) p[i] = (stg_piece){t[i].file, t[i].offset, t[i].nbytes, c->dst[i]};
    return p;
}

int ldc_read(ldc *c, int f, const char *path, void *buf, uint64_t off, size_t len, char *err, size_t errlen) {
    uint64_t t0 = cu_now_ns();
    uint8_t *dst = buf;
    while (len) {
        ssize_t got = pread(c->fds[f], dst, len, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return bench_errf(err, errlen, "%s: read at offset %llu: %s", path, (unsigned long long)off,
                              got < 0 ? strerror(errno) : "unexpected end of file");
        c->read_calls++;
        c->bytes_read += (uint64_t)got;
        dst += got;
        off += (uint64_t)got;
        len -= (size_t)got;
    }
    c->read_ns += cu_now_ns() - t0;
    return 0;
}

int ldc_end(ldc *c, char *err, size_t errlen) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)c->stream);
    for (int f = 0; c->fds && f < c->n_files; f++)
        if (c->fds[f] >= 0) close(c->fds[f]), c->fds[f] = -1;
    c->load_ns = cu_now_ns() - c->t0_ns;
    return e == cudaSuccess ? 0 : cu_fail(err, errlen, c->mod, e);
}

void ldc_counters(const ldc *c, const bench_counter_sink *s) {
    double ms = (double)c->load_ns * 1e-6;
    bench_emit(s, "load_ms", "ms", ms);
    bench_emit(s, "h2d_bytes", "B", (double)c->h2d_bytes);
    bench_emit(s, "h2d_gb_s", "GB/s", ms > 0 ? (double)c->h2d_bytes / (ms * 1e6) : 0);
    bench_emit(s, "pinned_bytes", "B", (double)c->pinned_bytes);
    bench_emit(s, "bytes_read", "B", (double)c->bytes_read);
    bench_emit_as(s, "read_calls", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)c->read_calls);
    bench_emit(s, "read_ms", "ms", (double)c->read_ns * 1e-6);
    bench_emit(s, "bytes_copied", "B", (double)c->h2d_bytes);
    bench_emit(s, "device_bytes", "B", (double)c->dev_bytes);
    bench_emit_as(s, "zero_copy_tensors", "count", BENCH_CTR_EXACT, BENCH_BETTER_HIGHER, 0);
}

void ldc_close(ldc *c) {
    if (!c) return;
    if (c->stream) cudaStreamSynchronize((cudaStream_t)c->stream);
    for (int f = 0; c->fds && f < c->n_files; f++)
        if (c->fds[f] >= 0) close(c->fds[f]);
    if (c->dev) cudaFree(c->dev);
    free(c->fds);
    free(c->file_bytes);
    free(c->dst);
    memset(c, 0, sizeof(*c));
}
