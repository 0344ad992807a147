/* A scenario axis is one row of scenario.c's table (harness/scenario/scenario.h sc_axis_def), and
 * this file is the guide to adding one: main() adds a made-up boolean axis, "test_flag", with
 * sc_axis_add, its value landing in the worker spec's ws_engine.more[0]. With no list edited:
 *   - the scenario takes it at the top level, in the matrix and in matrix.fixed, and its
 *     default when it is absent;
 *   - it crosses with the other axes and names the variants (crossed, or fixed off its default);
 *   - the worker spec carries it (written only off its default, as the row says) and the
 *     worker reads it back typed;
 *   - --only, the unknown-key message and the help texts list it, and anything but a boolean
 *     is refused with the row's own words;
 *   - results.json's variant records carry it (harness/report/results.c reads the table), and
 *     docs/results-schema.json takes it.
 * Needs the shared model stories260K.bin; skips without it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/compute/kernels.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"
#include "harness/scenario/worker_spec.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/testutil.h"

static const sc_axis_def test_flag = {
    .key = "test_flag", .type = SC_AXT_BOOL, .flags = SC_AXF_TOP | SC_AXF_SHOW_NOT_DEF, .def = "false",
    .expect = "true (the made-up setting on) or false (off, the default)", .labels = {"flag-off", "flag-on"},
    .spec = {{"test_flag", WS_BOOL, offsetof(ws_engine, more[0].i), 0, WS_IF_SET}},
};
static int flag_axis = -1;
static char model_path[512];

#define BASE "\"name\": \"t\", \"model\": \"%s\", \"cache\": \"warm\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 4}"

/* Parses the scenario whose fields after BASE are rest; NULL with the errors in errs (the
 * caller frees them) when it is refused. */
static scenario *parse(const char *rest, sc_errors *errs) {
    char text[2048];
    snprintf(text, sizeof(text), "{" BASE "%s}", model_path, rest);
    scenario *s = NULL;
    sc_parse("t.json", text, tu_module_dir(), &s, errs);
    return s;
}

static scenario *parse_ok(const char *rest) {
    sc_errors e;
    scenario *s = parse(rest, &e);
    for (int i = 0; i < e.n; i++) fprintf(stderr, "unexpected: %s\n", e.v[i]);
    sc_errors_free(&e);
    assert_non_null(s);
    return s;
}

static void parse_fails(const char *rest, const char *want) {
    sc_errors e;
    assert_null(parse(rest, &e));
    int found = 0;
    for (int i = 0; i < e.n; i++) found |= strstr(e.v[i], want) != NULL;
    if (!found)
        for (int i = 0; i < e.n; i++) fprintf(stderr, "got: %s\n", e.v[i]);
    sc_errors_free(&e);
    assert_true(found);
}

/* Variant i's worker spec: whether it wrote test_flag, and the value the worker reads. */
static int spec_flag(const scenario *s, int i, int *written) {
    char *text = sc_engine_worker_spec(s, &s->variants[i]);
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "test_flag");
    *written = x != NULL;
    if (x) assert_true(cJSON_IsBool(x));
    ws_engine w;
    char err[256];
    assert_int_equal(ws_engine_read(j, &w, err, sizeof(err)), 0);
    int v = w.more[0].i;
    ws_engine_free(&w);
    cJSON_Delete(j);
    free(text);
    return v;
}

static void test_default_is_off_and_unnamed(void **state) {
    (void)state;
    TU_NEED(model_path[0]);
    scenario *s = parse_ok("");
    assert_int_equal(s->n_variants, 1);
    assert_string_equal(sc_pick(s, &s->variants[0], flag_axis)->name, "false");
    assert_string_equal(s->variants[0].key, "default");
    int written;
    assert_int_equal(spec_flag(s, 0, &written), 0);
    assert_int_equal(written, 0);
    sc_free(s);
}

static void test_fixed_on(void **state) {
    (void)state;
    TU_NEED(model_path[0]);
    static const char *const forms[] = {", \"test_flag\": true", ", \"matrix\": {\"fixed\": {\"test_flag\": true}}"};
    for (int f = 0; f < 2; f++) {
        scenario *s = parse_ok(forms[f]);
        assert_int_equal(s->n_variants, 1);
        assert_int_equal(sc_pick(s, &s->variants[0], flag_axis)->ival, 1);
        assert_string_equal(s->variants[0].key, "test_flag=flag-on");
        int written;
        assert_int_equal(spec_flag(s, 0, &written), 1);
        assert_int_equal(written, 1);
        sc_free(s);
    }
}

