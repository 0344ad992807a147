/* harness/net/prom: Prometheus' text format on two real bodies (bench serve's captured
 * /metrics, llama-server's written from its source: tests/fixtures/prom/README.md), on the
 * syntax's corners (escapes, blanks, timestamps, NaN and infinities, CRLF, no last newline),
 * and one malformed input per failure class, each with the line its error names; the bounds;
 * selectors as a scenario writes them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/net/prom.h"
#include "util/ut_fs.h"

static char *slurp(const char *path, size_t *len) {
    char err[256];
    char *t = ut_slurp(path, 1 << 20, len, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    return t;
}

static double value_of(const prom_doc *d, const char *name, const char *label, const char *lvalue) {
    prom_label sel = {label, lvalue};
    int i = prom_find(d, name, label ? &sel : NULL, label ? 1 : 0, 0);
    if (i < 0) fail_msg("no sample %s", name);
    return d->s[i].value;
}

/* ======================================================================
 * The two servers' bodies
 * ====================================================================== */

static void test_bench_serve_body(void **state) {
    (void)state;
    size_t len;
    char *t = slurp("tests/fixtures/prom/bench-serve.txt", &len), err[256] = "";
    prom_doc d;
    assert_int_equal(prom_parse(t, len, &d, err, sizeof(err)), 0);
    /* every line that is neither a comment nor blank is one sample */
    int lines = 0;
    for (char *p = t; p < t + len; p = strchr(p, '\n') + 1) {
        if (*p != '#' && *p != '\n') lines++;
        if (!strchr(p, '\n')) break;
    }
    assert_int_equal(d.n, lines);
    assert_true(value_of(&d, "bench:kv_cache_reserved_bytes", NULL, NULL) == 5242880);
    assert_true(value_of(&d, "bench:request_success_total", NULL, NULL) == 4);
    assert_true(value_of(&d, "bench:kv_cache_blocks", "state", "free") == 255);
    assert_true(value_of(&d, "bench:kv_cache_blocks", "state", "total") == 256);
    double sum = 0;
    assert_int_equal(prom_sum(&d, "bench:kv_cache_blocks", NULL, 0, &sum), 4);
    assert_true(sum == 256 + 0 + 1 + 255);
    int i = prom_find(&d, "bench:kv_cache_usage_ratio", NULL, 0, 0);
    assert_true(i >= 0);
    assert_int_equal(d.s[i].type, PROM_GAUGE);
    assert_string_equal(d.s[i].family, "bench:kv_cache_usage_ratio");
    assert_int_equal(d.s[i].n_labels, 0);
    /* a histogram's series carry its family and type; the last bucket is +Inf */
    prom_label inf = {"le", "+Inf"};
    i = prom_find(&d, "bench:time_to_first_token_seconds_bucket", &inf, 1, 0);
    assert_true(i >= 0);
    assert_string_equal(d.s[i].family, "bench:time_to_first_token_seconds");
    assert_int_equal(d.s[i].type, PROM_HISTOGRAM);
    assert_true(d.s[i].value == 4);
    i = prom_find(&d, "bench:time_to_first_token_seconds_count", NULL, 0, 0);
    assert_true(i >= 0 && d.s[i].type == PROM_HISTOGRAM && d.s[i].value == 4);
    i = prom_find(&d, "bench:time_to_first_token_seconds_sum", NULL, 0, 0);
    assert_true(i >= 0 && d.s[i].value > 0 && d.s[i].value < 1);
    assert_true(prom_find(&d, "bench:no_such_series", NULL, 0, 0) < 0);
    prom_free(&d);
    free(t);
}

