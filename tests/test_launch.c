/* Nothing in a scenario runs unasked (harness/scenario/launch.h, target.h), through bench run,
 * exec and plan on a real model:
 *   - a launch given as a string (a shell line) is refused by the parser, and nothing runs;
 *   - a launch given as a list runs only with --allow-launch or an allow-list line that
 *     starts it; without them bench run and exec exit 2 naming it and how to allow it, and
 *     leave no results folder; an allow-list that others may write, or a link, is refused;
 *   - a placeholder's value is one argument however it is spelt (spaces, ;, $(...)), as the
 *     launched program sees it;
 *   - bench plan lists every launch and what allows it, and passes --allow-launch on;
 *   - an unknown placeholder and a timeout below 1 ms are refused, naming the field.
 * The "server" launched here is /bin/sh writing a file and exiting: the repetition fails
 * (it never becomes ready) and the file says whether it ran and with which arguments. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/testutil.h"
#include "util/ut_fs.h"

typedef struct fx {
    char tmp[512], model[600], tok[512], tokdir[512];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    *state = f;
    char src[512];
    if (!tu_shared("models/stories260K.bin", src, sizeof(src)) || !tu_shared("models/tok512.bin", f->tok, sizeof(f->tok)))
        return 0;
    char t[512];
    snprintf(t, sizeof(t), "%s", f->tok);
    snprintf(f->tokdir, sizeof(f->tokdir), "%s", dirname(t));
    if (!tu_tmpdir(f->tmp, sizeof(f->tmp))) return -1;
    /* the model under a name a shell would split and run: a placeholder's value is one word */
    snprintf(f->model, sizeof(f->model), "%s/m o;d$(touch SPLIT).bin", f->tmp);
    size_t n;
    char err[256];
    char *bytes = ut_slurp(src, 1 << 24, &n, err, sizeof(err));
    FILE *o = bytes ? fopen(f->model, "wb") : NULL;
    int ok = o && fwrite(bytes, 1, n, o) == n;
    if (o) fclose(o);
    free(bytes);
    if (!ok) return -1;
    /* no allow-list of the person running the tests applies here */
    char cfg[600];
    snprintf(cfg, sizeof(cfg), "%s/config", f->tmp);
    setenv("XDG_CONFIG_HOME", cfg, 1);
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f && f->tmp[0]) tu_rmtree(f->tmp);
    free(f);
    return 0;
}

#define NEED(f) TU_NEED((f)->tmp[0])

/* Writes scenario name.json in the temp folder: an http target whose launch is the JSON
 * text `launch`, and more keys of its http object in `extra`. Returns the path in sc. */
static void write_scenario(fx *f, const char *name, const char *launch, const char *extra, char *sc, size_t len) {
    snprintf(sc, len, "%s/%s.json", f->tmp, name);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o,
            "{\"name\": \"%s\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\",\n"
            " \"repetitions\": 1, \"warmup\": 0, \"threads\": 1, \"timeout_s\": 60,\n"
            " \"workload\": {\"prompt\": \"Once\", \"generate\": 4},\n"
            " \"target\": {\"label\": \"srv\", \"http\": {\"url\": \"http://127.0.0.1:{port}\", \"ready_timeout_s\": 20,\n"
            "   \"launch\": %s%s}}}\n",
            name, strrchr(f->model, '/') + 1, f->tok, launch, extra);
    fclose(o);
}

static int exists_in(const fx *f, const char *name) {
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", f->tmp, name);
    return access(p, F_OK) == 0;
}

/* bench CMD on sc from the temp folder (so that the launched shell writes there), its
 * stderr into log; returns the exit status. */
static int bench_in_tmp(fx *f, const char *cmd, const char *sc, const char *flags, const char *log) {
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(f->tmp), 0);
    int rc = tu_bench(NULL, "%s '%s' --allow-read '%s' %s >/dev/null 2>'%s'", cmd, sc, f->tokdir, flags, log);
    assert_int_equal(chdir(cwd), 0);
    return rc;
}

