#!/usr/bin/env bash
# An interleaved A/B comparison of two builds (or two module folders) on one scenario:
# rounds of one repetition each, A and B back to back, in ABBA order (A B, B A, A B, ...),
# so that whatever drifts on the machine (clock, heat, other load, the page cache) lands on
# both sides alike; then `bench compare --ab OUT` judges the times on the paired differences.
#
#   scripts/ab.sh SCENARIO.json ROUNDS OUT_DIR [-- bench run options...]
#
# Environment: A_BENCH, B_BENCH the two bench binaries (default build/bench for both);
# A_MODULES, B_MODULES their module folders (BENCH_MODULE_PATH for each side; default: each
# binary's own). At least one of the two pairs must differ.
# Writes OUT_DIR/a/round-NNN/ and OUT_DIR/b/round-NNN/ (one bench run each, no figures), then
# prints `bench compare --ab OUT_DIR` (B against A) and exits with its status.
set -euo pipefail
if [ $# -lt 3 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
scenario=$1 rounds=$2 out=$3
shift 3
[ "${1:-}" = "--" ] && shift
case $rounds in ''|*[!0-9]*) echo "ab.sh: ROUNDS = \"$rounds\": expected a count" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] || { echo "ab.sh: ROUNDS = $rounds: expected at least 1" >&2; exit 2; }
a_bench=${A_BENCH:-build/bench} b_bench=${B_BENCH:-build/bench}
for b in "$a_bench" "$b_bench"; do [ -x "$b" ] || { echo "ab.sh: no bench binary at $b (make, or set A_BENCH/B_BENCH)" >&2; exit 2; }; done
if [ "$a_bench" = "$b_bench" ] && [ "${A_MODULES:-}" = "${B_MODULES:-}" ]; then
  echo "ab.sh: A and B are the same binary and modules: set A_BENCH/B_BENCH or A_MODULES/B_MODULES" >&2
  echo "ab.sh: (going on: an A/A comparison shows what noise alone does)" >&2
fi
[ -e "$out" ] && { echo "ab.sh: $out exists: give a new folder" >&2; exit 2; }
mkdir -p "$out/a" "$out/b"

one() { # side round
  local side=$1 r=$2 bench mods
  shift 2
  if [ "$side" = a ]; then bench=$a_bench mods=${A_MODULES:-}; else bench=$b_bench mods=${B_MODULES:-}; fi
  local dir
  dir=$out/$side/$(printf 'round-%03d' "$r")
  if ! env ${mods:+BENCH_MODULE_PATH="$mods"} BENCH_GNUPLOT=/nonexistent/gnuplot \
       "$bench" run "$scenario" --repeat 1 --out "$dir" "$@" >"$dir.log" 2>&1; then
    echo "ab.sh: round $r, side $side failed: see $dir.log" >&2
    exit 1
  fi
}
for ((r = 1; r <= rounds; r++)); do
  echo "ab.sh: round $r of $rounds" >&2
  if (( r % 2 )); then one a "$r" "$@"; one b "$r" "$@"; else one b "$r" "$@"; one a "$r" "$@"; fi
done
"$b_bench" compare --ab "$out"
