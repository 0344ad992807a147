/* Compute kernels of the forward pass, for weights in every bench_dtype,
 * with AVX-512 / AVX2 / portable paths chosen once at run time. */
#ifndef BENCH_KERNELS_H
#define BENCH_KERNELS_H

#include "engines/abi/dtype.h"
#include <stddef.h>

#include "q4r8.h"
#include "threadpool.h"

/* Kernel families: the rows of kernels.c's kn_families, best first (bench list and kn_isa_about
 * say what each runs on; docs/extending.md how to add one). "auto" is the exact family this CPU
 * runs that the table scores highest. The int8 families differ from their exact siblings only
 * in the block types, where x's rounding to int8 adds an error bounded in kernels_int8.inc, and
 * the bf16 one from avx512 only in bf16 prefill, where x's rounding to bf16 adds one bounded in
 * kernels_bf16.inc; they run only when named. kn_init picks auto; BENCH_ISA=NAME forces one. */
void kn_init(void);
const char *kn_isa(void);               /* the family in use */
int kn_set_isa(const char *isa);        /* a family or "auto"; 0 on success, -1 if unknown or the CPU lacks it */
int kn_isa_count(void);
/* The i-th family, best first (NULL past the end); *runs_here: whether this CPU runs it. */
const char *kn_isa_name(int i, int *runs_here);
/* The reference family: plain C, exact, run on every CPU (the table's last row) */
const char *kn_isa_reference(void);
int kn_isa_known(const char *isa);      /* a family name or "auto", whatever the CPU */
int kn_isa_exact(const char *isa);      /* 1: the family (or "auto") computes every dtype exactly (no x rounding) */
/* 1: a family auto may pick (by default or by measurement): exact and not named-only (amx) */
int kn_isa_auto_candidate(const char *isa);
int kn_q8_int8(void);                   /* 1: the family in use runs Q8_0 on int8 activations */
int kn_x_int8(bench_dtype dt);          /* 1: the family in use rounds x to int8 for dt's matmuls */
int kn_bf16_dot(void);                  /* 1: the family in use rounds x to bf16 for bf16 prefill */
/* The layout dt's matrices are rearranged into at load, where the families in use (auto's
 * choice for dt's decode and prefill where auto is on) run it with kernels of their own, so
 * that rearranging pays: Q4_0 interleaved 16 rows at a time (KN_Q4_0_G16) where vnni runs both
 * phases or avx2-int8 decodes, else within rows (KN_Q4_0_R8: avx512 with the split decode,
 * avx512-bf16, amx, and vnni's decode beside amx's prefill);
 * bf16 grouped (KN_BF16_R16) where prefill runs on bf16 dot products; dt itself where none. */
bench_dtype kn_repack_dt(bench_dtype dt);
int kn_repacks(bench_dtype dt);         /* kn_repack_dt(dt) != dt */
/* 1: the family in use decodes dt on x split into int8 parts, exactly (Q8_0, Q4_0 on avx512
 * where the CPU has AVX512-VNNI and $BENCH_EXACT_SPLIT is not 0) */
int kn_x_split(bench_dtype dt);
/* The family a name selects here (NULL or "" is "auto"); NULL when unknown or this CPU cannot run it. */
const char *kn_isa_resolve(const char *isa);
/* auto, chosen by measurement (kernels_tune.h): the exact family that runs dt's matmuls in
 * decode (prefill 0: n == 1) or prefill while "auto" is in use. family NULL: auto's table again.
 * -1: not a family, not exact, or this CPU cannot run it. A family named with kn_set_isa
 * ignores these. */
int kn_set_tuned(bench_dtype dt, int prefill, const char *family);
const char *kn_auto_family(bench_dtype dt, int prefill);   /* what auto runs for dt now */
/* Production numerics (engine.h engine_numerics): kn_set_tuned that also takes a family that
 * rounds x for dt (kn_isa_rounds), which the caller has checked on the model in hand. */
int kn_set_tuned_rounding(bench_dtype dt, int prefill, const char *family);
/* Production numerics' yardstick (llama_x.h): on, every matmul of dt's weights takes x rounded
 * as llama.cpp's CPU path rounds it, whatever family runs it, so that an exact family's pass
 * measures llama.cpp's own error on the model in hand. Process-wide, like auto's choices: for
 * engine_numerics_check's pass only. -1 where llama.cpp rounds no x for dt (f32). */
