/* The module ABI's declared rules (docs/modules.md), each shown by a module that the old
 * unwritten rule would have treated otherwise (tests/modules/broken.c, built into
 * <build>/test-modules):
 *   - a module whose capabilities and slots disagree, or whose option table is wrong, or of
 *     the old module API, is refused when it loads, naming the rule;
 *   - a shared KV pool is a capability: a module whose pool option is not called pool_bytes
 *     gets the host's KV budget (bench_kv_shape.pool_bytes), and its own pool option beside a
 *     budget is refused by the engine and by scenario validation, by the option's flag;
 *   - the KV memory figures come from the typed memory slot, not counters by name;
 *   - a failure's kind travels as a code: a worker whose KV module fails with
 *     BENCH_ERR_NOMEM is recorded as "oom" though the message names no memory;
 *   - the truncation guard arms for a loader that declares BENCH_CAP_LOADER_MAPS_FILE, and an
 *     allocator runs the producer/consumer pair unlocked when it declares
 *     BENCH_CAP_ALLOC_THREAD_SAFE, whatever their names (the built-in mmap and libc built as
 *     "mapped" and "libc2");
 *   - the module path holds several folders, searched in order. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "engines/abi/kv.h"
#include "engines/abi/loader.h"
#include "engines/core/runtime/engine.h"
#include "engines/core/runtime/modreg.h"
#include "harness/scenario/scenario.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char testmods[4096];    /* <build>/test-modules */
    char path[8192];        /* test-modules:modules */
    char model[512], tmp[512];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    char mods[4096];
    snprintf(mods, sizeof(mods), "%s", tu_module_dir());
    snprintf(f->testmods, sizeof(f->testmods), "%s/test-modules", dirname(mods));
    snprintf(f->path, sizeof(f->path), "%s:%s", f->testmods, tu_module_dir());
    if (!tu_shared("models/stories260K.bin", f->model, sizeof(f->model))) f->model[0] = 0;
    if (!tu_tmpdir(f->tmp, sizeof(f->tmp))) { free(f); return -1; }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    tu_rmtree(f->tmp);
    free(f);
    return 0;
}

