/* The command line's answers to a first-hour user's mistakes (issue 16): one exit status
 * (2) for every usage error, the option at fault named, a near miss answered with the
 * option meant instead of the whole help page. Runs the real binary. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/compute/kernels.h"
#include "engines/core/runtime/engine.h"
#include "harness/cli/cliargs.h"
#include "harness/report/rmodel.h"
#include "tests/lib/testutil.h"

static char tmp[512], out[700];

static int setup(void **state) {
    (void)state;
    if (!tu_tmpdir(tmp, sizeof(tmp))) return -1;
    snprintf(out, sizeof(out), "%s/err.txt", tmp);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_rmtree(tmp);
    return 0;
}

static char *err_text(void) {
    char e[256];
    char *t = rr_slurp(out, NULL, e, sizeof(e));
    assert_non_null(t);
    return t;
}

/* runs `bench ARGS 2>out`; returns the exit status */
static int bench_err(const char *args) { return tu_bench("/dev/null", "%s 2>'%s'", args, out); }

static void test_nearest(void **state) {
    (void)state;
    static const char *const known[] = {"--out", "--only", "--repeat", "--quick", "--force", NULL};
    assert_string_equal(cli_nearest("--repeats", known), "--repeat");
    assert_string_equal(cli_nearest("--forse", known), "--force");
    assert_string_equal(cli_nearest("--rep", known), "--repeat");
    assert_null(cli_nearest("--verbose", known));
}

static void test_run_did_you_mean(void **state) {
    (void)state;
    assert_int_equal(bench_err("run scenarios/ci.json --repeats 3"), CLI_EXIT_USAGE);
    char *t = err_text();
    assert_non_null(strstr(t, "\"--repeats\": did you mean --repeat?"));
    /* one line, not the help page */
    assert_null(strstr(t, "usage:"));
    assert_int_equal(strchr(t, '\n') - t + 1, (int)strlen(t));
    free(t);
    assert_int_equal(bench_err("run scenarios/ci.json --out"), CLI_EXIT_USAGE);
    t = err_text();
    assert_non_null(strstr(t, "--out needs a value"));
    free(t);
}

static void test_generate_usage_errors(void **state) {
    (void)state;
    char model[512], args[1200];
    if (!tu_shared("models/stories260K.bin", model, sizeof(model))) skip();
    /* the option at fault, by name */
    snprintf(args, sizeof(args), "generate --model '%s' --steps abc", model);
    assert_int_equal(bench_err(args), CLI_EXIT_USAGE);
    char *t = err_text();
    assert_non_null(strstr(t, "--steps abc: expected a whole number"));
    assert_null(strstr(t, "--temperature"));
    free(t);
    snprintf(args, sizeof(args), "generate --model '%s' --topp 2", model);
    assert_int_equal(bench_err(args), CLI_EXIT_USAGE);
    t = err_text();
    assert_non_null(strstr(t, "--topp 2"));
    free(t);
    /* an unknown module is a usage error like the rest: the same status */
    snprintf(args, sizeof(args), "generate --model '%s' --kv nosuch --steps 4", model);
    assert_int_equal(bench_err(args), CLI_EXIT_USAGE);
    t = err_text();
    assert_non_null(strstr(t, "nosuch"));
    free(t);
    snprintf(args, sizeof(args), "generate --model '%s' --stpes 4", model);
    assert_int_equal(bench_err(args), CLI_EXIT_USAGE);
    t = err_text();
    assert_non_null(strstr(t, "did you mean --steps?"));
    free(t);
    /* an enum's value outside it, in generate and in serve alike */
    for (int serve = 0; serve < 2; serve++) {
        snprintf(args, sizeof(args), "%s --model '%s' --scratch some", serve ? "serve" : "generate", model);
        assert_int_equal(bench_err(args), CLI_EXIT_USAGE);
        t = err_text();
        assert_non_null(strstr(t, "--scratch some: expected keep or pass"));
        free(t);
        /* a pass below ubatch's least (32), in both */
        snprintf(args, sizeof(args), "%s --model '%s' --ubatch 16", serve ? "serve" : "generate", model);
        assert_int_equal(bench_err(args), CLI_EXIT_USAGE);
        t = err_text();
        assert_non_null(strstr(t, "--ubatch 16: expected"));
        assert_non_null(strstr(t, "32"));
        free(t);
    }
    /* and a model that is not there is not a usage error */
    assert_int_equal(bench_err("generate --model /nonexistent/model.bin --steps 4"), 1);
}

