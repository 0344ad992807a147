#!/usr/bin/env bash
# Installs the Debian packages bench needs, in two sets:
#
#   scripts/deps.sh run    what building and running bench uses (make, make run): the compiler,
#                          the libraries it links, the Unicode data it generates a table from,
#                          gnuplot for the figures
#   scripts/deps.sh test   the run set and what only the tests use (make test): cmocka, git
#                          (the commit a build records, tests/test_locations.c), chromium
#                          (renders report.html, tests/test_plot.c), valgrind (tests/test_exec.c),
#                          slurm-wlm and munge (the one-node cluster of tests/test_slurm.c),
#                          prometheus (its promtool, tests/test_serve_batch.c)
#   scripts/deps.sh perf   the run set and linux-perf, for scripts/perf.sh
#
# With no argument: test. Idempotent: when everything is present it only checks and returns
# (well under a second).
set -euo pipefail

RUN=(
  build-essential pkg-config
  libcjson-dev        # scenario and results JSON
  libpfm4-dev         # perf event encodings
  libjemalloc-dev     # allocator baselines: modules/alloc_jemalloc.so links it
  libmimalloc-dev     #   and modules/alloc_mimalloc.so this one
  unicode-data        # UnicodeData.txt: the tokenizers' character classes (generated at build time)
  libutf8proc-dev     # NFC/NFD/NFKC/NFKD, the normalizers a tokenizer.json asks for (Qwen2: NFC)
  gnuplot-nox         # the figures of bench run and bench plot (found at run time)
  libmicrohttpd-dev   # bench serve's HTTP server (harness/net/server.c)
  libcurl4-openssl-dev  # the http target's client (harness/net/httpc.c)
  curl                # bench serve --help's examples talk to the server with it
)
TEST=(
  libcmocka-dev       # unit-test framework
  git                 # the commit a build records (test_locations asserts it)
  chromium            # renders report.html in the tests (headless)
  valgrind            # test_exec's memcheck and callgrind passes
  slurm-wlm munge     # the one-node Slurm cluster of tests/test_slurm.c (docs/cluster.md)
  prometheus          # promtool: lints bench serve's /metrics (tests/test_serve_batch.c); the daemon is not used
)
PERF=(
  linux-perf          # scripts/perf.sh
)

set_name=${1:-test}
case $set_name in
  run) PACKAGES=("${RUN[@]}") ;;
  test) PACKAGES=("${RUN[@]}" "${TEST[@]}") ;;
  perf) PACKAGES=("${RUN[@]}" "${PERF[@]}") ;;
  *) echo "usage: $0 [run|test|perf]: which set of packages (run: build and run; test: and the tests')" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh ($set_name): installing ${#missing[@]} package group(s): ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
echo "deps.sh: apt-get update" >&2
$SUDO apt-get update -qq
# one group at a time, one line each: a few hundred MB (chromium is the largest) is minutes
# on a slow mirror, and silence looks like a hang
i=0
for p in "${missing[@]}"; do
  i=$((i + 1))
  start=$(date +%s)
  printf 'deps.sh: [%d/%d] %s ... ' "$i" "${#missing[@]}" "$p" >&2
  if ! log=$($SUDO apt-get install -y -qq --no-install-recommends "$p" 2>&1); then
    echo "failed" >&2
    printf '%s\n' "$log" | tail -20 >&2
    exit 1
  fi
  echo "done ($(printf '%s\n' "$log" | grep -c '^Setting up' || true) packages, $(( $(date +%s) - start )) s)" >&2
done
