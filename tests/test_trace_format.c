/* A trace format is one row of trace.c's table (harness/scenario/trace.h tr_format_def), and this
 * file is the guide to adding one: main() adds two made-up rows with tr_format_add, and the
 * generic reader reads them with no list edited:
 *   - "twocol": CSV "arrival_s,input_tokens", times in s, no output column (every request
 *     generates the row's output_tokens);
 *   - "lines": JSON Lines {"t": S, "in": N, "out": N}, no hash ids.
 * Each is read (times from the first row, lengths, the dropped rows), refused where it is
 * malformed with the file, line, column and field named by the row's own column names,
 * and listed with the built-in formats where a message or bench list names them. Rows the
 * reader cannot read are refused when they are added. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "harness/scenario/trace.h"

static const tr_format_def twocol = {
    .name = "twocol", .about = "a test's: arrival time and prompt length", .syntax = TR_CSV,
    .col = {"arrival_s", "input_tokens"}, .shape = "arrival_s,input_tokens", .unit = TR_TIME_S, .output_tokens = 16,
};
static const tr_format_def lines = {
    .name = "lines", .about = "a test's: JSON Lines in s", .syntax = TR_JSONL,
    .col = {"t", "in", "out"}, .shape = "{\"t\": S, \"in\": N, \"out\": N}", .unit = TR_TIME_S,
};
static int twocol_id = -1, lines_id = -1;

static tr_trace *parse(int f, const char *text, char *err, size_t errlen) {
    tr_trace *t = NULL;
    int rc = tr_parse("t.txt", text, strlen(text), (tr_format)f, NULL, &t, err, errlen);
    assert_int_equal(rc != 0, t == NULL);
    return t;
}

static void bad(int f, const char *text, const char *want1, const char *want2) {
    char err[512];
    tr_trace *t = parse(f, text, err, sizeof(err));
    assert_null(t);
    if (!strstr(err, want1) || (want2 && !strstr(err, want2))) fprintf(stderr, "got: %s\n", err);
    assert_non_null(strstr(err, want1));
    if (want2) assert_non_null(strstr(err, want2));
}

static void test_twocol_read(void **state) {
    (void)state;
    char err[512];
    /* a column order other than the row's, an extra column: found by the header's names */
    tr_trace *t = parse(twocol_id, "input_tokens,note,arrival_s\n100,a,10.5\n0,b,11\n200,c,12.25\n", err, sizeof(err));
    if (!t) fprintf(stderr, "%s\n", err);
    assert_non_null(t);
    assert_int_equal(t->format, twocol_id);
    assert_int_equal(t->timed, 1);
    assert_int_equal(t->block_tokens, 0);
    assert_int_equal(t->n, 2);
    assert_int_equal(t->dropped, 1);
    assert_true(t->r[0].t_s == 0 && t->r[1].t_s == 1.75);
    assert_int_equal(t->r[0].input, 100);
    assert_int_equal(t->r[1].input, 200);
    assert_int_equal(t->r[0].output, 16);
    assert_int_equal(t->r[1].output, 16);
    assert_int_equal(t->r[1].line, 4);
    assert_int_equal(t->n_hash, 0);
    tr_free(t);
}

static void test_twocol_refused(void **state) {
    (void)state;
    bad(twocol_id, "arrival_s,input_tokens\n0.5,1x\n", "t.txt:2:5: column \"input_tokens\" (field 2)", "\"1x\"");
    bad(twocol_id, "arrival_s,input_tokens\nsoon,5\n", "t.txt:2:1: column \"arrival_s\" (field 1)", "seconds");
    bad(twocol_id, "arrival_s,input_tokens\n2,5\n1,5\n", "t.txt:3:1:", "before the previous row");
    bad(twocol_id, "arrival_s,prompt\n1,5\n", "no column \"input_tokens\": expected a twocol header", "(arrival_s,input_tokens)");
    bad(twocol_id, "", "t.txt: empty: expected a twocol header (arrival_s,input_tokens)", NULL);
}

static void test_lines_read(void **state) {
    (void)state;
    char err[512];
    tr_trace *t = parse(lines_id, "{\"t\": 3, \"in\": 7, \"out\": 2}\n\n{\"t\": 4.5, \"in\": 9, \"out\": 1}\n", err, sizeof(err));
    if (!t) fprintf(stderr, "%s\n", err);
    assert_non_null(t);
    assert_int_equal(t->n, 2);
    assert_true(t->r[0].t_s == 0 && t->r[1].t_s == 1.5);
    assert_true(t->r[1].input == 9 && t->r[1].output == 1 && t->r[1].n_hash == 0);
    tr_free(t);
    bad(lines_id, "{\"t\": 3, \"in\": 7}\n", "t.txt:1:1: field \"out\"", "missing");
    bad(lines_id, "{\"t\": \"x\", \"in\": 7, \"out\": 1}\n", "t.txt:1:2: field \"t\": expected s from the trace's start", NULL);
    bad(lines_id, "[1]\n", "expected a JSON object", NULL);
    bad(lines_id, "{\"t\": 1e10, \"in\": 7, \"out\": 1}\n", "field \"t\": 1e+10 s: expected at most 1e+09 s", NULL);
}

/* The names every message and bench list take are the table's: the made-up rows' too. */
static void test_names_from_table(void **state) {
    (void)state;
    assert_int_equal(tr_format_from_name("twocol"), twocol_id);
    assert_string_equal(tr_format_name((tr_format)lines_id), "lines");
    assert_string_equal(tr_format_list(), "mooncake, azure, burstgpt, sharegpt, twocol, lines");
    assert_int_equal(tr_format_count(), TR_FORMAT_BUILTIN + 2);
    assert_string_equal(tr_format_get((tr_format)twocol_id)->about, twocol.about);
    assert_null(tr_format_get((tr_format)tr_format_count()));
    char err[512];
    assert_null(parse(tr_format_count(), "x\n", err, sizeof(err)));
    assert_non_null(strstr(err, "expected one of mooncake, azure, burstgpt, sharegpt, twocol, lines"));
}

/* A row the reader cannot read is refused when it is added, not when a file is read. */
static void test_add_refused(void **state) {
    (void)state;
    char err[256];
    tr_format_def d = twocol;
    assert_int_equal(tr_format_add(&d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "\"twocol\": the name is taken"));
    d.name = "noout";
    d.output_tokens = 0;
    assert_int_equal(tr_format_add(&d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "no output column and no output_tokens"));
    d = lines;
    d.name = "csvhash";
    d.syntax = TR_CSV;
    d.col[TR_COL_HASH] = "ids";
    d.block_tokens = 16;
    assert_int_equal(tr_format_add(&d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "hash ids are read from JSON Lines"));
    assert_int_equal(tr_format_count(), TR_FORMAT_BUILTIN + 2);
}

int main(void) {
    char err[256];
    twocol_id = tr_format_add(&twocol, err, sizeof(err));
    lines_id = tr_format_add(&lines, err, sizeof(err));
    if (twocol_id < 0 || lines_id < 0) {
        fprintf(stderr, "tr_format_add: %s\n", err);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twocol_read),
        cmocka_unit_test(test_twocol_refused),
        cmocka_unit_test(test_lines_read),
        cmocka_unit_test(test_names_from_table),
        cmocka_unit_test(test_add_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
