/* The results model (harness/report/rmodel.h): a model written and read back gives the same
 * values; an unchanged model is not written again; a results.json of an older bench (no
 * declared classes, no machine load) still loads; and through $BENCH_BIN, a run writes
 * results.json once per repetition (counted by inotify, not by the program's word) and a run
 * interrupted after k repetitions keeps those k. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/report/plot.h"
#include "harness/report/rmodel.h"
#include "tests/lib/testutil.h"

/* ---- a model made by hand ---- */

/* Repetition rep of variant vi: its JSON record (what results.c writes, the fields the reader
 * takes) with metrics x (run) and y, z (its one process), appended. */
static void make_run(rm_model *m, int vi, int rep, int warmup, const char *status, double x, double y, double z) {
    int ok = !strcmp(status, "ok"), counted = ok && !warmup;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "variant", vi);
    cJSON_AddNumberToObject(o, "repetition", rep);
    cJSON_AddBoolToObject(o, "warmup", warmup);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddBoolToObject(o, "valid", 1);
    cJSON_AddStringToObject(o, "invalid_reason", "");
    cJSON_AddBoolToObject(o, "counted", counted);
    cJSON *ml = cJSON_AddObjectToObject(o, "machine_load");
    cJSON_AddNumberToObject(ml, "cpus", 2);
    cJSON_AddNumberToObject(ml, "others_cpu", rep == 2 ? 0.5 : 0.01);
    cJSON_AddNumberToObject(ml, "steal", 0);
    cJSON_AddNumberToObject(ml, "load1_start", 1.25);
    cJSON_AddNumberToObject(ml, "load1_end", 1.5);
    cJSON_AddBoolToObject(ml, "busy", rep == 2);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "metrics"), "x_ms", x);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "status", status);
    cJSON_AddStringToObject(p, "reason", ok ? "" : "worker crashed");
    cJSON *pm = cJSON_AddObjectToObject(p, "metrics");
    if (ok) {
        cJSON_AddNumberToObject(pm, "y_mib", y);
        cJSON_AddNumberToObject(pm, "z_count", z);
    }
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "processes"), p);
    /* the metrics with their units and classes, which the record does not carry */
    mt_bag run = {0}, proc[1] = {{0}};
    mt_add(&run, "x_ms", "ms", mc_declare(MC_TIME, -1), x);
    if (ok) {
        mt_add(&proc[0], "y_mib", "MiB", mc_declare(MC_BYTES, -1), y);
        mt_add(&proc[0], "z_count", "count", mc_declare(MC_COUNT, -1), z);
    }
    int n = m->n_runs;
    assert_int_equal(rm_append(m, o, &run, proc, 1), 0);
    /* the typed fields, as the one reader of a record found them */
    const rm_run *t = &m->runs[n];
    assert_int_equal(t->variant, vi);
    assert_int_equal(t->counted, counted);
    assert_int_equal(t->load.busy, rep == 2);
    assert_true(t->load.load1 == 1.5);
    assert_string_equal(t->procs[0].reason, ok ? "" : "worker crashed");
    assert_string_equal(t->metrics.unit[0], "ms");
    assert_non_null(t->text);
}

static void summarize(rm_model *m) {
    static const int sel[] = {1, 1};
    static const char *const keys[] = {"loader=pread", "loader=mmap"}, *const labels[] = {"pread", "mmap"};
    assert_int_equal(rm_summary_begin(m, 2, sel, keys, labels), 0);
    /* a figure of the variant's own, as callgrind's: no repetition behind it */
    mc_decl d = mc_declare(MC_EXACT, -1);
    d.tol_rel = 0.005;
    assert_int_equal(rm_add_value(&m->v[0], "instructions_total", "count", d, 123456789, -1, -1), 0);
    rm_summary_finish(m);
}

static cJSON *make_head(const char *status) {
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "schema", RS_SCHEMA);
    cJSON_AddStringToObject(h, "status", status);
    cJSON_AddStringToObject(h, "written", "2026-11-26T12:00:00Z");
    cJSON *git = cJSON_AddObjectToObject(cJSON_AddObjectToObject(h, "environment"), "git");
    cJSON_AddStringToObject(git, "sha", "0123456789abcdef");
    cJSON_AddBoolToObject(git, "dirty", 1);
    cJSON *sc = cJSON_AddObjectToObject(h, "scenario");
    cJSON_AddStringToObject(sc, "name", "hand");
    cJSON *ov = cJSON_AddObjectToObject(sc, "overrides");
    cJSON_AddStringToObject(ov, "only", "loader=pread,loader=mmap");
    cJSON_AddBoolToObject(ov, "quick", 0);
    cJSON *as = cJSON_AddObjectToObject(sc, "as_run");
    cJSON_AddNumberToObject(as, "warmup", 1);
    cJSON_AddNumberToObject(as, "processes", 1);
    cJSON *vars = cJSON_AddArrayToObject(h, "variants");
    static const char *const keys[] = {"loader=pread", "loader=mmap"}, *const labels[] = {"pread", "mmap"};
    for (int i = 0; i < 2; i++) {
        cJSON *v = cJSON_CreateObject();
        cJSON_AddNumberToObject(v, "index", i);
        cJSON_AddStringToObject(v, "key", keys[i]);
        cJSON_AddStringToObject(v, "label", labels[i]);
        cJSON_AddItemToArray(vars, v);
    }
    return h;
}

