/* Compute kernels: instruction-set dispatch, the split of a matmul across the
 * thread pool, row conversions and the STREAM triad.
 *
 * Dispatch: the per-ISA tables (kernels_portable.c, kernels_avx2.c,
 * kernels_avx512.c, all instances of kernels_simd.inc) are named by the family
 * table kn_families here and chosen nowhere else, once, by kn_init: auto's
 * choice among those this CPU runs, unless BENCH_ISA names another. The build
 * has no -march flags.
 */
#include "kernels.h"
#include "kernels_impl.h"
#include "llama_x.h"
#include "engines/abi/blockquant.h"
#include "engines/abi/vexpf.h"
#include "quant.h"
#include "util/ut_clock.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ======================= instruction-set dispatch ======================= */

/* The CPU features each family needs (libgcc's __builtin_cpu_supports also checks that the OS
 * saves the registers: XCR0). */
#if KN_HAVE_X86
static int kn_cpu_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
static int kn_cpu_avx512(void) {
    return kn_cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
static int kn_cpu_vnni(void) { return kn_cpu_avx512() && __builtin_cpu_supports("avx512vnni"); }
static int kn_cpu_avx512_bf16(void) { return kn_cpu_avx512() && __builtin_cpu_supports("avx512bf16"); }
static int kn_cpu_amx(void) { return kn_cpu_avx512() && kn_amx_usable(); }
#endif

/* The kernel families, best first: the order of every list of them. auto takes the exact one
 * this CPU runs with the highest auto_score. The int8 families round x for Q8_0 (an error of
 * about 1e-2 of the logits, far past what the k256 acceptance test allows), so auto runs them
 * only under production numerics, by measurement, once a check on the model accepts them
 * (kn_set_tuned_rounding, engine.h engine_numerics); avx512-bf16 rounds x to bf16 for bf16
 * weights and runs only when named; so does amx, exact but slower than avx512 where its tiles
 * are not busy. docs/extending.md says how to add a row. */
static const kn_family kn_families[] = {
#if KN_HAVE_X86
    {.name = "vnni", .ops = &kn_ops_vnni, .runs_here = kn_cpu_vnni,
     .about = "avx512 with Q8_0, Q4_0, Q4_K and Q6_K on AVX512-VNNI vpdpbusd over x rounded to int8"},
    {.name = "avx512-bf16", .ops = &kn_ops_avx512_bf16, .runs_here = kn_cpu_avx512_bf16,
     .about = "avx512 with bf16 prefill on AVX512_BF16 vdpbf16ps over x rounded to bf16"},
    {.name = "amx", .ops = &kn_ops_amx, .runs_here = kn_cpu_amx,
     .about = "avx512 with prefill (16 tokens or more) on AMX-BF16 tiles, x and the weights split into three "
              "bf16 parts: exact, but auto never picks it"},
    {.name = "avx512", .ops = &kn_ops_avx512, .runs_here = kn_cpu_avx512, .auto_score = 40,
     .about = "AVX-512 F/BW/VL/DQ, every dtype exact (Q8_0 and Q4_0 decode on x split into int8 parts "
              "where the CPU has AVX512-VNNI)"},
    {.name = "avx512-wide", .ops = &kn_ops_avx512_wide, .runs_here = kn_cpu_avx512, .auto_score = 30,
     .about = "avx512 with Q8_0 and Q4_0 decode on the weights widened to f32 (exact)"},
    {.name = "avx2-int8", .ops = &kn_ops_avx2_int8, .runs_here = kn_cpu_avx2,
     .about = "avx2 with Q8_0, Q4_0 (and Q4_K, Q6_K decode) on maddubs over x rounded to int8"},
    {.name = "avx2", .ops = &kn_ops_avx2, .runs_here = kn_cpu_avx2, .auto_score = 20, .about = "AVX2 + FMA + F16C, exact"},
#endif
    {.name = "portable", .ops = &kn_ops_portable, .auto_score = 10, .about = "plain C, exact: the reference"},
};
#define KN_NBUILTIN ((int)(sizeof kn_families / sizeof kn_families[0]))

/* Rows added by kn_family_add, after the built-in ones; a row is written before the count
 * that shows it. */
static const kn_family *kn_added[KN_MAX_ADDED];
static atomic_int kn_n_added;

static int kn_nfamilies(void) { return KN_NBUILTIN + atomic_load_explicit(&kn_n_added, memory_order_acquire); }

static const kn_family *kn_family_at(int i) { return i < KN_NBUILTIN ? &kn_families[i] : kn_added[i - KN_NBUILTIN]; }

static _Atomic(const kn_family *) kn_cur;   /* NULL until kn_init */
static pthread_once_t kn_once = PTHREAD_ONCE_INIT;
/* 1: kn_cur is "auto" (not a family asked by name), so that its per-dtype choices by
 * measurement apply (kn_set_tuned, kernels_tune.c): [dt][0 decode, 1 prefill], NULL where
 * none was made (auto's family runs it). */
static atomic_int kn_auto_on = 1;
static _Atomic(const kn_family *) kn_tuned[BENCH_DTYPE_COUNT][2];

static int kn_supported(const kn_family *f) { return !f->runs_here || f->runs_here(); }

static int kn_exact(const kn_family *f) { return !f->ops->q8_int8 && !f->ops->bf16_dot; }

/* Whether auto may run a family (by default or by measurement). */
static int kn_auto_ok(const kn_family *f) { return f->auto_score > 0 && kn_exact(f); }

static const kn_family *kn_best(void) {
    const kn_family *best = &kn_families[KN_NBUILTIN - 1]; /* portable: every CPU runs it */
    for (int i = 0; i < kn_nfamilies(); i++) {
        const kn_family *f = kn_family_at(i);
        if (kn_auto_ok(f) && f->auto_score > best->auto_score && kn_supported(f)) best = f;
    }
    return best;
}

const char *kn_isa_reference(void) { return kn_families[KN_NBUILTIN - 1].name; }

static const kn_family *kn_find(const char *isa) {
    if (strcmp(isa, "auto") == 0) return kn_best();
    for (int i = 0; i < kn_nfamilies(); i++)
        if (strcmp(kn_family_at(i)->name, isa) == 0) return kn_family_at(i);
    return NULL;
}

int kn_family_add(const kn_family *f) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    const int n = atomic_load(&kn_n_added);
    const int ok = n < KN_MAX_ADDED && f->name && strcmp(f->name, "auto") && !kn_find(f->name);
    if (ok) {
        kn_added[n] = f;
        atomic_store_explicit(&kn_n_added, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

static void kn_init_once(void) {
    const kn_family *best = kn_best();
    const char *env = getenv("BENCH_ISA");
    if (env && *env) {
        const kn_family *want = kn_find(env);
        if (!want) {
            char names[512];
            kn_isa_list(names, sizeof names, KN_LIST_ALL);
            fprintf(stderr, "%s: BENCH_ISA=%s is not one of %s or auto; using %s\n", __func__, env, names, best->name);
        } else if (!kn_supported(want)) fprintf(stderr, "%s: BENCH_ISA=%s: this CPU lacks it; using %s\n", __func__, env, best->name);
        else {
            best = want;
            atomic_store(&kn_auto_on, strcmp(env, "auto") == 0);
        }
    }
    atomic_store(&kn_cur, best);
}

void kn_init(void) { pthread_once(&kn_once, kn_init_once); }

static const kn_family *kn_family_now(void) {
    const kn_family *f = atomic_load_explicit(&kn_cur, memory_order_acquire);
    if (!f) {
        kn_init();
        f = atomic_load(&kn_cur);
    }
    return f;
}

static const kn_ops *kn_ops_now(void) { return kn_family_now()->ops; }

const char *kn_isa(void) { return kn_family_now()->name; }

static void kn_mm_r8(const kn_ops *ops, float *y, const float *x, int n, const void *w, int rows, int cols,
                     int r0, int r1, const kn_xq8 *xq);
typedef void (*kn_unpack_fn)(const void *w, int rows, int cols, int r0, int r1, void *dst);
static void kn_mm_groups(const kn_ops *ops, kn_mm_try_fn own, int group, bench_dtype bdt, kn_unpack_fn unpack, float *y,
                         const float *x, int n, const void *w, int rows, int cols, int r0, int r1, const kn_xq8 *xq);
static void kn_r16_unpack(const void *w, int rows, int cols, int r0, int r1, void *dst);

/* Runs the table's kernel for dt, or quant.c's exact one where the table has none
 * (the portable table: no block type but Q8_0). xq: x quantised where the table
 * takes it for dt (kn_takes_xq), or split (kn_takes_split), else NULL. */
static void kn_mm_call(const kn_ops *ops, bench_dtype dt, float *y, const float *x, int n, const void *w,
                       int rows, int cols, int r0, int r1, const kn_xq8 *xq) {
    if (dt == KN_Q4_0_R8) kn_mm_r8(ops, y, x, n, w, rows, cols, r0, r1, xq);
    else if (dt == KN_BF16_R16)
        kn_mm_groups(ops, ops->mm_bf16_r16, KN_BF16_R16_ROWS, BENCH_BF16, kn_r16_unpack, y, x, n, w, rows, cols, r0, r1, xq);
    else if (dt == KN_Q4_0_G16)
        kn_mm_groups(ops, ops->mm_q4_0_g16, KN_Q4_0_G16_ROWS, BENCH_Q4_0, kn_q4_0_g16_unpack, y, x, n, w, rows, cols, r0, r1, xq);
    else if (ops->mm[dt]) ops->mm[dt](y, x, n, w, rows, cols, r0, r1, xq);
    else qn_exact_mm(dt)(y, x, n, w, rows, cols, r0, r1);
}

/* Rows [r0, r1) of a rearranged matrix put back in the file's layout (bdt's) a panel of
 * KN_PANEL_ROWS rows at a time into a buffer of its own, each then through the table's kernel
 * for bdt, which reads y's rows only through the stride rows, so y + r takes them from 0 (every
 * kernel computes a row from that row and x alone, a panel at a time in prefill: the file's
 * bits). unpack: (w, rows, cols, r0, r1, dst). A panel stays in the caches between its unpacking
 * and its use: a prefill pays the unpacking's instructions, not a second pass over the share's
 * bytes; a decode pays about a token's worth of reading, which kn_repack_dt keeps from
 * happening where rearranging is chosen. */
static void kn_mm_unpacked(const kn_ops *ops, bench_dtype bdt, kn_unpack_fn unpack,
                           float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1,
                           const kn_xq8 *xq) {
    const int panel = r1 - r0 < KN_PANEL_ROWS ? r1 - r0 : KN_PANEL_ROWS;
    void *tmp = malloc((size_t)panel * bench_dtype_row_bytes(bdt, cols));
    if (!tmp) { /* out of memory: NaN rows, which the forward pass reports as non-finite logits */
        for (int t = 0; t < n; t++)
            for (int r = r0; r < r1; r++) y[(size_t)t * rows + r] = NAN;
        return;
    }
    for (int r = r0; r < r1; r += panel) {
        const int e = r1 - r < panel ? r1 : r + panel;
        unpack(w, rows, cols, r, e, tmp);
        kn_mm_call(ops, bdt, y + r, x, n, tmp, rows, cols, 0, e - r, xq);
    }
    free(tmp);
}

static void kn_r8_unpack(const void *w, int rows, int cols, int r0, int r1, void *dst) {
    (void)rows;
    kn_unrepack_rows((const char *)w + (size_t)r0 * bench_dtype_row_bytes(BENCH_Q4_0, cols), dst, r1 - r0, cols);
}
static void kn_r16_unpack(const void *w, int rows, int cols, int r0, int r1, void *dst) {
    kn_bf16_r16_unpack(w, rows, cols, r0, r1, dst);
}

/* Rearranged Q4_0: the table's own decode or prefill where it has one and takes the call; else
 * (a family without one, or x that could not be split) the rows put back (kn_mm_unpacked). */
static void kn_mm_r8(const kn_ops *ops, float *y, const float *x, int n, const void *w, int rows, int cols,
                     int r0, int r1, const kn_xq8 *xq) {
    const kn_mm_try_fn own = n == 1 ? ops->mv_q4_0_r8 : ops->mm_r8_prefill;
    if (own && own(y, x, n, w, rows, cols, r0, r1, xq) == 0) return;
    kn_mm_unpacked(ops, BENCH_Q4_0, kn_r8_unpack, y, x, n, w, rows, cols, r0, r1, xq);
}

/* A layout of groups of rows (grouped bf16, interleaved Q4_0): the table's own kernel where it
 * has one (own) and the rows are whole groups (or end the matrix), as kernels.c's split makes
 * them; else the rows put back (kn_mm_unpacked) for the file's dtype bdt. */
static void kn_mm_groups(const kn_ops *ops, kn_mm_try_fn own, int group, bench_dtype bdt, kn_unpack_fn unpack, float *y,
                         const float *x, int n, const void *w, int rows, int cols, int r0, int r1, const kn_xq8 *xq) {
    const int whole = r0 % group == 0 && (r1 % group == 0 || r1 == rows);
    if (whole && own && own(y, x, n, w, rows, cols, r0, r1, xq) == 0) return;
    kn_mm_unpacked(ops, bdt, unpack, y, x, n, w, rows, cols, r0, r1, xq);
}

/* The family that runs dt's matmuls of n rows of x: auto's measured choice where auto is in use
 * and one was made (kernels_tune.h), else ops. Resolved once a job, before x is quantised or
 * split for it: a choice may be an int8 table under production numerics (kn_set_tuned_rounding). */
static const kn_family *kn_tuned_for(bench_dtype dt, int n) {
    if (!atomic_load_explicit(&kn_auto_on, memory_order_relaxed)) return NULL;
    return atomic_load_explicit(&kn_tuned[dt][n > 1], memory_order_relaxed);
}
static const kn_ops *kn_for(const kn_ops *ops, bench_dtype dt, int n) {
    const kn_family *t = kn_tuned_for(dt, n);
    return t ? t->ops : ops;
}

int kn_set_isa(const char *isa) {
    kn_init(); /* so that a later kn_init cannot undo this choice */
    const kn_family *f = isa ? kn_find(isa) : NULL;
    if (!f || !kn_supported(f)) return -1;
    atomic_store(&kn_cur, f);
    atomic_store(&kn_auto_on, strcmp(isa, "auto") == 0);
    return 0;
}

int kn_set_tuned(bench_dtype dt, int prefill, const char *family) {
    if ((unsigned)dt >= BENCH_DTYPE_COUNT) return -1;
    const kn_family *f = NULL;
    if (family) {
        f = kn_find(family);
        if (!f || strcmp(family, "auto") == 0 || !kn_auto_ok(f) || !kn_supported(f)) return -1;
    }
    atomic_store(&kn_tuned[dt][prefill ? 1 : 0], f);
    return 0;
}

const char *kn_auto_family(bench_dtype dt, int prefill) {
    if ((unsigned)dt >= BENCH_DTYPE_COUNT) return NULL;
    const kn_family *t = atomic_load(&kn_tuned[dt][prefill ? 1 : 0]);
    return t ? t->name : kn_best()->name;
}

int kn_auto_active(void) {
    kn_init();
    return atomic_load(&kn_auto_on);
}

int kn_isa_count(void) { return kn_nfamilies(); }

const char *kn_isa_name(int i, int *runs_here) {
    if (i < 0 || i >= kn_nfamilies()) return NULL;
    if (runs_here) *runs_here = kn_supported(kn_family_at(i));
    return kn_family_at(i)->name;
}

const char *kn_isa_about(const char *isa) {
    const kn_family *f = isa && strcmp(isa, "auto") ? kn_find(isa) : NULL;
    return f ? f->about : NULL;
}

int kn_isa_known(const char *isa) { return isa && kn_find(isa) != NULL; }

int kn_isa_exact(const char *isa) {
    const kn_family *f = kn_find(isa && *isa ? isa : "auto");
    return f && kn_exact(f);
}

int kn_isa_auto_candidate(const char *isa) {
    const kn_family *f = isa ? kn_find(isa) : NULL;
    return f && strcmp(isa, "auto") && kn_auto_ok(f);
}

const char *kn_isa_resolve(const char *isa) {
    const kn_family *f = kn_find(isa && *isa ? isa : "auto");
    return f && kn_supported(f) ? f->name : NULL;
}

/* Whether a family belongs in a list of kind which (kernels.h kn_list). */
static int kn_listed(const kn_family *f, kn_list which) {
    switch (which) {
    case KN_LIST_RUNNABLE: return kn_supported(f);
    case KN_LIST_X_INT8: return f->ops->q8_int8;
    case KN_LIST_X_BF16: return f->ops->bf16_dot;
    case KN_LIST_NAMED_ONLY: return kn_exact(f) && !kn_auto_ok(f);
    default: return 1;
    }
}

int kn_isa_list(char *buf, size_t len, kn_list which) {
    size_t used = 0;
    int n = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < kn_nfamilies(); i++) {
        const kn_family *f = kn_family_at(i);
        if (!kn_listed(f, which)) continue;
        int w = snprintf(buf + used, used < len ? len - used : 0, "%s%s", n ? ", " : "", f->name);
        if (w > 0) used += (size_t)w;
        n++;
    }
    return n;
}

int kn_q8_int8(void) { return kn_ops_now()->q8_int8; }

int kn_bf16_dot(void) { return kn_ops_now()->bf16_dot; }

/* Whether ops' kernel for dt takes x quantised by its quant_x. */
static int kn_takes_xq(const kn_ops *ops, bench_dtype dt) { return (ops->xq_dts >> dt) & 1u; }

int kn_x_int8(bench_dtype dt) { return kn_takes_xq(kn_ops_now(), dt); }

/* Whether f rounds x for dt's weights: an int8 table that quantises x for them, or a bf16 one
 * that rounds x to bf16 for bf16 weights (in prefill; its decode is exact), as llama.cpp's CPU
 * path does for each. For the other dtypes it computes as its exact sibling does. */
static int kn_rounds(const kn_family *f, bench_dtype dt) {
    return (f->ops->q8_int8 && kn_takes_xq(f->ops, dt)) || (f->ops->bf16_dot && dt == BENCH_BF16);
}

int kn_isa_rounds(const char *isa, bench_dtype dt) {
    const kn_family *f = isa && strcmp(isa, "auto") && (unsigned)dt < BENCH_DTYPE_COUNT ? kn_find(isa) : NULL;
    return f && kn_rounds(f, dt);
}

int kn_set_tuned_rounding(bench_dtype dt, int prefill, const char *family) {
    if ((unsigned)dt >= BENCH_DTYPE_COUNT) return -1;
    const kn_family *f = family ? kn_find(family) : NULL;
    if (family && (!f || !strcmp(family, "auto") || !kn_supported(f) || !(kn_auto_ok(f) || kn_rounds(f, dt)))) return -1;
    atomic_store(&kn_tuned[dt][prefill ? 1 : 0], f);
    return 0;
}

void kn_drop_rounding(void) {
    for (int dt = 0; dt < BENCH_DTYPE_COUNT; dt++)
        for (int p = 0; p < 2; p++) {
            const kn_family *t = atomic_load(&kn_tuned[dt][p]);
            if (t && !kn_auto_ok(t)) atomic_store(&kn_tuned[dt][p], NULL);
        }
}

/* Whether x is split for ops' decode of dt (kn_xsplit_pair): the table asks for it, the CPU
 * has AVX512-VNNI, and $BENCH_EXACT_SPLIT is not 0 (it turns the split off, for A/B runs of
 * the same binary; results stay exact either way). */
static int kn_split_on(void) {
    static atomic_int on; /* 0: not read yet; 1 off; 2 on */
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (!v) {
#if KN_HAVE_X86
        __builtin_cpu_init();
        const char *e = getenv("BENCH_EXACT_SPLIT");
        v = __builtin_cpu_supports("avx512vnni") && !(e && strcmp(e, "0") == 0) ? 2 : 1;
#else
        v = 1;
#endif
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v == 2;
}
static int kn_takes_split(const kn_ops *ops, bench_dtype dt, int n) {
    return n == 1 && ops->split_x && ((ops->split_dts >> dt) & 1u) && kn_split_on();
}

int kn_x_split(bench_dtype dt) { return kn_takes_split(kn_ops_now(), dt, 1); }

bench_dtype kn_repack_dt(bench_dtype dt) {
    const kn_ops *pre = kn_for(kn_ops_now(), dt, 2), *dec = kn_for(kn_ops_now(), dt, 1);
    if (dt == BENCH_BF16) {
        /* where prefill runs on bf16 dot products, whose GEMM the groups were made for
         * (docs/PERFORMANCE.md); decode on any table with a group kernel */
        return pre->bf16_dot && pre->mm_bf16_r16 && dec->mm_bf16_r16 ? KN_BF16_R16 : dt;
    }
    if (dt != BENCH_Q4_0) return dt;
    /* rows interleaved where decode's table reads them (vnni, avx2-int8) and either prefill's
     * does too (vnni's GEMM packs from the groups) or decode has no loop for rows rearranged
     * within rows (avx2-int8; prefill then puts a panel of rows back at a time); else within
     * rows where decode's table has a decode of that (avx512's needs the split x, AVX512-VNNI;
     * without it, it would put every row back first), which amx's prefill reads too */
    const int r8 = dec->mv_q4_0_r8 && (kn_takes_xq(dec, dt) || kn_takes_split(dec, dt, 1));
    if (dec->mm_q4_0_g16 && kn_takes_xq(dec, dt) && (pre->mm_q4_0_g16 || !r8)) return KN_Q4_0_G16;
    return r8 ? KN_Q4_0_R8 : dt;
}

int kn_repacks(bench_dtype dt) { return kn_repack_dt(dt) != dt; }

/* ======================= quantised x for the integer tables ======================= */

/* Room for decode's x on the stack (quantised: up to ~7000 columns; split, 6 bytes a column:
 * up to ~2700); prefill's, and a wider decode's, go to the heap. */
#define KN_XQ_STACK (16u << 10)

typedef struct kn_xq_buf {
    kn_xq8 xq;
    void *heap;         /* owned; NULL when the stack buffer held it */
    unsigned char stack[KN_XQ_STACK] __attribute__((aligned(64)));
} kn_xq_buf;

/* Quantises x for ops' int8 slots; NULL (and the caller takes the exact
 * portable kernel) only when the heap is out of memory. */
/* x's rows [r0, r1) quantised into their places in xq: quant_x treats each row alone. */
typedef struct kn_xq_job {
    const kn_ops *ops;
    const float *x;
    int n, cols;
    const kn_xq8 *xq;
} kn_xq_job;

static void kn_xq_task(void *arg, int task, int n_tasks) {
    const kn_xq_job *j = arg;
    const int r0 = (int)((int64_t)j->n * task / n_tasks), r1 = (int)((int64_t)j->n * (task + 1) / n_tasks);
    if (r0 >= r1) return;
    const size_t nbr = (size_t)(j->cols / BENCH_Q8_0_BLOCK), a = (size_t)r0;
    kn_xq8 sub = *j->xq;
    sub.qs += a * (size_t)j->cols;
    sub.d += a * nbr;
    sub.xs += a * nbr;
    if (sub.nsum) sub.nsum += a * nbr * 8;
    j->ops->quant_x(j->x + a * (size_t)j->cols, r1 - r0, j->cols, &sub);
}

/* Prefill's x quantisation ran on the calling thread while the others waited before every
 * int8 matmul (quant_x_vnni 1.3-1.9% of a warm llama-110m q4_0 prefill's samples, perf): from
 * this many rows it is split across the pool. */
#define KN_XQ_PAR_ROWS 16

static const kn_xq8 *kn_xq_prepare(tp_pool *pool, const kn_ops *ops, const float *x, int n, int cols, kn_xq_buf *b) {
    const size_t nblk = (size_t)n * (size_t)(cols / BENCH_Q8_0_BLOCK);
    const size_t qs = ((size_t)n * (size_t)cols + 63) & ~(size_t)63, d = (nblk * sizeof(float) + 63) & ~(size_t)63;
    const size_t ns = ops->x_nsum ? nblk * 8 * sizeof(int32_t) : 0;
    const size_t need = qs + 2 * d + ns;
    unsigned char *p = b->stack;
    b->heap = NULL;     /* prefill's goes to this thread's scratch, kept for the next call */
    if (need > sizeof b->stack && !(p = kn_scratch(KN_SCRATCH_XQ, need))) return NULL;
    /* qs, then d and xs (each 64-byte aligned), then nsum */
    b->xq.qs = (int8_t *)p;
    b->xq.d = (float *)(void *)(p + qs);
    b->xq.xs = (float *)(void *)(p + qs + d);
    b->xq.nsum = ns ? (int32_t *)(void *)(p + qs + 2 * d) : NULL;
    b->xq.sp = NULL;
    b->xq.se = NULL;
    if (n >= KN_XQ_PAR_ROWS && tp_threads(pool) > 1) {
        kn_xq_job j = {ops, x, n, cols, &b->xq};
        tp_run(pool, kn_xq_task, &j, tp_threads(pool));
    } else {
        ops->quant_x(x, n, cols, &b->xq);
    }
    return &b->xq;
}

/* Splits x (n == 1) for ops' exact decode; NULL (the kernel widens the weights instead)
 * where x cannot be split or the heap is out of memory. */
static const kn_xq8 *kn_split_prepare(const kn_ops *ops, const float *x, int cols, kn_xq_buf *b) {
    const size_t pairs = (size_t)cols / 64, sp = pairs * sizeof(kn_xsplit_pair);
    const size_t need = sp + (((size_t)cols / 32 * sizeof(float) + 63) & ~(size_t)63);
    unsigned char *p = b->stack;
    b->heap = NULL;
    if (need > sizeof b->stack) {
        b->heap = aligned_alloc(64, need);
        if (!b->heap) return NULL;
        p = b->heap;
    }
    memset(&b->xq, 0, sizeof b->xq);
    kn_xsplit_pair *pp = (kn_xsplit_pair *)(void *)p;
    float *se = (float *)(void *)(p + sp);
    if (ops->split_x(x, cols, pp, se) != 0) return NULL; /* the caller frees heap */
    b->xq.sp = pp;
    b->xq.se = se;
    return &b->xq;
}

/* x prepared for ops' kernel of dt over n rows: quantised (int8 tables), split (exact decode),
 * or NULL for neither. *fallback: the int8 table could not have its x (out of memory), so the
 * job must run the exact portable kernel. */
static const kn_xq8 *kn_x_prepare(tp_pool *pool, const kn_ops *ops, bench_dtype dt, const float *x, int n, int cols,
                                  kn_xq_buf *b, int *fallback) {
    *fallback = 0;
    b->heap = NULL;
    if (kn_takes_xq(ops, dt)) {
        const kn_xq8 *q = kn_xq_prepare(pool, ops, x, n, cols, b);
        *fallback = q == NULL;
        return q;
    }
    return kn_takes_split(ops, dt, n) ? kn_split_prepare(ops, x, cols, b) : NULL;
}

/* ======================= matmul across the pool ======================= */

/* Below this many multiply-adds a hand-off to the pool costs more than it saves. */
#define KN_PARALLEL_MIN_MACS (1 << 15)

/* Rows per thread: one contiguous range each, since every row costs the same
 * and each thread then streams one long run of weights. Decode's ranges are
 * whole multiples of 8 rows (16 for grouped bf16: a group, bf16r16.h);
 * prefill's of KN_PANEL_ROWS, so that a packed panel never straddles two
 * threads (768 rows on 2 threads: 384 = 6 panels each). */
static int kn_row_align(bench_dtype dt, int n) {
    return n > 1 ? KN_PANEL_ROWS : dt == KN_BF16_R16 ? KN_BF16_R16_ROWS : dt == KN_Q4_0_G16 ? KN_Q4_0_G16_ROWS : 8;
}

static int kn_chunk_rows(bench_dtype dt, int rows, int threads, int n) {
    const int align = kn_row_align(dt, n);
    const int chunk = (rows + threads - 1) / threads;
    return (chunk + align - 1) / align * align;
}

/* Decode's tasks per thread. 1: each thread streams one contiguous share of a matrix; more
 * shares let a thread that finishes early take work from one held up (by an interrupt, or
 * another job on the core); kn_task_share lays them so that a thread keeping pace still
 * streams one run (llama-110m f32 decode on Zen 5, 8 paired rounds against 4: 1 0.993x
 * (0.959..1.070), 2 0.942x; before kn_matmul_multi laid its outputs end to end, 1 1.049x,
 * 16 0.969x). Each row is computed alone,
 * so the split never changes a result. 4 against 1, Xeon family 6 model 207 (2 vCPU KVM
 * guest), no other job running, bench generate --threads 2, interleaved pairs: llama-110m
 * q8_0 decode 165 / 126, 189 / 113, 232 / 183 tokens/s; tinyllama-1.1b q8_0 17.5 / 14.9,
 * 17.5 / 17.3, 15.9 / 15.6 (docs/PERFORMANCE.md). $BENCH_DECODE_SPLIT (1..16) overrides it. */
#ifndef KN_DECODE_SPLIT
#define KN_DECODE_SPLIT 4
#endif
static int kn_decode_split(void) {
    static atomic_int split; /* 0: not read yet */
    int s = atomic_load_explicit(&split, memory_order_relaxed);
    if (s) return s;
    const char *e = getenv("BENCH_DECODE_SPLIT");
    s = KN_DECODE_SPLIT;
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (!*end && v >= 1 && v <= 16) s = (int)v;
        else fprintf(stderr, "kernels: BENCH_DECODE_SPLIT=%s: expected a whole number 1 .. 16; using %d\n", e, s);
    }
    atomic_store_explicit(&split, s, memory_order_relaxed);
    return s;
}

/* Tasks of a job of n rows of x on threads threads. */
static int kn_tasks(int threads, int n) { return n == 1 ? threads * kn_decode_split() : threads; }

#ifndef KN_DECODE_RUNS
#define KN_DECODE_RUNS 1
#endif
/* The share of the rows that task `task` of n_tasks computes. The pool hands tasks out in
 * order, and threads that keep pace take them in turn, so with shares in row order each thread
 * jumps a share ahead after every task. Read as (task % threads) * split + task / threads, the
 * tasks a thread takes in turn lie one after the other: each thread streams its half (on 2
 * threads) as one run, and a thread held up still gives its last shares to the other. */
static int kn_task_share(int task, int n_tasks, int threads) {
#if KN_DECODE_RUNS
    if (n_tasks % threads == 0) return (task % threads) * (n_tasks / threads) + task / threads;
#endif
    (void)n_tasks; (void)threads;
    return task;
}

#ifndef KN_DECODE_TAPER
#define KN_DECODE_TAPER 1
#endif
/* Decode's rows [*lo, *hi) of share `share` (kn_task_share's) of n_tasks over total rows, in
 * whole units of align rows but the last: thread run `share / split` streams its 1/threads of
 * them, in shares that shrink along the run (4, 3, 2, 1 tenths at a split of 4), so that the
 * share a thread still holds when the other runs out of work is the smallest. Against equal
 * shares, llama-110m decode on Zen 5, the family pinned, paired rounds: f32 (avx512) 1.046x
 * (10 rounds, 0.581..1.143), q8_0 (vnni) 1.050x (1.024..1.101), f16 1.014x (0.977..1.100). */
static void kn_share_rows(int share, int n_tasks, int threads, int64_t total, int align, int64_t *lo, int64_t *hi) {
    const int split = n_tasks / threads, run = share / split, pos = share % split;
    const int64_t units = (total + align - 1) / align;
    const int64_t u0 = units * run / threads, u1 = units * (run + 1) / threads;
    /* the weights of the positions before pos: split, split - 1, ..., of split (split + 1) / 2 */
    const int64_t sum = KN_DECODE_TAPER ? (int64_t)split * (split + 1) / 2 : split;
    const int64_t before = KN_DECODE_TAPER ? (int64_t)pos * split - (int64_t)pos * (pos - 1) / 2 : pos;
    const int64_t through = KN_DECODE_TAPER ? before + (split - pos) : pos + 1;
    *lo = (u0 + (u1 - u0) * before / sum) * align;
    *hi = (u0 + (u1 - u0) * through / sum) * align;
    if (*hi > total) *hi = total;
    if (*lo > total) *lo = total;
}

typedef struct kn_mm_job {
    const kn_ops *ops;  /* the table to run, with dt */
    bench_dtype dt;
    float *y;           /* (n, rows) */
    const float *x;     /* (n, cols) */
    const void *w;      /* (rows, cols) in the job's dtype */
    const kn_xq8 *xq;   /* x quantised, where the table takes it for dt; else NULL */
    int n, rows, cols;
    int chunk;          /* prefill's rows per task (decode's: kn_share_rows) */
    int threads;
} kn_mm_job;

static void kn_mm_task(void *arg, int task, int n_tasks) {
    const kn_mm_job *j = arg;
    const int share = kn_task_share(task, n_tasks, j->threads);
    int64_t r0, r1;
    if (j->n == 1) {
        kn_share_rows(share, n_tasks, j->threads, j->rows, kn_row_align(j->dt, 1), &r0, &r1);
    } else {
        r0 = (int64_t)share * j->chunk;
        r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
    }
    if (r0 < r1) kn_mm_call(j->ops, j->dt, j->y, j->x, j->n, j->w, j->rows, j->cols, (int)r0, (int)r1, j->xq);
}

/* Production numerics' yardstick (kn_set_llama_x): a bit per dtype whose matmuls take x rounded
 * as llama.cpp's CPU path rounds it. */
static atomic_uint kn_llama_x_dts;

int kn_set_llama_x(bench_dtype dt, int on) {
    if ((unsigned)dt >= BENCH_DTYPE_COUNT || lx_rule_for(dt) == LX_NONE) return -1;
    if (on) atomic_fetch_or(&kn_llama_x_dts, 1u << dt);
    else atomic_fetch_and(&kn_llama_x_dts, ~(1u << dt));
    return 0;
}

static int kn_llama_x_on(bench_dtype bdt) { return (atomic_load_explicit(&kn_llama_x_dts, memory_order_relaxed) >> bdt) & 1u; }

/* x rounded as llama.cpp rounds it for bdt, into a buffer the caller frees; NULL when the
 * heap is out of memory. */
static float *kn_llama_x(bench_dtype bdt, const float *x, int n, int cols) {
    float *r = malloc((size_t)n * (size_t)cols * sizeof(float));
    if (r) lx_round(lx_rule_for(bdt), x, r, n, cols);
    return r;
}

static void kn_matmul_run(tp_pool *pool, float *y, const float *x, int n, const void *w, bench_dtype dt,
                          bench_dtype bdt, int rows, int cols) {
    const kn_ops *ops = kn_for(kn_ops_now(), bdt, n);
    kn_mm_job job = {.ops = ops, .dt = dt, .y = y, .x = x, .w = w, .n = n, .rows = rows, .cols = cols};
    kn_xq_buf xb;
    int fallback;
    job.xq = kn_x_prepare(pool, ops, bdt, x, n, cols, &xb, &fallback);
    if (fallback) job.ops = &kn_ops_portable; /* out of memory: the exact kernel */
    int threads = tp_threads(pool);
    if (threads == 1 || (int64_t)rows * cols * n < KN_PARALLEL_MIN_MACS) {
        kn_mm_call(job.ops, dt, y, x, n, w, rows, cols, 0, rows, job.xq);
        free(xb.heap);
        return;
    }
    const int tasks = kn_tasks(threads, n);
    job.chunk = kn_chunk_rows(dt, rows, tasks, n);
    job.threads = threads;
    tp_run(pool, kn_mm_task, &job, tasks); /* a task past the last row computes nothing */
    free(xb.heap);
}

void kn_matmul(tp_pool *pool, float *y, const float *x, int n, const void *w, bench_dtype dt,
               int rows, int cols) {
    const bench_dtype bdt = kn_base_dt(dt); /* what the tables and x go by */
    assert((unsigned)bdt < BENCH_DTYPE_COUNT);
    assert(cols % (int)bench_dtype_block_elems(bdt) == 0);
    if (n <= 0 || rows <= 0 || cols <= 0) return;
    if (!kn_llama_x_on(bdt)) {
        kn_matmul_run(pool, y, x, n, w, dt, bdt, rows, cols);
        return;
    }
    float *xr = kn_llama_x(bdt, x, n, cols);
    if (xr) kn_matmul_run(pool, y, xr, n, w, dt, bdt, rows, cols);
    else    /* out of memory: a figure no check passes, rather than exact x under llama.cpp's name */
        for (size_t i = 0; i < (size_t)n * (size_t)rows; i++) y[i] = NAN;
    free(xr);
}

typedef struct kn_mm_multi_job {
    const kn_ops *ops;
    const kn_mm_out *outs;
    int count, n, cols, tasks;  /* tasks: kn_tasks, each the t-th share of every matrix */
    int threads;
    int align;          /* decode: the largest row alignment among the outputs */
    int64_t total;      /* decode: their rows end to end, each start rounded up to align */
    const float *x;
    const kn_xq8 *xq;   /* x quantised once for every output the table takes it for; else NULL */
    const kn_ops *xq_ops; /* the table xq was quantised for: an output on another int8 table runs portable */
    unsigned id;        /* kn_next_job's in prefill; 0 in decode, where no kernel keeps x */
} kn_mm_multi_job;

/* Output o's kernel: the table's, or the exact portable one where xq could not be made. */
static void kn_mm_one(const kn_mm_multi_job *j, const kn_mm_out *o, int r0, int r1) {
    const bench_dtype bdt = kn_base_dt(o->dt);
    const kn_ops *ops = kn_for(j->ops, bdt, j->n);
    const kn_xq8 *xq = NULL;
    if (kn_takes_xq(ops, bdt)) {
        if (j->xq && ops == j->xq_ops) xq = j->xq;
        else ops = &kn_ops_portable;
    } else if (kn_takes_split(ops, bdt, j->n)) xq = j->xq; /* NULL: the kernel widens instead */
    kn_mm_call(ops, o->dt, o->y, j->x, j->n, o->w, o->rows, j->cols, r0, r1, xq);
}

/* Decode's share `share` of the outputs' rows laid end to end (each output's start rounded up to
 * the largest row alignment among them): a thread then streams q's rows into k's into v's as one
 * run, where a share of each matrix a task restarted three streams every task (llama-110m f32
 * decode, Zen 5: docs/PERFORMANCE.md "Decode's shares and f32's loop"). */
static void kn_mm_multi_decode(const kn_mm_multi_job *j, int share) {
    int64_t lo, hi;
    kn_share_rows(share, j->tasks, j->threads, j->total, j->align, &lo, &hi);
    int64_t off = 0;
    for (int k = 0; k < j->count && off < hi; k++) {
        const kn_mm_out *o = &j->outs[k];
        const int64_t r0 = lo > off ? lo - off : 0, r1 = hi - off < o->rows ? hi - off : o->rows;
        if (r0 < r1) kn_mm_one(j, o, (int)r0, (int)r1);
        off += (o->rows + j->align - 1) / j->align * j->align;
    }
}

/* Task t takes the t-th contiguous share of every matrix's rows (decode: of their rows end to
 * end); what a kernel makes of x for one output it may keep for the next (kn_scratch_job). */
static void kn_mm_multi_task(void *arg, int task, int n_tasks) {
    const kn_mm_multi_job *j = arg;
    task = kn_task_share(task, n_tasks, j->threads);
    if (j->n == 1) {
        kn_mm_multi_decode(j, task);
        return;
    }
    if (j->id) kn_scratch_job(j->id);
    for (int k = 0; k < j->count; k++) {
        const kn_mm_out *o = &j->outs[k];
        int chunk = kn_chunk_rows(o->dt, o->rows, j->tasks, j->n);
        int r0 = task * chunk, r1 = r0 + chunk < o->rows ? r0 + chunk : o->rows;
        if (r0 < r1) kn_mm_one(j, o, r0, r1);
    }
    if (j->id) kn_scratch_job(0);
}

/* A number per kn_matmul_multi call, never 0 (kn_scratch_job's "none"). */
static unsigned kn_next_job(void) {
    static atomic_uint next;
    unsigned id;
    while (!(id = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1u)) {}
    return id;
}

void kn_matmul_multi(tp_pool *pool, const float *x, int n, int cols, const kn_mm_out *outs, int count) {
    for (int k = 0; k < count; k++)
        if (kn_llama_x_on(kn_base_dt(outs[k].dt))) {   /* each output's x rounded for its own dtype */
            for (int o = 0; o < count; o++) kn_matmul(pool, outs[o].y, x, n, outs[o].w, outs[o].dt, outs[o].rows, cols);
            return;
        }
    int threads = tp_threads(pool);
    const kn_ops *job_ops = kn_ops_now();
    int64_t macs = 0;
    const kn_ops *xq_ops = NULL;    /* the table that takes x quantised for one of the outputs */
    const kn_ops *split_ops = NULL; /* a table that takes x split for one of the outputs */
    for (int k = 0; k < count; k++) {
        const bench_dtype bdt = kn_base_dt(outs[k].dt);
        assert((unsigned)bdt < BENCH_DTYPE_COUNT);
        assert(cols % (int)bench_dtype_block_elems(bdt) == 0);
        macs += (int64_t)outs[k].rows * cols * n;
        const kn_ops *t = kn_for(job_ops, bdt, n);
        if (!xq_ops && kn_takes_xq(t, bdt)) xq_ops = t;
        if (kn_takes_split(t, bdt, n)) split_ops = t;
    }
    if (n <= 0 || cols <= 0 || count <= 0) return;
    kn_mm_multi_job job = {.ops = job_ops, .outs = outs, .count = count, .n = n, .cols = cols,
                           .tasks = kn_tasks(threads, n), .threads = threads, .x = x, .id = n > 1 ? kn_next_job() : 0};
    if (n == 1) {
        job.align = 8;
        for (int k = 0; k < count; k++)
            if (kn_row_align(outs[k].dt, 1) > job.align) job.align = kn_row_align(outs[k].dt, 1);
        for (int k = 0; k < count; k++) job.total += (outs[k].rows + job.align - 1) / job.align * job.align;
    }
    kn_xq_buf xb;
    xb.heap = NULL;
    job.xq_ops = xq_ops;
    if (xq_ops) job.xq = kn_xq_prepare(pool, xq_ops, x, n, cols, &xb);
    else if (split_ops) job.xq = kn_split_prepare(split_ops, x, cols, &xb);
    if (threads == 1 || macs < KN_PARALLEL_MIN_MACS) {
        if (job.id) kn_scratch_job(job.id);
        for (int k = 0; k < count; k++)
            if (outs[k].rows > 0) kn_mm_one(&job, &outs[k], 0, outs[k].rows);
        if (job.id) kn_scratch_job(0);
    } else {
        tp_run(pool, kn_mm_multi_task, &job, job.tasks);
    }
    free(xb.heap);
}

/* ======================= row conversions ======================= */

void kn_dequant_row(bench_dtype dt, const void *row, float *out, int cols) {
    switch (dt) {
    case BENCH_F32: memcpy(out, row, (size_t)cols * sizeof(float)); break;
    case BENCH_F16: {
        const uint16_t *h = row;
        for (int i = 0; i < cols; i++) out[i] = bench_f16_to_f32(h[i]);
        break;
    }
    case BENCH_BF16: {
        const uint16_t *h = row;
        for (int i = 0; i < cols; i++) out[i] = bench_bf16_to_f32(h[i]);
        break;
    }
    case BENCH_Q8_0: {
        const bench_block_q8_0 *b = row;
        for (int i = 0; i < cols / BENCH_Q8_0_BLOCK; i++) {
            float d = bench_f16_to_f32(b[i].d);
            for (int j = 0; j < BENCH_Q8_0_BLOCK; j++) out[i * BENCH_Q8_0_BLOCK + j] = d * (float)b[i].qs[j];
        }
        break;
    }
    default:
        assert(bench_dtype_is_quant(dt));
        qn_dequant_row(dt, row, out, cols);
    }
}

void kn_quant_row(bench_dtype dt, const float *in, void *out, int cols) {
    switch (dt) {
    case BENCH_F32: memcpy(out, in, (size_t)cols * sizeof(float)); break;
    case BENCH_F16: {
        uint16_t *h = out;
        for (int i = 0; i < cols; i++) h[i] = bench_f32_to_f16(in[i]);
        break;
    }
    case BENCH_BF16: {
        uint16_t *h = out;
        for (int i = 0; i < cols; i++) h[i] = bench_f32_to_bf16(in[i]);
        break;
    }
    case BENCH_Q8_0: {
        assert(cols % BENCH_Q8_0_BLOCK == 0);
        bench_block_q8_0 *b = out;
        for (int i = 0; i < cols / BENCH_Q8_0_BLOCK; i++) bench_quant_block_q8_0(in + (size_t)i * BENCH_Q8_0_BLOCK, b + i);
        break;
    }
    case BENCH_Q4_0: qn_quant_row_q4_0(in, out, cols); break;
    default: assert(!"kn_quant_row: bad dtype");
    }
}

/* ======================= SwiGLU ======================= */

/* The scalar form, which the reference (llama2.c) writes and the oracle's greedy ids hold to. */
static void kn_swiglu_scalar(float *h, const float *g, size_t n) {
    for (size_t j = 0; j < n; j++) {
        float val = h[j];
        val *= 1.0f / (1.0f + expf(-val));
        h[j] = val * g[j];
    }
}

/* expf is most of prefill's non-GEMM time after attention (about 9% of a llama-110m
 * q4_0 prefill on vnni, 1 thread: the SiLU loop and its 3.1M calls to expf). glibc
 * (2.27 on) computes expf with ARM's optimized-routines algorithm in double
 * precision: x * 32 / ln 2 = k + r, 2^(k/32) from a 32-entry table, a cubic in r,
 * one rounding to float at the end. Written here over 8 doubles a vector with the
 * operations, fusions and constants of the x86_64 build's __expf_fma (read from
 * its disassembly and data), it returns expf's bits: checked against libm's expf
 * for every float below the special-case threshold (tests/test_kernels.c checks a
 * sample). |x| >= 88 (0x42a in bits 20..30), infinities and NaNs go to libm's
 * scalar expf, as does every libm but glibc's, so the results are those of
 * kn_swiglu_scalar everywhere. */
#if KN_HAVE_X86 && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 27))
#include <immintrin.h>
#define KN_SWIGLU_VEC 1
__attribute__((target("avx2,fma,avx512f,avx512dq"))) static void kn_swiglu_avx512(float *h, const float *g, size_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 v = _mm512_loadu_ps(h + j);
        const __m512 x = _mm512_xor_ps(v, _mm512_set1_ps(-0.0f));
        const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(x), 20), _mm512_set1_epi32(0x7ff));
        if (_mm512_cmpgt_epi32_mask(top, _mm512_set1_epi32(0x42a))) {
            kn_swiglu_scalar(h + j, g + j, 16); /* a lane on libm's special path */
            continue;
        }
        const __m256 e0 = bench_expf8(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
        const __m256 e1 = bench_expf8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)));
        const __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(e0), e1, 1);
        const __m512 q = _mm512_div_ps(one, _mm512_add_ps(one, e));
        _mm512_storeu_ps(h + j, _mm512_mul_ps(_mm512_mul_ps(v, q), _mm512_loadu_ps(g + j)));
    }
    kn_swiglu_scalar(h + j, g + j, n - j);
}
#else
#define KN_SWIGLU_VEC 0
#endif

