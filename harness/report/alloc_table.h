/* Allocator workloads, the report's half: the summary tables bench run prints. */
#ifndef BENCH_ALLOC_TABLE_H
#define BENCH_ALLOC_TABLE_H

#include <stdio.h>

#include "harness/report/results.h"

/* Tables of medians, rows = workloads, columns = allocators, each cell with its
 * ratio to the "libc" column (1.00x), or to the first column when there is none. */
void aw_print_table(FILE *f, const rs_input *in, const rm_model *sum);

#endif
