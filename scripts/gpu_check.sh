#!/usr/bin/env bash
# The GPU checks of docs/cuda.md in one short pass over binaries built HERE (a GPU lease is
# minutes long; building there costs them). Here, in the checkout:
#     make -j2 CUDA=1 BUILD=build/gpu all build/gpu/tests/test_cuda
#     make -j2 CUDA=1 BUILD=build/gpu-asan SAN=1 OPT=-O1 all build/gpu-asan/tests/test_cuda
#     bash scripts/gpu_debs.sh                   # the run-time .debs the GPU image lacks
#     mkdir -p shared/thirdparty && cp -r ../shared/models ../shared/oracle shared/ && cp -r ../shared/thirdparty/k256 shared/thirdparty/
#   then a staging folder that holds what runs (the whole build folders are far larger than
#   what a lease carries; strip --strip-debug keeps the symbols):
#     mkdir -p .gpu-stage/gpu/tests .gpu-stage/gpu-asan/tests
#     for b in gpu gpu-asan; do cp -a build/$b/bench build/$b/modules .gpu-stage/$b/; cp build/$b/tests/test_cuda .gpu-stage/$b/tests/; done
#     find .gpu-stage -type f -exec strip --strip-debug {} \;
# There (carrying .gpu-stage, .gpu-debs and shared):
#     BUILD=.gpu-stage/gpu ASAN_BUILD=.gpu-stage/gpu-asan OUT=/tmp/gc bash scripts/gpu_check.sh [STEP...]
#   steps: env ids test types speed sanitizer asan accuracy scenarios depth deepacc
#   (default: env ids test types speed sanitizer asan).
# Every step runs under a timeout and writes its log to $OUT (default results/gpu-check), so
# a step that hangs or fails leaves the others' results; one summary line per step on stdout.
# BUDGET (seconds, default 450): no step starts after it, so the lease's limit is not hit.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu-check}
B=${BUILD:-build/gpu}
mkdir -p "$OUT"
export BENCH_SHARED=${BENCH_SHARED:-$PWD/shared}
export BENCH_MODULE_PATH=$PWD/$B/modules BENCH_BIN=$PWD/$B/bench BENCH_KERNELS_TUNE=0
export BENCH_GNUPLOT=/nonexistent/gnuplot

