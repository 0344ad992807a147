/* The table of workload kinds (harness/scenario/kind.h): one entry per kind. */
#ifndef BENCH_KINDS_H
#define BENCH_KINDS_H

#include "harness/scenario/kind.h"

extern const sc_kind bench_kinds[];
extern const int bench_n_kinds;

/* Hands the table to the spec layer (sc_use_kinds): main() does, and tests/lib for every test binary. */
void bench_kinds_use(void);

#endif
