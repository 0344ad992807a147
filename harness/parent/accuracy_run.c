#include "accuracy_run.h"

#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "subproc.h"

/* The worker's JSON: every figure there and finite, or ok stays 0 with why. */
static void ar_read(const char *path, ar_figures *f) {
    FILE *in = fopen(path, "r");
    if (!in) {
        snprintf(f->error, sizeof(f->error), "%.400s: %s", path, strerror(errno));
        return;
    }
    char buf[1024];
    size_t n = fread(buf, 1, sizeof(buf) - 1, in);
    fclose(in);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    static const char *const keys[] = {"n_pos", "kl_mean", "kl_max", "top1", "err_max", "err_rms"};
    double v[6];
    for (int k = 0; k < 6; k++) {
        const cJSON *x = j ? cJSON_GetObjectItemCaseSensitive(j, keys[k]) : NULL;
        if (!cJSON_IsNumber(x)) {
            snprintf(f->error, sizeof(f->error), "%.400s: no number \"%s\"", path, keys[k]);
            cJSON_Delete(j);
            return;
        }
        v[k] = x->valuedouble;
    }
    cJSON_Delete(j);
    *f = (ar_figures){.ok = 1, .n_pos = (int)v[0], .kl_mean = v[1], .kl_max = v[2], .top1 = v[3], .err_max = v[4],
                      .err_rms = v[5]};
}

int ar_run_variants(const scenario *s, const char *bench_exe, const char *out_dir, volatile sig_atomic_t *interrupted,
                    ar_figures **out) {
    *out = calloc((size_t)(s->n_variants > 0 ? s->n_variants : 1), sizeof(ar_figures));
    if (!*out) return -1;
    char dir[PATH_MAX], spec[PATH_MAX], file[PATH_MAX], log[PATH_MAX], err[512];
    snprintf(dir, sizeof(dir), "%s/accuracy", out_dir);
    if (mkdir(dir, 0777) && errno != EEXIST) {
        for (int i = 0; i < s->n_variants; i++)
            snprintf((*out)[i].error, sizeof((*out)[i].error), "%.400s: %s", dir, strerror(errno));
        return 0;
    }
    for (int i = 0; i < s->n_variants && !(interrupted && *interrupted); i++) {
        if (!s->variants[i].selected) continue;
        ar_figures *f = &(*out)[i];
        if (snprintf(spec, sizeof(spec), "%s/specs/v%d.json", out_dir, i) >= (int)sizeof(spec) ||
            snprintf(file, sizeof(file), "%s/v%d.json", dir, i) >= (int)sizeof(file) ||
            snprintf(log, sizeof(log), "%s/v%d.log", dir, i) >= (int)sizeof(log)) {
            snprintf(f->error, sizeof(f->error), "%.400s: path too long", dir);
            continue;
        }
        unlink(file);
        fprintf(stderr, "bench run: accuracy: %s ...", s->variants[i].key);
        char *argv[] = {(char *)bench_exe, "worker", "--spec", spec, "--accuracy", file, NULL};
        /* two engines, one after the other, each over the workload's positions */
        if (sp_run(argv, "bench worker --accuracy", log, 2 * s->timeout_s, interrupted, err, sizeof(err))) {
            snprintf(f->error, sizeof(f->error), "%s", err);
            fprintf(stderr, " failed: %s\n", f->error);
            continue;
        }
        ar_read(file, f);
        if (f->ok) fprintf(stderr, " KL mean %.3g max %.3g, top-1 %.2f%% over %d positions\n", f->kl_mean, f->kl_max,
                           100 * f->top1, f->n_pos);
        else fprintf(stderr, " failed: %s\n", f->error);
    }
    return 0;
}
