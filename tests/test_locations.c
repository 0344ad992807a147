/* Where bench writes, run from a directory that is not its checkout (issue 16): results
 * under $BENCH_RESULTS or the checkout's results/, never under the current directory; the
 * synth model cache under $XDG_CACHE_HOME/bench, made once and reused; the commit the
 * binary was built from; and --out refusing a folder that holds a run unless --force,
 * which empties it first. Runs real repetitions of a tiny synth model. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/report/locations.h"
#include "harness/report/rmodel.h"
#include "tests/lib/testutil.h"

static char tmp[512], sc[700], elsewhere[700], bin[PATH_MAX];
/* set when the build recorded no commit: the commit checks are skipped, naming git */
static int git_missing;

static int setup(void **state) {
    (void)state;
    if (!tu_tmpdir(tmp, sizeof(tmp))) return -1;
    const char *b = getenv("BENCH_BIN");
    if (!realpath(b ? b : "build/asan/bench", bin)) return -1;
    snprintf(sc, sizeof(sc), "%s/loc.json", tmp);
    snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", tmp);
    mkdir(elsewhere, 0777);
    FILE *o = fopen(sc, "w");
    if (!o) return -1;
    /* a scenario name of its own: its folder under the checkout's results/ is removed at the end */
    fprintf(o, "{\"name\": \"test_locations_%d\", \"model\": {\"synth\": {\"shape\": \"tiny\", \"seed\": 3}},"
               " \"workload\": {\"prompt_tokens\": 4, \"generate\": 4, \"seed\": 1}, \"cache\": \"warm\","
               " \"repetitions\": 1, \"warmup\": 0, \"threads\": 1, \"matrix\": {\"loader\": [\"mmap\"]}}",
            (int)getpid());
    return fclose(o);
}

static int teardown(void **state) {
    (void)state;
    tu_rmtree(tmp);
    return 0;
}

/* bench run from `elsewhere` with env settings in front; returns its exit status */
static int run_from_elsewhere(const char *env, const char *args, const char *log) {
    char cmd[6000];
    if (snprintf(cmd, sizeof(cmd), "cd '%s' && env -u BENCH_RESULTS -u BENCH_MODEL_CACHE %s '%s' run '%s' %s >'%s' 2>&1",
                 elsewhere, env, bin, sc, args, log) >= (int)sizeof(cmd))
        return -1;
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static int file_has(const char *path, const char *needle) {
    char err[256];
    char *t = rr_slurp(path, NULL, err, sizeof(err));
    int found = t && strstr(t, needle);
    free(t);
    return found;
}

/* the one folder under dir (a run's), into out; 0 when there is exactly one */
static int only_entry(const char *dir, char *out, size_t len) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(out, len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    return n == 1 ? 0 : -1;
}

static void test_results_and_cache_from_another_directory(void **state) {
    (void)state;
    char env[2000], log[800], res[800], xdg[800], model[900], run_dir[1200], name[128];
    snprintf(log, sizeof(log), "%s/run.log", tmp);
    snprintf(res, sizeof(res), "%s/res", tmp);
    snprintf(xdg, sizeof(xdg), "%s/xdg", tmp);
    snprintf(name, sizeof(name), "test_locations_%d", (int)getpid());
    snprintf(model, sizeof(model), "%s/bench/tiny-f32-s3.gguf", xdg);

    /* $BENCH_RESULTS, and the model made into $XDG_CACHE_HOME/bench */
    snprintf(env, sizeof(env), "BENCH_RESULTS='%s' XDG_CACHE_HOME='%s'", res, xdg);
    assert_int_equal(run_from_elsewhere(env, "", log), 0);
    /* the table's footer says what one repetition can show, and how to get more */
    assert_true(file_has(log, "1 repetition per variant"));
    assert_true(file_has(log, "--repeat"));
    struct stat st, st2;
    assert_int_equal(stat(model, &st), 0);
    char sub[1000];
    snprintf(sub, sizeof(sub), "%s/%s", res, name);
    assert_int_equal(only_entry(sub, run_dir, sizeof(run_dir)), 0);
    char rj[1300];
    snprintf(rj, sizeof(rj), "%s/results.json", run_dir);
    assert_int_equal(stat(rj, &st2), 0);
    /* nothing under the directory it ran from */
    char stray[900];
    snprintf(stray, sizeof(stray), "%s/results", elsewhere);
    assert_int_not_equal(stat(stray, &st2), 0);

    /* the commit is the build's, though the run's directory is no git checkout */
    rr_doc d;
    char err[512];
    assert_int_equal(rr_load(run_dir, &d, err, sizeof(err)), 0);
    assert_non_null(strstr(run_dir, "Z-"));
    if (!loc_commit_sha()[0]) {
        /* built where git is missing (or outside a checkout): no commit, said so, and the
         * folder is <time>-nogit; the rest of this test does not depend on git */
        int no_sha = !d.sha[0];
        rr_free(&d);
        assert_true(no_sha);
        assert_non_null(strstr(strstr(run_dir, "Z-"), "nogit"));
        git_missing = 1;
    } else {
        assert_int_equal((int)strlen(d.sha), 40);
        /* the folder is named after the same commit: <time>-<sha7>[-dirty] */
        char sha7[8];
        snprintf(sha7, sizeof(sha7), "%.7s", d.sha);
        int named = strstr(strstr(run_dir, "Z-"), sha7) != NULL;
        rr_free(&d);
        assert_true(named);
    }

    /* a second run, without $BENCH_RESULTS: the model cache is reused (not rewritten), and the
     * results go under the checkout the binary was built in */
    snprintf(env, sizeof(env), "XDG_CACHE_HOME='%s'", xdg);
    assert_int_equal(run_from_elsewhere(env, "", log), 0);
    assert_int_equal(stat(model, &st2), 0);
    assert_int_equal(st2.st_mtime, st.st_mtime);
    assert_int_equal(st2.st_ino, st.st_ino);
    assert_int_not_equal(stat(stray, &st2), 0);
    char checkout[PATH_MAX], co_results[PATH_MAX + 200];
    snprintf(checkout, sizeof(checkout), "%s", bin);
    /* bin is CHECKOUT/build/asan/bench or CHECKOUT/build/bench */
    for (int up = 0; up < 4; up++) {
        *strrchr(checkout, '/') = 0;
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof(probe), "%s/harness/cli/main.c", checkout);
        if (!access(probe, F_OK)) break;
    }
    snprintf(co_results, sizeof(co_results), "%s/results/%s", checkout, name);
    assert_int_equal(only_entry(co_results, run_dir, sizeof(run_dir)), 0);
    tu_rmtree(co_results);
    if (git_missing) {
        fprintf(stderr, "skip: git: bench was built without a commit (git is not installed, or this is no checkout); "
                        "the commit checks need git (scripts/deps.sh test installs it)\n");
        skip();
    }
}

