/* The device plumbing, on the CPU: the scenario's device axis and its validation, the
 * bench run --device override, the worker spec, module lookup per device (modreg), the
 * engine's device choice and its errors, and what `bench list` and `bench generate
 * --device cuda` say on a machine without a GPU. Where the CUDA modules are built and a
 * GPU is there, the no-GPU expectations skip (tests/test_cuda.c runs on the GPU). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/runtime/engine.h"
#include "engines/core/runtime/modreg.h"
#include "harness/report/compare.h"
#include "harness/parent/runner.h"
#include "harness/scenario/scenario.h"
#include "tests/lib/cuda_test.h"
#include "tests/lib/testutil.h"

typedef struct fixture {
    char model[512], tok[512], tmp[512];
    int cuda;               /* CT_* */
    char why[768];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) ||
        !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) || !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        *state = NULL;
        return 0;
    }
    f->cuda = ct_state(f->why, sizeof(f->why));
    printf("[ INFO     ] CUDA here: %s\n", f->why);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

#define NEED_FIXTURE(f) do { if (!(f)) skip(); } while (0)

/* ---- scenarios ---- */

static int parse(const fixture *f, const char *tail, scenario **s, sc_errors *e) {
    char text[4096];
    snprintf(text, sizeof(text), "{\"name\": \"t\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, "
             "\"cache\": \"warm\"%s}", f->model, tail);
    return sc_parse("t.json", text, tu_module_dir(), s, e);
}

/* Expects a parse failure with one error line holding every string given (NULL-terminated);
 * returns the number of errors. */
static int fails_with(const fixture *f, const char *tail, ...) {
    scenario *s = NULL;
    sc_errors e;
    assert_int_equal(parse(f, tail, &s, &e), -1);
    assert_null(s);
    int found = 0;
    for (int i = 0; i < e.n && !found; i++) {
        va_list ap;
        va_start(ap, tail);
        int all = 1;
        for (const char *w = va_arg(ap, const char *); w; w = va_arg(ap, const char *)) all &= strstr(e.v[i], w) != NULL;
        va_end(ap);
        found = all;
    }
    if (!found)
        for (int i = 0; i < e.n; i++) fprintf(stderr, "got: %s\n", e.v[i]);
    int n = e.n;
    sc_errors_free(&e);
    assert_true(found);
    return n;
}

static scenario *parses(const fixture *f, const char *tail) {
    scenario *s = NULL;
    sc_errors e;
    int rc = parse(f, tail, &s, &e);
    for (int i = 0; i < e.n; i++) fprintf(stderr, "unexpected: %s\n", e.v[i]);
    sc_errors_free(&e);
    assert_int_equal(rc, 0);
    return s;
}

static void test_device_axis_cpu(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    scenario *s = parses(f, "");                               /* the default */
    assert_int_equal(s->axes[SC_AX_DEVICE].n, 1);
    assert_string_equal(sc_device(s, &s->variants[0]), "cpu");
    assert_string_equal(sc_device_opts(s, &s->variants[0]), "");
    assert_string_equal(s->variants[0].key, "default");      /* a fixed axis is not in the key */
    char *spec = rn_worker_spec(s, &s->variants[0]);
    assert_non_null(strstr(spec, "\"device\":\t\"cpu\""));
    free(spec);
    sc_free(s);

    s = parses(f, ", \"device\": \"cpu\"");
    assert_string_equal(sc_device(s, &s->variants[0]), "cpu");
    sc_free(s);

    s = parses(f, ", \"matrix\": {\"device\": [\"cpu\"], \"loader\": [\"mmap\", \"pread\"]}");
    assert_int_equal(s->n_variants, 2);
    assert_string_equal(s->variants[1].key, "loader=pread,device=cpu");
    char err[256];
    assert_int_equal(sc_select(s, "device=cpu", err, sizeof(err)), 0);
    assert_int_equal(sc_n_selected(s), 2);
    assert_int_equal(sc_select(s, "device=cuda", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "device has no choice \"cuda\""));
    sc_free(s);
}

