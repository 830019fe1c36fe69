#!/usr/bin/env bash
# `train --metrics-json` (every key, written on success, on a data error and on a stop, the model
# checksum that of the file), `--validation`, and `train --warm-start` (keeps or improves the
# objective on the same data, grows the feature space and records it, resumes bit-identically,
# refuses a model of another algorithm, other labels, another bias, or a checkpoint).
# Usage: tests/cli/warm_start_metrics.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_warm.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"

le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }

"$bin" gen --like kdda --rows 8000 --features 3000 --nnz 12 --seed 4 -o "$work/a.svm" \
  --test-rows 3000 --test-output "$work/t.svm" > /dev/null
"$bin" gen --like kdda --rows 8000 --features 4500 --nnz 12 --seed 9 -o "$work/b.svm" > /dev/null

# --- --metrics-json on success --------------------------------------------------------------------
"$bin" train -d "$work/a.svm" -o "$work/a.model" --validation "$work/t.svm" \
  --metrics-json "$work/a.json" > "$work/a.out" 2> /dev/null
m="$work/a.json"
has_keys "$m" . status exit_code command algorithm data data_checksum rows features nnz config \
  model_path model_checksum validation_data validation_data_checksum seconds checkpoints_written \
  objective objective_kind train validation
has_keys "$m" .seconds open train learn read_wait final_pass validation total
[ "$(jq -r .status "$m")" = ok ] && [ "$(jq .exit_code "$m")" = 0 ] || fail "status: $(cat "$m")"
[ "$(jq .rows "$m")" = 8000 ] && [ "$(jq .validation.rows "$m")" = 3000 ] || fail "rows"
jq -e '.train.auc > 0.8 and .train.auc <= 1 and .validation.auc > 0.5' "$m" > /dev/null ||
  fail "AUCs: $(jq -c '[.train.auc, .validation.auc]' "$m")"
sum=$(tail -c 8 "$work/a.model" | od -An -tx8 | tr -d ' \n')
[ "$(jq -r .model_checksum "$m")" = "xxh64:$sum" ] || fail "model_checksum is not the file's"
grep -q "validation: 3000 rows, accuracy" "$work/a.out" || fail "no validation line"
# The data checksum pins the content: text converted on the fly and its shards agree (a small text
# is converted into raw shards, so the comparison is with `convert --codec raw`).
"$bin" convert "$work/a.svm" -o "$work/a.shards" --codec raw > /dev/null
"$bin" train -d "$work/a.shards" -o "$work/a2.model" --epochs 2 --avg-start-epochs 1 \
  --metrics-json "$work/a2.json" > /dev/null 2>&1
[ "$(jq -r .data_checksum "$work/a2.json")" = "$(jq -r .data_checksum "$m")" ] ||
  fail "data_checksum differs between text and its shards"

# --- ... on failure and on a stop: status, exit code, the error --------------------------------
printf '1 3:0.5\n-1 2:x\n' > "$work/bad.svm"
expect 3 "bad.svm:2" train -d "$work/bad.svm" -o "$work/bad.model" --metrics-json "$work/bad.json"
[ "$(jq -r .status "$work/bad.json")" = error ] && [ "$(jq .exit_code "$work/bad.json")" = 3 ] ||
  fail "failure metrics: $(cat "$work/bad.json")"
jq -r .error "$work/bad.json" | grep "bad.svm:2" > /dev/null || fail "error not recorded"
[ ! -e "$work/bad.model" ] || fail "a failed run wrote a model"
expect 2 "--scale must be" train -d "$work/a.svm" -o "$work/x.model" --scale bogus \
  --metrics-json "$work/usage.json"
[ "$(jq .exit_code "$work/usage.json")" = 2 ] && [ "$(jq -r .command "$work/usage.json")" = train ] ||
  fail "usage-error metrics: $(cat "$work/usage.json")"
# A phase that did not run has no key: no final pass, no validation.
"$bin" train -d "$work/a.svm" -o "$work/n.model" --epochs 1 --no-final-pass --json \
  --metrics-json "$work/n.json" > "$work/n.out" 2> /dev/null
jq -e '.seconds | has("final_pass") or has("validation") | not' "$work/n.json" > /dev/null &&
  jq -e 'has("eval_seconds") | not' "$work/n.out" > /dev/null ||
  fail "keys of phases not run: $(jq -c .seconds "$work/n.json")"
expect 6 "checkpoint written" train -d "$work/a.svm" -o "$work/x.model" --checkpoint "$work/ck" \
  --stop-after-rows 8000 --metrics-json "$work/stop.json"
jq -e '.status == "interrupted" and .exit_code == 6 and .interrupted.rows == 8000' \
  "$work/stop.json" > /dev/null || fail "stop metrics: $(cat "$work/stop.json")"
rm -f "$work/ck"

# --- warm start on the same data: the objective is kept or improved ---------------------------
start=$(jq .objective "$m")
"$bin" train -d "$work/a.svm" -o "$work/w1.model" --warm-start "$work/a.model" \
  --metrics-json "$work/w1.json" > /dev/null 2> "$work/w1.err"
grep -q "warm start from $work/a.model" "$work/w1.err" || fail "warm start not reported"
w1=$(jq .objective "$work/w1.json")
le "$w1" "$start" || fail "warm start raised the objective: $start -> $w1"
"$bin" train -d "$work/a.svm" -o "$work/w0.model" --warm-start "$work/a.model" --epochs 1 \
  --avg-start-epochs 0 --metrics-json "$work/w0.json" > /dev/null 2>&1