static char *slurp(const char *path) {
    char err[256];
    char *t = ut_slurp(path, 1 << 20, NULL, err, sizeof(err));
    if (!t) fail_msg("%s", err);
    return t;
}

static void expect_in(const char *path, const char *want) {
    char *t = slurp(path);
    if (!strstr(t, want)) fail_msg("%s lacks \"%s\"; it holds:\n%s", path, want, t);
    free(t);
}

static void test_string_launch_refused(void **state) {
    fx *f = *state;
    NEED(f);
    char sc[700], log[700];
    write_scenario(f, "shell", "\"id > PWNED\"", "", sc, sizeof(sc));
    snprintf(log, sizeof(log), "%s/shell.log", f->tmp);
    /* a string is a shell line, and no shell runs: refused before anything starts */
    assert_int_equal(bench_in_tmp(f, "run", sc, "--quick --out out_shell", log), 2);
    expect_in(log, ".target.http.launch: expected the command as a list of words");
    assert_false(exists_in(f, "PWNED"));
    assert_false(exists_in(f, "out_shell"));
}

static void test_launch_needs_leave(void **state) {
    fx *f = *state;
    NEED(f);
    char sc[700], log[700];
    write_scenario(f, "argv", "[\"/bin/sh\", \"-c\", \"id > PWNED\"]", "", sc, sizeof(sc));
    snprintf(log, sizeof(log), "%s/argv.log", f->tmp);
    assert_int_equal(bench_in_tmp(f, "run", sc, "--quick --out out_argv", log), 2);
    expect_in(log, "target srv would start a program: /bin/sh -c 'id > PWNED'");
    expect_in(log, "--allow-launch");
    assert_false(exists_in(f, "PWNED"));
    assert_false(exists_in(f, "out_argv"));
    /* bench exec runs the variant in its own process: the same gate */
    assert_int_equal(bench_in_tmp(f, "exec", sc, "", log), 2);
    expect_in(log, "would start a program");
    assert_false(exists_in(f, "PWNED"));
    /* with the leave it runs (the "server" exits at once: a failed repetition, status 1) */
    assert_int_equal(bench_in_tmp(f, "run", sc, "--quick --out out_argv --allow-launch", log), 1);
    assert_true(exists_in(f, "PWNED"));
    char p[700];
    snprintf(p, sizeof(p), "%s/PWNED", f->tmp);
    unlink(p);
}

static void write_allow_list(fx *f, const char *text, mode_t mode) {
    char d[700], p[800];
    snprintf(d, sizeof(d), "%s/config/bench", f->tmp);
    assert_int_equal(ut_mkdirs(d), 0);
    snprintf(p, sizeof(p), "%s/allow-launch", d);
    unlink(p);
    FILE *o = fopen(p, "w");
    assert_non_null(o);
    fputs(text, o);
    fclose(o);
    assert_int_equal(chmod(p, mode), 0);
}

