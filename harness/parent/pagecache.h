/* The page-cache state of the model files before a repetition.
 *
 *   cold: fdatasync, then posix_fadvise(POSIX_FADV_DONTNEED) on the whole file
 *   warm: read the whole file once
 * and then the residency, counted with mincore() over a read-only mapping.
 * DONTNEED cannot evict pages that a live process maps or that are dirty, which
 * is why the residency is measured rather than assumed.
 */
#ifndef BENCH_PAGECACHE_H
#define BENCH_PAGECACHE_H

#include <stddef.h>
#include <stdint.h>

int pc_evict(const char *path, char *err, size_t errlen);
int pc_warm(const char *path, char *err, size_t errlen);
/* Evict, then read: the page cache filled by reading, as a loader fills it, whatever
 * filled it before. Pages that writing the file left behind fault in differently (a
 * warm repetition right after the model was written took 945 prefill faults against
 * about 3,900), so the first warm repetition of each variant in a run starts here. */
int pc_warm_reread(const char *path, char *err, size_t errlen);
/* Pages of path resident in the page cache, and its pages in all. */
int pc_residency(const char *path, uint64_t *resident, uint64_t *total, char *err, size_t errlen);

#endif
