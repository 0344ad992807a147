#include "util/ut_parse.h"
#include "modreg.h"

#include "engines/abi/alloc.h"
#include "engines/abi/device.h"
#include "engines/abi/kv.h"
#include "engines/abi/loader.h"
#include "util/ut_buf.h"
#include "util/ut_vec.h"

#include <dirent.h>
#include <errno.h>
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

/* A folder of the path (under PATH_MAX) joined with a file name (under 256) */
#define MR_PATH (PATH_MAX + 512)

static int is_cpu(const char *device) { return !device || !*device || !strcmp(device, "cpu"); }

int modreg_check_env(char *err, size_t errlen) {
    const char *env = getenv("BENCH_MODULE_PATH");
    int k = 0;
    for (const char *p = env ? env : ""; *p; k++) {
        size_t len = strcspn(p, ":");
        int shown = (int)(len < 200 ? len : 200);
        if (len && p[0] != '/') {
            snprintf(err, errlen, "BENCH_MODULE_PATH: folder %d, \"%.*s\", is relative: it would load modules from "
                     "whatever directory bench runs in; give absolute folders (e.g. $PWD/%.*s)", k + 1, shown, p, shown, p);
            return -1;
        }
        p += len + (p[len] == ':');
    }
    return 0;
}

/* $BENCH_MODULE_PATH's absolute folders (modreg_check_env), malloc'd; "" when it has none. */
static char *env_module_path(const char *env) {
    char *out = malloc(strlen(env) + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = env; *p;) {
        size_t len = strcspn(p, ":");
        if (len && p[0] == '/') {
            if (o != out) *o++ = ':';
            memcpy(o, p, len);
            o += len;
        }
        p += len + (p[len] == ':');
    }
    *o = 0;
    return out;
}

char *modreg_default_dir(const char *dir) {
    if (dir && *dir) return strdup(dir);
    const char *env = getenv("BENCH_MODULE_PATH");
    if (env && *env) return env_module_path(env);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return strdup("modules");
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    /* the build tree keeps modules beside the binary; `make install` puts the binary in
     * PREFIX/bin and the modules in PREFIX/lib/bench/modules */
    size_t len = strlen(exe) + sizeof("/../lib/bench/modules");
    char *out = malloc(len);
    if (!out) return NULL;
    snprintf(out, len, "%s/modules", exe);
    struct stat st;
    if (stat(out, &st) || !S_ISDIR(st.st_mode)) {
        snprintf(out, len, "%s/../lib/bench/modules", exe);
        if (stat(out, &st) || !S_ISDIR(st.st_mode)) snprintf(out, len, "%s/modules", exe);
    }
    return out;
}

/* The interface versions of each family this bench takes, and the capabilities that
 * belong to it, checked once, when a module loads: a module outside [min, max] is refused
 * with both numbers, so that no caller meets it. */
static const struct {
    const char *family;
    uint32_t min, max;
    uint64_t caps;
} modreg_ifaces[] = {
    {"loader", BENCH_LOADER_IFACE_MIN_VERSION, BENCH_LOADER_IFACE_VERSION, BENCH_CAP_LOADER_MASK},
    {"kv", BENCH_KV_IFACE_MIN_VERSION, BENCH_KV_IFACE_VERSION, BENCH_CAP_KV_MASK},
    {"alloc", BENCH_ALLOC_IFACE_VERSION, BENCH_ALLOC_IFACE_VERSION, BENCH_CAP_ALLOC_MASK},
    {"device", BENCH_DEVICE_IFACE_VERSION, BENCH_DEVICE_IFACE_VERSION, 0},
};

const char *modreg_family(int i) {
    return i >= 0 && (size_t)i < sizeof(modreg_ifaces) / sizeof(modreg_ifaces[0]) ? modreg_ifaces[i].family : NULL;
}

static int check_iface(const char *path, const bench_module *m, char *err, size_t errlen) {
    for (size_t i = 0; i < sizeof(modreg_ifaces) / sizeof(modreg_ifaces[0]); i++) {
        if (strcmp(m->family, modreg_ifaces[i].family)) continue;
        /* every family's vtable starts with its version */
        uint32_t v = *(const uint32_t *)m->iface, lo = modreg_ifaces[i].min, hi = modreg_ifaces[i].max;
        if (m->caps & ~modreg_ifaces[i].caps)
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: declares capabilities 0x%llx that are not of the %s family",
                              path, (unsigned long long)(m->caps & ~modreg_ifaces[i].caps), m->family);
        if (v >= lo && v <= hi) return 0;
        if (lo == hi)
            return bench_errc(err, errlen, BENCH_ERR_REFUSED, "%s: %s interface version %u, this bench takes %u: rebuild the module",
                              path, m->family, v, lo);
        return bench_errc(err, errlen, BENCH_ERR_REFUSED, "%s: %s interface version %u, this bench takes %u..%u: rebuild the module",
                          path, m->family, v, lo, hi);
    }
    char have[64] = "";   /* the families, from the table above */
    for (int i = 0; modreg_family(i); i++)
        snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%s", i ? ", " : "", modreg_family(i));
    return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: unknown module family \"%s\" (have: %s)", path, m->family, have);
}

