#!/usr/bin/env bash
# Submits a sharded bench run to Slurm: an N-task job array (bench-array.sbatch), one shard
# per task, and a merge job (bench-merge.sbatch) that runs when every task has ended.
#
#   scripts/slurm/submit.sh SCENARIO.json N [OUT_DIR] [-- bench run options...]
#
# OUT_DIR (default results/<scenario file's name>/slurm-<UTC time>) must be on a filesystem
# every node sees. It gets plan.json (`bench plan`), shards/shard-i-of-N/, logs/ and, at
# the end, merged/ with results.json, results.csv, plots/ and report.html.
# Prints "jobs: ARRAY_ID MERGE_ID" on stdout.
# Environment: BENCH the bench binary (default build/bench beside this script, else bench
# on PATH), made absolute for the jobs; SBATCH_OPTS more sbatch options for both jobs
# (e.g. "--partition=cpu --time=2:00:00"); Slurm's own SBATCH_* variables work too.
set -euo pipefail
usage() { echo "usage: $0 SCENARIO.json N [OUT_DIR] [-- bench run options...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
scenario=$1 n=$2
shift 2
case $n in ''|*[!0-9]*) echo "submit.sh: N = \"$n\": expected a count of shards" >&2; exit 2 ;; esac
[ "$n" -ge 1 ] || { echo "submit.sh: N = $n: expected at least 1 shard" >&2; exit 2; }
out=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then out=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${BENCH:-}" ]; then
  if [ -x "$here/../../build/bench" ]; then BENCH="$here/../../build/bench"; else BENCH=$(command -v bench || true); fi
fi
[ -n "$BENCH" ] && [ -x "$BENCH" ] || { echo "submit.sh: no bench binary: build it (make) or set BENCH" >&2; exit 2; }
BENCH=$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")
export BENCH
command -v sbatch >/dev/null || { echo "submit.sh: sbatch not found: this needs a Slurm client (docs/cluster.md)" >&2; exit 2; }
[ -n "$out" ] || out="results/$(basename "$scenario" .json)/slurm-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
# the plan first: a bad scenario or more shards than cells fails here, not in N jobs
plan_args=()
args=("$@")
for ((k = 0; k < ${#args[@]}; k++)); do
  case ${args[k]} in
    --only|--repeat|--device) plan_args+=("${args[k]}" "${args[k + 1]:-}"); k=$((k + 1)) ;;
    --quick) plan_args+=(--quick) ;;
  esac
done
"$BENCH" plan "$scenario" --shards "$n" --out "$out/plan.json" ${plan_args[@]+"${plan_args[@]}"}
# shellcheck disable=SC2086  # SBATCH_OPTS is a list of options
array=$(sbatch --parsable ${SBATCH_OPTS:-} --array="0-$((n - 1))" --output="$out/logs/shard-%a.out" \
        "$here/bench-array.sbatch" "$scenario" "$out" "$@")
array=${array%%;*}
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SBATCH_OPTS:-} --dependency="afterany:$array" --output="$out/logs/merge.out" \
        "$here/bench-merge.sbatch" "$out")
merge=${merge%%;*}
echo "submit.sh: array job $array ($n shards), merge job $merge; results in $out/merged" >&2
echo "jobs: $array $merge"