static void test_device_axis_errors(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    fails_with(f, ", \"device\": {\"name\": \"cpu\", \"options\": {\"gemv\": 0}}", ".device: device cpu takes no options", NULL);
    fails_with(f, ", \"device\": 3", ".device: expected a device name", NULL);
    fails_with(f, ", \"device\": \"cpu\", \"matrix\": {\"device\": [\"cpu\"]}", ".matrix.device: device is given twice", NULL);
    fails_with(f, ", \"matrix\": {\"device\": [\"cpu\", \"cpu\"]}", ".matrix.device[1]: duplicate choice \"cpu\"", NULL);
    fails_with(f, ", \"matrix\": {\"fixed\": {\"device\": \"tpu\"}}", ".matrix.fixed.device: ", "\"tpu\"", NULL);
    /* a module the CPU does not have, named on the CPU */
    fails_with(f, ", \"matrix\": {\"kv\": [\"prealloc\", \"vmm\"]}", ".matrix.kv[1]: unknown kv \"vmm\" (have: ", NULL);
    if (f->cuda == CT_NOT_BUILT) {
        fails_with(f, ", \"device\": \"cuda\"", ".device: device \"cuda\" is not built here: no device_cuda.so", NULL);
    } else if (f->cuda == CT_NO_GPU) {
        /* one clear error: the CUDA modules it names exist, with these options ... */
        int n = fails_with(f, ", \"device\": \"cuda\", \"matrix\": {\"loader\": [\"pinned\", {\"name\": \"mmap\", "
                           "\"options\": {\"register\": false}}], \"kv\": [\"vmm\", \"block\"]}",
                           ".device: device cuda: no CUDA device: ", NULL);
        assert_int_equal(n, 1);
        /* ... and without a GPU they are still checked on cuda: a CPU-only option, a CPU-only name */
        n = fails_with(f, ", \"device\": \"cuda\", \"matrix\": {\"loader\": [{\"name\": \"pread\", \"options\": {\"direct\": 1}}]}",
                       ".matrix.loader[0]: loader pread: unknown option \"direct\" (have: chunk)", NULL);
        assert_int_equal(n, 2);
        fails_with(f, ", \"matrix\": {\"device\": [\"cpu\", \"cuda\"], \"loader\": [\"pinned\"]}",
                   ".matrix.loader[0]: unknown loader \"pinned\" (have: mmap, pread)", NULL);
        fails_with(f, ", \"device\": {\"name\": \"cuda\", \"options\": {\"scratch\": \"heap\"}}",
                   ".device: device cuda: option scratch=heap: expected one of pool|arena|malloc", NULL);
        fails_with(f, ", \"device\": \"tpu\"", ".device: unknown device \"tpu\" (have: cpu, cuda)", NULL);
    } else {
        /* with a GPU: the CUDA modules validate, CPU-only names do not */
        scenario *s = parses(f, ", \"device\": \"cuda\", \"matrix\": {\"loader\": [\"pinned\", \"pread\"], \"kv\": [\"vmm\"]}");
        assert_string_equal(sc_device(s, &s->variants[0]), "cuda");
        sc_free(s);
        fails_with(f, ", \"device\": \"cuda\", \"matrix\": {\"loader\": [{\"name\": \"pread\", \"options\": {\"direct\": 1}}]}",
                   ".matrix.loader[0]: loader pread: unknown option \"direct\"", NULL);
        fails_with(f, ", \"matrix\": {\"device\": [\"cpu\", \"cuda\"], \"loader\": [\"pinned\"]}",
                   ".matrix.loader[0]: unknown loader \"pinned\"", NULL);
    }
}

