/* harness/parent/memcg.c: a worker killed by SIGKILL is told apart as an OOM kill only where
 * its memory cgroup counted one. The test makes a cgroup with a 16 MiB limit (where this
 * machine lets it: root, a writable memory hierarchy, v1 or v2), runs a child in it that
 * touches 256 MiB, and checks what mc_read / mc_oom_kills say before and after. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/parent/memcg.h"

static int write_file(const char *dir, const char *name, const char *text) {
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* This process's own cgroup is read, whatever the machine: found or not, never a crash, and
 * a count that does not go backwards. */
static void test_reads_own_cgroup(void **state) {
    (void)state;
    mc_state st;
    mc_read(0, &st);
    if (!st.found) {
        fprintf(stderr, "note: no memory cgroup readable here (a chroot without /sys/fs/cgroup?): mc_read says so\n");
        assert_int_equal(mc_oom_kills(&st), -1);
        return;
    }
    assert_true(st.oom_kills >= 0);
    assert_true(mc_oom_kills(&st) >= st.oom_kills);
    mc_state gone;
    mc_read(999999999, &gone);   /* no such pid */
    assert_int_equal(gone.found, 0);
}

static void test_oom_kill_counted(void **state) {
    (void)state;
    mc_state self;
    mc_read(0, &self);
    if (!self.found || geteuid() != 0) {
        fprintf(stderr, "skip: needs root and a memory cgroup (found %d)\n", self.found);
        skip();
    }
    /* a child cgroup beside ours: v1's memory folder or v2's (which must delegate memory) */
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/bench-test-memcg-%d", self.dir, (int)getpid());
    if (mkdir(dir, 0755)) {
        fprintf(stderr, "skip: cannot make a cgroup %s: %s\n", dir, strerror(errno));
        skip();
    }
    int v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 && strstr(self.dir, "/memory") == NULL;
    if (write_file(dir, v2 ? "memory.max" : "memory.limit_in_bytes", "16777216")) {
        rmdir(dir);
        fprintf(stderr, "skip: cannot set a memory limit in %s\n", dir);
        skip();
    }
    write_file(dir, "memory.swap.max", "0");              /* v2; no swap to escape to */
    write_file(dir, "memory.memsw.limit_in_bytes", "16777216");  /* v1, where swap accounting is on */
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char b;
        close(go[1]);
        if (read(go[0], &b, 1) != 1) _exit(2);
        const size_t n = 256u << 20;
        volatile char *p = malloc(n);
        if (!p) _exit(3);
        for (size_t i = 0; i < n; i += 4096) p[i] = 1;
        _exit(0);
    }
    close(go[0]);
    char pidtext[32];
    snprintf(pidtext, sizeof(pidtext), "%d", (int)pid);
    int joined = write_file(dir, "cgroup.procs", pidtext) == 0;
    mc_state st;
    if (joined) mc_read(pid, &st);
    assert_int_equal(write(go[1], "x", 1), 1);
    close(go[1]);
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    int64_t after = joined ? mc_oom_kills(&st) : -1;
    rmdir(dir);
    if (!joined) {
        fprintf(stderr, "skip: cannot move a process into %s\n", dir);
        skip();
    }
    assert_true(st.found);
    assert_string_equal(st.dir, dir);
    assert_int_equal(st.limit, 16777216);
    assert_int_equal(st.oom_kills, 0);
    if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGKILL) fail_msg("the child touching 256 MiB under a 16 MiB limit was not SIGKILLed (status 0x%x)", ws);
    assert_int_equal(after, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_own_cgroup),
        cmocka_unit_test(test_oom_kill_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
