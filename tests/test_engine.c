/* The engine against the reference: greedy ids of ../shared/oracle on every
 * format x loader x kv, logits against a float64 forward pass written here,
 * and the reduced-precision conversions. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "engines/core/runtime/engine.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/synth/synth.h"
#include "harness/parent/procmem.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

#define MAX_IDS 256

typedef struct fixture {
    char model[512], tok[512], oracle[512], gguf3p[512];
    int want[MAX_IDS], n_want;
    char tmp[512];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) ||
        !tu_shared("oracle/greedy_dog.ids.txt", f->oracle, sizeof(f->oracle)) ||
        !tu_shared("thirdparty/stories260K-f32.gguf", f->gguf3p, sizeof(f->gguf3p))) {
        free(f);
        *state = NULL;
        return 0;
    }
    f->n_want = tu_read_ints(f->oracle, f->want, MAX_IDS);
    if (!tu_tmpdir(f->tmp, sizeof(f->tmp))) { free(f); return -1; }
    *state = f;
    return 0;
}

/* The repack tests' model, llama.cpp's k256-q4_0.gguf (skipped where ../shared lacks it), and its
 * K256_N tokens: K256_P of prompt, then decode steps. */
enum { K256_N = 28, K256_P = 20 };
static void k256_q4_0_tokens(char *model, size_t len, int *tokens) {
    if (!tu_shared("thirdparty/k256/k256-q4_0.gguf", model, len)) skip();
    for (int i = 0; i < K256_N; i++) tokens[i] = 1 + (i * 37) % 500;
}

/* tokens [0, p) as one prefill, then [p, n) a decode step each; every position's logits to out
 * (n, vocab) */
static void forward_prefill_decode(engine *e, const int *tokens, int p, int n, int vocab, float *out) {
    char err[512];
    assert_int_equal(engine_forward_all(e, 0, tokens, p, 0, out, err, sizeof(err)), 0);
    for (int i = p; i < n; i++)
        assert_int_equal(engine_forward_all(e, 0, &tokens[i], 1, i, out + (size_t)i * vocab, err, sizeof(err)), 0);
}

/* Q4_0 rearranged at load (repack.c): on llama.cpp's k256-q4_0.gguf, with pread (in place),
 * mmap shared (into anonymous copies) and mmap private (in place, copy on write), the logits
 * of a 20-token prefill and 8 decode steps are the same bits as with --no-repack, and the
 * engine says what it rearranged: every layer's 7 matrices where the kernels decode the
 * rearranged layout (kn_repacks), none with ENGINE_REPACK_OFF. */
static void test_repack_engine(void **state) {
    (void)state;
    char model[512];
    int tokens[K256_N];
    k256_q4_0_tokens(model, sizeof(model), tokens);
    const bench_opt private_map[] = {{.key = "mode", .value = "private"}};
    const struct { const char *loader; bench_opts opts; int copies; } cases[] = {
        {"pread", {0, NULL}, 0}, {"mmap", {0, NULL}, 1}, {"mmap", {1, private_map}, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float *out[2] = {NULL, NULL};
        int vocab = 0, layers = 0;
        for (int no = 0; no < 2; no++) {
            engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = model, .loader = cases[c].loader, .loader_opts = cases[c].opts, .kv = "prealloc",
                             .threads = 2, .module_dir = tu_module_dir(), .repack = no ? ENGINE_REPACK_OFF : ENGINE_REPACK_AUTO};
            char err[512];
            engine *e;
            assert_int_equal(engine_create(&s, &e, err, sizeof(err)), 0);
            vocab = engine_model(e)->cfg.vocab_size;
            layers = engine_model(e)->cfg.n_layers;
            if (no || !kn_repacks(BENCH_Q4_0)) {
                assert_int_equal(engine_repacked_matrices(e), 0);
                assert_true(engine_repacked_bytes(e) == 0);
            } else {
                assert_int_equal(engine_repacked_matrices(e), 7 * layers);
                assert_true(engine_repacked_bytes(e) > 0);
                assert_true(engine_repacked_copied_bytes(e) == (cases[c].copies ? engine_repacked_bytes(e) : 0));
            }
            out[no] = malloc(sizeof(float) * K256_N * (size_t)vocab);
            assert_non_null(out[no]);
            forward_prefill_decode(e, tokens, K256_P, K256_N, vocab, out[no]);
            engine_destroy(e);
        }
        if (memcmp(out[0], out[1], sizeof(float) * K256_N * (size_t)vocab))
            fail_msg("loader %s%s: the logits with Q4_0 rearranged differ from the file's layout's", cases[c].loader,
                     cases[c].opts.n ? " mode=private" : "");
        if (!kn_repacks(BENCH_Q4_0)) print_message("[ SKIP     ] repack: the kernels in use do not rearrange Q4_0 here\n");
        free(out[0]);
        free(out[1]);
    }
}

/* Q4_0 with 16 rows interleaved at load (q4g16.h), where vnni runs both phases: on k256-q4_0.gguf
 * with pread (in place) and mmap (copies), every layer's 7 matrices are interleaved; the 20-token
 * prefill's logits are the file layout's bits (the GEMM packs the same panels from the groups),
 * and the decode steps' within 1% of the largest logit: the 16-row loop sums a block's whole
 * integer dot before its scale, the same products in another order, and where that moves a value
 * across a rounding boundary of the next matmul's int8 x, that x moves by a step (6.6e-4 of the
 * largest logit here; a wrong block or scale moves them by tens of per cent, test_kernels.c
 * checks the kernel itself to 2e-5). Skipped without AVX512-VNNI. */
