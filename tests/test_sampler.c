/* Sampler: greedy ties, llama2.c's random stream, determinism, the nucleus, and
 * the drawn distribution. Every random test uses a fixed seed, so none can flake. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engines/core/runtime/sampler.h"

static void test_create_rejects_empty_vocab(void **state) {
    (void)state;
    assert_null(sampler_create(0, 1.0f, 0.9f, 1));
    assert_null(sampler_create(-3, 1.0f, 0.9f, 1));
    sampler_free(NULL);
}

static void test_greedy_first_index_on_ties(void **state) {
    (void)state;
    float temps[] = {0.0f, -1.0f, NAN}; /* zero, negative and NaN temperatures all mean greedy */
    for (size_t k = 0; k < sizeof(temps) / sizeof(temps[0]); k++) {
        sampler *s = sampler_create(6, temps[k], 0.9f, 7);
        assert_non_null(s);
        float l1[] = {1, 3, 0, 3, 2, 3};
        assert_int_equal(sampler_sample(s, l1), 1);
        float l2[] = {-5, -5, -5, -5, -5, -5};
        assert_int_equal(sampler_sample(s, l2), 0);
        float l3[] = {-1, -2, -3, -4, -5, 9};
        assert_int_equal(sampler_sample(s, l3), 5);
        sampler_free(s);
    }
}

/* With 256 equal logits each probability is exactly 1/256 and the cdf is exact,
 * so the index drawn is the top 8 bits of llama2.c's random_u32: this pins the
 * stream (xorshift64* from state = seed) to llama2.c's. */
static void test_stream_matches_llama2c(void **state) {
    (void)state;
    static const int want[16] = {86, 200, 202, 241, 195, 213, 52, 112, 77, 172, 108, 87, 224, 48, 18, 156};
    sampler *s = sampler_create(256, 1.0f, 0.0f, 42);
    assert_non_null(s);
    for (int i = 0; i < 16; i++) {
        float l[256] = {0};
        assert_int_equal(sampler_sample(s, l), want[i]);
    }
    sampler_free(s);
}

static void draw(sampler *s, int n, const float *logits, int *out, int count) {
    float buf[64];
    for (int i = 0; i < count; i++) {
        memcpy(buf, logits, (size_t)n * sizeof(float)); /* sampling scales the logits in place */
        out[i] = sampler_sample(s, buf);
    }
}

static void test_same_seed_same_sequence(void **state) {
    (void)state;
    enum { N = 32, DRAWS = 2000 };
    float logits[N];
    for (int i = 0; i < N; i++) logits[i] = sinf((float)i) * 2;
    static int a[DRAWS], b[DRAWS], c[DRAWS];
    float topps[] = {0.0f, 0.9f};
    for (int k = 0; k < 2; k++) {
        sampler *s1 = sampler_create(N, 0.8f, topps[k], 1234), *s2 = sampler_create(N, 0.8f, topps[k], 1234),
                *s3 = sampler_create(N, 0.8f, topps[k], 1235);
        assert_non_null(s1);
        assert_non_null(s2);
        assert_non_null(s3);
        draw(s1, N, logits, a, DRAWS);
        draw(s2, N, logits, b, DRAWS);
        draw(s3, N, logits, c, DRAWS);
        assert_memory_equal(a, b, sizeof(a));
        assert_memory_not_equal(a, c, sizeof(a));
        sampler_free(s1);
        sampler_free(s2);
        sampler_free(s3);
    }
}

/* A zero seed would freeze xorshift at 0 (every draw the first token); it must still vary. */
static void test_zero_seed_still_random(void **state) {
    (void)state;
    enum { DRAWS = 200 };
    float logits[4] = {0, 0, 0, 0};
    int out[DRAWS], seen[4] = {0};
    sampler *s = sampler_create(4, 1.0f, 0.0f, 0);
    assert_non_null(s);
    draw(s, 4, logits, out, DRAWS);
    for (int i = 0; i < DRAWS; i++) seen[out[i]]++;
    for (int i = 0; i < 4; i++) assert_true(seen[i] > 0);
    sampler_free(s);
}

/* probs 0.05 0.30 0.05 0.50 0.10: sorted, 0.50 + 0.30 = 0.80 is the first mass above 0.75,
 * so the nucleus is {3, 1}, drawn 0.5 : 0.3 within it. */
