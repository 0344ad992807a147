/* instructions:callgrind: see callgrind.h. */
#include "callgrind.h"
#include "subproc.h"
#include "engines/abi/module.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The worker marks the phases with <valgrind/callgrind.h>'s client requests (harness/child/worker.c);
 * parent and worker are one binary, so the header's presence here is the same as there. */
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#define CG_BUILD_MARKS_PHASES 1
#endif
#endif
#ifndef CG_BUILD_MARKS_PHASES
#define CG_BUILD_MARKS_PHASES 0
#endif

/* callgrind numbers the dumps from 1; more than this means it was not our worker */
#define CG_MAX_PARTS 32

static const char *const cg_names[CG_PH_COUNT] = {"start", "load", "prefill", "decode", "end"};

const char *cg_phase_name(int ph) { return ph >= 0 && ph < CG_PH_COUNT ? cg_names[ph] : "?"; }

int cg_available(char *err, size_t errlen) {
    if (!CG_BUILD_MARKS_PHASES)
        return bench_errf(err, errlen, "\"instructions:callgrind\": this bench was built without <valgrind/callgrind.h> "
                                    "(the valgrind package has it: run scripts/deps.sh and rebuild)");
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        if (n > 0 && n < sizeof(buf) - 10) {
            snprintf(buf, sizeof(buf), "%.*s/valgrind", (int)n, p);
            if (!access(buf, X_OK)) return 0;
        }
        p += n;
        if (*p == ':') p++;
    }
    return bench_errf(err, errlen, "\"instructions:callgrind\": valgrind is not on PATH (scripts/deps.sh installs it)");
}

/* One callgrind output file: its trigger's phase (or -1: not one of ours) and its total. */
static int cg_parse_one(const char *path, int *phase, uint64_t *ir, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) return bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    char line[1024];
    int have_total = 0;
    *phase = -2;
    while (fgets(line, sizeof(line), f)) {
        const char *trig = "desc: Trigger: ";
        if (!strncmp(line, trig, strlen(trig))) {
            const char *t = line + strlen(trig);
            if (!strncmp(t, "Program termination", 19)) *phase = CG_PH_END;
            else if (!strncmp(t, "Client Request: ", 16)) {
                *phase = -1;
                for (int k = 0; k < CG_PH_END; k++)
                    if (!strncmp(t + 16, cg_names[k], strlen(cg_names[k])) && strchr("\r\n", t[16 + strlen(cg_names[k])]))
                        *phase = k;
            }
        } else if (!strncmp(line, "totals:", 7) || (!have_total && !strncmp(line, "summary:", 8))) {
            /* events: Ir is the first (and by default the only) event */
            const char *num = line + (line[0] == 't' ? 7 : 8);
            char *end;
            errno = 0;
            unsigned long long v = strtoull(num, &end, 10);
            if (errno || end == num) {
                fclose(f);
                return bench_errf(err, errlen, "%s: unreadable total: %s", path, line);
            }
            *ir = v;
            have_total = 1;
        }
    }
    fclose(f);
    if (*phase == -2 || !have_total)
        return bench_errf(err, errlen, "%s: not a callgrind output file (no \"desc: Trigger\" or no \"totals\")", path);
    return 0;
}

int cg_parse(const char *out_file, cg_counts *c, char *err, size_t errlen) {
    memset(c->ir, 0, sizeof(c->ir));
    c->total = 0;
    c->ok = 0;
    int seen[CG_PH_COUNT] = {0};
    char path[PATH_MAX];
    for (int part = 0; part <= CG_MAX_PARTS; part++) {
        if (part) snprintf(path, sizeof(path), "%s.%d", out_file, part);
        else snprintf(path, sizeof(path), "%s", out_file);
        struct stat st;
        if (part && stat(path, &st)) break;
        int ph = -1;
        uint64_t ir = 0;
        if (cg_parse_one(path, &ph, &ir, err, errlen)) return -1;
        c->total += ir;
        if (ph < 0) continue;           /* a dump someone else asked for: counted in the total only */
        if (seen[ph]++) return bench_errf(err, errlen, "%s: a second \"%s\" dump", path, cg_names[ph]);
        c->ir[ph] = ir;
    }
    for (int k = 0; k < CG_PH_COUNT; k++)
        if (!seen[k])
            return bench_errf(err, errlen, "%s: no \"%s\" phase among callgrind's files (did the worker fail? or run "
                                        "without --callgrind?)", out_file, cg_names[k]);
    c->ok = 1;
    return 0;
}


