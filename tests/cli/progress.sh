#!/usr/bin/env bash
# The live progress line (issue 47, item 4): on a terminal every streamed learner (ldm, svm, cpm)
# rewrites one line of epoch, share of the epoch, rows/s and ETA, and the per-epoch lines follow
# it; with stderr in a file or a pipe no such line appears (logs stay clean). The terminal is
# script(1)'s pseudo-terminal. The CPM's pass lines and --json give its progressive estimates.
# Usage: tests/cli/progress.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=$(realpath "${1:?usage: $0 POLYMARGIN_BINARY}")
command -v script > /dev/null || { echo "skipped: needs script(1) (util-linux)" >&2; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_progress.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
data=$(realpath data/a9a.zst)
cd "$work"
"$bin" convert "$data" -o a9a.shards > /dev/null

# A run of a few seconds: a line is due every 250 ms.
for run in "ldm --epochs 40" "svm --epochs 40" "cpm --epochs 40"; do
  algo=${run%% *}
  script -qec "'$bin' train --algo $run -d a9a.shards -o $algo.model --threads 1" /dev/null \
    > "$algo.tty" || fail "$algo: train on a terminal failed: $(tail -n 5 "$algo.tty")"
  tr '\r' '\n' < "$algo.tty" |
    grep -aqE "^epoch [0-9]+/[0-9]+ +[0-9.]+% +[0-9.]+ M rows/s +ETA [0-9]+ s" ||
    fail "$algo: no live progress line on a terminal: $(tr '\r' '\n' < "$algo.tty" | head -n 20)"
  "$bin" train --algo $run -d a9a.shards -o "$algo.file.model" --threads 1 2> "$algo.err" > /dev/null
  if grep -aq $'\r' "$algo.err"; then fail "$algo: a rewritten line in a log file"; fi
  cmp -s "$algo.model" "$algo.file.model" || fail "$algo: the terminal changed the model"
done
# The CPM's pass lines carry the pass's progressive estimates, --json the last pass's.
"$bin" train --algo cpm -d a9a.shards -o est.model --epochs 5 --json 2> est.err > est.json
grep -qE "^pass 5: .* steps, objective ≈ [0-9.e+-]+ \(-[0-9.]+ %\), progressive accuracy ≈ 0\.[0-9]+, hinge ≈ [0-9.e+-]+$" est.err ||
  fail "cpm: no progressive estimates on the pass lines: $(cat est.err)"
accuracy=$(jq -r .progressive_accuracy est.json)
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.8 && a < 0.9) }' ||
  fail "cpm: progressive accuracy $accuracy on a9a, outside (0.8, 0.9)"
[ "$(jq -r '.progressive_hinge > 0' est.json)" = true ] || fail "cpm: no progressive hinge in --json"
echo "ok: progress lines"
