/* Sharded runs without a scheduler: the plan (harness/scenario/shard.h) on its own, then
 * `bench run --shard i/3` three times and `bench merge` against one unsharded run of
 * the same scenario, and every way `bench merge` must refuse its inputs.
 * The same through a real Slurm cluster is tests/test_slurm.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/report/merge.h"
#include "harness/report/plot.h"
#include "harness/report/rmodel.h"
#include "harness/scenario/scenario.h"
#include "harness/scenario/shard.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/shardcheck.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char tmp[512];
    char model[600];
    char scenario[700];
    int ran;                /* the shards and the unsharded run are there */
} fx;

static const char *body =
    "\"workload\": {\"prompt_tokens\": 4, \"generate\": 8}, \"cache\": \"warm\", \"repetitions\": 4, \"warmup\": 1,"
    " \"metrics\": [\"timeline\", \"tokens\"], \"matrix\": {\"loader\": [\"pread\", \"mmap\"]}";

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f || !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        return -1;
    }
    *state = f;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model))) return 0;
    snprintf(f->scenario, sizeof(f->scenario), "%s/shardtest.json", f->tmp);
    char text[2048];
    snprintf(text, sizeof(text), "{\"name\": \"shardtest\", \"model\": \"%s\", %s}", f->model, body);
    if (write_file(f->scenario, text)) return -1;
    /* three shards and the whole, once for every test of the group */
    for (int i = 0; i < 3; i++)
        if (tu_bench("/dev/null", "run '%s' --shard %d/3 --out '%s/shards/s%d' 2>/dev/null", f->scenario, i, f->tmp, i)) return -1;
    if (tu_bench("/dev/null", "run '%s' --out '%s/full' 2>/dev/null", f->scenario, f->tmp)) return -1;
    f->ran = 1;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

