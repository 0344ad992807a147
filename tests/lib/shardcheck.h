/* Comparing a merged sharded run with an unsharded run of the same scenario
 * (tests/test_shard.c, tests/test_slurm.c). */
#ifndef BENCH_TEST_SHARDCHECK_H
#define BENCH_TEST_SHARDCHECK_H

#include <stddef.h>
#include <cJSON.h>

/* Same variants (keys, selection); every measured record (variant key, repetition) of
 * one in the other, with the same status; the same deterministic figures per record
 * (metrics of bench compare's exact class: the modules' counters; prompt and generated
 * token ids; prompt length) and per variant in the summaries (counted repetitions; n and
 * median of the exact metrics). Returns the number of figures found equal, or -1 with
 * the first difference in err. */
int sck_same_records(const cJSON *merged, const cJSON *full, char *err, size_t errlen);

#endif
