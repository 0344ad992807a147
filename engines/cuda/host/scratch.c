#include "scratch.h"

#include <stdint.h>
#include <string.h>

/* Appends count * elem bytes at an aligned offset; 0 on overflow (top stays 0 from then on). */
static size_t take(size_t *top, size_t count, size_t elem) {
    if (!*top) return 0;
    size_t at = *top;
    if (elem && count > (SIZE_MAX - DSL_ALIGN - at) / elem) { *top = 0; return 0; }
    *top = (at + count * elem + DSL_ALIGN - 1) / DSL_ALIGN * DSL_ALIGN;
    return at - DSL_ALIGN; /* offsets start at 0: top is kept one DSL_ALIGN ahead so 0 means failed */
}

size_t dsl_make(const dsl_shape *s, int n, dsl_layout *out) {
    memset(out, 0, sizeof(*out));
    if (n < 1 || s->dim < 1 || s->hidden < 1 || s->kv_dim < 1 || s->vocab < 1) return 0;
    size_t nn = (size_t)n, wide = (size_t)(s->dim > s->hidden ? s->dim : s->hidden);
    size_t top = DSL_ALIGN;
    out->x = take(&top, nn * (size_t)s->dim, 4);
    out->xb = take(&top, nn * (size_t)s->dim, 4);
    out->q = take(&top, nn * (size_t)s->dim, 4);
    out->k = take(&top, nn * (size_t)s->kv_dim, 4);
    out->v = take(&top, nn * (size_t)s->kv_dim, 4);
    out->hb = take(&top, nn * (size_t)s->hidden, 4);
    out->hb2 = take(&top, nn * (size_t)s->hidden, 4);
    out->xh = take(&top, nn * wide, 2);
    out->tokens = take(&top, nn, 4);
    if (!top) {
        memset(out, 0, sizeof(*out));
        return 0;
    }
    out->total = top - DSL_ALIGN;
    return out->total;
}