static void test_run_device_override(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char path[600];
    snprintf(path, sizeof(path), "%s/s.json", f->tmp);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "{\"name\": \"t\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}, \"cache\": \"warm\", "
            "\"matrix\": {\"device\": [\"cpu\"], \"loader\": [\"mmap\"]}}", f->model);
    fclose(fp);
    scenario *s = NULL;
    sc_errors e;
    assert_int_equal(sc_load_on(path, tu_module_dir(), "cpu", &s, &e), 0);
    assert_int_equal(s->axes[SC_AX_DEVICE].crossed, 0);     /* the matrix's axis is replaced */
    assert_string_equal(s->variants[0].key, "loader=mmap");
    sc_free(s);
    sc_errors_free(&e);
    assert_int_equal(sc_load_on(path, tu_module_dir(), "tpu", &s, &e), -1);
    assert_int_equal(e.n, 1);
    assert_non_null(strstr(e.v[0], ".device: "));
    sc_errors_free(&e);
    if (f->cuda != CT_GPU) {
        /* bench run refuses before anything runs, with the device's reason */
        char out[600];
        snprintf(out, sizeof(out), "%s/run.txt", f->tmp);
        int rc = tu_bench(NULL, "run '%s' --device cuda --quick --out '%s/r' 2>'%s'", path, f->tmp, out);
        assert_int_equal(rc, 2);
        char buf[2048] = "";
        fp = fopen(out, "r");
        assert_non_null(fp);
        size_t got = fread(buf, 1, sizeof(buf) - 1, fp);
        buf[got] = 0;
        fclose(fp);
        assert_non_null(strstr(buf, f->cuda == CT_NOT_BUILT ? "is not built here" : "no CUDA device: "));
        assert_non_null(strstr(buf, "nothing was run"));
    }
}

/* Every engine scenario shipped validates on cuda (bench run FILE --device cuda): with a
 * GPU without an error; without one with exactly the device's, so that every loader and
 * kv name and option in them is known to exist on cuda. */
static void test_shipped_scenarios_on_cuda(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    const char *files[] = {"scenarios/mmap_vs_pread.json", "scenarios/kv_prealloc_vs_dynamic.json",
                           "scenarios/kv_block_vs_token.json", "scenarios/ci.json", "scenarios/investigate_kv.json",
                           "scenarios/investigate_loaders.json", "scenarios/cuda_kv_growth.json", "scenarios/cuda_speed.json"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        scenario *s = NULL;
        sc_errors e;
        int cuda_file = strstr(files[i], "cuda_") != NULL;
        int rc = cuda_file ? sc_load(files[i], tu_module_dir(), &s, &e) : sc_load_on(files[i], tu_module_dir(), "cuda", &s, &e);
        for (int k = 0; k < e.n; k++) fprintf(stderr, "%s\n", e.v[k]);
        if (f->cuda == CT_GPU) {
            assert_int_equal(rc, 0);
            assert_string_equal(sc_device(s, &s->variants[0]), "cuda");
        } else {
            assert_int_equal(rc, -1);
            assert_int_equal(e.n, 1);
            assert_non_null(strstr(e.v[0], f->cuda == CT_NOT_BUILT ? "is not built here" : "no CUDA device: "));
        }
        sc_errors_free(&e);
        sc_free(s);
        if (cuda_file) continue;
        /* and on the CPU as they are (kv_block_vs_token is new here) */
        assert_int_equal(sc_load(files[i], tu_module_dir(), &s, &e), 0);
        assert_string_equal(sc_device(s, &s->variants[0]), "cpu");
        sc_errors_free(&e);
        sc_free(s);
    }
}

/* ---- module lookup per device ---- */

static void test_modreg_devices(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char *d = modreg_device_dir("/m", NULL), *c = modreg_device_dir("/m", "cpu"), *g = modreg_device_dir("/m", "cuda");
    assert_string_equal(d, "/m");
    assert_string_equal(c, "/m");
    assert_string_equal(g, "/m/cuda");
    free(d);
    free(c);
    free(g);
    modreg_entry e;
    char err[768];
    assert_int_equal(modreg_load_for(tu_module_dir(), "cpu", "kv", "block", &e, err, sizeof(err)), 0);
    assert_string_equal(e.mod->devices, "cpu");
    modreg_entry_close(&e);
    assert_true(modreg_load_for(tu_module_dir(), NULL, "kv", "vmm", &e, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "unknown kv module \"vmm\""));
    if (f->cuda != CT_NOT_BUILT) assert_non_null(strstr(err, "it is built for cuda (--device cuda)"));
}

