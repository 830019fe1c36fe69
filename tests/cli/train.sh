#!/usr/bin/env bash
# `polymargin train` at the shell: inputs (text of any compression, shard directories), the label
# mapping, --json keys, exit codes and messages of bad options, non-binary labels and divergence,
# and that no model file (not even a partial or temporary one) is left by a failed run.
# Usage: tests/cli/train.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_train.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
json_value() { sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"]*\)\"\{0,1\},\{0,1\}$/\1/p" "$1" | head -1; }
same_number() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0) }'; }
# expect CODE MESSAGE-FRAGMENT ARGS...: the run exits with CODE, says FRAGMENT on stderr, and
# leaves no file in $work/out.
expect() {
  local code=$1 fragment=$2
  shift 2
  local rc=0
  "$bin" train "$@" > "$work/out.log" 2> "$work/err.log" || rc=$?
  [ "$rc" -eq "$code" ] || fail "train $* exited $rc, expected $code: $(cat "$work/err.log")"
  grep -q -- "$fragment" "$work/err.log" ||
    fail "train $*: stderr lacks '$fragment': $(cat "$work/err.log")"
  [ -z "$(ls -A "$work/out")" ] || fail "train $* left files: $(ls "$work/out")"
}

mkdir -p "$work/out"
a9a=data/a9a.zst  # the bundled copy (zstd): text of any compression is converted on the fly

# --- a normal run, JSON summary ---------------------------------------------------------------
"$bin" train --algo ldm -d "$a9a" -o "$work/a9a.model" --seed 3 --json > "$work/train.json" \
  2> "$work/train.err"
[ -s "$work/a9a.model" ] || fail "no model written"
for key in rows features nnz epochs eta0 train_seconds learn_seconds read_wait_seconds \
  rows_per_second objective margin_mean margin_variance train_accuracy model_path; do
  grep -q "\"$key\":" "$work/train.json" || fail "--json lacks $key: $(cat "$work/train.json")"
done
[ "$(json_value "$work/train.json" rows)" = 32561 ] || fail "rows: $(cat "$work/train.json")"
[ "$(json_value "$work/train.json" features)" = 123 ] || fail "features: $(cat "$work/train.json")"
acc=$(json_value "$work/train.json" train_accuracy)
awk -v a="$acc" 'BEGIN { exit !(a > 0.84) }' || fail "training accuracy $acc"
grep -q -- "-1 -> -1 (24720 rows), 1 -> +1 (7841 rows)" "$work/train.err" ||
  fail "label mapping not reported: $(cat "$work/train.err")"
grep -q "eta0 .* (calibrated)" "$work/train.err" || fail "calibrated eta0 not logged"
grep -q "epoch 5/5" "$work/train.err" || fail "no per-epoch log line"
ls "$work" | grep -q "tmp" && fail "temporary file left next to the model"

# A shard directory as input (same weights as text: train_test.cpp), human summary.
"$bin" convert "$a9a" -o "$work/a9a.shards" > /dev/null
"$bin" train -d "$work/a9a.shards" -o "$work/shards.model" --seed 3 > "$work/plain.out" 2> /dev/null
grep -q "model written to $work/shards.model" "$work/plain.out" || fail "summary: $(cat "$work/plain.out")"
grep -q "learning .* waiting for data" "$work/plain.out" || fail "no time split: $(cat "$work/plain.out")"

# SVM, explicit hyper-parameters, bias, no scaling: runs and records them.
"$bin" train --algo svm -d "$work/a9a.shards" -o "$work/svm.model" -c 0.5 --epochs 3 \
  --avg-start-epochs 1 --eta0 0.05 --bias 1 --scale none --json > "$work/svm.json" 2> /dev/null
for kv in eta0=0.05 lambda1=0 lambda2=0 epochs=3 c=0.5 bias=1; do
  same_number "$(json_value "$work/svm.json" "${kv%=*}")" "${kv#*=}" ||
    fail "svm ${kv%=*} is not ${kv#*=}: $(cat "$work/svm.json")"
done

