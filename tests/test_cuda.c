/* Inference on the GPU (device "cuda"), against the CPU and the reference. Every test
 * skips, saying why, where the CUDA modules are not built or no GPU is there
 * (tests/test_device.c checks that case); with a GPU they check:
 *   - greedy ids of stories260K f32 on every CUDA loader x KV cache == the llama2.c
 *     oracle (and so the CPU's), drawn by the GPU's argmax;
 *   - f16 logits against the CPU's f16 forward pass, within the stated tolerance;
 *   - every CUDA kv module's f16, bf16, q8_0 and q4_0 cache against the CPU's cache of the
 *     same type (the same stored bits), within the f32 tolerance;
 *   - each loader's counters (bytes to the device, pinned bytes), each KV cache's
 *     (dynamic copies, vmm maps without copying, block/token agree with prealloc);
 *   - the device's counters (events, memory timeline, kernel shares), the bandwidth
 *     probe, the GPU sampler against the host's, bench generate and bench run on cuda.
 * Tolerances (docs/cuda.md): f16, over 16 prompt positions (prefill: cuBLAS with f16
 * inputs and f32 accumulation) and 16 decode steps (GEMV with f32 activations):
 *     max |logit_gpu - logit_cpu| <= F16_TOL * max(1, max |logit_cpu|)
 * and the same argmax at every position. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/runtime/accuracy.h"
#include "engines/core/runtime/engine.h"
#include "tests/lib/cuda_test.h"
#include "tests/lib/testutil.h"

#define MAX_IDS 256
#define F16_TOL 0.02    /* of the largest logit's magnitude: f16 rounding of the GEMM inputs, other sum order */

typedef struct fixture {
    char model[512], tok[512], oracle[512], tmp[512];
    int want[MAX_IDS], n_want;
} fixture;

static int setup(void **state) {
    *state = NULL;
    char why[768];
    if (ct_state(why, sizeof(why)) != CT_GPU) {
        fprintf(stderr, "skip: every CUDA test: %s\n", why);
        return 0;
    }
    fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) ||
        !tu_shared("oracle/greedy_dog.ids.txt", f->oracle, sizeof(f->oracle)) || !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        return 0;
    }
    f->n_want = tu_read_ints(f->oracle, f->want, MAX_IDS);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

#define NEED_GPU(f) do { if (!(f)) skip(); } while (0)

typedef struct probe {
    const char *name;
    double value;
} probe;

typedef struct probes {
    probe *p;
    int n;
} probes;

static void probe_emit(void *user, const char *name, const char *unit, double v) {
    probes *ps = user;
    (void)unit;
    for (int i = 0; i < ps->n; i++)
        if (!strcmp(name, ps->p[i].name)) ps->p[i].value = v;
}

static void read_counters(engine *e, probe *p, int n) {
    for (int i = 0; i < n; i++) p[i].value = NAN;
    probes ps = {p, n};
    bench_counter_sink sink = {.emit = probe_emit, .user = &ps};
    engine_counters(e, &sink);
}

static engine_spec cuda_spec(const fixture *f, const char *model, const char *loader, const char *kv) {
    return (engine_spec){.model_path = model, .tokenizer_path = model == f->model ? f->tok : NULL, .loader = loader,
                         .kv = kv, .threads = 2, .module_dir = tu_module_dir(), .device = "cuda"};
}

/* Greedy generation as the reference does it (prompt with BOS, every position counted),
 * the token drawn by the engine's sampler (the GPU's argmax on cuda). Returns the ids
 * made, -1 on an error; leaves the engine in *out when out is given. */