static void test_allow_list(void **state) {
    fx *f = *state;
    NEED(f);
    char sc[700], log[700], p[700];
    write_scenario(f, "listed", "[\"/bin/sh\", \"-c\", \"echo ran > LISTED\"]", "", sc, sizeof(sc));
    snprintf(log, sizeof(log), "%s/listed.log", f->tmp);
    snprintf(p, sizeof(p), "%s/LISTED", f->tmp);
    /* a line that is not a prefix of the launch allows nothing */
    write_allow_list(f, "# servers I run\n/bin/sh -x\n{bench} serve\n", 0600);
    assert_int_equal(bench_in_tmp(f, "run", sc, "--quick --out out_l1", log), 2);
    assert_false(exists_in(f, "LISTED"));
    /* the launch's first words, as the scenario writes them */
    write_allow_list(f, "# servers I run\n  /bin/sh   -c  # any script\n", 0600);
    assert_int_equal(bench_in_tmp(f, "run", sc, "--quick --out out_l2", log), 1);
    assert_true(exists_in(f, "LISTED"));
    unlink(p);
    /* a list others may write is no one's word: refused by name, not half trusted */
    write_allow_list(f, "/bin/sh -c\n", 0664);
    assert_int_equal(bench_in_tmp(f, "run", sc, "--quick --out out_l3", log), 2);
    expect_in(log, "is not used: others than its owner may write it");
    assert_false(exists_in(f, "LISTED"));
    /* nor a link to a list */
    char real[800], link[800];
    snprintf(real, sizeof(real), "%s/real-list", f->tmp);
    snprintf(link, sizeof(link), "%s/config/bench/allow-launch", f->tmp);
    unlink(link);
    FILE *o = fopen(real, "w");
    assert_non_null(o);
    fputs("/bin/sh -c\n", o);
    fclose(o);
    assert_int_equal(chmod(real, 0600), 0);
    assert_int_equal(symlink(real, link), 0);
    assert_int_equal(bench_in_tmp(f, "run", sc, "--quick --out out_l4", log), 2);
    expect_in(log, "it is a symbolic link");
    assert_false(exists_in(f, "LISTED"));
    unlink(link);
}

static void test_placeholder_is_one_word(void **state) {
    fx *f = *state;
    NEED(f);
    char sc[700], log[700], p[700];
    write_scenario(f, "words", "[\"/bin/sh\", \"-c\", \"printf '%s\\\\n' \\\"$@\\\" > ARGS\", \"sh\", \"{model}\", \"--port={port}\"]", "",
                   sc, sizeof(sc));
    snprintf(log, sizeof(log), "%s/words.log", f->tmp);
    assert_int_equal(bench_in_tmp(f, "run", sc, "--quick --out out_words --allow-launch", log), 1);
    snprintf(p, sizeof(p), "%s/ARGS", f->tmp);
    char *t = slurp(p);
    /* two arguments: the model's path whole, then the port inside its word */
    char *nl = strchr(t, '\n');
    assert_non_null(nl);
    *nl = 0;
    assert_non_null(strstr(t, "/m o;d$(touch SPLIT).bin"));
    assert_int_equal(strncmp(nl + 1, "--port=", 7), 0);
    assert_true(atoi(nl + 8) > 0);
    assert_null(strchr(strchr(nl + 1, '\n') + 1, '\n'));
    free(t);
    assert_false(exists_in(f, "SPLIT"));
}

static void test_plan_lists_launches(void **state) {
    fx *f = *state;
    NEED(f);
    char sc[700], log[700], out[700];
    write_scenario(f, "plan", "[\"/bin/sh\", \"-c\", \"id > PWNED\", \"{model}\"]", "", sc, sizeof(sc));
    snprintf(log, sizeof(log), "%s/plan.log", f->tmp);
    for (int allow = 0; allow < 2; allow++) {
        snprintf(out, sizeof(out), "%s/plan%d.json", f->tmp, allow);
        char flags[800];
        snprintf(flags, sizeof(flags), "--shards 1 --out '%s'%s", out, allow ? " --allow-launch" : "");
        assert_int_equal(bench_in_tmp(f, "plan", sc, flags, log), 0);
        char *t = slurp(out);
        cJSON *j = cJSON_Parse(t);
        free(t);
        assert_non_null(j);
        const cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "launches"), 0);
        assert_non_null(l);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(l, "target")->valuestring, "srv");
        const cJSON *argv = cJSON_GetObjectItemCaseSensitive(l, "argv");
        assert_int_equal(cJSON_GetArraySize(argv), 4);
        assert_string_equal(cJSON_GetArrayItem(argv, 3)->valuestring, "{model}");
        const cJSON *by = cJSON_GetObjectItemCaseSensitive(l, "allowed_by");
        const char *cmd = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "plan"), 0),
                                                           "command")->valuestring;
        if (allow) {
            assert_string_equal(by->valuestring, "--allow-launch");
            assert_non_null(strstr(cmd, " --allow-launch"));
        } else {
            assert_true(cJSON_IsFalse(by));
            assert_null(strstr(cmd, "--allow-launch"));
            expect_in(log, "target srv starts /bin/sh -c 'id > PWNED' '{model}'");
        }
        cJSON_Delete(j);
    }
    assert_false(exists_in(f, "PWNED"));
}

