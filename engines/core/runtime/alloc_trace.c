#include "alloc_trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/alloc.h"
#include "util/ut_vec.h"

#define AT_HEADER "# bench-alloc-trace 1"

/* ---- recording ---- */

typedef struct at_live {
    void *p;
    uint32_t id;
    uint64_t size;
} at_live;

struct at_recorder {
    FILE *f;
    bench_allocator inner;
    bench_allocator self;       /* {&at_iface, this} */
    uint32_t next_id;
    int n_live, cap_live;
    at_live *live;              /* (n_live) blocks not yet freed; the engine holds a handful */
    uint64_t calls, bytes_live, peak_live;
    int failed;                 /* a write or a bookkeeping allocation failed */
};

static void *at_rec_alloc(void *ctx, size_t size, size_t align) {
    at_recorder *r = ctx;
    void *p = r->inner.iface->alloc(r->inner.ctx, size, align);
    if (!p) return NULL;
    if (UT_VEC_RESERVE(r->live, r->cap_live, r->n_live + 1)) {
        r->failed = 1;
        return p;
    }
    uint32_t id = r->next_id++;
    r->live[r->n_live++] = (at_live){p, id, size};
    r->calls++;
    r->bytes_live += size;
    if (r->bytes_live > r->peak_live) r->peak_live = r->bytes_live;
    if (fprintf(r->f, "a %u %zu %zu\n", id, size, align) < 0) r->failed = 1;
    return p;
}

static void at_rec_free(void *ctx, void *p, size_t size) {
    at_recorder *r = ctx;
    if (!p) return;
    /* the newest block is the likeliest to go first */
    for (int i = r->n_live - 1; i >= 0; i--) {
        if (r->live[i].p != p) continue;
        if (fprintf(r->f, "f %u\n", r->live[i].id) < 0) r->failed = 1;
        r->calls++;
        r->bytes_live -= r->live[i].size;
        r->live[i] = r->live[--r->n_live];
        break;
    }
    r->inner.iface->free(r->inner.ctx, p, size);
}

static void at_rec_reset(void *ctx) {
    at_recorder *r = ctx;
    if (fprintf(r->f, "r\n") < 0) r->failed = 1;
    r->n_live = 0;
    r->bytes_live = 0;
    r->inner.iface->reset(r->inner.ctx);
}

static const struct bench_alloc_iface at_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .create = NULL,     /* made by at_recorder_open */
    .alloc = at_rec_alloc,
    .free = at_rec_free,
    .reset = at_rec_reset,
    .counters = NULL,   /* the engine asks the inner allocator */
    .destroy = NULL,    /* at_recorder_close */
};

/* An inner allocator without reset must not look like one that has it. */
static const struct bench_alloc_iface at_iface_noreset = {
    .version = BENCH_ALLOC_IFACE_VERSION,
    .alloc = at_rec_alloc,
    .free = at_rec_free,
    .reset = NULL,
};

int at_recorder_open(const char *path, const bench_allocator *inner, at_recorder **out, char *err, size_t errlen) {
    *out = NULL;
    at_recorder *r = calloc(1, sizeof(*r));
    if (!r) return bench_errf(err, errlen, "trace %s: out of memory", path);
    r->f = fopen(path, "w");
    if (!r->f) {
        int e = errno;
        free(r);
        return bench_errf(err, errlen, "trace %s: cannot write: %s", path, strerror(e));
    }
    r->inner = *inner;
    r->self = (bench_allocator){inner->iface->reset ? &at_iface : &at_iface_noreset, r};
    fprintf(r->f, "%s\n", AT_HEADER);
    *out = r;
    return 0;
}

const bench_allocator *at_recorder_allocator(const at_recorder *r) { return &r->self; }

void at_recorder_totals(const at_recorder *r, uint64_t *calls, uint64_t *peak_live) {
    *calls = r->calls;
    *peak_live = r->peak_live;
}

int at_recorder_close(at_recorder *r, char *err, size_t errlen) {
    if (!r) return 0;
    int bad = r->failed;
    if (fclose(r->f)) bad = 1;
    free(r->live);
    free(r);
    return bad ? bench_errf(err, errlen, "trace: a write failed (disk full?) or out of memory") : 0;
}

