/* Production numerics (engine.h engine_numerics, docs/accuracy.md "Production numerics"):
 * the check that lets kernels auto run a family that rounds x to int8, on llama.cpp's own
 * quantised files (../shared/thirdparty/k256).
 *
 *   - each int8 family this CPU runs, on k256-q8_0, q4_0, q4_k_m (its Q4_K) and q6_k, decode
 *     and prefill (the K-quants' prefill: vnni's int8 GEMM; avx2-int8's is exact): its
 *     logits over the check's teacher-forced pass are within llama.cpp's own error on the
 *     same pass (x rounded as llama.cpp rounds it: acc_compare.h acc_production_ok), and not
 *     exactly the exact family's (it does round);
 *   - a doctored family, the same int8 kernel with 10% noise on its Q8_0 outputs, is refused;
 *   - the exact family against itself is 0 in every figure, and exact numerics drop a
 *     rounding choice an earlier engine of the process made;
 *   - the tuner's side: a refused family leaves the entry (and its re-check) for the exact
 *     one, an accepted one is chosen, and both, with their figures, survive the cache file;
 *     through engine_create with the tuner on and one family's timings scaled so that it
 *     wins, the int8 family is accepted and runs, and the doctored one is refused.
 * The tuner's measurement is off (tests/run.sh sets BENCH_KERNELS_TUNE=0; main makes sure)
 * but in test_tuner_production, where kt_test_scale decides every timing: no assertion rests
 * on one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "engines/core/compute/kernels.h"
#include "engines/core/compute/kernels_impl.h"
#include "engines/core/compute/kernels_tune.h"
#include "engines/core/runtime/engine.h"
#include "harness/cli/commands.h"
#include "tests/lib/testutil.h"

static char k256_dir[512];

static engine *open_k256(const char *type, engine_numerics num) {
    char model[700], err[1024];
    snprintf(model, sizeof(model), "%s/k256-%s.gguf", k256_dir, type);
    engine_spec s = {.model_path = model, .threads = 2, .module_dir = tu_module_dir(), .kernels = "auto", .numerics = num};
    engine *e = NULL;
    if (engine_create(&s, &e, err, sizeof(err))) fail_msg("engine_create(%s): %s", model, err);
    return e;
}

/* The k-th family (from 0) this CPU runs that rounds x for dt, the test's own aside; NULL
 * when there are fewer. */
static const char *rounding_family_at(bench_dtype dt, int k) {
    for (int i = 0; i < kn_isa_count(); i++) {
        int here = 0;
        const char *name = kn_isa_name(i, &here);
        if (here && kn_isa_rounds(name, dt) && strncmp(name, "noisy", 5) && k-- == 0) return name;
    }
    return NULL;
}

static const char *rounding_family(bench_dtype dt) { return rounding_family_at(dt, 0); }

static void test_int8_families_pass(void **state) {
    (void)state;
    if (!k256_dir[0]) skip();
    /* the K-quant files: Q4_K in q4_k_m, Q6_K in q6_k, whose prefill only vnni rounds (its int8 GEMM) */
    static const struct { const char *file; bench_dtype dt; } files[] = {
        {"q8_0", BENCH_Q8_0}, {"q4_0", BENCH_Q4_0}, {"q4_k_m", BENCH_Q4_K}, {"q6_k", BENCH_Q6_K}};
    int ran = 0;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        engine *e = open_k256(files[k].file, ENGINE_NUMERICS_EXACT);
        const char *fam;
        for (int r = 0; (fam = rounding_family_at(files[k].dt, r)); r++)
        for (int prefill = 0; prefill < 2; prefill++) {
            if (prefill && (files[k].dt == BENCH_Q4_K || files[k].dt == BENCH_Q6_K) && strcmp(fam, "vnni")) continue;
            char exact[32], err[512];
            snprintf(exact, sizeof(exact), "%s", kn_auto_family(files[k].dt, prefill));
            acc_figures f, fl;
            if (engine_numerics_check(e, files[k].dt, prefill, fam, exact, &f, &fl, err, sizeof(err))) fail_msg("%s", err);
            printf("[ INFO     ] k256-%s %s: %s against %s over %d positions: KL mean %.3g max %.3g, top-1 %.1f%%, "
                   "relative RMS %.3g%%\n", files[k].file, prefill ? "prefill" : "decode", fam, exact, f.n_pos, f.kl_mean,
                   f.kl_max, 100 * f.top1, 100 * f.err_rel);
            assert_int_equal(f.n_pos, ENGINE_NUMERICS_POS);
            printf("[ INFO     ]   llama.cpp's own rounding on it: KL mean %.3g, top-1 %.1f%%, relative RMS %.3g%%\n",
                   fl.kl_mean, 100 * fl.top1, 100 * fl.err_rel);
            assert_true(f.err_rel > 0 && f.kl_mean > 0);       /* it rounds: not the exact family again */
            assert_int_equal(fl.n_pos, ENGINE_NUMERICS_POS);
            assert_true(fl.err_rel > 0.005 && fl.err_rel < 0.03);  /* llama.cpp's own, 1.1 to 1.7% on k256 (its README) */
            assert_true(acc_production_ok(&f, &fl));
            assert_string_equal(kn_auto_family(files[k].dt, prefill), exact);    /* the choice is put back */
            ran++;
        }
        engine_destroy(e);
    }
    if (!ran) skip();   /* no int8 family runs on this CPU */
}

