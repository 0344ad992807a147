/* The types of a parsed scenario (scenario.h): the matrix's axes and choices, the variants,
 * the requests and their distributions, the errors. Apart from scenario.h's functions so that
 * the parsers scenario.c calls (kind.c, alloc_spec.c, traffic.c) take these types without
 * depending on the file that calls them. */
#ifndef BENCH_SCENARIO_TYPES_H
#define BENCH_SCENARIO_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "engines/abi/dtype.h"
#include "engines/abi/module.h"

typedef struct cJSON cJSON;
struct modreg_cache;

/* SC_AX_WORKLOAD: allocator scenarios only ("kind": "allocators", harness/scenario/alloc_spec.h) */
/* SC_AX_KERNELS: the CPU kernel family (engines/core/compute/kernels.h), "auto" by default */
/* SC_AX_KV_CACHE: the KV cache's element types, engine.h ENGINE_KV_DEFAULT by default, f32 with a kv module that stores only f32 ("q8_0", or K/V as "q8_0/f16") */
/* SC_AX_TARGET: what runs the workload, "engine" (in process) by default or an http server (harness/scenario/target.h) */
/* SC_AX_REPACK: whether Q4_0 weights are rearranged at load for the kernels (engine.h
 * engine_repack), true by default; last, so that the axes before it keep their order */
/* SC_AX_NUMERICS: what kernels auto may run (engine.h engine_numerics), "production" by default */
/* SC_AX_SCRATCH: the forward pass's activations kept between passes or taken per pass (engine.h
 * engine_scratch), "keep" by default */
/* SC_AX_UBATCH: the most prompt tokens of one sequence a CPU pass takes (engine.h
 * engine_spec.ubatch), 512 by default */
/* The built-in axes' ids: their rows' places in scenario.c's table of axes (sc_axes), which
 * holds everything else about them. sc_axis_add appends rows after these (a test's made-up
 * axis), up to SC_AX_MAX; sc_axis_count() says how many there are. */
enum { SC_AX_LOADER, SC_AX_KV, SC_AX_ALLOC, SC_AX_CACHE, SC_AX_THREADS, SC_AX_DEVICE, SC_AX_WORKLOAD, SC_AX_KERNELS, SC_AX_KV_CACHE,
       SC_AX_TARGET, SC_AX_REPACK, SC_AX_NUMERICS, SC_AX_SCRATCH, SC_AX_UBATCH, SC_AX_COUNT };
#define SC_AX_MAX (SC_AX_COUNT + 4)
enum { SC_CACHE_COLD, SC_CACHE_WARM };

/* metrics a scenario may ask for (bit mask) */
enum {
    SC_M_TIMELINE = 1 << 0,     /* sample /proc/<pid>/status every sample_ms */
    SC_M_PSS = 1 << 1,          /* ... and smaps_rollup's Pss with it */
    SC_M_SMAPS = 1 << 2,        /* per-region Rss/Pss from smaps at phase boundaries */
    SC_M_PERF = 1 << 3,         /* perf_event counters */
    SC_M_TOKENS = 1 << 4,       /* every token's timestamp in results.json */
    SC_M_ALL = (1 << 5) - 1,   /* the default set (but pss) draws from these */
    SC_M_CALLGRIND = 1 << 5,    /* "instructions:callgrind": one more repetition per variant under
                                   callgrind, for instructions per phase (harness/parent/callgrind.h) */
    SC_M_BANDWIDTH = 1 << 6,    /* "bandwidth": after each repetition's DONE, a read-only stream over
                                   the weight bytes of a token (kn_read_bandwidth); not in the default set */
    SC_M_ACCURACY = 1 << 7,     /* "accuracy": after the timed repetitions, one untimed pass per variant:
                                   its logits against the exact kernels with an f32 cache
                                   (harness/parent/accuracy_run.h); in the default set of a scenario
                                   with a KV cache type other than f32 or a kernel family that is not exact */
};

/* A KV cache's element types, K and V: parsed once from the file's text ("q8_0/f16",
 * engine_parse_cache_type) and carried typed to the engine. */
typedef struct sc_cache_type {
    bench_dtype k, v;
} sc_cache_type;

typedef struct sc_choice {
    char *name;         /* module name, "cold"/"warm", the thread count as text, the device ("cpu", "cuda"),
                         * or repack's value as the file has it ("true", "false") */
    char *opts;         /* modules: "k=v,k=v" ("" when none), as the label and results.json show them */
    char *label;        /* how the variant is named: the label given, else name[:opts] */
    /* modules: the options checked against the module's table, as typed values (module.h
     * BENCH_OPTV_*, modreg_type_opts): what the worker spec carries; typed_mem owns them */
    bench_opts typed;
    void *typed_mem;
    int ival;           /* cache: SC_CACHE_*, threads: the count, repack: 1 (true) or 0 (false) */
    char pool_opt[96];  /* kv: "key=value" of a given option that sizes the shared pool, "" when none */
    uint32_t kv_types;  /* kv: the cache types the module stores on every device of the scenario (kv.h
                         * cache_types; bit per bench_dtype), 0 until checked */
    sc_cache_type cache_type;   /* kv_cache: the pair its name says */
    struct tg_http *http;       /* target: an http target's settings, typed (target.h); NULL: engine */
} sc_choice;

