/* The workload kinds, one entry each (harness/scenario/kind.h says what each slot is for). */
#include "kinds.h"

#include "harness/child/alloc_workload.h"
#include "harness/child/worker.h"
#include "harness/report/alloc_table.h"
#include "harness/report/results.h"
#include "harness/report/http_report.h"
#include "harness/report/serve_report.h"
#include "harness/scenario/alloc_spec.h"
#include "harness/scenario/worker_spec.h"

const sc_kind bench_kinds[] = {
    {.name = "inference", .file_kind = NULL, .requests = 0, .worker_kind = NULL, .needs_model = 1,
     .parse = sc_parse_engine, .worker_spec = sc_engine_worker_spec, .worker = worker_engine,
     .metrics = hr_inference_metrics, .table = rs_print_table},
    {.name = "serving", .file_kind = NULL, .requests = 1, .worker_kind = NULL, .needs_model = 1,
     .parse = sc_parse_engine, .worker_spec = sc_engine_worker_spec, .worker = worker_engine,
     .metrics = hr_serve_metrics, .table = rs_print_table},
    {.name = "allocators", .file_kind = "allocators", .requests = -1, .worker_kind = "alloc_workload", .needs_model = 0,
     .parse = aw_parse_scenario, .worker_spec = aw_worker_spec, .worker = aw_worker,
     .metrics = NULL, .table = aw_print_table},
};
const int bench_n_kinds = (int)(sizeof(bench_kinds) / sizeof(bench_kinds[0]));

void bench_kinds_use(void) { sc_use_kinds(bench_kinds, bench_n_kinds); }
