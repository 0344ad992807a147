/* An engine: the inference core composed with one module of each family.
 *
 *   engine_create   parse the model, dlopen the modules, load the weights
 *   engine_prefill  run the prompt through the model as one batch
 *   engine_decode   one token
 * The caller times the phases; the engine reports the modules' counters.
 */
#ifndef BENCH_ENGINE_H
#define BENCH_ENGINE_H

#include <limits.h>

#include "acc_compare.h"
#include "engines/core/model/model.h"
#include "sampler.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "engines/abi/dtype.h"
#include "engines/abi/module.h"

/* Whether Q4_0 weights are rearranged at load (engine_spec.repack): one polarity from the
 * scenario's "repack" to here, the default being zero so that a zeroed spec rearranges. */
typedef enum { ENGINE_REPACK_AUTO = 0, ENGINE_REPACK_OFF = 1 } engine_repack;

/* What kernels "auto" may run (engine_spec.numerics, `--numerics`, the scenario's "numerics";
 * docs/accuracy.md "Production numerics"). PRODUCTION (0, what a zeroed spec gets): where the
 * tuner measures (kernels_tune.h), a family that rounds x for a weight type, to int8 for an
 * integer type (vnni, avx2-int8) or to bf16 for bf16 prefill (avx512-bf16), may run that type when it is faster and its logits on the model in hand,
 * over a short teacher-forced pass, are within llama.cpp's own error on that type
 * (engine_numerics_check). EXACT: only the exact families, as before issue 37. A family named
 * with `kernels` runs as named either way. */
typedef enum { ENGINE_NUMERICS_PRODUCTION = 0, ENGINE_NUMERICS_EXACT = 1 } engine_numerics;
#define ENGINE_NUMERICS_NAMES {"production", "exact", NULL}

/* The forward pass's activations (engine_spec.scratch, `--scratch`, the scenario's "scratch").
 * KEEP (0, what a zeroed spec gets): one block from the allocator module, kept between passes
 * and grown when a pass needs more, as production engines reserve their compute buffers once;
 * PASS: a block taken and given back every pass, so that an allocator study has the allocator
 * on the engine's path (with glibc's malloc a prefill's block is mapped and faulted in again
 * every pass). CPU only: the cuda device has its own (its `scratch` option). */
typedef enum { ENGINE_SCRATCH_KEEP = 0, ENGINE_SCRATCH_PASS = 1 } engine_scratch;
#define ENGINE_SCRATCH_NAMES {"keep", "pass", NULL}

/* engine_spec.ubatch's default, and its least value: each pass of a longer prompt then holds
 * half of it or more, 16 tokens, past the matrix-vector kernels' 1 to 8 */
#define ENGINE_UBATCH 512
#define ENGINE_UBATCH_MIN 32
#define ENGINE_RESERVE_UBATCH INT_MAX   /* engine_spec.reserve_tokens: a pass of ubatch tokens */

