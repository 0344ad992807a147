/* Picks the next token from logits: greedy (temperature 0), temperature, top-p; seeded. */
#ifndef BENCH_SAMPLER_H
#define BENCH_SAMPLER_H

#include <stdint.h>

typedef struct sampler sampler;

/* The sampling a run gets when it names none: a scenario's, a worker spec's and bench
 * generate's defaults, stated once. */
#define SAMPLER_DEFAULT_TOPP 0.9
#define SAMPLER_DEFAULT_SEED 42

sampler *sampler_create(int vocab_size, float temperature, float topp, uint64_t seed);
void sampler_free(sampler *s);          /* s may be NULL */
/* Greedy picks the first index of the maximum. logits may be modified. */
int sampler_sample(sampler *s, float *logits);

/* For a sampler that runs elsewhere (a GPU's, engines/core/runtime/devhost.c): the temperature
 * (0: greedy), the top-p (1: the whole distribution) and the next draw in [0, 1) of the
 * random stream, which sampler_sample takes once per call when the temperature is > 0. */
float sampler_temperature(const sampler *s);
float sampler_topp(const sampler *s);
float sampler_next_coin(sampler *s);

#endif