static void test_crossed(void **state) {
    (void)state;
    TU_NEED(model_path[0]);
    scenario *s = parse_ok(", \"matrix\": {\"loader\": [\"pread\", \"mmap\"], \"test_flag\": [true, false]}");
    assert_int_equal(s->n_variants, 4);
    /* the added axis is the last: it varies fastest, and the axes before keep their order */
    assert_string_equal(s->variants[0].key, "loader=pread,test_flag=flag-on");
    assert_string_equal(s->variants[1].key, "loader=pread,test_flag=flag-off");
    assert_string_equal(s->variants[3].key, "loader=mmap,test_flag=flag-off");
    int written;
    assert_int_equal(spec_flag(s, 0, &written), 1);
    assert_int_equal(spec_flag(s, 1, &written), 0);
    assert_int_equal(spec_flag(s, 2, &written), 1);
    char err[256];
    assert_int_equal(sc_select(s, "test_flag=flag-on", err, sizeof(err)), 0);
    assert_int_equal(sc_n_selected(s), 2);
    assert_true(s->variants[0].selected && !s->variants[1].selected && s->variants[2].selected);
    assert_int_equal(sc_select(s, "test_flagx=1", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "(have: loader, kv, alloc, cache, threads, device, workload, kernels, kv_cache, target, repack, "
                                "numerics, scratch, ubatch, test_flag)"));
    sc_free(s);
}

static void test_refused(void **state) {
    (void)state;
    TU_NEED(model_path[0]);
    parse_fails(", \"test_flag\": \"yes\"", ".test_flag: expected true (the made-up setting on) or false (off, the default), "
                                            "got \"yes\"");
    parse_fails(", \"matrix\": {\"test_flag\": [true, 1]}", ".matrix.test_flag[1]: expected true");
    parse_fails(", \"test_flag\": true, \"matrix\": {\"test_flag\": [false]}", "test_flag is given twice");
}

/* results.json's variant records: the made-up axis under its key, typed as its row says (a
 * boolean), beside the built-in axes' records as they always were; the schema takes them. */
static void test_results_record(void **state) {
    (void)state;
    TU_NEED(model_path[0]);
    scenario *s = parse_ok(", \"matrix\": {\"loader\": [\"pread\"], \"test_flag\": [true, false]}");
    rn_result res;
    memset(&res, 0, sizeof res);
    rs_input in = {.s = s, .res = &res, .status = "complete"};
    cJSON *doc = rs_head(&in), *schema = hjs_load("docs/results-schema.json");
    assert_true(doc && schema);
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(doc, "variants");
    assert_int_equal(cJSON_GetArraySize(vars), 2);
    for (int i = 0; i < 2; i++) {
        const cJSON *o = cJSON_GetArrayItem(vars, i);
        const cJSON *flag = cJSON_GetObjectItemCaseSensitive(o, "test_flag");
        assert_true(cJSON_IsBool(flag));
        assert_int_equal(cJSON_IsTrue(flag), i == 0);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "loader"), "name")->valuestring, "pread");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "kv"), "name")->valuestring, "prealloc");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "device"), "name")->valuestring, "cpu");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "cache")->valuestring, "warm");
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "threads")->valueint, 0);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "kv_cache")->valuestring, "f16");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "repack")));
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "target"), "name")->valuestring, "engine");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "kernels")->valuestring, kn_isa_resolve("auto"));
        assert_null(cJSON_GetObjectItemCaseSensitive(o, "workload"));
    }
    char err[1024] = "";
    /* the schema's variants, with the definitions its $refs name */
    cJSON *vschema = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(schema, "properties"), "variants"), 1);
    cJSON_AddItemToObject(vschema, "definitions", cJSON_DetachItemFromObjectCaseSensitive(schema, "definitions"));
    int bad = hjs_validate(vschema, vars, err, sizeof err);
    cJSON_Delete(vschema);
    if (bad) fail_msg("the variant records against the schema: %s", err);
    cJSON_Delete(doc);
    cJSON_Delete(schema);
    sc_free(s);
}

/* The table's lists are what users see: the keys, and rows it refuses to add. */
static void test_table(void **state) {
    (void)state;
    assert_int_equal(sc_axis_find("test_flag"), flag_axis);
    assert_string_equal(sc_axis_name(flag_axis), "test_flag");
    assert_non_null(strstr(sc_axis_list(), ", repack, numerics, scratch, ubatch, test_flag"));
    char err[256];
    sc_axis_def d = test_flag;
    assert_int_equal(sc_axis_add(&d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "the key is taken"));
    d.key = "nodef";
    d.def = NULL;
    assert_int_equal(sc_axis_add(&d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "needs a type and a default"));
    d.def = "false";
    d.spec[0].off = offsetof(ws_engine, repack);
    assert_int_equal(sc_axis_add(&d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not in ws_engine.more"));
    assert_int_equal(sc_axis_count(), SC_AX_COUNT + 1);
}

int main(void) {
    char err[256];
    if ((flag_axis = sc_axis_add(&test_flag, err, sizeof(err))) < 0) {
        fprintf(stderr, "sc_axis_add: %s\n", err);
        return 1;
    }
    /* without the model, the tests that parse a scenario skip */
    if (!tu_shared("models/stories260K.bin", model_path, sizeof(model_path))) model_path[0] = 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_is_off_and_unnamed),
        cmocka_unit_test(test_fixed_on),
        cmocka_unit_test(test_crossed),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_results_record),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