/* A capability and the slots it governs agree: declared with every slot, or neither. */
static int check_slots(const char *path, const bench_module *m, const char *cap, int declared, int n_slots, int n_have,
                       const char *slots, char *err, size_t errlen) {
    if (declared && n_have < n_slots)
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: declares %s but lacks its slot%s %s", path, cap,
                          n_slots > 1 ? "s" : "", slots);
    if (!declared && n_have)
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: has the slot%s %s but does not declare %s in its caps",
                          path, n_slots > 1 ? "s" : "", slots, cap);
    (void)m;
    return 0;
}

static int check_caps(const char *path, const bench_module *m, char *err, size_t errlen) {
    if (!strcmp(m->family, "kv")) {
        const struct bench_kv_iface *k = m->iface;
        if (!k->create || !k->reserve || !k->store || !k->attend || !k->memory || !k->destroy)
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: kv interface lacks a required slot (create, reserve, store, "
                              "attend, memory, destroy)", path);
        if (!bench_kv_stores(k, BENCH_F32))
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: cache_types 0x%x lacks f32, the exact reference every kv "
                              "module stores", path, k->cache_types);
        if (k->cache_types >> BENCH_DTYPE_COUNT)
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: cache_types 0x%x names types this bench does not know",
                              path, k->cache_types);
        return check_slots(path, m, "BENCH_CAP_KV_PREFIX_SHARE", !!(m->caps & BENCH_CAP_KV_PREFIX_SHARE), 2,
                           !!k->tokens + !!k->share_prefix, "tokens, share_prefix", err, errlen) ||
               check_slots(path, m, "BENCH_CAP_KV_FORK", !!(m->caps & BENCH_CAP_KV_FORK), 1, !!k->fork, "fork", err, errlen)
                   ? -BENCH_ERR_INVALID : 0;
    }
    if (!strcmp(m->family, "alloc")) {
        const struct bench_alloc_iface *a = m->iface;
        if (!a->create || !a->alloc || !a->free || !a->destroy)
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: alloc interface lacks a required slot (create, alloc, free, "
                              "destroy)", path);
        return check_slots(path, m, "BENCH_CAP_ALLOC_RESET", !!(m->caps & BENCH_CAP_ALLOC_RESET), 1, !!a->reset, "reset",
                           err, errlen);
    }
    if (!strcmp(m->family, "loader")) {
        const struct bench_loader_iface *l = m->iface;
        if (!l->open || !l->load || !l->close)
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: loader interface lacks a required slot (open, load, close)", path);
    }
    return 0;
}

static size_t opt_storage(int type) {
    switch (type) {
    case BENCH_OPT_BOOL: case BENCH_OPT_ENUM: return sizeof(int);
    case BENCH_OPT_INT: return sizeof(int64_t);
    case BENCH_OPT_SIZE: return sizeof(uint64_t);
    case BENCH_OPT_STRING: return BENCH_OPT_STRING_MAX;
    default: return 0;
    }
}

static size_t opt_align(int type) {
    return type == BENCH_OPT_STRING ? 1 : opt_storage(type);
}

static int parse_value(const bench_option *d, const char *v, void *slot, char *why, size_t n);
static int enum_index(const bench_option *d, const char *v);

/* The option table: names unique, types known, each value inside opts_size and aligned for
 * its type, ranges ordered, defaults that parse and lie in range. A module whose table is
 * wrong is refused when it loads, not when a user first sets the option. */