void kn_swiglu(float *h, const float *g, size_t n) {
#if KN_SWIGLU_VEC
    static _Atomic int vec = -1; /* every thread that races here computes the same answer */
    if (vec < 0) {
        __builtin_cpu_init();
        vec = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    }
    if (vec) {
        kn_swiglu_avx512(h, g, n);
        return;
    }
#endif
    kn_swiglu_scalar(h, g, n);
}

/* ======================= STREAM triad ======================= */

typedef struct kn_triad_job {
    kn_triad_fn fn;
    float *a;           /* (n) written */
    float *b, *c;       /* (n) read */
    size_t n;
    int init;           /* 1: first-touch the arrays instead of timing the triad */
} kn_triad_job;

static void kn_triad_task(void *arg, int task, int n_tasks) {
    const kn_triad_job *j = arg;
    /* contiguous parts, 16-float (64-byte) aligned so no cache line is shared */
    size_t per = (j->n / (size_t)n_tasks + 15) & ~(size_t)15;
    size_t lo = (size_t)task * per, hi = lo + per < j->n ? lo + per : j->n;
    if (lo >= hi) return;
    if (j->init) {
        /* The thread that runs a part also touches it first, so its pages are
         * faulted in (and placed) before any timing. */
        for (size_t i = lo; i < hi; i++) { j->a[i] = 0.0f; j->b[i] = 1.0f; j->c[i] = 2.0f; }
        return;
    }
    j->fn(j->a + lo, j->b + lo, j->c + lo, 3.0f, hi - lo);
}