static void test_out_refuses_a_used_folder(void **state) {
    (void)state;
    char env[1200], log[800], out[800], args[1000], stale[900];
    snprintf(log, sizeof(log), "%s/out.log", tmp);
    snprintf(out, sizeof(out), "%s/out", tmp);
    snprintf(env, sizeof(env), "XDG_CACHE_HOME='%s/xdg'", tmp);
    snprintf(args, sizeof(args), "--out '%s'", out);
    assert_int_equal(run_from_elsewhere(env, args, log), 0);
    /* a worker that wrote nothing to stderr leaves no empty log, and results.json says null */
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "test -z \"$(find '%s' -type f -empty)\"", out);
    assert_int_equal(system(cmd), 0);
    char rj0[900];
    snprintf(rj0, sizeof(rj0), "%s/results.json", out);
    assert_true(file_has(rj0, "\"log\":\tnull") || file_has(rj0, "\"log\": null"));
    /* a stale file from the first run, as timelines/ and logs/ were in the issue */
    snprintf(stale, sizeof(stale), "%s/timelines/stale.csv", out);
    FILE *f = fopen(stale, "w");
    assert_non_null(f);
    fclose(f);
    /* refused, naming the folder and --force; the run is left as it was */
    assert_int_equal(run_from_elsewhere(env, args, log), 2);
    assert_true(file_has(log, "already holds a run"));
    assert_true(file_has(log, "--force"));
    struct stat st;
    assert_int_equal(stat(stale, &st), 0);
    /* --force empties it first */
    snprintf(args, sizeof(args), "--out '%s' --force", out);
    assert_int_equal(run_from_elsewhere(env, args, log), 0);
    assert_int_not_equal(stat(stale, &st), 0);
    char rj[900];
    snprintf(rj, sizeof(rj), "%s/results.json", out);
    assert_int_equal(stat(rj, &st), 0);
    /* a folder with other things in it is never emptied, --force or not */
    char other[800], keep[900];
    snprintf(other, sizeof(other), "%s/other", tmp);
    snprintf(keep, sizeof(keep), "%s/keep.txt", other);
    mkdir(other, 0777);
    f = fopen(keep, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(args, sizeof(args), "--out '%s' --force", other);
    assert_int_equal(run_from_elsewhere(env, args, log), 2);
    assert_true(file_has(log, "holds no results.json"));
    assert_int_equal(stat(keep, &st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_and_cache_from_another_directory),
        cmocka_unit_test(test_out_refuses_a_used_folder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