static int greedy(const engine_spec *s, int *ids, int steps, engine **out) {
    char err[1024];
    engine *e;
    if (engine_create(s, &e, err, sizeof(err))) {
        fprintf(stderr, "engine_create(%s, %s, %s on %s): %s\n", s->model_path, s->loader, s->kv, s->device, err);
        return -1;
    }
    sampler *smp = sampler_create(engine_model(e)->cfg.vocab_size, 0, 0.9f, 1);
    int n = tokenizer_encode(engine_tokenizer(e), "The little dog", 1, 0, ids, steps + 1, err, sizeof(err));
    float *logits;
    int rc = n > 0 ? engine_forward(e, 0, ids, n, 0, &logits, err, sizeof(err)) : -1;
    while (rc == 0) {
        ids[n++] = engine_sample(e, smp, logits);
        if (n - 1 >= steps) break;
        rc = engine_forward(e, 0, &ids[n - 1], 1, n - 1, &logits, err, sizeof(err));
    }
    if (rc) fprintf(stderr, "generate on %s: %s\n", s->device, err);
    sampler_free(smp);
    if (out && !rc) *out = e;
    else engine_destroy(e);
    return rc ? -1 : n;
}

static void expect_oracle(const fixture *f, const engine_spec *s, engine **out) {
    int got[MAX_IDS + 1];
    int n = greedy(s, got, f->n_want - 1, out);
    assert_int_equal(n, f->n_want);
    for (int i = 0; i < n; i++)
        if (got[i] != f->want[i]) {
            fprintf(stderr, "cuda loader=%s kv=%s: id %d is %d, the reference has %d\n", s->loader, s->kv, i, got[i], f->want[i]);
            fail();
        }
}

static void test_f32_greedy_every_loader_and_kv(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    /* every CUDA loader and kv module built (tu_device_modules), none named here */
    const char *const *loaders, *const *kvs;
    int nl = tu_device_modules("cuda", "loader", &loaders), nk = tu_device_modules("cuda", "kv", &kvs);
    for (int l = 0; l < nl; l++)
        for (int k = 0; k < nk; k++) {
            engine_spec s = cuda_spec(f, f->model, loaders[l], kvs[k]);
            expect_oracle(f, &s, NULL);
        }
    /* cuBLAS for the one-token passes too, and each scratch policy */
    bench_opt o1[] = {{.key = "gemv", .value = "0"}}, o2[] = {{.key = "scratch", .value = "arena"}}, o3[] = {{.key = "scratch", .value = "malloc"}, {.key = "profile", .value = "1"}};
    bench_opts opts[] = {{1, o1}, {1, o2}, {2, o3}};
    for (int i = 0; i < 3; i++) {
        engine_spec s = cuda_spec(f, f->model, "pinned", "prealloc");
        s.device_opts = opts[i];
        expect_oracle(f, &s, NULL);
    }
}

static double max_abs(const float *v, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
    return m;
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

#define N_PREFILL 16
#define N_DECODE 16

/* The logits of n_prefill positions in one pass, then of n_decode one-token passes, fed
 * ids: (n_prefill + n_decode) rows of vocab into out (malloc'd). */
static int logits_of_ids(const engine_spec *s, const int *ids, int n_prefill, int n_decode, float **out, int *vocab) {
    char err[1024];
    /* teacher-forced (ids is only read), as the accuracy metric runs a variant */
    int rc = acc_logits(s, s->device ? s->device : "cpu", (int *)ids, n_prefill, n_decode + 1, 1, out, vocab, err,
                        sizeof(err));
    if (rc) fprintf(stderr, "%s (kv %s, cache %s): %s\n", s->model_path, s->kv, bench_dtype_name(s->kv_k_type), err);
    return rc;
}

/* the oracle's ids: N_PREFILL positions, then N_DECODE */
static int logits_of(const fixture *f, const engine_spec *s, float **out, int *vocab) {
    return logits_of_ids(s, f->want, N_PREFILL, N_DECODE, out, vocab);
}

/* max over rows [from, to) of max |a - b| / max(1, max |a|); *argmax_differs counts the
 * rows whose argmax differs */
static double max_rel_diff(const float *a, const float *b, int vocab, int from, int to, int *argmax_differs) {
    double worst = 0;
    for (int i = from; i < to; i++) {
        const float *x = a + (size_t)i * vocab, *y = b + (size_t)i * vocab;
        double scale = fmax(1.0, max_abs(x, (size_t)vocab)), d = 0;
        for (int j = 0; j < vocab; j++) d = fmax(d, fabs((double)x[j] - y[j]));
        worst = fmax(worst, d / scale);
        *argmax_differs += argmax(x, vocab) != argmax(y, vocab);
    }
    return worst;
}

typedef struct logit_gap {
    double prefill, decode; /* the largest relative difference in each phase */
    int argmax_differs;     /* positions whose argmax differs */
} logit_gap;

static logit_gap gap_of(const float *a, const float *b, int vocab) {
    logit_gap g = {0};
    g.prefill = max_rel_diff(a, b, vocab, 0, N_PREFILL, &g.argmax_differs);
    g.decode = max_rel_diff(a, b, vocab, N_PREFILL, N_PREFILL + N_DECODE, &g.argmax_differs);
    return g;
}

static double worst_of(logit_gap g) {
    return fmax(g.prefill, g.decode);
}

static engine_spec cpu_spec(const char *model, const char *kv, bench_dtype t) {
    return (engine_spec){.model_path = model, .threads = 2, .module_dir = tu_module_dir(), .kv = kv,
                         .kv_k_type = t, .kv_v_type = t};
}

/* The CPU's kv module of the same name, prealloc where the CPU has none (vmm) */
static const char *cpu_kv_like(const char *kv) {
    const char *const *names;
    int n = tu_device_modules("cpu", "kv", &names);
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], kv)) return kv;
    return "prealloc";
}