static int check_options(const char *path, const bench_module *m, char *err, size_t errlen) {
    if (m->options && m->options[0].name && !m->opts_size)
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: declares options but opts_size is 0", path);
    for (const bench_option *d = m->options; d && d->name; d++) {
        size_t sz = opt_storage(d->type);
        if (!*d->name || strpbrk(d->name, "=,") )
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: option name \"%s\" is empty or holds '=' or ','", path, d->name);
        if (!sz)
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: option %s: unknown type %d", path, d->name, d->type);
        if (d->offset + sz > m->opts_size || d->offset % opt_align(d->type))
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: option %s: offset %zu (+%zu bytes) is outside or misaligned "
                              "in the %zu-byte options struct", path, d->name, d->offset, sz, m->opts_size);
        if (d->min > d->max)
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: option %s: range %lld..%lld is empty", path, d->name,
                              (long long)d->min, (long long)d->max);
        if ((d->flags & BENCH_OPTF_SIZES_POOL) && (d->type != BENCH_OPT_SIZE || !(m->caps & BENCH_CAP_KV_SHARED_POOL)))
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: option %s sizes a pool (BENCH_OPTF_SIZES_POOL) but is not a "
                              "size of a module that declares BENCH_CAP_KV_SHARED_POOL", path, d->name);
        if (d->type == BENCH_OPT_ENUM && (!d->choices || !*d->choices))
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: option %s: an enum without choices", path, d->name);
        for (const bench_option *e = m->options; e < d; e++)
            if (!strcmp(e->name, d->name))
                return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: option %s is declared twice", path, d->name);
        unsigned char tmp[BENCH_OPT_STRING_MAX];
        char why[256];
        if (!d->def || parse_value(d, d->def, tmp, why, sizeof(why)))
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: option %s: default \"%s\" is not %s", path, d->name,
                              d->def ? d->def : "(none)", d->def ? why : "given");
    }
    return 0;
}

/* dlopens made by this process through modreg (modreg_dlopens) */
static unsigned long modreg_n_dlopen;

unsigned long modreg_dlopens(void) { return __atomic_load_n(&modreg_n_dlopen, __ATOMIC_RELAXED); }

static int load_path(const char *path, modreg_entry *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    __atomic_fetch_add(&modreg_n_dlopen, 1, __ATOMIC_RELAXED);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: cannot load module: %s", path, dlerror());
    bench_module_init_fn init;
    *(void **)&init = dlsym(h, BENCH_MODULE_INIT_SYMBOL);
    if (!init) {
        dlclose(h);
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: not a bench module (no %s symbol)", path, BENCH_MODULE_INIT_SYMBOL);
    }
    const bench_module *m = init();
    int rc = 0;
    if (!m || m->api_version != BENCH_MODULE_API_VERSION) {
        unsigned v = m ? m->api_version : 0;
        rc = bench_errc(err, errlen, BENCH_ERR_REFUSED, "%s: module API version %u, this bench expects %u: rebuild the module "
                        "against this bench's headers (docs/modules.md)", path, v, BENCH_MODULE_API_VERSION);
    } else if (!m->family || !m->name || !m->iface) {
        rc = bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: registration lacks family, name or iface", path);
    } else {
        rc = check_iface(path, m, err, errlen);
        if (!rc) rc = check_caps(path, m, err, errlen);
        if (!rc) rc = check_options(path, m, err, errlen);
    }
    if (rc) {
        dlclose(h);
        return rc;
    }
    out->mod = m;
    out->handle = h;
    out->path = strdup(path);
    return 0;
}

/* Calls fn for each folder of a module path ("a:b:c"; empty elements skipped) until it
 * returns nonzero, which is returned. */
static int each_dir(const char *list, int (*fn)(const char *dir, void *user), void *user) {
    if (!list) return 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ":");
        if (len && len < PATH_MAX) {
            char d[PATH_MAX];
            memcpy(d, p, len);
            d[len] = 0;
            int rc = fn(d, user);
            if (rc) return rc;
        }
        p += len + (p[len] == ':');
    }
    return 0;
}

typedef struct dev_join { const char *device; ut_buf out; int oom; } dev_join;

static int join_device(const char *dir, void *user) {
    dev_join *j = user;
    if (ut_buf_printf(&j->out, "%s%s/%s", j->out.len ? ":" : "", dir, j->device)) { j->oom = 1; return 1; }
    return 0;
}

char *modreg_device_dir(const char *dir, const char *device) {
    char *d = modreg_default_dir(dir);
    if (!d || is_cpu(device)) return d;
    dev_join j = {.device = device};
    each_dir(d, join_device, &j);
    free(d);
    if (j.oom) { ut_buf_free(&j.out); return NULL; }
    return ut_buf_take(&j.out);
}

/* "; it is built for cuda (--device cuda)" when another device's folder has the module
 * (the CPU's are the module folders, every other device a folder in one of them). */
typedef struct built_q { const char *device, *family, *name; char *out; size_t n; } built_q;

