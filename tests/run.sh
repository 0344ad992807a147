#!/usr/bin/env bash
# Runs every test binary of a build and ends with one summary line:
#   tests: N passed, N failed, N skipped
# Usage: tests/run.sh BUILD_DIR   (e.g. build/asan)
set -u
build=${1:-build/asan}
export BENCH_SHARED=${BENCH_SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared}
export BENCH_MODULE_PATH=${BENCH_MODULE_PATH:-$PWD/$build/modules}
export BENCH_BIN=${BENCH_BIN:-$PWD/$build/bench}
export BENCH_TMP=${BENCH_TMP:-$(mktemp -d /tmp/bench-tests.XXXXXX)}
# bench run draws its figures at the end (about 1 s each run); only test_plot wants them, and it unsets this
# auto keeps the flags' order: exact figures must not depend on a timing (kernels_tune.h)
export BENCH_KERNELS_TUNE=${BENCH_KERNELS_TUNE:-0}
export BENCH_GNUPLOT=${BENCH_GNUPLOT:-/nonexistent/gnuplot}
# Leaks are errors; modules stay loaded under ASan so their frames symbolize. Where an
# NVIDIA GPU is, the driver maps memory in ASan's shadow gap (protect_shadow_gap=0 lets
# it) and keeps allocations to the end (lsan.supp names those libraries).
gpu_asan=""
[ -e /dev/nvidiactl ] && gpu_asan=":protect_shadow_gap=0"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0$gpu_asan}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

[ -d "$BENCH_SHARED/models" ] || echo "run.sh: note: $BENCH_SHARED/models is missing; tests that need the shared models will skip" >&2

passed=0 failed=0 skipped=0 crashed=()
# BENCH_TEST_GLOB: which binaries (make test-slow runs slow_*)
for t in "$build"/tests/${BENCH_TEST_GLOB:-test_*}; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  log="$BENCH_TMP/$name.log"
  start=$(date +%s)
  "$t" >"$log" 2>&1
  rc=$?
  cat "$log"
  p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
  f=$(grep -Eo '^\[  FAILED  \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
  s=$(grep -Eo '^\[  SKIPPED \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
    # a crash or sanitizer report outside any counted test
    failed=$((failed + 1)); crashed+=("$name (exit $rc)")
  fi
  echo "run.sh: $name: $p passed, $f failed, $s skipped in $(( $(date +%s) - start ))s" >&2
done
[ ${#crashed[@]} -gt 0 ] && echo "run.sh: crashed: ${crashed[*]}" >&2
rm -rf "$BENCH_TMP"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