/* The CUDA modules' half: a cmocka skip where nvcc built none. */
static void test_modreg_devices_cuda(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    if (f->cuda == CT_NOT_BUILT) {
        fprintf(stderr, "skip: the CUDA modules' lookup: %s\n", f->why);
        skip();
    }
    modreg_entry e;
    char err[768];
    /* every CUDA build found loads without a GPU, by family and name; its score says whether it can run */
    static const char *const fams[] = {"loader", "kv"};
    int checked = 0;
    for (int k = 0; k < 2; k++) {
        const char *const *names;
        int n = tu_device_modules("cuda", fams[k], &names);
        for (int i = 0; i < n; i++, checked++) {
            if (modreg_load_for(tu_module_dir(), "cuda", fams[k], names[i], &e, err, sizeof(err))) fprintf(stderr, "%s\n", err);
            assert_non_null(e.mod);
            assert_string_equal(e.mod->devices, "cuda");
            assert_non_null(e.mod->score);
            assert_int_equal(e.mod->score() > 0, f->cuda == CT_GPU);
            modreg_entry_close(&e);
        }
    }
    assert_true(checked >= 8);  /* 3 loaders, 5 KV caches at least */
    assert_true(modreg_load_for(tu_module_dir(), "cuda", "alloc", "libc", &e, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "unknown cuda alloc module"));
    modreg r;
    char warn[4096];
    assert_int_equal(modreg_open_all(tu_module_dir(), &r, warn, sizeof(warn), err, sizeof(err)), 0);
    int cuda_mods = 0;
    for (int i = 0; i < r.n; i++) cuda_mods += !strcmp(r.v[i].mod->devices, "cuda");
    assert_true(cuda_mods >= 9);        /* 3 loaders, 5 KV caches, the device at least */
    modreg_close(&r);
}

/* ---- the engine and the commands ---- */

static void test_engine_device_choice(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char err[1024];
    engine *e = NULL;
    engine_spec s = {.model_path = f->model, .tokenizer_path = f->tok, .threads = 1, .module_dir = tu_module_dir(),
                     .device = "cpu"};
    assert_int_equal(engine_create(&s, &e, err, sizeof(err)), 0);
    assert_string_equal(engine_device(e), "cpu");
    assert_true(engine_device_bandwidth(e, 0, 1) == 0);
    int ids[4] = {1, 2, 3, 4};
    float *logits;
    assert_int_equal(engine_forward(e, 0, ids, 4, 0, &logits, err, sizeof(err)), 0);
    sampler *smp = sampler_create(engine_model(e)->cfg.vocab_size, 0, 0.9f, 1);
    int best = 0;
    for (int i = 1; i < engine_model(e)->cfg.vocab_size; i++)
        if (logits[i] > logits[best]) best = i;
    assert_int_equal(engine_sample(e, smp, logits), best);   /* the host sampler on the CPU */
    sampler_free(smp);
    engine_destroy(e);

    s.device = "tpu";
    assert_true(engine_create(&s, &e, err, sizeof(err)) < 0);
    assert_null(e);
    assert_non_null(strstr(err, "\"tpu\""));
    if (f->cuda == CT_GPU) return;
    s.device = "cuda";
    assert_true(engine_create(&s, &e, err, sizeof(err)) < 0);
    assert_null(e);
    assert_non_null(strstr(err, f->cuda == CT_NOT_BUILT ? "device \"cuda\" is not built here" : "device cuda: no CUDA device: "));
}

/* bench compare: the CUDA modules' clocks and device memory readings are not exact figures */
static void test_compare_classes(void **state) {
    (void)state;
    assert_int_equal(cmp_classify("mod.device.tpot_event_ms", "ms"), CMP_TIMED);
    assert_int_equal(cmp_classify("mod.loader.h2d_gb_s", "GB/s"), CMP_TIMED);
    assert_int_equal(cmp_classify("mod.device.decode_bound_fraction", "fraction"), CMP_TIMED);
    assert_int_equal(cmp_classify("mod.kv.grow_ms", "ms"), CMP_TIMED);
    assert_int_equal(cmp_classify("mod.device.gpu_mem_used_peak_B", "B"), CMP_MEMORY);
    /* what the CI gate holds exact stays exact */
    assert_int_equal(cmp_classify("mod.kv.bytes_reserved", "B"), CMP_EXACT);
    assert_int_equal(cmp_classify("mod.kv.grow_events", "count"), CMP_EXACT);
    assert_int_equal(cmp_classify("mod.loader.h2d_bytes", "B"), CMP_EXACT);
    assert_int_equal(cmp_classify("mod.aw.sys_ms", "ms"), CMP_EXACT); /* allocator workloads: untouched */
}

