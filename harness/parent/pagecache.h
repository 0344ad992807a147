/* The page-cache state of the model files before a repetition.
 *
 *   cold: fdatasync, then posix_fadvise(POSIX_FADV_DONTNEED) on the whole file
 *   warm: evict as for cold, then read the whole file once with read(2) (pc_warm_reread)
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
/* Evict, then read: the page cache filled by read(2), whatever filled it before. How the
 * pages got there decides how mmap faults them in: on synth llama-110m (kernel 6.x) a warm
 * mmap repetition took 943 prefill faults right after the model was written, about 3,800
 * after a cold mmap repetition's faults, and 759 after this. bench run's warm repetitions
 * all start here, so warm means one thing. */
int pc_warm_reread(const char *path, char *err, size_t errlen);
/* Pages of path resident in the page cache, and its pages in all. */
int pc_residency(const char *path, uint64_t *resident, uint64_t *total, char *err, size_t errlen);

#endif
