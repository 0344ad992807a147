#!/usr/bin/env bash
# Installs the Debian packages that bench's build, tests and plots need.
# Idempotent: when everything is present it only checks and returns (well under a second).
set -euo pipefail

PACKAGES=(
  build-essential pkg-config
  libcjson-dev        # scenario and results JSON
  libpfm4-dev         # perf event encodings
  libcmocka-dev       # unit-test framework
  libjemalloc-dev     # allocator baselines
  libmimalloc-dev
  unicode-data        # UnicodeData.txt: the tokenizers' character classes (generated at build time)
  gnuplot-nox         # graphs (found at run time)
  chromium            # renders report.html in the tests (headless)
  valgrind linux-perf # investigations
  slurm-wlm munge     # the one-node Slurm cluster of tests/test_slurm.c (docs/cluster.md)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${#missing[@]} package group(s): ${missing[*]}" >&2
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
