/* "auto" chosen by measurement: which exact kernel family runs each dtype's matmuls, in
 * decode and in prefill, timed on this machine at the model's working set.
 *
 * Why: the flags alone pick the widest family, and on a core whose 512-bit operations are
 * double-pumped (Zen 4) a 256-bit kernel can decode f16 faster (issue 29). Only the exact
 * families compete (avx512, avx2; portable where no other runs), so the choice changes speed,
 * not what the model computes beyond the summation order of a dot product, which the oracle
 * and k256 tests accept from every exact family.
 *
 * The measurement is kept in a cache file, keyed by the CPU (model name, family/model/stepping,
 * a hash of its flags), this bench build (the executable's GNU build-id) and the thread count,
 * so that it is made once per machine and build. It is a matter of seconds: per dtype, the
 * model's matrices of that dtype once per family for decode (n = 1, every byte read), the
 * largest one for prefill (n = KT_PREFILL_N), a warm-up round and KT_ROUNDS timed rounds with
 * the families interleaved, the fastest round of each kept. A family is chosen over the
 * flags' first only when it is faster by more than KT_MARGIN, so that noise does not flip it.
 */
#ifndef BENCH_KERNELS_TUNE_H
#define BENCH_KERNELS_TUNE_H

#include <stddef.h>

#include "engines/abi/dtype.h"
#include "threadpool.h"

#define KT_PREFILL_N 32
#define KT_ROUNDS 3
#define KT_MARGIN 0.03
#define KT_MAX_FAMILIES 4

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
    double bytes;                           /* the working set timed */
} kt_entry;

typedef struct kt_table {
    char key[320];
    int n;
    kt_entry e[2 * BENCH_DTYPE_COUNT];
    int from_cache;                         /* 1: read from the cache file, 0: measured now */
} kt_table;

/* This machine's, build's and thread count's key ("cpu=...;fms=...;flags=...;build=...;threads=N"). */
void kt_key(int threads, char *buf, size_t len);

/* The cache file: $BENCH_KERNELS_CACHE, else $XDG_CACHE_HOME/bench/kernels-auto.tsv, else
 * $HOME/.cache/bench/kernels-auto.tsv; NULL when none of them is set. */
const char *kt_cache_path(char *buf, size_t len);

/* Times every exact family this CPU runs on the matrices, per dtype they hold, into out
 * (whose key the caller set). Leaves auto's choices as they were. 0, or -1 with err. */
int kt_measure(tp_pool *pool, const kt_mat *m, int n, kt_table *out, char *err, size_t errlen);

/* The entries of key in the cache file: 0 found (every dtype of dts, a bit per dtype),
 * 1 not there (or not every dtype), -1 unreadable (err says why). */
int kt_cache_load(const char *path, const char *key, unsigned dts, kt_table *out, char *err, size_t errlen);
/* Writes t's entries into the cache file, keeping other keys' and t's other dtypes'; atomic. */
int kt_cache_store(const char *path, const kt_table *t, char *err, size_t errlen);

/* Makes auto run t's choices. 0, or -1 where a family is not one this CPU runs (a cache from
 * another machine would have another key, so that means a damaged file). */
int kt_apply(const kt_table *t);

/* "f16 decode avx2 (17.0 GB/s; avx512 12.1), f16 prefill avx512 (...)" into buf. */
void kt_describe(const kt_table *t, char *buf, size_t len);

enum { KT_OFF, KT_READ, KT_TUNE };
/* The mode $BENCH_KERNELS_TUNE asks for: "0"/"off" KT_OFF, "read" KT_READ (the cache only),
 * else KT_TUNE (measure what the cache lacks, and keep it). */
int kt_mode_from_env(void);

/* The whole of it for an engine on the CPU with "auto": the cache's entries for the dtypes of
 * m, measured and stored first where missing and mode is KT_TUNE; then applied. note gets a
 * line for the person running it (what auto runs, and whether measured now or read).
 * 0, or -1 with err (the choice is then the flags'). */
int kt_auto(tp_pool *pool, const kt_mat *m, int n, int mode, char *note, size_t notelen, char *err, size_t errlen);

#endif