typedef struct sc_axis {
    int n;
    sc_choice *v;
    int crossed;        /* given as a matrix axis (a list), not fixed */
} sc_axis;

typedef struct sc_variant {
    int pick[SC_AX_MAX];    /* index into each axis */
    char *key;              /* "loader=pread,cache=cold": the labels of the axes sc_axis_shown names ("default" if none) */
    int selected;           /* 0: dropped by --only */
} sc_variant;

/* A length distribution of a serving workload (workload.requests, docs/scenarios.md). */
enum { SC_DIST_FIXED, SC_DIST_UNIFORM, SC_DIST_FILE };
typedef struct sc_dist {
    int kind;                   /* SC_DIST_* */
    int lo, hi;                 /* tokens: fixed lo == hi; uniform over [lo, hi]; file: min, max of values */
    char *file;                 /* file: the path as written */
    int n_values;
    int *values;                /* (n_values) file: the lengths, request i takes values[i % n_values] */
} sc_dist;

/* workload.requests: a serving run of many requests through the scheduler
 * (engines/core/runtime/sched.h, harness/child/serve.h). */
typedef struct sc_requests {
    int count;
    sc_dist prompt_len;         /* tokens of each request's own prompt (after any shared prefix) */
    sc_dist output_len;         /* tokens generated at most */
    int prefix_tokens;          /* a shared prefix (BOS first) in front of some prompts; 0: none */
    double prefix_fraction;     /* share of the requests that start with it, 0 .. 1 */
    double poisson_rate;        /* arrivals per second; 0: all at once */
    uint64_t kv_budget_bytes;   /* B; exactly one of the budget's two forms is non-zero */
    uint64_t kv_budget_tokens;  /* positions */
    double ttft_ms, tpot_ms;    /* goodput targets; 0: none */
    uint64_t seed;
    int max_batch;              /* concurrent requests at most; 0: as the budget allows */
    double reserve_output;      /* 0 .. 1: share of the tokens still to come kept free at admission (sched.h) */
    int stop_at_eos;            /* 1: a request also ends at the model's EOS */
    int token_times;            /* every token's time in the per-request export (metrics "tokens") */
    struct tf_traffic *traffic; /* a trace, an arrival process, sessions, a concurrency cap
                                 * (harness/scenario/traffic.h); NULL: none of them */
} sc_requests;

typedef struct scenario {
    char *file;                 /* as given */
    char *name, *description;
    /* model: a path, or a synth spec resolved to a cached path at run time */
    char *model_path;           /* NULL for synth until sc_resolve_model */
    char *tokenizer_path;       /* optional */
    /* set by bench run once it has read the model (rn_prepare_model, confine.h): the
     * paths resolved and the files' identities, which each worker checks; NULL / 0: none */
    char *model_resolved, *tokenizer_resolved;
    unsigned long long model_dev, model_ino, tokenizer_dev, tokenizer_ino;
    int synth;
    char *synth_shape, *synth_dtype, *synth_format;
    uint64_t synth_seed;
    /* workload */
    char *prompt;               /* text, or NULL when prompt_tokens is used */
    int prompt_tokens, generate, ctx;
    uint64_t seed;
    double temperature, topp;
    sc_requests *requests;      /* workload.requests: a serving run; NULL: one sequence */
    /* runs */
    int repetitions, warmup, processes;
    double sample_ms, timeout_s;
    unsigned metrics;
    sc_axis axes[SC_AX_MAX];
    int n_variants;
    sc_variant *variants;
    /* test-suite hooks (BENCH_TEST_HOOKS=1 only) */
    char *fault;                /* NULL, "segv", "exit3", "hang", "sigkill" */
    int delay_ms;
    char *module_dir;           /* where modules were looked up */
    cJSON *json;                /* the file as parsed, for results.json */
    const struct sc_kind *kind; /* the workload kind (harness/scenario/kind.h) */
    /* while the file is parsed: the modules its choices name, each dlopen'ed once (closed
     * when sc_parse returns: the choices keep their typed options, nothing of the modules) */
    struct modreg_cache *mods;
    struct aw_scenario *aw;     /* an allocator scenario's workloads (harness/scenario/alloc_spec.h) */
} scenario;

typedef struct sc_errors {
    int n;
    char **v;
} sc_errors;

/* The choice variant v takes on axis (SC_AX_*). */
static inline const sc_choice *sc_pick(const scenario *s, const sc_variant *v, int axis) {
    return &s->axes[axis].v[v->pick[axis]];
}

#endif
