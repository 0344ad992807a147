#!/usr/bin/env bash
# memcheck over the release build: bench generate with every CPU loader and kv module
# on stories260K. Fails on any error or definite/indirect leak in our code.
set -euo pipefail
build=${1:-build}
shared=${BENCH_SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared}
status=0
for loader in mmap pread; do
  for kv in prealloc dynamic block token; do
    echo "valgrind: generate --loader $loader --kv $kv" >&2
    if ! valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
        "$build/bench" generate --model "$shared/models/stories260K.bin" --tokenizer "$shared/models/tok512.bin" \
        --prompt "The little dog" --steps 40 --threads 2 --loader $loader --kv $kv --quiet >/dev/null; then
      status=1
    fi
  done
done
[ $status -eq 0 ] && echo "valgrind: no errors, no leaks" >&2
exit $status