static void test_rule_breakers_refused_at_load(void **state) {
    fx *f = *state;
    static const struct { const char *family, *name, *want; } cases[] = {
        {"kv", "v1", "module API version 1, this bench expects 2: rebuild the module"},
        {"kv", "capnoslot", "declares BENCH_CAP_KV_FORK but lacks its slot fork"},
        {"kv", "slotnocap", "has the slots tokens, share_prefix but does not declare BENCH_CAP_KV_PREFIX_SHARE"},
        {"kv", "nomemslot", "kv interface lacks a required slot (create, reserve, store, attend, memory, destroy)"},
        {"alloc", "badopt", "option level: offset 8 (+8 bytes) is outside or misaligned in the 8-byte options struct"},
        {"alloc", "baddefault", "option level: default \"9\" is not a whole number in 0..4"},
        {"loader", "wrongcap", "declares capabilities 0x1 that are not of the loader family"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        modreg_entry e;
        char err[1024] = "";
        int rc = modreg_load(f->testmods, cases[i].family, cases[i].name, &e, err, sizeof(err));
        if (rc >= 0) fail_msg("%s_%s loaded; it breaks a rule", cases[i].family, cases[i].name);
        if (!strstr(err, cases[i].want)) fail_msg("%s_%s: unclear error: %s (want: %s)", cases[i].family, cases[i].name, err, cases[i].want);
    }
    /* bench list skips them with the same reasons and keeps the good ones */
    modreg r;
    char warn[8192], err[512];
    assert_int_equal(modreg_open_all(f->path, &r, warn, sizeof(warn), err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (!strstr(warn, cases[i].want)) fail_msg("modreg_open_all did not warn about %s_%s: %s", cases[i].family, cases[i].name, warn);
    int have_nomem = 0, have_prealloc = 0;
    for (int i = 0; i < r.n; i++) {
        have_nomem |= !strcmp(r.v[i].mod->name, "nomem");
        have_prealloc |= !strcmp(r.v[i].mod->family, "kv") && !strcmp(r.v[i].mod->name, "prealloc");
    }
    assert_true(have_nomem && have_prealloc);   /* both folders of the path */
    modreg_close(&r);
}

/* A version 2 loader (before the optional memory_kind slot) still loads, and the host takes
 * the slot's default for it without reading past its shorter vtable: memory it cannot say
 * anything of, so the engine rearranges none of its matrices in place (repack.c). */
/* The families bench loads are one table (modreg.c): bench list's sections and the unknown
 * family message read it. */
static void test_families_table(void **state) {
    (void)state;
    char have[64] = "";
    for (int i = 0; modreg_family(i); i++) snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "", modreg_family(i));
    assert_string_equal(have, "loader, kv, alloc, device");
    assert_null(modreg_family(-1));
}

static void test_loader_v2_loads_with_defaults(void **state) {
    fx *f = *state;
    modreg_entry e;
    char err[1024] = "";
    if (modreg_load(f->testmods, "loader", "v2", &e, err, sizeof(err)) < 0) fail_msg("loader_v2 refused: %s", err);
    const bench_loader l = {e.mod->iface, NULL};
    int byte = 0;
    assert_int_equal(bench_loader_memory_kind(&l, &byte, sizeof(byte)), BENCH_LOADER_MEM_UNKNOWN);
    modreg_entry_close(&e);
}

static int open_engine(fx *f, const char *kv, const char *kv_opts, uint64_t budget, engine **e, char *err, size_t errlen) {
    bench_opts o = {0};
    void *storage = NULL;
    if (modreg_parse_opts(kv_opts, &o, &storage, err, errlen)) return -1;
    engine_spec s = {.model_path = f->model, .loader = "mmap", .kv = kv, .threads = 1, .module_dir = f->path,
                     .kv_opts = o, .kv_budget_bytes = budget, .max_seqs = 4};
    int rc = engine_create(&s, e, err, errlen);
    free(storage);
    return rc;
}

static void test_shared_pool_by_capability(void **state) {
    fx *f = *state;
    TU_NEED(f->model[0]);
    engine *e = NULL;
    char err[1024] = "";
    /* the budget reaches the module as its pool: it has no option named pool_bytes */
    if (open_engine(f, "pooled", "", 5u << 20, &e, err, sizeof(err))) fail_msg("%s", err);
    engine_kv_mem m = engine_kv_memory(e);
    assert_int_equal(m.shared_pool, 1);
    assert_true(m.reserved == (double)(5u << 20));      /* read from the memory slot */
    assert_int_equal(engine_max_seqs(e), 4);            /* a pool: the sequences asked, not budget / context */
    engine_destroy(e);
    /* its own pool option beside a budget: refused, by the option's BENCH_OPTF_SIZES_POOL */
    e = NULL;
    int rc = open_engine(f, "pooled", "arena_mib=4", 5u << 20, &e, err, sizeof(err));
    assert_int_equal(rc, -BENCH_ERR_INVALID);
    assert_null(e);
    if (!strstr(err, "option arena_mib=4 and a KV budget")) fail_msg("unclear error: %s", err);
    /* and by scenario validation, before anything runs */
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"name\": \"t\", \"model\": \"%s\", \"cache\": \"warm\", \"matrix\": {\"kv\": [{\"name\": \"pooled\", \"options\": {\"arena_mib\": 4}}]},"
             " \"workload\": {\"requests\": {\"count\": 2, \"prompt_len\": {\"fixed\": 8}, \"output_len\": {\"fixed\": 4},"
             " \"kv_budget\": {\"tokens\": 256}}}}", f->model);
    scenario *s = NULL;
    sc_errors errs;
    assert_int_equal(sc_parse("t.json", text, f->path, &s, &errs), -1);
    int found = 0;
    for (int i = 0; i < errs.n; i++) found |= strstr(errs.v[i], "sizes its pool with arena_mib=4 too") != NULL;
    if (!found) fprintf(stderr, "scenario validation did not refuse arena_mib beside kv_budget (%d errors: %s)\n", errs.n,
                        errs.n ? errs.v[0] : "");
    sc_errors_free(&errs);
    assert_true(found);
}

static void test_error_codes(void **state) {
    fx *f = *state;
    TU_NEED(f->model[0]);
    engine *e = NULL;
    char err[1024];
    assert_int_equal(open_engine(f, "nosuch", "", 0, &e, err, sizeof(err)), -BENCH_ERR_NOTFOUND);
    assert_int_equal(open_engine(f, "nomem", "", 0, &e, err, sizeof(err)), -BENCH_ERR_NOMEM);
    assert_non_null(strstr(err, "kv nomem: the pool of 3 GiB was refused"));
    assert_int_equal(open_engine(f, "prealloc", "touch=maybe", 0, &e, err, sizeof(err)), -BENCH_ERR_INVALID);
    assert_string_equal(bench_err_name(BENCH_ERR_NOMEM), "nomem");
}

/* A worker whose KV module fails with BENCH_ERR_NOMEM: the repetition is "oom", decided by the
 * code in the ERROR event; the message ("the pool of 3 GiB was refused") has none of the
 * words the runner once searched for. */
static void test_oom_decided_by_code(void **state) {
    fx *f = *state;
    TU_NEED(f->model[0]);
    char sc[700], out[700], cmd[12000];
    snprintf(sc, sizeof(sc), "%s/nomem.json", f->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"nomem\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 2},"
               " \"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, \"matrix\": {\"kv\": [\"nomem\"]}}", f->model);
    fclose(o);
    snprintf(out, sizeof(out), "%s/out", f->tmp);
    snprintf(cmd, sizeof(cmd), "BENCH_MODULE_PATH='%s' '%s' run '%s' --out '%s' --allow-read '%s' >/dev/null 2>&1", f->path,
             getenv("BENCH_BIN") ? getenv("BENCH_BIN") : "build/asan/bench", sc, out, f->model);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    char results[800];
    snprintf(results, sizeof(results), "%s/results.json", out);
    cJSON *doc = hjs_load(results);
    assert_non_null(doc);
    const cJSON *run = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "runs"), 0);
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(run, "processes"), 0);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "status"), *why = cJSON_GetObjectItemCaseSensitive(p, "reason");
    assert_true(cJSON_IsString(st) && cJSON_IsString(why));
    if (strcmp(st->valuestring, "oom") || !strstr(why->valuestring, "the pool of 3 GiB was refused"))
        fail_msg("status %s, reason %s", st->valuestring, why->valuestring);
    cJSON_Delete(doc);
}

