/* The shard plan: contiguous pieces of the unsharded run order (shard.h). */
#include "harness/scenario/shard.h"

#include <cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/module.h"

void sh_plan_free(sh_plan *p) {
    if (!p) return;
    free(p->cells);
    free(p->start);
    memset(p, 0, sizeof(*p));
}

int sh_plan_make(const scenario *s, int n_shards, sh_plan *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (n_shards < 1) return bench_errf(err, errlen, "shards: %d: expected a count >= 1", n_shards);
    int nv = sc_n_selected(s);
    /* 64-bit: variants x repetitions of a large matrix */
    long long cells = (long long)nv * s->repetitions;
    if (cells > INT_MAX / 2) return bench_errf(err, errlen, "%s: %d variants x %d repetitions: too many cells to plan",
                                               s->file, nv, s->repetitions);
    if (cells < n_shards)
        return bench_errf(err, errlen,
                          "%s: %d shards for %lld cells (%d variant%s x %d repetition%s): a shard would be empty; "
                          "use at most %lld shards",
                          s->file, n_shards, cells, nv, nv == 1 ? "" : "s", s->repetitions, s->repetitions == 1 ? "" : "s",
                          cells);
    out->n_shards = n_shards;
    out->warmup = s->warmup;
    out->n_cells = (int)cells;
    out->cells = calloc((size_t)cells, sizeof(*out->cells));
    out->start = calloc((size_t)n_shards + 1, sizeof(*out->start));
    if (!out->cells || !out->start) {
        sh_plan_free(out);
        return bench_errf(err, errlen, "out of memory");
    }
    int k = 0;
    for (int rep = 0; rep < s->repetitions; rep++)
        for (int vi = 0; vi < s->n_variants; vi++)
            if (s->variants[vi].selected) out->cells[k++] = (sh_cell){.variant = vi, .rep = s->warmup + rep};
    /* the first (cells % N) shards take one cell more */
    int base = out->n_cells / n_shards, extra = out->n_cells % n_shards;
    for (int i = 0; i < n_shards; i++) out->start[i + 1] = out->start[i] + base + (i < extra);
    return 0;
}

int sh_parse(const char *text, int *index, int *count, char *err, size_t errlen) {
    char *end;
    long i = strtol(text, &end, 10);
    if (end == text || *end != '/')
        return bench_errf(err, errlen, "--shard %s: expected i/N (e.g. 0/3: the first of 3 shards)", text);
    const char *ns = end + 1;
    long n = strtol(ns, &end, 10);
    if (end == ns || *end) return bench_errf(err, errlen, "--shard %s: expected i/N (e.g. 0/3: the first of 3 shards)", text);
    if (n < 1 || n > 100000) return bench_errf(err, errlen, "--shard %s: N = %ld: expected 1 .. 100000 shards", text, n);
    if (i < 0 || i >= n)
        return bench_errf(err, errlen, "--shard %s: i = %ld: expected 0 <= i < %ld (shards count from 0, as Slurm array "
                                       "task ids do with --array=0-%ld)", text, i, n, n - 1);
    *index = (int)i;
    *count = (int)n;
    return 0;
}

int sh_variant_cells(const sh_plan *p, int shard, int variant) {
    int n = 0;
    for (int k = p->start[shard]; k < p->start[shard + 1]; k++) n += p->cells[k].variant == variant;
    return n;
}

int sh_keeps(const sh_plan *p, int shard, int variant, int rep) {
    if (rep < p->warmup) return sh_variant_cells(p, shard, variant) > 0;
    for (int k = p->start[shard]; k < p->start[shard + 1]; k++)
        if (p->cells[k].variant == variant && p->cells[k].rep == rep) return 1;
    return 0;
}

static cJSON *sh_cells_json(const sh_plan *p, int shard) {
    cJSON *a = cJSON_CreateArray();
    for (int k = p->start[shard]; a && k < p->start[shard + 1]; k++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "variant", p->cells[k].variant);
        cJSON_AddNumberToObject(c, "repetition", p->cells[k].rep);
        cJSON_AddItemToArray(a, c);
    }
    return a;
}

cJSON *sh_shard_json(const sh_plan *p, int shard) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "index", shard);
    cJSON_AddNumberToObject(o, "count", p->n_shards);
    cJSON_AddNumberToObject(o, "plan_cells", p->n_cells);
    cJSON_AddItemToObject(o, "cells", sh_cells_json(p, shard));
    return o;
}

cJSON *sh_plan_json(const scenario *s, const sh_plan *p, const char *run_cmd) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "schema", "bench-plan/1");
    cJSON_AddStringToObject(o, "scenario", s->name);
    cJSON_AddStringToObject(o, "file", s->file);
    cJSON_AddNumberToObject(o, "shards", p->n_shards);
    cJSON_AddNumberToObject(o, "repetitions", s->repetitions);
    cJSON_AddNumberToObject(o, "warmup", s->warmup);
    cJSON_AddNumberToObject(o, "cells", p->n_cells);
    cJSON_AddStringToObject(o, "order", "the unsharded run order (repetition-major, variants interleaved) cut into "
                                        "contiguous pieces; the first cells % shards pieces hold one cell more");
    cJSON *vars = cJSON_AddArrayToObject(o, "variants");
    for (int vi = 0; vi < s->n_variants; vi++) {
        if (!s->variants[vi].selected) continue;
        cJSON *v = cJSON_CreateObject();
        cJSON_AddNumberToObject(v, "index", vi);
        cJSON_AddStringToObject(v, "key", s->variants[vi].key);
        cJSON_AddItemToArray(vars, v);
    }
    cJSON *sh = cJSON_AddArrayToObject(o, "plan");
    for (int i = 0; i < p->n_shards; i++) {
        cJSON *x = sh_shard_json(p, i);
        if (!x) break;
        cJSON *per = cJSON_AddObjectToObject(x, "variant_cells");
        cJSON *wu = cJSON_AddArrayToObject(x, "warmup_variants");
        for (int vi = 0; vi < s->n_variants; vi++) {
            int n = sh_variant_cells(p, i, vi);
            if (!n) continue;
            char k[16];
            snprintf(k, sizeof(k), "%d", vi);
            cJSON_AddNumberToObject(per, k, n);
            if (p->warmup) cJSON_AddItemToArray(wu, cJSON_CreateNumber(vi));
        }
        char cmd[2048];
        snprintf(cmd, sizeof(cmd), "%s --shard %d/%d", run_cmd, i, p->n_shards);
        cJSON_AddStringToObject(x, "command", cmd);
        cJSON_AddItemToArray(sh, x);
    }
    return o;
}