static cJSON *load(const char *dir) {
    char p[800];
    if (snprintf(p, sizeof(p), "%s/results.json", dir) >= (int)sizeof(p)) return NULL;
    return hjs_load(p);
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static int num(const cJSON *o, const char *k) {
    const cJSON *x = get(o, k);
    return cJSON_IsNumber(x) ? x->valueint : -1;
}

/* ---- the plan ---- */

/* NULL: the model is missing (the caller skips); a scenario that does not parse fails. */
static scenario *parse(const char *matrix, int reps, int warmup) {
    char model[600], text[2048];
    if (!tu_shared("models/stories260K.bin", model, sizeof(model))) return NULL;
    snprintf(text, sizeof(text),
             "{\"name\": \"p\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4},"
             " \"cache\": \"warm\", \"repetitions\": %d, \"warmup\": %d, \"matrix\": %s}", model, reps, warmup, matrix);
    scenario *s = NULL;
    sc_errors e;
    if (sc_parse("p.json", text, tu_module_dir(), &s, &e)) {
        for (int i = 0; i < e.n; i++) fprintf(stderr, "%s\n", e.v[i]);
        sc_errors_free(&e);
        fail_msg("the plan test's scenario does not parse");
    }
    return s;
}

/* Every N from 1 to the cell count: each cell in exactly one shard, sizes within one,
 * each shard in the unsharded order, its variants within one of each other, and the
 * same plan when made again. */
static void test_plan_balanced_interleaved_deterministic(void **state) {
    (void)state;
    scenario *s = parse("{\"loader\": [\"pread\", \"mmap\"], \"kv\": [\"prealloc\", \"dynamic\"]}", 5, 1);
    if (!s) skip();
    assert_int_equal(s->n_variants, 4);
    char err[512];
    for (int n = 1; n <= 20; n++) {
        sh_plan p, q;
        assert_int_equal(sh_plan_make(s, n, &p, err, sizeof(err)), 0);
        assert_int_equal(sh_plan_make(s, n, &q, err, sizeof(err)), 0);
        assert_int_equal(p.n_cells, 20);
        assert_memory_equal(p.cells, q.cells, sizeof(*p.cells) * 20);
        assert_memory_equal(p.start, q.start, sizeof(*p.start) * (size_t)(n + 1));
        int seen[4][6] = {{0}};
        int lo = 1 << 30, hi = 0;
        for (int i = 0; i < n; i++) {
            int size = p.start[i + 1] - p.start[i];
            lo = size < lo ? size : lo;
            hi = size > hi ? size : hi;
            int per[4] = {0};
            for (int k = p.start[i]; k < p.start[i + 1]; k++) {
                const sh_cell *c = &p.cells[k];
                assert_true(c->rep >= 1 && c->rep <= 5);   /* after the one warm-up */
                seen[c->variant][c->rep]++;
                per[c->variant]++;
                assert_int_equal(sh_keeps(&p, i, c->variant, c->rep), 1);
                if (k > p.start[i]) {
                    /* the unsharded order: repetition, then variant */
                    const sh_cell *b = &p.cells[k - 1];
                    assert_true(b->rep < c->rep || (b->rep == c->rep && b->variant < c->variant));
                }
            }
            int vlo = 1 << 30, vhi = 0;
            for (int v = 0; v < 4; v++) {
                vlo = per[v] < vlo ? per[v] : vlo;
                vhi = per[v] > vhi ? per[v] : vhi;
                assert_int_equal(sh_variant_cells(&p, i, v), per[v]);
                /* a warm-up exactly for the variants the shard has */
                assert_int_equal(sh_keeps(&p, i, v, 0), per[v] > 0);
            }
            assert_true(vhi - vlo <= 1);
        }
        assert_true(hi - lo <= 1);
        for (int v = 0; v < 4; v++)
            for (int r = 1; r <= 5; r++) assert_int_equal(seen[v][r], 1);
        sh_plan_free(&p);
        sh_plan_free(&q);
    }
    sh_plan p;
    assert_int_equal(sh_plan_make(s, 21, &p, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "21 shards for 20 cells"));
    /* --only first: the plan covers the selected variants alone */
    assert_int_equal(sc_select(s, "loader=mmap", err, sizeof(err)), 0);
    assert_int_equal(sh_plan_make(s, 3, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_cells, 10);
    for (int k = 0; k < p.n_cells; k++) assert_true(s->variants[p.cells[k].variant].selected);
    sh_plan_free(&p);
    sc_free(s);
}

static void test_shard_spec(void **state) {
    (void)state;
    int i, n;
    char err[512];
    assert_int_equal(sh_parse("2/3", &i, &n, err, sizeof(err)), 0);
    assert_int_equal(i, 2);
    assert_int_equal(n, 3);
    static const char *bad[] = {"3/3", "-1/3", "1/0", "a/3", "1/3x", "1", "", "1/"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
        err[0] = 0;
        assert_int_equal(sh_parse(bad[k], &i, &n, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "--shard"));
    }
    assert_int_equal(sh_parse("3/3", &i, &n, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "0 <= i < 3"));
}

/* bench plan: the JSON, the command line of each shard, the refusals. */
static void test_plan_command(void **state) {
    fx *f = *state;
    if (!f->ran) skip();
    char out[800];
    snprintf(out, sizeof(out), "%s/plan.json", f->tmp);
    assert_int_equal(tu_bench(NULL, "plan '%s' --shards 3 --out '%s' 2>/dev/null", f->scenario, out), 0);
    cJSON *p = hjs_load(out);
    assert_non_null(p);
    assert_int_equal(num(p, "cells"), 8);
    assert_int_equal(cJSON_GetArraySize(get(p, "plan")), 3);
    int total = 0;
    for (int i = 0; i < 3; i++) {
        const cJSON *s = cJSON_GetArrayItem(get(p, "plan"), i);
        char want[64];
        snprintf(want, sizeof(want), "--shard %d/3", i);
        assert_non_null(strstr(get(s, "command")->valuestring, want));
        total += cJSON_GetArraySize(get(s, "cells"));
    }
    assert_int_equal(total, 8);
    cJSON_Delete(p);
    char errf[800];
    snprintf(errf, sizeof(errf), "%s/plan.err", f->tmp);
    assert_int_equal(tu_bench(NULL, "plan '%s' --shards 9 2>'%s' >/dev/null", f->scenario, errf), 2);
    char *e = rr_slurp(errf, NULL, out, sizeof(out));
    assert_non_null(e);
    assert_non_null(strstr(e, "9 shards for 8 cells"));
    free(e);
    assert_int_equal(tu_bench(NULL, "plan '%s' 2>/dev/null >/dev/null", f->scenario), 2);
    assert_int_equal(tu_bench(NULL, "run '%s' --shard 3/3 2>/dev/null >/dev/null", f->scenario), 2);
}

/* ---- shards and merge ---- */

/* The merged shards carry the same records as the unsharded run. */
static void test_merged_equals_unsharded(void **state) {
    fx *f = *state;
    if (!f->ran) skip();
    char shards[700], merged[700], full[700];
    snprintf(shards, sizeof(shards), "%s/shards", f->tmp);
    snprintf(merged, sizeof(merged), "%s/merged", f->tmp);
    snprintf(full, sizeof(full), "%s/full", f->tmp);
    /* a shard: its part of the plan, its cells only, its own warm-ups */
    char sdir[800];
    snprintf(sdir, sizeof(sdir), "%s/s1", shards);
    cJSON *s1 = load(sdir);
    assert_non_null(s1);
    assert_int_equal(hjs_results_violations(s1), 0);
    assert_int_equal(num(get(s1, "shard"), "index"), 1);
    assert_int_equal(num(get(s1, "shard"), "count"), 3);
    assert_int_equal(cJSON_GetArraySize(get(get(s1, "shard"), "cells")), 3);
    int measured = 0, warm = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, get(s1, "runs")) {
        if (cJSON_IsTrue(get(r, "warmup"))) warm++;
        else measured++;
    }
    assert_int_equal(measured, 3);
    assert_int_equal(warm, 2);      /* shard 1 holds cells of both variants */
    assert_non_null(get(get(s1, "environment"), "kernels"));
    struct stat nv;
    if (stat("/proc/driver/nvidia/gpus", &nv)) assert_int_equal(cJSON_GetArraySize(get(get(s1, "environment"), "gpus")), 0);
    cJSON_Delete(s1);

    assert_int_equal(tu_bench(NULL, "merge '%s' --out '%s' 2>/dev/null", shards, merged), 0);
    cJSON *m = load(merged), *u = load(full);
    assert_non_null(m);
    assert_non_null(u);
    assert_int_equal(hjs_results_violations(m), 0);
    char err[1024] = "";
    int same = sck_same_records(m, u, err, sizeof(err));
    if (same < 0) fprintf(stderr, "%s\n", err);
    assert_true(same > 50);
    /* the check itself: one token or one counter changed is a difference */
    cJSON *bad = cJSON_Duplicate(m, 1);
    cJSON *last = cJSON_GetArrayItem(get(bad, "runs"), cJSON_GetArraySize(get(bad, "runs")) - 1);
    cJSON *ids = (cJSON *)get(get(cJSON_GetArrayItem(get(last, "processes"), 0), "tokens"), "id");
    assert_non_null(ids);
    cJSON_ReplaceItemInArray(ids, 2, cJSON_CreateNumber(cJSON_GetArrayItem(ids, 2)->valuedouble + 1));
    assert_int_equal(sck_same_records(bad, u, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "token ids differ"));
    cJSON_Delete(bad);
    bad = cJSON_Duplicate(m, 1);
    last = cJSON_GetArrayItem(get(bad, "runs"), cJSON_GetArraySize(get(bad, "runs")) - 1);
    cJSON *met = (cJSON *)get(cJSON_GetArrayItem(get(last, "processes"), 0), "metrics");
    cJSON_ReplaceItemInObjectCaseSensitive(met, "mod.kv.bytes_reserved", cJSON_CreateNumber(1));
    assert_int_equal(sck_same_records(bad, u, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "mod.kv.bytes_reserved"));
    cJSON_Delete(bad);
    /* the measured records in the unsharded order, each with its shard and machine */
    const cJSON *a = get(m, "runs"), *b = get(u, "runs");
    int ia = 0;
    cJSON_ArrayForEach(r, b) {
        if (cJSON_IsTrue(get(r, "warmup"))) continue;
        const cJSON *x;
        while ((x = cJSON_GetArrayItem(a, ia)) && cJSON_IsTrue(get(x, "warmup"))) ia++;
        assert_non_null(x);
        assert_int_equal(num(x, "variant"), num(r, "variant"));
        assert_int_equal(num(x, "repetition"), num(r, "repetition"));
        assert_true(num(x, "shard") >= 0 && num(x, "shard") < 3);
        assert_int_equal(num(x, "machine_type"), 0);
        ia++;
    }
    assert_int_equal(cJSON_GetArraySize(get(m, "machines")), 3);
    assert_int_equal(cJSON_GetArraySize(get(m, "machine_types")), 1);
    assert_int_equal(cJSON_GetArraySize(get(m, "summary")), 2);
    cJSON_Delete(m);
    cJSON_Delete(u);
    /* bench compare reads it as any run: the same variants, nothing beyond tolerance */
    assert_int_equal(tu_bench("/dev/null", "compare '%s' '%s' --deterministic-only 2>/dev/null", full, merged), 0);
}

/* A copy of shard i's results.json with one edit, in DIR/name. */
typedef void (*edit_fn)(cJSON *doc);
static void copy_shard(fx *f, int i, const char *name, edit_fn edit) {
    char src[800], dst[800], file[900];
    snprintf(src, sizeof(src), "%s/shards/s%d", f->tmp, i);
    snprintf(dst, sizeof(dst), "%s/%s", f->tmp, name);
    mkdir(dst, 0777);
    cJSON *d = load(src);
    assert_non_null(d);
    if (edit) edit(d);
    char *text = cJSON_Print(d);
    snprintf(file, sizeof(file), "%s/results.json", dst);
    assert_int_equal(write_file(file, text), 0);
    free(text);
    cJSON_Delete(d);
}

static void edit_sha(cJSON *d) {
    cJSON *git = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "environment"), "git");
    cJSON_ReplaceItemInObjectCaseSensitive(git, "sha", cJSON_CreateString("0123456789abcdef0123456789abcdef01234567"));
}
static void edit_name(cJSON *d) {
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "scenario"), "name", cJSON_CreateString("other"));
}
static void edit_status(cJSON *d) { cJSON_ReplaceItemInObjectCaseSensitive(d, "status", cJSON_CreateString("running")); }
static void edit_cpu(cJSON *d) {
    cJSON *cpu = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "environment"), "cpu");
    cJSON_ReplaceItemInObjectCaseSensitive(cpu, "model", cJSON_CreateString("Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz"));
}
static void edit_cell(cJSON *d) {
    /* a measured record moved to a repetition that is shard 2's */
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "runs")) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "warmup"))) continue;
        cJSON_ReplaceItemInObjectCaseSensitive(r, "repetition", cJSON_CreateNumber(4));
        break;
    }
}
static void edit_count(cJSON *d) {
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "shard"), "count", cJSON_CreateNumber(4));
}