static void test_repack_interleaved(void **state) {
    (void)state;
    char model[512];
    int tokens[K256_N];
    k256_q4_0_tokens(model, sizeof(model), tokens);
    const char *loaders[] = {"pread", "mmap"};
    for (size_t c = 0; c < 2; c++) {
        float *out[2] = {NULL, NULL};
        int vocab = 0, layers = 0;
        for (int no = 0; no < 2; no++) {
            engine_spec s = {.numerics = ENGINE_NUMERICS_PRODUCTION, .kernels = "vnni", .model_path = model,
                             .loader = loaders[c], .kv = "prealloc", .threads = 2, .module_dir = tu_module_dir(),
                             .repack = no ? ENGINE_REPACK_OFF : ENGINE_REPACK_AUTO};
            char err[512];
            engine *e;
            if (engine_create(&s, &e, err, sizeof(err))) {
                assert_non_null(strstr(err, "vnni"));
                print_message("[ SKIP     ] interleaved Q4_0: %s\n", err);
                skip();
            }
            vocab = engine_model(e)->cfg.vocab_size;
            layers = engine_model(e)->cfg.n_layers;
            assert_int_equal(engine_repacked_matrices(e), no ? 0 : 7 * layers);
            assert_int_equal(engine_repacked_q4_0_g16(e), no ? 0 : 7 * layers);
            out[no] = malloc(sizeof(float) * K256_N * (size_t)vocab);
            assert_non_null(out[no]);
            forward_prefill_decode(e, tokens, K256_P, K256_N, vocab, out[no]);
            engine_destroy(e);
        }
        assert_memory_equal(out[0], out[1], sizeof(float) * K256_P * (size_t)vocab);
        double top = 0, diff = 0;
        for (size_t i = (size_t)K256_P * vocab; i < (size_t)K256_N * vocab; i++) {
            top = fmax(top, fabs(out[1][i]));
            diff = fmax(diff, fabs((double)out[0][i] - out[1][i]));
        }
        if (!(diff <= 1e-2 * top))
            fail_msg("loader %s: interleaved Q4_0's decode logits differ from the file layout's by %.3g (largest %.3g)",
                     loaders[c], diff, top);
        free(out[0]);
        free(out[1]);
    }
}

static int teardown(void **state) {
    fixture *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

#define NEED_FIXTURE(f) do { if (!(f)) { skip(); } } while (0)

typedef struct counter_probe { const char *name; double value; } counter_probe;

static void probe_emit(void *user, const char *name, const char *unit, double v) {
    counter_probe *p = user;
    (void)unit;
    if (!strcmp(name, p->name)) p->value = v;
}

/* Greedy generation as the reference does it: prompt with BOS, all positions
 * counted. probe (optional) reads one engine counter at the end. */
static int greedy_spec(const engine_spec *s, int *out, int steps, counter_probe *probe) {
    char err[1024];
    engine *e;
    if (engine_create(s, &e, err, sizeof(err))) {
        fprintf(stderr, "engine_create(%s, %s, %s): %s\n", s->model_path, s->loader, s->kv, err);
        return -1;
    }
    int n = tokenizer_encode(engine_tokenizer(e), "The little dog", 1, 0, out, steps + 1, err, sizeof(err));
    float *logits;
    int rc = n > 0 ? engine_forward(e, 0, out, n, 0, &logits, err, sizeof(err)) : -1;
    int vocab = engine_model(e)->cfg.vocab_size;
    while (rc == 0) {
        int best = 0;
        for (int i = 1; i < vocab; i++)
            if (logits[i] > logits[best]) best = i;
        out[n++] = best;
        if (n - 1 >= steps) break;
        rc = engine_forward(e, 0, &out[n - 1], 1, n - 1, &logits, err, sizeof(err));
    }
    if (rc) fprintf(stderr, "generate: %s\n", err);
    if (probe) {
        bench_counter_sink sink = {.emit = probe_emit, .user = probe};
        engine_counters(e, &sink);
    }
    engine_destroy(e);
    return rc ? -1 : n;
}

static int greedy_ids(const char *model, const char *tok, const char *loader, const char *kv, int ctx,
                      int *out, int steps) {
    engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = model, .tokenizer_path = tok, .loader = loader, .kv = kv,
                     .threads = 2, .max_pos = ctx, .module_dir = tu_module_dir()};
    return greedy_spec(&s, out, steps, NULL);
}

static int count_matching(const int *a, const int *b, int n) {
    int same = 0;
    for (int i = 0; i < n; i++) same += a[i] == b[i];
    return same;
}

static void expect_oracle(fixture *f, const char *model, const char *tok, const char *loader, const char *kv, int ctx) {
    int got[MAX_IDS + 1];
    int n = greedy_ids(model, tok, loader, kv, ctx, got, f->n_want - 1);
    assert_int_equal(n, f->n_want);
    for (int i = 0; i < n; i++)
        if (got[i] != f->want[i]) {
            fprintf(stderr, "%s loader=%s kv=%s: id %d is %d, the reference has %d\n", model, loader, kv, i, got[i], f->want[i]);
            fail();
        }
}

/* Logits of a 48-token prefill (positions 0..47) and one decode step after it, on threads
 * threads; NULL when the engine cannot be made (message printed). The caller frees. */