/* The bf16 family rounds x to bf16 for bf16 weights in prefill, as llama.cpp's CPU path does:
 * on k256 written in bf16 (bench model convert of the f32 file), its logits against the exact
 * family's are within llama.cpp's own error, and it rounds (not the exact result again). */
static void test_bf16_family_passes(void **state) {
    (void)state;
    const char *fam = rounding_family(BENCH_BF16);
    if (!k256_dir[0] || !fam) skip();
    char dir[512], model[700], err[1024];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(model, sizeof(model), "%s/k256-bf16.gguf", dir);
    if (tu_bench("/dev/null", "model convert '%s/k256-f32.gguf' '%s' --dtype bf16 2>/dev/null", k256_dir, model)) fail_msg("convert failed");
    engine_spec s = {.model_path = model, .threads = 2, .module_dir = tu_module_dir(), .kernels = "auto", .numerics = ENGINE_NUMERICS_EXACT};
    engine *e = NULL;
    if (engine_create(&s, &e, err, sizeof(err))) fail_msg("engine_create(%s): %s", model, err);
    char exact[32];
    snprintf(exact, sizeof(exact), "%s", kn_auto_family(BENCH_BF16, 1));
    acc_figures f, fl;
    if (engine_numerics_check(e, BENCH_BF16, 1, fam, exact, &f, &fl, err, sizeof(err))) fail_msg("%s", err);
    printf("[ INFO     ] k256-bf16 prefill: %s against %s over %d positions: KL mean %.3g max %.3g, top-1 %.1f%%, relative RMS %.3g%%\n",
           fam, exact, f.n_pos, f.kl_mean, f.kl_max, 100 * f.top1, 100 * f.err_rel);
    printf("[ INFO     ]   llama.cpp's own rounding (x to bf16): KL mean %.3g, top-1 %.1f%%, relative RMS %.3g%%\n",
           fl.kl_mean, 100 * fl.top1, 100 * fl.err_rel);
    assert_true(f.err_rel > 0 && f.kl_mean > 0);
    assert_true(acc_production_ok(&f, &fl));
    assert_string_equal(kn_auto_family(BENCH_BF16, 1), exact);
    engine_destroy(e);
    tu_rmtree(dir);
}

/* ---- a doctored family: the int8 kernel with noise on its Q8_0 outputs ---- */

static kn_mm_fn noisy_base;
static kn_ops noisy_ops;

/* y * (1 +- 0.1), the sign a hash of the row: a family that computes wrongly by 10% */
static void noisy_mm(float *y, const float *x, int n, const void *w, int rows, int cols, int r0, int r1, const kn_xq8 *xq) {
    noisy_base(y, x, n, w, rows, cols, r0, r1, xq);
    for (int t = 0; t < n; t++)
        for (int r = r0; r < r1; r++) y[(size_t)t * rows + r] *= ((unsigned)r * 2654435761u >> 13) & 1 ? 1.1f : 0.9f;
}

static const kn_ops *family_ops(const char *name) {
    if (!strcmp(name, "vnni")) return &kn_ops_vnni;
    if (!strcmp(name, "avx2-int8")) return &kn_ops_avx2_int8;
    return NULL;
}

