/* The module registry: finds module shared objects by family and name, dlopens
 * them, and checks their registration. The core never names a module. */
#ifndef BENCH_MODREG_H
#define BENCH_MODREG_H

#include "engines/abi/module.h"

typedef struct modreg_entry {
    const bench_module *mod;
    void *handle;           /* dlopen handle */
    char *path;
} modreg_entry;

typedef struct modreg {
    char *dir;
    int n;
    modreg_entry *v;
} modreg;

/* The module path: folders separated by ':', searched in order (the first folder that has a
 * module wins, as with PATH): dir if given, else $BENCH_MODULE_PATH, else
 * <directory of /proc/self/exe>/modules. Every `dir` below is such a path. Returns a
 * malloc'd string. */
char *modreg_default_dir(const char *dir);

/* $BENCH_MODULE_PATH checked: every folder in it absolute. A relative one (".", "mods")
 * would be resolved against whatever directory bench runs in, so that a path set once in a
 * shell profile loads the kv_*.so of any downloaded folder one cd's into. 0, or -1 with err
 * naming the entry. modreg_default_dir leaves relative entries out whatever the caller did;
 * the command line refuses them first (harness/cli/main.c), so none is dropped unsaid. */
int modreg_check_env(char *err, size_t errlen);

/* The module families bench loads (loader, kv, alloc, device), in its table's order: the
 * i-th's name, NULL past the last. For lists users see (bench list, messages). */
const char *modreg_family(int i);

/* The path of the modules built for device: the module path itself for the CPU (device
 * NULL or "cpu"), each folder's <dir>/<device> for another ("cuda"). Returns a malloc'd string. */
char *modreg_device_dir(const char *dir, const char *device);

/* Opens every <family>_<name>.so in each folder of the path and in each folder below it
 * (the modules of each device); a module an earlier folder has already is skipped. Modules
 * that fail to load or carry another API version are skipped with a warning in `warnings`
 * (may be NULL). Failures return -BENCH_ERR_* (module.h). */
int modreg_open_all(const char *dir, modreg *r, char *warnings, size_t wlen, char *err, size_t errlen);

/* Opens one module; errors name the file and say what exists. */
int modreg_load(const char *dir, const char *family, const char *name, modreg_entry *out,
                char *err, size_t errlen);
/* The same for the module built for device (NULL or "cpu": modreg_load). */
int modreg_load_for(const char *dir, const char *device, const char *family, const char *name,
                    modreg_entry *out, char *err, size_t errlen);

/* The module's options struct for opts: every option's default, then each given value: text
 * (BENCH_OPTV_TEXT) parsed and checked against the table (unknown key, type, range, enum
 * choice); a typed value (a worker spec's, which the parent checked: modreg_type_opts)
 * stored by the option's type, its kind checked and nothing else. *out is a malloc'd
 * struct of m->opts_size bytes (at least 1) for the module's create/open; free() it after. */
int modreg_fill_opts(const bench_module *m, const bench_opts *opts, void **out, char *err, size_t errlen);

/* Checks opts against the module's declared options, as modreg_fill_opts, keeping nothing. */
int modreg_check_opts(const bench_module *m, const bench_opts *opts, char *err, size_t errlen);

/* Whether key is among the given pairs (an option set by the user, not by its default). */
int modreg_opt_given(const bench_opts *opts, const char *key);

/* The first given option that sizes the module's shared KV pool (BENCH_OPTF_SIZES_POOL),
 * as "key=value" in buf; NULL when none is given. */
const char *modreg_pool_opt_given(const bench_module *m, const bench_opts *opts, char *buf, size_t n);

/* The options as typed values (module.h BENCH_OPTV_*), for a worker spec: in (text as the
 * user gave it) is checked as modreg_fill_opts checks it, once, and each given option becomes
 * its value by the table's type (a bool, a whole number, an enum's choice or a string), in
 * order. The values and their keys and strings are in one malloc'd block, *storage (free()
 * it); nothing points into the module. A number past 2^53 (BENCH_OPTV_NUM_MAX), which a JSON
 * number does not hold exactly, is refused. */
int modreg_type_opts(const bench_module *m, const bench_opts *in, bench_opts *out, void **storage, char *err, size_t errlen);

/* Modules loaded once per run: a module a caller asks for again (the same file) is the one
 * already loaded. The parent checks every choice of a scenario through one, so that a module
 * several choices or devices name is dlopen'ed once. */
typedef struct modreg_cache {
    modreg_entry *v;
    int n, cap;
} modreg_cache;

/* modreg_load_for through the cache; *out is the cache's (valid until modreg_cache_close). */
int modreg_cache_load(modreg_cache *c, const char *dir, const char *device, const char *family, const char *name,
                      const bench_module **out, char *err, size_t errlen);
void modreg_cache_close(modreg_cache *c);   /* closes every module; c may be NULL */

/* How many modules this process has dlopen'ed through modreg so far (the test suite counts
 * the parent's loads with it). */
unsigned long modreg_dlopens(void);

/* Comma-separated names of the modules of a family found on the path ("mmap, pread"). */
char *modreg_names(const char *dir, const char *family);

void modreg_entry_close(modreg_entry *e);
void modreg_close(modreg *r);

/* Parses "k=v,k=v" into opts (the strings are copied into *storage, freed with free()). */
int modreg_parse_opts(const char *text, bench_opts *opts, void **storage, char *err, size_t errlen);

#endif