/* ---- reading ---- */

static int at_pow2(uint64_t x) { return x && !(x & (x - 1)); }

int at_load(const char *path, at_trace *t, char *err, size_t errlen) {
    memset(t, 0, sizeof(*t));
    FILE *f = fopen(path, "r");
    if (!f) return bench_errf(err, errlen, "trace %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, cap_ops = 0, cap_ids = 0;
    uint64_t *size_of = NULL;   /* (n_ids) size of each block; UINT64_MAX once freed */
    uint64_t live = 0;
    long ln = 0;
    int rc = -1;
    while (getline(&line, &cap, f) > 0) {
        ln++;
        line[strcspn(line, "\r\n")] = 0;
        if (ln == 1) {
            if (strcmp(line, AT_HEADER)) {
                bench_errf(err, errlen, "trace %s: line 1: expected \"%s\" (made by bench generate --trace-alloc)", path, AT_HEADER);
                goto out;
            }
            continue;
        }
        if (!line[0] || line[0] == '#') continue;
        at_op op = {.kind = (uint8_t)line[0]};
        unsigned long long id = 0, size = 0, align = 0;
        char extra;
        if (op.kind == AT_ALLOC) {
            if (sscanf(line, "a %llu %llu %llu %c", &id, &size, &align, &extra) != 3 || size == 0 || !at_pow2(align) ||
                align > (1u << 30)) {
                bench_errf(err, errlen, "trace %s: line %ld: \"%s\": expected \"a ID SIZE ALIGN\" (SIZE > 0, ALIGN a power of two)",
                           path, ln, line);
                goto out;
            }
            if (id != t->n_ids) {
                bench_errf(err, errlen, "trace %s: line %ld: alloc id %llu, expected %u (ids count up from 0)", path, ln, id, t->n_ids);
                goto out;
            }
            if (UT_VEC_RESERVE(size_of, cap_ids, (size_t)t->n_ids + 1)) {
                bench_errf(err, errlen, "trace %s: out of memory", path);
                goto out;
            }
            size_of[t->n_ids++] = size;
            op.id = (uint32_t)id, op.size = size, op.align = (uint32_t)align;
            live += size;
            if (live > t->peak_live) t->peak_live = live;
            t->calls++;
        } else if (op.kind == AT_FREE) {
            if (sscanf(line, "f %llu %c", &id, &extra) != 1) {
                bench_errf(err, errlen, "trace %s: line %ld: \"%s\": expected \"f ID\"", path, ln, line);
                goto out;
            }
            if (id >= t->n_ids || size_of[id] == UINT64_MAX) {
                bench_errf(err, errlen, "trace %s: line %ld: free of block %llu, which is %s", path, ln, id,
                           id >= t->n_ids ? "not allocated yet" : "already freed");
                goto out;
            }
            live -= size_of[id];
            size_of[id] = UINT64_MAX;
            op.id = (uint32_t)id;
            t->calls++;
        } else if (op.kind == AT_RESET && !line[1]) {
            for (uint32_t i = 0; i < t->n_ids; i++) size_of[i] = UINT64_MAX;
            live = 0;
        } else {
            bench_errf(err, errlen, "trace %s: line %ld: \"%s\": expected a line \"a ID SIZE ALIGN\", \"f ID\" or \"r\"", path, ln, line);
            goto out;
        }
        if (UT_VEC_RESERVE(t->v, cap_ops, t->n + 1)) {
            bench_errf(err, errlen, "trace %s: out of memory", path);
            goto out;
        }
        t->v[t->n++] = op;
    }
    if (ln == 0) {
        bench_errf(err, errlen, "trace %s: empty file", path);
        goto out;
    }
    if (t->calls == 0) {
        bench_errf(err, errlen, "trace %s: no alloc or free line", path);
        goto out;
    }
    for (uint32_t i = 0; i < t->n_ids; i++) t->live_at_end += size_of[i] != UINT64_MAX;
    rc = 0;
out:
    free(line);
    free(size_of);
    fclose(f);
    if (rc) at_trace_free(t);
    return rc;
}

void at_trace_free(at_trace *t) {
    if (!t) return;
    free(t->v);
    memset(t, 0, sizeof(*t));
}
