/* A module whose family interface has a version no bench takes (99), built for the tests
 * as <family>_badver.so (the Makefile sets BADVER_FAMILY): the registry must refuse it
 * when it loads, naming both versions (engines/core/runtime/modreg.c). */
#include "engines/abi/module.h"

#ifndef BADVER_FAMILY
#error "build with -DBADVER_FAMILY='\"kv\"' (or another family)"
#endif

/* every family's vtable starts with its version; nothing past it is read */
static const struct {
    uint32_t version;
} badver_iface = {99u};

static const bench_module badver_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = BADVER_FAMILY,
    .name = "badver",
    .summary = "test module with interface version 99",
    .devices = "cpu",
    .iface = &badver_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &badver_module; }
