#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines/core/runtime/modreg.h"
#include "harness/cli/kinds.h"

/* Every test binary parses scenarios as bench does: with the table of workload kinds that
 * main() hands to the spec layer (harness/scenario/kind.h). */
__attribute__((constructor)) static void tu_use_kinds(void) { bench_kinds_use(); }

/* The tests' scenarios name models in the shared folder, outside the folders a scenario
 * may read from by default (harness/scenario/confine.h): every test binary, and each bench
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

#define TU_MAX_MODULES 32
typedef struct tu_family { char family[40]; char store[TU_MAX_MODULES][64]; const char *names[TU_MAX_MODULES]; int n; } tu_family;

int tu_modules(const char *family, const char *const **names) { return tu_device_modules("cpu", family, names); }

uint64_t tu_module_caps(const char *family, const char *name) {
    modreg_entry e;
    char err[512];
    if (modreg_load(tu_module_dir(), family, name, &e, err, sizeof(err))) {
        fprintf(stderr, "tu_module_caps: %s\n", err);
        abort();
    }
    uint64_t caps = e.mod->caps;
    modreg_entry_close(&e);
    return caps;
}

int tu_device_modules(const char *device, const char *family, const char *const **names) {
    static tu_family fams[8];
    char key[40];
    snprintf(key, sizeof(key), "%s/%s", device, family);
    tu_family *f = NULL;
    for (int i = 0; i < 8 && !f; i++)
        if (!fams[i].family[0] || !strcmp(fams[i].family, key)) f = &fams[i];
    if (!f) { fprintf(stderr, "tu_modules: too many families\n"); abort(); }
    snprintf(f->family, sizeof(f->family), "%s", key);
    f->n = 0;
    /* BENCH_CONFORMANCE="kv=skeleton": only that module of its family */
    const char *only = NULL, *filter = getenv("BENCH_CONFORMANCE");
    size_t fl = strlen(family);
    if (filter && !strncmp(filter, family, fl) && filter[fl] == '=') only = filter + fl + 1;
    modreg r;
    char warn[4096], err[512];
    if (modreg_open_all(tu_module_dir(), &r, warn, sizeof(warn), err, sizeof(err))) {
        fprintf(stderr, "tu_modules: %s\n", err);
        modreg_close(&r);
        abort();
    }
    for (int i = 0; i < r.n && f->n < TU_MAX_MODULES; i++) {
        const bench_module *m = r.v[i].mod;
        if (strcmp(m->family, family) || strcmp(m->devices ? m->devices : "cpu", device)) continue;
        if (only && strcmp(m->name, only)) continue;
        snprintf(f->store[f->n], sizeof(f->store[0]), "%s", m->name);
        f->names[f->n] = f->store[f->n];
        f->n++;
    }
    modreg_close(&r);
    if (!f->n) {
        if (strcmp(device, "cpu")) return 0;   /* a device's modules are built where its compiler is */
        fprintf(stderr, "tu_modules: no %s module%s%s on %s\n", family, only ? " named " : "", only ? only : "", tu_module_dir());
        abort();
    }
    *names = f->names;
    return f->n;
}

int tu_on_path(const char *prog, char *buf, size_t len) {
    for (const char *p = getenv("PATH"); p && *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(buf, len, "%.*s/%s", (int)n, p, prog);
        if (n && access(buf, X_OK) == 0) return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

int tu_copy_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb");
    if (!in) return -1;
    FILE *out = fopen(dst, "wb");
    if (!out) {
        fclose(in);
        return -1;
    }
    char buf[1 << 16];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (ferror(in)) rc = -1;
    fclose(in);
    if (fclose(out)) rc = -1;
    return rc;
}

void tu_dump_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) fwrite(buf, 1, n, stderr);
    fclose(f);
}
