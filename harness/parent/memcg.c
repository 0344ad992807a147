/* Memory cgroups read from outside: see memcg.h. */
#include "memcg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The mount point of the v2 hierarchy (fstype cgroup2), or of v1's with the memory
 * controller (fstype cgroup, option memory). */
static int mc_mount(int v2, char *out, size_t len) {
    FILE *f = fopen("/proc/self/mounts", "r");
    if (!f) return -1;
    char dev[256], dir[512], type[64], opts[512];
    int rc = -1;
    while (fscanf(f, "%255s %511s %63s %511s %*d %*d", dev, dir, type, opts) == 4) {
        int hit = v2 ? !strcmp(type, "cgroup2") : !strcmp(type, "cgroup") && (strstr(opts, ",memory") || !strncmp(opts, "memory", 6));
        if (hit) {
            snprintf(out, len, "%s", dir);
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* The value after "key " in a file of "key value" lines. */
static int mc_key(const char *path, const char *key, int64_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char k[64];
    long long v;
    int rc = -1;
    while (fscanf(f, "%63s %lld", k, &v) == 2)
        if (!strcmp(k, key)) {
            *out = v;
            rc = 0;
            break;
        }
    fclose(f);
    return rc;
}

static int mc_file(const mc_state *st, const char *name, char *path, size_t len) {
    return snprintf(path, len, "%s/%s", st->dir, name) < (int)len ? 0 : -1;
}

int64_t mc_oom_kills(const mc_state *st) {
    char path[600];
    int64_t n;
    if (!st->found) return -1;
    /* v2 names it memory.events; v1 keeps it in memory.oom_control (Linux 4.13+) */
    if (!mc_file(st, "memory.events", path, sizeof(path)) && !mc_key(path, "oom_kill", &n)) return n;
    if (!mc_file(st, "memory.oom_control", path, sizeof(path)) && !mc_key(path, "oom_kill", &n)) return n;
    return -1;
}

static void mc_limit(mc_state *st) {
    char path[600], text[64] = "";
    static const char *const names[] = {"memory.max", "memory.limit_in_bytes"};
    for (int i = 0; i < 2; i++) {
        if (mc_file(st, names[i], path, sizeof(path))) continue;
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int got = fgets(text, sizeof(text), f) != NULL;
        fclose(f);
        if (!got) continue;
        /* "max" (v2) or a page-rounded LLONG_MAX (v1): no limit */
        unsigned long long v = strtoull(text, NULL, 10);
        st->limit = !strncmp(text, "max", 3) || v >= (1ull << 62) ? 0 : v;
        return;
    }
}

void mc_read(pid_t pid, mc_state *out) {
    memset(out, 0, sizeof(*out));
    char path[64], line[768], mnt[512];
    snprintf(path, sizeof(path), pid ? "/proc/%d/cgroup" : "/proc/self/cgroup", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return;
    /* lines "ID:CONTROLLERS:PATH"; v1's memory line wins over v2's "0::PATH", since on a hybrid
     * machine the v2 hierarchy holds no memory controller */
    char v1[512] = "", v2[512] = "";
    int has_v1 = 0, has_v2 = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrl = c1 + 1, *cg = c2 + 1;
        if (!*ctrl) {
            snprintf(v2, sizeof(v2), "%s", cg);
            has_v2 = 1;
        } else if (!strcmp(ctrl, "memory") || strstr(ctrl, "memory")) {
            snprintf(v1, sizeof(v1), "%s", cg);
            has_v1 = 1;
        }
    }
    fclose(f);
    const char *cg = has_v1 && !mc_mount(0, mnt, sizeof(mnt)) ? v1 : has_v2 && !mc_mount(1, mnt, sizeof(mnt)) ? v2 : NULL;
    if (!cg) return;
    int w = snprintf(out->dir, sizeof(out->dir), "%s%s", mnt, cg);
    if (w < 0 || (size_t)w >= sizeof(out->dir)) return;   /* a path too long to be sure of */
    out->found = 1;
    if ((out->oom_kills = mc_oom_kills(out)) < 0) {
        out->found = 0;
        return;
    }
    mc_limit(out);
}
