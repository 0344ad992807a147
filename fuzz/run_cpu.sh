#!/usr/bin/env bash
# Runs one fuzz target until it has used CPU_SECONDS of CPU time (not wall time: the
# machine is shared), then stops it with SIGINT so libFuzzer prints its final stats.
# Usage: fuzz/run_cpu.sh build/fuzz/fuzz_NAME CPU_SECONDS [LOG]
# Prints "cpu_s=... execs=... crashes=..." at the end; the log keeps libFuzzer's output.
set -u
t=$1; cpu=$2; name=$(basename "$t")
log=${3:-build/fuzz/$name.log}
mkdir -p "build/fuzz/corpus/$name" "build/fuzz/crash/$name"
hz=$(getconf CLK_TCK)
# The CPU modules only: the CUDA runtime, dlopen'ed and unloaded again, leaves
# allocations LeakSanitizer cannot attribute (and then calls them the input's leak).
if [ -z "${FUZZ_MODULE_DIR:-}" ]; then
  FUZZ_MODULE_DIR=build/fuzz/modules
  mkdir -p $FUZZ_MODULE_DIR
  for m in build/modules/*.so; do case $m in */device_*) ;; *) ln -sf "$PWD/$m" $FUZZ_MODULE_DIR/ ;; esac; done
fi
export FUZZ_MODULE_DIR
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# the jemalloc module wants static TLS set aside at start (harness/cli/main.c does the same)
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.rtld.optional_static_tls=16384}
# -fork=0: one process, so its own /proc/PID/stat counts all the work
"$t" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -close_fd_mask=1 \
     -artifact_prefix="build/fuzz/crash/$name/" "build/fuzz/corpus/$name" "fuzz/corpus/$name" >"$log" 2>&1 &
pid=$!
used=0
while kill -0 $pid 2>/dev/null; do
  sleep 5
  # utime + stime (fields 14, 15) of the fuzzer, in clock ticks
  st=$(cut -d' ' -f14,15 /proc/$pid/stat 2>/dev/null) || break
  used=$(( ($(echo $st | cut -d' ' -f1) + $(echo $st | cut -d' ' -f2)) / hz ))
  [ "$used" -ge "$cpu" ] && { kill -INT $pid; break; }
done
wait $pid
rc=$?
execs=$(grep -Eo 'stat::number_of_executed_units: [0-9]+' "$log" | awk '{print $2}')
crashes=$(ls "build/fuzz/crash/$name" | wc -l)
echo "$name: cpu_s=$used execs=${execs:-?} crashes=$crashes rc=$rc"
