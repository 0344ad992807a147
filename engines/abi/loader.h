/* Family "loader": gets tensor bytes from the model files to where compute
 * reads them. Version BENCH_LOADER_IFACE_VERSION.
 *
 * The core parses the format (llama2.c, GGUF, safetensors) into a list of
 * tensors with their file and byte range; the loader makes each tensor's bytes
 * addressable and returns a pointer per tensor. A pointer must be aligned to
 * bench_dtype_align(dtype): a loader that cannot use the bytes in place at such
 * an address copies them, and counts it.
 */
#ifndef BENCH_LOADER_H
#define BENCH_LOADER_H

#include "module.h"
#include "dtype.h"

/* Version 3: the optional memory_kind slot (a version 2 module, which has none, still loads,
 * and the host takes the slot's default for it). Version 2 (module API 2): open takes the
 * module's filled options struct. */
#define BENCH_LOADER_IFACE_VERSION 3u
#define BENCH_LOADER_IFACE_MIN_VERSION 2u

/* How the memory behind a loaded tensor is held: whether the host may rewrite it in place
 * (repack.c rearranges Q4_0 matrices at load) or must copy it first. */
typedef enum bench_loader_memory {
    BENCH_LOADER_MEM_UNKNOWN = 0,   /* the host neither writes it nor drops its pages (the default) */
    BENCH_LOADER_MEM_PRIVATE,       /* this process's own and writable: pread's buffer, an aligned copy */
    BENCH_LOADER_MEM_PRIVATE_RO,    /* this process's own, mapped read-only (MAP_PRIVATE file pages):
                                     * writable after mprotect, a write makes an anonymous copy of a page */
    BENCH_LOADER_MEM_SHARED,        /* shared with the page cache and other processes (MAP_SHARED):
                                     * never written; the host copies what it rewrites */
} bench_loader_memory;

typedef struct bench_tensor_ref {
    const char *name;
    bench_dtype dtype;
    int file;           /* index into the files array */
    uint64_t offset;    /* absolute byte offset of the tensor in that file */
    uint64_t nbytes;
} bench_tensor_ref;

struct bench_loader_iface {
    uint32_t version;   /* BENCH_LOADER_IFACE_VERSION */
    int  (*open)(const void *opts, const bench_host *host, void **ctx, char *err, size_t errlen);
    /* Fills data[i] for each of the n tensors. The pointers stay valid until close(). */
    int  (*load)(void *ctx, const char *const *files, int n_files,
                 const bench_tensor_ref *tensors, int n, const void **data, char *err, size_t errlen);
    /* (optional) bytes read, bytes copied, zero-copy tensors, ... */
    void (*counters)(void *ctx, const bench_counter_sink *sink);
    void (*close)(void *ctx);   /* ctx may be NULL; unmaps/frees everything */
    /* (optional, version 3) how [p, p + len), within one tensor load returned, is held: a
     * bench_loader_memory. Default (no slot, or a version 2 module): BENCH_LOADER_MEM_UNKNOWN. */
    int  (*memory_kind)(void *ctx, const void *p, size_t len);
};

/* A loader instance: its vtable and context (bench_allocator's pattern), with a wrapper for
 * the optional slot, so that a caller never tests it. */
typedef struct bench_loader {
    const struct bench_loader_iface *iface;
    void *ctx;
} bench_loader;

/* counters, default: none */
static inline void bench_loader_counters(const bench_loader *l, const bench_counter_sink *sink) {
    if (l->iface->counters) l->iface->counters(l->ctx, sink);
}

/* memory_kind, default: BENCH_LOADER_MEM_UNKNOWN. A version 2 vtable ends before the slot:
 * its version is read first, so the slot is never read past its end. */
static inline bench_loader_memory bench_loader_memory_kind(const bench_loader *l, const void *p, size_t len) {
    if (l->iface->version < 3 || !l->iface->memory_kind) return BENCH_LOADER_MEM_UNKNOWN;
    return (bench_loader_memory)l->iface->memory_kind(l->ctx, p, len);
}

/* Reads a byte of every page of [p, p + len) (page bytes apart, and the last byte), so that
 * what a first access costs (a minor fault, a cold file's read, a shadow-paging hypervisor's
 * fill) is paid now, at load, not by the first forward pass: the engine for what a loader
 * holds privately, loader mmap (touch=1) for its file mappings. Returns a sum of the bytes so
 * that the reads are kept; callers ignore it. */
static inline unsigned bench_touch_pages(const void *p, size_t len, size_t page) {
    const volatile unsigned char *b = (const volatile unsigned char *)p;
    unsigned sum = 0;
    for (size_t o = 0; o < len; o += page) sum += b[o];
    return len ? sum + b[len - 1] : sum;
}

#endif