static void test_llama_server_body(void **state) {
    (void)state;
    size_t len;
    char *t = slurp("tests/fixtures/prom/llama-server.txt", &len), err[256] = "";
    prom_doc d;
    assert_int_equal(prom_parse(t, len, &d, err, sizeof(err)), 0);
    assert_int_equal(d.n, 12);
    assert_true(value_of(&d, "llamacpp:kv_cache_usage_ratio", NULL, NULL) == 0.171875);
    assert_true(value_of(&d, "llamacpp:kv_cache_tokens", NULL, NULL) == 704);
    assert_true(value_of(&d, "llamacpp:requests_processing", NULL, NULL) == 3);
    assert_true(value_of(&d, "llamacpp:requests_deferred", NULL, NULL) == 1);
    assert_true(value_of(&d, "llamacpp:prompt_seconds_total", NULL, NULL) == 29.036);
    int i = prom_find(&d, "llamacpp:n_decode_total", NULL, 0, 0);
    assert_int_equal(d.s[i].type, PROM_COUNTER);
    assert_int_equal(d.s[i].line, 15);
    prom_free(&d);
    free(t);
}

/* ======================================================================
 * The syntax's corners
 * ====================================================================== */

static void test_syntax(void **state) {
    (void)state;
    static const char body[] =
        "# a comment\n"
        "#\n"
        "# HELP x_total with \\\\ and \\n escaped, and \"quotes\"\n"
        "# TYPE x_total counter\n"
        "x_total{path=\"/a\\\\b\",msg=\"say \\\"hi\\\"\\nbye\"} 3 1700000000123\n"
        "  x_total { path = \"/c\" , } \t-2.5e-3\r\n"
        "\n"
        "nan_gauge NaN\n"
        "pos +Inf\n"
        "neg -Inf\n"
        "bare Inf\n"
        "dot .5\n"
        "sum_like_sum 7\n"
        "empty{}7\n"
        "big 1e308 -12\n"
        "last{a=\"\"} 1";       /* no "\n" at the end */
    prom_doc d;
    char err[256] = "";
    assert_int_equal(prom_parse(body, sizeof(body) - 1, &d, err, sizeof(err)), 0);
    assert_int_equal(d.n, 11);
    const prom_sample *s = &d.s[0];
    assert_string_equal(s->name, "x_total");
    assert_int_equal(s->type, PROM_COUNTER);
    assert_int_equal(s->n_labels, 2);
    assert_string_equal(s->labels[0].name, "path");
    assert_string_equal(s->labels[0].value, "/a\\b");
    assert_string_equal(s->labels[1].value, "say \"hi\"\nbye");
    assert_true(s->value == 3 && s->has_ts && s->ts_ms == 1700000000123LL);
    assert_int_equal(s->line, 5);
    s = &d.s[1];
    assert_int_equal(s->n_labels, 1);
    assert_string_equal(s->labels[0].value, "/c");
    assert_true(s->value == -2.5e-3 && !s->has_ts);
    assert_true(isnan(d.s[2].value));
    assert_true(isinf(d.s[3].value) && d.s[3].value > 0);
    assert_true(isinf(d.s[4].value) && d.s[4].value < 0);
    assert_true(isinf(d.s[5].value) && d.s[5].value > 0);
    assert_true(d.s[6].value == 0.5);
    /* "_sum" without a summary or histogram family is a name like any other */
    assert_string_equal(d.s[7].family, "sum_like_sum");
    assert_int_equal(d.s[7].type, PROM_UNTYPED);
    assert_true(d.s[8].value == 7 && d.s[8].n_labels == 0);
    assert_true(d.s[9].value == 1e308 && d.s[9].ts_ms == -12);
    assert_string_equal(d.s[10].labels[0].value, "");
    assert_int_equal(d.s[10].line, 16);
    /* a label match needs every pair, in any order */
    prom_label both[] = {{"msg", "say \"hi\"\nbye"}, {"path", "/a\\b"}}, wrong[] = {{"path", "/c"}, {"msg", "x"}};
    assert_int_equal(prom_find(&d, "x_total", both, 2, 0), 0);
    assert_int_equal(prom_find(&d, "x_total", wrong, 2, 0), -1);
    assert_int_equal(prom_find(&d, "x_total", wrong, 1, 0), 1);
    assert_int_equal(prom_find(&d, "x_total", NULL, 0, 1), 1);
    prom_free(&d);

    /* a summary: quantiles under its name, _sum and _count */
    static const char summ[] = "# TYPE rpc summary\nrpc{quantile=\"0.5\"} 0.2\nrpc{quantile=\"0.99\"} 0.9\nrpc_sum 12\nrpc_count 40\n";
    assert_int_equal(prom_parse(summ, sizeof(summ) - 1, &d, err, sizeof(err)), 0);
    assert_int_equal(d.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(d.s[i].family, "rpc");
        assert_int_equal(d.s[i].type, PROM_SUMMARY);
    }
    prom_free(&d);

    /* nothing at all is a body with no samples */
    assert_int_equal(prom_parse("", 0, &d, err, sizeof(err)), 0);
    assert_int_equal(d.n, 0);
    prom_free(&d);
}

