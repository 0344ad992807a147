/* Metric classes: see mclass.h. */
#include "mclass.h"

#include <string.h>

#include "engines/abi/module.h"

static const char *const mc_names[] = {"exact", "count", "bytes", "time", "info"};

mc_decl mc_declare(mc_class cls, int better) {
    mc_decl d = {.cls = cls, .better = better};
    if (cls == MC_COUNT) d.tol_rel = 0.05, d.tol_abs = 16;
    if (cls == MC_BYTES) d.tol_rel = 0.02, d.tol_abs = 0.25;
    return d;
}

static int mc_ends(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

mc_decl mc_from_counter(const char *unit, int ctr_cls, int better) {
    switch (ctr_cls) {
    case BENCH_CTR_EXACT: return mc_declare(MC_EXACT, better);
    case BENCH_CTR_COUNT: return mc_declare(MC_COUNT, better);
    case BENCH_CTR_BYTES: return mc_declare(MC_BYTES, better);
    case BENCH_CTR_TIME: return mc_declare(MC_TIME, better);
    case BENCH_CTR_INFO: return mc_declare(MC_INFO, better);
    default: break;
    }
    /* BENCH_CTR_UNIT: the unit is the declaration (module.h) */
    static const char *const clocks[] = {"ns", "us", "ms", "s", NULL};
    for (const char *const *c = clocks; *c; c++)
        if (!strcmp(unit, *c)) return mc_declare(MC_TIME, BENCH_BETTER_LOWER);
    if (mc_ends(unit, "/s")) return mc_declare(MC_TIME, BENCH_BETTER_HIGHER);
    if (!strcmp(unit, "fraction")) return mc_declare(MC_TIME, BENCH_BETTER_NONE);
    if (!strcmp(unit, "B")) return mc_declare(MC_EXACT, BENCH_BETTER_LOWER);
    return mc_declare(MC_EXACT, BENCH_BETTER_NONE);
}

const char *mc_class_name(mc_class c) { return c >= MC_EXACT && c <= MC_INFO ? mc_names[c] : "?"; }

int mc_class_parse(const char *name) {
    for (int i = 0; name && i <= MC_INFO; i++)
        if (!strcmp(name, mc_names[i])) return i;
    return -1;
}

const char *mc_better_name(int better) { return better > 0 ? "higher" : better < 0 ? "lower" : "none"; }

int mc_better_parse(const char *name, int *better) {
    if (!name) return -1;
    if (!strcmp(name, "higher")) *better = 1;
    else if (!strcmp(name, "lower")) *better = -1;
    else if (!strcmp(name, "none")) *better = 0;
    else return -1;
    return 0;
}

/* ---- files without declarations: the rules bench compare applied to names before ---- */

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

mc_decl mc_legacy(const char *metric, const char *unit) {
    int dir = 0;
    if (has(unit, "/s") || mc_ends(metric, "_per_s") || has(metric, "zero_copy")) dir = +1;
    else if (has(metric, "cycles") || has(metric, "misses")) dir = -1;
    else if (!strcmp(unit, "ms") || !strcmp(unit, "ns/op") || !strcmp(unit, "ns") || !strcmp(unit, "s")) dir = -1;
    else if (!strcmp(unit, "MiB") || !strcmp(unit, "KiB") || !strcmp(unit, "B")) dir = -1;
    else if (has(metric, "flt") || has(metric, "faults") || has(metric, "allocs") || has(metric, "grow") ||
             has(metric, "copied") || has(metric, "calls") || has(metric, "instructions") || has(metric, "frees"))
        dir = -1;
    if (has(metric, "context-switches") || !strcmp(metric, "nvcsw") || !strcmp(metric, "nivcsw") ||
        has(metric, "residency") || has(metric, "pss"))
        return mc_declare(MC_INFO, dir);
    if (has(metric, "flt") || has(metric, "faults")) return mc_declare(MC_COUNT, dir);
    if (!strncmp(metric, "mod.loader.", 11) || !strncmp(metric, "mod.kv.", 7) || !strncmp(metric, "mod.device.", 11)) {
        static const char *const clock_units[] = {"ms", "ns", "s", "GB/s", "tokens/s", "fraction", NULL};
        for (const char *const *u = clock_units; *u; u++)
            if (!strcmp(unit, *u)) return mc_declare(MC_TIME, dir);
        if (!strncmp(metric, "mod.device.gpu_mem_", 19)) return mc_declare(MC_BYTES, dir);
    }
    if (!strncmp(metric, "mod.", 4) || has(metric, "instructions")) {
        mc_decl d = mc_declare(MC_EXACT, dir);
        if (has(metric, "instructions")) d.tol_rel = 0.005;
        return d;
    }
    if (!strcmp(unit, "MiB") || !strcmp(unit, "KiB") || !strcmp(unit, "B")) return mc_declare(MC_BYTES, dir);
    if (!strcmp(unit, "count")) return mc_declare(MC_EXACT, dir);
    return mc_declare(MC_TIME, dir);
}