static float *prefill_logits(const char *model, const char *kernels, int threads, int *vocab) {
    engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = model, .loader = "mmap", .kv = "prealloc",
                     .threads = threads, .module_dir = tu_module_dir(), .kernels = kernels};
    if (strcmp(kernels, "auto") && !kn_isa_exact(kernels)) s.numerics = ENGINE_NUMERICS_PRODUCTION;
    engine *e = NULL;
    char err[1024];
    if (engine_create(&s, &e, err, sizeof(err))) {
        fprintf(stderr, "engine_create(%s, kernels %s, %d threads): %s\n", model, kernels, threads, err);
        return NULL;
    }
    enum { N = 48 };
    const int v = engine_model(e)->cfg.vocab_size;
    int ids[N + 1];
    for (int i = 0; i < N + 1; i++) ids[i] = 1 + (i * 37) % (v - 1);
    float *out = malloc(2 * (size_t)v * sizeof(float)), *logits = NULL;
    int rc = !out || engine_forward(e, 0, ids, N, 0, &logits, err, sizeof(err));
    if (!rc) memcpy(out, logits, (size_t)v * sizeof(float));
    if (!rc) rc = engine_forward(e, 0, &ids[N], 1, N, &logits, err, sizeof(err));
    if (!rc) memcpy(out + v, logits, (size_t)v * sizeof(float));
    if (rc) fprintf(stderr, "forward: %s\n", err);
    engine_destroy(e);
    if (rc) { free(out); return NULL; }
    *vocab = v;
    return out;
}

/* A prefill splits its matmuls, its per-token steps (norms, RoPE, SwiGLU, residual adds), the
 * int8 families' quantisation of x and attention across the pool by rows; every row is computed
 * alone, so 1, 2 and 3 threads must give the same bits, in every family this CPU runs, on f32
 * (stories260K) and on Q8_0 and Q4_0 (k256, llama-quantize's), where the int8 families round x. */
static void test_threads_same_bits(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char q8[4096], q4[4096];
    const char *models[3] = {f->model, tu_shared("thirdparty/k256/k256-q8_0.gguf", q8, sizeof q8),
                             tu_shared("thirdparty/k256/k256-q4_0.gguf", q4, sizeof q4)};
    int compared = 0;
    for (int m = 0; m < 3; m++) {
        if (!models[m]) {
            printf("[ SKIP     ] k256 file %d: not in ../shared\n", m);
            continue;
        }
        for (int i = 0; i < kn_isa_count(); i++) {
            int here = 0;
            const char *name = kn_isa_name(i, &here);
            if (!here) continue;
            int v1 = 0, vn = 0;
            float *one = prefill_logits(models[m], name, 1, &v1);
            assert_non_null(one);
            for (int th = 2; th <= 3; th++) {
                float *many = prefill_logits(models[m], name, th, &vn);
                assert_non_null(many);
                assert_int_equal(vn, v1);
                if (memcmp(one, many, 2 * (size_t)v1 * sizeof(float)))
                    fail_msg("%s, kernels %s: %d threads' logits differ from 1 thread's", models[m], name, th);
                free(many);
                compared++;
            }
            free(one);
        }
    }
    printf("[ INFO     ] %d (model, family, threads) prefill + decode logits the same bits as 1 thread's\n", compared);
    assert_true(compared >= 2);
}

/* The oracle on every kernel family this CPU runs (kernels.h): the f32 model takes the
 * exact path in all of them, so each must give the reference's ids exactly. */
static void test_oracle_every_kernels(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    int ran = 0;
    for (int i = 0; i < kn_isa_count(); i++) {
        int here = 0;
        const char *name = kn_isa_name(i, &here);
        if (!here) {
            printf("[ SKIP     ] kernels %s: this CPU cannot run them\n", name);
            continue;
        }
        engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = f->model, .tokenizer_path = f->tok, .loader = "mmap", .kv = "prealloc",
                         .threads = 2, .module_dir = tu_module_dir(), .kernels = name};
        int got[MAX_IDS + 1];
        assert_int_equal(greedy_spec(&s, got, f->n_want - 1, NULL), f->n_want);
        for (int k = 0; k < f->n_want; k++)
            if (got[k] != f->want[k]) fail_msg("kernels %s: id %d is %d, the reference has %d", name, k, got[k], f->want[k]);
        ran++;
    }
    assert_true(ran >= 1); /* portable runs everywhere */
    engine_spec bad = {.model_path = f->model, .tokenizer_path = f->tok, .module_dir = tu_module_dir(), .kernels = "avx9"};
    engine *e = NULL;
    char err[512];
    assert_true(engine_create(&bad, &e, err, sizeof(err)) < 0);
    assert_null(e);
    assert_non_null(strstr(err, "unknown kernels \"avx9\" (have: auto, vnni, avx512-bf16, amx, avx512, avx512-wide, avx2-int8, avx2, portable)"));
    kn_set_isa("auto");
}

/* The families that round x (Q8_0 on int8 activations; bf16 prefill on bf16 dot
 * products) against the exact path of the same instruction set, on the same file
 * converted to that dtype: the logits' error relative to their largest magnitude, per
 * position, for the prefill batch and for decode steps. The bound is loose on purpose
 * (a wrong scale or sign gives errors of order 1); the figure printed is what
 * PERFORMANCE.md quotes. Skips where no such family runs. */