/* ======================================================================
 * One malformed input per failure class, with the line the error names
 * ====================================================================== */

static void test_malformed(void **state) {
    (void)state;
    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"ok 1\n9bad 1\n", "line 2: expected a metric name"},
        {"ok 1\nx\n", "line 2: x: the value is missing"},
        {"x one\n", "line 1: x: expected a number (e.g. 1, -2.5e-3, NaN, +Inf), got \"one\""},
        {"x 0x10\n", "got \"0x10\""},
        {"x infinity\n", "got \"infinity\""},
        {"x 1e\n", "got \"1e\""},
        {"x 1 2 3\n", "line 1: x: expected the end of the line after the timestamp"},
        {"x 1 1.5\n", "x: expected a timestamp (whole milliseconds) or the end of the line, got \"1.5\""},
        {"x 1 12345678901234567890\n", "expected a timestamp"},
        {"\n\nx{a=\"b\"\n", "line 3: label a: expected ',' or '}' after its value, got the end of the line"},
        {"x{a=b} 1\n", "label a: expected a value in double quotes, got 'b'"},
        {"x{a \"b\"} 1\n", "label a: expected '=' after its name, got '\"'"},
        {"x{a=\"b} 1\n", "label a: the value's closing '\"' is missing"},
        {"x{a=\"\\t\"} 1\n", "label a: unknown escape in the value"},
        {"x{a=\"1\",a=\"2\"} 1\n", "label a: given twice"},
        {"x{1a=\"1\"} 1\n", "expected a label name ([a-zA-Z_][a-zA-Z0-9_]*) or '}', got '1'"},
        {"x{a:b=\"1\"} 1\n", "label a: expected '=' after its name, got ':'"},
        {"x-y 1\n", "line 1: x: expected '{', a blank or the value after the name, got '-'"},
        {"# TYPE x gauge\n# TYPE x counter\n", "line 2: # TYPE x: a second TYPE line for that name"},
        {"# TYPE x meter\n", "line 1: # TYPE x: expected counter, gauge, histogram, summary or untyped, got \"meter\""},
        {"# TYPE x gauge extra\n", "expected the end of the line after the type"},
        {"# TYPE\n", "line 1: # TYPE: expected a metric name"},
        {"# HELP 1x text\n", "# HELP: expected a metric name"},
        {"# TYPE h histogram\nh_bucket 1\n", "line 2: h_bucket: a histogram's bucket needs an \"le\" label"},
        {"# TYPE h histogram\nh_bucket{le=\"big\"} 1\n", "needs an \"le\" label holding a number"},
        {"# TYPE h histogram\nh 1\n", "line 2: h: a histogram's samples are h_bucket, _sum and _count"},
        {"# TYPE s summary\ns 1\n", "line 2: s: a summary's quantiles need a \"quantile\" label"},
        {"x \x01\n", "got \"\\x01\""},
        {"ok 1\nx 1\x00\n", "line 2: a NUL byte"},
        {"x{a=\"1\"}\n", "line 1: x: the value is missing"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char err[512] = "";
        prom_doc d;
        /* the NUL case's length counts past its NUL */
        size_t len = strlen(bad[k].body);
        if (strstr(bad[k].msg, "NUL")) len = 10;
        int rc = prom_parse(bad[k].body, len, &d, err, sizeof(err));
        if (rc != -1 || !strstr(err, bad[k].msg))
            fail_msg("input %zu \"%s\": rc %d, err \"%s\", want \"%s\"", k, bad[k].body, rc, err, bad[k].msg);
        assert_int_equal(d.n, 0);
        assert_null(d.s);
        prom_free(&d);
    }
}