/* One model with kv module kv and its cache in type t, on the CPU and on cuda: the gap */
static logit_gap compare_logits_kv(const fixture *f, const char *model, const char *kv, bench_dtype t) {
    engine_spec sc = cpu_spec(model, cpu_kv_like(kv), t), sg = cuda_spec(f, model, "pinned", kv);
    sg.kv_k_type = sg.kv_v_type = t;
    float *a = NULL, *b = NULL;
    int vocab = 0;
    assert_int_equal(logits_of(f, &sc, &a, &vocab), 0);
    if (logits_of(f, &sg, &b, &vocab)) {
        free(a);
        fail();
    }
    logit_gap g = gap_of(a, b, vocab);
    printf("[ INFO     ] %s (kv %s, cache %s): max |logit difference| / scale: prefill %.3g, decode %.3g; "
           "argmax differs at %d of %d\n", model, kv, bench_dtype_name(t), g.prefill, g.decode, g.argmax_differs,
           N_PREFILL + N_DECODE);
    free(a);
    free(b);
    return g;
}

static logit_gap compare_logits(const fixture *f, const char *model) {
    return compare_logits_kv(f, model, "prealloc", BENCH_F32);
}

/* cuda within tol of the CPU at every position, with the same argmax */
static void expect_close(const fixture *f, const char *model, double tol) {
    logit_gap g = compare_logits(f, model);
    assert_int_equal(g.argmax_differs, 0);
    assert_true(worst_of(g) <= tol);
}

static void test_reduced_precision_logits(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    char out[600];
    snprintf(out, sizeof(out), "%s/m-f16.gguf", f->tmp);
    assert_int_equal(tu_bench(NULL, "model convert '%s' '%s' --tokenizer '%s' --dtype f16 >/dev/null", f->model, out, f->tok), 0);
    expect_close(f, out, F16_TOL);
    snprintf(out, sizeof(out), "%s/m-bf16.gguf", f->tmp);
    assert_int_equal(tu_bench(NULL, "model convert '%s' '%s' --tokenizer '%s' --dtype bf16 >/dev/null", f->model, out, f->tok), 0);
    expect_close(f, out, 4 * F16_TOL); /* bf16 keeps 8 bits of mantissa to f16's 11 */
    /* f32: both sides in f32; only the order of the sums differs */
    expect_close(f, f->model, 1e-4);
}

/* Block-quantised weights (docs/cuda.md item 12): every type llama-quantize wrote for k256,
 * the _K_M mixes included. The GPU dequantises each weight on the fly to the CPU's exact
 * f32 value (q_elem) and prefill runs a GEMV per token, so only the order of the sums
 * differs: the f32 tolerance. (stories260K converted to q8_0 would not do: its rows of
 * 172 are not whole 32-blocks, bench writes those tensors in f16, and prefill puts them
 * through cuBLAS with f16 inputs.) */
