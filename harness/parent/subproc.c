#include "subproc.h"
#include "util/ut_clock.h"
#include "engines/abi/module.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t sp_now_ms(void) { return ut_now_ns() / 1000000; }

int sp_run(char *const argv[], const char *what, const char *log_path, double timeout_s,
           volatile sig_atomic_t *interrupted, char *err, size_t errlen) {
    int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log < 0) return bench_errf(err, errlen, "%s: %s", log_path, strerror(errno));
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        close(log);
        return bench_errf(err, errlen, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        /* dies with bench run, as the runner's workers do (runner.c) */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(127);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, 0);
        dup2(log, 1);
        dup2(log, 2);
        execvp(argv[0], argv);
        fprintf(stderr, "bench: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(log);
    int64_t deadline = sp_now_ms() + (int64_t)(timeout_s * 1000);
    int status = 0, killed = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return bench_errf(err, errlen, "waitpid: %s", strerror(errno));
        if (!killed && ((interrupted && *interrupted) || sp_now_ms() > deadline)) {
            killed = (interrupted && *interrupted) ? 1 : 2;
            kill(pid, SIGKILL);
        }
        struct timespec d = {0, 20 * 1000000};
        nanosleep(&d, NULL);
    }
    if (killed == 1) return bench_errf(err, errlen, "interrupted");
    if (killed == 2) return bench_errf(err, errlen, "timed out after %.0f s %s (see %s)", timeout_s, what, log_path);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    if (WIFEXITED(status)) return bench_errf(err, errlen, "%s exited %d (see %s)", what, WEXITSTATUS(status), log_path);
    return bench_errf(err, errlen, "%s died of signal %d (see %s)", what, WTERMSIG(status), log_path);
}
