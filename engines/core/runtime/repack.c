#include "repack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engines/core/compute/kernels.h"

enum { RP_SHARED, RP_PRIVATE, RP_PRIVATE_RO, RP_UNKNOWN };

/* How [p, p + len) is mapped, from /proc/self/maps: private (writable already, or read-only),
 * shared, or unknown (a gap, or the maps unreadable). Read per matrix: mprotect below splits
 * mappings as it goes. */
static int rp_mapping(const void *p, size_t len) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return RP_UNKNOWN;
    uintptr_t at = (uintptr_t)p, end = at + len;
    int kind = RP_PRIVATE;
    char line[512];
    while (at < end && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= at) continue;
        if (lo > at || perms[0] != 'r') { kind = RP_UNKNOWN; break; }
        if (perms[3] != 'p') kind = RP_SHARED;
        else if (perms[1] != 'w' && kind == RP_PRIVATE) kind = RP_PRIVATE_RO;
        at = hi;
    }
    fclose(f);
    return at >= end ? kind : RP_UNKNOWN;
}

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
 * read-only again), into a copy where shared. */
static void rp_matrix(tf_matrix *m, const bench_host *host, repack *r) {
    const size_t bytes = (size_t)m->rows * bench_dtype_row_bytes(BENCH_Q4_0, m->cols);
    const int kind = rp_mapping(m->data, bytes);
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)m->data & ~(page - 1), hi = ((uintptr_t)m->data + bytes + page - 1) & ~(page - 1);
    if (kind == RP_SHARED) {
        if (rp_copy(m, bytes, host, r)) {
            r->skipped++;
            return;
        }
    } else if (kind == RP_UNKNOWN || (kind == RP_PRIVATE_RO && mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE))) {
        r->skipped++;
        return;
    } else {
        rp_job j = {m->data, (void *)(uintptr_t)m->data, m->rows, m->cols};
        rp_run(host, &j);
        if (kind == RP_PRIVATE_RO) (void)mprotect((void *)lo, hi - lo, PROT_READ); /* as the loader left it */
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
    for (int l = 0; l < n_layers; l++) {
        tf_layer *L = &w->layers[l];
        tf_matrix *o[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w1, &L->w2, &L->w3};
        for (int k = 0; k < 7; k++)
            if (o[k] != m && o[k]->data == old) *o[k] = *m;
    }
    if (&w->output != m && w->output.data == old) w->output = *m;
}

void repack_weights(tf_weights *w, int n_layers, const bench_host *host, repack *r) {
    memset(r, 0, sizeof *r);
    if (!kn_repacks(BENCH_Q4_0)) return;
    for (int l = 0; l <= n_layers; l++) {
        tf_matrix *mats[7] = {&w->output};
        int n = 1;
        if (l < n_layers) {
            tf_layer *L = &w->layers[l];
            tf_matrix *lm[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w1, &L->w2, &L->w3};
            memcpy(mats, lm, sizeof lm);
            n = 7;
        }
        for (int i = 0; i < n; i++) {
            if (!rp_wanted(w, mats[i])) continue;
            const void *old = mats[i]->data;
            rp_matrix(mats[i], host, r);
            if (mats[i]->dtype == KN_Q4_0_R8) rp_follow(w, n_layers, old, mats[i]);
        }
    }
}

void repack_release(repack *r) {
    for (int i = 0; i < r->n_copies; i++) munmap(r->copies[i], r->copy_len[i]);
    free(r->copies);
    free(r->copy_len);
    memset(r, 0, sizeof *r);
}