/* ======================================================================
 * Bounds
 * ====================================================================== */

static void test_bounds(void **state) {
    (void)state;
    char err[256] = "";
    prom_doc d;
    /* a line one byte past the limit, then one at it */
    size_t n = PROM_MAX_LINE + 1;
    char *b = malloc(n + 32);
    assert_non_null(b);
    memset(b, '#', n);
    memcpy(b + n, "\nx 1\n", 6);
    assert_int_equal(prom_parse(b, n + 5, &d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "line 1: longer than 65536 bytes"));
    assert_int_equal(prom_parse(b + 1, n + 4, &d, err, sizeof(err)), 0);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.s[0].line, 2);
    prom_free(&d);
    free(b);

    /* one label too many */
    size_t cap = 16 * (PROM_MAX_LABELS + 2);
    b = malloc(cap);
    assert_non_null(b);
    int o = snprintf(b, cap, "x{");
    for (int i = 0; i <= PROM_MAX_LABELS; i++) o += snprintf(b + o, cap - (size_t)o, "l%d=\"v\",", i);
    o += snprintf(b + o, cap - (size_t)o, "} 1\n");
    assert_int_equal(prom_parse(b, (size_t)o, &d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "line 1: more than 64 labels on one sample"));
    free(b);

    /* one sample too many */
    n = (size_t)(PROM_MAX_SAMPLES + 1) * 4;
    b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i += 4) memcpy(b + i, "a 1\n", 4);
    assert_int_equal(prom_parse(b, n, &d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "line 200001: more than 200000 samples"));
    assert_int_equal(prom_parse(b, n - 4, &d, err, sizeof(err)), 0);
    assert_int_equal(d.n, PROM_MAX_SAMPLES);
    prom_free(&d);
    free(b);

    /* the body's size is checked before anything is read */
    assert_int_equal(prom_parse("", (size_t)PROM_MAX_BODY + 1, &d, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "more than 16777216"));
}

/* ======================================================================
 * Selectors
 * ====================================================================== */

static void test_selector(void **state) {
    (void)state;
    char err[512] = "";
    prom_doc sel;
    assert_int_equal(prom_selector("vllm:num_requests_running", &sel, err, sizeof(err)), 0);
    assert_string_equal(sel.s[0].name, "vllm:num_requests_running");
    assert_int_equal(sel.s[0].n_labels, 0);
    prom_free(&sel);
    assert_int_equal(prom_selector("bench:kv_cache_blocks{state=\"free\"}", &sel, err, sizeof(err)), 0);
    assert_int_equal(sel.s[0].n_labels, 1);
    assert_string_equal(sel.s[0].labels[0].value, "free");
    prom_free(&sel);
    static const struct { const char *text, *msg; } bad[] = {
        {"", "expected a metric name"},
        {"a b", "\"a b\": expected a metric name, optionally with labels, and nothing after it"},
        {"x{state=free}", "\"x{state=free}\": label state: expected a value in double quotes"},
        {"x\ny", "expected a metric name"},
        {"9x", "\"9x\": expected a metric name"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        err[0] = 0;
        assert_int_equal(prom_selector(bad[k].text, &sel, err, sizeof(err)), -1);
        if (!strstr(err, bad[k].msg)) fail_msg("selector \"%s\": \"%s\", want \"%s\"", bad[k].text, err, bad[k].msg);
        assert_null(sel.s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_serve_body), cmocka_unit_test(test_llama_server_body), cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_malformed),        cmocka_unit_test(test_bounds),            cmocka_unit_test(test_selector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
