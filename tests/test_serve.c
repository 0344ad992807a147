/* Serving runs end to end through $BENCH_BIN (`bench run` of a scenario with
 * workload.requests, harness/child/serve.h) on stories260K, kv block, token and prealloc:
 *   - results.json validates against docs/results-schema.json, and holds every request
 *     and the KV timeline; results.csv, the table and the KV timeline CSV have them too;
 *   - every variant serves the same requests and generates the same number of tokens;
 *   - prefix sharing: the prefilled positions drop by exactly the positions reused, and
 *     those are at least the shared prefix of every sharing request but the first;
 *   - waste: token 0; block <= block_size - 1 positions per running sequence; prealloc
 *     all it reserved and does not hold (at the end: everything);
 *   - no block or slot leaked: the module's counters after every request finished;
 *   - admission under one budget: prealloc runs budget / context sequences and queues
 *     the rest; the shared pools run more; goodput follows the targets;
 *   - the kv figure draws the serving timeline (when gnuplot is installed);
 *   - the requests themselves: the same for the same seed, lengths in their ranges, the
 *     prefix in front of exactly round(fraction x count) prompts, Poisson arrivals in order.
 * Skips without the shared model files. */
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

#include "harness/report/plot.h"
#include "harness/child/serve.h"
#include "harness/report/serve_report.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char tmp[512];
    char model[512], tok[512];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model)) || !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)) ||
        !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        *state = NULL;
        return 0;
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

#define NEED(f) do { if (!(f)) skip(); } while (0)

/* stories260K: 5 layers x 4 KV heads x 8 = 32 floats of K and of V per layer and position */
#define TOKEN_BYTES (2.0 * 5 * 32 * 4)
#define CTX 96

/* Runs a serving scenario whose requests object is `requests` (JSON text) over kv block
 * (block_size 16), token and prealloc; returns results.json, the table in *table. */
static cJSON *serve(fx *f, const char *name, const char *requests, char *table, size_t tlen) {
    char sc[700], out[700], tab[800];
    snprintf(sc, sizeof(sc), "%s/%s.json", f->tmp, name);
    snprintf(out, sizeof(out), "%s/out_%s", f->tmp, name);
    snprintf(tab, sizeof(tab), "%s/table_%s.txt", f->tmp, name);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"%s\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\", "
               "\"workload\": {\"ctx\": %d, \"requests\": %s}, \"repetitions\": 1, \"warmup\": 0, \"threads\": 1, "
               "\"matrix\": {\"kv\": [{\"name\": \"block\", \"options\": {\"block_size\": 16}, \"label\": \"block\"}, "
               "\"token\", \"prealloc\"]}}", name, f->model, f->tok, CTX, requests);
    fclose(o);
    assert_int_equal(tu_bench(tab, "run '%s' --out '%s' 2>/dev/null", sc, out), 0);
    FILE *t = fopen(tab, "r");
    assert_non_null(t);
    size_t n = fread(table, 1, tlen - 1, t);
    table[n] = 0;
    fclose(t);
    char p[800];
    snprintf(p, sizeof(p), "%s/results.json", out);
    cJSON *doc = hjs_load(p);
    assert_non_null(doc);
    assert_int_equal(hjs_results_violations(doc), 0);
    return doc;
}

static const cJSON *variant(const cJSON *doc, const char *label) {
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(doc, "summary")) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(v, "label");
        if (cJSON_IsString(l) && !strcmp(l->valuestring, label)) return v;
    }
    fail_msg("no variant %s in the summary", label);
    return NULL;
}

/* The median of a summary metric; fails when it is missing. */
static double metric(const cJSON *doc, const char *label, const char *name) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(variant(doc, label), "metrics"), name);
    const cJSON *med = cJSON_GetObjectItemCaseSensitive(m, "median");
    if (!cJSON_IsNumber(med)) fail_msg("%s: no metric %s", label, name);
    return med->valuedouble;
}

/* The first (only) process of the variant's run. */
static const cJSON *proc(const cJSON *doc, const char *label) {
    int index = (int)cJSON_GetObjectItemCaseSensitive(variant(doc, label), "variant")->valuedouble;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(doc, "runs"))
        if ((int)cJSON_GetObjectItemCaseSensitive(r, "variant")->valuedouble == index)
            return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "processes"), 0);
    fail_msg("no run of %s", label);
    return NULL;
}

static double column_sum(const cJSON *p, const char *col) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "serve"),
                                                                                        "requests"), col), *x;
    double s = 0;
    assert_true(cJSON_IsArray(c));
    cJSON_ArrayForEach(x, c) s += x->valuedouble;
    return s;
}

