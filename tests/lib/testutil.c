#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/cli/kinds.h"

/* Every test binary parses scenarios as bench does: with the table of workload kinds that
 * main() hands to the spec layer (harness/spec/kind.h). */
__attribute__((constructor)) static void tu_use_kinds(void) { bench_kinds_use(); }

/* The tests' scenarios name models in the shared folder, outside the folders a scenario
 * may read from by default (harness/spec/confine.h): every test binary, and each bench
 * it starts, allows it the way a script would, through $BENCH_ALLOW_READ. */
__attribute__((constructor)) static void tu_allow_shared(void) {
    const char *root = getenv("BENCH_SHARED"), *have = getenv("BENCH_ALLOW_READ");
    char v[8192];
    snprintf(v, sizeof(v), "%s%s%s", have && *have ? have : "", have && *have ? ":" : "", root ? root : "../shared");
    setenv("BENCH_ALLOW_READ", v, 1);
}

static char tu_missing_path[1024];

const char *tu_missing(void) { return tu_missing_path; }

const char *tu_shared(const char *rel, char *buf, size_t len) {
    const char *root = getenv("BENCH_SHARED");
    snprintf(buf, len, "%s/%s", root ? root : "../shared", rel);
    if (access(buf, R_OK) != 0) {
        snprintf(tu_missing_path, sizeof(tu_missing_path), "%s", buf);
        fprintf(stderr, "test: missing %s (set BENCH_SHARED to the shared/ folder; the models come from the llama2.c project)\n", buf);
        return NULL;
    }
    return buf;
}

const char *tu_tmpdir(char *buf, size_t len) {
    const char *root = getenv("BENCH_TMP");
    snprintf(buf, len, "%s/t.XXXXXX", root ? root : "/tmp");
    return mkdtemp(buf);
}

void tu_rmtree(const char *path) {
    if (!path || !*path) return;
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "test: could not remove %s\n", path);
}

int tu_bench(const char *out_path, const char *fmt, ...) {
    const char *bin = getenv("BENCH_BIN");
    char args[4096], cmd[8400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "'%s' %s%s%s", bin ? bin : "build/asan/bench", args, out_path ? " >" : "", out_path ? out_path : "");
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

int tu_read_ints(const char *path, int *v, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (n < max && fscanf(f, "%d", &v[n]) == 1) n++;
    fclose(f);
    return n;
}

const char *tu_module_dir(void) {
    const char *d = getenv("BENCH_MODULE_PATH");
    return d ? d : "build/asan/modules";
}
