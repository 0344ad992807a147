#!/usr/bin/env bash
# Run HERE (a Debian machine with apt): downloads the .deb files that building and testing
# bench needs and a GPU machine without network lacks, into .gpu-debs/ (git-ignored).
# scripts/gpu_verify.sh unpacks them there into /tmp/bench-debs, never into /.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu-debs
cd .gpu-debs
PKGS=(libcjson-dev libcjson1 libpfm4-dev libpfm4 libcmocka-dev libcmocka0
      libjemalloc-dev libjemalloc2 libmimalloc-dev libmimalloc2.0)
apt-get download "${PKGS[@]}"
ls -l
echo "gpu_debs.sh: $(ls *.deb | wc -l) packages in .gpu-debs/ ($(du -sh . | cut -f1))" >&2