static double counter(const cJSON *p, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(p, "counters")) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return cJSON_GetObjectItemCaseSensitive(c, "value")->valuedouble;
    }
    fail_msg("no counter %s", name);
    return 0;
}

static const char *const labels[] = {"block", "token", "prealloc"};

/* 10 requests, 6 of them behind a 32-token prefix, and a budget that holds them all at
 * full context: no queueing, no preemption, so the prefill positions are exact. */
static void test_prefix_waste_and_leaks(void **state) {
    fx *f = *state;
    NEED(f);
    static char table[65536];
    cJSON *doc = serve(f, "prefix", "{\"count\": 10, \"prompt_len\": {\"uniform\": [4, 24]}, \"output_len\": {\"uniform\": [4, 20]}, "
                                    "\"shared_prefix\": {\"tokens\": 32, \"fraction\": 0.6}, \"kv_budget\": {\"tokens\": 960}, "
                                    "\"targets\": {\"ttft_ms\": 1000000}, \"seed\": 5, \"stop_at_eos\": false}", table, sizeof(table));
    double prompt = metric(doc, "prealloc", "serve_prompt_tokens"), out = metric(doc, "prealloc", "serve_output_tokens");
    for (int i = 0; i < 3; i++) {
        const char *l = labels[i];
        const cJSON *p = proc(doc, l);
        /* the same requests, to their full output_len, everywhere */
        assert_true(metric(doc, l, "serve_requests") == 10);
        assert_true(metric(doc, l, "serve_prompt_tokens") == prompt);
        assert_true(metric(doc, l, "serve_output_tokens") == out);
        assert_true(column_sum(p, "output_tokens") == out);
        assert_true(metric(doc, l, "serve_preemptions") == 0);
        assert_true(metric(doc, l, "serve_goodput_pct") == 100);
        /* prefix sharing: what is reused is not prefilled */
        double reused = metric(doc, l, "serve_prefix_reused_tokens"), pre = metric(doc, l, "serve_prefill_tokens");
        assert_true(pre + reused == prompt);
        assert_true(metric(doc, "prealloc", "serve_prefill_tokens") - pre == reused);
        assert_true(column_sum(p, "prefix_reused") == reused);
        if (i < 2) assert_true(reused >= 5 * 32);   /* 6 share it: all but the first reuse its 32 positions */
        else assert_true(reused == 0);
        printf("[ INFO     ] %s: %g prompt positions, %g prefilled, %g reused\n", l, prompt, pre, reused);
        /* waste, at its peak over the steps */
        double wasted = metric(doc, l, "serve_kv_wasted_peak_mib") * 1048576, peak = metric(doc, l, "serve_peak_seqs");
        if (!strcmp(l, "token")) assert_true(wasted == 0);
        if (!strcmp(l, "block")) assert_true(wasted > 0 && wasted <= 15 * peak * TOKEN_BYTES);
        if (!strcmp(l, "prealloc")) {
            assert_true(wasted == metric(doc, l, "serve_kv_reserved_peak_mib") * 1048576);
            assert_true(metric(doc, l, "serve_kv_cached_peak_mib") == 0);
        }
    }
    /* no block or slot leaked: once every request finished, nothing is live, all else free or cache */
    const cJSON *b = proc(doc, "block"), *t = proc(doc, "token");
    assert_true(counter(b, "kv.blocks_in_use") == 0);
    assert_true(counter(b, "kv.blocks_free") + counter(b, "kv.blocks_cached") == counter(b, "kv.blocks_total"));
    assert_true(counter(b, "kv.bytes_wasted") == 0);
    assert_true(counter(t, "kv.slots_in_use") == counter(t, "kv.slots_cached"));
    assert_true(counter(t, "kv.slots_free") + counter(t, "kv.slots_cached") == counter(t, "kv.slots_total"));
    assert_true(counter(t, "kv.slots_cached") > 0);
    /* the activations of a 512-token pass (ubatch) reserved in the load: no pass of 4..56 prompt
     * tokens or 10 decode rows grew the block afterwards (stories260K: 4 x 64 + 2 x 32 + 8 floats
     * a token at the least, before the FFN's rows) */
    for (int i = 0; i < 3; i++) {
        assert_true(counter(proc(doc, labels[i]), "engine.scratch_allocs") == 1);
        assert_true(counter(proc(doc, labels[i]), "engine.scratch_bytes") >= 512.0 * (4 * 64 + 2 * 32 + 8) * 4);
    }
    /* the table, results.csv and the timeline CSV show the serving figures */
    assert_non_null(strstr(table, "prefix positions reused"));
    assert_non_null(strstr(table, "peak concurrent seqs"));
    char path[800];
    struct stat st;
    snprintf(path, sizeof(path), "%s/out_prefix/timelines/v0-r0-p0-kv.csv", f->tmp);
    assert_int_equal(stat(path, &st), 0);
    snprintf(path, sizeof(path), "%s/out_prefix/results.csv", f->tmp);
    FILE *csv = fopen(path, "r");
    assert_non_null(csv);
    char line[1024];
    int rows = 0;
    while (fgets(line, sizeof(line), csv)) rows += strstr(line, ",serve_ttft_p99_ms,ms,") != NULL;
    fclose(csv);
    assert_int_equal(rows, 3);
    cJSON_Delete(doc);
}

