#!/usr/bin/env bash
# bench's engine against llama.cpp's llama-bench, side by side on the same GGUF files.
#
#   scripts/vs_llamacpp.sh LLAMA_BENCH [DTYPES...]
#   scripts/vs_llamacpp.sh ~/llama.cpp/build/bin/llama-bench f32 f16 q8_0
#   TINYLLAMA=1 scripts/vs_llamacpp.sh ~/llama.cpp/build/bin/llama-bench q8_0
#   scripts/vs_llamacpp.sh ~/llama.cpp/build/bin/llama-bench q4_0 /models/llama-110m-q4_k_m.gguf
#
# LLAMA_BENCH is a llama-bench binary you built (llama.cpp is not a dependency of bench; build it
# where you like, e.g. cmake -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF && cmake --build build
# --target llama-bench). DTYPES (default f32 f16 q8_0) pick the synth llama-110m files, written
# once by `bench model synth` into $BENCH_MODEL_CACHE (results/models); with TINYLLAMA=1 the
# synth tinyllama-1.1b files of the same dtypes are added (2.2 GB in f16: slow to write).
# An argument that ends in .gguf is taken as a file to compare as it is: the way to bring in
# types bench only reads (Q4_K, Q6_K, ...), e.g. a synth f32 file put through llama-quantize.
#
# Each round runs, for every file in turn (interleaved, so a shared machine's drift falls on
# both engines alike):
#   bench generate --model F --prompt-tokens P --steps P+G --threads T --kernels K --bandwidth --loader L --warmup 1
#   bench generate --model F --prompt-tokens 1 --steps 1+G --threads T --kernels K --loader L --warmup 1
#   LLAMA_BENCH -m F -p P -n G -t T -r 1 -o csv
# and takes prefill tokens/s from the first and llama-bench's pp test, decode tokens/s from the
# second and its tg test: G tokens from an empty context in both (llama-bench's tg decodes
# positions 0..G-1; after a P-token prompt bench would read P more positions of the KV cache a
# token, about a tenth of the bytes of llama-110m q4_0's weights at P = 128). The first run's
# decode, after the prompt, is printed in the last column. Both are warm: llama-bench runs each test
# once untimed before it times it (its default warm-up), and bench generate --warmup 1 runs the
# whole prefill and decode once untimed before the timed pass, so the headline ratios are warm
# against warm. bench's cold first pass (the one --warmup leaves out, what a single
# `bench generate` reports by default) is printed beside it; llama-bench reports no cold figure.
# One uncounted round first warms the page cache and the CPU. Then per file: the median and
# min..max of each figure, and the ratio bench / llama.cpp computed per round (the two ran
# seconds apart) with its median and min..max. "bound" is the read-only stream at the size of the weights a token reads
# (bench generate --bandwidth), and "% bound" each engine's decode against it. "kernels" is the
# family that ran, decode/prefill (under auto, its choice for the file's dtypes, `+` between
# several). A "roof:" line follows for each file: the tokens/s of the pass at the peak of the
# arithmetic bench's prefill ran on, as --bandwidth measures it (the f32 FMA for the exact
# families, the int8 dot for vnni and avx2-int8, the bf16 dot for avx512-bf16; prompt x peak /
# the pass's GFLOP), each engine's share of it, and the ratio bench would reach at the peak; a
# missed prefill target names that ceiling.
#
# Decode at depth (after a prompt of thousands of tokens) and the KV cache types are compared
# by scripts/depth_vs_llamacpp.sh, through ../shared/tools/llama_depth.c (llama-bench at
# c392e50 has no depth option).
#
# Both prefill the P tokens as one batch and decode G tokens from an empty context (bench's after
# a 1-token prompt: positions 1..G against llama-bench's 0..G-1).
#
# Environment: REPS (5), THREADS (2), PROMPT (128), GEN (64), KERNELS (auto: the best exact
# family; vnni or avx2-int8 for Q8_0 on int8 activations, as llama.cpp does), BENCH
# (build/bench, a release build), BENCH_MODEL_CACHE (results/models), TINYLLAMA (0), NICE
# (unset; e.g. -10, as root: both engines run under `nice -n NICE`, so that on a machine shared
# with other jobs each measured run gets most of the CPU; the same for both engines), LLAMA_ARGS
# (unset; more llama-bench options, e.g. "--poll 0"), LOADER (mmap: bench's default, as
# llama-bench's; both engines then map the same page cache, and bench reads every page at load,
# before its clock starts, as llama-bench's untimed run has faulted its mapping in), EVICT (1:
# before the uncounted round, each file's cached pages are dropped, `dd iflag=nocache count=0`,
# so that bench's loader reads it in again as 2 MiB folios and both engines map those in every
# counted round; a file cached in the small folios a write leaves decodes a quarter slower in
# both engines on a KVM guest, docs/PERFORMANCE.md. 0: the page cache as it is. The warm-up line
# says how much of each file bench found in 2 MiB pages), TARGET_PREFILL and TARGET_DECODE
# (1.3 and 1.1, issue 37's: the last line names the ratios under them, or says every one met;
# the line before it, rounds where the read bound fell under 3/4 of its median).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
llama=$1
shift
dtypes=("$@")
[ ${#dtypes[@]} -gt 0 ] || dtypes=(f32 f16 q8_0)
reps=${REPS:-5}
threads=${THREADS:-2}
prompt=${PROMPT:-128}
gen=${GEN:-64}
kernels=${KERNELS:-auto}
loader=${LOADER:-mmap}
evict=${EVICT:-1}
bench=${BENCH:-build/bench}
cache=${BENCH_MODEL_CACHE:-results/models}
[ -x "$llama" ] || { echo "vs_llamacpp.sh: $llama is not an executable llama-bench" >&2; exit 2; }
[ -x "$bench" ] || { echo "vs_llamacpp.sh: no bench binary at $bench (make, or set BENCH)" >&2; exit 2; }
mkdir -p "$cache"
pre=()
[ -n "${NICE:-}" ] && pre=(nice -n "$NICE")

shapes=(llama-110m)
[ "${TINYLLAMA:-0}" = 1 ] && shapes+=(tinyllama-1.1b)
files=()
synth=()
for a in "${dtypes[@]}"; do
  case $a in
    *.gguf) [ -f "$a" ] || { echo "vs_llamacpp.sh: no file $a" >&2; exit 2; }; files+=("$a") ;;
    *) synth+=("$a") ;;
  esac