static void test_q8_int8_logits_error(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    static const char *const pairs[][3] = {{"vnni", "avx512", "q8_0"}, {"avx2-int8", "avx2", "q8_0"},
                                           {"avx512-bf16", "avx512", "bf16"}};
    char conv[2][600];
    const char *const conv_dt[2] = {"q8_0", "bf16"};
    for (int c = 0; c < 2; c++) {
        snprintf(conv[c], sizeof(conv[c]), "%s/m-rounded-x-%s.gguf", f->tmp, conv_dt[c]);
        assert_int_equal(tu_bench(NULL, "model convert '%s' '%s' --tokenizer '%s' --dtype %s >/dev/null", f->model,
                                  conv[c], f->tok, conv_dt[c]), 0);
    }
    enum { N = 32 };
    int tokens[N];
    for (int i = 0; i < N; i++) tokens[i] = f->want[i];
    int ran = 0;
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        if (!kn_isa_resolve(pairs[p][0])) {
            printf("[ SKIP     ] kernels %s: this CPU cannot run them\n", pairs[p][0]);
            continue;
        }
        float *out[2] = {NULL, NULL};
        int vocab = 0;
        for (int k = 0; k < 2; k++) {
            engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = conv[strcmp(pairs[p][2], "bf16") == 0], .loader = "mmap", .kv = "prealloc", .threads = 2,
                             .module_dir = tu_module_dir(), .kernels = pairs[p][k]};
            char err[512];
            engine *e;
            assert_int_equal(engine_create(&s, &e, err, sizeof(err)), 0);
            vocab = engine_model(e)->cfg.vocab_size;
            out[k] = malloc(sizeof(float) * N * (size_t)vocab);
            assert_non_null(out[k]);
            assert_int_equal(engine_forward_all(e, 0, tokens, N - 8, 0, out[k], err, sizeof(err)), 0);
            for (int i = N - 8; i < N; i++)
                assert_int_equal(engine_forward_all(e, 0, &tokens[i], 1, i, out[k] + (size_t)i * vocab, err, sizeof(err)), 0);
            engine_destroy(e);
        }
        double worst = 0, sum_sq = 0, sum_ref = 0;
        int argmax_same = 0;
        for (int t = 0; t < N; t++) {
            const float *a = out[0] + (size_t)t * vocab, *b = out[1] + (size_t)t * vocab;
            double num = 0, den = 0;
            int ia = 0, ib = 0;
            for (int i = 0; i < vocab; i++) {
                double d = fabs((double)a[i] - b[i]);
                num = fmax(num, d);
                den = fmax(den, fabs(b[i]));
                sum_sq += d * d;
                sum_ref += (double)b[i] * b[i];
                if (a[i] > a[ia]) ia = i;
                if (b[i] > b[ib]) ib = i;
            }
            worst = fmax(worst, num / den);
            argmax_same += ia == ib;
        }
        printf("[ INFO     ] %s %s vs %s: max |dlogit| / max |logit| %.2e (worst of %d positions), rms error / rms logit %.2e, "
               "argmax same at %d of %d\n", pairs[p][2], pairs[p][0], pairs[p][1], worst, N, sqrt(sum_sq / sum_ref), argmax_same, N);
        assert_true(worst > 0);         /* x really was rounded: the two paths differ */
        assert_true(worst < 0.05);
        assert_true(argmax_same >= N - 4);
        free(out[0]);
        free(out[1]);
        ran++;
    }
    kn_set_isa("auto");
    if (!ran) skip();
}

static void test_llama2c_every_loader_and_kv(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    /* every loader and kv module found on the module path (tu_modules), none named here */
    const char *const *loaders, *const *kvs;
    int nl = tu_modules("loader", &loaders), nk = tu_modules("kv", &kvs);
    for (int l = 0; l < nl; l++)
        for (int k = 0; k < nk; k++) expect_oracle(f, f->model, f->tok, loaders[l], kvs[k], 0);
}

static void test_module_options_keep_ids(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    /* a 7-position growth step forces many copies inside the 200 positions */
    engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = f->model, .tokenizer_path = f->tok, .loader = "pread", .kv = "dynamic",
                     .threads = 1, .module_dir = tu_module_dir()};
    bench_opt kvo[] = {{.key = "step", .value = "7"}}, lo[] = {{.key = "chunk", .value = "4k"}, {.key = "populate", .value = "1"}};
    s.kv_opts = (bench_opts){1, kvo};
    s.loader_opts = (bench_opts){2, lo};
    int got[MAX_IDS + 1];
    counter_probe grows = {"kv.grow_events", -1};
    assert_int_equal(greedy_spec(&s, got, f->n_want - 1, &grows), f->n_want);
    assert_int_equal(count_matching(got, f->want, f->n_want), f->n_want);
    assert_int_equal((int)grows.value, 200 / 7); /* capacity 7, 14, ... 203: 28 growths after the first */

    bench_opt mo[] = {{.key = "mode", .value = "private"}, {.key = "populate", .value = "1"}, {.key = "advice", .value = "sequential"}};
    s = (engine_spec){.numerics = ENGINE_NUMERICS_EXACT, .model_path = f->model, .tokenizer_path = f->tok, .loader = "mmap", .kv = "prealloc",
                      .threads = 2, .module_dir = tu_module_dir(), .loader_opts = {3, mo}};
    counter_probe zero_copy = {"loader.zero_copy_tensors", -1};
    assert_int_equal(greedy_spec(&s, got, f->n_want - 1, &zero_copy), f->n_want);
    assert_int_equal(count_matching(got, f->want, f->n_want), f->n_want);
    assert_int_equal((int)zero_copy.value, 1 + 5 * 9 + 1); /* embedding, 9 per layer, final norm */
}

/* Rss of the mappings of path in this process (KiB): procmem's "model_file" region; -1 when
 * unreadable. */
static long mapped_rss_kib(const char *path) {
    char real[4096];
    const char *files[] = {real};
    pm_smaps s;
    if (!realpath(path, real) || pm_read_smaps(getpid(), files, 1, NULL, 0, &s)) return -1;
    const pm_region *r = pm_find_region(&s, "model_file");
    return r ? (long)r->rss_kib : 0;
}

/* loader mmap's touch (default 1): every page of the file read at load, so the mapping is
 * resident once the engine exists; touch=0 leaves the pages to the forward pass. */
static void test_mmap_touch(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    struct stat st;
    assert_int_equal(stat(f->gguf3p, &st), 0);
    const long file_kib = (long)(st.st_size / 1024);
    long rss[2];
    for (int touch = 0; touch < 2; touch++) {
        bench_opt lo[] = {{.key = "touch", .value = touch ? "1" : "0"}};
        engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = f->gguf3p, .loader = "mmap", .max_pos = 128,
                         .kv = "prealloc", .threads = 1, .module_dir = tu_module_dir(), .loader_opts = {1, lo},
                         .kernels = "portable"};   /* auto's tuner would read every weight itself */
        engine *e = NULL;
        char err[512];
        if (engine_create(&s, &e, err, sizeof(err))) fail_msg("engine_create: %s", err);
        rss[touch] = mapped_rss_kib(f->gguf3p);
        engine_destroy(e);
    }
    printf("[ INFO     ] %s (%ld KiB) mapped and resident after load: %ld KiB with touch=0, %ld KiB by default (touch=1)\n",
           f->gguf3p, file_kib, rss[0], rss[1]);
    assert_true(rss[1] >= file_kib * 95 / 100);
    assert_true(rss[0] < file_kib / 2);
}

