#include "repack.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engines/core/compute/kernels.h"

typedef struct rp_job {
    bench_dtype dt;     /* BENCH_Q4_0 or BENCH_BF16: the file's */
    bench_dtype to;     /* the layout (kn_repack_dt): KN_Q4_0_R8, KN_Q4_0_G16 or KN_BF16_R16 */
    const void *src;
    void *dst;
    int rows, cols;
    unsigned char *tmp; /* the layouts of groups of rows: a group's bytes a task */
} rp_job;

/* Rows a group in the layout to; 0 where it rearranges each row on its own (KN_Q4_0_R8). */
static int rp_group_rows(bench_dtype to) {
    return to == KN_BF16_R16 ? KN_BF16_R16_ROWS : to == KN_Q4_0_G16 ? KN_Q4_0_G16_ROWS : 0;
}

/* Task t of n rearranges its share of the rows (KN_Q4_0_R8), or of the groups (copying them
 * first where dst is a copy; the last task also copies the rows past the last group). */
static void rp_task(void *arg, int t, int n) {
    const rp_job *j = arg;
    const size_t rb = bench_dtype_row_bytes(j->dt, j->cols);
    int r0 = (int)((int64_t)j->rows * t / n), r1 = (int)((int64_t)j->rows * (t + 1) / n);
    const int gr = rp_group_rows(j->to);
    if (gr) {
        const int groups = j->rows / gr;
        const int g0 = (int)((int64_t)groups * t / n), g1 = (int)((int64_t)groups * (t + 1) / n);
        r0 = g0 * gr;
        r1 = t == n - 1 ? j->rows : g1 * gr;
        if (j->dst != j->src && r1 > r0)
            memcpy((char *)j->dst + (size_t)r0 * rb, (const char *)j->src + (size_t)r0 * rb, (size_t)(r1 - r0) * rb);
        unsigned char *tmp = j->tmp + (size_t)t * gr * rb;
        if (j->to == KN_BF16_R16) kn_bf16_r16_pack(j->dst, j->cols, g0, g1, tmp);
        else kn_q4_0_g16_pack(j->dst, j->cols, g0, g1, tmp);
        return;
    }
    char *dst = (char *)j->dst + (size_t)r0 * rb;
    if (r1 <= r0) return;
    if (j->dst != j->src) memcpy(dst, (const char *)j->src + (size_t)r0 * rb, (size_t)(r1 - r0) * rb);
    kn_repack_rows(dst, r1 - r0, j->cols);
}

/* 0, or -1 (nothing written) where the group buffers cannot be had. */
static int rp_run(const bench_host *host, rp_job *j) {
    const int n = host && host->parallel_for && host->n_threads > 1 ? host->n_threads : 1;
    if (rp_group_rows(j->to)) {
        j->tmp = malloc((size_t)n * rp_group_rows(j->to) * bench_dtype_row_bytes(j->dt, j->cols));
        if (!j->tmp) return -1;
    }
    if (n > 1) host->parallel_for(host->pool, rp_task, j, n);
    else rp_task(j, 0, 1);
    free(j->tmp);
    j->tmp = NULL;
    return 0;
}

/* bytes of anonymous memory at a 2 MiB boundary, advised MADV_HUGEPAGE (THP in madvise mode), as
 * the mmap loader maps a file, whose 2 MiB folios the copies replace. MAP_FAILED where none. */
static void *rp_map(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    char *p = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return p;
    char *a = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (bytes + page - 1) / page * page;
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + bytes + huge > a + len) munmap(a + len, (size_t)(p + bytes + huge - (a + len)));
    (void)madvise(a, len, MADV_HUGEPAGE); /* advice: small pages where it is refused */
    return a;
}

/* Where the copies go: one region for every matrix a shared mapping holds (rp_plan), so that
 * matrices smaller than 2 MiB share huge pages rather than each taking small ones. llama-110m
 * q4_0's are 0.3 to 0.8 MiB: with a map a matrix none of their 45.6 MiB was in huge pages, in
 * one region 44 MiB is (decode 432.4 -> 448.5 tokens/s, 8 rounds, docs/PERFORMANCE.md). A copy
 * that does not fit maps its own. */