/* warm-up, then 3 repetitions of each variant; pread's third crashed */
static void make_model(rm_model *m) {
    for (int vi = 0; vi < 2; vi++) make_run(m, vi, 0, 1, "ok", 99, 99, 99);
    for (int rep = 1; rep <= 3; rep++)
        for (int vi = 0; vi < 2; vi++)
            make_run(m, vi, rep, 0, vi == 0 && rep == 3 ? "crash" : "ok", 10.0 * rep + vi + 0.125, 100.0 / 3 * rep + vi,
                     1000 + rep * 7 + vi);
    summarize(m);
}

static void test_round_trip(void **state) {
    (void)state;
    char dir[512], err[1024];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    rm_model w = {0}, r;
    make_model(&w);
    cJSON *head = make_head("complete");
    assert_int_equal(rm_write(&w, head, dir, err, sizeof(err)), 0);
    cJSON_Delete(head);
    assert_int_equal(w.writes, 1);
    assert_int_equal(rr_load(dir, &r, err, sizeof(err)), 0);
    /* the head */
    assert_string_equal(r.scenario, "hand");
    assert_string_equal(r.status, "complete");
    assert_string_equal(r.sha, "0123456789abcdef");
    assert_int_equal(r.dirty, 1);
    assert_string_equal(r.only, "loader=pread,loader=mmap");
    assert_int_equal(r.warmup, 1);
    /* the records, in order, with their fields */
    assert_int_equal(r.n_runs, w.n_runs);
    for (int i = 0; i < w.n_runs; i++) {
        const rm_run *a = &w.runs[i], *b = &r.runs[i];
        assert_int_equal(a->variant, b->variant);
        assert_int_equal(a->rep, b->rep);
        assert_int_equal(a->warmup, b->warmup);
        assert_int_equal(a->counted, b->counted);
        assert_int_equal(a->ok, b->ok);
        assert_string_equal(a->status, b->status);
        assert_int_equal(a->load.busy, b->load.busy);
        assert_true(a->load.load1 == b->load.load1);
        assert_int_equal(a->metrics.n, b->metrics.n);
        assert_true(a->metrics.v[0] == b->metrics.v[0]);
        assert_int_equal(a->procs[0].metrics.n, b->procs[0].metrics.n);
        assert_string_equal(a->procs[0].reason, b->procs[0].reason);
    }
    /* the summaries: counts, and every metric's unit, class and statistics, to the bit */
    assert_int_equal(r.n, 2);
    for (int vi = 0; vi < 2; vi++) {
        const rm_variant *a = &w.v[vi], *b = rr_find_variant(&r, a->key);
        assert_non_null(b);
        assert_string_equal(a->label, b->label);
        assert_int_equal(a->counted, b->counted);
        assert_int_equal(a->failed, b->failed);
        assert_int_equal(a->warmups, b->warmups);
        for (int k = 0; k < a->n; k++) {
            const rm_metric *x = &a->m[k], *y = rr_summary_metric(b, x->name);
            assert_non_null(y);
            assert_string_equal(x->unit, y->unit);
            assert_int_equal(y->declared, 1);
            assert_int_equal(x->decl.cls, y->decl.cls);
            assert_int_equal(x->decl.better, y->decl.better);
            assert_true(x->decl.tol_rel == y->decl.tol_rel);
            assert_int_equal(x->st.n, y->st.n);
            assert_true(x->st.median == y->st.median && x->st.mean == y->st.mean && x->st.stddev == y->st.stddev);
            assert_true(x->st.min == y->st.min && x->st.max == y->st.max);
            assert_true(x->st.ci_lo == y->st.ci_lo && x->st.ci_hi == y->st.ci_hi);
            /* the raw values, read from the records: those the summary was made of */
            const rm_metric *s = rr_find(b, x->name);
            if (x->run[0] < 0) {
                assert_null(s); /* the variant's own figure: in the summary only */
                continue;
            }
            assert_non_null(s);
            assert_int_equal(s->n, x->n);
            for (int j = 0; j < x->n; j++) assert_true(s->v[j] == x->v[j]);
        }
    }
    assert_int_equal(w.v[0].counted, 2);
    assert_int_equal(w.v[0].failed, 1);
    assert_true(rr_summary_num(&w.v[1], "x_ms", "median") == 21.125);
    /* the busy repetitions (rep 2 of each) say so in both */
    char n1[512], n2[512];
    rm_busy_note(&w, n1, sizeof(n1));
    rm_busy_note(&r, n2, sizeof(n2));
    assert_string_equal(n1, n2);
    assert_non_null(strstr(n1, "in 2 of 5 counted repetitions"));
    rm_free(&r);
    rm_free(&w);
    tu_rmtree(dir);
}

