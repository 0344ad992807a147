/* What to copy to the device mirror of a host index table: the block table of kv "block"
 * or the slot map of kv "token" (engines/modules/kv_block.c, kv_token.c), whose logic
 * runs on the host while their attention kernel reads the table on the device
 * (engines/cuda/kvp_cuda.c). Plain C, tested on the CPU (tests/test_cuda_host.c).
 *
 *   table    the host's table, entries [0, n_need) needed by the next kernel
 *   shadow   what the device copy holds: entries [0, n_synced) valid
 * A table changes by appending (reserve) and, rarely, by rewriting entries already
 * synced (copy-on-write of a shared block, a slot swapped for the prefix tree's), so the
 * upload is one range: from the first entry that differs or is missing to n_need.
 */
#ifndef BENCH_CUDA_TABLEMIRROR_H
#define BENCH_CUDA_TABLEMIRROR_H

/* Entries to upload, starting at *first; 0 when the device copy is up to date. */
int tmr_diff(const int *table, const int *shadow, int n_synced, int n_need, int *first);

#endif