static int built_in(const char *top, void *user) {
    built_q *q = user;
    char path[MR_PATH];
    snprintf(path, sizeof(path), "%s/%s_%s.so", top, q->family, q->name);
    if (!is_cpu(q->device) && access(path, R_OK) == 0) {
        snprintf(q->out, q->n, "; it is built for cpu (--device cpu)");
        return 1;
    }
    DIR *d = opendir(top);
    struct dirent *de;
    while (d && !q->out[0] && (de = readdir(d))) {
        if (de->d_name[0] == '.' || (!is_cpu(q->device) && !strcmp(de->d_name, q->device))) continue;
        snprintf(path, sizeof(path), "%s/%s/%s_%s.so", top, de->d_name, q->family, q->name);
        if (access(path, R_OK) == 0)
            snprintf(q->out, q->n, "; it is built for %.40s (--device %.40s)", de->d_name, de->d_name);
    }
    if (d) closedir(d);
    return q->out[0] != 0;
}

static void built_for(const char *dir, const char *device, const char *family, const char *name, char *out, size_t n) {
    out[0] = 0;
    char *top = modreg_default_dir(dir);
    built_q q = {device, family, name, out, n};
    each_dir(top, built_in, &q);
    free(top);
}

/* A module or device name becomes part of a path that is dlopen'ed: one that could
 * climb out of the module folder ("../x", "a/b") would load any library. */
static int name_ok(const char *n) {
    return n && *n && n[0] != '.' && !strchr(n, '/');
}

typedef struct find_q { const char *family, *name; char path[MR_PATH]; } find_q;

static int find_in(const char *dir, void *user) {
    find_q *q = user;
    snprintf(q->path, sizeof(q->path), "%s/%s_%s.so", dir, q->family, q->name);
    return access(q->path, R_OK) == 0;
}

/* The cache's entry of path, or NULL. */
static const modreg_entry *cache_find(const modreg_cache *c, const char *path) {
    for (int i = 0; c && i < c->n; i++)
        if (!strcmp(c->v[i].path, path)) return &c->v[i];
    return NULL;
}

/* modreg_load_for, and with a cache (c not NULL) the module of a path already loaded is the
 * cache's: *out is a copy of its entry, which the cache owns (the caller closes nothing). */
static int load_for(modreg_cache *c, const char *dir, const char *device, const char *family, const char *name,
                    modreg_entry *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (!name_ok(name) || (device && !is_cpu(device) && !name_ok(device)))
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s module \"%s\"%s%s: not a module name (no '/', no leading '.')",
                          family, name ? name : "", device ? " on device " : "", device ? device : "");
    char *d = modreg_device_dir(dir, device);
    if (!d) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    find_q q = {family, name, ""};
    int rc = 0;
    if (!each_dir(d, find_in, &q)) {
        char *have = modreg_names(d, family), elsewhere[128];
        built_for(dir, device, family, name, elsewhere, sizeof(elsewhere));
        rc = bench_errc(err, errlen, BENCH_ERR_NOTFOUND, "unknown %s%s%s module \"%s\" (have: %s; looked in %s)%s",
                        is_cpu(device) ? "" : device, is_cpu(device) ? "" : " ", family, name,
                        have && *have ? have : "none", d, elsewhere);
        free(have);
    } else if (c && cache_find(c, q.path)) {
        *out = *cache_find(c, q.path);
    } else {
        rc = load_path(q.path, out, err, errlen);
        if (!rc && (strcmp(out->mod->family, family) || strcmp(out->mod->name, name))) {
            rc = bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: registers as %s/%s, expected %s/%s", q.path,
                            out->mod->family, out->mod->name, family, name);
            modreg_entry_close(out);
        }
        if (!rc && c) {
            if (UT_VEC_RESERVE(c->v, c->cap, c->n + 1)) {
                modreg_entry_close(out);
                rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
            } else {
                c->v[c->n++] = *out;
            }
        }
    }
    free(d);
    return rc;
}

int modreg_load_for(const char *dir, const char *device, const char *family, const char *name,
                    modreg_entry *out, char *err, size_t errlen) {
    return load_for(NULL, dir, device, family, name, out, err, errlen);
}

int modreg_cache_load(modreg_cache *c, const char *dir, const char *device, const char *family, const char *name,
                      const bench_module **out, char *err, size_t errlen) {
    *out = NULL;
    /* without a cache the entry would be nobody's to close */
    if (!c) return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s module \"%s\": no module cache to load it into", family, name);
    modreg_entry e;
    int rc = load_for(c, dir, device, family, name, &e, err, errlen);
    *out = rc ? NULL : e.mod;
    return rc;
}