typedef struct engine_spec {
    const char *model_path;
    const char *tokenizer_path;     /* optional llama2.c tokenizer.bin */
    int tokenizer_fallback;         /* an unknown tokenizer model or pre-tokenizer: warn, not fail */
    const char *loader;             /* module names; NULL: "mmap", "prealloc", "libc" */
    const char *kv;
    const char *alloc;
    bench_opts loader_opts, kv_opts, alloc_opts;
    /* Where the forward pass runs: NULL or "cpu", the core's own; else a device module
     * ("cuda": device_cuda.so), with the loader and KV modules built for that device. */
    const char *device;
    bench_opts device_opts;
    /* The CPU kernel family (kernels.h, kn_isa_list: bench list names them); NULL or "auto": the
     * best this CPU runs. Process-wide: the last engine created sets it. */
    const char *kernels;
    /* The KV cache's element types (engines/abi/dtype.h), as llama.cpp's -ctk/-ctv: BENCH_F32
     * (0, the exact reference) or another row of kv_types.h's table, for K and V apart. The kv
     * module must declare the type (kv.h cache_types), else engine_create refuses it naming
     * what the module stores. */
    bench_dtype kv_k_type, kv_v_type;
    /* Nonzero: kv_k_type/kv_v_type are ENGINE_KV_DEFAULT because no one named a type, so a kv
     * module that does not store them (an older out-of-tree one) runs f32, the type every module
     * stores, instead of refusing; engine_kv_k_type says which ran. */
    int kv_defaulted;
    int threads;                    /* 0: all online CPUs */
    int max_pos;                    /* 0: the model's context length */
    int max_seqs;                   /* concurrent sequences, ids 0 .. max_seqs-1; 0: 1 (but see kv_budget_*) */
    /* (optional) the KV storage: bytes, or positions (x engine_kv_token_bytes); at most one
     * of the two; 0: the module's own sizing. A kv module that declares
     * BENCH_CAP_KV_SHARED_POOL (one pool shared by every sequence: block, token) gets the
     * budget as its pool (bench_kv_shape.pool_bytes) and max_seqs as given; any other (one contiguous cache per sequence: prealloc,
     * dynamic) gets as many sequences as the budget holds at full context, budget /
     * (max_pos x engine_kv_token_bytes), at most max_seqs when that is set. A budget that
     * holds no sequence, or pool options next to it, is an error. */
    uint64_t kv_budget_bytes, kv_budget_tokens;
    const char *module_dir;         /* a module path ("a:b"); NULL: $BENCH_MODULE_PATH, else <dir of executable>/modules */
    /* (optional) told about every region a module names ("bench:weights", "bench:kv", ...),
     * besides the PR_SET_VMA_ANON_NAME the engine applies, so a caller can find the regions
     * where the kernel cannot name them (CONFIG_ANON_VMA_NAME unset). NULL: not told. */
    void (*on_region)(void *user, const void *addr, size_t len, const char *name);
    void *region_user;
    /* (optional) a file that records every allocator call, engines/core/runtime/alloc_trace.h
     * (bench generate --trace-alloc); closed by engine_destroy. NULL: no trace. */
    const char *trace_alloc;
    /* 1: round as llama.cpp's CPU path does, for comparisons with its logits: its default
     * f16 KV cache (q, k, v and the softmax weights rounded to f16, bench_kv_shape.attn_f16;
     * the softmax scaled by 1/sum), and RoPE angles raised by repeated multiplication. CPU
     * only. 0: f32 throughout, RoPE as llama2.c computes it. */
    int llama_numerics;
    /* ENGINE_REPACK_AUTO (0, what a zeroed spec gets): Q4_0 matrices are rearranged in place
     * at load for the kernel family in use, where it decodes the rearranged layout natively
     * (kernels.h kn_repack_dt), as llama.cpp repacks Q4_0, and bf16 matrices grouped where
     * prefill runs on bf16 dot products (repack.h); ENGINE_REPACK_OFF: every matrix keeps the
     * file's layout. In place where the loader's memory is private, so the pread loader's buffer
     * costs nothing more, while an mmap'd file's rearranged matrices become anonymous copies:
     * what mmap buys changes, and engine_repacked_bytes says by how much. CPU only. */
    engine_repack repack;
    engine_numerics numerics;       /* what auto may run: ENGINE_NUMERICS_PRODUCTION (0) or _EXACT */
    engine_scratch scratch;         /* the activations' block: ENGINE_SCRATCH_KEEP (0) or _PASS */
    /* > 0: engine_reserve_scratch(e, reserve_tokens, ...) at the end of engine_create, which caps
     * it at ubatch; ENGINE_RESERVE_UBATCH: a whole pass of ubatch tokens, for prompts not known
     * ahead (a server's) */
    int reserve_tokens;
    /* The most tokens of one sequence a CPU forward pass takes (llama.cpp's n_ubatch): a longer
     * prompt runs in passes of this many, so the activations' block stays at this size whatever
     * the prompt (35 KiB a token on llama-110m, 80 KiB on tinyllama); the same bits either way.
     * 0: ENGINE_UBATCH (512); else ENGINE_UBATCH_MIN or more. */
    int ubatch;
} engine_spec;

typedef struct engine engine;

/* Every call below returns 0, or -BENCH_ERR_* (engines/abi/module.h) with err: the code says
 * what failed (out of memory, not found, refused), the message says how. */
int engine_create(const engine_spec *spec, engine **out, char *err, size_t errlen);
void engine_destroy(engine *e);                 /* e may be NULL */

const model *engine_model(const engine *e);
/* The matrices rearranged at load (engine_spec.repack), of those the bf16 ones (the others are
 * Q4_0) and the Q4_0 ones with 16 rows interleaved (the other Q4_0 ones within rows), their
 * bytes, and of those the bytes rearranged into anonymous copies (where the loader's memory was
 * shared: mmap's default); 0 where none were. */
