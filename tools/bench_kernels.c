/* Standalone benchmark of the matmul kernels against the STREAM-triad bound.
 * Not a test: `make tools` builds it (release flags) as build/tools/bench_kernels.
 *
 *   build/tools/bench_kernels [--isa FAMILY (bench list kernels)] [--dtype f32|f16|bf16|q8_0|q4_0]
 *                      [--threads N] [--reps N] [--no-prefill] [--hot] [--sustained]
 *
 * --hot instead times only the decode kernel, hot in L2 on one thread by its CPU time
 * (bk_hot_run below): the kernel's own rate, which must stay well above the read bound.
 * --sustained instead times a prefill matmul called back to back and with idle gaps
 * between the calls (bk_sustained_run below): a unit that slows under sustained use (a power
 * limit, say) shows it there.
 *
 * For each ISA, thread count (1 and 2 unless --threads) and dtype it prints:
 *   triad     GB/s of the STREAM triad (3 arrays of 256 MiB counted, as STREAM does)
 *   matvec    GB/s of weight bytes for n = 1 on 2048x768, 768x2048, 32000x768,
 *             each rotated through copies totalling >= 256 MiB so the weights
 *             come from DRAM, not the last-level cache
 *   decode    the whole llama-110m-shaped token (12 layers of q,k,v,o 768x768,
 *             w1,w3 2048x768, w2 768x2048, and the 32000x768 classifier): GB/s,
 *             tokens/s, and the share of the triad figure
 *   prefill   GFLOP/s for n = 128 tokens on the same shapes, and tokens/s of the
 *             full set
 * Each figure is the median of --reps timed repetitions, with min and max,
 * after an untimed warm-up. One metric per line; parameters are echoed first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engines/core/compute/kernels.h"
#include "util/ut_clock.h"

#define BK_MIB (1024.0 * 1024.0)
#define BK_COLD_BYTES (256u << 20) /* rotate single matrices through this much memory */
#define BK_PREFILL_N 128

static double bk_now(void) { return (double)ut_now_ns() * 1e-9; }

static int bk_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bk_stats { double med, min, max; } bk_stats;

/* Sorts v in place. */
static bk_stats bk_summary(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bk_cmp);
    bk_stats s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

static uint64_t bk_rng = 88172645463325252ull;
static float bk_rand(void) {
    bk_rng ^= bk_rng << 13;
    bk_rng ^= bk_rng >> 7;
    bk_rng ^= bk_rng << 17;
    return (float)((double)(bk_rng >> 40) / (double)(1ull << 23) - 1.0);
}

/* A (rows, cols) matrix in dt with small random values, every page touched. */
static void *bk_matrix(bench_dtype dt, int rows, int cols) {
    size_t rb = bench_dtype_row_bytes(dt, cols);
    unsigned char *w = aligned_alloc(64, ((size_t)rows * rb + 63) & ~(size_t)63);
    float *tmp = malloc((size_t)cols * sizeof(float));
    if (!w || !tmp) { fprintf(stderr, "bench_kernels: out of memory\n"); exit(1); }
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) tmp[k] = 0.05f * bk_rand();
        kn_quant_row(dt, tmp, w + (size_t)r * rb, cols);
    }
    free(tmp);
    return w;
}

typedef struct bk_mat { int rows, cols; void *w; } bk_mat;

/* A "token": a list of matmuls run in order. */
typedef struct bk_set {
    int n;
    bk_mat *m;
    double bytes;           /* weight bytes read by one pass */
    double macs;            /* multiply-adds per token */
} bk_set;

static void bk_set_free(bk_set *s) {
    for (int i = 0; i < s->n; i++) free(s->m[i].w);
    free(s->m);
    s->m = NULL;
    s->n = 0;
}

static void bk_set_add(bk_set *s, bench_dtype dt, int rows, int cols) {
    s->m = realloc(s->m, (size_t)(s->n + 1) * sizeof *s->m);
    if (!s->m) { fprintf(stderr, "bench_kernels: out of memory\n"); exit(1); }
    s->m[s->n++] = (bk_mat){rows, cols, bk_matrix(dt, rows, cols)};
    s->bytes += (double)rows * (double)bench_dtype_row_bytes(dt, cols);
    s->macs += (double)rows * cols;
}

/* Copies of one shape until they exceed the last-level cache several times. */
static bk_set bk_cold_copies(bench_dtype dt, int rows, int cols) {
    bk_set s = {0};
    double one = (double)rows * (double)bench_dtype_row_bytes(dt, cols);
    int copies = (int)ceil(BK_COLD_BYTES / one);
    if (copies < 2) copies = 2;
    for (int i = 0; i < copies; i++) bk_set_add(&s, dt, rows, cols);
    return s;
}

