#!/usr/bin/env bash
# configs/nightly.sh on small generated data: the first night creates the served model; a normal
# night warm-starts and replaces it only when the holdout metric did not drop; a night of flipped
# labels is kept out of service; a run beside a running one is refused (exit 75); a night stopped
# mid-training (exit 6) continues when run again; a CPM's second night trains afresh.
# Usage: tests/cli/nightly.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_nightly.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
nightly() { configs/nightly.sh -b "$bin" -w "$work/job" "$work/served.model" "$work/holdout.svm" "$@"; }
gen() { "$bin" gen --like kdda --features 3000 --nnz 12 "$@" > /dev/null; }

gen --rows 6000 --seed 1 -o "$work/day1.svm" --test-rows 4000 --test-output "$work/holdout.svm"
gen --rows 6000 --seed 2 -o "$work/day2.svm"
gen --rows 6000 --seed 3 -o "$work/day3.svm"
awk '{ $1 = ($1 > 0 ? -1 : 1); print }' "$work/day3.svm" > "$work/flipped.svm"  # every label wrong
gen --rows 6000 --seed 4 -o "$work/day4.svm"

nightly "$work/day1.svm" 2> "$work/log"
[ "$(jq -r .decision "$work/job/decision.json")" = "first model" ] || fail "night 1: $(cat "$work/log")"
cmp -s "$work/served.model" "$work/job/candidate.model" || fail "night 1: not served"

nightly "$work/day2.svm" 2> "$work/log"
d=$work/job/decision.json
jq -e '(.decision == "replaced") == (.candidate >= .served) and .decision != "first model"' "$d" \
  > /dev/null || fail "night 2 decision contradicts its metrics: $(cat "$d")"
"$bin" export -m "$work/job/candidate.model" --format json | jq -e '.config.warm_start.model' \
  > /dev/null || fail "night 2 did not warm-start"
cp "$work/served.model" "$work/before.model"

nightly "$work/flipped.svm" 2> "$work/log"
jq -e '.decision == "kept" and .candidate < .served' "$d" > /dev/null ||
  fail "a night of flipped labels was served: $(cat "$d")"
cmp -s "$work/served.model" "$work/before.model" || fail "the served model changed although kept"

# A run while another holds the work directory: exit 75, nothing done (an overlapping night would
# install a candidate it had not evaluated).
cp "$d" "$work/decision.before"
exec 8>> "$work/job/nightly.lock"
flock -n 8 || fail "cannot take $work/job/nightly.lock"
status=0
nightly "$work/day2.svm" 8>&- 2> "$work/log" || status=$?
exec 8>&-
[ "$status" = 75 ] && grep -q "another run is using" "$work/log" ||
  fail "a second run beside a running one: exit $status: $(cat "$work/log")"
cmp -s "$work/served.model" "$work/before.model" && cmp -s "$d" "$work/decision.before" ||
  fail "a run refused for a running one changed the served model or the decision"

# Stopped mid-training: exit 6, nothing served; the rerun resumes and decides.
rc=0
nightly "$work/day4.svm" -- --stop-after-rows 9000 2> "$work/log" || rc=$?
[ $rc -eq 6 ] || fail "stopped night: exit $rc: $(cat "$work/log")"
cmp -s "$work/served.model" "$work/before.model" || fail "a stopped night changed the model"
nightly "$work/day4.svm" 2> "$work/log"
grep -q "candidate .* served .*: \(replaced\|kept\)" "$work/log" || fail "rerun: $(cat "$work/log")"
[ "$(jq .train_metrics.resumed_from.rows "$d")" != null ] || fail "the rerun did not resume"
# A night stopped, then a run given another night's data: it trains on those, afresh.
rc=0
nightly "$work/day4.svm" -- --stop-after-rows 9000 2> "$work/log" || rc=$?
[ $rc -eq 6 ] || fail "stopped night: exit $rc: $(cat "$work/log")"
nightly "$work/day2.svm" 2> "$work/log"
grep -q "had other data: starting afresh" "$work/log" || fail "other data: not said: $(cat "$work/log")"
[ "$(jq .train_metrics.resumed_from "$d")" = null ] || fail "other data: resumed the stopped run"
"$bin" convert "$work/day2.svm" -o "$work/day2.shards" > /dev/null 2>&1
"$bin" train -d "$work/day2.shards" -o "$work/direct.model" --metrics-json "$work/direct.json" > /dev/null 2>&1
[ "$(jq .train_metrics.data_checksum "$d")" = "$(jq .data_checksum "$work/direct.json")" ] ||
  fail "other data: not trained on them: $(jq -c .train_metrics.data "$d")"
# The CPM: no warm start (it refuses one), so a second night trains afresh and still decides.
cpm_nightly() {
  configs/nightly.sh -b "$bin" -a cpm -w "$work/cpm_job" "$work/cpm.model" "$work/holdout.svm" \
    "$@" -- -k 2 --epochs 1
}
cpm_nightly "$work/day1.svm" 2> "$work/log" || fail "CPM night 1: $(cat "$work/log")"
cpm_nightly "$work/day2.svm" 2> "$work/log" || fail "CPM night 2: $(cat "$work/log")"
jq -e '.decision == "replaced" or .decision == "kept"' "$work/cpm_job/decision.json" > /dev/null ||
  fail "CPM night 2: $(cat "$work/cpm_job/decision.json")"
# A model of several classes has no AUC: the nights compare accuracy, and -m auc is refused.
three() { awk '{ $1 = ($1 > 0 ? 1 : (NR % 2 ? 2 : 3)); print }' "$1"; }
three "$work/day1.svm" > "$work/three1.svm"
three "$work/day2.svm" > "$work/three2.svm"
three "$work/holdout.svm" > "$work/three.holdout.svm"
three_nightly() {
  configs/nightly.sh -b "$bin" -a cpm -w "$work/three_job" "$@" "$work/three.model" \
    "$work/three.holdout.svm" "$work/three$night.svm" -- -k 2 --epochs 1
}
night=1 three_nightly 2> "$work/log" || fail "three classes, night 1: $(cat "$work/log")"
night=2 three_nightly 2> "$work/log" || fail "three classes, night 2: $(cat "$work/log")"
jq -e '.metric == "accuracy" and (.decision == "replaced" or .decision == "kept") and .served > 0' \
  "$work/three_job/decision.json" > /dev/null || fail "three classes: $(cat "$work/three_job/decision.json")"
cp "$work/three.model" "$work/three.before"
rc=0
night=2 three_nightly -m auc 2> "$work/log" || rc=$?
[ $rc -eq 2 ] && grep -q "gives no auc" "$work/log" || fail "three classes, -m auc: exit $rc: $(cat "$work/log")"
cmp -s "$work/three.model" "$work/three.before" || fail "three classes, -m auc: the served model changed"
echo "nightly: all checks passed"
