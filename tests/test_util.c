/* The utility layer (util/): mkdir -p, whole-file reads, the monotonic clock, the byte
 * buffer and typed-array growth, each on its edge cases. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/ut_buf.h"
#include "util/ut_clock.h"
#include "util/ut_fs.h"
#include "util/ut_term.h"
#include "util/ut_vec.h"

static char tmpdir[512];

static int setup(void **state) {
    (void)state;
    const char *base = getenv("BENCH_TMP") ? getenv("BENCH_TMP") : "/tmp";
    snprintf(tmpdir, sizeof(tmpdir), "%s/test_util.XXXXXX", base);
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_mkdirs_nested_and_existing(void **state) {
    (void)state;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/a/b/c", tmpdir);
    assert_int_equal(ut_mkdirs(p), 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(ut_mkdirs(p), 0);             /* already there: not an error */
    snprintf(p, sizeof(p), "%s/a/b/c/", tmpdir);   /* a trailing slash */
    assert_int_equal(ut_mkdirs(p), 0);
}

static void test_mkdirs_fails_on_a_file(void **state) {
    (void)state;
    char f[PATH_MAX], p[PATH_MAX + 8];
    snprintf(f, sizeof(f), "%s/file", tmpdir);
    FILE *fp = fopen(f, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(p, sizeof(p), "%s/sub", f);
    errno = 0;
    assert_int_equal(ut_mkdirs(p), -1);
    assert_int_equal(errno, ENOTDIR);
}

static void test_mkdirs_too_long(void **state) {
    (void)state;
    char *p = malloc(PATH_MAX + 10);
    assert_non_null(p);
    memset(p, 'x', PATH_MAX + 9);
    p[PATH_MAX + 9] = 0;
    errno = 0;
    assert_int_equal(ut_mkdirs(p), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    free(p);
}

static void test_slurp_contents_and_limits(void **state) {
    (void)state;
    char f[PATH_MAX], err[256] = "";
    snprintf(f, sizeof(f), "%s/data", tmpdir);
    /* larger than one read chunk (64 KiB), with a NUL inside */
    size_t n = 200000;
    unsigned char *want = malloc(n);
    assert_non_null(want);
    for (size_t i = 0; i < n; i++) want[i] = (unsigned char)(i * 7 + 3);
    want[10] = 0;
    FILE *fp = fopen(f, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(want, 1, n, fp), n);
    fclose(fp);
    size_t len = 0;
    char *got = ut_slurp(f, n, &len, err, sizeof(err));
    assert_non_null(got);
    assert_int_equal(len, n);
    assert_memory_equal(got, want, n);
    assert_int_equal(got[n], 0);
    free(got);
    assert_null(ut_slurp(f, n - 70000, &len, err, sizeof(err)));   /* over the limit */
    assert_non_null(strstr(err, "larger than"));
    free(want);
    snprintf(f, sizeof(f), "%s/missing", tmpdir);
    assert_null(ut_slurp(f, 100, NULL, err, sizeof(err)));
    assert_non_null(strstr(err, "missing"));
    /* an empty file is an empty string */
    snprintf(f, sizeof(f), "%s/empty", tmpdir);
    fp = fopen(f, "wb");
    assert_non_null(fp);
    fclose(fp);
    got = ut_slurp(f, 100, &len, err, sizeof(err));
    assert_non_null(got);
    assert_int_equal(len, 0);
    assert_string_equal(got, "");
    free(got);
}

static void test_clock_monotonic(void **state) {
    (void)state;
    int64_t a = ut_now_ns(), b = ut_now_ns();
    assert_true(a > 0 && b >= a);
}

static void test_buf(void **state) {
    (void)state;
    ut_buf b = {0};
    assert_int_equal(ut_buf_append(&b, "ab", 2), 0);
    assert_string_equal(b.p, "ab");
    for (int i = 0; i < 1000; i++) assert_int_equal(ut_buf_printf(&b, "%d,", i), 0);
    assert_int_equal(strncmp(b.p, "ab0,1,2,", 8), 0);
    assert_true(b.len < b.cap && b.p[b.len] == 0);
    assert_int_equal(ut_buf_append(&b, NULL, 0), 0);
    size_t len = b.len;
    char *s = ut_buf_take(&b);
    assert_int_equal(strlen(s), len);
    assert_null(b.p);
    assert_int_equal(b.len + b.cap, 0);
    free(s);
    s = ut_buf_take(&b);        /* empty: "" */
    assert_string_equal(s, "");
    free(s);
    assert_int_equal(ut_buf_reserve(&b, SIZE_MAX), -1);     /* unchanged on failure */
    assert_null(b.p);
    ut_buf_free(&b);
}

static void test_vec(void **state) {
    (void)state;
    double *v = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(UT_VEC_RESERVE(v, cap, n + 1), 0);
        v[n++] = i;
    }
    assert_true(cap >= 1000 && cap < 2048);
    for (int i = 0; i < n; i++) assert_true(v[i] == i);
    /* an int capacity past INT_MAX fails and leaves the array alone */
    double *keep = v;
    assert_int_equal(UT_VEC_RESERVE(v, cap, (size_t)INT_MAX + 1), -1);
    assert_ptr_equal(v, keep);
    assert_true(cap >= 1000 && cap < 2048);
    free(v);

    uint64_t *w = NULL;
    size_t wcap = 0;
    assert_int_equal(UT_VEC_RESERVE(w, wcap, 3), 0);
    assert_int_equal(wcap, 16);
    assert_int_equal(UT_VEC_RESERVE(w, wcap, 16), 0);   /* fits: no growth */
    assert_int_equal(wcap, 16);
    assert_int_equal(UT_VEC_RESERVE(w, wcap, SIZE_MAX / 4), -1);    /* the byte count overflows */
    assert_int_equal(wcap, 16);
    free(w);

    /* parallel arrays: one count, one capacity */
    double *pv = NULL;
    int32_t *pi = NULL;
    int pcap = 0;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(ut_vec_reserve_par(&pcap, (size_t)i + 1, 2, (void *[]){&pv, &pi}, (size_t[]){sizeof(*pv), sizeof(*pi)}), 0);
        pv[i] = i;
        pi[i] = -i;
    }
    assert_int_equal(pcap, 128);
    assert_true(pv[99] == 99 && pi[99] == -99);
    assert_int_equal(ut_vec_reserve_par(&pcap, (size_t)INT_MAX + 1, 2, (void *[]){&pv, &pi}, (size_t[]){sizeof(*pv), sizeof(*pi)}), -1);
    assert_int_equal(pcap, 128);
    free(pv);
    free(pi);

    assert_int_equal(ut_vec_next_cap(0, 1), 16);
    assert_int_equal(ut_vec_next_cap(16, 17), 32);
    assert_int_equal(ut_vec_next_cap(0, SIZE_MAX), 0);
}