static void test_launch_fields_checked(void **state) {
    fx *f = *state;
    NEED(f);
    static const struct {
        const char *launch, *extra, *want;
    } cases[] = {
        {"[\"x\", \"--m={modle}\"]", "", ".target.http.launch[1]: unknown placeholder {modle}"},
        {"[\"x\", \"\"]", "", ".target.http.launch[1]: expected a non-empty string"},
        {"[]", "", ".target.http.launch: expected a non-empty list of words"},
        {"[\"x\"]", ", \"request_timeout_s\": 0.0005", ".target.http.request_timeout_s: expected seconds, a number from 0.001"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char sc[700], log[700];
        write_scenario(f, "fields", cases[i].launch, cases[i].extra, sc, sizeof(sc));
        snprintf(log, sizeof(log), "%s/fields.log", f->tmp);
        assert_int_equal(bench_in_tmp(f, "plan", sc, "--shards 1", log), 2);
        expect_in(log, cases[i].want);
    }
    /* braces that are no placeholder (a JSON argument) pass */
    char sc[700], log[700];
    write_scenario(f, "braces", "[\"x\", \"{\\\"a\\\": 1}\", \"{Model}\"]", "", sc, sizeof(sc));
    snprintf(log, sizeof(log), "%s/braces.log", f->tmp);
    assert_int_equal(bench_in_tmp(f, "plan", sc, "--shards 1", log), 0);
}

/* bench sweep runs a bench run per point: it refuses a launching scenario once, before any
 * point, without --allow-launch; with it every point's run may start the server. */
static void test_sweep_gate(void **state) {
    fx *f = *state;
    NEED(f);
    char sc[700], log[700];
    snprintf(sc, sizeof(sc), "%s/sweep.json", f->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o,
            "{\"name\": \"sweep\", \"model\": {\"path\": \"%s\", \"tokenizer\": \"%s\"}, \"cache\": \"warm\",\n"
            " \"repetitions\": 1, \"warmup\": 0, \"threads\": 1, \"timeout_s\": 60,\n"
            " \"workload\": {\"requests\": {\"count\": 2, \"prompt_len\": {\"fixed\": 4}, \"output_len\": {\"fixed\": 2},\n"
            "   \"kv_budget\": {\"tokens\": 512}, \"targets\": {\"ttft_ms\": 500}, \"sweep\": {\"rates\": [1, 2]}}},\n"
            " \"target\": {\"label\": \"srv\", \"http\": {\"url\": \"http://127.0.0.1:{port}\", \"ready_timeout_s\": 20,\n"
            "   \"launch\": [\"/bin/sh\", \"-c\", \"echo x >> SWEPT\"]}}}\n",
            strrchr(f->model, '/') + 1, f->tok);
    fclose(o);
    snprintf(log, sizeof(log), "%s/sweep.log", f->tmp);
    assert_int_equal(bench_in_tmp(f, "sweep", sc, "--out out_sweep", log), 2);
    expect_in(log, "target srv would start a program");
    assert_false(exists_in(f, "SWEPT"));
    assert_false(exists_in(f, "out_sweep"));
    /* allowed: the points run (each fails: the "server" exits), and the launch ran */
    bench_in_tmp(f, "sweep", sc, "--out out_sweep2 --allow-launch", log);
    assert_true(exists_in(f, "SWEPT"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_launch_refused), cmocka_unit_test(test_launch_needs_leave),
        cmocka_unit_test(test_allow_list),            cmocka_unit_test(test_placeholder_is_one_word),
        cmocka_unit_test(test_plan_lists_launches),   cmocka_unit_test(test_launch_fields_checked),
        cmocka_unit_test(test_sweep_gate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
