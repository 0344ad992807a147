#!/usr/bin/env bash
# The function-length check (issue 25): no function in harness/ or engines/core/ is longer
# than LIMIT lines (150), signature and closing brace included; a longer one is a sign that
# it does several things, each of which wants a name. Run by make test, like depcheck.sh.
# It reads bench's own layout (a definition starts at column 0, its body ends with a "}"
# alone at column 0; `ctags --fields=+ne` agrees on every function over the limit).
#
# Usage: scripts/funclen.sh            fails (exit 1) naming each function over the limit
#        scripts/funclen.sh --list N   every function of N lines or more, longest first
set -uo pipefail
cd "$(dirname "$0")/.."

limit=150 list=""
case "${1:-}" in
  --list) list=${2:-$limit} ;;
  -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
esac

# Files exempt, with why: none (issue 22's serving files were exempt until its merge).
known='
'

# "file line name length" for every function definition
funcs() {
  find harness engines/core -name '*.c' | sort | xargs awk '
  FNR == 1 { sig = ""; inbody = 0 }
  {
    line = $0
    if (inbody) {
      if (line ~ /^}[[:space:]]*$/) { print FILENAME, start, name, FNR - start + 1; inbody = 0 }
      next
    }
    if (sig == "") {
      if (line !~ /^[A-Za-z_]/ || line !~ /\(/) next
      if (line ~ /^(typedef|struct|union|enum)[[:space:]]*[A-Za-z_]*[[:space:]]*\{/) next
      sig = line; start = FNR
    } else sig = sig " " line
    # a declaration, a one-line function, or an initializer: no body to measure
    if (line ~ /;[[:space:]]*(\/\*.*\*\/)?[[:space:]]*$/ && line !~ /\{[[:space:]]*$/) { sig = ""; next }
    if (line ~ /\)[[:space:]]*(__attribute__.*)?\{[[:space:]]*$/) {
      if (sig ~ /=[[:space:]]*\{[[:space:]]*$/) { sig = ""; next }
      h = sig; sub(/\(.*/, "", h); n = split(h, w, /[^A-Za-z0-9_]+/); name = w[n]; if (name == "") name = w[n - 1]
      inbody = 1; sig = ""
      next
    }
    if (line ~ /\{.*\}[[:space:]]*$/) { sig = ""; next }
    if (FNR - start > 12) sig = ""    # not a signature after all (a long macro call)
  }'
}

if [ -n "$list" ]; then
  funcs | awk -v n="$list" '$4 >= n' | sort -k4,4nr
  exit 0
fi
funcs | awk -v limit="$limit" -v known="$known" '
  BEGIN { nk = split(known, K, "\n"); for (i = 1; i <= nk; i++) if (K[i] != "") ok[K[i]] = 1 }
  { nf++ }
  $4 > limit && !($1 in ok) { printf "funclen: %s:%d: %s is %d lines, more than %d\n", $1, $2, $3, $4, limit; bad++ }
  END {
    if (bad) { printf "funclen: %d function(s) over %d lines: split them (scripts/funclen.sh)\n", bad, limit; exit 1 }
    printf "funclen: %d functions in harness/ and engines/core/, none over %d lines\n", nf, limit
  }'
