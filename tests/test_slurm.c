/* A sharded run through a real Slurm cluster on this machine: scripts/slurm/local-cluster.sh
 * starts munged, slurmctld and slurmd (one node) in a scratch directory, scripts/slurm/submit.sh
 * submits the 3-task array (bench-array.sbatch) and the dependent merge job (bench-merge.sbatch),
 * and the merged records must be those of an unsharded run of the same scenario: the same
 * variants, repetitions and deterministic figures. The daemons are stopped by their pids,
 * whatever the outcome. Skips, saying why, only where slurmctld cannot start. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "harness/report/resread.h"
#include "tests/lib/harness_jsonschema.h"
#include "tests/lib/shardcheck.h"
#include "tests/lib/testutil.h"

typedef struct fx {
    char tmp[512];
    char cluster[600];      /* the cluster's directory: slurm.conf, pids, logs */
    char conf[700];
    int up;
} fx;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

/* The first line a command prints, into buf. */
static int sh_line(char *buf, size_t len, const char *cmd) {
    buf[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    if (!fgets(buf, (int)len, p)) buf[0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    return pclose(p) == 0 ? 0 : -1;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof(*f));
    /* a short path: munge's socket lives under it */
    if (!f || !tu_tmpdir(f->tmp, sizeof(f->tmp))) {
        free(f);
        return -1;
    }
    snprintf(f->cluster, sizeof(f->cluster), "%s/cluster", f->tmp);
    snprintf(f->conf, sizeof(f->conf), "%s/slurm.conf", f->cluster);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (!f) return 0;
    if (f->up && sh("bash scripts/slurm/local-cluster.sh stop '%s'", f->cluster))
        fprintf(stderr, "test: local-cluster.sh stop %s failed: daemons may be left (pids in %s/pids)\n", f->cluster, f->cluster);
    tu_rmtree(f->tmp);
    free(f);
    return 0;
}

/* The job's state from scontrol ("COMPLETED", "RUNNING", ...), "" when unknown. */
static void job_state(const fx *f, const char *job, char *buf, size_t len) {
    char cmd[1200], line[4096];
    snprintf(cmd, sizeof(cmd), "SLURM_CONF='%s' scontrol show job -o %s 2>/dev/null", f->conf, job);
    buf[0] = 0;
    if (sh_line(line, sizeof(line), cmd)) return;
    const char *s = strstr(line, "JobState=");
    if (s) snprintf(buf, len, "%.*s", (int)strcspn(s + 9, " "), s + 9);
}

static int terminal(const char *st) {
    static const char *const done[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                                       "BOOT_FAIL", "DEADLINE", "PREEMPTED", NULL};
    for (const char *const *d = done; *d; d++)
        if (!strcmp(st, *d)) return 1;
    return 0;
}

static void dump(const char *path) {
    char err[256];
    char *t = rr_slurp(path, NULL, err, sizeof(err));
    fprintf(stderr, "---- %s\n%s\n", path, t ? t : err);
    free(t);
}

/* A process that exited and was not reaped yet (a zombie) counts as gone. */
static int alive(int pid) {
    char p[64], buf[512];
    snprintf(p, sizeof(p), "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    int n = (int)fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n > 0 ? n : 0] = 0;
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z';
}

static void test_slurm_array_matches_unsharded(void **state) {
    fx *f = *state;
    char model[600];
    if (!tu_shared("models/stories260K.bin", model, sizeof(model))) skip();
    const char *bench = getenv("BENCH_BIN");
    assert_non_null(bench);

    int rc = sh("bash scripts/slurm/local-cluster.sh start '%s' >/dev/null", f->cluster);
    if (rc == 77) {
        fprintf(stderr, "test: SKIP: slurmctld cannot start on this machine (its log is above); the Slurm cluster test "
                        "needs root and the packages of scripts/deps.sh\n");
        skip();
    }
    assert_int_equal(rc, 0);
    f->up = 1;

    /* 2 variants x 4 repetitions over 3 shards: 3, 3 and 2 cells, two of them splitting a
     * repetition between shards; a warm-up per variant on every shard */
    char sc[800];
    snprintf(sc, sizeof(sc), "%s/slurmtest.json", f->tmp);
    FILE *o = fopen(sc, "w");
    assert_non_null(o);
    fprintf(o, "{\"name\": \"slurmtest\", \"model\": \"%s\", \"workload\": {\"prompt_tokens\": 4, \"generate\": 8},"
               " \"cache\": \"warm\", \"repetitions\": 4, \"warmup\": 1, \"metrics\": [\"timeline\", \"tokens\"],"
               " \"matrix\": {\"loader\": [\"pread\", \"mmap\"]}}", model);
    fclose(o);
    assert_int_equal(tu_bench("/dev/null", "run '%s' --out '%s/full' 2>/dev/null", sc, f->tmp), 0);

    char cmd[4096], line[256];
    snprintf(cmd, sizeof(cmd), "SLURM_CONF='%s' BENCH='%s' bash scripts/slurm/submit.sh '%s' 3 '%s/slurm' 2>'%s/submit.err'",
             f->conf, bench, sc, f->tmp, f->tmp);
    if (sh_line(line, sizeof(line), cmd) || strncmp(line, "jobs: ", 6)) {
        snprintf(cmd, sizeof(cmd), "%s/submit.err", f->tmp);
        dump(cmd);
        fail_msg("submit.sh printed \"%s\"", line);
    }
    char array[64], merge[64];
    assert_int_equal(sscanf(line + 6, "%63s %63s", array, merge), 2);

    /* a guard, not a timing: the jobs take seconds; the wait ends early when the merge ends */
    char st[64] = "";
    for (int i = 0; i < 3000 && !terminal(st); i++) {
        usleep(100 * 1000);
        job_state(f, merge, st, sizeof(st));
    }
    if (strcmp(st, "COMPLETED")) {
        char p[900];
        for (int i = 0; i < 3; i++) {
            snprintf(p, sizeof(p), "%s/slurm/logs/shard-%d.out", f->tmp, i);
            dump(p);
        }
        snprintf(p, sizeof(p), "%s/slurm/logs/merge.out", f->tmp);
        dump(p);
        snprintf(p, sizeof(p), "%s/log/slurmctld.log", f->cluster);
        dump(p);
        fail_msg("the merge job %s ended as \"%s\" (array job %s)", merge, st, array);
    }
    /* every task of the array ended well */
    for (int i = 0; i < 3; i++) {
        char task[80];
        snprintf(task, sizeof(task), "%s_%d", array, i);
        job_state(f, task, st, sizeof(st));
        assert_string_equal(st, "COMPLETED");
    }

    char dir[900];
    snprintf(dir, sizeof(dir), "%s/slurm/merged/results.json", f->tmp);
    cJSON *m = hjs_load(dir);
    snprintf(dir, sizeof(dir), "%s/full/results.json", f->tmp);
    cJSON *u = hjs_load(dir);
    assert_non_null(m);
    assert_non_null(u);
    char err[1024] = "";
    int same = sck_same_records(m, u, err, sizeof(err));
    if (same < 0) fprintf(stderr, "merged through Slurm against unsharded: %s\n", err);
    assert_true(same > 50);
    /* three machines (shards), one type: this one */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "machines")), 3);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "machine_types")), 1);
    cJSON_Delete(m);
    cJSON_Delete(u);
    /* the merge job drew the report too */
    struct stat sb;
    snprintf(dir, sizeof(dir), "%s/slurm/merged/report.html", f->tmp);
    assert_int_equal(stat(dir, &sb), 0);

    /* stopped by their pids: none of them is left */
    char pids[700];
    snprintf(pids, sizeof(pids), "%s/pids", f->cluster);
    FILE *pf = fopen(pids, "r");
    assert_non_null(pf);
    int pid[3] = {0}, n = 0;
    char name[64];
    while (n < 3 && fscanf(pf, "%63s %d", name, &pid[n]) == 2) n++;
    fclose(pf);
    assert_int_equal(n, 3);
    assert_int_equal(sh("bash scripts/slurm/local-cluster.sh stop '%s'", f->cluster), 0);
    f->up = 0;
    for (int i = 0; i < 3; i++) assert_false(alive(pid[i]));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slurm_array_matches_unsharded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