/* bench merge ARGS: the exit status; its stderr must hold want (when given); nothing written on refusal. */
static void merge_expect(fx *f, int want_rc, const char *want, const char *args) {
    char out[800], errf[800];
    snprintf(out, sizeof(out), "%s/m.out", f->tmp);
    snprintf(errf, sizeof(errf), "%s/m.err", f->tmp);
    tu_rmtree(out);
    int rc = tu_bench(NULL, "merge %s --out '%s' 2>'%s'", args, out, errf);
    char buf[256];
    char *e = rr_slurp(errf, NULL, buf, sizeof(buf));
    assert_non_null(e);
    int said = !want || strstr(e, want);
    if (rc != want_rc || !said) fprintf(stderr, "bench merge %s: exit %d:\n%s", args, rc, e);
    free(e);
    assert_int_equal(rc, want_rc);
    assert_true(said);
    struct stat st;
    if (want_rc) assert_int_not_equal(stat(out, &st), 0);
}

static void test_merge_refuses(void **state) {
    fx *f = *state;
    if (!f->ran) skip();
    char s0[700], s1[700], s2[700], all[2200], args[4000];
    snprintf(s0, sizeof(s0), "'%s/shards/s0'", f->tmp);
    snprintf(s1, sizeof(s1), "'%s/shards/s1'", f->tmp);
    snprintf(s2, sizeof(s2), "'%s/shards/s2'", f->tmp);
    snprintf(all, sizeof(all), "%s %s %s", s0, s1, s2);

    /* a missing shard; --partial merges what is there and says which is missing */
    snprintf(args, sizeof(args), "%s %s", s0, s1);
    merge_expect(f, 1, "shard 2 of 3 missing", args);
    snprintf(args, sizeof(args), "%s %s --partial", s0, s1);
    merge_expect(f, 0, NULL, args);
    char out[800];
    snprintf(out, sizeof(out), "%s/m.out", f->tmp);
    cJSON *m = load(out);
    assert_non_null(m);
    assert_int_equal(cJSON_GetArraySize(get(get(m, "merged"), "missing_shards")), 1);
    assert_int_equal(cJSON_GetArrayItem(get(get(m, "merged"), "missing_shards"), 0)->valueint, 2);
    cJSON_Delete(m);

    /* another build */
    copy_shard(f, 2, "sha", edit_sha);
    snprintf(args, sizeof(args), "%s %s '%s/sha'", s0, s1, f->tmp);
    merge_expect(f, 1, ".environment.git.sha", args);
    snprintf(args, sizeof(args), "%s %s '%s/sha' --allow-builds", s0, s1, f->tmp);
    merge_expect(f, 0, NULL, args);
    /* another scenario */
    copy_shard(f, 2, "name", edit_name);
    snprintf(args, sizeof(args), "%s %s '%s/name'", s0, s1, f->tmp);
    merge_expect(f, 1, ".scenario.name", args);
    snprintf(args, sizeof(args), "%s %s '%s/name' --allow-scenarios", s0, s1, f->tmp);
    merge_expect(f, 0, NULL, args);
    /* one shard twice on one machine type */
    copy_shard(f, 0, "dup", NULL);
    snprintf(args, sizeof(args), "%s '%s/dup'", all, f->tmp);
    merge_expect(f, 1, "both shard 0/3 on one machine type", args);
    /* a shard that did not finish */
    copy_shard(f, 2, "running", edit_status);
    snprintf(args, sizeof(args), "%s %s '%s/running'", s0, s1, f->tmp);
    merge_expect(f, 1, "did not finish", args);
    /* a record that is not one of its shard's cells */
    copy_shard(f, 0, "cell", edit_cell);
    snprintf(args, sizeof(args), "'%s/cell' %s %s", f->tmp, s1, s2);
    merge_expect(f, 1, "is not one of shard 0's cells", args);
    /* shards of another plan */
    copy_shard(f, 2, "count", edit_count);
    snprintf(args, sizeof(args), "%s %s '%s/count'", s0, s1, f->tmp);
    merge_expect(f, 1, "shards of different plans", args);
    /* not results, and a merged result given again */
    char empty[800];
    snprintf(empty, sizeof(empty), "%s/empty", f->tmp);
    mkdir(empty, 0777);
    snprintf(args, sizeof(args), "'%s'", empty);
    merge_expect(f, 1, "no results.json", args);
    snprintf(args, sizeof(args), "%s", all);
    merge_expect(f, 0, NULL, args);
    char prev[900];
    snprintf(prev, sizeof(prev), "%s.prev", out);
    assert_int_equal(rename(out, prev), 0);
    snprintf(args, sizeof(args), "'%s'", prev);
    merge_expect(f, 1, "already a merged result", args);
}