static bk_set bk_llama110m(bench_dtype dt) {
    const int dim = 768, hidden = 2048, layers = 12, vocab = 32000;
    bk_set s = {0};
    for (int l = 0; l < layers; l++) {
        for (int i = 0; i < 4; i++) bk_set_add(&s, dt, dim, dim); /* wq wk wv wo */
        bk_set_add(&s, dt, hidden, dim);                          /* w1 */
        bk_set_add(&s, dt, hidden, dim);                          /* w3 */
        bk_set_add(&s, dt, dim, hidden);                          /* w2 */
    }
    bk_set_add(&s, dt, vocab, dim);                               /* classifier */
    return s;
}

typedef struct bk_io {
    float *x;   /* (BK_PREFILL_N, max cols) */
    float *y;   /* (BK_PREFILL_N, max rows) */
} bk_io;

/* Runs every matmul of the set once with n tokens; the set's matrices are
 * visited in order, so `passes` runs of a cold-copies set each read new memory. */
static void bk_pass(tp_pool *pool, const bk_set *s, bench_dtype dt, const bk_io *io, int n) {
    for (int i = 0; i < s->n; i++) kn_matmul(pool, io->y, io->x, n, s->m[i].w, dt, s->m[i].rows, s->m[i].cols);
}

/* Times `reps` passes (after one warm-up); per-pass seconds into t. For a
 * cold-copies set, a "pass" is one matmul and consecutive passes rotate copies. */
static void bk_time(tp_pool *pool, const bk_set *s, bench_dtype dt, const bk_io *io, int n, int per_matrix,
                    int reps, double *t) {
    if (per_matrix) {
        int c = 0;
        kn_matmul(pool, io->y, io->x, n, s->m[c].w, dt, s->m[c].rows, s->m[c].cols);
        for (int r = 0; r < reps; r++) {
            c = (c + 1) % s->n;
            double t0 = bk_now();
            kn_matmul(pool, io->y, io->x, n, s->m[c].w, dt, s->m[c].rows, s->m[c].cols);
            t[r] = bk_now() - t0;
        }
        return;
    }
    bk_pass(pool, s, dt, io, n);
    for (int r = 0; r < reps; r++) {
        double t0 = bk_now();
        bk_pass(pool, s, dt, io, n);
        t[r] = bk_now() - t0;
    }
}

/* Converts per-pass seconds to rates (units per pass / seconds), summarised. */
static bk_stats bk_rate(double *t, int reps, double per_pass) {
    for (int r = 0; r < reps; r++) t[r] = per_pass / t[r];
    return bk_summary(t, reps);
}

/* --hot: the decode kernel's own rate, away from memory: n = 1 on a 256 x 2048 matrix that
 * stays in L2, over and over on the calling thread, timed by the thread's CPU time (so that
 * another job on the machine costs it little). GB/s of weights, per ISA and dtype. */
#define BK_HOT_ROWS 256
#define BK_HOT_COLS 2048
static double bk_thread_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A probe of the --hot and --sustained kinds: one rows x cols matrix per ISA and dtype, n
 * tokens a call, timed by run after a warm-up call (reps figures into t, then one line). */
typedef struct bk_probe {
    int rows, cols, n;
    void (*run)(const struct bk_probe *p, const char *isa, bench_dtype dt, const void *w, const float *x, float *y,
                int reps, double *t);
} bk_probe;

/* Every ISA (or only_isa) this CPU runs x every dtype of the table (or only_dtype) through p. */
static int bk_each(const bk_probe *p, const char *const *isas, int n_isas, const char *only_isa, int only_dtype, int reps,
                   double *t) {
    static const bench_dtype dts[] = {BENCH_F32, BENCH_F16, BENCH_BF16, BENCH_Q8_0, BENCH_Q4_0};
    float *x = malloc((size_t)p->n * p->cols * sizeof(float)), *y = malloc((size_t)p->n * p->rows * sizeof(float));
    if (!x || !y) { fprintf(stderr, "bench_kernels: out of memory\n"); free(x); free(y); return 1; }
    for (size_t k = 0; k < (size_t)p->n * p->cols; k++) x[k] = bk_rand();
    for (int ii = 0; ii < n_isas; ii++) {
        if (only_isa && strcmp(only_isa, isas[ii])) continue;
        if (kn_set_isa(isas[ii])) { printf("# isa=%s not supported here\n", isas[ii]); continue; }
        for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
            if (only_dtype >= 0 && (int)dts[di] != only_dtype) continue;
            void *w = bk_matrix(dts[di], p->rows, p->cols);
            kn_matmul(NULL, y, x, p->n, w, dts[di], p->rows, p->cols); /* warm-up (--hot: into L2) */
            p->run(p, isas[ii], dts[di], w, x, y, reps, t);
            fflush(stdout);
            free(w);
        }
    }
    free(x);
    free(y);
    return 0;
}