/* es_term: C0, DEL and C1 controls escaped, in UTF-8 (C2 80..C2 9F) and as stray bytes;
 * printable UTF-8 whose continuation bytes fall in 0x80..0x9f kept whole; cut whole. */
static void test_term_escape(void **state) {
    (void)state;
    char out[256];
    assert_string_equal(es_term(out, sizeof(out), "a\x1b[31mb\x07\x7f"), "a\\x1b[31mb\\x07\\x7f");
    assert_string_equal(es_term(out, sizeof(out), "\xc2\x9b" "2J"), "\\xc2\\x9b2J");
    assert_string_equal(es_term(out, sizeof(out), "x\x9by"), "x\\x9by");
    /* é (C3 A9), € (E2 82 AC), 😀 (F0 9F 98 80), non-breaking space (C2 A0): as they are */
    assert_string_equal(es_term(out, sizeof(out), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xc2\xa0"),
                        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xc2\xa0");
    assert_string_equal(es_term(out, sizeof(out), "l1\nl2\t"), "l1\\x0al2\\x09");
    assert_string_equal(es_term_lines(out, sizeof(out), "l1\nl2\t\x1b"), "l1\nl2\t\\x1b");
    /* an escape that does not fit is left out whole, never cut to "\x1" */
    assert_string_equal(es_term(out, 6, "ab\x1b"), "ab");
    assert_string_equal(es_term(out, sizeof(out), NULL), "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mkdirs_nested_and_existing),
        cmocka_unit_test(test_mkdirs_fails_on_a_file),
        cmocka_unit_test(test_mkdirs_too_long),
        cmocka_unit_test(test_slurp_contents_and_limits),
        cmocka_unit_test(test_clock_monotonic),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_vec),
        cmocka_unit_test(test_term_escape),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