int kn_set_llama_x(bench_dtype dt, int on);
/* 1: family isa rounds x for dt's weights: to int8 (vnni, avx2-int8 on Q8_0, Q4_0, ...) or to
 * bf16 (avx512-bf16 on bf16, in prefill). */
int kn_isa_rounds(const char *isa, bench_dtype dt);
/* Every choice of auto that rounds x is undone: at each engine's start, since the choices are
 * process-wide and a check that accepted one held for an earlier engine's model only. */
void kn_drop_rounding(void);
int kn_auto_active(void);               /* 1: "auto" is in use (not a family asked by name) */
/* One line on what a family runs on and what it rounds (--kernels' help); NULL: not a family. */
const char *kn_isa_about(const char *isa);
/* Which families kn_isa_list names. */
typedef enum kn_list {
    KN_LIST_ALL = 0,
    KN_LIST_RUNNABLE,       /* those this CPU runs */
    KN_LIST_X_INT8,         /* those that round x to int8 for the block types */
    KN_LIST_X_BF16,         /* those that round x to bf16 for bf16 prefill */
    KN_LIST_NAMED_ONLY,     /* exact, but auto never picks them */
} kn_list;
/* "vnni, avx512, ..." into buf, best first: the families of kind which; returns how many. */
int kn_isa_list(char *buf, size_t len, kn_list which);

/* y (n, rows) = x (n, cols) . W^T, W (rows, cols) row-major in dtype dt.
 * n == 1 is decode (matrix-vector); n > 1 is batched prefill (matrix-matrix).
 * cols is a whole number of dt's blocks. Parallel over rows on the pool.
 * The portable family runs block types other than Q8_0 on quant.c's exact kernel. */
void kn_matmul(tp_pool *pool, float *y, const float *x, int n,
               const void *w, bench_dtype dt, int rows, int cols);

/* Several products of the same x (n, cols), e.g. q, k and v, in one hand-off to
 * the pool: each thread takes its share of every matrix's rows, so the threads
 * meet once instead of once per matrix (decode makes ~85 products a token). */
typedef struct kn_mm_out {
    float *y;           /* (n, rows) */
    const void *w;      /* (rows, cols) in dt */
    bench_dtype dt;
    int rows;
} kn_mm_out;
void kn_matmul_multi(tp_pool *pool, const float *x, int n, int cols, const kn_mm_out *outs, int count);

/* One row of W as f32 (the embedding lookup). */
void kn_dequant_row(bench_dtype dt, const void *row, float *out, int cols);
/* f32 -> dt, for the writers (Q8_0, Q4_0: cols a multiple of 32); dt one of bench_dtype_writable. */
void kn_quant_row(bench_dtype dt, const float *in, void *out, int cols);
/* SwiGLU in place: h[i] = silu(h[i]) * g[i], silu(v) = v * (1 / (1 + expf(-v))), bitwise as
 * that scalar expression computes it with this libm (kernels.c says how). */
void kn_swiglu(float *h, const float *g, size_t n);

/* Bytes per second of a STREAM-style triad a[i] = b[i] + s*c[i] over arrays of
 * `bytes_per_array`, on the pool's threads; best of `reps`. Counts 3 arrays of traffic. */
double kn_triad_bandwidth(tp_pool *pool, size_t bytes_per_array, int reps);

/* Bytes per second of a read-only stream (a sum with vector accumulators) over one
 * buffer of `bytes`, split across the pool's threads; best of `reps` over two access
 * styles, plain and with the decode kernels' software prefetch. With bytes =
 * the weights decode reads per token, this is decode's bound at that working set. */
double kn_read_bandwidth(tp_pool *pool, size_t bytes, int reps);

/* The family's peak in G operations/s on the pool's threads (a multiply-add counts 2),
 * from multiply-adds held in registers: int8 = 0, f32 FMA in its vector width; int8 = 1,
 * the int8 dot its Q8_0 path uses (0 when the family has none). Best of 5 passes of ~50 ms. */
double kn_peak_gops(tp_pool *pool, int int8);
/* The peak (G operations a second, a multiply-add counting 2) of the arithmetic dt's prefill runs
 * on, in the family that runs it (auto's measured choice for dt where auto is on): the bf16 dot
 * where it rounds x to bf16 for bf16 weights, the int8 dot where it takes x quantised for dt,
 * else the f32 FMA; *arith names that arithmetic and *family the family. */
double kn_peak_prefill_gops(tp_pool *pool, bench_dtype dt, const char **arith, const char **family);

#endif
