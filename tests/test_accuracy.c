/* The accuracy metric (engines/core/runtime/accuracy.h): KL divergence, top-1 agreement and
 * logit error of a variant against a reference, on distributions worked out by hand and on
 * stories260K, where the reference against itself is exactly 0 and an f16 cache costs a KL
 * above 0 and below the bound stated here. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "engines/core/runtime/accuracy.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"

/* Two positions of three logits, worked out by hand:
 *   position 0: p = softmax(0, ln 2, 0) = (1/4, 1/2, 1/4), q = softmax(0, 0, 0) = (1/3, 1/3, 1/3)
 *               KL = 1/4 ln(3/4) + 1/2 ln(3/2) + 1/4 ln(3/4) = ln 3 - (3/2) ln 2; top-1: 1 against 0
 *               (argmax takes the first of the ties), so they disagree
 *   position 1: equal logits: KL 0, top-1 agrees */
static void test_compare_by_hand(void **state) {
    (void)state;
    const float ln2 = (float)M_LN2;
    const float ref[] = {0, ln2, 0, 1, 2, 3};
    const float var[] = {0, 0, 0, 1, 2, 3};
    acc_figures f;
    acc_compare(ref, var, 2, 3, &f);
    /* ln 2 rounded to float: the exact distribution of those logits, in double */
    double z = 2 + exp((double)ln2), p0[3] = {1 / z, exp((double)ln2) / z, 1 / z}, kl0 = 0;
    for (int j = 0; j < 3; j++) kl0 += p0[j] * log(p0[j] * 3);
    assert_true(fabs(kl0 - (log(3.0) - 1.5 * log(2.0))) < 1e-7);
    assert_int_equal(f.n_pos, 2);
    assert_true(fabs(f.kl_max - kl0) < 1e-12);
    assert_true(fabs(f.kl_mean - kl0 / 2) < 1e-12);
    assert_true(f.top1 == 0.5);
    /* logit errors relative to each position's largest |logit|: ln2 / ln2 = 1 at position 0 */
    assert_true(fabs(f.err_max - 1.0) < 1e-12);
    assert_true(fabs(f.err_rms - sqrt(1.0 / 6)) < 1e-12);
    /* the same logits: every figure exactly 0, top-1 all */
    acc_compare(ref, ref, 2, 3, &f);
    assert_true(f.kl_mean == 0 && f.kl_max == 0 && f.err_max == 0 && f.err_rms == 0 && f.top1 == 1.0);
}

