#!/usr/bin/env bash
# The regular-scale learners (train --algo kldm|tldm|cmm) as unattended jobs: --metrics-json written
# whatever the outcome, --validation scored with the written model (its accuracy equals eval's),
# the model's checksum as the file carries it, the model lock, and a failed run leaving no model.
# Generated data: needs nothing outside the repository.
# Usage: tests/cli/kernel_jobs.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_kernel_jobs.XXXXXX")
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# json_get FILE EXPR: a value of the JSON file, by a Python expression on `j`.
json_get() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"; }

"$bin" gen --rows 400 --features 30 --nnz 8 --seed 3 --test-rows 300 \
  --test-output "$work/valid.svm" -o "$work/train.svm" > /dev/null
# A third label in the holdout: the run must fail after training, before any model is written.
sed '1s/^[^ ]*/7/' "$work/valid.svm" > "$work/bad_valid.svm"
# The model file's own checksum: its last 8 bytes, a little-endian xxh64.
file_checksum() { echo "xxh64:$(od -An -tx8 -j $(($(stat -c %s "$1") - 8)) "$1" | tr -d ' \n')"; }

for algo in kldm tldm cmm; do
  opts=(--algo $algo -d "$work/train.svm" --kernel rbf --threads 2)
  out="$work/$algo.model"
  "$bin" train "${opts[@]}" -o "$out" --validation "$work/valid.svm" \
    --metrics-json "$work/$algo.metrics.json" --json > "$work/$algo.summary.json" 2> "$work/err" ||
    fail "$algo: train exited $?: $(cat "$work/err")"
  m="$work/$algo.metrics.json"
  [ "$(json_get "$m" "j['status'], j['exit_code']")" = "ok 0" ] || fail "$algo: status $(cat "$m")"
  for key in data_checksum rows features nnz config seconds objective converged train validation \
    validation_data_checksum model_checksum; do
    json_get "$m" "'$key' in j" | grep -q True || fail "$algo: --metrics-json lacks $key"
  done
  [ "$(json_get "$m" "j['rows']")" = 400 ] || fail "$algo: rows $(json_get "$m" "j['rows']")"
  [ "$(json_get "$m" "j['model_checksum']")" = "$(file_checksum "$out")" ] ||
    fail "$algo: model_checksum is not the file's"
  json_get "$m" "0 < j['train']['auc'] <= 1 and j['seconds']['save'] >= 0" | grep -q True ||
    fail "$algo: train AUC or save time: $(cat "$m")"
  # The holdout figures are the written model's: eval on the same file says the same.
  "$bin" eval -m "$out" -d "$work/valid.svm" --json > "$work/$algo.eval.json"
  for key in accuracy auc; do
    a=$(json_get "$m" "j['validation']['$key']")
    b=$(json_get "$work/$algo.eval.json" "j['$key']")
    [ "$a" = "$b" ] || fail "$algo: validation $key $a, eval says $b"
  done
  json_get "$work/$algo.summary.json" "j['validation']['rows'] == 300 and 'save_seconds' in j" |
    grep -q True || fail "$algo: --json summary lacks validation or save_seconds"
  # The summary's training accuracy is the metrics file's too.
  a=$(json_get "$m" "round(j['train']['accuracy'], 12)")
  b=$(json_get "$work/$algo.summary.json" "round(j['train_accuracy'], 12)")
  [ "$a" = "$b" ] || fail "$algo: train accuracy $a in --metrics-json, $b in the summary"

  # A holdout with a label the model does not know: exit 3, status recorded, no model file.
  rc=0
  "$bin" train "${opts[@]}" -o "$work/$algo.bad" --validation "$work/bad_valid.svm" \
    --metrics-json "$work/$algo.bad.json" > /dev/null 2> "$work/err" || rc=$?
  [ $rc -eq 3 ] || fail "$algo: bad holdout exited $rc, expected 3"
  grep -q "validation label 7" "$work/err" || fail "$algo: bad holdout message: $(cat "$work/err")"
  [ "$(json_get "$work/$algo.bad.json" "j['status'], j['exit_code']")" = "error 3" ] ||
    fail "$algo: bad holdout metrics: $(cat "$work/$algo.bad.json")"
done

# Unusable options are recorded too (exit 2, before any work).
rc=0
"$bin" train --algo kldm -d "$work/train.svm" -o "$work/x.model" --rbf-width -1 \
  --metrics-json "$work/usage.json" > /dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "usage error exited $rc, expected 2"
[ "$(json_get "$work/usage.json" "j['status'], j['exit_code']")" = "error 2" ] ||
  fail "usage error metrics: $(cat "$work/usage.json")"

# Two jobs on one model: the second is refused while the first holds the lock, the model untouched.
cp "$work/kldm.model" "$work/held.model"
python3 -c "
import fcntl, sys, time
f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[2], 'w').close()
time.sleep(30)" "$work/held.model.lock" "$work/locked" &
for _ in $(seq 100); do [ -e "$work/locked" ] && break; sleep 0.05; done
[ -e "$work/locked" ] || fail "the test could not take the lock"
for algo in kldm tldm cmm; do
  rc=0
  "$bin" train --algo $algo -d "$work/train.svm" -o "$work/held.model" > /dev/null \
    2> "$work/err" || rc=$?
  [ $rc -eq 4 ] || fail "$algo: locked model: exit $rc, expected 4"
  grep -q "being written by another job" "$work/err" || fail "$algo: locked model message: $(cat "$work/err")"
  cmp -s "$work/kldm.model" "$work/held.model" || fail "$algo: the locked model was changed"
done

# A signal stops a solver at its next sweep: no model, the stop in --metrics-json, 128 + signal.
"$bin" gen --rows 1500 --features 30 --nnz 8 --seed 5 -o "$work/long.svm" > /dev/null
# (A tolerance no solve reaches: each would sweep for hours.)
for run in "kldm TERM 143 --tolerance 1e-300 --max-sweeps 100000000" \
  "tldm INT 130 --tolerance 1e-300 --max-sweeps 100000000" \
  "cmm TERM 143 --tolerance 1e-300 --max-sweeps 100000000 --max-rounds 1000"; do
  read -r algo sig code extra <<< "$run"
  [ $algo = cmm ] && awk '{ if (NR % 3 == 0) $1 = 0; print }' "$work/long.svm" > "$work/long.$algo.svm" \
    || cp "$work/long.svm" "$work/long.$algo.svm"
  "$bin" train --algo $algo -d "$work/long.$algo.svm" -o "$work/stopped.model" $extra --threads 2 \
    --metrics-json "$work/stopped.json" > /dev/null 2> "$work/err" &
  pid=$!
  for _ in $(seq 200); do grep -q "^kernel" "$work/err" && break; sleep 0.05; done
  sleep 1
  start=$(date +%s.%N)
  kill -$sig $pid
  rc=0
  wait $pid || rc=$?
  took=$(echo "$(date +%s.%N) - $start" | bc)
  [ $rc -eq $code ] || fail "$algo: SIG$sig: exit $rc, expected $code: $(cat "$work/err")"
  [ ! -e "$work/stopped.model" ] || fail "$algo: SIG$sig: a model was written"
  [ "$(json_get "$work/stopped.json" "j['status'], j['exit_code']")" = "interrupted $code" ] \
    || fail "$algo: SIG$sig: metrics $(cat "$work/stopped.json")"
  # Seconds, not the hours the solve would take (60: a sweep under the sanitizers on a loaded
  # machine took 20).
  [ "$(echo "$took < 60" | bc)" = 1 ] || fail "$algo: SIG$sig took $took s to stop"
done
echo "kernel_jobs: ok"
