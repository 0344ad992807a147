/* The table of targets: see targets.h. */
#include "targets.h"

#include <stdio.h>
#include <string.h>

#include "harness/child/engine_target.h"
#include "harness/child/http_worker.h"

static const wt_target_i *const wt_table[] = {
    &wt_engine,
    &wt_http,
};
#define WT_N (sizeof(wt_table) / sizeof(wt_table[0]))

const wt_target_i *wt_find(const char *name) {
    for (size_t i = 0; name && i < WT_N; i++)
        if (!strcmp(wt_table[i]->name, name)) return wt_table[i];
    return NULL;
}

void wt_names(char *buf, size_t len) {
    size_t at = 0;
    if (len) buf[0] = 0;
    for (size_t i = 0; i < WT_N && at < len; i++) {
        int n = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", wt_table[i]->name);
        if (n < 0) break;
        at += (size_t)n;
    }
}