void modreg_cache_close(modreg_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) modreg_entry_close(&c->v[i]);
    free(c->v);
    memset(c, 0, sizeof(*c));
}

int modreg_load(const char *dir, const char *family, const char *name, modreg_entry *out,
                char *err, size_t errlen) {
    return modreg_load_for(dir, NULL, family, name, out, err, errlen);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A growing list of strings. */
typedef struct strv { char **v; int n, cap; } strv;

static int strv_push(strv *s, char *x) {
    if (!x) return -1;
    if (UT_VEC_RESERVE(s->v, s->cap, s->n + 1)) { free(x); return -1; }
    s->v[s->n++] = x;
    return 0;
}

static void strv_free(strv *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof(*s));
}

/* File names <family>_*.so in dir (or every *.so when family is NULL), prefixed by pre. */
static void scan(const char *dir, const char *family, const char *pre, strv *out) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    size_t flen = family ? strlen(family) : 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 3, ".so")) continue;
        if (family && (strncmp(de->d_name, family, flen) || de->d_name[flen] != '_')) continue;
        size_t n = strlen(pre) + len + 1;
        char *x = malloc(n);
        if (x) snprintf(x, n, "%s%s", pre, de->d_name);
        if (strv_push(out, x)) break;
    }
    closedir(d);
}

typedef struct names_q { const char *family; strv files; } names_q;

static int names_in(const char *dir, void *user) {
    names_q *q = user;
    scan(dir, q->family, "", &q->files);
    return 0;
}

char *modreg_names(const char *dir, const char *family) {
    names_q q = {family, {0}};
    each_dir(dir, names_in, &q);
    if (q.files.n) qsort(q.files.v, (size_t)q.files.n, sizeof(char *), cmp_str);
    size_t len = 1;
    for (int i = 0; i < q.files.n; i++) len += strlen(q.files.v[i]) + 2;
    char *s = malloc(len);
    if (s) {
        size_t flen = strlen(family), used = 0;
        for (int i = 0; i < q.files.n; i++) {
            if (i && !strcmp(q.files.v[i], q.files.v[i - 1])) continue;   /* the same module in two folders */
            if (used) { memcpy(s + used, ", ", 2); used += 2; }
            size_t nl = strlen(q.files.v[i]) - flen - 4; /* "FAMILY_" ... ".so" */
            memcpy(s + used, q.files.v[i] + flen + 1, nl);
            used += nl;
        }
        s[used] = 0;
    }
    strv_free(&q.files);
    return s;
}

/* The *.so of dir as "<dir>/<file>", then those of each folder below it (a device's modules). */
static int scan_tree(const char *dir, void *user) {
    strv *out = user;
    char pre[MR_PATH];
    snprintf(pre, sizeof(pre), "%s/", dir);
    strv top = {0};
    scan(dir, NULL, pre, &top);
    if (top.n) qsort(top.v, (size_t)top.n, sizeof(char *), cmp_str);
    for (int i = 0; i < top.n; i++) { strv_push(out, top.v[i]); top.v[i] = NULL; }
    free(top.v);
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    strv subs = {0};
    while ((de = readdir(d))) {
        char sub[MR_PATH];
        struct stat st;
        if (de->d_name[0] == '.') continue;
        snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
        if (stat(sub, &st) || !S_ISDIR(st.st_mode)) continue;
        strv_push(&subs, strdup(sub));
    }
    closedir(d);
    if (subs.n) qsort(subs.v, (size_t)subs.n, sizeof(char *), cmp_str);
    for (int i = 0; i < subs.n; i++) {
        strv v = {0};
        snprintf(pre, sizeof(pre), "%s/", subs.v[i]);
        scan(subs.v[i], NULL, pre, &v);
        if (v.n) qsort(v.v, (size_t)v.n, sizeof(char *), cmp_str);
        for (int k = 0; k < v.n; k++) { strv_push(out, v.v[k]); v.v[k] = NULL; }
        free(v.v);
    }
    strv_free(&subs);
    return 0;
}

/* Two entries for one module: the same family, name and devices (a CUDA module and the
 * CPU's of one name are two modules). */
static int same_slot(const modreg_entry *a, const modreg_entry *b) {
    const char *da = a->mod->devices ? a->mod->devices : "cpu", *db = b->mod->devices ? b->mod->devices : "cpu";
    return !strcmp(a->mod->family, b->mod->family) && !strcmp(a->mod->name, b->mod->name) && !strcmp(da, db);
}