/* Written once; again only when a record or the status changes, never for the time alone. */
static void test_unchanged_not_rewritten(void **state) {
    (void)state;
    char dir[512], err[1024];
    assert_non_null(tu_tmpdir(dir, sizeof(dir)));
    rm_model w = {0};
    make_run(&w, 0, 0, 0, "ok", 1, 2, 3);
    summarize(&w);
    cJSON *head = make_head("running");
    assert_int_equal(rm_write(&w, head, dir, err, sizeof(err)), 0);
    cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(head, "written"), "2026-11-26T12:00:09Z");
    assert_int_equal(rm_write(&w, head, dir, err, sizeof(err)), 0);
    assert_int_equal(w.writes, 1);
    make_run(&w, 1, 0, 0, "ok", 4, 5, 6);
    summarize(&w);
    assert_int_equal(rm_write(&w, head, dir, err, sizeof(err)), 0);
    assert_int_equal(w.writes, 2);
    cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(head, "status"), "complete");
    assert_int_equal(rm_write(&w, head, dir, err, sizeof(err)), 0);
    assert_int_equal(w.writes, 3);
    assert_int_equal(w.written_runs, 2);
    cJSON_Delete(head);
    rm_model r;
    assert_int_equal(rr_load(dir, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n_runs, 2);
    assert_string_equal(r.status, "complete");
    rm_free(&r);
    rm_free(&w);
    tu_rmtree(dir);
}

/* The CI baseline as 305e493 wrote it (timelines trimmed): no declared classes, no machine load. */
static void test_old_file_loads(void **state) {
    (void)state;
    rm_model r;
    char err[1024], note[512];
    assert_int_equal(rr_load("tests/fixtures/results-305e493-ci.json", &r, err, sizeof(err)), 0);
    assert_string_equal(r.scenario, "ci");
    assert_int_equal(r.n_runs, 12);
    assert_int_equal(r.n, 4);
    const rm_variant *v = rr_find_variant(&r, "loader=pread,kv=prealloc");
    assert_non_null(v);
    assert_int_equal(v->counted, 2);
    assert_true(rr_summary_num(v, "ttft_ms", "median") == 1.141932);
    assert_true(rr_summary_num(rr_find_variant(&r, "loader=mmap,kv=dynamic"), "minflt_load", "median") == 22);
    const rm_metric *s = rr_find(v, "minflt_load");
    assert_non_null(s);
    assert_int_equal(s->n, 2);
    assert_int_equal(s->declared, 0); /* compare takes the legacy classes (mc_legacy) */
    assert_string_equal(s->unit, "count");
    rm_busy_note(&r, note, sizeof(note));
    assert_string_equal(note, "");
    rm_free(&r);
}

/* ---- through bench run ---- */

typedef struct fx {
    char tmp[512], model[600];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) || !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        *state = NULL; /* the tests that run bench skip, naming the file */
        return 0;
    }
    setenv("BENCH_TEST_HOOKS", "1", 1);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

/* Runs a scenario of 2 variants x reps (+1 warm-up) into tmp/name, counting the renames of
 * results.json into place there; returns bench's exit status. */
static int run_counting(fx *f, const char *name, int reps, int *writes) {
    char sc[700], out[700];
    snprintf(sc, sizeof(sc), "%s/%s.json", f->tmp, name);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"%s\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 2},"
               " \"cache\": \"warm\", \"repetitions\": %d, \"warmup\": 1, \"matrix\": {\"loader\": [\"pread\", \"mmap\"]}}",
            name, f->model, reps);
    fclose(o);
    snprintf(out, sizeof(out), "%s/%s", f->tmp, name);
    assert_int_equal(mkdir(out, 0777), 0);
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    assert_true(in >= 0);
    assert_true(inotify_add_watch(in, out, IN_MOVED_TO) >= 0);
    int rc = tu_bench("/dev/null", "run '%s' --out '%s' 2>/dev/null", sc, out);
    *writes = 0;
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            assert_false(e->mask & IN_Q_OVERFLOW);
            if (e->len && !strcmp(e->name, "results.json")) (*writes)++;
            p += sizeof(*e) + e->len;
        }
    close(in);
    return rc;
}

