/* Deterministic synthetic models of named shapes (like vLLM's --load-format dummy):
 * the compute and memory behaviour of a real model of that shape, with no download.
 * Same shape, dtype, format and seed -> the same bytes. */
#ifndef BENCH_SYNTH_H
#define BENCH_SYNTH_H

#include "model.h"

typedef struct synth_shape {
    const char *name;
    model_config cfg;           /* rope = ROPE_INTERLEAVED, seq_len_header = seq_len */
} synth_shape;

/* NULL-terminated table: tiny, llama-110m, tinyllama-1.1b, llama-3.2-1b, ... */
extern const synth_shape synth_shapes[];
const synth_shape *synth_find_shape(const char *name);

typedef struct synth_spec {
    const char *shape;          /* a synth_shapes name */
    bench_dtype dtype;          /* of the 2-D weights; norms stay f32 */
    const char *format;         /* "gguf", "safetensors" or "llama2c" (f32 only) */
    uint64_t seed;
} synth_spec;

/* Writes the model to path (a file, or a directory for safetensors). */
int synth_write(const synth_spec *spec, const char *path, char *err, size_t errlen);

#endif
