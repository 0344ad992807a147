#include "staging.h"

#include "engines/abi/module.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t stg_layout(const uint64_t *nbytes, int n, uint64_t align, uint64_t *dst) {
    if (align == 0 || (align & (align - 1))) return 0;
    uint64_t top = 0;
    for (int i = 0; i < n; i++) {
        dst[i] = top;
        if (nbytes[i] > UINT64_MAX - top - align) return 0;
        top = (top + nbytes[i] + align - 1) & ~(align - 1);
    }
    return top ? top : align;
}

/* ---- making the plan ---- */

typedef struct builder {
    stg_plan *p;
    int cap_chunks, cap_copies;
    int open;               /* the last chunk may still grow */
} builder;

static int push_chunk(builder *b, int file, uint64_t off) {
    stg_plan *p = b->p;
    if (p->n_chunks == b->cap_chunks) {
        int cap = b->cap_chunks ? 2 * b->cap_chunks : 64;
        stg_chunk *nc = realloc(p->chunks, (size_t)cap * sizeof(*nc));
        if (!nc) return -1;
        p->chunks = nc;
        b->cap_chunks = cap;
    }
    p->chunks[p->n_chunks++] = (stg_chunk){.file = file, .off = off, .len = 0, .first_copy = p->n_copies};
    b->open = 1;
    return 0;
}

static int push_copy(builder *b, size_t slot_off, uint64_t dst, size_t len) {
    stg_plan *p = b->p;
    if (p->n_copies == b->cap_copies) {
        int cap = b->cap_copies ? 2 * b->cap_copies : 64;
        stg_copy *nc = realloc(p->copies, (size_t)cap * sizeof(*nc));
        if (!nc) return -1;
        p->copies = nc;
        b->cap_copies = cap;
    }
    p->copies[p->n_copies++] = (stg_copy){slot_off, dst, len};
    p->chunks[p->n_chunks - 1].n_copies++;
    p->bytes_copied += len;
    return 0;
}

static int by_file_offset(const void *a, const void *b, void *base) {
    const stg_piece *x = (const stg_piece *)base + *(const int *)a, *y = (const stg_piece *)base + *(const int *)b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

int stg_plan_make(const stg_piece *pieces, int n, size_t chunk_bytes, size_t max_gap, stg_plan *out,
                  char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (chunk_bytes == 0 || n < 0) return bench_errf(err, errlen, "staging: chunk of %zu bytes, %d pieces", chunk_bytes, n);
    out->chunk_bytes = chunk_bytes;
    int *order = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!order) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "staging: out of memory");
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof(int), by_file_offset, (void *)pieces);
    builder b = {.p = out};
    for (int k = 0; k < n; k++) {
        const stg_piece *pc = &pieces[order[k]];
        if (pc->len > UINT64_MAX - pc->off) {
            bench_errf(err, errlen, "staging: piece %d [%llu, +%llu) overflows", order[k],
                     (unsigned long long)pc->off, (unsigned long long)pc->len);
            free(order);
            stg_plan_free(out);
            return -1;
        }
        uint64_t pos = pc->off, end = pc->off + pc->len;
        while (pos < end) {
            stg_chunk *c = b.open ? &out->chunks[out->n_chunks - 1] : NULL;
            /* the open chunk takes pos when it is in the same file, pos lies at or after
             * its start, the gap to pos is short enough, and there is room past pos */
            int fits = c && c->file == pc->file && pos >= c->off && pos - c->off < chunk_bytes &&
                       (pos <= c->off + c->len || pos - (c->off + c->len) <= max_gap);
            if (!fits) {
                if (push_chunk(&b, pc->file, pos)) goto oom;
                c = &out->chunks[out->n_chunks - 1];
            }
            size_t at = (size_t)(pos - c->off);
            uint64_t take = end - pos;
            if (take > chunk_bytes - at) take = chunk_bytes - at;
            if (at + take > c->len) c->len = at + (size_t)take;
            if (push_copy(&b, at, pc->dst + (pos - pc->off), (size_t)take)) goto oom;
            pos += take;
            if (out->chunks[out->n_chunks - 1].len == chunk_bytes) b.open = 0;
        }
    }
    for (int i = 0; i < out->n_chunks; i++) out->bytes_read += out->chunks[i].len;
    free(order);
    return 0;
oom:
    free(order);
    stg_plan_free(out);
    return bench_errc(err, errlen, BENCH_ERR_NOMEM, "staging: out of memory");
}

void stg_plan_free(stg_plan *p) {
    if (!p) return;
    free(p->chunks);
    free(p->copies);
    memset(p, 0, sizeof(*p));
}

/* ---- running it ---- */

int stg_run(const stg_plan *p, int n_slots, const stg_ops *ops, void *user, char *err, size_t errlen) {
    if (n_slots < 1) return bench_errf(err, errlen, "staging: %d slots", n_slots);
    /* busy[s]: slot s was submitted and not yet waited for */
    unsigned char *busy = calloc((size_t)n_slots, 1);
    if (!busy) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "staging: out of memory");
    int rc = 0;
    for (int k = 0; k < p->n_chunks && !rc; k++) {
        int slot = k % n_slots;
        const stg_chunk *c = &p->chunks[k];
        if (busy[slot]) {
            busy[slot] = 0;
            if ((rc = ops->wait(user, slot, err, errlen))) break;
        }
        if ((rc = ops->read(user, slot, c, err, errlen))) break;
        for (int i = 0; i < c->n_copies && !rc; i++) rc = ops->copy(user, slot, &p->copies[c->first_copy + i], err, errlen);
        /* a slot with copies queued is waited for even when a later copy failed */
        if (!rc || c->n_copies) {
            int src = ops->submit(user, slot, rc ? NULL : err, rc ? 0 : errlen);
            busy[slot] = src == 0;
            if (!rc) rc = src;
        }
    }
    for (int s = 0; s < n_slots; s++)
        if (busy[s]) {
            int wrc = ops->wait(user, s, rc ? NULL : err, rc ? 0 : errlen);
            if (!rc) rc = wrc;
        }
    free(busy);
    return rc;
}