done
for shape in "${shapes[@]}"; do
  for dt in ${synth[@]+"${synth[@]}"}; do
    m=$cache/$shape-$dt-s1.gguf
    if [ ! -f "$m" ]; then
      if ! "$bench" model synth --shape "$shape" --dtype "$dt" --format gguf --seed 1 -o "$m" >&2; then
        echo "vs_llamacpp.sh: bench cannot write $shape in $dt (see above); skipping it" >&2
        continue
      fi
    fi
    files+=("$m")
  done
done
[ ${#files[@]} -gt 0 ] || { echo "vs_llamacpp.sh: no model files to compare" >&2; exit 1; }

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
  echo "# vs_llamacpp: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $threads threads,"
  echo "# prompt $prompt, generate $gen, $reps rounds (+1 uncounted), bench kernels $kernels, loader $loader, evict $evict${NICE:+, nice $NICE}${LLAMA_ARGS:+, llama-bench $LLAMA_ARGS},"
  echo "# llama-bench $("$llama" -m "${files[0]}" -p 0 -n 1 -r 1 -t "$threads" -o csv 2>/dev/null |
        awk -F'"' 'NR == 2 {print "build " $2}')"
  echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >&2

if [ "$evict" = 1 ]; then
  for m in "${files[@]}"; do dd if="$m" iflag=nocache count=0 status=none || echo "vs_llamacpp.sh: could not drop $m from the page cache" >&2; done
fi

for ((r = 0; r <= reps; r++)); do
  for m in "${files[@]}"; do
    name=$(basename "$m" .gguf)
    out=$("${pre[@]}" "$bench" generate --model "$m" --prompt-tokens "$prompt" --steps $((prompt + gen)) \
          --threads "$threads" --kernels "$kernels" --loader "$loader" --bandwidth --warmup 1 --ids 2>&1 >/dev/null) ||
      { echo "vs_llamacpp.sh: bench generate failed on $m:" >&2; echo "$out" >&2; exit 1; }
    # the timed (warm) pass's lines, and the cold first pass's line printed before them
    bpre=$(awk '$1 == "prefill" {print $2}' <<<"$out")
    bdec=$(awk '$1 == "decode" {print $2}' <<<"$out")
    cpre=$(sed -n 's/^cold .* prefill \([0-9.]*\) tokens\/s.*/\1/p' <<<"$out")
    cdec=$(sed -n 's/^cold .* decode \([0-9.]*\) tokens\/s.*/\1/p' <<<"$out")
    bound=$(sed -n 's/.*bound \([0-9.]*\) tokens\/s.*/\1/p' <<<"$out" | head -1)
    kn=$(awk '$1 == "kernels" {print $2; exit}' <<<"$out")
    # the warm pass's GFLOP of matmuls and the peak of the arithmetic it ran on (f32 FMA, int8 dot,
    # bf16 dot: "prefill ran F's A: peak P GOP/s"), from --bandwidth's compute line
    read -r gflop peak arith < <(sed -n 's/^compute *prefill \([0-9.]*\) GFLOP.*; prefill ran [^:]*'"'"'s \([a-z0-9]*\) \([A-Za-z]*\): peak \([0-9.]*\) GOP\/s.*/\1 \4 \2-\3/p' <<<"$out" |
                                 awk 'END { print (NF == 3 ? $0 : "- - -") }')
    # under auto the first line names the base family; what ran per dtype is on the "kernels auto"
    # line ("q8_0 decode vnni (...)"): the decode / prefill families, each kind's distinct ones
    if [ "$kernels" = auto ]; then
      ran=$(grep -oE '[a-z0-9_]+ (decode|prefill) [a-z0-9-]+ \(' <<<"$out" |
            awk '{ if (!seen[$2, $3]++) f[$2] = f[$2] (f[$2] == "" ? "" : "+") $3 } END { if (f["decode"] != "") print f["decode"] "/" f["prefill"] }')
      [ -n "$ran" ] && kn=$ran
    fi
    huge=$(sed -n 's/.*; \([0-9.]*\) MB of the file mapped in 2 MiB pages.*/\1/p' <<<"$out")
    # decode as llama-bench's tg test runs it: GEN tokens from an empty context (positions 1..GEN
    # after a 1-token prompt); the decode after the PROMPT-token prompt is kept beside it
    out0=$("${pre[@]}" "$bench" generate --model "$m" --prompt-tokens 1 --steps $((1 + gen)) \
          --threads "$threads" --kernels "$kernels" --loader "$loader" --warmup 1 --ids 2>&1 >/dev/null) ||
      { echo "vs_llamacpp.sh: bench generate failed on $m:" >&2; echo "$out0" >&2; exit 1; }
    adec=$bdec
    bdec=$(awk '$1 == "decode" {print $2}' <<<"$out0")
    cdec=$(sed -n 's/^cold .* decode \([0-9.]*\) tokens\/s.*/\1/p' <<<"$out0")
    # shellcheck disable=SC2086  # LLAMA_ARGS is a list of options
    csv=$("${pre[@]}" "$llama" -m "$m" -p "$prompt" -n "$gen" -t "$threads" -r 1 -o csv ${LLAMA_ARGS:-} 2>/dev/null) ||
      { echo "vs_llamacpp.sh: llama-bench failed on $m" >&2; exit 1; }
    # columns by header name: n_prompt, n_gen, avg_ts
    read -r lpre ldec < <(awk -F'","' 'NR == 1 { gsub(/"/, ""); n = split($0, h, ","); for (i = 1; i <= n; i++) c[h[i]] = i; next }
                                 { gsub(/^"|"$/, "") ; if ($(c["n_prompt"]) > 0) p = $(c["avg_ts"]); else d = $(c["avg_ts"]) }
                                 END { print p, d }' <<<"$csv")
    [ -n "$bpre" ] && [ -n "$bdec" ] && [ -n "$cpre" ] && [ -n "$cdec" ] && [ -n "$bound" ] && [ -n "$lpre" ] && [ -n "$ldec" ] ||
      { echo "vs_llamacpp.sh: could not read the figures of round $r, $name" >&2; echo "$out" >&2; echo "$csv" >&2; exit 1; }
    if [ "$r" -eq 0 ]; then
      printf '%s warm-up round: bench %s/%s (cold %s/%s) llama.cpp %s/%s tok/s prefill/decode (not counted); %s MB of the file in 2 MiB pages\n' \
        "$name" "$bpre" "$bdec" "$cpre" "$cdec" "$lpre" "$ldec" "${huge:-(not mmap)}" >&2
    else
      printf '%s %s %s %s %s %s %s %s %s %s %s %s %s %s\n' "$name" "$r" "$bpre" "$bdec" "$lpre" "$ldec" "$bound" "$kn" "$cpre" "$cdec" \
        "$gflop" "$peak" "$adec" "$arith" | tee -a "$tmp" >&2
    fi
  done
done

echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
awk '
function med(a, m,   i, j, t, x) {
  for (i = 1; i <= m; i++) x[i] = a[i]
  for (i = 2; i <= m; i++) for (j = i; j > 1 && x[j-1] > x[j]; j--) { t = x[j]; x[j] = x[j-1]; x[j-1] = t }
  lo = x[1]; hi = x[m]
  return m % 2 ? x[(m+1)/2] : (x[m/2] + x[m/2+1]) / 2
}
function col(k, c, fmt,   a, i, v) {
  for (i = 1; i <= n[k]; i++) a[i] = val[k, c, i]
  v = med(a, n[k]); return sprintf(fmt " (" fmt ".." fmt ")", v, lo, hi)
}
# the median of the per-round ratios of columns cb / cl (lo, hi: their range)
function rmed(k, cb, cl,   a, i) {
  for (i = 1; i <= n[k]; i++) a[i] = val[k, cb, i] / val[k, cl, i]
  return med(a, n[k])
}
function ratio(k, cb, cl, fmt,   v) {
  v = rmed(k, cb, cl); return sprintf(fmt " (" fmt ".." fmt ")", v, lo, hi)
}
# the roof of prefill: the tokens/s of the pass at the peak of the arithmetic the prefill of bench
# ran on (the f32 FMA for the exact families, the int8 or bf16 dot for those that round x), prompt
# x peak / GFLOP a pass, a round at a time
function roof(k, i) { return val[k, 11, i] > 0 && val[k, 12, i] > 0 ? pr * val[k, 12, i] / val[k, 11, i] : 0 }
{ k = $1; if (!(k in n)) order[++nk] = k; n[k]++; for (c = 3; c <= 13; c++) if (c != 8) val[k, c, n[k]] = $c; kern[k] = $8
  arith[k] = $14; gsub(/-/, " ", arith[k]) }
END {
  print "warm against warm (llama-bench warms up each test; bench generate --warmup 1); bench cold = its first pass"
  printf "%-26s %-22s %-24s %-24s %-20s | %-24s %-24s %-20s | %-22s %-26s | %-24s %-24s | %s\n", "model", "kernels", "prefill bench", "prefill llama.cpp", "ratio",
         "decode bench", "decode llama.cpp", "ratio", "bound tok/s", "% bound bench / llama.cpp", "cold prefill bench", "cold decode bench",
         "bench decode after the prompt"
  for (o = 1; o <= nk; o++) {
    k = order[o]
    for (i = 1; i <= n[k]; i++) { pb[i] = 100 * val[k, 4, i] / val[k, 7, i]; pl[i] = 100 * val[k, 6, i] / val[k, 7, i] }
    bnd = sprintf("%.0f / %.0f", med(pb, n[k]), med(pl, n[k]))
    printf "%-26s %-22s %-24s %-24s %-20s | %-24s %-24s %-20s | %-22s %-26s | %-24s %-24s | %s\n", k, kern[k],
           col(k, 3, "%.1f"), col(k, 5, "%.1f"), ratio(k, 3, 5, "%.2f"),
           col(k, 4, "%.1f"), col(k, 6, "%.1f"), ratio(k, 4, 6, "%.2f"),
           col(k, 7, "%.1f"), bnd, col(k, 9, "%.1f"), col(k, 10, "%.1f"), col(k, 13, "%.1f")
  }
  # each file against the peak of the arithmetic of its prefill: the share each engine ran at, and the
  # ratio it would reach were bench at the peak (llama.cpp as measured)
  for (o = 1; o <= nk; o++) {
    k = order[o]
    m = 0; for (i = 1; i <= n[k]; i++) if ((r = roof(k, i)) > 0) { m++; rf[m] = r; qb[m] = 100 * val[k, 3, i] / r; ql[m] = 100 * val[k, 5, i] / r; cl[m] = r / val[k, 5, i] }
    if (!m) continue
    rv = med(rf, m); bv = med(qb, m); lv = med(ql, m); cv = med(cl, m); ceil[k] = cv
    printf "roof: %s prefill at the %s peak %.0f tok/s; bench at %.0f%% of it, llama.cpp at %.0f%%; the ratio at the peak %.2f, %.2fx needs %.0f%%\n",
           k, arith[k], rv, bv, lv, cv, tp, 100 * tp / cv
  }
  # rounds whose read bound fell under 3/4 of the file'"'"'s median: the machine'"'"'s memory moved
  # under both engines there, which the ratios, taken per round, only partly cancel
  for (o = 1; o <= nk; o++) {
    k = order[o]; for (i = 1; i <= n[k]; i++) a[i] = val[k, 7, i]
    mb = med(a, n[k]); low = ""
    for (i = 1; i <= n[k]; i++) if (val[k, 7, i] < 0.75 * mb) low = low sprintf("%s%d (%.1f)", low == "" ? "" : ", ", i, val[k, 7, i])
    if (low != "") printf "bound: %s rounds %s under 3/4 of the median bound %.1f tok/s\n", k, low, mb
  }
  # the targets, on the medians of the per-round ratios
  miss = ""
  for (o = 1; o <= nk; o++) {
    k = order[o]
    v = rmed(k, 3, 5); if (v < tp) miss = miss sprintf("; %s prefill %.2f", k, v) (k in ceil ? sprintf(" (at most %.2f at the %s peak)", ceil[k], arith[k]) : "")
    v = rmed(k, 4, 6); if (v < td) miss = miss sprintf("; %s decode %.2f", k, v)
  }
  printf "targets (prefill %.2fx, decode %.2fx, medians of the per-round ratios): %s\n", tp, td,
         miss == "" ? "every one met" : "missed: " substr(miss, 3)
}' tp="${TARGET_PREFILL:-1.3}" td="${TARGET_DECODE:-1.1}" pr="$prompt" "$tmp"
