#!/usr/bin/env bash
# The step floor (issue 46, item 5): without --epochs a small set gets at least 50,000 SGD steps,
# and the run says so (a note, and step_floor in --json and --metrics-json); the floor's steps
# read at most 10⁹ non-zeros, so that 4 rows of which one is very long get a few thousand epochs
# rather than 12,500. Epochs given, or a set of 10,000 rows, get no note.
# Generated data: needs nothing outside the repository.
# Usage: tests/cli/step_floor.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_step_floor.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"

"$bin" gen --rows 100 --features 20 --nnz 8 --seed 3 -o "$work/small.svm" > /dev/null
expect 0 "epochs raised from 5 to 500 so that the run makes at least 50000 SGD steps" \
  train --algo ldm -d "$work/small.svm" -o "$work/small.model" --json \
  --metrics-json "$work/small.metrics"
[ "$(jq -c .step_floor "$work/stdout")" = \
  '{"default_epochs":5,"epochs":500,"min_steps":50000,"bounded_by_nnz":false}' ] ||
  fail "--json step_floor: $(jq -c .step_floor "$work/stdout")"
[ "$(jq .epochs "$work/stdout")" = 500 ] || fail "epochs: $(jq .epochs "$work/stdout")"
[ "$(jq -c .step_floor.epochs "$work/small.metrics")" = 500 ] ||
  fail "--metrics-json step_floor: $(cat "$work/small.metrics")"
# The CPM's floor, a side at a time.
expect 0 "steps raised from 10 epochs (1000 a side) to 50000 a side so that each side makes at least 50000 SGD steps" \
  train --algo cpm -d "$work/small.svm" -o "$work/small.cpm" --json
[ "$(jq .step_floor.steps "$work/stdout")" = 50000 ] || fail "cpm step_floor: $(cat "$work/stdout")"

# Epochs given, or enough rows: no floor, no note.
for run in "ldm --epochs 5" "cpm --epochs 10" "svm --epochs 3"; do
  read -r algo extra <<< "$run"
  # shellcheck disable=SC2086
  expect 0 "" train --algo $algo -d "$work/small.svm" -o "$work/given.model" $extra --json
  ! grep -q "raised from" "$work/stderr" || fail "$algo $extra: a floor note: $(cat "$work/stderr")"
  [ "$(jq .step_floor "$work/stdout")" = null ] || fail "$algo $extra: step_floor in --json"
done

# 4 rows, one of 150,000 non-zeros: the floor's 50,000 steps would read 1.9 G non-zeros (12,500
# epochs); bounded at 10⁹, they are 26,666 steps, 6,667 epochs.
python3 - "$work/long.svm" << 'PY'
import sys
with open(sys.argv[1], "w") as out:
    out.write("+1 " + " ".join(f"{i}:1" for i in range(1, 150001)) + "\n")
    out.write("-1 1:0.5 7:1\n+1 2:1 3:0.25\n-1 4:1\n")
PY
expect 0 "epochs raised from 5 to 6667 by the step floor of 50000 SGD steps, bounded at 1e+09 non-zeros read" \
  train --algo svm -d "$work/long.svm" -o "$work/long.model" --json
[ "$(jq -c .step_floor.bounded_by_nnz "$work/stdout")" = true ] || fail "long rows: $(cat "$work/stdout")"
echo "step_floor: ok"
