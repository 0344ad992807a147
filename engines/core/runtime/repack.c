#include "repack.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engines/core/compute/kernels.h"

typedef struct rp_job {
    const void *src;
    void *dst;
    int rows, cols;
} rp_job;

/* Task t of n rearranges its share of the rows (copying them first where dst is a copy). */
static void rp_task(void *arg, int t, int n) {
    const rp_job *j = arg;
    const int r0 = (int)((int64_t)j->rows * t / n), r1 = (int)((int64_t)j->rows * (t + 1) / n);
    const size_t rb = bench_dtype_row_bytes(BENCH_Q4_0, j->cols);
    char *dst = (char *)j->dst + (size_t)r0 * rb;
    if (r1 <= r0) return;
    if (j->dst != j->src) memcpy(dst, (const char *)j->src + (size_t)r0 * rb, (size_t)(r1 - r0) * rb);
    kn_repack_rows(dst, r1 - r0, j->cols);
}

static void rp_run(const bench_host *host, rp_job *j) {
    if (host && host->parallel_for && host->n_threads > 1) host->parallel_for(host->pool, rp_task, j, host->n_threads);
    else rp_task(j, 0, 1);
}

/* An anonymous copy of m, rearranged; the file pages it came from are let go. 0, or -1. */
static int rp_copy(tf_matrix *m, size_t bytes, const bench_host *host, repack *r) {
    void **c = realloc(r->copies, (size_t)(r->n_copies + 1) * sizeof *c);
    if (c) r->copies = c;
    size_t *cl = c ? realloc(r->copy_len, (size_t)(r->n_copies + 1) * sizeof *cl) : NULL;
    if (cl) r->copy_len = cl;
    if (!c || !cl) return -1;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    if (host && host->name_region) host->name_region(host, p, bytes, BENCH_REGION_WEIGHTS);
    rp_job j = {m->data, p, m->rows, m->cols};
    rp_run(host, &j);
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = ((uintptr_t)m->data + page - 1) & ~(page - 1), hi = ((uintptr_t)m->data + bytes) & ~(page - 1);
    /* whole pages of this matrix only. Where the page cache holds the file in large folios
     * (2 MiB), a later read of a neighbouring tensor (a norm) maps its whole folio again, so
     * part of what is dropped here comes back as RssFile (docs/PERFORMANCE.md) */
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
    r->copies[r->n_copies] = p;
    r->copy_len[r->n_copies++] = bytes;
    r->copied += bytes;
    m->data = p;
    return 0;
}

/* One matrix: in place where its memory is private (made writable for it where read-only, and
 * read-only again), into a copy where shared; as it is where the loader does not say
 * (loader.h memory_kind). */
static void rp_matrix(tf_matrix *m, const bench_loader *loader, const bench_host *host, repack *r) {
    const size_t bytes = (size_t)m->rows * bench_dtype_row_bytes(BENCH_Q4_0, m->cols);
    const bench_loader_memory kind = bench_loader_memory_kind(loader, m->data, bytes);
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)m->data & ~(page - 1), hi = ((uintptr_t)m->data + bytes + page - 1) & ~(page - 1);
    if (kind == BENCH_LOADER_MEM_SHARED) {
        if (rp_copy(m, bytes, host, r)) {
            r->skipped++;
            return;
        }
    } else if (kind == BENCH_LOADER_MEM_UNKNOWN ||
               (kind == BENCH_LOADER_MEM_PRIVATE_RO && mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE))) {
        r->skipped++;
        return;
    } else {
        rp_job j = {m->data, (void *)(uintptr_t)m->data, m->rows, m->cols};
        rp_run(host, &j);
        if (kind == BENCH_LOADER_MEM_PRIVATE_RO) (void)mprotect((void *)lo, hi - lo, PROT_READ); /* as the loader left it */
    }
    m->dtype = KN_Q4_0_R8;
    r->matrices++;
    r->bytes += bytes;
}

/* Whether m is worth rearranging: Q4_0 with at least one group of 8 blocks a row, and not the
 * embedding's bytes (which are read row by row in the file's layout). */
static int rp_wanted(const tf_weights *w, const tf_matrix *m) {
    return m->dtype == BENCH_Q4_0 && m->cols >= 256 && m->data != w->tok_embd.data;
}

/* After m was rearranged: any other matrix bound to the same bytes (a file may bind one tensor
 * twice) now reads them as m does, and is not rearranged a second time. */
static void rp_follow(tf_weights *w, int n_layers, const void *old, const tf_matrix *m) {
    for (int l = 0; l < n_layers; l++)
        for (int i = 0; i < TF_LAYER_MATRICES; i++) {
            tf_matrix *o = tf_layer_matrix(&w->layers[l], i);
            if (o != m && o->data == old) *o = *m;
        }
    if (&w->output != m && w->output.data == old) w->output = *m;
}

/* m, where it is worth it; any matrix bound to the same bytes follows it. */
static void rp_one(tf_weights *w, int n_layers, tf_matrix *m, const bench_loader *loader, const bench_host *host,
                   repack *r) {
    if (!rp_wanted(w, m)) return;
    const void *old = m->data;
    rp_matrix(m, loader, host, r);
    if (m->dtype == KN_Q4_0_R8) rp_follow(w, n_layers, old, m);
}

void repack_weights(tf_weights *w, int n_layers, const bench_loader *loader, const bench_host *host, repack *r) {
    memset(r, 0, sizeof *r);
    if (!kn_repacks(BENCH_Q4_0)) return;
    for (int l = 0; l < n_layers; l++)
        for (int i = 0; i < TF_LAYER_MATRICES; i++)
            rp_one(w, n_layers, tf_layer_matrix(&w->layers[l], i), loader, host, r);
    rp_one(w, n_layers, &w->output, loader, host, r);
}

void repack_release(repack *r) {
    for (int i = 0; i < r->n_copies; i++) munmap(r->copies[i], r->copy_len[i]);
    free(r->copies);
    free(r->copy_len);
    memset(r, 0, sizeof *r);
}