static void bk_hot_run(const bk_probe *p, const char *isa, bench_dtype dt, const void *w, const float *x, float *y, int reps,
                       double *t) {
    double bytes = (double)p->rows * (double)bench_dtype_row_bytes(dt, p->cols);
    long iters = (long)(2e8 / bytes) + 1;  /* ~0.2 GB of weights a repetition */
    for (int r = 0; r < reps; r++) {
        double t0 = bk_thread_s();
        for (long i = 0; i < iters; i++) kn_matmul(NULL, y, x, 1, w, dt, p->rows, p->cols);
        t[r] = bytes * (double)iters / (bk_thread_s() - t0) / 1e9;
    }
    bk_stats st = bk_summary(t, reps);
    printf("isa=%s dtype=%s hot %dx%d matvec GB/s (thread CPU time) median=%.1f min=%.1f max=%.1f\n", isa,
           bench_dtype_name(dt), p->rows, p->cols, st.med, st.min, st.max);
}

/* --sustained: n = 256 tokens on a 768 x 768 matrix on the calling thread, reps calls in a
 * row, then the same with 50, 500 and 2000 us of scalar work before each call. The median
 * call's GFLOP/s per gap: a kernel that holds its speed gives the same figure at every gap,
 * one that throttles under sustained use a lower one back to back (docs/PERFORMANCE.md: the
 * amx family on an Emerald Rapids guest held its speed). */
static void bk_sustained_run(const bk_probe *p, const char *isa, bench_dtype dt, const void *w, const float *x, float *y,
                             int reps, double *t) {
    static const double gaps_us[] = {0, 50, 500, 2000};
    const double flop = 2.0 * p->n * p->rows * p->cols;
    volatile double sink = 0;
    for (size_t g = 0; g < sizeof gaps_us / sizeof gaps_us[0]; g++) {
        for (int r = 0; r < reps; r++) {
            /* the gap: scalar work, no vector or tile unit busy */
            for (double g0 = bk_now(); (bk_now() - g0) * 1e6 < gaps_us[g];) sink += 1;
            double t0 = bk_now();
            kn_matmul(NULL, y, x, p->n, w, dt, p->rows, p->cols);
            t[r] = flop / (bk_now() - t0) / 1e9;
        }
        bk_stats st = bk_summary(t, reps);
        printf("isa=%s dtype=%s sustained prefill n=%d %dx%d gap_us=%g GFLOP/s median=%.1f min=%.1f max=%.1f\n", isa,
               bench_dtype_name(dt), p->n, p->rows, p->cols, gaps_us[g], st.med, st.min, st.max);
    }
}