/* 2 variants x (1 warm-up + 3): 8 repetitions, 8 writes; the last already says "complete". */
static void test_one_write_per_repetition(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    int writes;
    assert_int_equal(run_counting(f, "writes", 3, &writes), 0);
    assert_int_equal(writes, 8);
    char dir[700], err[1024];
    snprintf(dir, sizeof(dir), "%s/writes", f->tmp);
    rm_model r;
    assert_int_equal(rr_load(dir, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n_runs, 8);
    assert_string_equal(r.status, "complete");
    assert_int_equal(r.v[0].counted + r.v[1].counted, 6);
    rm_free(&r);
}

/* Interrupted once 3 of 10 repetitions are done: the 3 are kept (3 writes, and one to say
 * "interrupted"), and the summaries are of them. */
static void test_interrupt_after_k_keeps_k(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    int writes;
    setenv("BENCH_TEST_INTERRUPT_AFTER", "3", 1);
    int rc = run_counting(f, "interrupted", 4, &writes);
    unsetenv("BENCH_TEST_INTERRUPT_AFTER");
    assert_int_equal(rc, 130);
    assert_int_equal(writes, 4);
    char dir[700], err[1024];
    snprintf(dir, sizeof(dir), "%s/interrupted", f->tmp);
    rm_model r;
    assert_int_equal(rr_load(dir, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n_runs, 3);
    assert_string_equal(r.status, "interrupted");
    /* warm-up of each variant, then the first repetition of pread */
    assert_int_equal(r.runs[0].warmup + r.runs[1].warmup, 2);
    assert_int_equal(r.runs[2].counted, 1);
    const rm_variant *v = rr_find_variant(&r, r.runs[2].variant == 0 ? "loader=pread" : "loader=mmap");
    assert_non_null(v);
    assert_int_equal(v->counted, 1);
    assert_non_null(rr_summary_metric(v, "ttft_ms"));
    rm_free(&r);
}

/* bench run draws its figures from its own model; bench plot draws them from the file: the
 * gnuplot scripts are the same, byte for byte (their data printed to 9 digits). */
static void test_figures_from_memory_as_from_file(void **state) {
    TU_NEED(*state);
    fx *f = *state;
    char *saved = getenv("BENCH_GNUPLOT") ? strdup(getenv("BENCH_GNUPLOT")) : NULL;
    unsetenv("BENCH_GNUPLOT"); /* run.sh hides gnuplot from the other tests' runs */
    if (!pl_gnuplot_found(NULL)) {
        if (saved) setenv("BENCH_GNUPLOT", saved, 1);
        free(saved);
        fprintf(stderr, "skip: gnuplot not found (scripts/deps.sh installs gnuplot-nox): figures not compared\n");
        skip();
    }
    int writes;
    int rc = run_counting(f, "figures", 2, &writes);
    char dir[700], gp[800];
    snprintf(dir, sizeof(dir), "%s/figures", f->tmp);
    static const char *const names[] = {"rss_timeline", "latency", "itl", "faults", "kv"};
    char *mem[5] = {0};
    for (int k = 0; k < 5; k++) {
        snprintf(gp, sizeof(gp), "%s/plots/%s.gp", dir, names[k]);
        char e[256];
        mem[k] = rr_slurp(gp, NULL, e, sizeof(e)); /* NULL: no such figure (then none from the file either) */
    }
    int prc = tu_bench("/dev/null", "plot '%s' 2>/dev/null", dir);
    if (saved) setenv("BENCH_GNUPLOT", saved, 1);
    free(saved);
    assert_int_equal(rc, 0);
    assert_int_equal(prc, 0);
    int drawn = 0;
    for (int k = 0; k < 5; k++) {
        snprintf(gp, sizeof(gp), "%s/plots/%s.gp", dir, names[k]);
        char e[256];
        char *file = rr_slurp(gp, NULL, e, sizeof(e));
        if (!mem[k] || !file) assert_true(!mem[k] && !file);
        else {
            if (strcmp(mem[k], file)) fprintf(stderr, "%s: bench run's (from memory) differs from bench plot's\n", gp);
            assert_string_equal(mem[k], file);
            drawn++;
        }
        free(mem[k]);
        free(file);
    }
    assert_true(drawn >= 3); /* RSS, latency, faults at least */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_unchanged_not_rewritten),
        cmocka_unit_test(test_old_file_loads),
        cmocka_unit_test(test_one_write_per_repetition),
        cmocka_unit_test(test_interrupt_after_k_keeps_k),
        cmocka_unit_test(test_figures_from_memory_as_from_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
