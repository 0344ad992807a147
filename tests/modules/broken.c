/* Modules that test the ABI's declared rules, one per build (the Makefile sets BROKEN to the
 * module's file name, <family>_<name>), for tests/test_abi.c. The registry must refuse each
 * when it loads, saying which rule (engines/core/runtime/modreg.c), except two that load:
 *   kv_nomem   fails to create with BENCH_ERR_NOMEM and a message that names no memory,
 *              so that only the code can tell the harness what happened;
 *   kv_pooled  declares BENCH_CAP_KV_SHARED_POOL with an option not named pool_bytes
 *              (arena_mib, flagged BENCH_OPTF_SIZES_POOL), and reports the pool it was
 *              given as its reserved memory. */
#include <stddef.h>
#include <stdint.h>

#include "engines/abi/alloc.h"
#include "engines/abi/kv.h"
#include "engines/abi/loader.h"

#define IS(x) (__builtin_strcmp(BROKEN, x) == 0)

typedef struct pooled_opts { uint64_t arena_mib; } pooled_opts;
static const bench_option pooled_options[] = {
    {"arena_mib", BENCH_OPT_SIZE, offsetof(pooled_opts, arena_mib), "0", 0, 0, NULL, "the pool in MiB (0: the host's budget)",
     BENCH_OPTF_SIZES_POOL},
    BENCH_OPTION_END,
};
static uint64_t pooled_reserved;   /* one instance at a time in the tests */

static int kv_create(const bench_kv_shape *shape, const void *opts, const bench_host *host, void **ctx, char *err,
                     size_t errlen) {
    (void)host;
    if (IS("kv_pooled")) {
        const pooled_opts *o = opts;
        pooled_reserved = o->arena_mib ? o->arena_mib << 20 : shape->pool_bytes;
        *ctx = &pooled_reserved;
        return 0;
    }
    (void)ctx;
    return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kv nomem: the pool of 3 GiB was refused");
}
static int kv_reserve(void *ctx, int seq, int n_pos, char *err, size_t errlen) {
    (void)ctx, (void)seq, (void)n_pos, (void)err, (void)errlen;
    return 0;
}
static void kv_store(void *ctx, int seq, int layer, int pos0, int n, const float *k, const float *v) {
    (void)ctx, (void)seq, (void)layer, (void)pos0, (void)n, (void)k, (void)v;
}
static void kv_attend(void *ctx, int seq, int layer, int pos0, int n, const float *q, float *out) {
    (void)ctx, (void)seq, (void)layer, (void)pos0, (void)n, (void)q, (void)out;
}
static void kv_memory(void *ctx, bench_kv_memory *m) {
    *m = (bench_kv_memory){ctx ? *(const uint64_t *)ctx : 0, 0, 0, 0};
}
static void kv_destroy(void *ctx) { (void)ctx; }
static void kv_tokens(void *ctx, int seq, int pos0, int n, const int *ids) { (void)ctx, (void)seq, (void)pos0, (void)n, (void)ids; }
static int kv_share(void *ctx, int seq, const int *ids, int n, char *err, size_t errlen) {
    (void)ctx, (void)seq, (void)ids, (void)n, (void)err, (void)errlen;
    return 0;
}

/* kv_nomemslot lacks the memory slot; kv_slotnocap has the prefix slots without the flag */
static const struct bench_kv_iface kv_iface = {
    .version = BENCH_KV_IFACE_VERSION,
    .create = kv_create,
    .reserve = kv_reserve,
    .store = kv_store,
    .attend = kv_attend,
    .memory = kv_memory,
    .destroy = kv_destroy,
};
static const struct bench_kv_iface kv_iface_nomem_slot = {
    .version = BENCH_KV_IFACE_VERSION, .create = kv_create, .reserve = kv_reserve, .store = kv_store,
    .attend = kv_attend, .destroy = kv_destroy,
};
static const struct bench_kv_iface kv_iface_prefix_slots = {
    .version = BENCH_KV_IFACE_VERSION, .create = kv_create, .reserve = kv_reserve, .store = kv_store,
    .attend = kv_attend, .memory = kv_memory, .destroy = kv_destroy, .tokens = kv_tokens, .share_prefix = kv_share,
};