int engine_repacked_matrices(const engine *e);
int engine_repacked_bf16(const engine *e);
int engine_repacked_q4_0_g16(const engine *e);
uint64_t engine_repacked_bytes(const engine *e);
uint64_t engine_repacked_copied_bytes(const engine *e);
const tokenizer *engine_tokenizer(const engine *e);   /* NULL when the model has no vocabulary */

/* Runs tokens at positions pos0 .. pos0+n-1 of sequence seq (0 for one sequence)
 * and returns the logits of the last one (vocab_size floats, owned by the engine,
 * valid until the next call). Prefill is batched (matrix-matrix); n == 1 is decode. */
int engine_forward(engine *e, int seq, const int *tokens, int n, int pos0, float **logits,
                   char *err, size_t errlen);

/* Logits of every position (n, vocab) for tests; out must hold n*vocab floats. */
int engine_forward_all(engine *e, int seq, const int *tokens, int n, int pos0, float *out,
                       char *err, size_t errlen);

/* One batched decode step: token tokens[i] at position pos[i] of sequence seqs[i], for
 * i < n, in one forward pass (the matrix work over the n rows at once; attention per
 * sequence). *logits: (n, vocab), row i for sequence seqs[i], owned by the engine and valid
 * until the next call. The sequences must be distinct. */
int engine_forward_batch(engine *e, const int *seqs, const int *tokens, const int *pos, int n, float **logits,
                         char *err, size_t errlen);

/* Makes KV room for positions [0, n_pos) of seq without running anything; -1 with err when
 * the module has no room (a shared pool is full) or n_pos is past the context. A scheduler
 * asks this before it commits a sequence to a step. */
int engine_reserve(engine *e, int seq, int n_pos, char *err, size_t errlen);

/* For the empty sequence seq: attaches the longest prefix of ids[0 .. n) that the KV module
 * has cached (never the last id) and returns its length in positions, from which the caller
 * runs the model; 0 when the module shares no prefixes (kv ABI v1, or none cached).
 * -1 with err on a bad sequence. */
int engine_share_prefix(engine *e, int seq, const int *ids, int n, char *err, size_t errlen);

/* Forgets sequence seq (KV release). */
void engine_reset(engine *e, int seq);
/* Under ENGINE_SCRATCH_KEEP on the CPU, sizes the forward pass's kept block for a pass of
 * n_tokens and writes every page of it now, so that the first pass pays no first touch of its
 * activations (llama.cpp reserves its compute buffer at context creation the same way); a
 * later, larger pass grows it. *reserved (may be NULL): the tokens reserved for, at most ubatch;
 * 0 on a device or under ENGINE_SCRATCH_PASS, where nothing is. */
int engine_reserve_scratch(engine *e, int n_tokens, int *reserved, char *err, size_t errlen);

int engine_max_seqs(const engine *e);
/* The capabilities (BENCH_CAP_*) the engine's module of family ("loader", "kv", "alloc") declares. */
uint64_t engine_module_caps(const engine *e, const char *family);
int engine_max_pos(const engine *e);
/* The most tokens of one sequence a CPU forward pass takes (engine_spec.ubatch). */
int engine_ubatch(const engine *e);
/* Bytes of K and V of one position over all layers (f32). */
uint64_t engine_kv_token_bytes(const engine *e);
/* Parses a KV cache type as scenarios and the command line give it: "q8_0" (K and V alike)
 * or "q8_0/f16" (K, then V); each a name of the KV element type table (kv_types.h kvq_types).
 * Returns 0, or -1 with err saying what was expected. */
int engine_parse_cache_type(const char *text, bench_dtype *k, bench_dtype *v, char *err, size_t errlen);
/* The text engine_parse_cache_type reads back: "f16", or "q8_0/f16" where they differ. */
void engine_cache_type_name(bench_dtype k, bench_dtype v, char *buf, size_t n);
/* Every KV cache type, for help texts and messages, with last between the last two: " or "
 * gives "f32, f16, bf16, q8_0 or q4_0", ", " gives "f32, f16, bf16, q8_0, q4_0". */
void engine_cache_type_names(char *buf, size_t len, const char *last);

/* The KV cache type wherever a scenario or flag names none: f16, as llama.cpp keeps its cache
 * (vLLM and SGLang keep bf16 or fp8), so default figures are those of a configuration people
 * serve. f32 (engine_spec's zero value) is the exact reference the oracle tests name. */