/* A budget of 3 contexts: prealloc runs 3 sequences and queues the rest; the shared
 * pools hold positions, not contexts, and run more; nobody is dropped. */
static void test_admission_under_budget(void **state) {
    fx *f = *state;
    NEED(f);
    static char table[65536];
    char req[512];
    snprintf(req, sizeof(req), "{\"count\": 10, \"prompt_len\": {\"uniform\": [4, 24]}, \"output_len\": {\"fixed\": 16}, "
                               "\"kv_budget\": {\"tokens\": %d}, \"targets\": {\"ttft_ms\": 0.000001}, \"seed\": 9, "
                               "\"stop_at_eos\": false}", 3 * CTX);
    cJSON *doc = serve(f, "budget", req, table, sizeof(table));
    for (int i = 0; i < 3; i++) {
        const char *l = labels[i];
        assert_true(metric(doc, l, "serve_requests") == 10);
        assert_true(metric(doc, l, "serve_output_tokens") == 160);
        assert_true(metric(doc, l, "serve_goodput_pct") == 0);  /* no first token in a nanosecond */
        /* within the budget, whatever the layout */
        assert_true(metric(doc, l, "serve_kv_reserved_peak_mib") * 1048576 <= 3 * CTX * TOKEN_BYTES);
        printf("[ INFO     ] %s: peak %g sequences, %g queued, %g preemptions\n", l, metric(doc, l, "serve_peak_seqs"),
               metric(doc, l, "serve_waited"), metric(doc, l, "serve_preemptions"));
    }
    assert_true(metric(doc, "prealloc", "serve_peak_seqs") == 3);
    assert_true(metric(doc, "prealloc", "serve_waited") == 7);
    assert_true(metric(doc, "block", "serve_peak_seqs") > 3);
    assert_true(metric(doc, "token", "serve_peak_seqs") > 3);
    cJSON_Delete(doc);
}

/* bench plot on the prefix run: the kv figure is the serving timeline, one data block per variant. */
static void test_kv_figure(void **state) {
    fx *f = *state;
    NEED(f);
    char dir[700], path[800];
    struct stat st;
    snprintf(dir, sizeof(dir), "%s/out_prefix", f->tmp);
    if (stat(dir, &st)) skip();     /* test_prefix_waste_and_leaks did not get that far */
    /* run.sh hides gnuplot from bench run (figures cost a second a run): this test wants it */
    char *hidden = getenv("BENCH_GNUPLOT") ? strdup(getenv("BENCH_GNUPLOT")) : NULL;
    unsetenv("BENCH_GNUPLOT");
    int found = pl_gnuplot_found(NULL);
    int rc = found ? tu_bench("/dev/null", "plot '%s' 2>/dev/null", dir) : 0;
    if (hidden) setenv("BENCH_GNUPLOT", hidden, 1);
    free(hidden);
    if (!found) {
        fprintf(stderr, "test_serve: gnuplot not installed; the figure is not checked\n");
        skip();
    }
    assert_int_equal(rc, 0);
    snprintf(path, sizeof(path), "%s/plots/kv.gp", dir);
    char *gp = NULL;
    FILE *g = fopen(path, "r");
    assert_non_null(g);
    size_t cap = 0;
    assert_true(getdelim(&gp, &cap, 0, g) > 0);
    fclose(g);
    for (int i = 0; i < 3; i++) {
        char block[32];
        snprintf(block, sizeof(block), "$sv%d << EOD", i);
        assert_non_null(strstr(gp, block));
    }
    /* one memory panel per variant (twelve series in one overlapped past reading), then the
     * concurrency panel */
    assert_non_null(strstr(gp, "set multiplot layout 4,1"));
    for (const char *const *v = (const char *const[]){"block", "token", "prealloc", NULL}; *v; v++) {
        char title[64];
        snprintf(title, sizeof(title), "set title \"%s: KV bytes reserved", *v);
        assert_non_null(strstr(gp, title));
    }
    int wasted = 0;
    for (const char *p = gp; (p = strstr(p, "title \"wasted\"")); p++) wasted++;
    assert_int_equal(wasted, 3);
    assert_non_null(strstr(gp, "title \"prefix cache\""));
    assert_non_null(strstr(gp, "block running"));
    free(gp);
    unsigned char sig[8];
    snprintf(path, sizeof(path), "%s/plots/kv.png", dir);
    FILE *png = fopen(path, "rb");
    assert_non_null(png);
    assert_int_equal(fread(sig, 1, 8, png), 8);
    fclose(png);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
}

