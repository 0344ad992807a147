#!/usr/bin/env bash
# Run HERE (a Debian machine with apt): downloads the .deb files that building and testing
# bench needs and a GPU machine without network lacks, into .gpu-debs/ (git-ignored).
# scripts/gpu_verify.sh unpacks them there into /tmp/bench-debs, never into /.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu-debs
cd .gpu-debs
PKGS=(libcjson-dev libcjson1 libpfm4-dev libpfm4 libcmocka-dev libcmocka0
      libjemalloc-dev libjemalloc2 libmimalloc-dev libmimalloc2.0 libutf8proc-dev libutf8proc2)
apt-get download "${PKGS[@]}"
# gcc 12's sanitizer runtimes, for sanitizer builds made here and run there (scripts/gpu_check.sh asan);
# kept apart so that a build made there with its own gcc never loads them
mkdir -p asan && (cd asan && apt-get download libasan8 libubsan1)
ls -l
echo "gpu_debs.sh: $(ls *.deb | wc -l) packages in .gpu-debs/ ($(du -sh . | cut -f1))" >&2