static double kn_now_s(void) { return 1e-9 * (double)ut_now_ns(); }

/* Reported bytes are 3 x bytes_per_array per pass, as STREAM counts them: the
 * write-allocate read of `a` that ordinary stores also cause is not counted,
 * so actual bus traffic is about 4/3 of the figure. */
double kn_triad_bandwidth(tp_pool *pool, size_t bytes_per_array, int reps) {
    size_t n = bytes_per_array / sizeof(float);
    if (n == 0) return 0.0;
    if (reps < 1) reps = 1;
    size_t alloc = (n * sizeof(float) + 63) & ~(size_t)63;
    float *a = aligned_alloc(64, alloc), *b = aligned_alloc(64, alloc), *c = aligned_alloc(64, alloc);
    double best = 0.0;
    if (!a || !b || !c) goto out;
    int tasks = tp_threads(pool);
    kn_triad_job job = {.fn = kn_ops_now()->triad, .a = a, .b = b, .c = c, .n = n, .init = 1};
    tp_run(pool, kn_triad_task, &job, tasks);
    job.init = 0;
    tp_run(pool, kn_triad_task, &job, tasks); /* warm-up pass, untimed */
    best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = kn_now_s();
        tp_run(pool, kn_triad_task, &job, tasks);
        double dt = kn_now_s() - t0;
        if (dt < best) best = dt;
    }
    best = best > 0.0 ? 3.0 * (double)(n * sizeof(float)) / best : 0.0;
