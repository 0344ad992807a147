#!/usr/bin/env bash
# Verifies the CUDA work on a machine with an NVIDIA GPU (issue 7's acceptance), one step
# at a time so that each fits a time-limited session:
#   scripts/gpu_verify.sh build       release build (build/) and sanitizer build (build/asan), CUDA modules included
#   scripts/gpu_verify.sh test        every test on both builds; tests/test_cuda.c is the GPU one
#   scripts/gpu_verify.sh generate    greedy ids on cuda vs the oracle; tinyllama-1.1b f16 decode against
#                                     the GPU's bandwidth bound, and load GB/s, per loader (gpu_check.sh ids speed)
#   scripts/gpu_verify.sh scenarios   mmap_vs_pread, kv_prealloc_vs_dynamic, kv_block_vs_token on cuda,
#                                     cuda_kv_growth, cuda_speed
#   scripts/gpu_verify.sh summary     the figures the issue asks for, from the scenarios' results
#   scripts/gpu_verify.sh all         all of the above
# OUT (default results/gpu-verify) receives the logs and the results directories.
# Without network there: run scripts/gpu_debs.sh where apt works and bring .gpu-debs/ along;
# this script unpacks it into /tmp/bench-debs and points the compiler and loader there.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu-verify}
mkdir -p "$OUT"
JOBS=$(nproc)
SHARED=${BENCH_SHARED:-$(cd .. && pwd)/shared}
[ -d "$SHARED/models" ] || SHARED=$PWD/shared
export BENCH_SHARED=$SHARED

if [ -d .gpu-debs ] && [ ! -e /usr/include/cjson/cJSON.h ]; then
  root=/tmp/bench-debs
  if [ ! -d $root ]; then
    mkdir -p $root
    for f in .gpu-debs/*.deb; do dpkg -x "$f" $root; done
  fi
  lib=$root/usr/lib/x86_64-linux-gnu
  export CPATH=$root/usr/include:$root/usr/include/cjson${CPATH:+:$CPATH}
  export LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

step_build() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  nvcc --version | tail -2 | tee -a "$OUT/gpu.txt"
  # make test would run scripts/deps.sh (apt-get): build the test targets directly instead
  ( time make -j"$JOBS" CUDA=1 all BUILD=build tests-build ) 2>&1 | tail -5
  ( time make -j"$JOBS" CUDA=1 BUILD=build/asan SAN=1 OPT=-O1 tests-build ) 2>&1 | tail -5
  build/bench list | grep -E "^\S|devices: cuda" | tee "$OUT/list.txt"
}

step_test() {
  set +e
  bash tests/run.sh build 2>&1 | tee "$OUT/tests-release.log" | tail -3
  bash tests/run.sh build/asan 2>&1 | tee "$OUT/tests-asan.log" | tail -3
  grep -A40 "test_cuda" "$OUT/tests-release.log" | grep -E "INFO|OK|FAIL|ERROR|SKIP" | head -40
  set -e
}

# the checks themselves are scripts/gpu_check.sh's, on this build
step_generate() { OUT=$OUT BUILD=build bash scripts/gpu_check.sh ids speed; }
step_scenarios() { OUT=$OUT BUILD=build bash scripts/gpu_check.sh scenarios; }

# The medians of some metrics per variant, from a results.json (python3 is on the GPU image).
figures() {
  python3 - "$1" "${@:2}" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
want = sys.argv[2:]
for v in doc["summary"]:
    got = v.get("metrics", {})
    cells = []
    for w in want:
        m = got.get(w)
        cells.append(f"{w}={m['median']:.4g}" if m and m.get("median") is not None else f"{w}=-")
    print(f"  {v.get('label', v.get('key'))}: " + "  ".join(cells))
PY
}

step_summary() {
  {
    echo "== greedy ids, stories260K f32 on cuda"; cat "$OUT/ids.txt"
    echo "== decode speed and bandwidth (bench generate --bandwidth)"; grep -E "==|bandwidth|cuda " "$OUT/speed.txt"
    echo "== cuda_speed: load and decode"
    figures "$OUT/cuda_speed/results.json" load_ms mod.loader.h2d_gb_s mod.loader.pinned_bytes decode_tok_s \
      mod.device.decode_event_tok_s mod.device.triad_gb_s mod.device.decode_bound_fraction
    echo "== cuda_kv_growth: copies and TPOT"
    figures "$OUT/cuda_kv_growth/results.json" mod.kv.grow_events mod.kv.bytes_copied mod.device.tpot_event_p50_ms \
      mod.device.tpot_event_max_ms itl_p99_ms mod.device.gpu_mem_used_peak_B
    for s in mmap_vs_pread kv_prealloc_vs_dynamic kv_block_vs_token; do
      echo "== $s on cuda"
      figures "$OUT/$s/results.json" load_ms ttft_ms tpot_ms mod.loader.h2d_gb_s mod.kv.bytes_reserved mod.device.gpu_mem_used_peak_B
    done
  } 2>&1 | tee "$OUT/summary.txt"
}

case "${1:-all}" in
  build) step_build ;;
  test) step_test ;;
  generate) step_generate ;;
  scenarios) step_scenarios ;;
  summary) step_summary ;;
  all) step_build; step_test; step_generate; step_scenarios; step_summary ;;
  *) echo "usage: scripts/gpu_verify.sh [build|test|generate|scenarios|summary|all]" >&2; exit 2 ;;
esac
