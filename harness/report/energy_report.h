/* Energy and GPU memory, the report's half: from the runner's marks and points of a repetition
 * (rn_run.energy, harness/parent/energy.h).
 *
 * Metrics of a repetition (run-level: the machine's energy, all processes together; absent
 * where no source counts energy here, never 0):
 *   energy_{load,prefill,decode}_j   J between the phase boundaries (start..load, load..prefill,
 *                                    prefill..end); a serving run's energy_serve_j (load..end)
 *   power_{load,prefill,decode,serve}_w   their average power
 *   energy_prefill_j_per_tok         prefill's J over the prompt tokens of every process
 *   energy_decode_j_per_tok          decode's J over the tokens decoded (after the first)
 *   gpu_used_peak_mib gpu_proc_peak_mib   NVML: the GPUs' used memory, the workers' part, at most
 * Energy is the machine's, so it is declared "info": shown and compared, never judged a
 * regression (other processes' work counts in it).
 *
 * results.json, each repetition, "energy": {"available": false, "why": "..."} where no source
 * counts here; else {"available": true, "sources": [{"name", "what", "method"}],
 * "unavailable": {name: why}, "phases": {"load": {"j", "s", "w"}, ...}, "prefill_tokens",
 * "decoded_tokens", "j_per_prefill_token", "j_per_decoded_token",
 * "timeline": {"t_ms", "watts", "gpu_used_mib", "gpu_proc_mib"}} (t_ms since the first
 * process's HELLO, the axis of its RSS timeline; watts since the point before). */
#ifndef BENCH_ENERGY_REPORT_H
#define BENCH_ENERGY_REPORT_H

#include <stddef.h>

#include "harness/parent/runner.h"
#include "harness/report/metrics.h"
#include "harness/report/rmodel.h"

struct cJSON;

/* The repetition's "energy" object. */
struct cJSON *er_run_json(const rn_run *r);
/* Its metrics, into b. */
void er_metrics(const rn_run *r, mt_bag *b);
/* One sentence for bench run's table where the counted repetitions had no energy source:
 * "energy: unavailable here (...)"; "" where they had one. */
void er_note(const rm_model *m, char *buf, size_t len);

#endif