/* Shard 1 again on another machine type: two populations, never one statistic; the
 * reader and the figures give each its own series. */
static void test_machine_types_apart(void **state) {
    fx *f = *state;
    if (!f->ran) skip();
    copy_shard(f, 1, "xeon", edit_cpu);
    char out[800];
    snprintf(out, sizeof(out), "%s/types", f->tmp);
    assert_int_equal(tu_bench(NULL, "merge '%s/shards' '%s/xeon' --out '%s' 2>/dev/null", f->tmp, f->tmp, out), 0);
    cJSON *m = load(out);
    assert_non_null(m);
    assert_int_equal(hjs_results_violations(m), 0);
    const cJSON *types = get(m, "machine_types");
    assert_int_equal(cJSON_GetArraySize(types), 2);
    assert_string_equal(get(cJSON_GetArrayItem(types, 1), "label")->valuestring, "Intel Xeon Platinum 8480+");
    /* per variant and type: the statistic's n is that type's counted records, nothing more */
    int entries = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, get(m, "summary")) {
        int v = num(s, "variant"), t = num(s, "machine_type"), n = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, get(m, "runs"))
            n += num(r, "variant") == v && num(r, "machine_type") == t && cJSON_IsTrue(get(r, "counted"));
        assert_true(n > 0);
        assert_int_equal(num(get(get(s, "metrics"), "ttft_ms"), "n"), n);
        assert_int_equal(num(s, "repetitions_counted"), n);
        assert_non_null(strstr(get(s, "label")->valuestring, " @ "));
        entries++;
    }
    assert_int_equal(entries, 4);   /* 2 variants x 2 types */
    cJSON_Delete(m);
    /* the reader: one variant per variant and type, its runs those of the type */
    rr_doc d;
    char err[512];
    assert_int_equal(rr_load(out, &d, err, sizeof(err)), 0);
    assert_int_equal(d.n, 4);
    for (int i = 0; i < d.n; i++) {
        const rm_run *runs[16];
        int nr = rr_counted_runs(&d, &d.v[i], runs, 16);
        assert_true(nr > 0);
        for (int k = 0; k < nr; k++) {
            assert_int_equal(runs[k]->machine_type, d.v[i].machine_type);
            assert_int_equal(num(runs[k]->raw, "machine_type"), d.v[i].machine_type);
        }
        assert_non_null(strstr(d.v[i].key, ",machine="));
        assert_int_equal(rr_find(&d.v[i], "ttft_ms")->n, nr);
    }
    rr_free(&d);
    /* the figures: one series per variant and machine type (run.sh hides gnuplot from the runs) */
    char *saved = getenv("BENCH_GNUPLOT") ? strdup(getenv("BENCH_GNUPLOT")) : NULL;
    unsetenv("BENCH_GNUPLOT");
    int found = pl_gnuplot_found(NULL);
    int rc = found ? tu_bench(NULL, "plot '%s' 2>/dev/null", out) : -1;
    if (saved) setenv("BENCH_GNUPLOT", saved, 1);
    free(saved);
    if (!found) {
        fprintf(stderr, "test: gnuplot not found (scripts/deps.sh installs gnuplot-nox): figures not checked\n");
        return;
    }
    assert_int_equal(rc, 0);
    char gp[900];
    snprintf(gp, sizeof(gp), "%s/plots/latency.gp", out);
    char *text = rr_slurp(gp, NULL, err, sizeof(err));
    assert_non_null(text);
    assert_non_null(strstr(text, "pread @ Intel Xeon Platinum 8480+"));
    assert_non_null(strstr(text, "mmap @ Intel Xeon Platinum 8480+"));
    assert_non_null(strstr(text, "pread @ "));
    free(text);
}