int main(int argc, char **argv) {
    const char *only_isa = NULL;
    int only_dtype = -1, only_threads = 0, reps = 15, prefill = 1, hot = 0, sustained = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--isa") && i + 1 < argc) only_isa = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) only_dtype = bench_dtype_parse(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-prefill")) prefill = 0;
        else if (!strcmp(argv[i], "--hot")) hot = 1;
        else if (!strcmp(argv[i], "--sustained")) sustained = 1;
        else {
            fprintf(stderr, "usage: %s [--isa FAMILY (bench list kernels)] [--dtype f32|f16|bf16|q8_0|q4_0] [--threads N] [--reps N] [--no-prefill] [--hot] [--sustained]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 256) reps = 256;
    kn_init();
    printf("# bench_kernels reps=%d prefill_n=%d cold_bytes=%u MiB best_isa=%s\n", reps, BK_PREFILL_N,
           BK_COLD_BYTES >> 20, kn_isa());

    /* every family kernels.c knows, best first, so that a new one is timed without an edit here */
    const char *isas[16];
    int n_isas = 0;
    for (int i = 0; i < kn_isa_count() && n_isas < 16; i++) isas[n_isas++] = kn_isa_name(i, NULL);
    if (hot || sustained) {
        double *th = malloc((size_t)reps * sizeof *th);
        const bk_probe hot_probe = {BK_HOT_ROWS, BK_HOT_COLS, 1, bk_hot_run}, sus_probe = {768, 768, 256, bk_sustained_run};
        int rc = th ? bk_each(hot ? &hot_probe : &sus_probe, isas, n_isas, only_isa, only_dtype, reps, th) : 1;
        free(th);
        return rc;
    }
    static const int shapes[][2] = {{2048, 768}, {768, 2048}, {32000, 768}};
    const int thread_counts[] = {1, 2};
    bk_io io = {malloc((size_t)BK_PREFILL_N * 2048 * sizeof(float)), malloc((size_t)BK_PREFILL_N * 32000 * sizeof(float))};
    double *t = malloc((size_t)(reps > 3 ? reps : 3) * sizeof *t);
    if (!io.x || !io.y || !t) { fprintf(stderr, "bench_kernels: out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t)BK_PREFILL_N * 2048; i++) io.x[i] = bk_rand();
    memset(io.y, 0, (size_t)BK_PREFILL_N * 32000 * sizeof(float));

    for (int ii = 0; ii < n_isas; ii++) {
        if (only_isa && strcmp(only_isa, isas[ii])) continue;
        if (kn_set_isa(isas[ii])) { printf("# isa=%s not supported here\n", isas[ii]); continue; }
        for (size_t ti = 0; ti < 2; ti++) {
            int threads = only_threads ? only_threads : thread_counts[ti];
            if (only_threads && ti) break;
            tp_pool *pool = tp_create(threads);
            if (!pool) { fprintf(stderr, "bench_kernels: tp_create(%d) failed\n", threads); return 1; }
            /* the triad, several times so its spread is visible too */
            for (int r = 0; r < reps; r++) t[r] = kn_triad_bandwidth(pool, (size_t)256 << 20, 3) / 1e9;
            bk_stats tr = bk_summary(t, reps);
            printf("isa=%s threads=%d triad GB/s median=%.1f min=%.1f max=%.1f\n", isas[ii], threads, tr.med, tr.min, tr.max);
            fflush(stdout);

            for (int dt = 0; dt < BENCH_DTYPE_COUNT; dt++) {
                if (only_dtype >= 0 && dt != only_dtype) continue;
                if (!bench_dtype_writable((bench_dtype)dt)) continue; /* weights are made by kn_quant_row */
                for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                    int rows = shapes[si][0], cols = shapes[si][1];
                    bk_set s = bk_cold_copies((bench_dtype)dt, rows, cols);
                    double bytes = s.bytes / s.n;
                    bk_time(pool, &s, (bench_dtype)dt, &io, 1, 1, reps, t);
                    bk_stats g = bk_rate(t, reps, bytes / 1e9);
                    printf("isa=%s threads=%d dtype=%s shape=%dx%d matvec GB/s median=%.1f min=%.1f max=%.1f (%.0f%% of triad)\n",
                           isas[ii], threads, bench_dtype_name((bench_dtype)dt), rows, cols, g.med, g.min, g.max,
                           100.0 * g.med / tr.med);
                    if (prefill) {
                        int pr = reps < 5 ? reps : 5;
                        bk_time(pool, &s, (bench_dtype)dt, &io, BK_PREFILL_N, 1, pr, t);
                        bk_stats f = bk_rate(t, pr, 2.0 * rows * cols * BK_PREFILL_N / 1e9);
                        printf("isa=%s threads=%d dtype=%s shape=%dx%d prefill n=%d GFLOP/s median=%.1f min=%.1f max=%.1f\n",
                               isas[ii], threads, bench_dtype_name((bench_dtype)dt), rows, cols, BK_PREFILL_N,
                               f.med, f.min, f.max);
                    }
                    fflush(stdout);
                    bk_set_free(&s);
                }
                bk_set s = bk_llama110m((bench_dtype)dt);
                bk_time(pool, &s, (bench_dtype)dt, &io, 1, 0, reps, t);
                double tt[256];
                int nr = reps < 256 ? reps : 256;
                for (int r = 0; r < nr; r++) tt[r] = t[r];
                bk_stats g = bk_rate(t, reps, s.bytes / 1e9);
                bk_stats tok = bk_rate(tt, nr, 1.0);
                printf("isa=%s threads=%d dtype=%s llama110m decode weights=%.1f MB GB/s median=%.1f min=%.1f max=%.1f (%.0f%% of triad %.1f) tokens/s median=%.1f bound=%.1f\n",
                       isas[ii], threads, bench_dtype_name((bench_dtype)dt), s.bytes / 1e6, g.med, g.min, g.max,
                       100.0 * g.med / tr.med, tr.med, tok.med, tr.med * 1e9 / s.bytes);
                if (prefill) {
                    int pr = reps < 3 ? reps : 3;
                    bk_time(pool, &s, (bench_dtype)dt, &io, BK_PREFILL_N, 0, pr, t);
                    for (int r = 0; r < pr; r++) tt[r] = t[r];
                    bk_stats f = bk_rate(t, pr, 2.0 * s.macs * BK_PREFILL_N / 1e9);
                    bk_stats ptok = bk_rate(tt, pr, BK_PREFILL_N);
                    printf("isa=%s threads=%d dtype=%s llama110m prefill n=%d GFLOP/s median=%.1f min=%.1f max=%.1f tokens/s median=%.1f\n",
                           isas[ii], threads, bench_dtype_name((bench_dtype)dt), BK_PREFILL_N, f.med, f.min, f.max, ptok.med);
                }
                fflush(stdout);
                bk_set_free(&s);
            }
            tp_destroy(pool);
        }
    }
    free(io.x);
    free(io.y);
    free(t);
    return 0;
}
