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

/* The directory modules are looked up in: dir if given, else $BENCH_MODULE_PATH,
 * else <directory of /proc/self/exe>/modules. Returns a malloc'd string. */
char *modreg_default_dir(const char *dir);

/* The directory of the modules built for device: the module directory itself for the
 * CPU (device NULL or "cpu"), <dir>/<device> for another ("cuda"). Returns a malloc'd string. */
char *modreg_device_dir(const char *dir, const char *device);

/* Opens every <family>_<name>.so in the directory and in each directory below it (the
 * modules of each device). Modules that fail to load or carry another API version are
 * skipped with a warning in `warnings` (may be NULL). */
int modreg_open_all(const char *dir, modreg *r, char *warnings, size_t wlen, char *err, size_t errlen);

/* Opens one module; errors name the file and say what exists. */
int modreg_load(const char *dir, const char *family, const char *name, modreg_entry *out,
                char *err, size_t errlen);
/* The same for the module built for device (NULL or "cpu": modreg_load). */
int modreg_load_for(const char *dir, const char *device, const char *family, const char *name,
                    modreg_entry *out, char *err, size_t errlen);

/* Checks opts against the module's declared options (unknown key, bad value). */
int modreg_check_opts(const bench_module *m, const bench_opts *opts, char *err, size_t errlen);

/* Comma-separated names of the modules of a family found in dir ("mmap, pread"). */
char *modreg_names(const char *dir, const char *family);

void modreg_entry_close(modreg_entry *e);
void modreg_close(modreg *r);

/* Parses "k=v,k=v" into opts (the strings are copied into *storage, freed with free()). */
int modreg_parse_opts(const char *text, bench_opts *opts, void **storage, char *err, size_t errlen);

#endif