static void test_stories260k_reference_and_f16_cache(void **state) {
    (void)state;
    char model[512], tok[512];
    TU_NEED(tu_shared("models/stories260K.bin", model, sizeof(model)) && tu_shared("models/tok512.bin", tok, sizeof(tok)));
    engine_spec v = {.model_path = model, .tokenizer_path = tok, .loader = "mmap", .kv = "prealloc", .threads = 2,
                     .module_dir = tu_module_dir()};
    engine_spec r = acc_reference_spec(&v);
    /* a prompt: the first five ids of ../shared/oracle (BOS first) */
    int prompt[] = {1, 291, 376, 400, 428};
    acc_figures f;
    char err[1024];
    /* the reference against itself: exactly 0, to the bit */
    if (acc_measure(&v, &r, prompt, 5, 64, &f, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(f.n_pos, 5 + 64 - 1);
    assert_true(f.kl_mean == 0 && f.kl_max == 0 && f.err_max == 0 && f.err_rms == 0 && f.top1 == 1.0);
    /* an f16 cache: a KL above 0, below the bound stated in docs/accuracy.md (1e-5 mean,
     * 1e-3 at the worst position; measured 7.6e-7 and 1.5e-5 over 199 positions) */
    v.kv_k_type = v.kv_v_type = BENCH_F16;
    for (int k = 0; k < 2; k++) {
        v.kv = k ? "block" : "prealloc";
        if (acc_measure(&v, &r, prompt, 5, 64, &f, err, sizeof(err))) fail_msg("%s", err);
        print_message("f16 cache, kv %s: KL mean %.3g max %.3g, top-1 %.1f%%, err max %.3g rms %.3g\n", v.kv, f.kl_mean,
                      f.kl_max, 100 * f.top1, f.err_max, f.err_rms);
        assert_true(f.kl_mean > 0 && f.kl_mean < 1e-5);
        assert_true(f.kl_max < 1e-3);
        assert_true(f.top1 >= 0.98);
        assert_true(f.err_max > 0 && f.err_max < 0.02);
    }
    /* deterministic: the same figures twice */
    acc_figures g;
    if (acc_measure(&v, &r, prompt, 5, 64, &g, err, sizeof(err))) fail_msg("%s", err);
    assert_memory_equal(&f, &g, sizeof(f));
    /* a failure names the engine */
    v.kv = "nosuch";
    assert_int_equal(acc_measure(&v, &r, prompt, 5, 8, &g, err, sizeof(err)), -BENCH_ERR_NOTFOUND);
    assert_non_null(strstr(err, "accuracy variant: unknown kv module \"nosuch\""));
}

/* A device's variant is measured against the CPU's exact path, with the CPU's default
 * modules in place of the device's (which the CPU has not) and no module options. */
static void test_reference_of_a_device_variant_is_the_cpu(void **state) {
    (void)state;
    bench_opt o[] = {{.key = "slots", .value = "2"}};
    engine_spec v = {.model_path = "m.gguf", .loader = "pinned", .kv = "vmm", .alloc = "libc", .device = "cuda",
                     .device_opts = {1, o}, .loader_opts = {1, o}, .kv_opts = {1, o}, .kernels = "vnni",
                     .kv_k_type = BENCH_Q8_0, .kv_v_type = BENCH_F16, .threads = 3, .max_pos = 99, .kv_budget_tokens = 7};
    engine_spec r = acc_reference_spec(&v);
    assert_null(r.device);
    assert_int_equal(r.device_opts.n + r.loader_opts.n + r.kv_opts.n + r.alloc_opts.n, 0);
    assert_true(!r.loader && !r.kv && !r.alloc);
    assert_string_equal(r.kernels, "auto");
    assert_int_equal(r.kv_k_type, BENCH_F32);
    assert_int_equal(r.kv_v_type, BENCH_F32);
    assert_string_equal(r.model_path, "m.gguf");
    assert_int_equal(r.threads, 3);
    assert_int_equal(r.max_pos, 99);
    assert_true(r.kv_budget_tokens == 0);
    /* on the CPU the variant's modules and options stay */
    v.device = "cpu";
    v.loader = "mmap";
    v.kv = "block";
    r = acc_reference_spec(&v);
    assert_string_equal(r.kv, "block");
    assert_int_equal(r.kv_opts.n, 1);
    assert_string_equal(r.device, "cpu");
}

static double summary_metric(const cJSON *doc, int variant, const char *name) {
    const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "summary"), variant);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "metrics"), name);
    const cJSON *med = cJSON_GetObjectItemCaseSensitive(m, "median");
    if (!cJSON_IsNumber(med)) fail_msg("variant %d has no metric %s", variant, name);
    return med->valuedouble;
}

/* In a scenario: a kv_cache axis with a cheaper type brings the metric into the default set;
 * each variant gets it from one untimed pass, as exact-class figures in the summary. */
static void test_scenario_accuracy_metric(void **state) {
    (void)state;
    char model[512], tok[512], tmp[512], sc[700], out[700], results[800];
    TU_NEED(tu_shared("models/stories260K.bin", model, sizeof(model)) && tu_shared("models/tok512.bin", tok, sizeof(tok)));
    assert_non_null(tu_tmpdir(tmp, sizeof(tmp)));
    snprintf(sc, sizeof(sc), "%s/acc.json", tmp);
    FILE *f = fopen(sc, "w");
    assert_non_null(f);
    fprintf(f, "{\"name\": \"acc\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\","
               " \"workload\": {\"prompt\": \"The little dog\", \"generate\": 24}, \"repetitions\": 1, \"warmup\": 0,"
               " \"matrix\": {\"kv_cache\": [\"f32\", \"f16\"]}}", model, tok);
    fclose(f);
    snprintf(out, sizeof(out), "%s/out", tmp);
    char shared[600];
    snprintf(shared, sizeof(shared), "%s", model);
    *strrchr(shared, '/') = 0;
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s' --allow-read '%s' 2>/dev/null", sc, out, shared), 0);
    snprintf(results, sizeof(results), "%s/results.json", out);
    cJSON *doc = hjs_load(results);
    assert_non_null(doc);
    assert_true(summary_metric(doc, 0, "accuracy_kl_mean") == 0 && summary_metric(doc, 0, "accuracy_kl_max") == 0);
    assert_true(summary_metric(doc, 0, "accuracy_top1_pct") == 100);
    double kl = summary_metric(doc, 1, "accuracy_kl_mean");
    assert_true(kl > 0 && kl < 1e-5);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "summary"), 1), "metrics"),
        "accuracy_kl_mean");
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(m, "class");
    assert_true(cJSON_IsString(cls) && !strcmp(cls->valuestring, "exact"));
    cJSON_Delete(doc);
    tu_rmtree(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_by_hand),
        cmocka_unit_test(test_stories260k_reference_and_f16_cache),
        cmocka_unit_test(test_reference_of_a_device_variant_is_the_cpu),
        cmocka_unit_test(test_scenario_accuracy_metric),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