static void test_quantized_weights_k256(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    const char *types[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"};
    int checked = 0;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        char rel[128], path[600];
        snprintf(rel, sizeof(rel), "thirdparty/k256/k256-%s.gguf", types[i]);
        if (!tu_shared(rel, path, sizeof(path))) continue;
        expect_close(f, path, 1e-4);
        checked++;
    }
    if (!checked) skip();
}

/* The KV cache types on the GPU: every CUDA kv module stores f16, bf16, q8_0 and q4_0 rows
 * with the CPU's own conversions (blockquant.h compiled for the device), so a GPU row holds
 * the bits the CPU's row holds for the same input. The inputs differ in the last bits (the
 * order of the sums), and an element that lies that close to a rounding boundary of the type
 * rounds the other way: one step of the type, K or V, which the later layers carry on. So
 * the bound is a small part of the type's own error (the CPU's cache of type t against its
 * f32 cache, the same positions): a quarter of it, or the f32 tolerance where that is
 * larger. A row stored or read wrongly (a scale, a block, a nibble's order) costs the whole
 * of that error or more. The argmax must agree at every position. The k256 f32 file (GQA,
 * head_dim 32) takes the block types, whose rows need whole 32-blocks per head. */
static void test_cache_types_against_cpu(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    char k256[600];
    if (!tu_shared("thirdparty/k256/k256-f32.gguf", k256, sizeof(k256))) skip();
    const bench_dtype types[] = {BENCH_F16, BENCH_BF16, BENCH_Q8_0, BENCH_Q4_0};
    double own[4];
    float *ref = NULL;
    int vocab = 0;
    engine_spec sr = cpu_spec(k256, "prealloc", BENCH_F32);
    assert_int_equal(logits_of(f, &sr, &ref, &vocab), 0);
    for (int i = 0; i < 4; i++) {
        engine_spec st = cpu_spec(k256, "prealloc", types[i]);
        float *x = NULL;
        assert_int_equal(logits_of(f, &st, &x, &vocab), 0);
        own[i] = worst_of(gap_of(ref, x, vocab));
        printf("[ INFO     ] cache %s on the CPU against its f32 cache: %.3g\n", bench_dtype_name(types[i]), own[i]);
        free(x);
    }
    free(ref);
    const char *const *kvs;
    int nk = tu_device_modules("cuda", "kv", &kvs);
    for (int k = 0; k < nk; k++)
        for (int i = 0; i < 4; i++) {
            logit_gap g = compare_logits_kv(f, k256, kvs[k], types[i]);
            assert_int_equal(g.argmax_differs, 0);
            assert_true(worst_of(g) <= fmax(1e-4, 0.25 * own[i]));
        }
}

/* Decode deep in a long context, where the split attention takes more than 32 positions a
 * block (attn.cu att_chunk: stories260K's 8 heads past about 4200 positions on a GPU of 108
 * to 132 multiprocessors): 4300 positions prefilled (the oracle's ids over and over), then
 * 16 decode steps, against the CPU within the f32 tolerance. */
static void test_long_context_decode(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    enum { PREFILL = 4300, DECODE = 16 };
    int *ids = malloc((PREFILL + DECODE) * sizeof(int));
    assert_non_null(ids);
    ids[0] = f->want[0];
    for (int i = 1; i < PREFILL + DECODE; i++) ids[i] = f->want[1 + (i - 1) % (f->n_want - 1)];
    engine_spec sc = cpu_spec(f->model, "prealloc", BENCH_F32), sg = cuda_spec(f, f->model, "pinned", "prealloc");
    sc.max_pos = sg.max_pos = PREFILL + DECODE;
    float *a = NULL, *b = NULL;
    int vocab = 0, differs = 0;
    assert_int_equal(logits_of_ids(&sc, ids, PREFILL, DECODE, &a, &vocab), 0);
    assert_int_equal(logits_of_ids(&sg, ids, PREFILL, DECODE, &b, &vocab), 0);
    double prefill = max_rel_diff(a, b, vocab, PREFILL - 16, PREFILL, &differs);
    double decode = max_rel_diff(a, b, vocab, PREFILL, PREFILL + DECODE, &differs);
    printf("[ INFO     ] %d positions: max |logit difference| / scale: last 16 of the prefill %.3g, decode %.3g; "
           "argmax differs at %d\n", PREFILL + DECODE, prefill, decode, differs);
    assert_int_equal(differs, 0);
    assert_true(prefill <= 1e-4 && decode <= 1e-4);
    free(a);
    free(b);
    free(ids);
}

