/* Looking workload kinds up: see kind.h. */
#include "kind.h"

#include <stdio.h>
#include <string.h>

#include "harness/scenario/scenario_types.h"

static const sc_kind *sc_kinds;
static int sc_n_kinds;

void sc_use_kinds(const sc_kind *kinds, int n) {
    sc_kinds = kinds;
    sc_n_kinds = n;
}

static int sc_same(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

const sc_kind *sc_kind_for_file(const char *file_kind, char *why, size_t whylen) {
    for (int i = 0; i < sc_n_kinds; i++)
        if (sc_same(sc_kinds[i].file_kind, file_kind)) return &sc_kinds[i];
    if (!sc_n_kinds) {
        snprintf(why, whylen, "no workload kinds are known (the program did not call sc_use_kinds)");
        return NULL;
    }
    char have[256] = "";
    for (int i = 0; i < sc_n_kinds; i++)
        if (sc_kinds[i].file_kind && !strstr(have, sc_kinds[i].file_kind)) {
            size_t used = strlen(have);
            snprintf(have + used, sizeof(have) - used, "%s\"%s\"", used ? " or " : "", sc_kinds[i].file_kind);
        }
    snprintf(why, whylen, "expected %s, got \"%s\" (leave \"kind\" out for an inference or serving scenario)",
             have[0] ? have : "no kind", file_kind ? file_kind : "");
    return NULL;
}

const sc_kind *sc_kind_for_scenario(const sc_kind *k, const scenario *s) {
    for (int i = 0; i < sc_n_kinds; i++) {
        const sc_kind *c = &sc_kinds[i];
        if (sc_same(c->file_kind, k->file_kind) && (c->requests < 0 || c->requests == (s->requests != NULL))) return c;
    }
    return k;
}

const sc_kind *sc_kind_for_worker(const char *worker_kind) {
    for (int i = 0; i < sc_n_kinds; i++)
        if (sc_same(sc_kinds[i].worker_kind, worker_kind)) return &sc_kinds[i];
    return NULL;
}
