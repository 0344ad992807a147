#!/usr/bin/env bash
# The first hour, as a new user meets it: README's two commands on a fresh clone, in order
# (`make run`, then `make test`), each logged, and then the count issue 40 asks for: a
# release object that `make test` compiles again after `make run` built it is a flags stamp
# computed before the dependencies were in place (pkg-config's -I flags), and costs a
# newcomer minutes. Meant for a bare machine (a debootstrap root, a fresh VM); on this one
# it still checks the count, from a fresh clone.
#
# Usage: scripts/newcomer.sh [WORKDIR]   (default: a new folder under /tmp)
#   WORKDIR gets the clone (bench/) and the logs (run.log, test.log); ../shared beside the
#   clone is a link to this tree's ../shared where that exists.
# Exit status: 0 both commands passed and no release object was compiled twice; 1 otherwise.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/bench-newcomer.XXXXXX)}
mkdir -p "$work"
git clone -q "$src" "$work/bench" || { echo "newcomer: cannot clone $src" >&2; exit 1; }
[ -d "$src/../shared" ] && [ ! -e "$work/shared" ] && ln -s "$(cd "$src/../shared" && pwd)" "$work/shared"
cd "$work/bench"
t0=$(date +%s)
make run > "$work/run.log" 2>&1; run_rc=$?
t1=$(date +%s)
make test > "$work/test.log" 2>&1; test_rc=$?
t2=$(date +%s)
# the release objects each log compiled: "-c SRC -o build/obj/X.o" (build/asan is the test build)
objs() { grep -oE -- '-o build/obj/[^ ]+\.o' "$1" | sort; }
twice=$(comm -12 <(objs "$work/run.log" | uniq) <(objs "$work/test.log" | uniq))
n_run=$(objs "$work/run.log" | wc -l)
n_again=$(printf '%s' "$twice" | grep -c . || true)
echo "newcomer: make run exit $run_rc in $((t1 - t0)) s ($n_run release objects compiled); make test exit $test_rc in $((t2 - t1)) s: $(grep -E '^tests: ' "$work/test.log" | tail -1)"
echo "newcomer: release objects make test compiled again: $n_again${twice:+ ($(printf '%s' "$twice" | head -5 | tr '\n' ' ')...)}"
echo "newcomer: logs in $work/run.log and $work/test.log"
[ "$run_rc" -eq 0 ] && [ "$test_rc" -eq 0 ] && [ "$n_again" -eq 0 ]