static int read_text(const char *path, char *buf, size_t n) {
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    size_t got = fread(buf, 1, n - 1, fp);
    buf[got] = 0;
    fclose(fp);
    return (int)got;
}

static void test_generate_without_gpu(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    if (f->cuda == CT_GPU) skip(); /* tests/test_cuda.c generates on the GPU */
    char out[600], errp[600], buf[4096];
    snprintf(out, sizeof(out), "%s/gen.out", f->tmp);
    snprintf(errp, sizeof(errp), "%s/gen.err", f->tmp);
    int rc = tu_bench(out, "generate --model '%s' --tokenizer '%s' --prompt hi --steps 8 --device cuda 2>'%s'", f->model,
                      f->tok, errp);
    assert_int_equal(rc, 1);
    assert_true(read_text(errp, buf, sizeof(buf)) > 0);
    int lines = 0;
    for (const char *p = buf; *p; p++) lines += *p == '\n';
    fprintf(stderr, "bench generate --device cuda said: %s", buf);
    assert_int_equal(lines, 1);         /* one clear line, no crash, nothing else */
    assert_non_null(strstr(buf, f->cuda == CT_NOT_BUILT ? "bench generate: device \"cuda\" is not built here"
                                                        : "bench generate: device cuda: no CUDA device: "));
    assert_int_equal(read_text(out, buf, sizeof(buf)), 0); /* no text */
}

static void test_list_shows_devices(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    char out[600], buf[65536];
    snprintf(out, sizeof(out), "%s/list.txt", f->tmp);
    assert_int_equal(tu_bench(out, "list 2>/dev/null"), 0);
    assert_true(read_text(out, buf, sizeof(buf)) > 0);
    assert_non_null(strstr(buf, "\ndevice:\n  cpu "));
    if (f->cuda == CT_NOT_BUILT) assert_null(strstr(buf, "[devices: cuda]"));
}

/* The CUDA modules' lines of bench list: a cmocka skip where nvcc built none. */
static void test_list_shows_devices_cuda(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    if (f->cuda == CT_NOT_BUILT) {
        fprintf(stderr, "skip: the CUDA modules in bench list: %s\n", f->why);
        skip();
    }
    char out[600], buf[65536];
    snprintf(out, sizeof(out), "%s/list.txt", f->tmp);
    assert_int_equal(tu_bench(out, "list 2>/dev/null"), 0);
    assert_true(read_text(out, buf, sizeof(buf)) > 0);
    assert_non_null(strstr(buf, "  cuda       the forward pass on an NVIDIA GPU"));
    assert_non_null(strstr(buf, "  vmm        device cache grown through CUDA virtual memory"));
    assert_non_null(strstr(buf, "  pinned     pinned ring"));
    int marked = 0;
    for (const char *p = strstr(buf, "[devices: cuda]"); p; p = strstr(p + 1, "[devices: cuda]"))
        marked += !strncmp(p + 15, "  (not usable here)", 19);
    assert_int_equal(marked, f->cuda == CT_NO_GPU ? 9 : 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_axis_cpu),
        cmocka_unit_test(test_device_axis_errors),
        cmocka_unit_test(test_run_device_override),
        cmocka_unit_test(test_shipped_scenarios_on_cuda),
        cmocka_unit_test(test_modreg_devices),
        cmocka_unit_test(test_modreg_devices_cuda),
        cmocka_unit_test(test_engine_device_choice),
        cmocka_unit_test(test_generate_without_gpu),
        cmocka_unit_test(test_list_shows_devices),
        cmocka_unit_test(test_list_shows_devices_cuda),
        cmocka_unit_test(test_compare_classes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
