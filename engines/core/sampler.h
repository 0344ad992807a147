/* Picks the next token from logits: greedy (temperature 0), temperature, top-p; seeded. */
#ifndef BENCH_SAMPLER_H
#define BENCH_SAMPLER_H

#include <stdint.h>

typedef struct sampler sampler;

sampler *sampler_create(int vocab_size, float temperature, float topp, uint64_t seed);
void sampler_free(sampler *s);          /* s may be NULL */
/* Greedy picks the first index of the maximum. logits may be modified. */
int sampler_sample(sampler *s, float *logits);

#endif