static void test_doctored_family_refused(void **state) {
    (void)state;
    const char *fam = rounding_family(BENCH_Q8_0);
    if (!k256_dir[0] || !fam || !family_ops(fam)) skip();
    noisy_ops = *family_ops(fam);
    noisy_base = noisy_ops.mm[BENCH_Q8_0];
    noisy_ops.mm[BENCH_Q8_0] = noisy_mm;
    static const kn_family noisy = {.name = "noisy-int8", .about = "test: the int8 kernel, 10% off", .ops = &noisy_ops};
    assert_int_equal(kn_family_add(&noisy), 0);
    assert_true(kn_isa_rounds("noisy-int8", BENCH_Q8_0));
    /* the tuner may not take it: it is not exact */
    assert_int_equal(kn_set_tuned(BENCH_Q8_0, 0, "noisy-int8"), -1);
    engine *e = open_k256("q8_0", ENGINE_NUMERICS_EXACT);
    char exact[32], err[512];
    snprintf(exact, sizeof(exact), "%s", kn_auto_family(BENCH_Q8_0, 0));
    acc_figures f, fl;
    if (engine_numerics_check(e, BENCH_Q8_0, 0, "noisy-int8", exact, &f, &fl, err, sizeof(err))) fail_msg("%s", err);
    printf("[ INFO     ] k256-q8_0 decode: noisy-int8 against %s: KL mean %.3g, top-1 %.1f%%, relative RMS %.3g%%\n", exact,
           f.kl_mean, 100 * f.top1, 100 * f.err_rel);
    assert_false(acc_production_ok(&f, &fl));
    assert_true(f.err_rel > 2 * fl.err_rel);
    engine_destroy(e);
}

/* The exact family against itself: 0 in every figure; and exact numerics undo a rounding
 * choice left by an earlier engine of the process (the choices are process-wide). */
static void test_exact_is_zero_and_pinned(void **state) {
    (void)state;
    if (!k256_dir[0]) skip();
    engine *e = open_k256("q8_0", ENGINE_NUMERICS_EXACT);
    char exact[32], err[512];
    snprintf(exact, sizeof(exact), "%s", kn_auto_family(BENCH_Q8_0, 0));
    acc_figures f, fl;
    if (engine_numerics_check(e, BENCH_Q8_0, 0, exact, exact, &f, &fl, err, sizeof(err))) fail_msg("%s", err);
    assert_true(f.kl_mean == 0 && f.kl_max == 0 && f.err_rel == 0 && f.top1 == 1);
    assert_true(acc_production_ok(&f, &fl));
    acc_figures none = {0};     /* without llama.cpp's figures nothing passes */
    assert_false(acc_production_ok(&f, &none));
    engine_destroy(e);
    const char *fam = rounding_family(BENCH_Q8_0);
    if (!fam) return;
    assert_int_equal(kn_set_tuned_rounding(BENCH_Q8_0, 0, fam), 0);
    e = open_k256("q8_0", ENGINE_NUMERICS_EXACT);
    assert_false(kn_isa_rounds(kn_auto_family(BENCH_Q8_0, 0), BENCH_Q8_0));
    engine_destroy(e);
}


/* Q8_0 decode and prefill, each with vnni faster than avx512 and waiting for its check. */
static void two_pending_entries(kt_table *t) {
    t->production = 1;
    t->n = 2;
    for (int i = 0; i < 2; i++) {
        kt_entry *e = &t->e[i];
        *e = (kt_entry){.dt = BENCH_Q8_0, .prefill = i, .n_families = 2, .bytes = 1e6, .rows = 64, .cols = 256, .when = 1,
                        .load1 = 0.5, .others = 0.01, .acc = KT_ACC_PENDING, .bound_kl_mean = NAN, .bound_err_rel = NAN,
                        .bound_top1 = NAN};
        snprintf(e->family[0], 16, "avx512");
        snprintf(e->family[1], 16, "vnni");
        e->rate[0] = 10;
        e->rate[1] = 15;
        snprintf(e->exact, 16, "avx512");
        snprintf(e->acc_family, 16, "vnni");
        snprintf(e->chosen, 16, "vnni");
    }
}

