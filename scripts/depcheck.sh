#!/usr/bin/env bash
# The dependency check (docs/ARCHITECTURE.md): the folders of the code form layers, and a
# file may depend only on files of its own folder or of a lower layer. Dependencies are read
# from two places:
#   includes  every `#include "..."` of the sources (.c .h .cu .inc) under util/, harness/,
#             engines/ and allocators/;
#   calls     with BUILD_DIR given, the objects of that build (nm): a call from an object of
#             folder A to a symbol defined in an object of folder B is an edge A -> B.
# It fails (exit 1) on an edge that points up or sideways between two folders of one layer,
# and on any cycle between folders, printing the files (or objects and symbol) behind it; and
# on a cycle between two files of one folder (x.c, x.h and x.inc counting as one file), but
# for the known ones listed below.
#
# Usage: scripts/depcheck.sh [BUILD_DIR]       (e.g. build/asan; make test passes it)
#        scripts/depcheck.sh --dot              the folder graph in graphviz's language, on stdout
#        scripts/depcheck.sh --edges [BUILD_DIR] every folder edge with one witness, on stdout
set -uo pipefail
cd "$(dirname "$0")/.."

mode=check build=""
case "${1:-}" in
  --dot) mode=dot; build=${2:-} ;;
  --edges) mode=edges; build=${2:-} ;;
  -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
  *) build=${1:-} ;;
esac

# The layers, top to bottom. A folder depends on lower layers freely and on no folder of its
# own layer: there is no exception. The modules (4) are built on the CUDA device code (3),
# and both on the code compiled into each module and the CUDA host logic (2).
layers='
12 tests tools
11 harness/cli
10 harness/report
9 harness/parent harness/child
8 harness/scenario harness/net
7 engines/core/runtime engines/core/synth
6 engines/core/compute engines/core/tokenizer
5 engines/core/model
4 engines/modules engines/cuda/modules
3 engines/cuda
2 engines/modules/common engines/cuda/host
1 engines/abi allocators
0 util
'
# Cycles between the files of one folder that are known and not yet undone: a pair of files
# that both match one of these patterns may depend on each other (each is a debt; the check
# fails on any other cycle). None now: the ISA kernel files include kernels_impl.h, which no
# longer brings kernels.h (kernels.c chooses among their tables), and the scenario's parsers
# (kind.c, alloc_spec.c, traffic.c) take its types from scenario_types.h, not scenario.h.
file_cycles_known='
'
# util is the bottom: mkdir -p, whole-file reads, the clock, growable buffers (it uses nothing
# of bench). allocators includes only its own folder and util (checked like any other layer-1
# folder, which may not point at the other layer-1 folder).

