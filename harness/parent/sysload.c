/* A repetition's load (sysload.h): util's readings, with the workers' CPU time as ours. */
#include "harness/parent/sysload.h"

void sl_read(sl_snap *s) { ut_cpu_read(s); }

sl_load sl_between(const sl_snap *a, const sl_snap *b, double workers_cpu_s) { return ut_cpu_between(a, b, workers_cpu_s); }