typedef struct rp_arena {
    char *next, *end;
} rp_arena;

/* bytes mapped (rp_map), named as weights and recorded in r for repack_release; NULL where none. */
static void *rp_map_kept(size_t bytes, const bench_host *host, repack *r) {
    void **c = realloc(r->copies, (size_t)(r->n_copies + 1) * sizeof *c);
    if (c) r->copies = c;
    size_t *cl = c ? realloc(r->copy_len, (size_t)(r->n_copies + 1) * sizeof *cl) : NULL;
    if (cl) r->copy_len = cl;
    if (!c || !cl) return NULL;
    void *p = rp_map(bytes);
    if (p == MAP_FAILED) return NULL;
    if (host && host->name_region) host->name_region(host, p, bytes, BENCH_REGION_WEIGHTS);
    r->copies[r->n_copies] = p;
    r->copy_len[r->n_copies++] = bytes;
    return p;
}

/* A copy's room in the region: its bytes to a whole cache line. */
static size_t rp_room_bytes(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Room for the next copy of bytes from a, or a mapping of its own; NULL where none. */
static void *rp_room(rp_arena *a, size_t bytes, const bench_host *host, repack *r) {
    const size_t need = rp_room_bytes(bytes);
    if (a->next && (size_t)(a->end - a->next) >= need) {
        void *p = a->next;
        a->next += need;
        return p;
    }
    return rp_map_kept(bytes, host, r);
}

/* An anonymous copy of m, rearranged; the file pages it came from are let go. 0, or -1. */
static int rp_copy(tf_matrix *m, bench_dtype to, size_t bytes, rp_arena *a, const bench_host *host, repack *r) {
    void *p = rp_room(a, bytes, host, r);
    if (!p) return -1;
    rp_job j = {m->dtype, to, m->data, p, m->rows, m->cols, NULL};
    if (rp_run(host, &j)) return -1; /* its room stays with the process until repack_release */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = ((uintptr_t)m->data + page - 1) & ~(page - 1), hi = ((uintptr_t)m->data + bytes) & ~(page - 1);
    /* whole pages of this matrix only. Where the page cache holds the file in large folios
     * (2 MiB), a later read of a neighbouring tensor (a norm) maps its whole folio again, so
     * part of what is dropped here comes back as RssFile (docs/PERFORMANCE.md) */
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
    r->copied += bytes;
    m->data = p;
    return 0;
}

/* One matrix: in place where its memory is private (made writable for it where read-only, and
 * read-only again), into a copy where shared; as it is where the loader does not say
 * (loader.h memory_kind). Every layout is rearranged where that turns page-cache pages into
 * anonymous ones (a copy of a shared mapping, a write to a MAP_PRIVATE one): Q4_0's layouts win
 * more than that can cost; bf16's groups since stop 55 (mmap'd llama-110m bf16 grouped into
 * copies against the file's pages, docs/PERFORMANCE.md: on Zen 4 prefill 1.101x (1.024..1.151),
 * decode 0.917x to 1.054x over six pairings, 8-12 rounds each; on the Zen 5 guest of its section
 * "bf16 grouped at load for its GEMM" prefill 4% and 8% faster, decode 10% faster in one hour and
 * 16% slower in another, as the page cache's 2 MiB folios read 10% faster than anonymous huge
 * pages in some hours and not in others: what a copy costs is the machine's hour, what the
 * groups win is the GEMM's). */
static void rp_matrix(tf_matrix *m, bench_dtype to, rp_arena *a, const bench_loader *loader, const bench_host *host,
                      repack *r) {
    const bench_dtype dt = m->dtype;
    const size_t bytes = (size_t)m->rows * bench_dtype_row_bytes(dt, m->cols);
    const bench_loader_memory kind = bench_loader_memory_kind(loader, m->data, bytes);
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)m->data & ~(page - 1), hi = ((uintptr_t)m->data + bytes + page - 1) & ~(page - 1);
    if (kind == BENCH_LOADER_MEM_SHARED) {
        if (rp_copy(m, to, bytes, a, host, r)) {
            r->skipped++;
            return;
        }
    } else if (kind == BENCH_LOADER_MEM_UNKNOWN ||
               (kind == BENCH_LOADER_MEM_PRIVATE_RO && mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE))) {
        r->skipped++;
        return;
    } else {
        rp_job j = {dt, to, m->data, (void *)(uintptr_t)m->data, m->rows, m->cols, NULL};
        const int failed = rp_run(host, &j);
        if (kind == BENCH_LOADER_MEM_PRIVATE_RO) (void)mprotect((void *)lo, hi - lo, PROT_READ); /* as the loader left it */
        if (failed) {
            r->skipped++;
            return;
        }
    }
    m->dtype = to;
    r->matrices++;
    r->bf16 += dt == BENCH_BF16;
    r->q4_0_g16 += to == KN_Q4_0_G16;
    r->bytes += bytes;
}

