#!/usr/bin/env bash
# A valgrind tool on one variant of a scenario, with the tool's own report.
#
#   scripts/valgrind.sh massif|dhat|callgrind|memcheck SCENARIO.json VARIANT [bench exec options...]
#   scripts/valgrind.sh massif scenarios/ci.json loader=mmap,kv=prealloc
#
# Runs `valgrind --tool=TOOL -- bench exec SCENARIO --variant VARIANT ...` (one
# repetition in this process: no runner around it) and writes, into
# results/<scenario>/investigations/<variant key>/:
#   massif     massif.out, massif.txt (ms_print). --pages-as-heap=yes: every page
#              mapped counts, so mmap'd weights show next to malloc'd ones.
#   dhat       dhat.json (open in valgrind's dh_view.html), dhat.txt (the summary)
#   callgrind  callgrind.out.N, one file per phase (bench exec --callgrind: 1 start,
#              2 load, 3 prefill, 4 decode; callgrind.out is the teardown), and
#              callgrind-<phase>.txt (callgrind_annotate, inclusive) for each
#   memcheck   memcheck.log; exit 1 on any error or definite/indirect leak
# BENCH: the bench binary (default build/bench; not an ASan build: valgrind cannot run one).
set -euo pipefail
if [ $# -lt 3 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
tool=$1 scenario=$2 variant=$3
shift 3
case $tool in massif|dhat|callgrind|memcheck) ;; *)
  echo "valgrind.sh: unknown tool \"$tool\" (have: massif, dhat, callgrind, memcheck)" >&2; exit 2;; esac
bench=${BENCH:-build/bench}
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed (scripts/deps.sh)" >&2; exit 1; }
[ -x "$bench" ] || { echo "valgrind.sh: no bench binary at $bench (make, or set BENCH)" >&2; exit 1; }
if grep -q __asan_init "$bench"; then
  echo "valgrind.sh: $bench is an ASan build; valgrind cannot run it (use the release build)" >&2; exit 1
fi

which=$("$bench" exec "$scenario" --variant "$variant" --which) || exit 2
name=${which%%$'\t'*} key=${which#*$'\t'}
dir=results/$name/investigations/$(printf '%s' "$key" | tr '=,/' '-_+')
mkdir -p "$dir"
# once natively first: a synth model is generated (and cached) outside valgrind
"$bench" exec "$scenario" --variant "$key" >"$dir/native-exec.log" 2>&1 || {
  echo "valgrind.sh: the variant fails even without valgrind; see $dir/native-exec.log" >&2; exit 1; }
run=("$bench" exec "$scenario" --variant "$key" "$@")
log=$dir/$tool-exec.log
echo "valgrind.sh: valgrind --tool=$tool ... -- ${run[*]}" >&2

status=0
case $tool in
massif)
  valgrind --tool=massif --pages-as-heap=yes --massif-out-file="$dir/massif.out" -- "${run[@]}" 2>"$log" || status=$?
  ms_print "$dir/massif.out" >"$dir/massif.txt"
  ;;
dhat)
  valgrind --tool=dhat --dhat-out-file="$dir/dhat.json" -- "${run[@]}" 2>"$log" || status=$?
  grep -E '^==[0-9]+== (Total|At t-gmax|At t-end|Reads|Writes):' "$log" | sed 's/^==[0-9]*== //' >"$dir/dhat.txt" || true
  ;;
callgrind)
  rm -f "$dir"/callgrind.out "$dir"/callgrind.out.*
  valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" -- "${run[@]}" --callgrind 2>"$log" || status=$?
  i=1
  for ph in start load prefill decode; do
    [ -f "$dir/callgrind.out.$i" ] && callgrind_annotate --inclusive=yes "$dir/callgrind.out.$i" >"$dir/callgrind-$ph.txt"
    i=$((i + 1))
  done
  [ -f "$dir/callgrind.out" ] && callgrind_annotate --inclusive=yes "$dir/callgrind.out" >"$dir/callgrind-end.txt"
  for f in "$dir"/callgrind.out.[1-4]; do
    [ -f "$f" ] && printf '  %-8s %s instructions\n' \
      "$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")" "$(sed -n 's/^totals: //p' "$f")" >&2
  done
  ;;
memcheck)
  valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --log-file="$dir/memcheck.log" -- "${run[@]}" 2>"$log" || status=$?
  grep -E 'ERROR SUMMARY|definitely lost|indirectly lost' "$dir/memcheck.log" | sed 's/^==[0-9]*== /  /' >&2 || true
  ;;
esac
if [ $status -ne 0 ]; then
  echo "valgrind.sh: exit $status (see $log${tool:+ and the report})" >&2
fi
echo "valgrind.sh: outputs in $dir:" >&2
ls -1 "$dir" | grep -E "^($tool|massif|dhat|callgrind|memcheck)" | sed "s|^|  $dir/|"
[ $status -eq 0 ] || exit 1
