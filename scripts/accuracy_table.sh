#!/usr/bin/env bash
# What each cheaper path costs in accuracy on one model file: every KV cache type, then every
# named kernel family this CPU runs (with an f32 cache), each against the exact kernels with
# an f32 cache, by `bench generate --accuracy` (docs/accuracy.md). One markdown row each.
# The figures are deterministic: run it on a busy machine if you like.
#
#   scripts/accuracy_table.sh MODEL [TOKENIZER] [-- extra bench generate arguments]
#   e.g. scripts/accuracy_table.sh ../shared/models/stories260K.bin ../shared/models/tok512.bin
#        PROMPT_TOKENS=64 STEPS=128 scripts/accuracy_table.sh tinyllama-q8_0.gguf
# Environment: BENCH (default build/bench), PROMPT_TOKENS (default: the text prompt),
# STEPS (positions in all, default 128), THREADS (default 2), KV (the kv module, prealloc).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
model=$1; shift
tok=()
if [ $# -ge 1 ] && [ "$1" != "--" ]; then tok=(--tokenizer "$1"); shift; fi
[ "${1:-}" = "--" ] && shift
bench=${BENCH:-build/bench}
steps=${STEPS:-128}
prompt=(--prompt "Once upon a time, in a small village, there lived")
[ -n "${PROMPT_TOKENS:-}" ] && prompt=(--prompt-tokens "$PROMPT_TOKENS")
common=(--model "$model" "${tok[@]}" "${prompt[@]}" --steps "$steps" --threads "${THREADS:-2}" --kv "${KV:-prealloc}" --quiet --accuracy)

row() { # label, then bench generate arguments
    local label=$1; shift
    local out line
    out=$("$bench" generate "${common[@]}" "$@" 2>&1 >/dev/null || true)
    line=$(grep -m1 '^accuracy\|^bench generate' <<<"$out" || true)
    if [ -z "$line" ]; then echo "| $label | (no figures: $(tail -1 <<<"$out")) | | | | |"; return; fi
    case $line in
    "bench generate"*) echo "| $label | ${line#bench generate: } | | | | |" ;;
    *) # accuracy     KL mean A max B nats, top-1 C%, logit error max D rms E of the largest (N positions, ...)
       read -r kl_mean kl_max top1 err_max err_rms n <<<"$(sed -E 's/.*KL mean ([^ ]+) max ([^ ]+) nats, top-1 ([^%]+)%, logit error max ([^ ]+) rms ([^ ]+) of the largest \(([0-9]+) positions.*/\1 \2 \3 \4 \5 \6/' <<<"$line")"
       echo "| $label | $kl_mean | $kl_max | $top1 | $err_max | $err_rms |" ;;
    esac
}

echo "model: $model ($steps positions, kv ${KV:-prealloc}); against the exact kernels with an f32 cache"
echo
echo "| path | KL mean (nats) | KL max | top-1 % | logit err max | logit err rms |"
echo "|---|---|---|---|---|---|"
for ct in f32 f16 bf16 q8_0 q4_0 q8_0/f16; do row "cache $ct" --cache-type "$ct"; done
for k in $("$bench" list 2>/dev/null | awk '/^kernels/{on=1; next} on && /runs here/ {print $1}'); do
    row "kernels $k" --kernels "$k"
done