static void test_loader_counters(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    const char *const *loaders;
    int nl = tu_device_modules("cuda", "loader", &loaders);
    for (int l = 0; l < nl; l++) {
        engine *e = NULL;
        engine_spec s = cuda_spec(f, f->model, loaders[l], "prealloc");
        int ids[MAX_IDS + 1];
        assert_int_equal(greedy(&s, ids, 20, &e), 21);
        probe p[] = {{"loader.h2d_bytes", 0}, {"loader.pinned_bytes", 0}, {"loader.h2d_gb_s", 0}, {"loader.load_ms", 0},
                     {"loader.device_bytes", 0}, {"loader.register_fallbacks", 0}};
        read_counters(e, p, 6);
        double weights = (double)model_weight_bytes(engine_model(e));
        printf("[ INFO     ] loader %s: %.0f B to the device at %.3g GB/s in %.3g ms, %.0f B pinned\n", loaders[l],
               p[0].value, p[2].value, p[3].value, p[1].value);
        assert_true(p[0].value == weights);
        assert_true(p[4].value >= weights);
        assert_true(p[2].value > 0 && p[3].value > 0);
        if (!strcmp(loaders[l], "pread")) assert_true(p[1].value == 0);
        if (!strcmp(loaders[l], "pinned")) assert_true(p[1].value > 0 && p[1].value <= 4.0 * (16 << 20));
        if (!strcmp(loaders[l], "mmap")) assert_true(p[5].value == 1 || p[1].value >= weights);
        engine_destroy(e);
    }
    /* option errors name the module and the option */
    engine *e = NULL;
    char err[1024];
    bench_opt bad[] = {{.key = "slots", .value = "0"}};
    engine_spec s = cuda_spec(f, f->model, "pinned", "prealloc");
    s.loader_opts = (bench_opts){1, bad};
    assert_true(engine_create(&s, &e, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "loader pinned: option slots=0: expected a whole number in 1..64"));
    /* a ring of one slot and chunks of 4 KiB: many waits, the same ids */
    bench_opt tiny[] = {{.key = "slots", .value = "1"}, {.key = "chunk", .value = "4k"}};
    s.loader_opts = (bench_opts){2, tiny};
    expect_oracle(f, &s, NULL);
}

static void test_kv_growth(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    /* dynamic: a 7-position step forces growth copies inside 200 positions, as on the CPU */
    engine *e = NULL;
    bench_opt step[] = {{.key = "step", .value = "7"}};
    engine_spec s = cuda_spec(f, f->model, "pinned", "dynamic");
    s.kv_opts = (bench_opts){1, step};
    expect_oracle(f, &s, &e);
    probe p[] = {{"kv.grow_events", 0}, {"kv.bytes_copied", 0}};
    read_counters(e, p, 2);
    assert_int_equal((int)p[0].value, 200 / 7);
    assert_true(p[1].value > 0);
    engine_destroy(e);

    /* vmm: a context past one 2 MiB chunk (1280 B a position here), grown without a copy,
     * the addresses kept, the same ids as prealloc */
    int n = 2000, *ids = malloc((size_t)(n + 1) * sizeof(int)), *ref = malloc((size_t)(n + 1) * sizeof(int));
    assert_true(ids && ref);
    engine_spec sv = cuda_spec(f, f->model, "pinned", "vmm"), sp = cuda_spec(f, f->model, "pinned", "prealloc");
    sv.max_pos = sp.max_pos = 4096;
    assert_int_equal(greedy(&sp, ref, n, NULL), n + 1);
    assert_int_equal(greedy(&sv, ids, n, &e), n + 1);
    assert_memory_equal(ids, ref, (size_t)(n + 1) * sizeof(int));
    probe q[] = {{"kv.grow_events", 0}, {"kv.bytes_copied", 0}, {"kv.chunk_B", 0}, {"kv.bytes_reserved", 0}};
    read_counters(e, q, 4);
    printf("[ INFO     ] vmm: %.0f growth events of %.0f B, %.0f B mapped for %d positions\n", q[0].value, q[2].value,
           q[3].value, n);
    assert_true(q[0].value >= 1);
    assert_true(q[1].value == 0);
    assert_true(q[3].value >= (double)n * 1280);
    engine_destroy(e);
    free(ids);
    free(ref);
}