out:
    free(a);
    free(b);
    free(c);
    return best;
}

/* ======================= read-only stream ======================= */

typedef struct kn_read_job {
    kn_read_fn fn;
    float *buf;         /* (n) */
    size_t n;
    int init;           /* 1: first-touch instead of reading */
    float sums[256];    /* one per task, so the reads cannot be optimised away */
} kn_read_job;

static void kn_read_task(void *arg, int task, int n_tasks) {
    kn_read_job *j = arg;
    size_t per = (j->n / (size_t)n_tasks + 15) & ~(size_t)15;
    size_t lo = (size_t)task * per, hi = lo + per < j->n ? lo + per : j->n;
    if (lo >= hi) return;
    if (j->init) {
        for (size_t i = lo; i < hi; i++) j->buf[i] = (float)(i & 7);
        return;
    }
    j->sums[task & 255] += j->fn(j->buf + lo, hi - lo);
}

/* Decode reads each weight once per token and writes almost nothing, so its
 * bound is a read-only stream over a working set of the same size: a small
 * model stays partly in the L3 from one token to the next, which a 64 MiB
 * triad (3 arrays, a third of its traffic writes) does not see. */
double kn_read_bandwidth(tp_pool *pool, size_t bytes, int reps) {
    size_t n = bytes / sizeof(float);
    if (n == 0) return 0.0;
    if (reps < 1) reps = 1;
    float *buf = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
    kn_read_job *job = calloc(1, sizeof *job);
    double best = 0.0;
    if (!buf || !job) goto out;
    int tasks = tp_threads(pool) < 256 ? tp_threads(pool) : 256;
    *job = (kn_read_job){.fn = kn_ops_now()->read, .buf = buf, .n = n, .init = 1};
    tp_run(pool, kn_read_task, job, tasks);
    job->init = 0;
    tp_run(pool, kn_read_task, job, tasks); /* warm-up pass, untimed */
    best = INFINITY;
    /* each rep times both access styles, so drift falls on them alike */
    const kn_read_fn styles[2] = {kn_ops_now()->read, kn_ops_now()->read_pf};
    for (int r = 0; r < reps; r++)
        for (int st = 0; st < 2; st++) {
            if (!styles[st]) continue;
            job->fn = styles[st];
            double t0 = kn_now_s();
            tp_run(pool, kn_read_task, job, tasks);
            double dt = kn_now_s() - t0;
            if (dt < best) best = dt;
        }
    best = best > 0.0 ? (double)(n * sizeof(float)) / best : 0.0;
out:
    free(buf);
    free(job);
    return best;
}

