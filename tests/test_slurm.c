/* A sharded run through a real Slurm cluster on this machine: scripts/slurm/local-cluster.sh
 * starts munged, slurmctld and slurmd (one node) in a scratch directory, scripts/slurm/submit.sh
 * submits the 3-task array (bench-array.sbatch) and the dependent merge job (bench-merge.sbatch),
 * and the merged records must be those of an unsharded run of the same scenario: the same
 * variants, repetitions and deterministic figures. The daemons are stopped by their pids,
 * whatever the outcome. Skips, naming what is missing, where the cluster cannot run here
 * (local-cluster.sh's exit status 77: the hostname does not resolve, the controller does not
 * answer, /sys/fs/cgroup is not mounted, slurmd cannot start). Every wait is bounded in
 * seconds of wall time, not in tries: a scontrol call can take 10 s where the hostname does
 * not resolve. A second test runs local-cluster.sh against stand-in daemons that never answer
 * and checks that it gives up, with status 77 and a reason, within its stated bound. */
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
#include <time.h>
#include <unistd.h>

#include "harness/report/rmodel.h"
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

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The job's state from scontrol ("COMPLETED", "RUNNING", ...), "" when unknown (or when
 * scontrol takes more than 5 s to say). */
static void job_state(const fx *f, const char *job, char *buf, size_t len) {
    char cmd[1200], line[4096];
    snprintf(cmd, sizeof(cmd), "SLURM_CONF='%s' timeout 5 scontrol show job -o %s 2>/dev/null", f->conf, job);
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

    char start_err[700], why[800];
    snprintf(start_err, sizeof(start_err), "%s/start.err", f->tmp);
    int rc = sh("bash scripts/slurm/local-cluster.sh start '%s' >/dev/null 2>'%s'", f->cluster, start_err);
    if (rc) dump(start_err);
    if (rc == 77) {
        /* the script's first line says what is missing */
        snprintf(why, sizeof(why), "cat '%s' | grep -m1 '^local-cluster.sh: '", start_err);
        char line0[512];
        sh_line(line0, sizeof(line0), why);
        fprintf(stderr, "test: SKIP: the Slurm cluster cannot run on this machine: %s\n",
                line0[0] ? line0 + strlen("local-cluster.sh: ") : "(no reason given: see above)");
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

    /* a guard on wall time, not a timing: the jobs take seconds; the wait ends early when the
     * merge ends, and at the latest 300 s after it began, however slow each scontrol is */
    char st[64] = "";
    const double give_up = now_s() + 300;
    while (!terminal(st) && now_s() < give_up) {
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

/* Writes an executable script path = body. */
static void write_exe(const char *dir, const char *name, const char *body) {
    char p[900];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *o = fopen(p, "w");
    assert_non_null(o);
    fprintf(o, "#!/usr/bin/env bash\n%s\n", body);
    assert_int_equal(fclose(o), 0);
    assert_int_equal(chmod(p, 0755), 0);
}

/* local-cluster.sh start against stand-ins (first on PATH): daemons that write their pid file
 * and sleep, and a scontrol/getent as `ping`/`resolve` say; returns its exit status, its
 * stderr in err. The whole call is under `timeout 120`: 124 means it did not give up. */
static int fake_start(fx *f, const char *resolve, const char *ping, const char *cgroup, char *err, size_t len) {
    char bin[700], cmd[4000], errp[700];
    snprintf(bin, sizeof(bin), "%s/fakebin", f->tmp);
    mkdir(bin, 0777);
    /* the pid file each daemon names: munged --pid-file=X, slurmctld/slurmd -f CONF */
    write_exe(bin, "munged", "for a; do case $a in --pid-file=*) p=${a#--pid-file=} ;; esac; done\n"
                             "sleep 600 >/dev/null 2>&1 & echo $! > \"$p\"");
    write_exe(bin, "slurmctld", "p=$(sed -n 's/^SlurmctldPidFile=//p' \"$2\"); sleep 600 >/dev/null 2>&1 & echo $! > \"$p\"");
    write_exe(bin, "slurmd", "p=$(sed -n 's/^SlurmdPidFile=//p' \"$2\"); sleep 600 >/dev/null 2>&1 & echo $! > \"$p\"");
    write_exe(bin, "sinfo", "echo idle");
    write_exe(bin, "sbatch", "exit 1");
    write_exe(bin, "scancel", "exit 0");
    write_exe(bin, "scontrol", ping);
    write_exe(bin, "getent", resolve);
    snprintf(errp, sizeof(errp), "%s/fake.err", f->tmp);
    snprintf(cmd, sizeof(cmd),
             "PATH='%s':\"$PATH\" LOCAL_CLUSTER_WAIT_S=2 LOCAL_CLUSTER_CGROUP='%s' "
             "timeout 120 bash scripts/slurm/local-cluster.sh start '%s' >/dev/null 2>'%s'",
             bin, cgroup, f->cluster, errp);
    int rc = sh("%s", cmd);
    char e[256];
    char *t = rr_slurp(errp, NULL, e, sizeof(e));
    snprintf(err, len, "%s", t ? t : e);
    free(t);
    /* whatever it did, nothing of it is left running */
    sh("PATH='%s':\"$PATH\" bash scripts/slurm/local-cluster.sh stop '%s'", bin, f->cluster);
    tu_rmtree(f->cluster);
    return rc;
}

static void test_local_cluster_gives_up_in_seconds(void **state) {
    fx *f = *state;
    char err[4096];
    /* a controller that never answers: each ping hangs 30 s, as where the hostname does not
     * resolve; the wait is 2 s of wall time (one ping cut at 5 s), not 300 tries of 30 s */
    /* the cgroup check is given /proc, which is mounted wherever /proc/mounts can be read: a
     * debootstrap'd root without /sys/fs/cgroup still runs these stand-in cases */
    int rc = fake_start(f, "exit 0", "sleep 30", "/proc", err, sizeof(err));
    if (rc != 77) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 77);
    assert_non_null(strstr(err, "does not answer scontrol ping within 2 s"));
    /* a hostname that does not resolve: said at once, naming the hostname */
    rc = fake_start(f, "sleep 30", "echo 'Slurmctld(primary) at x is UP'", "/proc", err, sizeof(err));
    if (rc != 77) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 77);
    assert_non_null(strstr(err, "does not resolve"));
    /* no cgroup hierarchy: slurmd is not started, and the message names the folder */
    rc = fake_start(f, "exit 0", "echo 'Slurmctld(primary) at x is UP'", "/nonexistent/cgroup", err, sizeof(err));
    if (rc != 77) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 77);
    assert_non_null(strstr(err, "/nonexistent/cgroup is not mounted"));
    /* the stand-ins up, it starts */
    rc = fake_start(f, "exit 0", "echo 'Slurmctld(primary) at x is UP'", "/proc", err, sizeof(err));
    if (rc != 0) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_cluster_gives_up_in_seconds),
        cmocka_unit_test(test_slurm_array_matches_unsharded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