/* The layout m is rearranged into (kn_repack_dt), or its own dtype where it is not worth it: Q4_0
 * within rows with at least one group of 8 blocks a row, Q4_0 interleaved and bf16 with one group
 * of rows (q4g16.h, bf16r16.h); never the embedding's bytes (which are read row by row in the
 * file's layout). */
static bench_dtype rp_wanted(const tf_weights *w, const tf_matrix *m) {
    const bench_dtype dt = m->dtype;
    if (m->data == w->tok_embd.data || (dt != BENCH_Q4_0 && dt != BENCH_BF16)) return dt;
    const bench_dtype to = kn_repack_dt(dt);
    const int ok = to == KN_Q4_0_R8 ? m->cols >= 256 : to == KN_Q4_0_G16 ? kn_q4_0_g16_ok(m->rows, m->cols)
                 : to == KN_BF16_R16 ? kn_bf16_r16_ok(m->rows, m->cols) : 0;
    return ok ? to : dt;
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
static void rp_one(tf_weights *w, int n_layers, tf_matrix *m, rp_arena *a, const bench_loader *loader,
                   const bench_host *host, repack *r) {
    const bench_dtype was = m->dtype, to = rp_wanted(w, m);
    if (to == was) return;
    const void *old = m->data;
    rp_matrix(m, to, a, loader, host, r);
    if (m->dtype != was) rp_follow(w, n_layers, old, m);
}

/* The bytes rp_one would copy of m. */
static size_t rp_copy_bytes(const tf_weights *w, const tf_matrix *m, const bench_loader *loader) {
    if (rp_wanted(w, m) == m->dtype) return 0;
    const size_t bytes = (size_t)m->rows * bench_dtype_row_bytes(m->dtype, m->cols);
    return bench_loader_memory_kind(loader, m->data, bytes) == BENCH_LOADER_MEM_SHARED
               ? rp_room_bytes(bytes) : 0;
}

/* The bytes of every copy rp_one would make (a matrix bound twice counted twice: room that is
 * never touched takes no memory). */
static size_t rp_plan(tf_weights *w, int n_layers, const bench_loader *loader) {
    size_t total = rp_copy_bytes(w, &w->output, loader);
    for (int l = 0; l < n_layers; l++)
        for (int i = 0; i < TF_LAYER_MATRICES; i++) total += rp_copy_bytes(w, tf_layer_matrix(&w->layers[l], i), loader);
    return total;
}

void repack_weights(tf_weights *w, int n_layers, const bench_loader *loader, const bench_host *host, repack *r) {
    memset(r, 0, sizeof *r);
    if (!kn_repacks(BENCH_Q4_0) && !kn_repacks(BENCH_BF16)) return;
    const size_t total = rp_plan(w, n_layers, loader);
    char *p = total ? rp_map_kept(total, host, r) : NULL; /* NULL: each copy maps its own */
    rp_arena a = {p, p ? p + total : NULL};
    for (int l = 0; l < n_layers; l++)
        for (int i = 0; i < TF_LAYER_MATRICES; i++)
            rp_one(w, n_layers, tf_layer_matrix(&w->layers[l], i), &a, loader, host, r);
    rp_one(w, n_layers, &w->output, &a, loader, host, r);
}

void repack_release(repack *r) {
    for (int i = 0; i < r->n_copies; i++) munmap(r->copies[i], r->copy_len[i]);
    free(r->copies);
    free(r->copy_len);
    memset(r, 0, sizeof *r);
}
