#include "kvgrow.h"

#include "engines/abi/module.h"
#include <stdio.h>
#include <string.h>

int kvg_dynamic_cap(int n_pos, int step, int max_pos) {
    if (step < 1) step = 1;
    /* 64 bits: n_pos + step may pass INT_MAX */
    int64_t cap = ((int64_t)n_pos + step - 1) / step * step;
    return cap > max_pos ? max_pos : (int)cap;
}

int kvg_vmm_plan(size_t pos_bytes, int max_pos, size_t granularity, uint64_t chunk_opt, kvg_vmm *out,
                 char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (pos_bytes == 0 || max_pos < 1) return bench_errf(err, errlen, "kv vmm: %zu bytes per position, %d positions", pos_bytes, max_pos);
    if (granularity == 0 || (granularity & (granularity - 1)))
        return bench_errf(err, errlen, "kv vmm: allocation granularity %zu is not a power of two", granularity);
    if (chunk_opt > (uint64_t)SIZE_MAX / 2)
        return bench_errf(err, errlen, "kv vmm: option chunk=%llu: too large", (unsigned long long)chunk_opt);
    size_t chunk = chunk_opt ? ((size_t)chunk_opt + granularity - 1) & ~(granularity - 1) : granularity;
    if ((size_t)max_pos > SIZE_MAX / pos_bytes) return bench_errf(err, errlen, "kv vmm: %d positions of %zu bytes overflow", max_pos, pos_bytes);
    size_t need = (size_t)max_pos * pos_bytes;
    size_t chunks = need / chunk + (need % chunk != 0);
    *out = (kvg_vmm){.pos_bytes = pos_bytes, .max_pos = max_pos, .chunk = chunk, .reserve = chunks * chunk,
                     .max_chunks = chunks};
    return 0;
}

size_t kvg_vmm_chunks(const kvg_vmm *v, int n_pos) {
    if (n_pos <= 0) return 0;
    if (n_pos > v->max_pos) n_pos = v->max_pos;
    size_t need = (size_t)n_pos * v->pos_bytes;
    return need / v->chunk + (need % v->chunk != 0);
}
