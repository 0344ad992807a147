#!/usr/bin/env bash
# perf on one variant of a scenario: call graphs, the report and folded stacks.
#
#   scripts/perf.sh SCENARIO.json VARIANT [bench exec options...]
#   scripts/perf.sh scenarios/ci.json loader=mmap,kv=prealloc --loop 50
#
# Runs `perf record -g -- bench exec SCENARIO --variant VARIANT ...` (one repetition
# in one process: no runner, no sampler thread in the profile) and writes, into
# results/<scenario>/investigations/<variant key>/:
#   perf.data            the samples (perf report -i ... to browse)
#   perf-report.txt      self cost per symbol, flat (where the time is spent)
#   perf-callers.txt     inclusive cost with call graphs (who spends it)
#   perf.folded          one line per distinct stack, "a;b;c count": flame graph input
#                        (flamegraph.pl perf.folded > flame.svg, or speedscope)
# Hardware cycles where the machine has a PMU; else (VMs, as here) the cpu-clock
# software event, which samples the same way on a timer.
# BENCH: the bench binary (default build/bench, a release build: -g and frame pointers).
set -euo pipefail
if [ $# -lt 2 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
scenario=$1 variant=$2
shift 2
bench=${BENCH:-build/bench}
command -v perf >/dev/null || { echo "perf.sh: perf is not installed (scripts/deps.sh perf installs linux-perf)" >&2; exit 1; }
[ -x "$bench" ] || { echo "perf.sh: no bench binary at $bench (make, or set BENCH)" >&2; exit 1; }

# the folder is named by the variant's canonical key, whatever order VARIANT gave
which=$("$bench" exec "$scenario" --variant "$variant" --which) || exit 2
name=${which%%$'\t'*} key=${which#*$'\t'}
dir=results/$name/investigations/$(printf '%s' "$key" | tr '=,/' '-_+')
mkdir -p "$dir"
# once without perf first: a synth model is generated (and cached) outside the profile,
# which is then of the variant's run, not of the model's generation
"$bench" exec "$scenario" --variant "$key" >"$dir/native-exec.log" 2>&1 || {
  echo "perf.sh: the variant fails even without perf; see $dir/native-exec.log" >&2; exit 1; }

event=cycles
if perf stat -x, -e cycles -- true 2>&1 | grep -q '^<not'; then
  event=cpu-clock
  echo "perf.sh: no hardware cycles counter here: sampling the cpu-clock software event" >&2
fi
echo "perf.sh: perf record -e $event -g -- $bench exec $scenario --variant $key $*" >&2
perf record -q -e "$event" -F 2000 -g -o "$dir/perf.data" -- \
  "$bench" exec "$scenario" --variant "$key" "$@" 2>"$dir/exec.log" || {
  echo "perf.sh: the run failed; see $dir/exec.log" >&2; exit 1; }

perf report -i "$dir/perf.data" --stdio --no-children -g none --percent-limit 0.5 \
  --sort dso,symbol >"$dir/perf-report.txt" 2>/dev/null
perf report -i "$dir/perf.data" --stdio --children --percent-limit 3 \
  >"$dir/perf-callers.txt" 2>/dev/null

# Folding: perf script prints each sample as a header line, its frames (innermost
# first, "addr symbol+off (dso)"), then a blank line; a stack is the frames
# reversed and joined by ';', counted over identical stacks.
perf script -i "$dir/perf.data" -F comm,ip,sym 2>/dev/null | awk '
  function flush(   s, i) {
    if (n == 0) return
    s = comm
    for (i = n; i >= 1; i--) s = s ";" f[i]
    count[s]++
    n = 0
  }
  /^[^ \t]/ { flush(); comm = $1; next }
  /^[ \t]*$/ { flush(); next }
  { sym = $2; for (i = 3; i <= NF; i++) sym = sym " " $i
    sub(/\+0x[0-9a-f]+$/, "", sym); if (sym == "") sym = "[unknown]"
    f[++n] = sym }
  END { flush(); for (s in count) print s, count[s] }' | sort >"$dir/perf.folded"

echo "perf.sh: $(wc -l <"$dir/perf.folded") distinct stacks; outputs in $dir:" >&2
ls -1 "$dir" | grep -E '^(perf|exec)' | sed "s|^|  $dir/|"
