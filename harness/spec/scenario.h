/* A scenario file (JSON): what to run, parsed and validated before anything runs.
 *
 * Every field is documented in docs/scenarios.md. Validation reports every error
 * it finds, each as "<file>: <JSON path>: <what is wrong and what was expected>",
 * e.g.  scenarios/x.json: .matrix.loader[1]: unknown loader "mmpa" (have: mmap, pread)
 * Unknown keys are errors.
 *
 * The matrix: each axis (loader, kv, alloc, cache, threads, device) is a list of
 * choices; the variants are their cross product, in file order, the first axis
 * varying slowest. An axis not crossed has one choice: from matrix.fixed, the
 * top level (cache, threads, device) or the documented default (loader mmap, kv
 * prealloc, alloc libc, threads 0 = all CPUs, device cpu). The loader and kv
 * choices are checked against the modules built for each device of the scenario.
 */
#ifndef BENCH_SCENARIO_H
#define BENCH_SCENARIO_H

#include "harness/spec/scenario_types.h"

void sc_errors_free(sc_errors *e);

/* Parses and validates file. module_dir: NULL for the default (modreg_default_dir).
 * On failure returns -1 and fills errs with every error found. */
int sc_load(const char *file, const char *module_dir, scenario **out, sc_errors *errs);
/* sc_load with the file's top level saying "device": device and no device axis elsewhere
 * (bench run --device): every variant runs on that device. */
int sc_load_on(const char *file, const char *module_dir, const char *device, scenario **out, sc_errors *errs);
/* The same from a JSON text; file only names it in messages. */
int sc_parse(const char *file, const char *text, const char *module_dir, scenario **out, sc_errors *errs);
/* The inference and serving kinds' parse (harness/spec/kind.h): everything but the
 * common start sc_parse does. Returns 0, or -1 with errs. */
int sc_parse_engine(scenario *s, const cJSON *root, sc_errors *errs);
void sc_free(scenario *s);              /* s may be NULL */
void sc_requests_free(sc_requests *r);  /* r may be NULL */

const char *sc_axis_name(int axis);     /* "loader", "kv", "alloc", "cache", "threads", "device", "workload", "kernels", "kv_cache",
                                           "target", "repack" */
/* 1 when axis is part of the variants' names (sc_variant.key, the table's labels): a crossed
 * axis, or repack set false. The default repack adds nothing, so results and baselines written
 * before the axis existed keep their variants' names; false always shows, so that a run without
 * the rearranging never compares as the same variant as one with it. */
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
