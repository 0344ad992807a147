/* "auto" chosen by measurement: which exact kernel family runs each dtype's matmuls, in
 * decode and in prefill, timed on this machine at the model's working set.
 *
 * Why: the flags alone pick the widest family, and on a core whose 512-bit operations are
 * double-pumped (Zen 4) a 256-bit kernel can decode f16 faster (issue 29). The exact
 * families compete (avx512, avx2; portable where no other runs), so the choice changes speed,
 * not what the model computes beyond the summation order of a dot product, which the oracle
 * and k256 tests accept from every exact family. Under production numerics (engine.h
 * engine_numerics, kt_auto_numerics) the int8 families compete too for the dtypes whose x they
 * round, and one that wins runs only once the caller's check on the model accepts it.
 *
 * The measurement is kept in a cache file, keyed by the CPU (model name, family/model/stepping,
 * a hash of its flags), this bench build (the executable's GNU build-id) and the thread count,
 * so that it is made once per machine and build. It is a matter of seconds: per dtype, the
 * model's matrices of that dtype once per family for decode (n = 1, every byte read), the
 * largest one for prefill (n = KT_PREFILL_N), a warm-up round and KT_ROUNDS timed rounds with
 * the families interleaved, the fastest round of each kept. A family is chosen over the
 * flags' first only when it is faster by more than KT_MARGIN (KT_MARGIN_DECODE in decode), so
 * that noise does not flip it (kt_pick).
 *
 * It stays right in two ways (issue 37). A measurement is kept only when it was taken on a
 * quiet machine: /proc/stat is read around it (util/ut_cpuload.h, the rule bench run's busy
 * warning uses), and when other processes used more than UT_BUSY_OTHERS of the CPUs the choice
 * holds for this process only, not written, said once on stderr: a choice made beside another
 * job would be that job's, kept for every later run. And a kept choice is re-checked at each
 * start, cheaply: the chosen family and the runner-up timed once each on the model's own
 * matrices (once a day: KT_RECHECK_AGE_S); when the runner-up is then faster by more than
 * KT_RECHECK_MARGIN, all is measured again. `bench list` shows when and under what load each entry was measured; `bench list
 * --retune` measures every entry of this machine and build again.
 */
#ifndef BENCH_KERNELS_TUNE_H
#define BENCH_KERNELS_TUNE_H

#include <stddef.h>

#include "engines/abi/dtype.h"
#include "threadpool.h"

#define KT_PREFILL_N 32
#define KT_ROUNDS 3
#define KT_MARGIN 0.03
/* Decode's margin, wider: the exact families all stream the same bytes, so what separates them
 * is a few per cent that the timing of one pass over the matrices does not rank reliably. On the
 * Zen 5 guest of docs/PERFORMANCE.md one build's tuner had avx2 4.6-5.5% ahead of avx512 in f32,
 * f16 and bf16 decode, another's avx512 ahead or level, and `bench generate` pinned to each
 * decoded bf16 3% faster on avx512 (165.2 against 160.3 tokens/s, 8 rounds). */
#define KT_MARGIN_DECODE 0.08
#define KT_MAX_FAMILIES 6      /* the exact families and, under production numerics, the int8 ones */
/* The re-check times each family once, not the best of KT_ROUNDS, so one pass's noise (a few
 * percent on a quiet machine, more on a busy one) must not send every start to a re-measure. */
#define KT_RECHECK_MARGIN 0.10
/* A kept choice is re-checked at a start when neither its measurement nor a quiet re-check
 * confirmed it within a day: what makes a choice stale is a machine that changed (its
 * neighbours, firmware, kernel), not the minute, and a re-check inside every bench run
 * worker's load would fault a mapped model's pages in there (`bench list --retune` is for now). */
#define KT_RECHECK_AGE_S (24 * 3600.0)

/* One matrix the forward pass multiplies by: (rows, cols) in dt, row-major. */
typedef struct kt_mat {
    const void *w;
    bench_dtype dt;
    int rows, cols;
} kt_mat;