int modreg_open_all(const char *dir, modreg *r, char *warnings, size_t wlen, char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    if (warnings && wlen) warnings[0] = 0;
    r->dir = modreg_default_dir(dir);
    if (!r->dir) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    strv files = {0};
    each_dir(r->dir, scan_tree, &files);
    if (files.n == 0) {
        strv_free(&files);
        return bench_errc(err, errlen, BENCH_ERR_NOTFOUND, "%s: no modules found (build them with `make`)", r->dir);
    }
    r->v = calloc((size_t)files.n, sizeof(*r->v));
    for (int i = 0; r->v && i < files.n; i++) {
        char e[512];
        if (load_path(files.v[i], &r->v[r->n], e, sizeof(e)) == 0) {
            /* an earlier folder of the path has this module already: it is the one loaded */
            int shadowed = 0;
            for (int k = 0; k < r->n && !shadowed; k++) shadowed = same_slot(&r->v[k], &r->v[r->n]);
            if (shadowed) modreg_entry_close(&r->v[r->n]);
            else r->n++;
        } else if (warnings) {
            size_t used = strlen(warnings);
            snprintf(warnings + used, wlen - used, "%s\n", e);
        }
    }
    strv_free(&files);
    if (!r->v) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    return 0;
}

/* Parses v as option d's type into slot (opt_storage(d->type) bytes); on failure, why says
 * what was expected. */
static int parse_value(const bench_option *d, const char *v, void *slot, char *why, size_t n) {
    switch (d->type) {
    case BENCH_OPT_BOOL: {
        int b;
        if (ut_parse_bool(v, &b)) return snprintf(why, n, "a bool (0/1/true/false)"), -1;
        memcpy(slot, &b, sizeof(b));
        return 0;
    }
    case BENCH_OPT_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        int ranged = d->min < d->max;
        if (errno || end == v || *end || (ranged && (x < d->min || x > d->max))) {
            if (ranged) snprintf(why, n, "a whole number in %lld..%lld", (long long)d->min, (long long)d->max);
            else snprintf(why, n, "a whole number");
            return -1;
        }
        int64_t y = x;
        memcpy(slot, &y, sizeof(y));
        return 0;
    }
    case BENCH_OPT_SIZE: {
        uint64_t u;
        int ranged = d->min < d->max;
        if (ut_parse_size(v, &u) || (ranged && (u < (uint64_t)d->min || u > (uint64_t)d->max))) {
            if (ranged) snprintf(why, n, "a size (e.g. 4096, 64k, 1m) in %lld..%lld", (long long)d->min, (long long)d->max);
            else snprintf(why, n, "a size (e.g. 4096, 64k, 1m)");
            return -1;
        }
        memcpy(slot, &u, sizeof(u));
        return 0;
    }
    case BENCH_OPT_ENUM: {
        int idx = enum_index(d, v);
        if (idx < 0) return snprintf(why, n, "one of %s", d->choices), -1;
        memcpy(slot, &idx, sizeof(idx));
        return 0;
    }
    case BENCH_OPT_STRING:
        if (strlen(v) >= BENCH_OPT_STRING_MAX)
            return snprintf(why, n, "a string of at most %d bytes", BENCH_OPT_STRING_MAX - 1), -1;
        memset(slot, 0, BENCH_OPT_STRING_MAX);
        memcpy(slot, v, strlen(v));
        return 0;
    default:
        return snprintf(why, n, "a known type"), -1;
    }
}

static const bench_option *find_option(const bench_module *m, const char *key) {
    for (const bench_option *d = m->options; d && d->name; d++)
        if (!strcmp(d->name, key)) return d;
    return NULL;
}

/* The index of choice v of an enum option, or -1. */
static int enum_index(const bench_option *d, const char *v) {
    size_t vl = strlen(v);
    int idx = 0;
    for (const char *p = d->choices; *p; idx++) {
        size_t len = strcspn(p, "|");
        if (len == vl && !strncmp(p, v, len)) return idx;
        p += len + (p[len] == '|');
    }
    return -1;
}

/* A typed value (a worker spec's, checked by the parent) into option d's slot: its kind must
 * be the option's, and that is all that is checked (no text, no range). On failure, why says
 * what the option takes. */