/* The mapping of path (from offset 0) in this process, from /proc/self/smaps: its start,
 * whether its VmFlags carry hg (MADV_HUGEPAGE), and its FilePmdMapped in bytes. 0 when found. */
static int file_vma(const char *path, uintptr_t *start, int *hg, uint64_t *pmd) {
    char real[4096], line[4608];
    if (!realpath(path, real)) return -1;
    FILE *fp = fopen("/proc/self/smaps", "r");
    if (!fp) return -1;
    int in = 0, found = -1;
    *hg = 0;
    *pmd = 0;
    while (fgets(line, sizeof line, fp)) {
        unsigned long lo, hi, off;
        char name[4096] = "";
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &lo, &hi, &off, name) >= 3 && strchr(line, '-') < strchr(line, ' ')) {
            if (in) break;
            in = off == 0 && !strcmp(name, real);
            if (in) *start = (uintptr_t)lo, found = 0;
            continue;
        }
        unsigned long long kib;
        if (in && sscanf(line, "FilePmdMapped: %llu kB", &kib) == 1) *pmd = kib * 1024u;
        if (in && !strncmp(line, "VmFlags:", 8)) *hg = strstr(line, " hg") != NULL;
    }
    fclose(fp);
    return found;
}

/* A model writer leaves none of the file in the page cache (model_write_drop_cache), so that
 * the first load reads it in again as large folios; loader mmap (huge=1, the default) maps
 * it at a 2 MiB boundary with MADV_HUGEPAGE, and its huge_bytes counter is what smaps says
 * of that mapping. Whether the kernel then maps 2 MiB folios (ext4 with large folios, THP
 * on) is the kernel's: printed, not asserted. */
static void test_mmap_huge(void **state) {
    fixture *f = *state;
    char path[600], err[512];
    snprintf(path, sizeof path, "%s/m-110m-q4_0.gguf", f->tmp);
    synth_spec spec = {.shape = "llama-110m", .dtype = BENCH_Q4_0, .format = "gguf", .seed = 1};
    if (synth_write(&spec, path, err, sizeof err)) fail_msg("synth_write: %s", err);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    const size_t len = (size_t)st.st_size, pages = (len + 4095) / 4096;
    struct statfs fs;
    long cached = -1;
    if (statfs(path, &fs) == 0 && fs.f_type != 0x01021994 /* tmpfs: its pages are the file */) {
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        assert_true(p != MAP_FAILED);
        unsigned char *vec = calloc(pages, 1);
        assert_non_null(vec);
        assert_int_equal(mincore(p, len, vec), 0);
        cached = 0;
        for (size_t i = 0; i < pages; i++) cached += vec[i] & 1;
        free(vec);
        munmap(p, len);
        assert_int_equal(cached, 0);
    }
    for (int huge = 1; huge >= 0; huge--) {
        bench_opt lo[] = {{.key = "huge", .value = huge ? "1" : "0"}};
        engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = path, .loader = "mmap", .max_pos = 64,
                         .kv = "prealloc", .threads = 1, .module_dir = tu_module_dir(), .loader_opts = {1, lo},
                         .kernels = "portable", .repack = ENGINE_REPACK_OFF};
        engine *e = NULL;
        if (engine_create(&s, &e, err, sizeof(err))) fail_msg("engine_create: %s", err);
        counter_probe hb = {"loader.huge_bytes", -1};
        bench_counter_sink sink = {.emit = probe_emit, .user = &hb};
        engine_counters(e, &sink);
        uintptr_t start = 0;
        int hg = -1;
        uint64_t pmd = 0;
        assert_int_equal(file_vma(path, &start, &hg, &pmd), 0);
        engine_destroy(e);
        printf("[ INFO     ] huge=%d: %s (%zu KiB, %ld pages cached after the write) mapped at %#lx, hg %d, %llu KiB in 2 MiB pages\n",
               huge, path, len / 1024, cached, (unsigned long)start, hg, (unsigned long long)(pmd / 1024));
        assert_int_equal(hg, huge);
        if (huge) {
            assert_int_equal(start % (2u << 20), 0);
            assert_true(hb.value == (double)pmd);
        }
        assert_true(hb.value >= 0 && hb.value <= (double)len);
    }
}

static void test_thirdparty_gguf(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    /* llama.cpp's converter declares 128 positions: the default context refuses 200 ... */
    int got[MAX_IDS + 1];
    assert_int_equal(greedy_ids(f->gguf3p, NULL, "mmap", "prealloc", 0, got, f->n_want - 1), -1);
    /* ... and an explicit context past the header reproduces the reference. */
    expect_oracle(f, f->gguf3p, NULL, "mmap", "prealloc", 512);
    expect_oracle(f, f->gguf3p, NULL, "pread", "dynamic", 512);
}

