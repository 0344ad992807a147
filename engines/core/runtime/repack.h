/* Rearranging matrices at load for the CPU kernels in use (kernels.h kn_repack_dt): Q4_0 with 16
 * rows interleaved (q4g16.h) or within rows (q4r8.h), as llama.cpp repacks Q4_0, and bf16 in
 * groups of 16 rows (bf16r16.h) where prefill runs on bf16 dot products: a loader-independent
 * step between binding the weights and the first forward pass. Where the loader's memory is
 * private (pread's buffer, a MAP_PRIVATE file) the
 * rows are rearranged in place: pread's costs nothing more, a private file mapping's pages
 * become anonymous copies (copy on write). Where it is shared (mmap's default MAP_SHARED) the
 * matrix is rearranged into anonymous memory named as weights, and the file's pages it was
 * read from are dropped from the process (MADV_DONTNEED; they stay in the page cache). Either
 * way an mmap'd model's rearranged matrices end up anonymous: what mmap buys changes, and the
 * memory figures (RssAnon, the bench:weights region) show by how much; repack.c rp_matrix says
 * why for each dtype. */
#ifndef BENCH_REPACK_H
#define BENCH_REPACK_H

#include <stdint.h>

#include "engines/abi/loader.h"
#include "engines/abi/module.h"
#include "engines/core/compute/transformer.h"

typedef struct repack {
    int matrices;       /* rearranged */
    int bf16;           /* of which bf16 (grouped); the others Q4_0 */
    int q4_0_g16;       /* of which Q4_0 with 16 rows interleaved (q4g16.h); the other Q4_0 within rows */
    uint64_t bytes;     /* their bytes */
    uint64_t copied;    /* of which rearranged into anonymous copies (shared mappings) */
    int skipped;        /* matrices left as they were: memory neither writable nor copied (unknown) */
    void **copies;      /* owned: the copies' mappings, munmap'd by repack_release */
    size_t *copy_len;
    int n_copies;
} repack;

/* Rearranges w's Q4_0 and bf16 matrices (not the token embedding, nor a classifier tied to it)
 * when kn_repack_dt says the kernel families in use read them so; each one's dtype becomes
 * that layout's tag, and a copied one's data points at its copy. loader, which loaded w's
 * bytes, says how each matrix's memory is held (bench_loader_memory_kind); host names the
 * copies (BENCH_REGION_WEIGHTS) and shares the work over its pool. */
void repack_weights(tf_weights *w, int n_layers, const bench_loader *loader, const bench_host *host, repack *r);
void repack_release(repack *r);

#endif
