/* llama.cpp's rounding of the activations, emulated in f32: production numerics' yardstick.
 *
 * llama.cpp's CPU path does not multiply a quantised or 16-bit matrix by x as it is: it first
 * converts x to the matrix's "vec_dot_type" (ggml-cpu's type traits) and multiplies by that.
 * For Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 weights x becomes Q8_0 (or Q8_1: the same values) in
 * blocks of 32, scale max|x| / 127 stored as f16, each element rounded to the nearest integer;
 * for the K-quants it becomes Q8_K in blocks of 256, scale -max / 127 from the element of
 * largest magnitude (f32), clamped at 127; for F16 and BF16 weights x is rounded to that
 * 16-bit type. F32 weights take x as it is.
 *
 * lx_round writes those rounded values back as f32. Given them, an exact kernel computes what
 * llama.cpp's integer or 16-bit dot products compute, but for the order of an f32 sum, so one
 * exact pass over rounded x measures llama.cpp's own error on the model in hand: the bound a
 * family that rounds x must stay within to run by default (engine.h engine_numerics_check).
 * Models differ in how much this rounding costs them (random weights more than trained ones,
 * deep models more than shallow), which a fixed bound cannot know.
 */
#ifndef BENCH_LLAMA_X_H
#define BENCH_LLAMA_X_H

#include "engines/abi/dtype.h"

typedef enum { LX_NONE, LX_F16, LX_BF16, LX_Q8_0, LX_Q8_K } lx_rule;

/* The rounding llama.cpp's CPU path applies to x for weights of dt (LX_NONE for F32). */
lx_rule lx_rule_for(bench_dtype dt);

/* out (n, cols) = x (n, cols) rounded by r; cols a multiple of r's block (32, or 256 for
 * LX_Q8_K), as every row of a matrix of that dtype is. out may be x. */
void lx_round(lx_rule r, const float *x, float *out, int n, int cols);

#endif