/* The machine type: the CPU model, flags, kernels and GPUs make the id; the label is short. */
static void test_machine_type(void **state) {
    (void)state;
    const char *fmt = "{\"cpu\": {\"model\": \"Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz\", \"flags\": \"%s\"},"
                      " \"kernels\": \"avx512\", \"gpus\": %s}";
    char text[512], id[4][32], label[4][200];
    static const char *flags[] = {"avx2 avx512f", "avx2 avx512f", "avx2", "avx2 avx512f"};
    static const char *gpus[] = {"[\"NVIDIA H100 80GB HBM3\"]", "[\"NVIDIA H100 80GB HBM3\"]", "[\"NVIDIA H100 80GB HBM3\"]",
                                 "[\"NVIDIA H100 80GB HBM3\", \"NVIDIA H100 80GB HBM3\"]"};
    for (int i = 0; i < 4; i++) {
        snprintf(text, sizeof(text), fmt, flags[i], gpus[i]);
        cJSON *env = cJSON_Parse(text);
        assert_non_null(env);
        mg_machine_type(env, id[i], sizeof(id[i]), label[i], sizeof(label[i]));
        cJSON_Delete(env);
        assert_int_equal(strlen(id[i]), 16);
    }
    assert_string_equal(label[0], "Intel Xeon Platinum 8480+ + NVIDIA H100 80GB HBM3");
    assert_string_equal(id[0], id[1]);
    assert_string_not_equal(id[0], id[2]);   /* other flags: another type, the same label */
    assert_string_equal(label[2], label[0]);
    assert_string_not_equal(id[0], id[3]);
    assert_string_equal(label[3], "Intel Xeon Platinum 8480+ + 2x NVIDIA H100 80GB HBM3");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_balanced_interleaved_deterministic),
        cmocka_unit_test(test_shard_spec),
        cmocka_unit_test(test_machine_type),
        cmocka_unit_test(test_plan_command),
        cmocka_unit_test(test_merged_equals_unsharded),
        cmocka_unit_test(test_merge_refuses),
        cmocka_unit_test(test_machine_types_apart),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