/* The workload's requests, without a model: deterministic from the seed. */
static void test_requests_from_seed(void **state) {
    (void)state;
    int lens[] = {5, 9, 2};
    sc_requests rq = {.count = 40, .prompt_len = {.kind = SC_DIST_UNIFORM, .lo = 3, .hi = 30},
                      .output_len = {.kind = SC_DIST_FILE, .lo = 2, .hi = 9, .n_values = 3, .values = lens},
                      .prefix_tokens = 12, .prefix_fraction = 0.3, .poisson_rate = 50, .seed = 11};
    sv_reqs a, b, c, d;
    char err[256];
    assert_int_equal(sv_make_requests(&rq, 512, 1, 100, &a, err, sizeof(err)), 0);
    assert_int_equal(sv_make_requests(&rq, 512, 1, 100, &b, err, sizeof(err)), 0);
    rq.seed = 12;
    assert_int_equal(sv_make_requests(&rq, 512, 1, 100, &c, err, sizeof(err)), 0);
    assert_int_equal(a.n, 40);
    int differs = 0;
    for (int i = 0; i < a.n; i++) {
        const sched_req *r = &a.r[i], *o = &c.r[i];
        /* the same seed, the same request */
        assert_int_equal(r->n_prompt, b.r[i].n_prompt);
        assert_memory_equal(r->prompt, b.r[i].prompt, (size_t)r->n_prompt * sizeof(int));
        assert_true(r->arrival_ns == b.r[i].arrival_ns && r->max_new == b.r[i].max_new);
        int common = r->n_prompt < o->n_prompt ? r->n_prompt : o->n_prompt;
        differs |= r->n_prompt != o->n_prompt || memcmp(r->prompt, o->prompt, (size_t)common * sizeof(int));
        assert_int_equal(r->max_new, lens[i % 3]);      /* a file's lengths, in order, cycling */
        assert_true(r->seed == 100 + (uint64_t)i);
        assert_int_equal(r->prompt[0], 1);              /* BOS first, prefix or not */
        for (int k = 1; k < r->n_prompt; k++) assert_true(r->prompt[k] >= 3 && r->prompt[k] < 512);
        assert_true(r->arrival_ns > (i ? a.r[i - 1].arrival_ns : 0));     /* Poisson: in order, after 0 */
    }
    assert_true(differs);
    /* the prefix: the first 12 ids two long prompts share (random ids agree by chance with odds 509^-11) */
    const int *pfx = NULL;
    for (int i = 0; i < a.n && !pfx; i++)
        for (int j = i + 1; j < a.n && !pfx; j++)
            if (a.r[i].n_prompt >= 15 && a.r[j].n_prompt >= 15 && !memcmp(a.r[i].prompt, a.r[j].prompt, 12 * sizeof(int)))
                pfx = a.r[i].prompt;
    assert_non_null(pfx);
    int sharing = 0;
    for (int i = 0; i < a.n; i++) {
        int has = a.r[i].n_prompt >= 12 + 3 && !memcmp(a.r[i].prompt, pfx, 12 * sizeof(int));
        int own = a.r[i].n_prompt - (has ? 12 : 0);
        assert_true(own >= 3 && own <= 30);
        sharing += has;
    }
    assert_int_equal(sharing, 12);      /* round(0.3 x 40) */
    assert_int_equal(sv_make_requests(&rq, 3, 1, 0, &d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "too small"));
    sv_reqs_free(&a);
    sv_reqs_free(&b);
    sv_reqs_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_waste_and_leaks),
        cmocka_unit_test(test_kv_figure),
        cmocka_unit_test(test_admission_under_budget),
        cmocka_unit_test(test_requests_from_seed),
    };
    return cmocka_run_group_tests_name("serve", tests, setup, teardown);
}