static void test_device_counters(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    engine *e = NULL;
    bench_opt po[] = {{.key = "profile", .value = "4"}};
    engine_spec s = cuda_spec(f, f->model, "pinned", "prealloc");
    s.device_opts = (bench_opts){1, po};
    int ids[MAX_IDS + 1];
    assert_int_equal(greedy(&s, ids, 100, &e), 101);
    probe p[] = {{"device.ttft_event_ms", 0}, {"device.tpot_event_ms", 0}, {"device.gpu_mem_used_load_B", 0},
                 {"device.gpu_mem_used_peak_B", 0}, {"device.share_weights", 0}, {"device.share_attention", 0},
                 {"device.share_other", 0}, {"device.profiled_passes", 0}, {"device.decode_events", 0},
                 {"device.scratch_peak_B", 0}};
    read_counters(e, p, 10);
    assert_true(p[0].value > 0 && p[1].value > 0);
    assert_true(p[3].value >= p[2].value && p[2].value > 0);
    assert_true(fabs(p[4].value + p[5].value + p[6].value - 1.0) < 1e-6);
    assert_true(p[4].value > 0 && p[5].value > 0 && p[6].value > 0);
    char err[256];
    int prompt[MAX_IDS], n_prompt = tokenizer_encode(engine_tokenizer(e), "The little dog", 1, 0, prompt, MAX_IDS, err, sizeof(err));
    int decode = 100 - n_prompt;
    assert_int_equal((int)p[7].value, decode / 4);          /* one decode pass in 4 is profiled ... */
    assert_int_equal((int)(p[7].value + p[8].value), decode); /* ... and left out of the TPOT events */
    assert_true(p[9].value > 0);
    double bw = engine_device_bandwidth(e, 64u << 20, 3);
    printf("[ INFO     ] device: TTFT %.3f ms, TPOT %.3f ms (events); triad %.0f GB/s\n", p[0].value, p[1].value, bw / 1e9);
    assert_true(bw > 100e9); /* every GPU this build targets (sm_80 and later) has more */
    engine_destroy(e);
}

static void test_gpu_sampler(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    char err[1024];
    engine *e = NULL;
    engine_spec s = cuda_spec(f, f->model, "pread", "prealloc");
    assert_int_equal(engine_create(&s, &e, err, sizeof(err)), 0);
    int vocab = engine_model(e)->cfg.vocab_size, agree = 0, draws = 0;
    float *logits, *copy = malloc((size_t)vocab * sizeof(float));
    assert_int_equal(engine_forward(e, 0, f->want, 8, 0, &logits, err, sizeof(err)), 0);
    /* the same seed on both sides: the GPU's draw against sampler.c's, over many coins */
    const float topps[] = {0.5f, 0.9f, 1.0f};
    for (int t = 0; t < 3; t++) {
        sampler *g = sampler_create(vocab, 1.0f, topps[t], 7), *h = sampler_create(vocab, 1.0f, topps[t], 7);
        for (int i = 0; i < 200; i++) {
            memcpy(copy, logits, (size_t)vocab * sizeof(float));
            int a = engine_sample(e, g, logits), b = sampler_sample(h, copy);
            agree += a == b;
            draws++;
            assert_true(a >= 0 && a < vocab);
        }
        sampler_free(g);
        sampler_free(h);
    }
    printf("[ INFO     ] GPU sampler: %d of %d draws equal to sampler.c's with the same coins\n", agree, draws);
    assert_true(agree >= draws * 95 / 100); /* equal but where sums round differently at a boundary */
    free(copy);
    engine_destroy(e);
}

