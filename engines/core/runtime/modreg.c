#include "modreg.h"

#include "engines/abi/alloc.h"
#include "engines/abi/device.h"
#include "engines/abi/kv.h"
#include "engines/abi/loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define MODREG_ON_VALGRIND RUNNING_ON_VALGRIND
#endif
#endif
#ifndef MODREG_ON_VALGRIND
#define MODREG_ON_VALGRIND 0
#endif

char *modreg_default_dir(const char *dir) {
    if (dir && *dir) return strdup(dir);
    const char *env = getenv("BENCH_MODULE_PATH");
    if (env && *env) return strdup(env);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return strdup("modules");
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    size_t len = strlen(exe) + sizeof("/modules");
    char *out = malloc(len);
    if (out) snprintf(out, len, "%s/modules", exe);
    return out;
}

/* The interface versions of each family this bench takes, checked once, when a module loads:
 * a module outside [min, max] is refused with both numbers, so that no caller meets it. */
static const struct {
    const char *family;
    uint32_t min, max;
} modreg_ifaces[] = {
    {"loader", BENCH_LOADER_IFACE_VERSION, BENCH_LOADER_IFACE_VERSION},
    {"kv", BENCH_KV_IFACE_MIN_VERSION, BENCH_KV_IFACE_VERSION},
    {"alloc", BENCH_ALLOC_IFACE_VERSION, BENCH_ALLOC_IFACE_VERSION},
    {"device", BENCH_DEVICE_IFACE_VERSION, BENCH_DEVICE_IFACE_VERSION},
};

static int check_iface(const char *path, const bench_module *m, char *err, size_t errlen) {
    for (size_t i = 0; i < sizeof(modreg_ifaces) / sizeof(modreg_ifaces[0]); i++) {
        if (strcmp(m->family, modreg_ifaces[i].family)) continue;
        /* every family's vtable starts with its version */
        uint32_t v = *(const uint32_t *)m->iface, lo = modreg_ifaces[i].min, hi = modreg_ifaces[i].max;
        if (v >= lo && v <= hi) return 0;
        if (lo == hi)
            return bench_errf(err, errlen, "%s: %s interface version %u, this bench takes %u: rebuild the module", path,
                              m->family, v, lo);
        return bench_errf(err, errlen, "%s: %s interface version %u, this bench takes %u..%u: rebuild the module", path,
                          m->family, v, lo, hi);
    }
    return bench_errf(err, errlen, "%s: unknown module family \"%s\" (have: loader, kv, alloc, device)", path, m->family);
}

static int load_path(const char *path, modreg_entry *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return bench_errf(err, errlen, "%s: cannot load module: %s", path, dlerror());
    bench_module_init_fn init;
    *(void **)&init = dlsym(h, BENCH_MODULE_INIT_SYMBOL);
    if (!init) {
        dlclose(h);
        return bench_errf(err, errlen, "%s: not a bench module (no %s symbol)", path, BENCH_MODULE_INIT_SYMBOL);
    }
    const bench_module *m = init();
    if (!m || m->api_version != BENCH_MODULE_API_VERSION) {
        unsigned v = m ? m->api_version : 0;
        dlclose(h);
        return bench_errf(err, errlen, "%s: module API version %u, this bench expects %u: rebuild the module",
                          path, v, BENCH_MODULE_API_VERSION);
    }
    if (!m->family || !m->name || !m->iface) {
        dlclose(h);
        return bench_errf(err, errlen, "%s: registration lacks family, name or iface", path);
    }
    if (check_iface(path, m, err, errlen)) {
        dlclose(h);
        return -1;
    }
    out->mod = m;
    out->handle = h;
    out->path = strdup(path);
    return 0;
}

static int is_cpu(const char *device) { return !device || !*device || !strcmp(device, "cpu"); }

char *modreg_device_dir(const char *dir, const char *device) {
    char *d = modreg_default_dir(dir);
    if (!d || is_cpu(device)) return d;
    size_t len = strlen(d) + strlen(device) + 2;
    char *out = malloc(len);
    if (out) snprintf(out, len, "%s/%s", d, device);
    free(d);
    return out;
}

/* "; it is built for cuda (--device cuda)" when another device's directory has the
 * module (the CPU's is the module directory, every other device a directory in it). */
static void built_for(const char *dir, const char *device, const char *family, const char *name, char *out, size_t n) {
    out[0] = 0;
    char *top = modreg_default_dir(dir), path[PATH_MAX];
    if (!top) return;
    snprintf(path, sizeof(path), "%s/%s_%s.so", top, family, name);
    if (!is_cpu(device) && access(path, R_OK) == 0) snprintf(out, n, "; it is built for cpu (--device cpu)");
    DIR *d = out[0] ? NULL : opendir(top);
    struct dirent *de;
    while (d && !out[0] && (de = readdir(d))) {
        if (de->d_name[0] == '.' || (!is_cpu(device) && !strcmp(de->d_name, device))) continue;
        snprintf(path, sizeof(path), "%s/%s/%s_%s.so", top, de->d_name, family, name);
        if (access(path, R_OK) == 0) snprintf(out, n, "; it is built for %.40s (--device %.40s)", de->d_name, de->d_name);
    }
    if (d) closedir(d);
    free(top);
}