/* `bench run` of a scenario with the module path of the fixture; returns its exit status. */
static int run_with_path(fx *f, const char *sc, const char *out, const char *extra_env) {
    char cmd[12000];
    snprintf(cmd, sizeof(cmd), "%s BENCH_MODULE_PATH='%s' '%s' run '%s' --out '%s' --allow-read '%s' --allow-read '%s' >/dev/null 2>&1",
             extra_env, f->path, getenv("BENCH_BIN") ? getenv("BENCH_BIN") : "build/asan/bench", sc, out, f->tmp,
             f->model[0] ? f->model : f->tmp);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_truncation_guard_by_capability(void **state) {
    fx *f = *state;
    TU_NEED(f->model[0]);
    /* a private copy: the worker cuts it */
    char model[700], sc[700], out[700], results[800], cmd[2000];
    snprintf(model, sizeof(model), "%s/m.bin", f->tmp);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", f->model, model);
    assert_int_equal(system(cmd), 0);
    snprintf(sc, sizeof(sc), "%s/mapped.json", f->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"mapped\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4},"
               " \"cache\": \"warm\", \"repetitions\": 1, \"warmup\": 0, \"matrix\": {\"loader\": [\"mapped\"]}}", model);
    fclose(o);
    snprintf(out, sizeof(out), "%s/out_mapped", f->tmp);
    assert_int_equal(run_with_path(f, sc, out, "BENCH_TEST_HOOKS=1 BENCH_TEST_TRUNCATE_MODEL=4096"), 1);
    snprintf(results, sizeof(results), "%s/results.json", out);
    cJSON *doc = hjs_load(results);
    assert_non_null(doc);
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(
                                            cJSON_GetObjectItemCaseSensitive(doc, "runs"), 0), "processes"), 0);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "status"), *why = cJSON_GetObjectItemCaseSensitive(p, "reason");
    assert_true(cJSON_IsString(st) && cJSON_IsString(why));
    if (strcmp(st->valuestring, "crash") || !strstr(why->valuestring, "changed under the mapping"))
        fail_msg("loader \"mapped\" (BENCH_CAP_LOADER_MAPS_FILE): status %s, %s", st->valuestring, why->valuestring);
    cJSON_Delete(doc);
}