/* The names the help and bench list show are the tables' (kernels.c kn_families, kv_types.h
 * kvq_types): generate --help has a line per kernel family with its name and every cache type
 * in one list, and bench list a line per family. */
static void test_help_reads_the_tables(void **state) {
    (void)state;
    assert_int_equal(tu_bench(out, "generate --help"), 0);
    char *help = err_text(), types[256], want[300];
    engine_cache_type_names(types, sizeof types, " or ");
    snprintf(want, sizeof want, "alike: %s (default f16", types);
    assert_non_null(strstr(help, want));
    assert_int_equal(tu_bench(out, "list"), 0);
    char *list = err_text();
    for (int i = 0; i < kn_isa_count(); i++) {
        char line[256];
        snprintf(line, sizeof line, "  %-12s %s", kn_isa_name(i, NULL), kn_isa_about(kn_isa_name(i, NULL)));
        if (!strstr(help, line)) fail_msg("generate --help has no line \"%s\"", line);
        snprintf(line, sizeof line, "\n  %-12s ", kn_isa_name(i, NULL));
        if (!strstr(list, line)) fail_msg("bench list has no line for kernels %s", kn_isa_name(i, NULL));
    }
    free(help);
    free(list);
}

/* --no-repack: listed in --help, taken, and a near miss answered with it. An f32 model has no
 * Q4_0 matrix to rearrange, so no "repacked" line either way; a Q4_0 one has it exactly where
 * bench list says this CPU rearranges, and never with --no-repack. */
static void test_generate_no_repack(void **state) {
    (void)state;
    char model[512], tok[512], args[1200];
    if (!tu_shared("models/stories260K.bin", model, sizeof(model)) || !tu_shared("models/tok512.bin", tok, sizeof(tok))) skip();
    assert_int_equal(tu_bench(out, "generate --help"), 0);
    char *t = err_text();
    assert_non_null(strstr(t, "[--no-repack]"));
    assert_non_null(strstr(t, "  --no-repack "));
    free(t);
    snprintf(args, sizeof(args), "generate --model '%s' --no-repak", model);
    assert_int_equal(bench_err(args), CLI_EXIT_USAGE);
    t = err_text();
    assert_non_null(strstr(t, "did you mean --no-repack?"));
    free(t);
    /* a Q4_0 model is rearranged where bench list says auto rearranges Q4_0 here (a CPU with
     * AVX512-VNNI), as the "repacked" line says; never with --no-repack, nor an f32 model */
    char q4[512];
    int here = 0;
    const int have_q4 = tu_shared("thirdparty/k256/k256-q4_0.gguf", q4, sizeof(q4)) != NULL;
    if (have_q4) {
        assert_int_equal(tu_bench(out, "list"), 0);
        char *list = err_text(); /* tu_bench wrote list's output there */
        here = strstr(list, "Q4_0 matrices are rearranged at load") != NULL;
        assert_true(here || strstr(list, "Q4_0 matrices are not rearranged at load"));
        free(list);
    }
    for (int m = 0; m < 1 + have_q4; m++)
        for (int no = 0; no < 2; no++) {
            snprintf(args, sizeof(args), "generate --model '%s' --tokenizer '%s' --steps 4 --prompt-tokens 2%s",
                     m ? q4 : model, tok, no ? " --no-repack" : "");
            assert_int_equal(bench_err(args), 0);
            t = err_text();
            assert_non_null(strstr(t, "decode "));
            if (m && here && !no) assert_non_null(strstr(t, "repacked     14 Q4_0 matrices"));
            else assert_null(strstr(t, "repacked"));
            free(t);
        }
}

/* bf16 grouped at load (repack.c) where prefill runs on bf16 dot products: with pread, in place,
 * every layer's 7 matrices (the tied classifier stays), as the "repacked" line says, and the
 * same tokens as the file's layout (--no-repack); with mmap into anonymous copies, the same
 * tokens again (repack.c rp_matrix). The tiny shape's 172-row matrices end in 12 rows past
 * their last group. Skipped where this CPU has no avx512-bf16. */
