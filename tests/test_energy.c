/* The energy reader (harness/parent/energy.h) on any machine: powercap against a fake sysfs
 * tree (two packages, a sub-zone and an mmio zone that must not count, a wrapping counter, a
 * missing file, a file only root may read), NVML against the fake library the tests build
 * (tests/modules/fake_nvml.c: a counter, power samples, no driver, no GPU, absent), a
 * repetition's marks and points, and `bench run` end to end with both fakes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/parent/energy.h"
#include "harness/report/plot.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

#define SEC 1000000000LL

/* ---- the fake trees ---- */

/* Writes root/class/powercap/zone/file atomically (a reader never sees half a number). */
static void put(const char *root, const char *zone, const char *file, unsigned long long v) {
    char dir[1024], path[1200], tmp[1300];
    snprintf(dir, sizeof(dir), "%s/class/powercap/%s", root, zone);
    assert_int_equal(ut_mkdirs(dir), 0);
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fprintf(f, "%llu\n", v);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static void zone(const char *root, const char *name, unsigned long long uj, unsigned long long range) {
    put(root, name, "energy_uj", uj);
    put(root, name, "max_energy_range_uj", range);
}

static const char *fake_nvml(char *buf, size_t len) {
    char mods[1024];
    snprintf(mods, sizeof(mods), "%s", tu_module_dir());
    snprintf(buf, len, "%s/test-modules/nvml/libnvidia-ml.so.1", dirname(mods));
    assert_int_equal(access(buf, R_OK), 0);
    return buf;
}

static void fake_env(const char *devices, int no_energy, int init_fail) {
    setenv("FAKE_NVML_DEVICES", devices, 1);
    setenv("FAKE_NVML_NO_ENERGY", no_energy ? "1" : "0", 1);
    setenv("FAKE_NVML_INIT_FAIL", init_fail ? "1" : "0", 1);
}

enum { RAPL, NVML };

/* ---- powercap ---- */

static void test_rapl_sums_packages_and_unwraps(void **st) {
    (void)st;
    char root[512];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    zone(root, "intel-rapl:0", 9000, 10000);        /* wraps at 10000 µJ */
    zone(root, "intel-rapl:1", 5000, 1000000);
    zone(root, "intel-rapl:0:0", 777777, 1000000);  /* the core inside package 0: already counted */
    zone(root, "intel-rapl-mmio:0", 888888, 1000000); /* package 0's counter again */
    en_reader *r = en_open(root, "/nonexistent/libnvidia-ml.so.1");
    assert_non_null(r);
    assert_true(en_available(r));
    assert_true(en_source_ok(r, RAPL));
    assert_false(en_source_ok(r, NVML));
    assert_string_equal(en_source_method(r, RAPL), "counter");
    assert_string_equal(en_why(r), "");
    en_now x;
    en_read(r, 1 * SEC, NULL, 0, &x);
    assert_true(x.ok);
    assert_true(fabs(x.j[RAPL]) < 1e-12);
    assert_true(isnan(x.j[NVML]));
    assert_int_equal(x.gpu_used, -1);
    /* package 0 wraps: 9000 -> 10000 -> 500 is 1500 µJ; package 1 gains 2000 µJ */
    put(root, "intel-rapl:0", "energy_uj", 500);
    put(root, "intel-rapl:1", "energy_uj", 7000);
    put(root, "intel-rapl:0:0", "energy_uj", 999999);
    en_read(r, 2 * SEC, NULL, 0, &x);
    assert_true(x.ok);
    assert_true(fabs(x.j[RAPL] - 0.0035) < 1e-12);
    /* cumulative: a second step adds to the first */
    put(root, "intel-rapl:0", "energy_uj", 2500);
    en_read(r, 3 * SEC, NULL, 0, &x);
    assert_true(fabs(x.j[RAPL] - 0.0055) < 1e-12);
    /* a package that vanishes makes the reading unknown, not a smaller sum */
    char gone[1024];
    snprintf(gone, sizeof(gone), "%s/class/powercap/intel-rapl:1/energy_uj", root);
    assert_int_equal(unlink(gone), 0);
    en_read(r, 4 * SEC, NULL, 0, &x);
    assert_false(x.ok);
    assert_true(isnan(x.j[RAPL]));
    en_close(r);
    tu_rmtree(root);
}

static void test_rapl_missing_file(void **st) {
    (void)st;
    char root[512];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    zone(root, "intel-rapl:0", 100, 1000);
    put(root, "intel-rapl:1", "energy_uj", 100); /* no max_energy_range_uj: its wrap is unknown */
    en_reader *r = en_open(root, "/nonexistent/libnvidia-ml.so.1");
    assert_non_null(r);
    assert_false(en_available(r));
    const char *why = en_source_why(r, RAPL);
    assert_non_null(strstr(why, "intel-rapl:1/max_energy_range_uj"));
    assert_non_null(strstr(why, "No such file"));
    assert_non_null(strstr(en_why(r), "rapl: "));
    assert_non_null(strstr(en_why(r), "nvml: "));
    en_close(r);
    tu_rmtree(root);
}

static void test_rapl_no_powercap(void **st) {
    (void)st;
    char root[512];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    en_reader *r = en_open(root, "/nonexistent/libnvidia-ml.so.1");
    assert_false(en_available(r));
    assert_non_null(strstr(en_source_why(r, RAPL), "class/powercap"));
    assert_non_null(strstr(en_source_why(r, RAPL), "no powercap driver"));
    en_close(r);
    /* a powercap folder with only sub-zones has no package to count */
    zone(root, "intel-rapl:0:0", 1, 10);
    r = en_open(root, "/nonexistent/libnvidia-ml.so.1");
    assert_false(en_available(r));
    assert_non_null(strstr(en_source_why(r, RAPL), "no intel-rapl:N package zone"));
    en_close(r);
    tu_rmtree(root);
}

/* Whether a reader opened on root as an unprivileged user finds RAPL unavailable for want of
 * permission: 0 yes, 1 no, 2 could not test. Root reads any file, so root drops to nobody
 * in a child first, inside the tree (the temporary folders above it are root's alone). */
static int unreadable_as_user(const char *root) {
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        if (chdir(root) || (geteuid() == 0 && (setgid(65534) || setuid(65534)))) _exit(2);
        en_reader *r = en_open(".", "/nonexistent/libnvidia-ml.so.1");
        const char *why = r ? en_source_why(r, RAPL) : "";
        int ok = r && !en_available(r) && strstr(why, "Permission denied") && strstr(why, "root-only");
        if (!ok) fprintf(stderr, "why: %s\n", why);
        _exit(ok ? 0 : 1);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 2;
    return WEXITSTATUS(st);
}

static void test_rapl_permission_denied(void **st) {
    (void)st;
    char root[512], file[1024];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    zone(root, "intel-rapl:0", 100, 1000);
    snprintf(file, sizeof(file), "%s/class/powercap/intel-rapl:0/energy_uj", root);
    /* as the kernel has it since 5.10: the tree is anyone's, energy_uj root's alone */
    assert_int_equal(chmod(root, 0755), 0);
    assert_int_equal(chmod(file, 0400), 0);
    int rc = unreadable_as_user(root);
    if (rc == 2) {
        tu_rmtree(root);
        fprintf(stderr, "skip: cannot run a child as another user here\n");
        skip();
    }
    assert_int_equal(rc, 0);
    tu_rmtree(root);
}

/* ---- NVML ---- */

static void test_nvml_absent(void **st) {
    (void)st;
    char root[512];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    en_reader *r = en_open(root, "/nonexistent/libnvidia-ml.so.1");
    assert_false(en_source_ok(r, NVML));
    assert_non_null(strstr(en_source_why(r, NVML), "/nonexistent/libnvidia-ml.so.1"));
    en_now x;
    en_read(r, SEC, NULL, 0, &x);
    assert_false(x.ok);
    assert_int_equal(x.gpu_used, -1);
    assert_int_equal(x.gpu_proc, -1);
    /* a repetition with nothing to read keeps no marks and no points */
    en_run e;
    en_run_begin(&e, r);
    en_run_mark(&e, 0, SEC);
    en_run_sample(&e, 2 * SEC);
    en_run_mark(&e, 1, 3 * SEC);
    double j, s;
    assert_int_equal(e.n_pts, 0);
    assert_int_equal(en_run_between(&e, 0, 1, &j, &s), -1);
    en_run_free(&e);
    en_close(r);
    tu_rmtree(root);
}

static void test_nvml_counter(void **st) {
    (void)st;
    char root[512], lib[1200];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    fake_env("2", 0, 0);
    en_reader *r = en_open(root, fake_nvml(lib, sizeof(lib)));
    assert_true(en_source_ok(r, NVML));
    assert_false(en_source_ok(r, RAPL));
    assert_string_equal(en_source_method(r, NVML), "counter");
    /* each GPU's counter grows 500 mJ a read: two GPUs, 1 J a reading */
    pid_t mine[] = {getpid(), 999999};
    en_now x;
    en_read(r, SEC, mine, 2, &x);
    assert_true(x.ok);
    assert_true(fabs(x.j[NVML] - 1.0) < 1e-9);
    en_read(r, 2 * SEC, mine, 2, &x);
    assert_true(fabs(x.j[NVML] - 2.0) < 1e-9);
    assert_int_equal(x.gpu_used, 2 * 3 * 1024LL * 1024 * 1024);
    /* this process's 128 MiB on each GPU; pid 1's GiB is not ours */
    assert_int_equal(x.gpu_proc, 2 * 128LL * 1024 * 1024);
    en_read(r, 3 * SEC, NULL, 0, &x);
    assert_int_equal(x.gpu_proc, 0);
    en_close(r);
    tu_rmtree(root);
}

static void test_nvml_power_samples(void **st) {
    (void)st;
    char root[512], lib[1200];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    fake_env("1", 1, 0);
    en_reader *r = en_open(root, fake_nvml(lib, sizeof(lib)));
    assert_true(en_source_ok(r, NVML));
    assert_string_equal(en_source_method(r, NVML), "power samples");
    en_now x;
    en_read(r, 1 * SEC, NULL, 0, &x);
    assert_true(fabs(x.j[NVML]) < 1e-9);
    /* 100 W for 2 s */
    en_read(r, 3 * SEC, NULL, 0, &x);
    assert_true(fabs(x.j[NVML] - 200.0) < 1e-6);
    en_close(r);
    tu_rmtree(root);
}

static void test_nvml_no_driver_no_gpu(void **st) {
    (void)st;
    char root[512], lib[1200];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    fake_env("1", 0, 1);
    en_reader *r = en_open(root, fake_nvml(lib, sizeof(lib)));
    assert_false(en_available(r));
    assert_string_equal(en_source_why(r, NVML), "nvmlInit: Driver Not Loaded");
    en_close(r);
    fake_env("0", 0, 0);
    r = en_open(root, lib);
    assert_false(en_available(r));
    assert_string_equal(en_source_why(r, NVML), "NVML sees no GPU");
    en_close(r);
    tu_rmtree(root);
}

/* ---- a repetition ---- */

static void test_run_marks_and_points(void **st) {
    (void)st;
    char root[512];
    assert_non_null(tu_tmpdir(root, sizeof(root)));
    zone(root, "intel-rapl:0", 0, 1000000000);
    en_reader *r = en_open(root, "/nonexistent/libnvidia-ml.so.1");
    en_run e;
    en_run_begin(&e, r);
    en_run_pid(&e, getpid());
    en_run_mark(&e, 0, 1 * SEC);
    put(root, "intel-rapl:0", "energy_uj", 2000000);   /* +2 J */
    en_run_sample(&e, 2 * SEC);
    put(root, "intel-rapl:0", "energy_uj", 6000000);   /* +4 J */
    en_run_mark(&e, 1, 3 * SEC);
    en_run_mark(&e, 1, 4 * SEC);                         /* a boundary is read once */
    put(root, "intel-rapl:0", "energy_uj", 7000000);   /* +1 J */
    en_run_mark(&e, 3, 5 * SEC);                         /* no prefill mark: a serving run's */
    put(root, "intel-rapl:0", "energy_uj", 9000000);
    en_run_sample(&e, 6 * SEC);                          /* after the last mark: not the workload */
    double j, s;
    assert_int_equal(en_run_between(&e, 0, 1, &j, &s), 0);
    assert_true(fabs(j - 6.0) < 1e-9 && fabs(s - 2.0) < 1e-9);
    assert_int_equal(en_run_between(&e, 1, 3, &j, &s), 0);
    assert_true(fabs(j - 1.0) < 1e-9 && fabs(s - 2.0) < 1e-9);
    assert_int_equal(en_run_between(&e, 1, 2, &j, &s), -1);
    assert_int_equal(en_run_between(&e, 2, 3, &j, &s), -1);
    /* the points: the marks and the sample, watts since the point before */
    assert_int_equal(e.n_pts, 4);
    assert_true(isnan(e.pts[0].w));
    assert_true(fabs(e.pts[1].w - 2.0) < 1e-9);
    assert_true(fabs(e.pts[2].w - 4.0) < 1e-9);
    assert_int_equal(e.pts[2].t_ns, 3 * SEC);
    assert_true(fabs(e.pts[3].w - 0.5) < 1e-9);
    en_run_free(&e);
    en_close(r);
    tu_rmtree(root);
}

/* ---- bench run end to end ---- */

typedef struct e2e {
    char tmp[512], model[600], sc[700], out[700];
} e2e;

static int e2e_setup(e2e *x) {
    char src[512];
    if (!tu_shared("models/stories260K.bin", src, sizeof(src))) return -1;
    assert_non_null(tu_tmpdir(x->tmp, sizeof(x->tmp)));
    snprintf(x->model, sizeof(x->model), "%s/model.bin", x->tmp);
    assert_int_equal(tu_copy_file(src, x->model), 0);
    snprintf(x->sc, sizeof(x->sc), "%s/energy.json", x->tmp);
    FILE *f = fopen(x->sc, "w");
    assert_non_null(f);
    fprintf(f, "{\"name\": \"energy\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 6},"
               " \"cache\": \"warm\", \"repetitions\": 2, \"warmup\": 0}", x->model);
    fclose(f);
    snprintf(x->out, sizeof(x->out), "%s/out", x->tmp);
    return 0;
}

static cJSON *e2e_results(const e2e *x) {
    char p[800];
    snprintf(p, sizeof(p), "%s/results.json", x->out);
    cJSON *doc = hjs_load(p);
    assert_non_null(doc);
    assert_int_equal(hjs_results_violations(doc), 0);
    return doc;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* What every repetition's energy record must hold whatever the source: its phases, the per-token
 * figures as their quotients, the metrics as the record, a timeline of equal columns. */
static void check_energy_run(const cJSON *run, const char *source) {
    const cJSON *en = get(run, "energy"), *met = get(run, "metrics");
    assert_true(cJSON_IsTrue(get(en, "available")));
    assert_string_equal(get(cJSON_GetArrayItem(get(en, "sources"), 0), "name")->valuestring, source);
    const cJSON *ph = get(en, "phases");
    static const char *const phases[] = {"load", "prefill", "decode"};
    for (int k = 0; k < 3; k++) {
        const cJSON *p = get(ph, phases[k]);
        assert_non_null(p);
        assert_true(num(p, "j") >= 0 && num(p, "s") > 0);
        char name[64];
        snprintf(name, sizeof(name), "energy_%s_j", phases[k]);
        assert_true(fabs(num(met, name) - num(p, "j")) < 1e-9);
    }
    assert_int_equal((int)num(en, "prefill_tokens"), 4);
    assert_int_equal((int)num(en, "decoded_tokens"), 5);
    assert_true(fabs(num(en, "j_per_prefill_token") - num(get(ph, "prefill"), "j") / 4) < 1e-9);
    assert_true(fabs(num(en, "j_per_decoded_token") - num(get(ph, "decode"), "j") / 5) < 1e-9);
    assert_true(fabs(num(met, "energy_decode_j_per_tok") - num(en, "j_per_decoded_token")) < 1e-9);
    const cJSON *tl = get(en, "timeline");
    int n = cJSON_GetArraySize(get(tl, "t_ms"));
    assert_true(n >= 4); /* the four boundaries at least */
    assert_int_equal(cJSON_GetArraySize(get(tl, "watts")), n);
}

static void test_bench_run_fake_nvml(void **st) {
    (void)st;
    e2e x;
    TU_NEED(e2e_setup(&x) == 0);
    char empty[700], lib[1200];
    snprintf(empty, sizeof(empty), "%s/sys", x.tmp);
    assert_int_equal(ut_mkdirs(empty), 0);
    setenv("BENCH_SYSFS_ROOT", empty, 1);
    setenv("BENCH_NVML_LIB", fake_nvml(lib, sizeof(lib)), 1);
    fake_env("1", 0, 0);
    int rc = tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", x.sc, x.out);
    unsetenv("BENCH_SYSFS_ROOT");
    unsetenv("BENCH_NVML_LIB");
    assert_int_equal(rc, 0);
    cJSON *doc = e2e_results(&x);
    const cJSON *run;
    int runs = 0;
    cJSON_ArrayForEach(run, get(doc, "runs")) {
        check_energy_run(run, "nvml");
        const cJSON *en = get(run, "energy"), *ph = get(en, "phases"), *met = get(run, "metrics");
        assert_non_null(strstr(get(get(en, "unavailable"), "rapl")->valuestring, "no powercap driver"));
        /* the fake's counter grows 0.5 J at every read, and a phase has two reads at least:
         * positive whatever the timing */
        assert_true(num(get(ph, "prefill"), "j") >= 0.5);
        assert_true(num(get(ph, "decode"), "j") >= 0.5);
        assert_true(num(en, "j_per_decoded_token") >= 0.1);
        /* the worker is bench run's child: 256 MiB of the fake's; the GPU 3 GiB */
        assert_true(num(met, "gpu_proc_peak_mib") == 256);
        assert_true(num(met, "gpu_used_peak_mib") == 3072);
        assert_int_equal(cJSON_GetArraySize(get(get(en, "timeline"), "gpu_proc_mib")),
                         cJSON_GetArraySize(get(get(en, "timeline"), "t_ms")));
        runs++;
    }
    assert_int_equal(runs, 2);
    /* the summaries carry them as ordinary metrics, which bench compare reads */
    const cJSON *sum = cJSON_GetArrayItem(get(doc, "summary"), 0);
    const cJSON *m = get(get(sum, "metrics"), "energy_decode_j_per_tok");
    assert_non_null(m);
    assert_string_equal(get(m, "class")->valuestring, "info");
    cJSON_Delete(doc);
    char table[800];
    snprintf(table, sizeof(table), "%s/compare.txt", x.tmp);
    tu_bench(table, "compare --all '%s' '%s' 2>/dev/null", x.out, x.out);
    char *text = ut_slurp(table, 1 << 20, NULL, NULL, 0);
    assert_non_null(text);
    assert_non_null(strstr(text, "energy_decode_j_per_tok (J/tok)"));
    free(text);
    /* the RSS figure draws the watts and the GPU memory on its time axis (run.sh hides gnuplot) */
    char *saved = getenv("BENCH_GNUPLOT") ? strdup(getenv("BENCH_GNUPLOT")) : NULL;
    unsetenv("BENCH_GNUPLOT");
    if (pl_gnuplot_found(NULL)) {
        assert_int_equal(tu_bench("/dev/null", "plot '%s' 2>/dev/null", x.out), 0);
        char gp[800];
        snprintf(gp, sizeof(gp), "%s/plots/rss_timeline.gp", x.out);
        char *script = ut_slurp(gp, 1 << 22, NULL, NULL, 0);
        assert_non_null(script);
        assert_non_null(strstr(script, "$en0 << EOD"));
        assert_non_null(strstr(script, "axes x1y2 with fsteps"));
        assert_non_null(strstr(script, "GPU memory, workers"));
        free(script);
    } else {
        fprintf(stderr, "test_energy: gnuplot not installed; the figure's part skipped\n");
    }
    if (saved) setenv("BENCH_GNUPLOT", saved, 1);
    free(saved);
    tu_rmtree(x.tmp);
}

/* A package counter that a thread advances by 1000 µJ a millisecond, wrapping at 1 J: at most
 * 1 W, so a phase of s seconds has at most s + 0.001 J whatever the scheduling, and a missed
 * wrap would show as thousands of joules. */
typedef struct ticker {
    const char *root;
    volatile int stop;
} ticker;

static void *tick(void *arg) {
    ticker *t = arg;
    unsigned long long uj = 0;
    while (!t->stop) {
        uj = (uj + 1000) % 1000000;
        put(t->root, "intel-rapl:0", "energy_uj", uj);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_bench_run_rapl(void **st) {
    (void)st;
    e2e x;
    TU_NEED(e2e_setup(&x) == 0);
    char root[700];
    snprintf(root, sizeof(root), "%s/sys", x.tmp);
    zone(root, "intel-rapl:0", 0, 1000000);
    ticker t = {.root = root};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, tick, &t), 0);
    setenv("BENCH_SYSFS_ROOT", root, 1);
    setenv("BENCH_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    int rc = tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", x.sc, x.out);
    t.stop = 1;
    pthread_join(th, NULL);
    unsetenv("BENCH_SYSFS_ROOT");
    unsetenv("BENCH_NVML_LIB");
    assert_int_equal(rc, 0);
    cJSON *doc = e2e_results(&x);
    const cJSON *run;
    cJSON_ArrayForEach(run, get(doc, "runs")) {
        check_energy_run(run, "rapl");
        const cJSON *en = get(run, "energy"), *ph = get(en, "phases");
        double total = 0, secs = 0;
        static const char *const phases[] = {"load", "prefill", "decode"};
        for (int k = 0; k < 3; k++) {
            double j = num(get(ph, phases[k]), "j"), s = num(get(ph, phases[k]), "s");
            assert_true(j <= s + 0.001 + 1e-9);
            total += j, secs += s;
        }
        /* a repetition (an exec, a model load) lasts far longer than the ticker's millisecond */
        assert_true(secs > 0.01);
        assert_true(total > 0);
        assert_null(get(get(run, "metrics"), "gpu_used_peak_mib"));
    }
    cJSON_Delete(doc);
    tu_rmtree(x.tmp);
}

/* Where nothing counts energy, results.json says so and why, with no figure of 0; the table too. */
static void test_bench_run_unavailable(void **st) {
    (void)st;
    e2e x;
    TU_NEED(e2e_setup(&x) == 0);
    char empty[700], table[800];
    snprintf(empty, sizeof(empty), "%s/sys", x.tmp);
    assert_int_equal(ut_mkdirs(empty), 0);
    setenv("BENCH_SYSFS_ROOT", empty, 1);
    setenv("BENCH_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    snprintf(table, sizeof(table), "%s/table.txt", x.tmp);
    int rc = tu_bench(table, "run '%s' --out '%s' 2>/dev/null", x.sc, x.out);
    unsetenv("BENCH_SYSFS_ROOT");
    unsetenv("BENCH_NVML_LIB");
    assert_int_equal(rc, 0);
    cJSON *doc = e2e_results(&x);
    const cJSON *run;
    cJSON_ArrayForEach(run, get(doc, "runs")) {
        const cJSON *en = get(run, "energy");
        assert_true(cJSON_IsFalse(get(en, "available")));
        const char *why = get(en, "why")->valuestring;
        assert_non_null(strstr(why, "rapl: no "));
        assert_non_null(strstr(why, "nvml: /nonexistent/libnvidia-ml.so.1"));
        assert_null(get(en, "phases"));
        const cJSON *m;
        cJSON_ArrayForEach(m, get(run, "metrics")) {
            assert_true(strncmp(m->string, "energy_", 7) != 0);
            assert_true(strncmp(m->string, "power_", 6) != 0);
        }
    }
    cJSON_Delete(doc);
    char *text = ut_slurp(table, 1 << 20, NULL, NULL, 0);
    assert_non_null(text);
    assert_non_null(strstr(text, "energy: unavailable here (rapl: no "));
    free(text);
    tu_rmtree(x.tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rapl_sums_packages_and_unwraps),
        cmocka_unit_test(test_rapl_missing_file),
        cmocka_unit_test(test_rapl_no_powercap),
        cmocka_unit_test(test_rapl_permission_denied),
        cmocka_unit_test(test_nvml_absent),
        cmocka_unit_test(test_nvml_counter),
        cmocka_unit_test(test_nvml_power_samples),
        cmocka_unit_test(test_nvml_no_driver_no_gpu),
        cmocka_unit_test(test_run_marks_and_points),
        cmocka_unit_test(test_bench_run_fake_nvml),
        cmocka_unit_test(test_bench_run_rapl),
        cmocka_unit_test(test_bench_run_unavailable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