int cg_measure(const char *bench_exe, const char *spec_path, const char *out_file, const char *log_path,
               double timeout_s, volatile sig_atomic_t *interrupted, cg_counts *c) {
    memset(c, 0, sizeof(*c));
    snprintf(c->out_file, sizeof(c->out_file), "%s", out_file);
    /* a previous run's parts would be read as this one's */
    char path[PATH_MAX], arg_out[PATH_MAX + 32];
    unlink(out_file);
    for (int part = 1; part <= CG_MAX_PARTS; part++) {
        snprintf(path, sizeof(path), "%s.%d", out_file, part);
        unlink(path);
    }
    snprintf(arg_out, sizeof(arg_out), "--callgrind-out-file=%s", out_file);
    char *argv[] = {"valgrind", "--tool=callgrind", arg_out, (char *)bench_exe, "worker", "--spec", (char *)spec_path,
                    "--callgrind", NULL};
    if (sp_run(argv, "under valgrind --tool=callgrind", log_path, timeout_s, interrupted, c->error, sizeof(c->error)))
        return -1;
    char err[512];
    if (cg_parse(out_file, c, err, sizeof(err))) return bench_errf(c->error, sizeof(c->error), "%s", err);
    return 0;
}

int cg_run_variants(const scenario *s, const char *bench_exe, const char *out_dir,
                    volatile sig_atomic_t *interrupted, cg_counts **out) {
    *out = calloc((size_t)(s->n_variants > 0 ? s->n_variants : 1), sizeof(cg_counts));
    if (!*out) return -1;
    char dir[PATH_MAX], spec[PATH_MAX], file[PATH_MAX], log[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/callgrind", out_dir);
    if (mkdir(dir, 0777) && errno != EEXIST) {
        for (int i = 0; i < s->n_variants; i++)
            snprintf((*out)[i].error, sizeof((*out)[i].error), "%.400s: %s", dir, strerror(errno));
        return 0;
    }
    /* callgrind runs the engine some 50x slower than natively */
    double timeout = s->timeout_s * 100;
    for (int i = 0; i < s->n_variants && !(interrupted && *interrupted); i++) {
        if (!s->variants[i].selected) continue;
        cg_counts *c = &(*out)[i];
        if (snprintf(spec, sizeof(spec), "%s/specs/v%d.json", out_dir, i) >= (int)sizeof(spec) ||
            snprintf(file, sizeof(file), "%s/v%d.out", dir, i) >= (int)sizeof(file) ||
            snprintf(log, sizeof(log), "%s/v%d.log", dir, i) >= (int)sizeof(log)) {
            snprintf(c->error, sizeof(c->error), "%.400s: path too long", dir);
            continue;
        }
        fprintf(stderr, "bench run: instructions:callgrind: %s ...", s->variants[i].key);
        if (cg_measure(bench_exe, spec, file, log, timeout, interrupted, c)) {
            fprintf(stderr, " failed: %s\n", c->error);
            continue;
        }
        fprintf(stderr, " load %" PRIu64 ", prefill %" PRIu64 ", decode %" PRIu64 " instructions\n",
                c->ir[CG_PH_LOAD], c->ir[CG_PH_PREFILL], c->ir[CG_PH_DECODE]);
    }
    return 0;
}