static void test_generate_bf16_groups(void **state) {
    (void)state;
    char synth[800], args[1600], ids[2][800], e[256];
    snprintf(synth, sizeof(synth), "%s/tiny-bf16.gguf", tmp);
    snprintf(args, sizeof(args), "model synth --shape tiny --dtype bf16 --format gguf -o '%s'", synth);
    assert_int_equal(bench_err(args), 0);
    for (int no = 0; no < 2; no++) {
        snprintf(ids[no], sizeof(ids[no]), "%s/bf16-ids%d", tmp, no);
        snprintf(args, sizeof(args), "generate --model '%s' --loader pread --kernels avx512-bf16 --prompt-tokens 24 --steps 64 --ids%s",
                 synth, no ? " --no-repack" : "");
        const int rc = tu_bench(ids[no], "%s 2>'%s'", args, out);
        if (rc == CLI_EXIT_USAGE) {
            char *t = err_text();
            assert_non_null(strstr(t, "avx512-bf16"));
            free(t);
            skip();
        }
        assert_int_equal(rc, 0);
        char *t = err_text();
        if (no) assert_null(strstr(t, "repacked"));
        else if (!strstr(t, "repacked     35 bf16 matrices") || !strstr(t, "in place"))
            fail_msg("bf16 not grouped with pread:\n%s", t);
        free(t);
    }
    char *a = rr_slurp(ids[0], NULL, e, sizeof(e)), *b = rr_slurp(ids[1], NULL, e, sizeof(e));
    assert_true(a && b && strlen(a) > 40);
    assert_string_equal(a, b);
    free(a);
    free(b);
    char mids[800];
    snprintf(mids, sizeof(mids), "%s/bf16-ids-mmap", tmp);
    snprintf(args, sizeof(args), "generate --model '%s' --loader mmap --kernels avx512-bf16 --prompt-tokens 24 --steps 64 --ids", synth);
    assert_int_equal(tu_bench(mids, "%s 2>'%s'", args, out), 0);
    char *t = err_text();
    if (!strstr(t, "repacked     35 bf16 matrices") || !strstr(t, "into anonymous copies"))
        fail_msg("bf16 not grouped into copies with mmap:\n%s", t);
    free(t);
    a = rr_slurp(ids[1], NULL, e, sizeof(e));
    b = rr_slurp(mids, NULL, e, sizeof(e));
    assert_true(a && b);
    assert_string_equal(a, b);
    free(a);
    free(b);
}

static void test_other_commands_same_status(void **state) {
    (void)state;
    assert_int_equal(bench_err("nosuchcommand"), CLI_EXIT_USAGE);
    assert_int_equal(bench_err("compare a b --breif"), CLI_EXIT_USAGE);
    char *t = err_text();
    assert_non_null(strstr(t, "did you mean --brief?"));
    free(t);
    assert_int_equal(bench_err("history /tmp --metrik x"), CLI_EXIT_USAGE);
    assert_int_equal(bench_err("exec scenarios/ci.json --varaint kv=prealloc"), CLI_EXIT_USAGE);
    t = err_text();
    assert_non_null(strstr(t, "did you mean --variant?"));
    free(t);
    /* --only's help names every key it takes, workload included */
    assert_int_equal(tu_bench(out, "run --help"), 0);
    t = err_text();
    assert_non_null(strstr(t, "workload"));
    free(t);
}

/* llama.cpp's vocabulary-only GGUF files (a tokenizer, no tensors): bench model info prints
 * their vocabulary and tokenizer and says they hold no weights, exit 0 (it failed on
 * "missing tensor token_embd.weight", or "model dim is 0" on gpt-2's); bench generate and
 * bench run on one fail saying it is vocabulary-only. */
static void test_vocab_only_gguf(void **state) {
    (void)state;
    static const struct { const char *rel, *tokenizer; } files[] = {
        {"thirdparty/vocab/ggml-vocab-gpt-2.gguf", "model gpt2, pre gpt-2"},
        {"thirdparty/ggml-vocab-llama-spm.gguf", "model llama"},
    };
    char path[512], args[1400], sc[700];
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        if (!tu_shared(files[f].rel, path, sizeof(path))) skip();
        snprintf(args, sizeof(args), "model info '%s' 2>&1", path);
        assert_int_equal(tu_bench(out, "%s", args), 0);
        char *t = err_text();
        int ok = strstr(t, "vocabulary only") && strstr(t, "weights      none: no tensors") &&
                 strstr(t, files[f].tokenizer) && strstr(t, "vocab        ") && !strstr(t, "token_embd");
        if (!ok) fprintf(stderr, "bench %s:\n%s", args, t);
        free(t);
        assert_true(ok);

        snprintf(args, sizeof(args), "generate --model '%s' --steps 2", path);
        assert_int_equal(bench_err(args), 1);
        t = err_text();
        ok = strstr(t, "vocabulary-only file") && strstr(t, "no weights");
        free(t);
        assert_true(ok);
    }
    /* bench run: the scenario's model checked before any worker */
    snprintf(sc, sizeof(sc), "%s/vocab.json", tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"vocab\", \"model\": {\"path\": \"%s\"}, \"workload\": {\"prompt_tokens\": 4, \"generate\": 2},"
               " \"repetitions\": 1, \"warmup\": 0, \"cache\": \"warm\", \"matrix\": {\"fixed\": {\"loader\": \"mmap\", \"kv\": \"prealloc\"}}}",
            path);
    assert_int_equal(fclose(o), 0);
    snprintf(args, sizeof(args), "run '%s' --out '%s/vocab.out'", sc, tmp);
    assert_true(bench_err(args) != 0);
    char *t = err_text();
    int ok = strstr(t, "vocabulary-only file") != NULL;
    free(t);
    assert_true(ok);
}