tmp=$(mktemp -d /tmp/depcheck.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# ---- include edges: "from_file to_file" ----
find util harness engines allocators tests tools -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.inc' \) \
  2>/dev/null | sort >"$tmp/files"
while read -r f; do
  d=$(dirname "$f")
  { grep -Eo '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' "$f" || true; } | sed -E 's/.*"([^"]+)".*/\1/' |
    while read -r inc; do
      if [ -f "$d/$inc" ]; then to=$(realpath --relative-to=. "$d/$inc")
      elif [ -f "$inc" ]; then to=$inc
      else continue   # a system header in quotes, or one another build makes (none today)
      fi
      echo "$f $to include"
    done
done <"$tmp/files" >"$tmp/edges"

# ---- call edges from the objects: "from_object to_object symbol" ----
if [ -n "$build" ]; then
  [ -d "$build/obj" ] || { echo "depcheck: $build/obj not found (build first: make tests-build)" >&2; exit 2; }
  objs=$(find "$build/obj" -name '*.o' ! -path "$build/obj/cuda/*" | sort)
  for o in $objs; do
    src=${o#"$build/obj/"}; src=${src%.o}
    # an object whose source has gone (moved or deleted since that build) is not the code's
    [ -f "$src.c" ] || [ -f "$src.cu" ] || continue
    nm "$o" 2>/dev/null | awk -v s="$src" '$2 ~ /^[TDBR]$/ {print "D", s, $3} $1 == "U" {print "U", s, $2}'
  done >"$tmp/syms"
  awk '$1 == "D" {def[$3] = $2} $1 == "U" {use[++n] = $2 " " $3}
       END {for (i = 1; i <= n; i++) {split(use[i], a, " "); if (a[2] in def && def[a[2]] != a[1]) print a[1], def[a[2]], "call:" a[2]}}' \
    "$tmp/syms" >>"$tmp/edges"
fi

# ---- folder graph, layer rules, cycles ----
awk -v mode="$mode" -v layers="$layers" '
function folder(f,   d) { d = f; sub(/\/[^\/]*$/, "", d); return d }
BEGIN {
  n = split(layers, L, "\n")
  for (i = 1; i <= n; i++) { m = split(L[i], w, " "); for (j = 2; j <= m; j++) rank[w[j]] = w[1] + 0 }
}
{
  a = folder($1); b = folder($2)
  if (a == b) next
  # a test or a tool may use anything
  if (a ~ /^(tests|tools)(\/|$)/) { if (!((a, b) in wit)) wit[a, b] = $1 " -> " $2 " (" $3 ")"; edge[a, b] = 1; F[a]; F[b]; next }
  edge[a, b] = 1; F[a]; F[b]
  if (!((a, b) in wit)) wit[a, b] = $1 " -> " $2 " (" $3 ")"
  if (!(a in rank) || !(b in rank)) { if (!(a in rank) && !(a in unk)) unk[a] = $1; if (!(b in rank) && !(b in unk)) unk[b] = $2; next }
  if (rank[a] > rank[b]) next
  key = a " -> " b
  if (!(key in bad)) bad[key] = $1 " -> " $2 " (" $3 ")"
}
END {
  status = 0
  if (mode == "edges") { for (k in wit) { split(k, p, SUBSEP); print p[1] " -> " p[2] ": " wit[k] } exit 0 }
  if (mode == "dot") {
    # sorted, so that the committed docs/architecture.dot changes only when the graph does
    print "// Generated by scripts/depcheck.sh --dot (make archgraph draws it): the folders of bench,"
    print "// one row per layer, and an arrow where a file of one folder includes or calls one of another."
    print "digraph bench {"
    print "  rankdir=TB; node [shape=box, fontname=\"monospace\"];"
    for (r = 10; r >= 0; r--) {
      m = 0
      for (f in F) if ((f in rank) && rank[f] == r && f !~ /^(tests|tools)/) row[++m] = f
      for (i = 2; i <= m; i++) { v = row[i]; for (j = i - 1; j >= 1 && row[j] > v; j--) row[j + 1] = row[j]; row[j + 1] = v }
      line = ""
      for (i = 1; i <= m; i++) line = line " \"" row[i] "\";"
      if (line != "") print "  { rank=same;" line " }"
    }
    m = 0
    for (k in edge) { split(k, p, SUBSEP); if (p[1] !~ /^(tests|tools)/) es[++m] = "  \"" p[1] "\" -> \"" p[2] "\";" }
    for (i = 2; i <= m; i++) { v = es[i]; for (j = i - 1; j >= 1 && es[j] > v; j--) es[j + 1] = es[j]; es[j + 1] = v }
    for (i = 1; i <= m; i++) print es[i]
    print "}"
    exit 0
  }
  for (f in unk) { printf "depcheck: %s: folder %s has no layer (add it to scripts/depcheck.sh and docs/ARCHITECTURE.md)\n", unk[f], f; status = 1 }
  for (k in bad) { printf "depcheck: %s points up or sideways: %s\n", k, bad[k]; status = 1 }
  # cycles between folders: the transitive closure (a few dozen folders)
  for (k in edge) { split(k, p, SUBSEP); reach[p[1], p[2]] = 1 }
  for (m in F) for (i in F) if ((i, m) in reach) for (j in F) if ((m, j) in reach) reach[i, j] = 1
  for (i in F) for (j in F) if (i < j && ((i, j) in reach) && ((j, i) in reach)) {
    printf "depcheck: cycle between %s and %s\n", i, j; status = 1
    if ((i, j) in wit) printf "  %s\n", wit[i, j]
    if ((j, i) in wit) printf "  %s\n", wit[j, i]
  }
  nf = 0; for (f in F) nf++
  ne = 0; for (k in edge) ne++
  if (!status) printf "depcheck: %d folders, %d folder edges, all pointing down; no cycle\n", nf, ne
  exit status
}' "$tmp/edges" || status=$?
status=${status:-0}

# ---- cycles between files of one folder: a file is its unit (x.c, x.h and x.inc are one),
# and the units of a folder must form no cycle either (model.c calling a reader that calls
# model.c back was one: issue 25). Tests and tools are exempt, as above. ----
if [ "$mode" = check ]; then
  awk -v known="$file_cycles_known" '
  function unit(f) { sub(/\.(c|h|inc|cu)$/, "", f); return f }
  function folder(f,   d) { d = f; sub(/\/[^\/]*$/, "", d); return d }
  BEGIN { nk = split(known, K, "\n") }
  function known_pair(x, y,   i) { for (i = 1; i <= nk; i++) if (K[i] != "" && x ~ K[i] && y ~ K[i]) return 1; return 0 }
  {
    a = unit($1); b = unit($2)
    if (a == b || folder(a) != folder(b) || a ~ /^(tests|tools)(\/|$)/) next
    if (!((a, b) in R)) { R[a, b] = 1; W[a, b] = $1 " -> " $2 " (" $3 ")" }
    for (k = 1; k <= 2; k++) { u = k == 1 ? a : b; if (!(u in seen)) { seen[u] = 1; f = folder(u); M[f, ++C[f]] = u } }
  }
  END {
    bad = 0; nu = 0
    for (f in C) {
      nu += C[f]
      # transitive closure inside the folder (Floyd-Warshall over its units)
      for (k = 1; k <= C[f]; k++) { m = M[f, k]
        for (i = 1; i <= C[f]; i++) { x = M[f, i]; if (!((x, m) in R)) continue
          for (j = 1; j <= C[f]; j++) { y = M[f, j]; if ((m, y) in R) R[x, y] = 1 } } }
      for (i = 1; i <= C[f]; i++) for (j = i + 1; j <= C[f]; j++) {
        x = M[f, i]; y = M[f, j]
        if (!((x, y) in R) || !((y, x) in R)) continue
        if (known_pair(x, y)) continue
        printf "depcheck: cycle between files %s and %s\n", x, y; bad = 1
        if ((x, y) in W) printf "  %s\n", W[x, y]
        if ((y, x) in W) printf "  %s\n", W[y, x]
      }
    }
    if (!bad) printf "depcheck: %d files in their folders, no cycle between files\n", nu
    exit bad
  }' "$tmp/edges" || status=1
fi
# the committed picture (docs/ARCHITECTURE.md) is the include graph's: it must be current
if [ "$mode" = check ] && [ -f docs/architecture.dot ] && ! bash "$0" --dot | cmp -s - docs/architecture.dot; then
  echo "depcheck: docs/architecture.dot is stale: scripts/depcheck.sh --dot > docs/architecture.dot" >&2
  status=1
fi
exit $status