# run-time libraries the image lacks, unpacked out of / (never over the image's own files)
if [ -d .gpu-debs ] && ! ldconfig -p | grep -q libcjson.so.1; then
  root=/tmp/bench-debs
  [ -d $root ] || { mkdir -p $root; for f in .gpu-debs/*.deb; do dpkg -x "$f" $root; done; }
  export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# the modules' rpath names this machine's CUDA; add the image's where that differs
if ldd $B/modules/device_cuda.so | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null); do
    [ -e "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH
  done
fi

m=$BENCH_SHARED/models/stories260K.bin t=$BENCH_SHARED/models/tok512.bin
oracle=$BENCH_SHARED/oracle/greedy_dog.ids.txt k256=$BENCH_SHARED/thirdparty/k256/k256-f32.gguf

ids_of() { tr -s ' \n' '\n\n' | grep .; }

step_env() {
  { nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
    nvcc --version 2>/dev/null | tail -2
    ldd $B/modules/device_cuda.so | grep -E "cuda|cublas|not found"
    timeout 60 $B/bench list 2>&1 | grep -iE "cuda|device"; } >"$OUT/env.txt" 2>&1
  echo "env: $(head -2 "$OUT/env.txt" | tail -1)"
}

# greedy ids of stories260K f32 on every loader x kv == the llama2.c oracle
step_ids() {
  local ok=0 n=0
  for loader in pread pinned mmap; do
    for kv in prealloc dynamic vmm block token; do
      n=$((n + 1))
      timeout 60 $B/bench generate --model "$m" --tokenizer "$t" --prompt "The little dog" --steps 200 --ids --quiet \
        --device cuda --loader $loader --kv $kv >"$OUT/ids.tmp" 2>>"$OUT/ids.err"
      rc=$?
      if [ $rc -eq 0 ] && cmp -s <(ids_of <"$OUT/ids.tmp") <(ids_of <"$oracle"); then
        ok=$((ok + 1)); echo "$loader/$kv: oracle"
      else
        echo "$loader/$kv: rc $rc, DIFFERS: $(head -c 300 "$OUT/ids.tmp")"
      fi
    done
  done >"$OUT/ids.txt" 2>&1
  rm -f "$OUT/ids.tmp"
  echo "ids: $ok of $n loader x kv equal to the oracle"
}

# every kv module x cache type on the k256 f32 file: ids on cuda against the CPU's same cache
step_types() {
  local ok=0 n=0
  for kv in prealloc dynamic vmm block token; do
    for ct in f32 f16 bf16 q8_0 q4_0; do
      n=$((n + 1))
      cpukv=$kv; [ $kv = vmm ] && cpukv=prealloc
      a=$(timeout 60 $B/bench generate --model "$k256" --prompt-tokens 40 --steps 120 --ids --quiet --kv $cpukv --cache-type $ct 2>&1)
      b=$(timeout 60 $B/bench generate --model "$k256" --prompt-tokens 40 --steps 120 --ids --quiet --device cuda --loader pinned --kv $kv --cache-type $ct 2>&1)
      if [ "$a" = "$b" ]; then ok=$((ok + 1)); echo "$kv/$ct: equal"; else echo "$kv/$ct: DIFFER"; echo " cpu: ${a:0:400}"; echo " gpu: ${b:0:400}"; fi
    done
  done >"$OUT/types.txt" 2>&1
  echo "types: $ok of $n kv x cache type give the CPU's ids"
}

step_test() {
  timeout 420 $B/tests/test_cuda >"$OUT/test_cuda.log" 2>&1; local rc=$?
  for x in test_cuda_host test_device; do timeout 300 $B/tests/$x >>"$OUT/test_other.log" 2>&1 || rc=$((rc + 100)); done
  echo "test: rc $rc; $(grep -cE '^\[       OK \]' "$OUT/test_cuda.log") ok, $(grep -E '^\[  (FAILED|PASSED|SKIPPED) \]' "$OUT/test_cuda.log" | tr '\n' ' ')"
}

step_asan() {
  local A=${ASAN_BUILD:-build/gpu-asan}
  [ -x $A/tests/test_cuda ] || { echo "asan: no $A"; return; }
  local rt=/tmp/bench-asan-rt lp=$LD_LIBRARY_PATH
  [ -d $rt ] || { mkdir -p $rt; for f in .gpu-debs/asan/*.deb; do dpkg -x "$f" $rt; done; }
  LD_LIBRARY_PATH=$rt/usr/lib/x86_64-linux-gnu:$lp BENCH_MODULE_PATH=$PWD/$A/modules BENCH_BIN=$PWD/$A/bench ASAN_OPTIONS=detect_leaks=1:protect_shadow_gap=0 \
    LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp timeout 420 $A/tests/test_cuda >"$OUT/asan.log" 2>&1
  echo "asan: rc $?; $(grep -E '^\[  (FAILED|PASSED|SKIPPED) \]|ERROR: (Address|Leak)' "$OUT/asan.log" | tr '\n' ' ')"
}

# the kernels under compute-sanitizer: out-of-bounds and misaligned accesses, races
step_sanitizer() {
  local cs; cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  [ -n "$cs" ] || { echo "sanitizer: not found"; return; }
  { timeout 240 $cs --tool memcheck --leak-check no $B/bench generate --model "$m" --tokenizer "$t" --prompt "The little dog" \
      --steps 40 --ids --device cuda --loader pinned --kv block
    timeout 240 $cs --tool memcheck $B/bench generate --model "$k256" --prompt-tokens 20 --steps 40 --ids --device cuda \
      --loader pread --kv prealloc --cache-type q4_0
    timeout 240 $cs --tool memcheck $B/bench generate --model "$k256" --prompt-tokens 40 --steps 60 --ids --device cuda \
      --loader pinned --kv block --cache-type q8_0/f16
    timeout 240 $cs --tool racecheck $B/bench generate --model "$m" --tokenizer "$t" --prompt "The little dog" \
      --steps 20 --ids --device cuda --loader pread --kv prealloc; } >"$OUT/sanitizer.log" 2>&1
  echo "sanitizer: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer.log" | tr '\n' ' ')"
}

# tinyllama-1.1b f16 and q8_0 (synth): decode against the bandwidth bound, load GB/s per loader, decode at depth
step_speed() {
  local f16=${MODELS:-/tmp}/tl-f16.gguf q8=${MODELS:-/tmp}/tl-q8_0.gguf
  [ -f $f16 ] || timeout 120 $B/bench model synth --shape tinyllama-1.1b --dtype f16 --seed 1 -o $f16 >/dev/null 2>&1
  [ -f $q8 ] || timeout 120 $B/bench model synth --shape tinyllama-1.1b --dtype q8_0 --seed 1 -o $q8 >/dev/null 2>&1
  { for loader in pread pinned mmap; do
      echo "== tinyllama-1.1b f16, loader $loader"
      timeout 120 $B/bench generate --model $f16 --prompt-tokens 128 --steps 512 --device cuda --loader $loader --bandwidth 2>&1 >/dev/null
    done
    echo "== tinyllama-1.1b q8_0 weights, pinned"
    timeout 120 $B/bench generate --model $q8 --prompt-tokens 128 --steps 256 --device cuda --loader pinned 2>&1 >/dev/null
    for ct in f32 f16 q8_0; do
      echo "== tinyllama-1.1b f16, depth 2048, cache $ct"
      timeout 120 $B/bench generate --model $f16 --prompt-tokens 2048 --steps 2112 --ctx 2112 --device cuda --loader pinned --cache-type $ct 2>&1 >/dev/null
    done; } >"$OUT/speed.txt" 2>&1
  echo "speed: $(grep -E 'decode|bound' "$OUT/speed.txt" | head -3 | tr '\n' ' ')"
}

# the accuracy metric of a GPU configuration against the CPU's exact reference
step_accuracy() {
  { for ct in f32 f16 bf16 q8_0 q4_0; do
      echo "== k256 f32 weights, cuda, cache $ct"
      timeout 60 $B/bench generate --model "$k256" --prompt-tokens 32 --steps 96 --device cuda --cache-type $ct --accuracy --quiet 2>&1 | grep -E "accuracy|rror"
    done
    for q in q8_0 q4_k_m; do
      echo "== k256 $q weights, cuda, cache f32"
      timeout 60 $B/bench generate --model "${k256%f32.gguf}$q.gguf" --prompt-tokens 32 --steps 96 --device cuda --accuracy --quiet 2>&1 | grep -E "accuracy|rror"
    done; } >"$OUT/accuracy.txt" 2>&1
  echo "accuracy: $(grep -c '^accuracy' "$OUT/accuracy.txt") runs measured"
}

# docs/cuda.md item 8: the acceptance scenarios on cuda; results.json and the tables kept
step_scenarios() {
  local s
  for s in mmap_vs_pread kv_prealloc_vs_dynamic kv_block_vs_token; do
    timeout 240 $B/bench run scenarios/$s.json --device cuda --out "$OUT/$s" >"$OUT/$s.txt" 2>&1
    echo "$s: rc $?"
  done
  for s in cuda_speed cuda_kv_growth; do
    timeout 300 $B/bench run scenarios/$s.json --out "$OUT/$s" >"$OUT/$s.txt" 2>&1
    echo "$s: rc $?"
  done
  rm -rf "$OUT"/*/models "$OUT"/*/*.svg 2>/dev/null
}

# decode at depth per cache type (tinyllama-1.1b f16 weights), 64 tokens after the prompt
step_depth() {
  local f16=${MODELS:-/tmp}/tl-f16.gguf d ct
  [ -f $f16 ] || timeout 120 $B/bench model synth --shape tinyllama-1.1b --dtype f16 --seed 1 -o $f16 >/dev/null 2>&1
  for d in 512 2048 8192; do
    for ct in f32 f16 q8_0; do
      echo "== depth $d, cache $ct"
      timeout 60 $B/bench generate --model $f16 --prompt-tokens $d --steps $((d + 64)) --ctx $((d + 64)) --device cuda \
        --loader mmap --cache-type $ct 2>&1 >/dev/null | grep -E "KV cache|prefill|decode|cuda "
    done
  done >"$OUT/depth.txt" 2>&1
  echo "depth: $(grep -c '^decode' "$OUT/depth.txt") runs"
}

# decode deep enough that the split attention takes more than 32 positions a block, against
# the CPU's exact path (the CPU runs the reference: tens of seconds)
step_deepacc() {
  local f16=${MODELS:-/tmp}/tl-f16.gguf
  [ -f $f16 ] || timeout 120 $B/bench model synth --shape tinyllama-1.1b --dtype f16 --seed 1 -o $f16 >/dev/null 2>&1
  timeout 150 $B/bench generate --model $f16 --prompt-tokens 2048 --steps 2080 --ctx 2080 --device cuda --loader mmap \
    --accuracy --quiet >"$OUT/deepacc.txt" 2>&1
  echo "deepacc: rc $?; $(grep -E '^accuracy' "$OUT/deepacc.txt")"
}

steps=${*:-env ids test types speed sanitizer asan}
t0=$(date +%s)
for s in $steps; do
  start=$(date +%s)
  if [ $((start - t0)) -gt "${BUDGET:-450}" ]; then echo "$s: skipped, past the budget of ${BUDGET:-450} s"; continue; fi
  "step_$s"
  echo "  ($s: $(( $(date +%s) - start )) s)"
done