# The final pass gives the exact objective; without it the summary says its values are estimates.
[ "$(json_value "$work/train.json" objective_kind)" = exact ] || fail "objective_kind not exact"
"$bin" train -d "$work/a9a.shards" -o "$work/quick.model" --no-final-pass --json \
  > "$work/quick.json" 2> /dev/null
[ "$(json_value "$work/quick.json" objective_kind)" = progressive ] ||
  fail "--no-final-pass: $(cat "$work/quick.json")"
cmp -s "$work/shards.model" "$work/quick.model" && fail "seed 1 and seed 3 models are identical"

# 0/1 labels: the larger label is +1.
zstd -dc "$a9a" | sed -n '1,2000{s/^-1 /0 /;s/^+1 /1 /;p}' > "$work/zero_one.svm"
"$bin" train -d "$work/zero_one.svm" -o "$work/zero_one.model" 2> "$work/zo.err" > /dev/null
grep -q -- "0 -> -1 (.* rows), 1 -> +1" "$work/zo.err" || fail "0/1 mapping: $(cat "$work/zo.err")"

# --- usage errors: exit 2, nothing written ---------------------------------------------------
expect 2 "C must be a positive number" -d "$work/a9a.shards" -o "$work/out/m" -c 0
expect 2 "C must be a positive number" -d "$work/a9a.shards" -o "$work/out/m" -c -1
expect 2 "lambda1 must be ≥ 0" -d "$work/a9a.shards" -o "$work/out/m" --lambda1 -0.5
expect 2 "lambda2-rel must be ≥ 0" -d "$work/a9a.shards" -o "$work/out/m" --lambda2-rel -1
expect 2 "exclude each other" -d "$work/a9a.shards" -o "$work/out/m" --lambda1 1 --lambda1-rel 1
expect 2 "epochs must be ≥ 1" -d "$work/a9a.shards" -o "$work/out/m" --epochs 0
expect 2 "avg-start-epochs must be in" -d "$work/a9a.shards" -o "$work/out/m" --epochs 3 \
  --avg-start-epochs 3
expect 2 "avg-start-epochs must be in" -d "$work/a9a.shards" -o "$work/out/m" --epochs 2 \
  --avg-start-epochs 2
# Without --avg-start-epochs a run of 1 or 2 epochs averages its last epoch (t0 = epochs - 1).
for e in 1 2 3; do
  "$bin" train -d "$work/a9a.shards" -o "$work/short$e.model" --epochs "$e" > /dev/null 2>&1 ||
    fail "train --epochs $e without --avg-start-epochs failed"
  t0=$("$bin" export -m "$work/short$e.model" --format json | jq '.config.avg_start_epochs')
  [ "$t0" = "$(( e < 3 ? e - 1 : 2 ))" ] || fail "--epochs $e: avg_start_epochs $t0"
done
rm -f "$work"/short*.model
# Without --epochs a small set gets at least 50,000 steps (200 rows: 250 epochs), logged in about 20
# lines, not 250; --epochs as given.
"$bin" gen --rows 200 --features 500 --nnz 10 --seed 2 -o "$work/small.svm" > /dev/null
"$bin" train -d "$work/small.svm" -o "$work/small.model" --json --checkpoint "$work/small.ckpt" \
  --metrics-json "$work/small.metrics" > "$work/small.json" 2> "$work/small.err" ||
  fail "train on 200 rows failed: $(cat "$work/small.err")"
[ "$(jq .epochs "$work/small.json")" = 250 ] || fail "200 rows: $(jq .epochs "$work/small.json") epochs"
# ... and a checkpoint at each 5 % of its epochs, not at each of them.
[ "$(jq .checkpoints_written "$work/small.metrics")" = 20 ] ||
  fail "250 epochs: $(jq .checkpoints_written "$work/small.metrics") checkpoints, expected 20"
lines=$(grep -c "^epoch " "$work/small.err")
[ "$lines" -ge 20 ] && [ "$lines" -le 21 ] || fail "200 rows, 250 epochs: $lines epoch lines"
grep -q "^epoch 250/250" "$work/small.err" || fail "no line for the last epoch"
"$bin" train -d "$work/small.svm" -o "$work/small.model" --epochs 5 --json > "$work/small.json" \
  2> /dev/null