/* bench generate on a synth model says its weights are random (its words are noise, not a
 * bug); on a trained model it does not. */
static void test_generate_synth_says_random(void **state) {
    (void)state;
    char model[512], tok[512], synth[800], args[1600];
    if (!tu_shared("models/stories260K.bin", model, sizeof(model)) || !tu_shared("models/tok512.bin", tok, sizeof(tok))) skip();
    snprintf(synth, sizeof(synth), "%s/tiny.gguf", tmp);
    snprintf(args, sizeof(args), "model synth --shape tiny --dtype f32 --format gguf -o '%s'", synth);
    assert_int_equal(bench_err(args), 0);
    snprintf(args, sizeof(args), "generate --model '%s' --steps 4", synth);
    assert_int_equal(bench_err(args), 0);
    char *t = err_text();
    if (!strstr(t, "synth-tiny-f32-s0 has random weights")) fail_msg("no note on a synth model:\n%s", t);
    free(t);
    snprintf(args, sizeof(args), "generate --model '%s' --tokenizer '%s' --steps 4", model, tok);
    assert_int_equal(bench_err(args), 0);
    t = err_text();
    assert_null(strstr(t, "random weights"));
    free(t);
}

/* --warmup: the untimed passes change no token (the sampler restarts at its seed, the sequence
 * empty), the cold first pass is printed beside the timed one, and a count below 0 is a usage error */
static void test_generate_warmup(void **state) {
    (void)state;
    char synth[800], args[1600], ids0[800], ids1[800], e[256];
    snprintf(synth, sizeof(synth), "%s/tiny-warm.gguf", tmp);
    snprintf(args, sizeof(args), "model synth --shape tiny --dtype f32 --format gguf -o '%s'", synth);
    assert_int_equal(bench_err(args), 0);
    snprintf(ids0, sizeof(ids0), "%s/ids0", tmp);
    snprintf(ids1, sizeof(ids1), "%s/ids1", tmp);
    const char *gen = "generate --model '%s' --prompt-tokens 8 --steps 40 --temperature 0.9 --seed 7 --ids";
    snprintf(args, sizeof(args), gen, synth);
    assert_int_equal(tu_bench(ids0, "%s 2>'%s'", args, out), 0);
    char *t = err_text();
    assert_null(strstr(t, "cold "));
    free(t);
    strncat(args, " --warmup 2", sizeof(args) - strlen(args) - 1);
    assert_int_equal(tu_bench(ids1, "%s 2>'%s'", args, out), 0);
    t = err_text();
    if (!strstr(t, "cold         first pass: TTFT ") || !strstr(t, ", decode ") || !strstr(t, "pass 3 of 3 (--warmup 2)"))
        fail_msg("no cold pass beside the warm one:\n%s", t);
    assert_true(strstr(t, "cold ") < strstr(t, "\nprefill "));  /* scripts read the lines after it as the timed pass */
    free(t);
    char *a = rr_slurp(ids0, NULL, e, sizeof(e)), *b = rr_slurp(ids1, NULL, e, sizeof(e));
    assert_non_null(a);
    assert_non_null(b);
    assert_true(strlen(a) > 20);
    assert_string_equal(a, b);
    free(a);
    free(b);
    snprintf(args, sizeof(args), "generate --model '%s' --warmup -1", synth);
    assert_int_equal(bench_err(args), CLI_EXIT_USAGE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest),
        cmocka_unit_test(test_run_did_you_mean),
        cmocka_unit_test(test_generate_usage_errors),
        cmocka_unit_test(test_help_reads_the_tables),
        cmocka_unit_test(test_generate_no_repack),
        cmocka_unit_test(test_generate_synth_says_random),
        cmocka_unit_test(test_generate_warmup),
        cmocka_unit_test(test_generate_bf16_groups),
        cmocka_unit_test(test_other_commands_same_status),
        cmocka_unit_test(test_vocab_only_gguf),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