static double aw_metric(const cJSON *doc, const char *key, const char *name) {
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(doc, "summary")) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "key");
        if (!cJSON_IsString(k) || strcmp(k->valuestring, key)) continue;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "metrics"), name);
        const cJSON *med = cJSON_GetObjectItemCaseSensitive(m, "median");
        if (cJSON_IsNumber(med)) return med->valuedouble;
    }
    fail_msg("no %s for %s", name, key);
    return -1;
}

static void test_thread_safety_by_capability(void **state) {
    fx *f = *state;
    char sc[700], out[700], results[800];
    snprintf(sc, sizeof(sc), "%s/pc.json", f->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"kind\": \"allocators\", \"name\": \"pc\", \"repetitions\": 1, \"warmup\": 0, \"timeout_s\": 60,"
               " \"allocators\": [\"libc2\", \"buddy\"],"
               " \"workloads\": [{\"name\": \"pc\", \"pattern\": \"prodcon\", \"size\": 64, \"ops\": 2000}]}");
    fclose(o);
    snprintf(out, sizeof(out), "%s/out_pc", f->tmp);
    assert_int_equal(run_with_path(f, sc, out, ""), 0);
    snprintf(results, sizeof(results), "%s/results.json", out);
    cJSON *doc = hjs_load(results);
    assert_non_null(doc);
    assert_true(aw_metric(doc, "alloc=libc2,workload=pc", "mod.aw.locked") == 0);  /* declares thread-safe */
    assert_true(aw_metric(doc, "alloc=buddy,workload=pc", "mod.aw.locked") == 1);  /* does not */
    cJSON_Delete(doc);
}

/* bench list shows what the ABI declares: capabilities, cache types, and every option's type
 * with its range or choices and its default. */
static void test_list_shows_capabilities_and_options(void **state) {
    fx *f = *state;
    char out[700], cmd[9000];
    snprintf(out, sizeof(out), "%s/list.txt", f->tmp);
    snprintf(cmd, sizeof(cmd), "BENCH_MODULE_PATH='%s' '%s' list >'%s' 2>/dev/null", tu_module_dir(),
             getenv("BENCH_BIN") ? getenv("BENCH_BIN") : "build/asan/bench", out);
    assert_int_equal(system(cmd), 0);
    FILE *in = fopen(out, "r");
    assert_non_null(in);
    static const char *const want[] = {
        "capabilities: shared-pool, prefix-share, fork; cache types: f32 f16 bf16 q8_0 q4_0",     /* kv block, token */
        "capabilities: maps-file",                                                                /* loader mmap */
        "capabilities: thread-safe",                                                              /* alloc libc ... */
        "capabilities: reset",                                                                    /* alloc arena */
        "chunk           size 4096..1073741824              default 1m",                         /* loader pread */
        "mode            enum shared|private                default shared",                     /* loader mmap */
        "pool_bytes      size (sizes the pool)              default 0",                          /* kv block */
        "cache           int 0..64                          default 8",                          /* alloc buddy */
    };
    int seen[sizeof(want) / sizeof(want[0])] = {0};
    char line[1024];
    while (fgets(line, sizeof(line), in))
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) seen[i] |= strstr(line, want[i]) != NULL;
    fclose(in);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!seen[i]) fail_msg("bench list does not show \"%s\"", want[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_breakers_refused_at_load),
        cmocka_unit_test(test_families_table),
        cmocka_unit_test(test_loader_v2_loads_with_defaults),
        cmocka_unit_test(test_list_shows_capabilities_and_options),
        cmocka_unit_test(test_shared_pool_by_capability),
        cmocka_unit_test(test_error_codes),
        cmocka_unit_test(test_oom_decided_by_code),
        cmocka_unit_test(test_truncation_guard_by_capability),
        cmocka_unit_test(test_thread_safety_by_capability),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