/* A module or device name becomes part of a path that is dlopen'ed: one that could
 * climb out of the module directory ("../x", "a/b") would load any library. */
static int name_ok(const char *n) {
    return n && *n && n[0] != '.' && !strchr(n, '/');
}

int modreg_load_for(const char *dir, const char *device, const char *family, const char *name,
                    modreg_entry *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (!name_ok(name) || (device && !is_cpu(device) && !name_ok(device)))
        return bench_errf(err, errlen, "%s module \"%s\"%s%s: not a module name (no '/', no leading '.')", family,
                          name ? name : "", device ? " on device " : "", device ? device : "");
    char *d = modreg_device_dir(dir, device);
    if (!d) return bench_errf(err, errlen, "out of memory");
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s_%s.so", d, family, name);
    int rc = 0;
    if (access(path, R_OK) != 0) {
        char *have = modreg_names(d, family), elsewhere[128];
        built_for(dir, device, family, name, elsewhere, sizeof(elsewhere));
        bench_errf(err, errlen, "unknown %s%s%s module \"%s\" (have: %s; looked in %s)%s", is_cpu(device) ? "" : device,
                   is_cpu(device) ? "" : " ", family, name, have && *have ? have : "none", d, elsewhere);
        free(have);
        rc = -1;
    } else {
        rc = load_path(path, out, err, errlen);
        if (!rc && (strcmp(out->mod->family, family) || strcmp(out->mod->name, name))) {
            bench_errf(err, errlen, "%s: registers as %s/%s, expected %s/%s", path, out->mod->family,
                       out->mod->name, family, name);
            modreg_entry_close(out);
            rc = -1;
        }
    }
    free(d);
    return rc;
}

int modreg_load(const char *dir, const char *family, const char *name, modreg_entry *out,
                char *err, size_t errlen) {
    return modreg_load_for(dir, NULL, family, name, out, err, errlen);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted file names <family>_*.so in dir (or every *.so when family is NULL). */
static int scan(const char *dir, const char *family, char ***out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 0;
    char **v = NULL;
    struct dirent *de;
    size_t flen = family ? strlen(family) : 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 3, ".so")) continue;
        if (family && (strncmp(de->d_name, family, flen) || de->d_name[flen] != '_')) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, (size_t)cap * sizeof(*v));
            if (!nv) break;
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name))) break;
        n++;
    }
    closedir(d);
    if (n) qsort(v, (size_t)n, sizeof(*v), cmp_str);
    *out = v;
    return n;
}

char *modreg_names(const char *dir, const char *family) {
    char **v;
    int n = scan(dir, family, &v);
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(v[i]) + 2;
    char *s = malloc(len);
    if (s) {
        size_t flen = strlen(family), used = 0;
        for (int i = 0; i < n; i++) {
            if (i) { memcpy(s + used, ", ", 2); used += 2; }
            size_t nl = strlen(v[i]) - flen - 4; /* "FAMILY_" ... ".so" */
            memcpy(s + used, v[i] + flen + 1, nl);
            used += nl;
        }
        s[used] = 0;
    }
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
    return s;
}

/* The *.so of dir, then those of each directory below it as "<sub>/<file>" (a device's modules). */
static int scan_tree(const char *dir, char ***out) {
    int n = scan(dir, NULL, out);
    DIR *d = opendir(dir);
    if (!d) return n;
    struct dirent *de;
    while ((de = readdir(d))) {
        char sub[PATH_MAX];
        struct stat st;
        if (de->d_name[0] == '.') continue;
        snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
        if (stat(sub, &st) || !S_ISDIR(st.st_mode)) continue;
        char **v;
        int m = scan(sub, NULL, &v);
        char **nv = m ? realloc(*out, (size_t)(n + m) * sizeof(char *)) : *out;
        for (int i = 0; i < m; i++) {
            size_t len = strlen(de->d_name) + strlen(v[i]) + 2;
            char *rel = nv ? malloc(len) : NULL;
            if (rel) {
                snprintf(rel, len, "%s/%s", de->d_name, v[i]);
                nv[n++] = rel;
            }
            free(v[i]);
        }
        free(v);
        if (nv) *out = nv;
    }
    closedir(d);
    return n;
}

