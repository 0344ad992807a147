/* The requests of a serving run: see serve_reqs.h. */
#include "serve_reqs.h"

#include <stdlib.h>
#include <string.h>

void sv_reqs_free(sv_reqs *r) {
    if (!r) return;
    free(r->r);
    free(r->ids);
    free(r->turn);
    free(r->session);
    memset(r, 0, sizeof(*r));
}
