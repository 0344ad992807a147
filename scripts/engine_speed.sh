#!/usr/bin/env bash
# Engine speed against this machine's memory bandwidth: the figures of docs/PERFORMANCE.md's
# "CPU inference" section.
#
#   scripts/engine_speed.sh [REPS] [THREADS] [DTYPES...]
#   scripts/engine_speed.sh 5 2 f32 f16
#
# For each repetition and each dtype (interleaved: f32 f16 f32 f16 ..., so drift of a
# shared machine spreads over both), runs
#   bench generate --model <synth llama-110m DTYPE> --prompt-tokens 128 --steps 192 --bandwidth
# which prefills 128 tokens as one batch, decodes 64, and measures a read-only stream (as large as
# the weights a token reads; before issue 13 a STREAM triad) on the
# same threads right after. Prints one line per run, then per dtype the median and
# min..max of prefill tokens/s, decode tokens/s, read GB/s and decode as a share of the
# bandwidth bound (read bytes/s / weight bytes read per token). One uncounted run per dtype
# first brings the model into the page cache and the CPU to speed.
# Models are made once with `bench model synth` into bench's model cache ($BENCH_MODEL_CACHE, else
# $XDG_CACHE_HOME/bench or ~/.cache/bench: README.md, "Where results go").
# BENCH: the bench binary (default build/bench, a release build).
set -euo pipefail
reps=${1:-5}
threads=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
dtypes=("$@")
[ ${#dtypes[@]} -gt 0 ] || dtypes=(f32 f16)
bench=${BENCH:-build/bench}
cache=${BENCH_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bench}
[ -x "$bench" ] || { echo "engine_speed.sh: no bench binary at $bench (make, or set BENCH)" >&2; exit 1; }
mkdir -p "$cache"
for dt in "${dtypes[@]}"; do
  m=$cache/llama-110m-$dt-s1.gguf
  [ -f "$m" ] || "$bench" model synth --shape llama-110m --dtype "$dt" --format gguf --seed 1 -o "$m" >&2
done

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "# engine_speed: llama-110m synth, 128-token prompt, 64 decoded tokens, $threads threads, $reps repetitions" >&2
for ((r = 0; r <= reps; r++)); do
  for dt in "${dtypes[@]}"; do
    out=$("$bench" generate --model "$cache/llama-110m-$dt-s1.gguf" --prompt-tokens 128 --steps 192 \
          --threads "$threads" --bandwidth --ids 2>&1 >/dev/null)
    # "prefill 404.6 tokens/s", "decode 24.8 tokens/s (...)", "bandwidth 20.9 GB/s triad; ...; decode at 52% of it"
    pre=$(awk '$1 == "prefill" {print $2}' <<<"$out")
    dec=$(awk '$1 == "decode" {print $2}' <<<"$out")
    bw=$(awk '$1 == "bandwidth" {print $2}' <<<"$out")
    frac=$(sed -n 's/.*decode at \([0-9.]*\)% of it.*/\1/p' <<<"$out")
    [ -n "$pre" ] && [ -n "$dec" ] && [ -n "$bw" ] && [ -n "$frac" ] ||
      { echo "engine_speed.sh: could not read bench generate's output:" >&2; echo "$out" >&2; exit 1; }
    if [ "$r" -eq 0 ]; then
      printf '%s warm-up %s %s %s %s (not counted)\n' "$dt" "$pre" "$dec" "$bw" "$frac" >&2
    else
      printf '%s %s %s %s %s %s\n' "$dt" "$r" "$pre" "$dec" "$bw" "$frac" | tee -a "$tmp" >&2
    fi
  done
done

awk '
# median and min..max of column c of dtype k
function summary(k, c, fmt,   m, i, j, t, x, lo, hi) {
  m = n[k]
  for (i = 1; i <= m; i++) x[i] = v[k, c, i]
  for (i = 2; i <= m; i++) for (j = i; j > 1 && x[j-1] > x[j]; j--) { t = x[j]; x[j] = x[j-1]; x[j-1] = t }
  return sprintf(fmt " (" fmt ".." fmt ")", m % 2 ? x[(m+1)/2] : (x[m/2] + x[m/2+1]) / 2, x[1], x[m])
}
{ k = $1; if (!(k in n)) order[++nk] = k; n[k]++; for (c = 3; c <= 6; c++) v[k, c, n[k]] = $c }
END {
  printf "%-6s %28s %28s %26s %26s\n", "dtype", "prefill tok/s", "decode tok/s", "read GB/s", "decode / bound (%)"
  for (o = 1; o <= nk; o++) {
    k = order[o]
    printf "%-6s %28s %28s %26s %26s\n", k, summary(k, 3, "%.1f"), summary(k, 4, "%.1f"), summary(k, 5, "%.1f"), summary(k, 6, "%.0f")
  }
}' "$tmp"