static int store_typed(const bench_option *d, const bench_opt *o, void *slot, char *why, size_t n) {
    switch (d->type) {
    case BENCH_OPT_BOOL:
        if (o->kind != BENCH_OPTV_BOOL) break;
        memcpy(slot, &(int){o->num != 0}, sizeof(int));
        return 0;
    case BENCH_OPT_INT:
        if (o->kind != BENCH_OPTV_NUM) break;
        memcpy(slot, &o->num, sizeof(int64_t));
        return 0;
    case BENCH_OPT_SIZE:
        if (o->kind != BENCH_OPTV_NUM || o->num < 0) break;
        memcpy(slot, &(uint64_t){(uint64_t)o->num}, sizeof(uint64_t));
        return 0;
    case BENCH_OPT_ENUM: {
        int idx = o->kind == BENCH_OPTV_STR && o->value ? enum_index(d, o->value) : -1;
        if (idx < 0) return snprintf(why, n, "one of %s", d->choices), -1;
        memcpy(slot, &idx, sizeof(idx));
        return 0;
    }
    case BENCH_OPT_STRING:
        if (o->kind != BENCH_OPTV_STR || !o->value) break;
        if (strlen(o->value) >= BENCH_OPT_STRING_MAX)
            return snprintf(why, n, "a string of at most %d bytes", BENCH_OPT_STRING_MAX - 1), -1;
        memset(slot, 0, BENCH_OPT_STRING_MAX);
        memcpy(slot, o->value, strlen(o->value));
        return 0;
    default:
        break;
    }
    static const char *const what[] = {"", "a boolean (true or false)", "a whole number", "a size (a whole number >= 0)", "",
                                       "a string"};
    snprintf(why, n, "%s", d->type >= BENCH_OPT_BOOL && d->type <= BENCH_OPT_STRING ? what[d->type] : "a known type");
    return -1;
}

/* What a typed value is, for messages: "true", "-3", "\"x\"". */
static const char *typed_text(const bench_opt *o, char *buf, size_t n) {
    if (o->kind == BENCH_OPTV_BOOL) snprintf(buf, n, "%s", o->num ? "true" : "false");
    else if (o->kind == BENCH_OPTV_NUM) snprintf(buf, n, "%lld", (long long)o->num);
    else if (o->kind == BENCH_OPTV_STR) snprintf(buf, n, "\"%s\"", o->value ? o->value : "");
    else snprintf(buf, n, "%s", o->value ? o->value : "");
    return buf;
}

int modreg_fill_opts(const bench_module *m, const bench_opts *opts, void **out, char *err, size_t errlen) {
    *out = NULL;
    /* one byte at least, so that a module without options still gets a pointer to free */
    unsigned char *s = calloc(1, m->opts_size ? m->opts_size : 1);
    if (!s) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    char why[256];
    for (const bench_option *d = m->options; d && d->name; d++)
        if (parse_value(d, d->def, s + d->offset, why, sizeof(why))) {  /* checked at load: cannot fail */
            free(s);
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s %s: option %s: default %s is not %s", m->family, m->name,
                              d->name, d->def, why);
        }
    for (int i = 0; opts && i < opts->n; i++) {
        const bench_option *d = find_option(m, opts->v[i].key);
        if (!d) {
            char have[512] = "";
            for (d = m->options; d && d->name; d++) {
                if (have[0]) strncat(have, ", ", sizeof(have) - strlen(have) - 1);
                strncat(have, d->name, sizeof(have) - strlen(have) - 1);
            }
            free(s);
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s %s: unknown option \"%s\" (have: %s)", m->family, m->name,
                              opts->v[i].key, have[0] ? have : "none");
        }
        const bench_opt *o = &opts->v[i];
        if (o->kind == BENCH_OPTV_TEXT ? parse_value(d, o->value ? o->value : "", s + d->offset, why, sizeof(why))
                                       : store_typed(d, o, s + d->offset, why, sizeof(why))) {
            char got[BENCH_OPT_STRING_MAX + 8];
            free(s);
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s %s: option %s=%s: expected %s", m->family, m->name, d->name,
                              typed_text(o, got, sizeof(got)), why);
        }
    }
    *out = s;
    return 0;
}

int modreg_check_opts(const bench_module *m, const bench_opts *opts, char *err, size_t errlen) {
    void *s;
    int rc = modreg_fill_opts(m, opts, &s, err, errlen);
    free(s);
    return rc;
}

const char *modreg_pool_opt_given(const bench_module *m, const bench_opts *opts, char *buf, size_t n) {
    for (int i = 0; opts && i < opts->n; i++) {
        const bench_option *d = find_option(m, opts->v[i].key);
        if (d && (d->flags & BENCH_OPTF_SIZES_POOL)) {
            char v[BENCH_OPT_STRING_MAX + 8];
            snprintf(buf, n, "%s=%s", opts->v[i].key, opts->v[i].kind == BENCH_OPTV_STR ? opts->v[i].value
                                                                                         : typed_text(&opts->v[i], v, sizeof(v)));
            return buf;
        }
    }
    return NULL;
}