/* kt_settle and the cache file's version 3 column (4: with the bound), without timing anything. */
static void test_tuner_settle_and_cache(void **state) {
    (void)state;
    char dir[512], path[600], err[256];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(path, sizeof(path), "%s/kernels-auto.tsv", dir);
    kt_table *t = calloc(1, sizeof(*t)), *back = calloc(1, sizeof(*back));
    assert_non_null(t);
    assert_non_null(back);
    snprintf(t->key, sizeof(t->key), "cpu=test;numerics=production;model=0123456789abcdef");
    two_pending_entries(t);
    kt_settle_bound(&t->e[0], 5.1e-4, 0.012, 0.969);
    kt_settle(&t->e[0], 1, 4.8e-4, 1.1e-3, 0.011, 0.984);     /* decode: accepted */
    kt_settle_bound(&t->e[1], 5.0e-4, 0.0115, 0.953);
    kt_settle(&t->e[1], 0, 0.33, 0.9, 0.21, 0.625);           /* prefill: refused */
    assert_string_equal(t->e[0].chosen, "vnni");
    assert_int_equal(t->e[0].n_families, 2);
    assert_string_equal(t->e[1].chosen, "avx512");
    assert_int_equal(t->e[1].n_families, 1);                  /* the re-check never times it again */
    assert_string_equal(t->e[1].family[0], "avx512");
    kt_settle(&t->e[1], 1, 0, 0, 0, 1);                       /* settled once: a second call changes nothing */
    assert_string_equal(t->e[1].chosen, "avx512");
    if (kt_cache_store(path, t, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(kt_cache_load(path, t->key, 1u << BENCH_Q8_0, back, err, sizeof(err)), 0);
    assert_int_equal(back->n, 2);
    for (int i = 0; i < 2; i++) {
        const kt_entry *e = &back->e[i], *w = &t->e[e->prefill];
        assert_int_equal(e->acc, w->acc);
        assert_string_equal(e->chosen, w->chosen);
        assert_string_equal(e->acc_family, "vnni");
        assert_string_equal(e->exact, "avx512");
        assert_true(fabs(e->err_rel - w->err_rel) < 1e-6 && fabs(e->top1 - w->top1) < 1e-4 &&
                    fabs(e->kl_mean - w->kl_mean) < 1e-2 * w->kl_mean);
        assert_true(fabs(e->bound_err_rel - w->bound_err_rel) < 1e-6 && fabs(e->bound_top1 - w->bound_top1) < 1e-4 &&
                    fabs(e->bound_kl_mean - w->bound_kl_mean) < 1e-2 * w->bound_kl_mean);
    }
    /* a check without its bound (a version 3 bench's, against the fixed 2%) is made again */
    t->e[1].bound_err_rel = NAN;
    if (kt_cache_store(path, t, err, sizeof(err))) fail_msg("%s", err);
    assert_int_equal(kt_cache_load(path, t->key, 1u << BENCH_Q8_0, back, err, sizeof(err)), 1);
    assert_int_equal(back->n, 1);
    assert_int_equal(back->e[0].prefill, 0);
    /* the exact key does not see the production entries */
    assert_int_equal(kt_cache_load(path, "cpu=test", 1u << BENCH_Q8_0, back, err, sizeof(err)), 1);
    free(t);
    free(back);
    tu_rmtree(dir);
}

/* `bench list` shows production numerics' entries, one key per model, named by the model's
 * file (its separators made harmless), with each check's outcome: cmd_list run in this
 * process, so that the key (which names the executable's build) is the one stored here. */
static void test_list_shows_production(void **state) {
    (void)state;
    char dir[512], path[600], out[600], err[256], base[KT_KEY_MAX], id[128];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(path, sizeof(path), "%s/kernels-auto.tsv", dir);
    snprintf(out, sizeof(out), "%s/list.txt", dir);
    kt_table *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    kt_key(1, base, sizeof(base));
    engine_numerics_model_id("/models/my;odd=model.gguf", id, sizeof(id));
    assert_non_null(strstr(id, ";file=my_odd_model.gguf"));
    kt_production_key(base, id, t->key, sizeof(t->key));
    two_pending_entries(t);
    kt_settle_bound(&t->e[0], 5.1e-4, 0.012, 0.969);
    kt_settle_bound(&t->e[1], 5.0e-4, 0.0115, 0.953);
    kt_settle(&t->e[0], 1, 4.8e-4, 1.1e-3, 0.011, 0.984);
    kt_settle(&t->e[1], 0, 0.33, 0.9, 0.21, 0.625);
    if (kt_cache_store(path, t, err, sizeof(err))) fail_msg("%s", err);
    char keys[4][KT_KEY_MAX], prefix[KT_KEY_MAX];
    kt_production_key(base, "", prefix, sizeof(prefix));
    assert_int_equal(kt_cache_keys(path, prefix, keys, 4, err, sizeof(err)), 1);
    assert_string_equal(keys[0], t->key);
    assert_int_equal(kt_cache_keys(path, "cpu=nothing", keys, 4, err, sizeof(err)), 0);
    setenv("BENCH_KERNELS_CACHE", path, 1);
    fflush(stdout);
    int saved = dup(1), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    close(fd);
    char *argv[] = {"list", NULL};
    int rc = cmd_list(1, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    unsetenv("BENCH_KERNELS_CACHE");
    assert_int_equal(rc, 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = 0;
    fclose(f);
    if (!strstr(text, "production numerics, model my_odd_model.gguf") || !strstr(text, "[vnni accepted on the model") ||
        !strstr(text, "[vnni refused on the model") || !strstr(text, "llama.cpp's rounding 0.00051, 1.20%, 96.9%]"))
        fail_msg("bench list does not show the production entries:\n%s", text);
    free(t);
    tu_rmtree(dir);
}

/* The whole of it through engine_create, with the tuner on: kt_test_scale makes one family's
 * timings 1000x as fast, so it wins every measurement and the check alone decides (no
 * assertion rests on a timing). The int8 family is accepted and runs Q8_0; exact numerics
 * never let it compete; the doctored family, made the fastest, is refused and the exact
 * family runs. The cache is a fresh file each time, so each engine measures. */
static void test_tuner_production(void **state) {
    (void)state;
    const char *fam = rounding_family(BENCH_Q8_0);
    if (!k256_dir[0] || !fam) skip();
    char dir[512], cache[600];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    snprintf(cache, sizeof(cache), "%s/kernels-auto.tsv", dir);
    setenv("BENCH_KERNELS_CACHE", cache, 1);
    setenv("BENCH_KERNELS_TUNE", "1", 1);
    kt_test_scale(fam, 1e-3);
    engine *e = open_k256("q8_0", ENGINE_NUMERICS_PRODUCTION);
    const kt_table *t = engine_kernels_table(e);
    assert_non_null(t);
    printf("[ INFO     ] %s\n", engine_kernels_note(e));
    int seen = 0;
    for (int i = 0; i < t->n; i++) {
        const kt_entry *k = &t->e[i];
        if (k->dt != BENCH_Q8_0) continue;
        assert_int_equal(k->acc, KT_ACC_ACCEPTED);
        assert_string_equal(k->chosen, fam);
        assert_true(k->err_rel > 0 && k->err_rel <= k->bound_err_rel * (1 + ACC_PROD_SLACK) &&
                    k->top1 >= k->bound_top1 - ACC_PROD_TOP1_NOISE);
        assert_string_equal(kn_auto_family(BENCH_Q8_0, k->prefill), fam);
        seen++;
    }
    assert_int_equal(seen, 2);
    engine_destroy(e);
    unlink(cache);
    e = open_k256("q8_0", ENGINE_NUMERICS_EXACT);
    assert_null(engine_kernels_table(e));
    for (int prefill = 0; prefill < 2; prefill++) assert_false(kn_isa_rounds(kn_auto_family(BENCH_Q8_0, prefill), BENCH_Q8_0));
    engine_destroy(e);
    if (kn_isa_known("noisy-int8")) {   /* test_doctored_family_refused added it */
        unlink(cache);
        kt_test_scale("noisy-int8", 1e-3);
        e = open_k256("q8_0", ENGINE_NUMERICS_PRODUCTION);
        t = engine_kernels_table(e);
        assert_non_null(t);
        printf("[ INFO     ] %s\n", engine_kernels_note(e));
        for (int i = 0; i < t->n; i++) {
            const kt_entry *k = &t->e[i];
            if (k->dt != BENCH_Q8_0) continue;
            assert_int_equal(k->acc, KT_ACC_REFUSED);
            assert_string_equal(k->acc_family, "noisy-int8");
            assert_string_equal(k->chosen, k->exact);
            assert_false(kn_isa_rounds(kn_auto_family(BENCH_Q8_0, k->prefill), BENCH_Q8_0));
            for (int f = 0; f < k->n_families; f++) assert_string_not_equal(k->family[f], "noisy-int8");
        }
        engine_destroy(e);
    }
    kt_test_scale(NULL, 1);
    setenv("BENCH_KERNELS_TUNE", "0", 1);
    unsetenv("BENCH_KERNELS_CACHE");
    tu_rmtree(dir);
}

int main(void) {
    setenv("BENCH_KERNELS_TUNE", "0", 1);   /* the figures come from the check alone, never a timing */
    char p[600];
    if (tu_shared("thirdparty/k256/k256-q8_0.gguf", p, sizeof(p)))
        snprintf(k256_dir, sizeof(k256_dir), "%.*s", (int)(strrchr(p, '/') - p), p);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_families_pass),
        cmocka_unit_test(test_bf16_family_passes),
        cmocka_unit_test(test_doctored_family_refused),
        cmocka_unit_test(test_exact_is_zero_and_pinned),
        cmocka_unit_test(test_tuner_settle_and_cache),
        cmocka_unit_test(test_list_shows_production),
        cmocka_unit_test(test_tuner_production),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