static void test_our_conversions(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char gguf[600], st[600], back[600];
    snprintf(gguf, sizeof(gguf), "%s/m.gguf", f->tmp);
    snprintf(st, sizeof(st), "%s/m-st", f->tmp);
    snprintf(back, sizeof(back), "%s/m-back.gguf", f->tmp);
    assert_int_equal(tu_bench(NULL, "model convert '%s' '%s' --tokenizer '%s' >/dev/null", f->model, gguf, f->tok), 0);
    assert_int_equal(tu_bench(NULL, "model convert '%s' '%s' >/dev/null", f->model, st), 0); /* no vocab: llama2.c file */
    assert_int_equal(tu_bench(NULL, "model convert '%s' '%s' >/dev/null", gguf, st), 0);
    assert_int_equal(tu_bench(NULL, "model convert '%s' '%s' >/dev/null", st, back), 0);
    const char *const *loaders, *const *kvs;
    int nl = tu_modules("loader", &loaders), nk = tu_modules("kv", &kvs);
    for (int l = 0; l < nl; l++)
        for (int k = 0; k < nk; k++) {
            expect_oracle(f, gguf, NULL, loaders[l], kvs[k], 0);
            expect_oracle(f, st, NULL, loaders[l], kvs[k], 0);
            expect_oracle(f, back, NULL, loaders[l], kvs[k], 0);
        }
}

static void test_reduced_precision(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    const char *dts[] = {"f16", "bf16", "q8_0"};
    /* floors set below what was measured (see docs/PERFORMANCE.md) so a broken kernel fails */
    const int floor[] = {150, 20, 40};
    for (int i = 0; i < 3; i++) {
        char out[600];
        snprintf(out, sizeof(out), "%s/m-%s.gguf", f->tmp, dts[i]);
        assert_int_equal(tu_bench(NULL, "model convert '%s' '%s' --tokenizer '%s' --dtype %s >/dev/null",
                                  f->model, out, f->tok, dts[i]), 0);
        int got[MAX_IDS + 1];
        assert_int_equal(greedy_ids(out, NULL, "mmap", "prealloc", 0, got, f->n_want - 1), f->n_want);
        int same = count_matching(got + 1, f->want + 1, f->n_want - 1);
        printf("[ INFO     ] %s: %d of %d ids match the f32 reference\n", dts[i], same, f->n_want - 1);
        assert_true(same >= floor[i]);
    }
}

/* ---- a float64 forward pass straight from the llama2.c file ---- */

typedef struct ref_model {
    int dim, hidden, layers, heads, kv_heads, vocab, seq;
    float *data;        /* the whole file as floats */
    const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final;
} ref_model;

static int ref_load(const char *path, ref_model *r) {
    char err[256];
    /* malloc's alignment suits the floats */
    if (!(r->data = (void *)ut_slurp(path, SIZE_MAX, NULL, err, sizeof(err)))) return -1;
    int32_t h[7];
    memcpy(h, r->data, sizeof(h));
    r->dim = h[0]; r->hidden = h[1]; r->layers = h[2]; r->heads = h[3]; r->kv_heads = h[4];
    r->vocab = abs(h[5]); r->seq = h[6];
    int hd = r->dim / r->heads, kvd = r->kv_heads * hd;
    const float *p = r->data + 7;
    size_t L = (size_t)r->layers, d = (size_t)r->dim;
    r->emb = p; p += (size_t)r->vocab * d;
    r->rms_att = p; p += L * d;
    r->wq = p; p += L * d * d;
    r->wk = p; p += L * d * (size_t)kvd;
    r->wv = p; p += L * d * (size_t)kvd;
    r->wo = p; p += L * d * d;
    r->rms_ffn = p; p += L * d;
    r->w1 = p; p += L * d * (size_t)r->hidden;
    r->w2 = p; p += L * d * (size_t)r->hidden;
    r->w3 = p; p += L * d * (size_t)r->hidden;
    r->rms_final = p;
    return 0;
}

static void ref_rmsnorm(double *o, const double *x, const float *w, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    ss = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++) o[i] = w[i] * ss * x[i];
}

static void ref_matvec(double *y, const double *x, const float *w, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int c = 0; c < cols; c++) s += (double)w[(size_t)r * cols + c] * x[c];
        y[r] = s;
    }
}

/* logits (n, vocab) for tokens at positions 0..n-1 */
static void ref_forward(const ref_model *r, const int *tokens, int n, double *logits) {
    int d = r->dim, hd = d / r->heads, kvd = r->kv_heads * hd, hid = r->hidden, grp = r->heads / r->kv_heads;
    double *x = calloc((size_t)d, 8), *xb = calloc((size_t)d, 8), *q = calloc((size_t)d, 8), *att = calloc((size_t)n, 8);
    double *hb = calloc((size_t)hid, 8), *hb2 = calloc((size_t)hid, 8), *tmp = calloc((size_t)d, 8);
    double *kc = calloc((size_t)r->layers * n * kvd, 8), *vc = calloc((size_t)r->layers * n * kvd, 8);
    for (int pos = 0; pos < n; pos++) {
        for (int i = 0; i < d; i++) x[i] = r->emb[(size_t)tokens[pos] * d + i];
        for (int l = 0; l < r->layers; l++) {
            double *k = kc + ((size_t)l * n + pos) * kvd, *v = vc + ((size_t)l * n + pos) * kvd;
            ref_rmsnorm(xb, x, r->rms_att + (size_t)l * d, d);
            ref_matvec(q, xb, r->wq + (size_t)l * d * d, d, d);
            ref_matvec(k, xb, r->wk + (size_t)l * d * kvd, kvd, d);
            ref_matvec(v, xb, r->wv + (size_t)l * d * kvd, kvd, d);
            for (int i = 0; i < d; i += 2) {
                double freq = pow(10000.0, -(double)(i % hd) / hd), a = pos * freq, c = cos(a), s = sin(a);
                double q0 = q[i], q1 = q[i + 1];
                q[i] = q0 * c - q1 * s; q[i + 1] = q0 * s + q1 * c;
                if (i < kvd) { double k0 = k[i], k1 = k[i + 1]; k[i] = k0 * c - k1 * s; k[i + 1] = k0 * s + k1 * c; }
            }
            for (int h = 0; h < r->heads; h++) {
                double max = -INFINITY, sum = 0;
                for (int t = 0; t <= pos; t++) {
                    const double *kt = kc + ((size_t)l * n + t) * kvd + (size_t)(h / grp) * hd;
                    double s = 0;
                    for (int i = 0; i < hd; i++) s += q[h * hd + i] * kt[i];
                    att[t] = s / sqrt((double)hd);
                    if (att[t] > max) max = att[t];
                }
                for (int t = 0; t <= pos; t++) { att[t] = exp(att[t] - max); sum += att[t]; }
                for (int i = 0; i < hd; i++) {
                    double o = 0;
                    for (int t = 0; t <= pos; t++) o += att[t] / sum * vc[((size_t)l * n + t) * kvd + (size_t)(h / grp) * hd + i];
                    xb[h * hd + i] = o;
                }
            }
            ref_matvec(tmp, xb, r->wo + (size_t)l * d * d, d, d);
            for (int i = 0; i < d; i++) x[i] += tmp[i];
            ref_rmsnorm(xb, x, r->rms_ffn + (size_t)l * d, d);
            ref_matvec(hb, xb, r->w1 + (size_t)l * d * hid, hid, d);
            ref_matvec(hb2, xb, r->w3 + (size_t)l * d * hid, hid, d);
            for (int i = 0; i < hid; i++) hb[i] = hb[i] / (1.0 + exp(-hb[i])) * hb2[i];
            ref_matvec(tmp, hb, r->w2 + (size_t)l * d * hid, d, hid);
            for (int i = 0; i < d; i++) x[i] += tmp[i];
        }
        ref_rmsnorm(xb, x, r->rms_final, d);
        ref_matvec(logits + (size_t)pos * r->vocab, xb, r->emb, r->vocab, d);
    }
    free(x); free(xb); free(q); free(att); free(hb); free(hb2); free(tmp); free(kc); free(vc);
}