/* What was measured for one dtype in one phase. */
typedef struct kt_entry {
    bench_dtype dt;
    int prefill;                            /* 0: decode (GB/s of weights), 1: prefill (GFLOP/s) */
    char chosen[16];
    int n_families;
    char family[KT_MAX_FAMILIES][16];
    double rate[KT_MAX_FAMILIES];           /* GB/s or GFLOP/s, the fastest round */
    double bytes;                           /* the working set timed: bytes (decode) or FLOP (prefill) */
    int rows, cols;                         /* the largest matrix timed; 0: unknown (a v1 line) */
    double when;                            /* Unix time of the measurement; 0: unknown (a v1 line) */
    double load1;                           /* the 1-minute load average at its end; NAN: unknown */
    double others;                          /* share of the CPUs other processes used during it; NAN: unknown */
    double checked;                         /* Unix time a quiet re-check last confirmed it; 0: never */
    /* Production numerics (engine.h engine_numerics): a family that rounds x for dt was faster
     * than the best exact one (exact) by more than KT_MARGIN. PENDING: not checked yet, exact
     * runs; ACCEPTED: chosen, it passed the check on the model (its figures below); REFUSED:
     * exact chosen, the family dropped from family[] so the re-check never times it again. */
    enum { KT_ACC_NONE, KT_ACC_PENDING, KT_ACC_ACCEPTED, KT_ACC_REFUSED } acc;
    char acc_family[16], exact[16];
    double kl_mean, kl_max, err_rel, top1; /* the check's: nats, relative RMS, fraction */
    /* the bound it was held to: llama.cpp's own figures on the model, the same pass with x
     * rounded as llama.cpp rounds it (llama_x.h); NAN: not known (a version 3 line) */
    double bound_kl_mean, bound_err_rel, bound_top1;
} kt_entry;

#define KT_KEY_MAX 320
typedef struct kt_table {
    char key[KT_KEY_MAX];
    int n;
    kt_entry e[2 * BENCH_DTYPE_COUNT];
    int from_cache;                         /* 1: read from the cache file, 0: measured now */
    int busy;                               /* measured now on a busy machine: not to be kept */
    int production;                         /* production numerics: the int8 families compete too */
} kt_table;

/* This machine's, build's and thread count's key ("cpu=...;fms=...;flags=...;build=...;threads=N"). */
void kt_key(int threads, char *buf, size_t len);

/* The cache file: $BENCH_KERNELS_CACHE, else $XDG_CACHE_HOME/bench/kernels-auto.tsv, else
 * $HOME/.cache/bench/kernels-auto.tsv; NULL when none of them is set. */
const char *kt_cache_path(char *buf, size_t len);

/* Times every exact family this CPU runs on the matrices, per dtype they hold, into out
 * (whose key the caller set), with the machine's load over the measurement in each entry and
 * out->busy set when others used the CPUs. Leaves auto's choices as they were. 0, or -1 with err. */
int kt_measure(tp_pool *pool, const kt_mat *m, int n, kt_table *out, char *err, size_t errlen);

/* The cheap check of kept choices on the matrices: per entry of t, its chosen family and the
 * runner-up (the next best rate it recorded) timed on them (chosen, runner-up, chosen: the
 * first pass also faults the weights in). 1 when a runner-up is faster than the choice by
 * more than KT_RECHECK_MARGIN (why says which), 0 when every choice holds, -1 out of memory. */
int kt_recheck(tp_pool *pool, const kt_mat *m, int n, const kt_table *t, char *why, size_t whylen);

/* Measures every entry of key in the cache file again on matrices made to each entry's shape
 * and working set, and keeps them when the machine was quiet. note says what happened.
 * 0 measured (kept or not), 1 nothing of key in the file, -1 with err. */
int kt_retune(tp_pool *pool, const char *path, const char *key, char *note, size_t notelen, char *err, size_t errlen);

/* For the tests only: every timing of `family` is multiplied by factor (1 or NULL: none), so
 * that a kept choice can be made to look stale. */