[ "$(jq .epochs "$work/small.json")" = 5 ] || fail "--epochs 5 gave $(jq .epochs "$work/small.json")"
rm -f "$work"/small.*
expect 2 "eta0 must be 'auto' or a positive number" -d "$work/a9a.shards" -o "$work/out/m" --eta0 x
expect 2 "algo must be one of .*ldm|svm" -d "$work/a9a.shards" -o "$work/out/m" --algo perceptron
expect 2 "scale must be maxabs or none" -d "$work/a9a.shards" -o "$work/out/m" --scale minmax
expect 2 "takes no" -d "$work/a9a.shards" -o "$work/out/m" --algo svm --lambda1 1
expect 2 "takes no --pairing" -d "$work/a9a.shards" -o "$work/out/m" --algo svm --pairing permuted
expect 2 "no training data" -o "$work/out/m"
# --index-base: text read as given; a shard directory's own base is not overridden silently.
printf '1 1:1 2:1\n-1 2:1\n' > "$work/ids.svm"
"$bin" train -d "$work/ids.svm" -o "$work/ids0.model" --index-base 0 --epochs 1 2> /dev/null ||
  fail "train --index-base 0"
"$bin" export -m "$work/ids0.model" --format json > "$work/ids0.json" || fail "export ids0"
[ "$(jq .index_base "$work/ids0.json")" = 0 ] || fail "--index-base 0 did not make a 0-based model"
expect 2 "index-base must be auto, 0 or 1" -d "$work/ids.svm" -o "$work/out/m" --index-base 2
expect 2 "was converted with index base 1" -d "$work/a9a.shards" -o "$work/out/m" --index-base 0
expect 4 "does not exist" -d "$work/a9a.shards" -o "$work/out/missing/m"

# --- data errors: exit 3 -------------------------------------------------------------------------
printf '1 1:1\n2 2:1\n3 1:0.5 2:1\n' > "$work/three.svm"
expect 3 "labels are not binary.*found 3 (1, 2, 3)" -d "$work/three.svm" -o "$work/out/m"
printf '1 1:1\n1 2:1\n' > "$work/one.svm"
expect 3 "labels are not binary" -d "$work/one.svm" -o "$work/out/m"
# The largest id a file may hold leaves the linear learners no slot for the bias (it wrapped to
# slot 0: a model of no weights, read out of bounds).
printf '1 1:1 4294967295:1\n-1 2:1\n' > "$work/top.svm"
for algo in ldm svm; do
  expect 3 "top.svm: feature id 4294967295: --algo $algo keeps the slot after the largest id" \
    --algo $algo -d "$work/top.svm" -o "$work/out/m" --scale none
done

# --- divergence: exit 5, no model, an existing model is left untouched ------------------------
printf '1 1:3e38 2:1\n-1 1:1 2:3e38\n1 1:2e38 3:1e38\n-1 2:1 3:3e38\n' > "$work/huge.svm"
expect 5 "diverged: non-finite .* at step [0-9]* (epoch [0-9]*)" -d "$work/huge.svm" \
  -o "$work/out/m" --scale none --eta0 1
cp "$work/a9a.model" "$work/keep.model"
"$bin" train -d "$work/huge.svm" -o "$work/keep.model" --scale none --eta0 1 2> /dev/null &&
  fail "diverging run succeeded"
cmp -s "$work/a9a.model" "$work/keep.model" || fail "a failed run changed the existing model"
ls "$work" | grep -q "keep.model.tmp" && fail "temporary model file left behind"

"$bin" train --help > "$work/help.out" || fail "--help failed"
grep -q -- "--lambda1-rel" "$work/help.out" || fail "--help lacks the options"
# The SVM's help leaves out the LDM's own options, which it refuses (still with its own message).
"$bin" train --algo svm --help > "$work/help.svm" || fail "svm --help failed"
! grep -q -e "--lambda" -e "--pairing" "$work/help.svm" || fail "svm --help lists the LDM's options"
grep -q -- "--cost" "$work/help.svm" || fail "svm --help lacks its options"
expect 2 "takes no λ1, λ2" --algo svm -d "$work/small.svm" -o "$work/x" --lambda1-rel 1e-3
echo "train.sh: all checks passed"