static void test_topp_stays_in_nucleus(void **state) {
    (void)state;
    enum { DRAWS = 20000 };
    float p[5] = {0.05f, 0.30f, 0.05f, 0.50f, 0.10f}, logits[5];
    for (int i = 0; i < 5; i++) logits[i] = logf(p[i]);
    static int out[DRAWS];
    int seen[5] = {0};
    sampler *s = sampler_create(5, 1.0f, 0.75f, 99);
    assert_non_null(s);
    draw(s, 5, logits, out, DRAWS);
    for (int i = 0; i < DRAWS; i++) seen[out[i]]++;
    printf("[ INFO     ] top-p 0.75 over %d draws: %d %d %d %d %d\n", DRAWS, seen[0], seen[1], seen[2], seen[3], seen[4]);
    assert_int_equal(seen[0] + seen[2] + seen[4], 0);
    double f3 = (double)seen[3] / DRAWS;
    assert_true(fabs(f3 - 0.5 / 0.8) < 0.02);
    sampler_free(s);

    /* top-p of 0, 1 or NaN: no nucleus, every token can be drawn */
    float offs[] = {0.0f, 1.0f, NAN};
    for (int k = 0; k < 3; k++) {
        int all[5] = {0};
        s = sampler_create(5, 1.0f, offs[k], 99);
        assert_non_null(s);
        draw(s, 5, logits, out, 2000);
        for (int i = 0; i < 2000; i++) all[out[i]]++;
        for (int i = 0; i < 5; i++) assert_true(all[i] > 0);
        sampler_free(s);
    }

    /* a nucleus of one: the top token's 0.5 already exceeds 0.4 */
    s = sampler_create(5, 1.0f, 0.4f, 99);
    assert_non_null(s);
    draw(s, 5, logits, out, 1000);
    for (int i = 0; i < 1000; i++) assert_int_equal(out[i], 3);
    sampler_free(s);
}

/* Equal probabilities at the nucleus' edge: ties are ordered by index, so the
 * set is the same whatever qsort does with equal keys. */
static void test_topp_ties_by_index(void **state) {
    (void)state;
    enum { DRAWS = 5000 };
    float logits[4] = {0, 0, 0, 0}; /* 0.25 each: the first mass above 0.6 is three tokens */
    static int out[DRAWS];
    int seen[4] = {0};
    sampler *s = sampler_create(4, 1.0f, 0.6f, 5);
    assert_non_null(s);
    draw(s, 4, logits, out, DRAWS);
    for (int i = 0; i < DRAWS; i++) seen[out[i]]++;
    assert_int_equal(seen[3], 0);
    for (int i = 0; i < 3; i++) assert_true(seen[i] > DRAWS / 4);
    sampler_free(s);
}

/* Frequencies over many draws follow softmax(logits / T) for T = 1 and T = 2. */
static void test_temperature_distribution(void **state) {
    (void)state;
    enum { N = 4, DRAWS = 100000 };
    const double p[N] = {0.1, 0.2, 0.3, 0.4};
    float logits[N];
    for (int i = 0; i < N; i++) logits[i] = (float)log(p[i]);
    static int out[DRAWS];
    float temps[] = {1.0f, 2.0f};
    for (int k = 0; k < 2; k++) {
        double want[N], z = 0;
        for (int i = 0; i < N; i++) z += want[i] = pow(p[i], 1.0 / temps[k]);
        int seen[N] = {0};
        sampler *s = sampler_create(N, temps[k], 1.0f, 2024); /* topp 1: the whole distribution */
        assert_non_null(s);
        draw(s, N, logits, out, DRAWS);
        for (int i = 0; i < DRAWS; i++) seen[out[i]]++;
        for (int i = 0; i < N; i++) {
            double f = (double)seen[i] / DRAWS;
            printf("[ INFO     ] T=%.0f token %d: drawn %.4f, expected %.4f\n", temps[k], i, f, want[i] / z);
            /* 5 sigma of a binomial proportion at 100000 draws is under 0.008 */
            assert_true(fabs(f - want[i] / z) < 0.008);
        }
        sampler_free(s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rejects_empty_vocab),
        cmocka_unit_test(test_greedy_first_index_on_ties),
        cmocka_unit_test(test_stream_matches_llama2c),
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_zero_seed_still_random),
        cmocka_unit_test(test_topp_stays_in_nucleus),
        cmocka_unit_test(test_topp_ties_by_index),
        cmocka_unit_test(test_temperature_distribution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