void kt_test_scale(const char *family, double factor);
/* The family n rates choose (rate[f]: family f's GB/s or GFLOP/s; rounds[f]: f rounds x), base
 * the index of the flags' own (-1: none): the fastest exact family where it beats base by more
 * than the phase's margin (KT_MARGIN, KT_MARGIN_DECODE), else base; *rounding, of the families
 * that round x and beat that choice by the same margin, the first listed unless a later one
 * beats it by the margin too (then that one, by the same rule), or -1. */
int kt_pick(const double *rate, const int *rounds, int n, int base, int prefill, int *rounding);

/* The entries of key in the cache file: 0 found (every dtype of dts, a bit per dtype),
 * 1 not there (or not every dtype), -1 unreadable (err says why). */
int kt_cache_load(const char *path, const char *key, unsigned dts, kt_table *out, char *err, size_t errlen);
/* The distinct keys of the cache file that begin with prefix, in the file's order, into keys
 * (at most max): how `bench list` finds production numerics' entries, one key per model.
 * The count (0 when there is no file), or -1 with err. */
int kt_cache_keys(const char *path, const char *prefix, char (*keys)[KT_KEY_MAX], int max, char *err, size_t errlen);
/* The key of production numerics' entries for a model: base (kt_key's) and the model's id. */
void kt_production_key(const char *base, const char *model_id, char *buf, size_t len);
/* Writes t's entries into the cache file, keeping other keys' and t's other dtypes'; atomic. */
int kt_cache_store(const char *path, const kt_table *t, char *err, size_t errlen);

/* Makes auto run t's choices. 0, or -1 where a family is not one this CPU runs (a cache from
 * another machine would have another key, so that means a damaged file). */
int kt_apply(const kt_table *t);

/* "f16 decode avx2 (17.0 GB/s; avx512 12.1), f16 prefill avx512 (...)" into buf. */
void kt_describe(const kt_table *t, char *buf, size_t len);
/* When and under what load e was measured: "2025-06-01 12:00 UTC, load average 0.80, others
 * used 3% of the CPUs" (and "; confirmed by a quiet re-check 2025-06-02 09:00 UTC"), or "when
 * and load not recorded (an older bench)". */
void kt_describe_when(const kt_entry *e, char *buf, size_t len);

enum { KT_OFF, KT_READ, KT_TUNE };
/* The mode $BENCH_KERNELS_TUNE asks for: "0"/"off" KT_OFF, "read" KT_READ (the cache only),
 * else KT_TUNE (measure what the cache lacks, and keep it). */
int kt_mode_from_env(void);

/* The whole of it for an engine on the CPU with "auto": the cache's entries for the dtypes of
 * m, re-checked (kt_recheck) where mode is KT_TUNE and a day has passed, measured where missing or stale and mode is
 * KT_TUNE and stored when the machine was quiet; then applied. note gets a
 * line for the person running it (what auto runs, and whether measured now or read).
 * 0, or -1 with err (the choice is then the flags'). */
int kt_auto(tp_pool *pool, const kt_mat *m, int n, int mode, char *note, size_t notelen, char *err, size_t errlen);
/* kt_auto under production numerics when numerics_id is not NULL: the key gets
 * ";numerics=production;" and numerics_id (which names the model: a check holds for the model
 * it ran on), the int8 families compete where they round x (kn_isa_rounds), and a table whose
 * entries are PENDING is neither kept nor applied beyond their exact family: the caller checks
 * each (kt_settle), then kt_commit. out (optional) gets the table. */
int kt_auto_numerics(tp_pool *pool, const kt_mat *m, int n, int mode, const char *numerics_id, kt_table *out, char *note,
                     size_t notelen, char *err, size_t errlen);
/* Entry e's check: ok accepts its int8 family, else its exact one is chosen. */
void kt_settle(kt_entry *e, int ok, double kl_mean, double kl_max, double err_rel, double top1);
/* The bound kt_settle's figures were held to (kt_entry's bound_*), before kt_settle. */
void kt_settle_bound(kt_entry *e, double kl_mean, double err_rel, double top1);
/* Applies t (settled), keeps it where it was measured on a quiet machine, and appends to note
 * what the checks found. 0, or -1 with err. */
int kt_commit(kt_table *t, char *note, size_t notelen, char *err, size_t errlen);

#endif
