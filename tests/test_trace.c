/* Recorded traces (harness/scenario/trace.h) on the real samples of <shared>/thirdparty/traces:
 *   - each format: the row count, the lengths of known rows, the times in s from the first
 *     row (Mooncake ms, Azure's absolute times, BurstGPT's s), the README's means;
 *   - Mooncake's hash ids kept per row: ceil(input / 512) of them, and shared ids (id 0
 *     starts most conversation rows);
 *   - BurstGPT's failed rows (0 tokens) dropped and counted;
 *   - the window: the first N rows, the first S seconds;
 *   - malformed rows, one per failure class: the file, the line, the column and the field
 *     in the message, and no trace;
 *   - calendar dates (days per month, leap years), lone-CR line ends read as lines, and
 *     timestamps past TR_MAX_SECONDS refused where they are read.
 * Skips, naming the file, without the shared samples. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/scenario/trace.h"
#include "tests/lib/testutil.h"

static tr_trace *load(const char *rel, tr_format f, const tr_window *w) {
    char path[1024], err[1024];
    if (!tu_shared(rel, path, sizeof(path))) return NULL;
    tr_trace *t = NULL;
    int rc = tr_read(path, f, w, &t, err, sizeof(err));
    if (rc) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_non_null(t);
    return t;
}

static double mean_in(const tr_trace *t) {
    double s = 0;
    for (int i = 0; i < t->n; i++) s += t->r[i].input;
    return s / t->n;
}

static double mean_out(const tr_trace *t) {
    double s = 0;
    for (int i = 0; i < t->n; i++) s += t->r[i].output;
    return s / t->n;
}

static void test_mooncake(void **state) {
    tr_trace *t = load("thirdparty/traces/conversation_trace.head2000.jsonl", TR_MOONCAKE, NULL);
    TU_NEED(t);
    assert_int_equal(t->n, 2000);
    assert_int_equal(t->dropped, 0);
    assert_int_equal(t->block_tokens, 512);
    assert_true(t->timed);
    /* the first rows: {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, .. 13]} */
    assert_int_equal(t->r[0].input, 6758);
    assert_int_equal(t->r[0].output, 500);
    assert_int_equal(t->r[0].n_hash, 14);
    for (int k = 0; k < 14; k++) assert_int_equal(t->hash[t->r[0].hash_at + k], k);
    assert_int_equal(t->r[1].input, 7322);
    assert_int_equal(t->hash[t->r[1].hash_at], 0);         /* shares block 0 with row 0 */
    assert_int_equal(t->hash[t->r[1].hash_at + 1], 14);
    /* README: 0 -> 669000 ms; input mean 13,720.9, output mean 352.3 */
    assert_float_equal(t->r[t->n - 1].t_s, 669.0, 1e-9);
    assert_float_equal(mean_in(t), 13720.9, 0.05);
    assert_float_equal(mean_out(t), 352.3, 0.05);
    size_t ids = 0;
    for (int i = 0; i < t->n; i++) {
        assert_int_equal(t->r[i].n_hash, (t->r[i].input + 511) / 512);
        assert_int_equal(t->r[i].hash_at, ids);
        ids += (size_t)t->r[i].n_hash;
        if (i) assert_true(t->r[i].t_s >= t->r[i - 1].t_s);
    }
    assert_int_equal(ids, 54559);   /* README: block occurrences */
    assert_int_equal(t->n_hash, 54559);
    tr_free(t);
    t = load("thirdparty/traces/synthetic_trace.head2000.jsonl", TR_MOONCAKE, NULL);
    assert_int_equal(t->n, 2000);
    assert_float_equal(t->r[t->n - 1].t_s, 532.806, 1e-9);
    assert_float_equal(mean_in(t), 12366.4, 0.05);
    assert_int_equal(t->n_hash, 49580);
    tr_free(t);
}

static void test_azure(void **state) {
    tr_trace *t = load("thirdparty/traces/AzureLLMInferenceTrace_code.csv", TR_AZURE, NULL);
    TU_NEED(t);
    assert_int_equal(t->n, 8819);
    assert_int_equal(t->r[0].input, 4808);
    assert_int_equal(t->r[0].output, 10);
    assert_int_equal(t->r[0].n_hash, 0);
    /* 18:17:03.9799600 -> 18:17:04.0319600 */
    assert_float_equal(t->r[1].t_s, 0.052, 1e-9);     /* the 100 ns digits kept */
    /* README: 3,435.9 s; ContextTokens mean 2,047.8, GeneratedTokens 27.9 */
    assert_float_equal(t->r[t->n - 1].t_s, 3435.9, 0.05);
    assert_float_equal(mean_in(t), 2047.8, 0.05);
    assert_float_equal(mean_out(t), 27.9, 0.05);
    tr_free(t);
    t = load("thirdparty/traces/AzureLLMInferenceTrace_conv.csv", TR_AZURE, NULL);
    assert_int_equal(t->n, 19366);
    assert_float_equal(t->r[t->n - 1].t_s, 3501.7, 0.05);
    assert_float_equal(mean_in(t), 1154.7, 0.05);
    assert_float_equal(mean_out(t), 211.1, 0.05);
    tr_free(t);
}