w0=$(jq .objective "$work/w0.json")
# One warm epoch restarts the step schedule (large steps first), so it may lose a little; within
# 1 % of the model's objective (a cold epoch is 57 % above it).
le "$w0" "$(awk -v s="$start" 'BEGIN { print s * 1.01 }')" ||
  fail "one warm epoch lost the objective: $start -> $w0"
# A cold run of the same length does worse than the warm continuation.
"$bin" train -d "$work/a.svm" -o "$work/c1.model" --epochs 1 --avg-start-epochs 0 \
  --metrics-json "$work/c1.json" > /dev/null 2>&1
le "$w0" "$(jq .objective "$work/c1.json")" || fail "warm epoch no better than a cold one"

# --- new data with more features: the space grows, the mapping is recorded --------------------
"$bin" train -d "$work/b.svm" -o "$work/b.model" --warm-start "$work/a.model" \
  --metrics-json "$work/b.json" > /dev/null 2>&1
old_max=$(jq .config.max_index "$m")
new_max=$(jq .config.max_index "$work/b.json")
[ "$new_max" -gt "$old_max" ] || fail "feature space did not grow: $old_max -> $new_max"
"$bin" export -m "$work/b.model" --format json > "$work/b.export.json"
jq -e ".config.warm_start.model_max_index == $old_max and
       .config.warm_start.features_added == $new_max - $old_max and
       .config.warm_start.feature_mapping != null" "$work/b.export.json" > /dev/null ||
  fail "warm-start record: $(jq -c .config.warm_start "$work/b.export.json")"

# --- a warm-started run stopped and resumed is bit-identical --------------------------------------
expect 6 "checkpoint written" train -d "$work/b.svm" -o "$work/br.model" --warm-start "$work/a.model" \
  --checkpoint "$work/ck" --stop-after-rows 12000
"$bin" train -d "$work/b.svm" -o "$work/br.model" --warm-start "$work/a.model" \
  --resume "$work/ck" > /dev/null 2>&1
cmp -s "$work/b.model" "$work/br.model" || fail "warm start, stop, resume: other model"
expect 6 "checkpoint written" train -d "$work/b.svm" -o "$work/br2.model" --warm-start "$work/a.model" \
  --checkpoint "$work/ck" --stop-after-rows 4000
expect 2 "other options (warm_start" train -d "$work/b.svm" -o "$work/br2.model" --resume "$work/ck"

# --- refusals ----------------------------------------------------------------------------------
"$bin" train --algo svm -d "$work/a.svm" -o "$work/s.model" --epochs 1 --avg-start-epochs 0 \
  > /dev/null 2>&1
expect 3 "an svm model cannot start a --algo ldm run" train -d "$work/a.svm" -o "$work/x.model" \
  --warm-start "$work/s.model"
sed 's/^-1 /0 /' "$work/a.svm" > "$work/a01.svm"
expect 3 "labels -1 / 1 are not the data's 0 / 1" train -d "$work/a01.svm" -o "$work/x.model" \
  --warm-start "$work/a.model"
# a.model has the default bias (1 since issue 20).
expect 2 "trained with --bias 1, this run has --bias 0" train -d "$work/a.svm" -o "$work/x.model" \
  --warm-start "$work/a.model" --bias 0
expect 3 "is a training checkpoint, not a model" train -d "$work/a.svm" -o "$work/x.model" \
  --warm-start "$work/ck"
expect 4 "cannot open model file" train -d "$work/a.svm" -o "$work/x.model" \
  --warm-start "$work/missing.model"
[ ! -e "$work/x.model" ] || fail "a refused warm start wrote a model"

# A --metrics-json file another job is writing: the run is refused before any work, and that job's
# record is left as it is (not overwritten by this run's refusal); a second job on the model
# writes its refusal into a metrics file of its own.
"$bin" train -d "$work/a.svm" -o "$work/m1.model" --epochs 1 --metrics-json "$work/shared.json" \
  > /dev/null 2>&1
cp "$work/shared.json" "$work/shared.before"
exec 8>> "$work/shared.json.lock"
flock -n 8 || fail "cannot take $work/shared.json.lock"
expect 4 "the metrics file $work/shared.json is being written by another job" train \
  -d "$work/a.svm" -o "$work/m2.model" --metrics-json "$work/shared.json" 8>&-
expect 4 "the metrics file $work/shared.json is being written by another job" train --algo kldm \
  -d "$work/a.svm" -o "$work/m2.model" --metrics-json "$work/shared.json" 8>&-
exec 8>&-
cmp -s "$work/shared.json" "$work/shared.before" || fail "a refused run overwrote another job's metrics"
[ ! -e "$work/m2.model" ] || fail "a run refused for its metrics file wrote a model"
exec 8>> "$work/m1.model.lock"
flock -n 8 || fail "cannot take $work/m1.model.lock"
expect 4 "the model $work/m1.model is being written by another job" train -d "$work/a.svm" \
  -o "$work/m1.model" --metrics-json "$work/own.json" 8>&-
exec 8>&-
jq -e '.status == "error" and .exit_code == 4' "$work/own.json" > /dev/null ||
  fail "a run refused for its model did not record it: $(cat "$work/own.json")"
echo "warm_start_metrics: all checks passed"