/* Option d's value in a filled struct, as a typed value (STR values point into d's table or
 * the struct); -1 with err where a number does not fit a typed value exactly. */
static int slot_typed(const bench_module *m, const bench_option *d, const unsigned char *slot, bench_opt *o, char *err,
                      size_t errlen) {
    *o = (bench_opt){.key = d->name};
    switch (d->type) {
    case BENCH_OPT_BOOL: { int b; memcpy(&b, slot, sizeof(b)); o->kind = BENCH_OPTV_BOOL; o->num = b != 0; return 0; }
    case BENCH_OPT_ENUM: case BENCH_OPT_STRING: o->kind = BENCH_OPTV_STR; return 0; /* the caller copies the text */
    case BENCH_OPT_INT: { int64_t x; memcpy(&x, slot, sizeof(x)); o->num = x; break; }
    default: {
        uint64_t u;
        memcpy(&u, slot, sizeof(u));
        o->num = u > (uint64_t)BENCH_OPTV_NUM_MAX ? BENCH_OPTV_NUM_MAX + 1 : (int64_t)u;
        break;
    }
    }
    o->kind = BENCH_OPTV_NUM;
    if (o->num > BENCH_OPTV_NUM_MAX || o->num < -BENCH_OPTV_NUM_MAX)
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s %s: option %s: expected a whole number of at most 2^53 "
                          "(9007199254740992), the largest a worker spec carries exactly", m->family, m->name, d->name);
    return 0;
}

/* The text of an ENUM or STRING slot: the choice's name, or the string itself. */
static void slot_text(const bench_option *d, const unsigned char *slot, const char **p, size_t *len) {
    if (d->type == BENCH_OPT_STRING) {
        *p = (const char *)slot;
        *len = strnlen(*p, BENCH_OPT_STRING_MAX);
        return;
    }
    int idx;
    memcpy(&idx, slot, sizeof(idx));
    const char *c = d->choices;
    for (int k = 0; k < idx && *c; k++) c += strcspn(c, "|") + (c[strcspn(c, "|")] == '|');
    *p = c;
    *len = strcspn(c, "|");
}

int modreg_type_opts(const bench_module *m, const bench_opts *in, bench_opts *out, void **storage, char *err, size_t errlen) {
    out->n = 0;
    out->v = NULL;
    *storage = NULL;
    void *filled;
    int rc = modreg_fill_opts(m, in, &filled, err, errlen);
    if (rc) return rc;
    int n = in ? in->n : 0;
    /* one block: the typed values, then each key and STR's text (at most a string option's
     * size): nothing points into the module, which may be closed before they are used */
    size_t cap = (size_t)n * (sizeof(bench_opt) + BENCH_OPT_STRING_MAX + 1);
    for (int i = 0; i < n; i++) cap += strlen(in->v[i].key) + 1;
    char *mem = malloc(cap ? cap : 1);
    if (!mem) { free(filled); return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory"); }
    bench_opt *v = (bench_opt *)mem;
    char *text = mem + (size_t)n * sizeof(bench_opt);
    for (int i = 0; i < n && !rc; i++) {
        /* in was checked above: every key is an option */
        const bench_option *d = find_option(m, in->v[i].key);
        const unsigned char *slot = (const unsigned char *)filled + d->offset;
        rc = slot_typed(m, d, slot, &v[i], err, errlen);
        size_t kl = strlen(d->name) + 1;
        memcpy(text, d->name, kl);
        v[i].key = text;
        text += kl;
        if (!rc && v[i].kind == BENCH_OPTV_STR) {
            const char *p;
            size_t len;
            slot_text(d, slot, &p, &len);
            memcpy(text, p, len);
            text[len] = 0;
            v[i].value = text;
            text += len + 1;
        }
    }
    free(filled);
    if (rc) { free(mem); return rc; }
    out->n = n;
    out->v = v;
    *storage = mem;
    return 0;
}

int modreg_opt_given(const bench_opts *opts, const char *key) {
    for (int i = 0; opts && i < opts->n; i++)
        if (!strcmp(opts->v[i].key, key)) return 1;
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
            bench_errc(err, errlen, BENCH_ERR_INVALID, "option \"%s\": expected key=value", tok);
            free(mem);
            return -1;
        }
        *eq = 0;
        v[k] = (bench_opt){.key = tok, .value = eq + 1, .kind = BENCH_OPTV_TEXT};
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