static void test_commands_on_cuda(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    char out[600], errp[600];
    snprintf(out, sizeof(out), "%s/ids.txt", f->tmp);
    snprintf(errp, sizeof(errp), "%s/gen.err", f->tmp);
    assert_int_equal(tu_bench(out, "generate --model '%s' --tokenizer '%s' --prompt 'The little dog' --steps %d --ids "
                                   "--device cuda --loader pinned --kv vmm --bandwidth 2>'%s'",
                              f->model, f->tok, f->n_want - 1, errp), 0);
    int got[MAX_IDS + 1];
    assert_int_equal(tu_read_ints(out, got, MAX_IDS), f->n_want);
    assert_memory_equal(got, f->want, (size_t)f->n_want * sizeof(int));
    FILE *fp = fopen(errp, "r");
    char buf[8192] = "";
    size_t n = fp ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;
    if (fp) fclose(fp);
    buf[n] = 0;
    printf("%s", buf);
    assert_non_null(strstr(buf, "GB/s triad on cuda"));
    assert_non_null(strstr(buf, "cuda         TTFT"));
    /* --accuracy on cuda: against the CPU's exact path; f32 on both sides, so only the
     * order of the sums differs (test_reduced_precision_logits's bound) */
    assert_int_equal(tu_bench(NULL, "generate --model '%s' --tokenizer '%s' --prompt 'The little dog' --steps 64 --quiet "
                                    "--device cuda --accuracy 2>'%s'", f->model, f->tok, errp), 0);
    fp = fopen(errp, "r");
    n = fp ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;
    if (fp) fclose(fp);
    buf[n] = 0;
    printf("%s", buf);
    const char *acc = strstr(buf, "accuracy     KL mean ");
    assert_non_null(acc);
    assert_non_null(strstr(acc, "top-1 100.00%"));
    assert_non_null(strstr(acc, "against the CPU's exact kernels"));
    double err_max = 1;
    const char *em = strstr(acc, "logit error max ");
    assert_non_null(em);
    assert_int_equal(sscanf(em, "logit error max %lf", &err_max), 1);
    assert_true(err_max <= 1e-4);
    /* a scenario on cuda: the CI scenario's variants, each in its worker */
    snprintf(out, sizeof(out), "%s/run", f->tmp);
    assert_int_equal(tu_bench(NULL, "run scenarios/ci.json --device cuda --quick --json --out '%s' >/dev/null 2>&1", out), 0);
    char res[700];
    snprintf(res, sizeof(res), "%s/results.json", out);
    fp = fopen(res, "r");
    assert_non_null(fp);
    static char doc[1 << 20];
    n = fread(doc, 1, sizeof(doc) - 1, fp);
    doc[n] = 0;
    fclose(fp);
    assert_non_null(strstr(doc, "mod.device.tpot_event_ms"));
    assert_non_null(strstr(doc, "mod.loader.h2d_gb_s"));
    assert_non_null(strstr(doc, "\"device\""));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_greedy_every_loader_and_kv),
        cmocka_unit_test(test_reduced_precision_logits),
        cmocka_unit_test(test_quantized_weights_k256),
        cmocka_unit_test(test_cache_types_against_cpu),
        cmocka_unit_test(test_long_context_decode),
        cmocka_unit_test(test_loader_counters),
        cmocka_unit_test(test_kv_growth),
        cmocka_unit_test(test_device_counters),
        cmocka_unit_test(test_gpu_sampler),
        cmocka_unit_test(test_commands_on_cuda),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