static void test_burstgpt(void **state) {
    tr_trace *t = load("thirdparty/traces/BurstGPT_1.head400.csv", TR_BURSTGPT, NULL);
    TU_NEED(t);
    /* README: 17 rows of 0 request and 0 response tokens (failed requests) */
    assert_int_equal(t->n, 383);
    assert_int_equal(t->dropped, 17);
    assert_int_equal(t->r[0].input, 472);
    assert_int_equal(t->r[0].output, 18);
    assert_float_equal(t->r[1].t_s, 40.0, 1e-9);    /* 45 - 5 */
    assert_float_equal(t->r[2].t_s, 113.0, 1e-9);
    /* README, without the zero rows: request mean 543.6, response 288.8 */
    assert_float_equal(mean_in(t), 543.6, 0.05);
    assert_float_equal(mean_out(t), 288.8, 0.05);
    assert_float_equal(t->r[t->n - 1].t_s, 37274.0 - 5.0, 1e-9);
    tr_free(t);
}

static void test_sharegpt(void **state) {
    tr_trace *t = load("thirdparty/traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv", TR_SHAREGPT, NULL);
    TU_NEED(t);
    assert_int_equal(t->n, 30731);
    assert_false(t->timed);
    assert_int_equal(t->r[0].input, 74);
    assert_int_equal(t->r[0].output, 918);
    assert_float_equal(mean_in(t), 2340.0, 0.05);
    assert_float_equal(mean_out(t), 438.7, 0.05);
    for (int i = 0; i < t->n; i++) assert_true(t->r[i].t_s == 0);
    tr_free(t);
}

static void test_window(void **state) {
    tr_window w = {.max_requests = 100};
    tr_trace *t = load("thirdparty/traces/conversation_trace.head2000.jsonl", TR_MOONCAKE, &w);
    TU_NEED(t);
    assert_int_equal(t->n, 100);
    size_t ids = 0;
    for (int i = 0; i < 100; i++) ids += (size_t)t->r[i].n_hash;
    assert_int_equal(t->n_hash, ids);
    tr_free(t);
    w = (tr_window){.max_seconds = 60};
    t = load("thirdparty/traces/AzureLLMInferenceTrace_conv.csv", TR_AZURE, &w);
    assert_true(t->n > 10 && t->n < 19366);
    assert_true(t->r[t->n - 1].t_s <= 60);
    tr_free(t);
    /* both: whichever ends first */
    w = (tr_window){.max_requests = 5, .max_seconds = 1e6};
    t = load("thirdparty/traces/BurstGPT_1.head400.csv", TR_BURSTGPT, &w);
    assert_int_equal(t->n, 5);
    tr_free(t);
}

/* Parses text as format f and expects a failure whose message contains every string given. */
static void bad(tr_format f, const char *text, ...) {
    char err[1024] = "";
    tr_trace *t = (tr_trace *)1;
    assert_int_equal(tr_parse("t.csv", text, strlen(text), f, NULL, &t, err, sizeof(err)), -1);
    assert_null(t);
    va_list ap;
    va_start(ap, text);
    for (const char *want; (want = va_arg(ap, const char *));) {
        if (!strstr(err, want)) fprintf(stderr, "message \"%s\" lacks \"%s\"\n", err, want);
        assert_non_null(strstr(err, want));
    }
    va_end(ap);
}