static void test_logits_match_float64(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    ref_model r = {0};
    assert_int_equal(ref_load(f->model, &r), 0);
    enum { N = 24 };
    int tokens[N];
    for (int i = 0; i < N; i++) tokens[i] = f->want[i];
    double *want = malloc(sizeof(double) * N * r.vocab);
    float *got = malloc(sizeof(float) * N * r.vocab);
    ref_forward(&r, tokens, N, want);
    const char *const *kvs;
    int nk = tu_modules("kv", &kvs);
    for (int k = 0; k < nk; k++) {
        engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = f->model, .loader = "mmap", .kv = kvs[k], .threads = 2, .module_dir = tu_module_dir()};
        char err[512];
        engine *e;
        assert_int_equal(engine_create(&s, &e, err, sizeof(err)), 0);
        /* the batched prefill path, then the decode path, must both agree */
        assert_int_equal(engine_forward_all(e, 0, tokens, N - 4, 0, got, err, sizeof(err)), 0);
        for (int i = N - 4; i < N; i++)
            assert_int_equal(engine_forward_all(e, 0, &tokens[i], 1, i, got + (size_t)i * r.vocab, err, sizeof(err)), 0);
        double worst = 0;
        for (int p = 0; p < N; p++) {
            double num = 0, den = 0;
            for (int i = 0; i < r.vocab; i++) {
                double dlt = fabs(got[(size_t)p * r.vocab + i] - want[(size_t)p * r.vocab + i]);
                if (dlt > num) num = dlt;
                if (fabs(want[(size_t)p * r.vocab + i]) > den) den = fabs(want[(size_t)p * r.vocab + i]);
            }
            if (num / den > worst) worst = num / den;
        }
        printf("[ INFO     ] kv %s: worst relative logit error %.3g over %d positions (max |diff| / max |logit|)\n", kvs[k], worst, N);
        assert_true(worst <= 1e-5);
        engine_destroy(e);
    }
    free(want);
    free(got);
    free(r.data);
}

/* Minor page faults of this process so far. */
static long minflt_now(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? -1 : ru.ru_minflt;
}

/* The forward pass's activations (engine_spec.scratch). keep (the default): one block from
 * the allocator module for every pass, grown only when a pass needs more, reserved and
 * faulted in at load when reserve_tokens asks, so that a pass of that size takes no block
 * and faults next to none of its pages in; pass: a block of its own each pass. The kept
 * block's earlier contents reach no result: the logits of 100 positions, after a pass of 60
 * other tokens, are the same bits under both. */
