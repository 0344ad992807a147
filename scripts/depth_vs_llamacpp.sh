#!/usr/bin/env bash
# Decode at depth and long prefill, bench against llama.cpp on the same GGUF, with the KV cache
# in the same type on both sides (issue: "speed at depth, side by side"; scripts/vs_llamacpp.sh
# is the short-context comparison through llama-bench, which has no depth option).
#
#   scripts/depth_vs_llamacpp.sh LLAMA_DEPTH FILE.gguf
#   DEPTHS="512 2048" CACHES="f16 q8_0" scripts/depth_vs_llamacpp.sh /tmp/llama/llama_depth tinyllama-q8_0.gguf
#
# LLAMA_DEPTH is ../shared/tools/llama_depth.c built against a llama.cpp you built outside this
# repository (its header says how). Each round runs, for every depth D and cache type C in turn
# (interleaved, so drift falls on both alike):
#   bench generate --model FILE --prompt-tokens D --steps D+G --cache-type C --threads T --kernels K --loader L --warmup 1
#   CTK=C CTV=C FA=$FA LLAMA_DEPTH FILE D G T
# bench's prefill is D tokens in one pass; llama_depth's is D tokens in 512-token batches; both
# then time G one-token steps at positions D .. D+G-1. Both are warm: llama_depth warms up as
# llama-bench does (one small batch and one step, then an empty cache), bench generate --warmup 1
# runs the whole prefill and decode once untimed first, so the ratios are warm against warm;
# bench's cold first pass is printed beside them. One uncounted round first. Per row: each
# engine's median (min..max) over the rounds, and the ratio bench / llama.cpp per round.
# llama.cpp stores V in q8_0 or q4_0 only with flash attention, so those rows run it with FA=1.
# Environment: REPS (3), WARMUP (1; 0 skips the uncounted round, for depths whose prefill takes
# minutes), THREADS (2), GEN (32), DEPTHS (512 2048), CACHES (f16 q8_0), FA (0),
# KERNELS (auto), BENCH (build/bench), NICE (unset; e.g. -10 as root, for both engines), LOADER
# (mmap: bench's default; llama_depth maps the file too, so both read the same page cache),
# EVICT (1: the file's cached pages are dropped once first, so that bench's loader reads it in
# again as 2 MiB folios, which both engines then map; scripts/vs_llamacpp.sh says why).
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
ld=$1 file=$2
reps=${REPS:-3} threads=${THREADS:-2} gen=${GEN:-32} fa=${FA:-0} kernels=${KERNELS:-auto} bench=${BENCH:-build/bench}
loader=${LOADER:-mmap} evict=${EVICT:-1}
read -r -a depths <<<"${DEPTHS:-512 2048}"
read -r -a caches <<<"${CACHES:-f16 q8_0}"
pre=()
[ -n "${NICE:-}" ] && pre=(nice -n "$NICE")
[ -x "$ld" ] || { echo "depth_vs_llamacpp.sh: $ld is not an executable llama_depth" >&2; exit 2; }
[ -x "$bench" ] || { echo "depth_vs_llamacpp.sh: no bench binary at $bench" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$evict" = 1 ]; then dd if="$file" iflag=nocache count=0 status=none || echo "depth_vs_llamacpp.sh: could not drop $file from the page cache" >&2; fi

one_round() { # round number; appends "depth cache bench_pp bench_tg llama_pp llama_tg bench_cold_pp bench_cold_tg" lines
    for d in "${depths[@]}"; do
        for c in "${caches[@]}"; do
            local out pp tg lpp ltg cpp ctg
            out=$("${pre[@]}" "$bench" generate --model "$file" --prompt-tokens "$d" --steps $((d + gen)) --ctx $((d + gen)) --cache-type "$c" \
                  --threads "$threads" --kernels "$kernels" --loader "$loader" --warmup 1 2>&1 >/dev/null || true)
            # the timed (warm) pass's lines; the cold first pass's line comes before them
            pp=$(awk '/^prefill/{print $2}' <<<"$out")
            tg=$(awk '/^decode/{print $2}' <<<"$out")
            cpp=$(sed -n 's/^cold .* prefill \([0-9.]*\) tokens\/s.*/\1/p' <<<"$out")
            ctg=$(sed -n 's/^cold .* decode \([0-9.]*\) tokens\/s.*/\1/p' <<<"$out")
            # llama.cpp quantises V only with flash attention: a q8_0 or q4_0 cache runs with FA=1
            local f=$fa
            case $c in q8_0 | q4_0) f=1 ;; esac
            out=$(CTK=$c CTV=$c FA=$f "${pre[@]}" "$ld" "$file" "$d" "$gen" "$threads" 2>&1 || true)
            lpp=$(sed -nE 's/.*prefill [0-9]+ tok\/s ([0-9.]+).*/\1/p' <<<"$out")
            ltg=$(sed -nE 's/.*decode@[0-9]+ tok\/s ([0-9.]+).*/\1/p' <<<"$out")
            [ -n "$pp" ] && [ -n "$tg" ] && [ -n "$cpp" ] && [ -n "$ctg" ] && [ -n "$lpp$ltg" ] ||
                { echo "depth_vs_llamacpp.sh: no figures at depth $d, cache $c: $out" >&2; exit 1; }
            echo "$d $c $pp $tg $lpp $ltg $cpp $ctg" >>"$tmp/r$1"
        done
    done
}

if [ "${WARMUP:-1}" != 0 ]; then
    echo "warm-up round (not counted) ..." >&2
    one_round 0
fi
for r in $(seq 1 "$reps"); do echo "round $r of $reps ..." >&2; one_round "$r"; done
cat "$tmp"/r[1-9]* >"$tmp/all"

echo "file: $file; $threads threads, $gen tokens decoded after each depth, kernels $kernels, llama.cpp FA=$fa (FA=1 for a q8_0/q4_0 cache, which llama.cpp requires); $reps rounds"
echo "warm against warm (both engines warm up first); bench cold: its first pass (the untimed warm-up itself, timed apart)"
echo
echo "| depth | cache | bench prefill tok/s | llama.cpp prefill | ratio | bench decode tok/s | llama.cpp decode | ratio | bench cold prefill | bench cold decode |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for d in "${depths[@]}"; do
    for c in "${caches[@]}"; do
        awk -v d="$d" -v c="$c" '
            function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
            function fmt(a, n,   lo, hi, i) { lo = a[1]; hi = a[1]; for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
                                              return sprintf("%.3g (%.3g..%.3g)", med(a, n), lo, hi) }
            $1 == d && $2 == c { n++; bp[n] = $3; bt[n] = $4; lp[n] = $5; lt[n] = $6; rp[n] = $3 / $5; rt[n] = $4 / $6; cp[n] = $7; ct[n] = $8 }
            END { if (n) printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", d, c, fmt(bp, n), fmt(lp, n), fmt(rp, n),
                                fmt(bt, n), fmt(lt, n), fmt(rt, n), fmt(cp, n), fmt(ct, n) }' "$tmp/all"
    done
done