static void test_malformed(void **state) {
    const char *az = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n";
    char buf[512];
    /* a letter in a length: line 3, column of the field */
    snprintf(buf, sizeof(buf), "%s2023-11-16 18:17:04.0319600,31a0,8\r\n", az);
    bad(TR_AZURE, buf, "t.csv:3:29:", "column \"ContextTokens\" (field 2)", "expected an integer", "\"31a0\"", NULL);
    snprintf(buf, sizeof(buf), "%s2023-11-16 18:17:04.0319600,3180,-8\r\n", az);
    bad(TR_AZURE, buf, "t.csv:3:34:", "GeneratedTokens", "\"-8\"", NULL);
    snprintf(buf, sizeof(buf), "%s2023-11-16 25:17:04.03,3180,8\r\n", az);
    bad(TR_AZURE, buf, "t.csv:3:1:", "column \"TIMESTAMP\"", "YYYY-MM-DD HH:MM:SS", NULL);
    snprintf(buf, sizeof(buf), "%s2023-11-16 18:17:04.03,3180\r\n", az);
    bad(TR_AZURE, buf, "t.csv:3:", "2 fields: expected 3", NULL);
    snprintf(buf, sizeof(buf), "%s2023-11-16 18:17:04.03,3180,8,9\r\n", az);
    bad(TR_AZURE, buf, "t.csv:3:30:", "4 fields: expected 3", NULL);
    snprintf(buf, sizeof(buf), "%s2023-11-16 18:17:02.00,3180,8\r\n", az);
    bad(TR_AZURE, buf, "t.csv:3:1:", "before the previous row", NULL);
    /* the wrong header: another format's file */
    bad(TR_AZURE, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n",
        "t.csv:1:1:", "no column \"TIMESTAMP\"", "azure", NULL);
    bad(TR_BURSTGPT, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\nfive,ChatGPT,472,18,490,x\n",
        "t.csv:2:1:", "column \"Timestamp\" (field 1)", "seconds", NULL);
    bad(TR_SHAREGPT, "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n74,918,992,0.08\n290,,1195,0.3\n",
        "t.csv:3:5:", "column \"num_decode_tokens\" (field 2)", "got \"\"", NULL);
    bad(TR_SHAREGPT, "", "t.csv: empty", NULL);
    bad(TR_BURSTGPT, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,0,0,0,x\n",
        "no requests", "1 rows of 0 input or output tokens dropped", NULL);
    /* Mooncake */
    const char *ok = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n";
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0]}\n", ok);
    bad(TR_MOONCAKE, buf, "t.csv:2:59:", "\"hash_ids\": 1 ids for input_length 600", "ceil(600 / 512) = 2", NULL);
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": 5, \"input_length\": 6.5, \"output_length\": 5, \"hash_ids\": [0]}\n", ok);
    bad(TR_MOONCAKE, buf, "t.csv:2:18:", "field \"input_length\"", "integer", NULL);
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": 5, \"output_length\": 5, \"hash_ids\": [0]}\n", ok);
    bad(TR_MOONCAKE, buf, "t.csv:2:1:", "field \"input_length\"", "missing", NULL);
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": \"5\", \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}\n", ok);
    bad(TR_MOONCAKE, buf, "t.csv:2:2:", "field \"timestamp\"", "a string", NULL);
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": 5, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [-1]}\n", ok);
    bad(TR_MOONCAKE, buf, "t.csv:2:", "\"hash_ids\"[0]", NULL);
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": 5, \"input_length\": 6,, \"output_length\": 5}\n", ok);
    bad(TR_MOONCAKE, buf, "t.csv:2:", "not a JSON object", NULL);
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": 5, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]} x\n", ok);
    bad(TR_MOONCAKE, buf, "t.csv:2:74:", "text after the JSON object", NULL);
    /* a missing file */
    char err[512];
    tr_trace *t = NULL;
    assert_int_equal(tr_read("/nonexistent/trace.jsonl", TR_MOONCAKE, NULL, &t, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/nonexistent/trace.jsonl"));
    assert_null(t);
    /* the names */
    assert_int_equal(tr_format_from_name("azure"), TR_AZURE);
    assert_int_equal(tr_format_from_name("Azure"), -1);
    assert_string_equal(tr_format_name(TR_BURSTGPT), "burstgpt");
}

/* Dates are calendar dates: days per month, leap years (2023-02-31 was read as 3 March). */
static void test_calendar(void **state) {
    (void)state;
    const char *hd = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-01 00:00:00,10,2\n";
    char buf[256];
    snprintf(buf, sizeof(buf), "%s2023-02-31 00:00:00,10,2\n", hd);
    bad(TR_AZURE, buf, "t.csv:3:1:", "column \"TIMESTAMP\" (field 1)", "a day 01 .. 28 (2023-02 has 28 days)", "\"2023-02-31 00:00:00\"", NULL);
    snprintf(buf, sizeof(buf), "%s2023-02-29 00:00:00,10,2\n", hd);
    bad(TR_AZURE, buf, "t.csv:3:1:", "2023-02 has 28 days", NULL);
    snprintf(buf, sizeof(buf), "%s2023-04-31 00:00:00,10,2\n", hd);
    bad(TR_AZURE, buf, "t.csv:3:1:", "2023-04 has 30 days", NULL);
    snprintf(buf, sizeof(buf), "%s2023-13-01 00:00:00,10,2\n", hd);
    bad(TR_AZURE, buf, "t.csv:3:1:", "month 01 .. 12", NULL);
    snprintf(buf, sizeof(buf), "%s2023-02-00 00:00:00,10,2\n", hd);
    bad(TR_AZURE, buf, "t.csv:3:1:", "a day 01 .. 28", NULL);
    /* leap years: 2024 and 2000 have 29 February, 1900 and 2100 do not */
    const char *leap[] = {"2024", "2000"}, *plain[] = {"1900", "2100"};
    for (int i = 0; i < 2; i++) {
        char err[512];
        tr_trace *t = NULL;
        snprintf(buf, sizeof(buf), "TIMESTAMP,ContextTokens,GeneratedTokens\n%s-02-28 23:59:59,10,2\n%s-02-29 00:00:01,10,2\n"
                 "%s-03-01 00:00:01,10,2\n", leap[i], leap[i], leap[i]);
        assert_int_equal(tr_parse("t.csv", buf, strlen(buf), TR_AZURE, NULL, &t, err, sizeof(err)), 0);
        assert_int_equal(t->n, 3);
        assert_true(fabs(t->r[1].t_s - 2) < 1e-9);
        assert_true(fabs(t->r[2].t_s - 86402) < 1e-9);     /* a day after 29 February */
        tr_free(t);
        snprintf(buf, sizeof(buf), "TIMESTAMP,ContextTokens,GeneratedTokens\n%s-02-28 23:59:59,10,2\n%s-02-29 00:00:01,10,2\n",
                 plain[i], plain[i]);
        bad(TR_AZURE, buf, "t.csv:3:1:", "has 28 days", NULL);
    }
}

/* A lone CR ends a line, as LF and CR LF do (it gave "no column GeneratedTokens": the
 * whole file was one header line). */
static void test_cr_line_ends(void **state) {
    (void)state;
    const char *cr = "TIMESTAMP,ContextTokens,GeneratedTokens\r2023-11-16 18:17:03.5,4808,10\r2023-11-16 18:17:04,31,8\r";
    char err[512] = "";
    tr_trace *t = NULL;
    int rc = tr_parse("t.csv", cr, strlen(cr), TR_AZURE, NULL, &t, err, sizeof(err));
    if (rc) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(t->n, 2);
    assert_int_equal(t->r[1].input, 31);
    assert_int_equal(t->r[1].line, 3);
    assert_true(fabs(t->r[1].t_s - 0.5) < 1e-9);
    tr_free(t);
    /* line numbers count CR lines, mixed with CR LF and LF */
    bad(TR_BURSTGPT, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\r\n1,a,2,3,5,x\r2,a,2,3,5,x\n3,a,x,3,5,x\r",
        "t.csv:4:5:", "column \"Request tokens\"", NULL);
    const char *mc = "{\"timestamp\": 0, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}\r"
                     "{\"timestamp\": 9, \"input_length\": 7, \"output_length\": 5, \"hash_ids\": [1]}\r";
    assert_int_equal(tr_parse("t.jsonl", mc, strlen(mc), TR_MOONCAKE, NULL, &t, err, sizeof(err)), 0);
    assert_int_equal(t->n, 2);
    assert_int_equal(t->r[1].input, 7);
    tr_free(t);
}

/* A timestamp past TR_MAX_SECONDS fails where it is read, with the file, line and column
 * (1e12 s passed bench plan and failed in the worker; 1e10 s would overflow int64 ns
 * once scaled). */
static void test_time_bound(void **state) {
    (void)state;
    char buf[512];
    const char *ok = "{\"timestamp\": 0, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}\n";
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": 1e15, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}\n", ok);
    bad(TR_MOONCAKE, buf, "t.csv:2:2:", "field \"timestamp\": 1e+15 ms", "at most 1e+12 ms", NULL);
    /* the bound itself is a timestamp */
    snprintf(buf, sizeof(buf), "%s{\"timestamp\": 1e12, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}\n", ok);
    char err[512];
    tr_trace *t = NULL;
    assert_int_equal(tr_parse("t.csv", buf, strlen(buf), TR_MOONCAKE, NULL, &t, err, sizeof(err)), 0);
    assert_true(t->r[1].t_s == TR_MAX_SECONDS);
    tr_free(t);
    const char *bg = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,x\n";
    snprintf(buf, sizeof(buf), "%s1e12,ChatGPT,472,18,490,x\n", bg);
    bad(TR_BURSTGPT, buf, "t.csv:3:1:", "column \"Timestamp\" (field 1)", "\"1e12\" is 1e+12 s", "at most 1e+09 s", NULL);
    snprintf(buf, sizeof(buf), "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,48,10\n9999-11-16 18:17:04,31,8\n");
    bad(TR_AZURE, buf, "t.csv:3:1:", "column \"TIMESTAMP\"", "from the first row's day", "at most 1e+09 s", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mooncake),
        cmocka_unit_test(test_azure),
        cmocka_unit_test(test_burstgpt),
        cmocka_unit_test(test_sharegpt),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_calendar),
        cmocka_unit_test(test_cr_line_ends),
        cmocka_unit_test(test_time_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