static int al_create(const void *opts, void **ctx, char *err, size_t errlen) {
    (void)opts, (void)err, (void)errlen;
    *ctx = NULL;
    return 0;
}
static void *al_alloc(void *ctx, size_t size, size_t align) { (void)ctx, (void)size, (void)align; return NULL; }
static void al_free(void *ctx, void *p, size_t size) { (void)ctx, (void)p, (void)size; }
static void al_destroy(void *ctx) { (void)ctx; }
static const struct bench_alloc_iface al_iface = {
    .version = BENCH_ALLOC_IFACE_VERSION, .create = al_create, .alloc = al_alloc, .free = al_free, .destroy = al_destroy,
};

static int ld_open(const void *opts, const bench_host *host, void **ctx, char *err, size_t errlen) {
    (void)opts, (void)host, (void)ctx, (void)err, (void)errlen;
    return 0;
}
static int ld_load(void *ctx, const char *const *files, int n_files, const bench_tensor_ref *t, int n, const void **data,
                   char *err, size_t errlen) {
    (void)ctx, (void)files, (void)n_files, (void)t, (void)n, (void)data, (void)err, (void)errlen;
    return 0;
}
static void ld_close(void *ctx) { (void)ctx; }
static const struct bench_loader_iface ld_iface = {
    .version = BENCH_LOADER_IFACE_VERSION, .open = ld_open, .load = ld_load, .close = ld_close,
};
/* loader_v2: a vtable built before memory_kind (version 3), which ends before that slot: the
 * shorter struct a version 2 module was compiled with */
static const struct { uint32_t version; void *slots[4]; } ld_iface_v2 = {2, {(void *)ld_open, (void *)ld_load, NULL, (void *)ld_close}};

typedef struct opts { int64_t level; } opts;
/* alloc_badopt: an offset past the struct; alloc_baddefault: a default outside its range */
static const bench_option opts_past_end[] = {
    {"level", BENCH_OPT_INT, sizeof(opts), "1", 0, 4, NULL, "an option whose value lies past the struct", 0},
    BENCH_OPTION_END,
};
static const bench_option opts_bad_default[] = {
    BENCH_OPTION_INT(opts, level, "9", 0, 4, "a default outside its own range"),
    BENCH_OPTION_END,
};

static bench_module mod = {
    .api_version = BENCH_MODULE_API_VERSION,
    .summary = "a test module that breaks one rule of the ABI",
    .devices = "cpu",
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) {
    if (IS("kv_v1")) {
        mod.api_version = 1;
        mod.family = "kv", mod.name = "v1", mod.iface = &kv_iface;
    } else if (IS("kv_nomem")) {
        mod.family = "kv", mod.name = "nomem", mod.iface = &kv_iface;
    } else if (IS("kv_pooled")) {
        mod.family = "kv", mod.name = "pooled", mod.iface = &kv_iface, mod.caps = BENCH_CAP_KV_SHARED_POOL;
        mod.options = pooled_options, mod.opts_size = sizeof(pooled_opts);
    } else if (IS("kv_capnoslot")) {
        mod.family = "kv", mod.name = "capnoslot", mod.iface = &kv_iface, mod.caps = BENCH_CAP_KV_FORK;
    } else if (IS("kv_slotnocap")) {
        mod.family = "kv", mod.name = "slotnocap", mod.iface = &kv_iface_prefix_slots;
    } else if (IS("kv_nomemslot")) {
        mod.family = "kv", mod.name = "nomemslot", mod.iface = &kv_iface_nomem_slot;
    } else if (IS("alloc_badopt")) {
        mod.family = "alloc", mod.name = "badopt", mod.iface = &al_iface;
        mod.options = opts_past_end, mod.opts_size = sizeof(opts);
    } else if (IS("alloc_baddefault")) {
        mod.family = "alloc", mod.name = "baddefault", mod.iface = &al_iface;
        mod.options = opts_bad_default, mod.opts_size = sizeof(opts);
    } else if (IS("loader_v2")) {
        mod.family = "loader", mod.name = "v2", mod.iface = &ld_iface_v2;
    } else if (IS("loader_wrongcap")) {
        mod.family = "loader", mod.name = "wrongcap", mod.iface = &ld_iface, mod.caps = BENCH_CAP_KV_SHARED_POOL;
    }
    return &mod;
}
