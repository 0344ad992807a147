/* A scenario file (JSON): what to run, parsed and validated before anything runs.
 *
 * Every field is documented in docs/scenarios.md. Validation reports every error
 * it finds, each as "<file>: <JSON path>: <what is wrong and what was expected>",
 * e.g.  scenarios/x.json: .matrix.loader[1]: unknown loader "mmpa" (have: mmap, pread)
 * Unknown keys are errors.
 *
 * The matrix: each axis (a row of the table of axes below) is a list of
 * choices; the variants are their cross product, in file order, the first axis
 * varying slowest. An axis not crossed has one choice: from matrix.fixed, the
 * top level (the rows marked SC_AXF_TOP) or the row's default. The loader and kv
 * choices are checked against the modules built for each device of the scenario.
 */
#ifndef BENCH_SCENARIO_H
#define BENCH_SCENARIO_H

#include "harness/scenario/scenario_types.h"
#include "harness/scenario/ws_types.h"

/* ---- the axes: one row each (scenario.c sc_axes) ----
 * A row says how the file gives the axis (its key, where, the type of its choices, its
 * default), how its choices show in a variant's name, and where its value lands in the
 * engine's worker spec (ws_engine, the member the worker reads). Every list of axes (the
 * keys a scenario and its matrix accept, the order they are parsed and defaulted in,
 * --only, bench run's and bench exec's help, the messages) is read from the table. */
typedef enum sc_axis_type {
    SC_AXT_NONE,        /* not read from an engine scenario (workload: the allocator kind's, alloc_spec.c) */
    SC_AXT_MODULE,      /* a module of the family the key names: "name" or {"name", "options", "label"} */
    SC_AXT_DEVICE,      /* a device module, or "cpu", written as a module is */
    SC_AXT_ENUM,        /* a string of choices[] (ival: its index) */
    SC_AXT_INT,         /* an integer lo .. hi (ival) */
    SC_AXT_BOOL,        /* a JSON boolean, nothing else (ival 1 or 0; label: labels[ival]) */
    SC_AXT_CUSTOM,      /* read by the row's parse */
} sc_axis_type;

enum {
    SC_AXF_TOP = 1,             /* also a key of the scenario's top level, not only of the matrix */
    SC_AXF_FIRST = 2,           /* parsed before the other axes of the matrix (device: the modules are checked on it) */
    SC_AXF_SHOW_NOT_DEF = 4,    /* in the variants' names also when fixed to another value than def */
};

struct sc_ctx;

typedef struct sc_axis_def {
    const char *key;            /* the scenario's key, --only's, the variant names' */
    sc_axis_type type;
    unsigned flags;             /* SC_AXF_* */
    const char *def;            /* the choice when the file gives none, as a file writes it ("mmap", "0", "true");
                                 * NULL: required (where type is not NONE) */
    /* (optional) the default worked out from the scenario's other axes (parsed by then), in
     * place of def: kv_cache's, f16 unless a kv choice stores f32 only */
    const char *(*def_of)(const struct scenario *s);
    const char *expect;         /* ENUM, BOOL: what a message says is expected */
    const char *const *choices; /* ENUM: NULL-terminated */
    const char *labels[2];      /* BOOL: false's and true's labels in variant names; NULL: "false", "true" */
    int lo, hi;                 /* INT: the range */
    /* CUSTOM: reads one choice into ch (name and label at least); 0, or -1 after sc_err */
    int (*parse)(struct sc_ctx *c, const cJSON *j, const char *path, sc_choice *ch);
    /* where the choice lands in the worker spec (ws_types.h): the value's field, and a
     * module's options' (WS_OPTS); name NULL: not in the spec. The value is taken from the
     * choice by type: WS_STR its name, WS_INT and WS_BOOL its ival, WS_OBJECT its opts,
     * WS_OPTS its typed options, WS_CACHE_TYPE its cache_type */
    ws_field spec[2];
} sc_axis_def;

int sc_axis_count(void);                        /* rows: ids 0 .. count - 1 */
const sc_axis_def *sc_axis_get(int axis);       /* NULL out of range */
int sc_axis_find(const char *key);              /* the id of key, -1 if none */
/* The keys, comma-separated in the table's order, for help texts and messages. */
const char *sc_axis_list(void);
/* Appends a row (copied; its strings must outlive its use): a test's made-up axis. Its
 * spec field, if any, names a slot of ws_engine.more. Returns its id, or -1 with err (a key
 * taken, no default, the table full). */
int sc_axis_add(const sc_axis_def *def, char *err, size_t errlen);

void sc_errors_free(sc_errors *e);

/* Parses and validates file. module_dir: NULL for the default (modreg_default_dir).
 * On failure returns -1 and fills errs with every error found. */
int sc_load(const char *file, const char *module_dir, scenario **out, sc_errors *errs);
/* sc_load with the file's top level saying "device": device and no device axis elsewhere
 * (bench run --device): every variant runs on that device. */
int sc_load_on(const char *file, const char *module_dir, const char *device, scenario **out, sc_errors *errs);
/* The same from a JSON text; file only names it in messages. */
int sc_parse(const char *file, const char *text, const char *module_dir, scenario **out, sc_errors *errs);
/* The inference and serving kinds' parse (harness/scenario/kind.h): everything but the
 * common start sc_parse does. Returns 0, or -1 with errs. */
int sc_parse_engine(scenario *s, const cJSON *root, sc_errors *errs);
void sc_free(scenario *s);              /* s may be NULL */
void sc_requests_free(sc_requests *r);  /* r may be NULL */

const char *sc_axis_name(int axis);     /* its row's key; "?" out of range */
/* 1 when axis is part of the variants' names (sc_variant.key, the table's labels): a crossed
 * axis, or one of SC_AXF_SHOW_NOT_DEF fixed to another value than its default (repack false).
 * The default adds nothing, so results and baselines written before the axis existed keep
 * their variants' names; the other value always shows, so that a run without the
 * rearranging never compares as the same variant as one with it. */
int sc_axis_shown(const scenario *s, int axis);
/* The variant's device and its options ("cpu" and "" where the scenario has no device axis). */
const char *sc_device(const scenario *s, const sc_variant *v);
const bench_opts *sc_device_opts(const scenario *s, const sc_variant *v);   /* typed; n 0 for the CPU */

/* --only key=val,...: keeps the variants whose axis key has the label or name val
 * (several values of one key are alternatives). Errors name the key or value. */
int sc_select(scenario *s, const char *only, char *err, size_t errlen);
int sc_n_selected(const scenario *s);

/* The path a synth spec is cached at: <dir>/<shape>-<dtype>-s<seed>.<gguf|safetensors|bin> */
int sc_synth_path(const scenario *s, const char *dir, char *buf, size_t len);

#endif
