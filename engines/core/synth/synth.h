/* Deterministic synthetic models of named shapes (like vLLM's --load-format dummy):
 * the compute and memory behaviour of a real model of that shape, with no download.
 * Same shape, dtype, format and seed -> the same bytes. */
#ifndef BENCH_SYNTH_H
#define BENCH_SYNTH_H

#include "engines/core/model/model.h"
#include "engines/core/synth/synth_vocab.h"

typedef struct synth_shape {
    const char *name;
    model_config cfg;           /* rope = ROPE_INTERLEAVED, seq_len_header = seq_len */
    int tied;                   /* 1: no output.weight; the classifier is token_embd (as the real model) */
    const char *about;          /* the model the shape copies, and where it differs from it */
} synth_shape;

/* NULL-terminated table: tiny, llama-110m, tinyllama-1.1b, llama-3.2-1b, ... */
extern const synth_shape synth_shapes[];
const synth_shape *synth_find_shape(const char *name);
/* The dtypes bench writes (dtype.h bench_dtype_writable), sep between them and last before the
 * last ("f32, f16, bf16, q8_0 or q4_0"), into buf (truncated to len): for the messages and
 * help of synth and convert. */
void synth_dtype_names(char *buf, size_t len, const char *sep, const char *last);

typedef struct synth_spec {
    const char *shape;          /* a synth_shapes name */
    bench_dtype dtype;          /* of the 2-D weights; norms stay f32 */
    const char *format;         /* a model_writers name (model_write.h) */
    uint64_t seed;
} synth_spec;

/* Writes the model to path (a file, or a folder) in the format named, refused when the format
 * does not hold the dtype. A format that keeps its vocabulary beside the model (a row with
 * vocab_path: llama2c) also writes it there.
 * q8_0 and q4_0 tensors whose rows are not a whole number of 32-element blocks
 * are written as f16 (as llama.cpp's quantizer falls back). */
int synth_write(const synth_spec *spec, const char *path, char *err, size_t errlen);

/* The dtype a 2-D weight of `cols` columns gets when `want` is asked for:
 * want itself, or f16 when want is block-quantised and cols is not a whole number of blocks. */
bench_dtype synth_weight_dtype(bench_dtype want, int64_t cols);

/* Value of element `index` (row-major) of a 2-D weight called `name`: uniform in
 * [-a, a), from a counter-based generator, so any element is computable alone. */
float synth_weight_value(uint64_t seed, const char *name, float a, uint64_t index);

/* kn_quant_row's bytes, faster where the kernels chose a SIMD table (AVX2+F16C
 * paths for f16 and q8_0). n: a multiple of 32 for q8_0. */
void synth_quant_row(bench_dtype dt, const float *in, void *out, int n);


#endif