static void test_scratch_kept(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    enum { N = 100, M = 120 }; /* the file's context is 128 */
    int toks[M], other[60];
    for (int i = 0; i < M; i++) toks[i] = 1 + (i * 37) % 500;
    for (int i = 0; i < 60; i++) other[i] = 1 + (i * 11) % 500;
    float *out[2];
    double allocs[2];
    long faults[2] = {-1, -1};
    const long pages = (long)(N * (4 * 64 + 2 * 32 + 2 * 172 + 8) * 4 / 4096); /* the block's pages at N tokens */
    for (int mode = 0; mode < 2; mode++) {
        engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = f->gguf3p, .loader = "mmap", .max_pos = 128,
                         .kv = "prealloc", .threads = 1, .module_dir = tu_module_dir(), .kernels = "portable",
                         .scratch = mode ? ENGINE_SCRATCH_PASS : ENGINE_SCRATCH_KEEP, .reserve_tokens = N};
        engine *e = NULL;
        char err[512];
        if (engine_create(&s, &e, err, sizeof(err))) fail_msg("engine_create: %s", err);
        out[mode] = malloc((size_t)N * 512 * sizeof(float));
        assert_non_null(out[mode]);
        memset(out[mode], 0, (size_t)N * 512 * sizeof(float)); /* its pages' first touch is not the pass's */
        float *lg;
        if (engine_forward(e, 0, other, 60, 0, &lg, err, sizeof(err))) fail_msg("forward: %s", err);
        engine_reset(e, 0);
        const long f0 = minflt_now();
        if (engine_forward_all(e, 0, toks, N, 0, out[mode], err, sizeof(err))) fail_msg("forward: %s", err);
        faults[mode] = minflt_now() - f0;
        counter_probe sa = {"engine.scratch_allocs", -1};
        bench_counter_sink sink = {.emit = probe_emit, .user = &sa};
        engine_counters(e, &sink);
        allocs[mode] = sa.value;
        if (!mode) {
            /* a larger pass grows the block: one allocation more */
            engine_reset(e, 0);
            if (engine_forward(e, 0, toks, M, 0, &lg, err, sizeof(err))) fail_msg("forward: %s", err);
            sa.value = -1;
            engine_counters(e, &sink);
            assert_true(sa.value == 2);
        }
        engine_destroy(e);
    }
    printf("[ INFO     ] scratch keep: %.0f block for 2 passes, %ld minor faults in the second (%ld pages of block); "
           "pass: %.0f blocks, %ld faults\n", allocs[0], faults[0], pages, allocs[1], faults[1]);
    assert_true(allocs[0] == 1);   /* reserved at load, large enough for both passes */
    assert_true(allocs[1] == 2);   /* one a pass */
    /* the pass's other first touches (this build's shadow memory among them) are not the block's */
    assert_true(faults[0] >= 0 && faults[0] < pages / 2);
    assert_memory_equal(out[0], out[1], (size_t)N * 512 * sizeof(float));
    free(out[0]);
    free(out[1]);
}

/* A prompt longer than ubatch runs in passes of at most ubatch tokens (engine_spec.ubatch,
 * llama.cpp's n_ubatch): the logits of every one of 100 positions are the same bits in one
 * pass, in three (ubatch 32) and in two (64), with the default kernels, with an f16 cache as
 * with f32; the kept block is sized for a pass, not for the prompt (one allocation, at load);
 * a ubatch below ENGINE_UBATCH_MIN is refused by name. */
static void test_ubatch_same_bits(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    enum { N = 100 };
    int toks[N];
    for (int i = 0; i < N; i++) toks[i] = 1 + (i * 29) % 500;
    static const int ub[] = {0, ENGINE_UBATCH_MIN, 64}; /* passes of 100; of 34, 33, 33; of 50, 50 */
    for (int c = 0; c < 2; c++) {
        float *out[3];
        for (int u = 0; u < 3; u++) {
            engine_spec s = {.numerics = ENGINE_NUMERICS_EXACT, .model_path = f->gguf3p, .loader = "mmap", .max_pos = 128,
                             .kv = "prealloc", .threads = 2, .module_dir = tu_module_dir(), .ubatch = ub[u],
                             .kv_k_type = c ? BENCH_F16 : BENCH_F32, .kv_v_type = c ? BENCH_F16 : BENCH_F32,
                             .reserve_tokens = N};
            engine *e = NULL;
            char err[512];
            if (engine_create(&s, &e, err, sizeof(err))) fail_msg("engine_create: %s", err);
            assert_int_equal(engine_ubatch(e), ub[u] ? ub[u] : ENGINE_UBATCH);
            out[u] = malloc((size_t)N * 512 * sizeof(float));
            assert_non_null(out[u]);
            if (engine_forward_all(e, 0, toks, N, 0, out[u], err, sizeof(err))) fail_msg("forward: %s", err);
            counter_probe sa = {"engine.scratch_allocs", -1};
            bench_counter_sink sink = {.emit = probe_emit, .user = &sa};
            engine_counters(e, &sink);
            assert_true(sa.value == 1);
            engine_destroy(e);
        }
        assert_memory_equal(out[0], out[1], (size_t)N * 512 * sizeof(float));
        assert_memory_equal(out[0], out[2], (size_t)N * 512 * sizeof(float));
        for (int u = 0; u < 3; u++) free(out[u]);
    }
    engine_spec s = {.model_path = f->gguf3p, .kv = "prealloc", .threads = 1, .module_dir = tu_module_dir(), .ubatch = 8};
    engine *e = NULL;
    char err[512];
    assert_int_not_equal(engine_create(&s, &e, err, sizeof(err)), 0);
    assert_null(e);
    assert_non_null(strstr(err, "ubatch 8: expected 32 or more"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_every_loader_and_kv),
        cmocka_unit_test(test_module_options_keep_ids),
        cmocka_unit_test(test_logits_match_float64),
        cmocka_unit_test(test_mmap_touch),
        cmocka_unit_test(test_scratch_kept),
        cmocka_unit_test(test_ubatch_same_bits),
        cmocka_unit_test(test_mmap_huge),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_thirdparty_gguf),
        cmocka_unit_test(test_our_conversions),
        cmocka_unit_test(test_reduced_precision),
        cmocka_unit_test(test_oracle_every_kernels),
        cmocka_unit_test(test_q8_int8_logits_error),
        cmocka_unit_test(test_repack_engine),
        cmocka_unit_test(test_repack_interleaved),
    };
    /* exact numerics, pinned twice: every spec asks for ENGINE_NUMERICS_EXACT, and the tuner
     * does not measure (tests/run.sh sets this too), so kernels auto runs the flags' exact
     * family and these figures stay those of the exact path (engine.h engine_numerics) */
    setenv("BENCH_KERNELS_TUNE", "0", 1);
    /* the SDK test runs only the conformance part on an out-of-tree module (tests/test_sdk.c) */
    if (getenv("BENCH_TEST_FILTER")) cmocka_set_test_filter(getenv("BENCH_TEST_FILTER"));
    return cmocka_run_group_tests_name("engine", tests, setup, teardown);
}
