#!/usr/bin/env bash
# The CI gate: runs scenarios/ci.json and compares it with the committed baseline
# results/baselines/ci.json, gating on deterministic figures (page faults, RSS by
# region, the modules' byte and allocation counters) and on ratios measured inside
# the one run. Times are graphed (bench run draws them), not gated: on a shared VM
# they move by tens of percent between two runs of the same build.
#
# Usage: scripts/ci_gate.sh [RESULTS_DIR]
#   RESULTS_DIR  where the run goes (default results/ci/gate-<UTC time>); when it already
#                holds a results.json, that run is compared and nothing is run.
# Environment: BENCH_BIN (default build/bench), BENCH_BASELINE (default
#   results/baselines/ci.json), BENCH_GATE_SCENARIO (default scenarios/ci.json).
# Exit status: 0 no regression; 1 a regression (the table says which); 2 the gate could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
bench=${BENCH_BIN:-build/bench}
# the gate's exact figures are taken with auto in the flags' order, not a timing's choice
export BENCH_KERNELS_TUNE=${BENCH_KERNELS_TUNE:-0}
baseline=${BENCH_BASELINE:-results/baselines/ci.json}
scenario=${BENCH_GATE_SCENARIO:-scenarios/ci.json}
out=${1:-results/ci/gate-$(date -u +%Y%m%dT%H%M%SZ)}

[ -f "$baseline" ] || { echo "ci_gate: no baseline $baseline (see README.md, \"Updating the CI baseline\")" >&2; exit 2; }
if [ ! -f "$out/results.json" ]; then
  "$bench" run "$scenario" --out "$out" || { echo "ci_gate: bench run $scenario failed" >&2; exit 2; }
fi
echo "ci_gate: $out against $baseline (deterministic figures and in-run ratios; times not gated)"
# The ratios: the dynamic cache must not allocate more often than the preallocated one
# relative to the baseline, the preallocated one reserves its whole context, and pread
# copies the weights into anonymous memory (faulting it in) where mmap maps the file.
"$bench" compare "$baseline" "$out" --deterministic-only --brief \
  --ratio mod.kv.allocs:kv=dynamic/kv=prealloc \
  --ratio mod.kv.bytes_reserved:kv=prealloc/kv=dynamic \
  --ratio anon_load_mib:loader=pread/loader=mmap \
  --ratio minflt_load:loader=pread/loader=mmap
rc=$?
[ $rc -eq 1 ] && echo "ci_gate: REGRESSION against $baseline. If the change is deliberate, update the baseline (README.md, \"Updating the CI baseline\")." >&2
exit $rc
