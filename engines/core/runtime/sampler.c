/* Next-token sampling: greedy, temperature, top-p (nucleus), as llama2.c's run.c
 * does it, so that a seed gives the same tokens here as there.
 *
 * The random stream is xorshift64* seeded with the seed itself; a draw in
 * [0, 1) keeps the top 24 bits of a 32-bit output, which a float represents
 * exactly. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    float prob;
    int index;
} candidate;

struct sampler {
    int vocab_size;
    float temperature;      /* <= 0: greedy */
    float topp;             /* in (0, 1), or 1: sample from the whole distribution */
    uint64_t state;         /* xorshift64* state, never 0 */
    candidate *cand;        /* (vocab_size) top-p candidates, allocated once */
};

sampler *sampler_create(int vocab_size, float temperature, float topp, uint64_t seed) {
    if (vocab_size <= 0) return NULL;
    sampler *s = calloc(1, sizeof(*s));
    if (!s) goto err;
    s->vocab_size = vocab_size;
    s->temperature = temperature > 0 ? temperature : 0; /* also maps NaN to greedy */
    s->topp = topp > 0 && topp < 1 ? topp : 1.0f; /* 1: no nucleus; also maps NaN there */
    /* xorshift stays at 0 forever from a 0 state; any other seed is used as is (llama2.c's stream) */
    s->state = seed ? seed : 0x9e3779b97f4a7c15ull;
    s->cand = malloc((size_t)vocab_size * sizeof(*s->cand));
    if (!s->cand) goto err;
    return s;

err:
    sampler_free(s);
    return NULL;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s);
}

static uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

static float random_f32(uint64_t *state) { return (float)(random_u32(state) >> 8) / 16777216.0f; }

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i; /* strict: the first index wins ties */
    return best;
}

static void softmax(float *x, int n) {
    float max = x[argmax(x, n)], sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

static int sample_mult(const float *p, int n, float coin) {
    float cdf = 0;
    for (int i = 0; i < n; i++) {
        cdf += p[i];
        if (coin < cdf) return i;
    }
    return n - 1; /* rounding left the cdf below coin */
}

/* Descending probability; equal probabilities by index, so the order (and the
 * token drawn) does not depend on the qsort implementation. */
static int cand_cmp(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->prob != y->prob) return x->prob > y->prob ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int sample_topp(const float *p, int n, float topp, candidate *cand, float coin) {
    /* Tokens below (1 - topp) / (n - 1) hold less than 1 - topp together (there are
     * at most n - 1 of them), so the others hold more than topp and the nucleus ends
     * before any of them. Dropping them first keeps the sort short. */
    float cutoff = n > 1 ? (1.0f - topp) / (float)(n - 1) : 0;
    int nc = 0;
    for (int i = 0; i < n; i++)
        if (p[i] >= cutoff) cand[nc++] = (candidate){.prob = p[i], .index = i};
    if (nc == 0) return argmax(p, n); /* NaN probabilities: nothing compares */
    qsort(cand, (size_t)nc, sizeof(*cand), cand_cmp);

    /* the smallest prefix whose mass exceeds topp */
    float cum = 0;
    int last = nc - 1;
    for (int i = 0; i < nc; i++) {
        cum += cand[i].prob;
        if (cum > topp) {
            last = i;
            break;
        }
    }
    float r = coin * cum, cdf = 0;
    for (int i = 0; i <= last; i++) {
        cdf += cand[i].prob;
        if (r < cdf) return cand[i].index;
    }
    return cand[last].index;
}

float sampler_temperature(const sampler *s) { return s->temperature; }
float sampler_topp(const sampler *s) { return s->topp; }
float sampler_next_coin(sampler *s) { return random_f32(&s->state); }

int sampler_sample(sampler *s, float *logits) {
    int n = s->vocab_size;
    if (s->temperature == 0) return argmax(logits, n);
    for (int i = 0; i < n; i++) logits[i] /= s->temperature;
    softmax(logits, n);
    float coin = random_f32(&s->state);
    if (s->topp >= 1) return sample_mult(logits, n, coin);
    return sample_topp(logits, n, s->topp, s->cand, coin);
}
