/* The types of an engine worker spec (worker_spec.h): the typed spec and the description of
 * one of its fields. Apart from worker_spec.h's functions so that the table of axes
 * (scenario.c), whose rows say where each axis lands in the spec, takes them without
 * depending on the file that writes and reads the spec. */
#ifndef BENCH_WS_TYPES_H
#define BENCH_WS_TYPES_H

#include <stddef.h>

#include "harness/scenario/scenario_types.h"

/* What a field of the spec holds, and so how it is written and read. */
typedef enum {
    WS_STR,         /* const char *: a JSON string */
    WS_INT,         /* int: a number */
    WS_NUM,         /* double: a number */
    WS_BOOL,        /* int 0 or 1: true or false */
    WS_REQUESTS,    /* a serving run's requests (sv_spec_add, sv_spec_read) */
    WS_TARGET,      /* the target's settings, typed (const tg_http *): written by tg_to_json, read
                     * back by tg_from_json (target.h) */
    WS_OPTS,        /* ws_opts: a module's typed options (spec_opts.h) */
    WS_CACHE_TYPE,  /* sc_cache_type: written as its text ("q8_0/f16") and read back typed, in
                     * worker_spec.c only; the text, for messages, in ws_engine.kv_cache */
    WS_AXES,        /* no value: where the axes' fields go, in the table of axes' order */
} ws_type;

enum {
    WS_IF_SET = 1,      /* written only when set (a string, a double not 0, an int or boolean not its def); else always */
    WS_HOOK = 2,        /* a test hook: read only under BENCH_TEST_HOOKS=1 */
};

/* One field of the spec: its JSON name, its type, where it is in ws_engine (offsetof), an
 * absent number's value when read (an absent string is NULL), and WS_* flags. */
typedef struct ws_field {
    const char *name;
    ws_type type;
    size_t off;
    double def;
    unsigned flags;
} ws_field;

/* A module's options in the spec, typed (spec_opts.h): the scenario's checked values where
 * the parent fills it; where the worker reads it, values pointing into the JSON, in an array
 * the spec owns (mem, freed by ws_engine_free). */
typedef struct ws_opts {
    bench_opts v;
    bench_opt *mem;
} ws_opts;

/* An engine worker spec, typed. Strings are borrowed: from the scenario where the parent
 * fills it (ws_engine_fill), from the parsed JSON where the worker reads it (ws_engine_read). */
typedef struct ws_engine {
    const char *model, *tokenizer;
    const char *model_id, *tokenizer_id;        /* "dev:ino" bench run read, or NULL (confine.h) */
    const char *module[3];                      /* loader, kv, alloc */
    ws_opts opts[3];                            /* their options */
    int threads;
    const char *device;                         /* NULL: cpu */
    ws_opts device_opts;
    const char *kernels;                        /* CPU kernel family; NULL: auto */
    const char *kv_cache;                       /* the KV cache types as the spec has them ("q8_0/f16"); NULL: f32 */
    sc_cache_type kv_types;                     /* the same, typed (read once, by ws_engine_read): the engine's */
    int repack;                                 /* 1, the default: Q4_0 rearranged at load where the kernels decode it
                                                 * natively; 0: the file's layout (engine.h engine_repack) */
    int numerics;                               /* engine.h engine_numerics: 0 production (the default), 1 exact */
    int scratch;                                /* engine.h engine_scratch: 0 keep (the default), 1 pass */
    int ubatch;                                 /* engine_spec.ubatch, ENGINE_UBATCH (512) by default and then not written */
    /* the target (harness/child/targets.h) by name; NULL: "engine", the default, and not written */
    const char *target;
    /* an http target's settings, typed (harness/scenario/target.h); NULL: none. ws_engine_fill
     * points it at the scenario's; ws_engine_read mallocs it (ws_engine_free frees) */
    struct tg_http *target_http;
    int bandwidth;                              /* measure decode's read bound after the run (metric "bandwidth") */
    int ctx;
    const char *prompt;                         /* one sequence: prompt, or prompt_tokens; then generate */
    int prompt_tokens, generate;
    double seed, temperature, topp;
    const char *module_dir;
    /* the values of axes added at run time (sc_axis_add: a test's, code outside the tree), which
     * have no member of their own: a row names its slot here, by type (i: WS_INT, WS_BOOL; s: WS_STR) */
    struct {
        int i;
        const char *s;
    } more[SC_AX_MAX - SC_AX_COUNT];
    const char *fault;                          /* test hooks: read only under BENCH_TEST_HOOKS=1 */
    int delay_ms;
    /* a serving run: the scenario's requests where the parent writes ("requests", sv_spec_add),
     * the spec's where the worker reads (sv_spec_read; owned, sc_requests_free) */
    const scenario *requests_of;
    sc_requests *requests;
} ws_engine;

#endif
