#!/usr/bin/env bash
# A stop request during a kernel learner's O(m³) set-up (issue 46, item 4): kernel LDM on 5,000
# generated rows, SIGTERM 3 s into the run (past the kernel matrix, in the Cholesky factorisation
# or the solves), ends with 143 within a few seconds, no model written (before, the set-up ran to
# its end first: 15.7 s after a SIGTERM at 4 s on 6,000 rows; here 22 s on 4,000 rows, under
# load). The set-up's estimated length is said before it starts.
# Generated data: needs nothing outside the repository.
# Usage: tests/cli/kernel_setup_stop.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_kernel_setup_stop.XXXXXX")
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"

"$bin" gen --rows 5000 --features 10 --nnz 5 --seed 7 -o "$work/rows.svm" > /dev/null
"$bin" train --algo kldm -d "$work/rows.svm" -o "$work/stopped.model" --threads 2 \
  --metrics-json "$work/stopped.json" > /dev/null 2> "$work/err" &
pid=$!
for _ in $(seq 400); do grep -q "^kernel" "$work/err" && break; sleep 0.05; done
grep -q "^kernel" "$work/err" || fail "kldm did not start: $(cat "$work/err")"
sleep 3
kill -0 $pid 2> /dev/null || fail "kldm ended before the stop: $(cat "$work/err")"
start=$(date +%s.%N)
kill -TERM $pid
rc=0
wait $pid || rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
[ $rc -eq 143 ] || fail "SIGTERM in the set-up: exit $rc, expected 143: $(cat "$work/err")"
[ ! -e "$work/stopped.model" ] || fail "SIGTERM in the set-up: a model was written"
grep -q '"status": "interrupted"' "$work/stopped.json" || fail "metrics: $(cat "$work/stopped.json")"
# About a second of work at most, and a loaded machine (a sanitizer build is 3-15 times slower).
limit=5
[ -z "${POLYMARGIN_SANITIZE:-}" ] || limit=40
[ "$(echo "$took < $limit" | bc)" = 1 ] || fail "SIGTERM in the set-up took $took s to stop"
grep -q "^set-up: 5000 rows, about [0-9]* s (the kernel matrix, its Cholesky factor, the solves)" \
  "$work/err" || fail "no estimate of the set-up before it: $(cat "$work/err")"
echo "kernel_setup_stop: ok (stopped $took s after SIGTERM)"