/* ======================= compute peak ======================= */

typedef struct kn_peak_job {
    kn_peak_fn fn;
    long iters;
    double ops[256];    /* per task */
    float sink[256];
} kn_peak_job;

static void kn_peak_task(void *arg, int task, int n_tasks) {
    kn_peak_job *j = arg;
    (void)n_tasks;
    j->ops[task & 255] = j->fn(j->iters, &j->sink[task & 255]);
}

/* One pass on every thread at once: the ops of all of them over the wall time. */
static double kn_peak_pass(tp_pool *pool, kn_peak_job *j, int tasks) {
    double t0 = kn_now_s();
    tp_run(pool, kn_peak_task, j, tasks);
    double dt = kn_now_s() - t0, ops = 0;
    for (int i = 0; i < tasks; i++) ops += j->ops[i];
    return dt > 0 ? ops / dt : 0;
}

static double kn_peak_run(tp_pool *pool, kn_peak_fn fn) {
    if (!fn) return 0.0;
    kn_peak_job *j = calloc(1, sizeof *j);
    if (!j) return 0.0;
    int tasks = tp_threads(pool) < 256 ? tp_threads(pool) : 256;
    j->fn = fn;
    /* calibrate to ~50 ms a pass, then best of 5 */
    j->iters = 1 << 16;
    double rate = kn_peak_pass(pool, j, tasks);
    if (rate > 0) {
        double per_iter = j->ops[0] / (double)j->iters;
        j->iters = (long)(0.05 * rate / tasks / per_iter) + 1;
    }
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double g = kn_peak_pass(pool, j, tasks);
        if (g > best) best = g;
    }
    free(j);
    return best / 1e9;
}

double kn_peak_gops(tp_pool *pool, int int8) {
    const kn_ops *ops = kn_ops_now();
    return kn_peak_run(pool, int8 ? ops->peak_int8 : ops->peak_f32);
}

double kn_peak_prefill_gops(tp_pool *pool, bench_dtype dt, const char **arith, const char **family) {
    const kn_family *t = (unsigned)dt < BENCH_DTYPE_COUNT ? kn_tuned_for(dt, 2) : NULL, *f = t ? t : kn_family_now();
    const kn_ops *ops = f->ops;
    kn_peak_fn fn = ops->peak_f32;
    *arith = "f32 FMA";
    if (dt == BENCH_BF16 && ops->bf16_dot && ops->peak_bf16) {
        fn = ops->peak_bf16;
        *arith = "bf16 dot";
    } else if ((unsigned)dt < BENCH_DTYPE_COUNT && kn_takes_xq(ops, dt) && ops->peak_int8) {
        fn = ops->peak_int8;
        *arith = "int8 dot";
    }
    *family = f->name;
    return kn_peak_run(pool, fn);
}