int modreg_open_all(const char *dir, modreg *r, char *warnings, size_t wlen, char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    if (warnings && wlen) warnings[0] = 0;
    r->dir = modreg_default_dir(dir);
    if (!r->dir) return bench_errf(err, errlen, "out of memory");
    char **v;
    int n = scan_tree(r->dir, &v);
    if (n == 0) {
        free(v);
        return bench_errf(err, errlen, "%s: no modules found (build them with `make`)", r->dir);
    }
    r->v = calloc((size_t)n, sizeof(*r->v));
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX], e[512];
        snprintf(path, sizeof(path), "%s/%s", r->dir, v[i]);
        if (r->v && load_path(path, &r->v[r->n], e, sizeof(e)) == 0) r->n++;
        else if (warnings && r->v) {
            size_t used = strlen(warnings);
            snprintf(warnings + used, wlen - used, "%s\n", e);
        }
        free(v[i]);
    }
    free(v);
    if (!r->v) return bench_errf(err, errlen, "out of memory");
    return 0;
}

static int check_value(const bench_option_desc *d, const char *v, char *why, size_t n) {
    uint64_t u;
    int b;
    if (!strcmp(d->type, "bool")) return bench_parse_bool(v, &b) ? (snprintf(why, n, "a bool (0/1/true/false)"), -1) : 0;
    if (!strcmp(d->type, "size") || !strcmp(d->type, "int"))
        return bench_parse_size(v, &u) ? (snprintf(why, n, "%s", d->type[0] == 's' ? "a size (e.g. 4096, 64k, 1m)" : "a non-negative integer"), -1) : 0;
    if (!strncmp(d->type, "enum:", 5)) {
        const char *list = d->type + 5;
        size_t vl = strlen(v);
        for (const char *p = list; *p;) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            if (len == vl && !strncmp(p, v, len)) return 0;
            p += len + (bar ? 1 : 0);
        }
        snprintf(why, n, "one of %s", list);
        return -1;
    }
    return 0;
}

int modreg_check_opts(const bench_module *m, const bench_opts *opts, char *err, size_t errlen) {
    for (int i = 0; opts && i < opts->n; i++) {
        const bench_option_desc *d = m->options;
        while (d && d->name && strcmp(d->name, opts->v[i].key)) d++;
        if (!d || !d->name) {
            char have[512] = "";
            for (d = m->options; d && d->name; d++) {
                if (have[0]) strncat(have, ", ", sizeof(have) - strlen(have) - 1);
                strncat(have, d->name, sizeof(have) - strlen(have) - 1);
            }
            return bench_errf(err, errlen, "%s %s: unknown option \"%s\" (have: %s)", m->family, m->name,
                              opts->v[i].key, have[0] ? have : "none");
        }
        char why[256];
        if (check_value(d, opts->v[i].value, why, sizeof(why)))
            return bench_errf(err, errlen, "%s %s: option %s=%s: expected %s", m->family, m->name,
                              d->name, opts->v[i].value, why);
    }
    return 0;
}

int modreg_parse_opts(const char *text, bench_opts *opts, void **storage, char *err, size_t errlen) {
    opts->n = 0;
    opts->v = NULL;
    *storage = NULL;
    if (!text || !*text) return 0;
    int n = 1;
    for (const char *p = text; *p; p++) n += *p == ',';
    size_t tl = strlen(text) + 1;
    /* one block: the pair array, then a copy of the text cut at ',' and '=' */
    char *mem = malloc((size_t)n * sizeof(bench_opt) + tl);
    if (!mem) return bench_errf(err, errlen, "out of memory");
    bench_opt *v = (bench_opt *)mem;
    char *s = mem + (size_t)n * sizeof(bench_opt);
    memcpy(s, text, tl);
    int k = 0;
    for (char *tok = s; tok;) {
        char *comma = strchr(tok, ',');
        if (comma) *comma = 0;
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok) {
            bench_errf(err, errlen, "option \"%s\": expected key=value", tok);
            free(mem);
            return -1;
        }
        *eq = 0;
        v[k].key = tok;
        v[k].value = eq + 1;
        k++;
        tok = comma ? comma + 1 : NULL;
    }
    opts->n = k;
    opts->v = v;
    *storage = mem;
    return 0;
}

void modreg_entry_close(modreg_entry *e) {
    if (!e) return;
    /* Sanitizer builds, and any build under valgrind, keep modules mapped so that leak
     * reports, massif and callgrind can still symbolize their frames at exit. */
#if !defined(__SANITIZE_ADDRESS__)
    if (e->handle && !MODREG_ON_VALGRIND) dlclose(e->handle);
#endif
    free(e->path);
    memset(e, 0, sizeof(*e));
}

void modreg_close(modreg *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) modreg_entry_close(&r->v[i]);
    free(r->v);
    free(r->dir);
    memset(r, 0, sizeof(*r));
}