#define ENGINE_KV_DEFAULT BENCH_F16
/* The cache type where no one named one, for kv modules that together store `stored` (a bit
 * per bench_dtype): ENGINE_KV_DEFAULT where they all store it, else f32, which every module
 * stores. The one rule for bench run's scenarios and for bench generate/serve. */
static inline bench_dtype engine_default_cache_type(uint32_t stored) {
    return (stored >> ENGINE_KV_DEFAULT & 1u) ? ENGINE_KV_DEFAULT : BENCH_F32;
}

/* The cache types the engine runs with. */
bench_dtype engine_kv_k_type(const engine *e);
bench_dtype engine_kv_v_type(const engine *e);

/* The KV module's memory now, in bytes, from its memory slot (kv.h bench_kv_memory):
 *   reserved  its storage
 *   live      holding positions of the sequences: used - cached
 *   cached    holding positions no sequence holds, kept for prefix reuse (evictable)
 *   wasted    internal fragmentation: taken for a sequence, holding no position (a
 *             contiguous cache wastes all it reserved and does not use)
 * reserved - live - cached - wasted is free. */
typedef struct engine_kv_mem {
    double reserved, live, cached, wasted;  /* B */
    /* 1: one pool shared by every sequence (BENCH_CAP_KV_SHARED_POOL: block, token): a new
     * sequence can take reserved - live - wasted (cached is evictable);
     * 0: one cache per sequence, whose room is a free sequence */
    int shared_pool;
} engine_kv_mem;
engine_kv_mem engine_kv_memory(const engine *e);

/* Emits every module's counters, named "<family>.<counter>". */
void engine_counters(const engine *e, const bench_counter_sink *sink);

/* The next token after the last forward pass: drawn on the device when the engine runs
 * on one (its sampler draws as sampler.c does), else sampler_sample(s, logits). */
int engine_sample(engine *e, sampler *s, float *logits);

/* "cpu", or the device the forward pass runs on. */
const char *engine_device(const engine *e);
/* What "auto" runs on the CPU, per dtype and phase, measured now or read from the cache
 * (engines/core/compute/kernels_tune.h); "" when a family was named or the device is not the CPU. */
const char *engine_kernels_note(const engine *e);

/* Production numerics' check (engine_numerics): the logits of a short teacher-forced pass,
 * ENGINE_NUMERICS_POS positions of a fixed token sequence (one prefill batch for prefill, one
 * position a call for decode), with family running dt's matmuls of that phase, against the
 * same pass with the exact family exact; the other dtypes and phase run as auto has them.
 * Then the exact family once more on x rounded as llama.cpp rounds it for dt (kernels.h
 * kn_set_llama_x) into llama: llama.cpp's own cost on this model, the bound.
 * Sequence 0 is reset before and after, and dt's choice for the phase is put back. kernels
 * auto on the CPU only. 0 with out and llama (acc_production_ok(out, llama) says whether it
 * passes), or -1 with err. */
#define ENGINE_NUMERICS_POS 64
int engine_numerics_check(engine *e, bench_dtype dt, int prefill, const char *family, const char *exact, acc_figures *out,
                          acc_figures *llama, char *err, size_t errlen);

/* Auto's table under production numerics (engines/core/compute/kernels_tune.h: per dtype and
 * phase, the family chosen and, where one that rounds x was checked, its figures on the model);
 * NULL under exact numerics, a named family or a device. */
const struct kt_table *engine_kernels_table(const engine *e);

/* Production numerics' name for a model in the tuner's cache (kernels_tune.h kt_production_key):
 * a check holds for the file it ran on, so a hash of its path, size and time of change, and
 * its file name for people ("model=HASH;file=NAME"). */
void engine_numerics_model_id(const char *path, char *buf, size_t len);

/* "production" or "exact"; engine_numerics_parse: the value of such a name, -1 for another. */
const char *engine_numerics_name(engine_numerics n);
int engine_numerics_parse(const char *name);
/* "keep" or "pass"; engine_scratch_parse: the value of such a name, -1 for another. */
const char *engine_scratch_name(engine_scratch s);
int engine_scratch_parse(const char *name);

/* Bytes/s of the device's memory (a triad there, 3 arrays of bytes_per_array, 0: the
 * device's default size); 0 on the CPU (kn_triad_bandwidth measures it) or on failure. */
double engine_device_bandwidth(engine *e, size_t bytes_per_array, int reps);

#endif
