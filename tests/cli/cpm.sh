#!/usr/bin/env bash
# `train --algo cpm` at the shell, then eval / predict / export of the model: --json keys, the
# assignment statistics of eval, the same model whatever --threads, corrupt model files refused,
# and every bad input refused with its exit code, a message, and no model file left behind.
# Usage: tests/cli/cpm.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_cpm.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
json_value() { sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"]*\)\"\{0,1\},\{0,1\}$/\1/p" "$1" | head -1; }
# expect CODE FRAGMENT ARGS...: `train --algo cpm ARGS` exits CODE, says FRAGMENT, writes nothing.
expect() {
  local code=$1 fragment=$2
  shift 2
  local rc=0
  "$bin" train --algo cpm "$@" -o "$work/out/m" > "$work/out.log" 2> "$work/err.log" || rc=$?
  [ "$rc" -eq "$code" ] || fail "train $* exited $rc, expected $code: $(cat "$work/err.log")"
  grep -q -- "$fragment" "$work/err.log" ||
    fail "train $*: stderr lacks '$fragment': $(cat "$work/err.log")"
  [ -z "$(ls -A "$work/out")" ] || fail "train $* left files: $(ls "$work/out")"
}
mkdir -p "$work/out"

"$bin" convert data/a9a.zst -o "$work/a9a.shards" > /dev/null
# --- train, JSON summary ----------------------------------------------------------------------
"$bin" train --algo cpm -d "$work/a9a.shards" -o "$work/a9a.cpm" -k 5 -c 0.01 --epochs 5 \
  --entropy 2 --seed 3 --threads 2 --json > "$work/train.json" 2> "$work/train.err"
for key in rows features nnz faces iterations passes c entropy_perplexity entropy_nats cost_ratio \
  sides precision memory_needed_bytes train_seconds steps_per_second side_details \
  assignment_perplexity adjusted_assignments model_path; do
  grep -q "\"$key\":" "$work/train.json" || fail "--json lacks $key: $(cat "$work/train.json")"
done
[ "$(json_value "$work/train.json" rows)" = 32561 ] || fail "rows: $(cat "$work/train.json")"
[ "$(json_value "$work/train.json" iterations)" = 162805 ] || fail "T = 5 epochs x 32561 rows"
grep -q '"precision": "double"' "$work/train.json" || fail "double accumulators expected"
grep -q "^precision double: weights" "$work/train.err" || fail "precision not reported at start"

# --- the same model whatever --threads ------------------------------------------------------
"$bin" train --algo cpm -d "$work/a9a.shards" -o "$work/a9a.t1.cpm" -k 5 -c 0.01 --epochs 5 \
  --entropy 2 --seed 3 --threads 1 > /dev/null 2>&1
cmp -s "$work/a9a.cpm" "$work/a9a.t1.cpm" || fail "--threads 1 and 2 give different model files"

# --- eval: accuracy and the assignment statistics ---------------------------------------------
"$bin" eval -m "$work/a9a.cpm" -d data/a9a.t.zst --json > "$work/eval.json"
acc=$(sed -n 's/.*"accuracy": \([0-9.]*\).*/\1/p' "$work/eval.json")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.84) }' || fail "CPM accuracy on a9a.t is $acc"
for key in assignment_entropy_plus assignment_entropy_minus face_share_plus face_share_minus \
  assignment_perplexity_plus; do
  grep -q "\"$key\"" "$work/eval.json" || fail "eval --json lacks details.$key"
done
"$bin" eval -m "$work/a9a.cpm" -d data/a9a.t.zst | grep "face_share_plus" > /dev/null || fail "eval text"

# predict: one line per row; its labels agree with eval's accuracy.
"$bin" predict -m "$work/a9a.cpm" -d data/a9a.t.zst -o "$work/scores" 2> /dev/null
[ "$(wc -l < "$work/scores")" -eq 16281 ] || fail "predict row count"
correct=$(paste -d' ' <(zstd -dc data/a9a.t.zst | cut -d' ' -f1) "$work/scores" |
  awk '{ if (($1 > 0) == ($2 > 0)) c++ } END { print c }')
awk -v c="$correct" -v a="$acc" 'BEGIN { d = c / 16281 - a; exit !(d < 1e-9 && d > -1e-9) }' ||
  fail "predict disagrees with eval ($correct correct vs $acc)"

# export: text and JSON.
"$bin" export -m "$work/a9a.cpm" --format json -o "$work/model.json"
grep -q '"algorithm": "cpm"' "$work/model.json" || fail "export json algorithm"
grep -q '"intercepts"' "$work/model.json" || fail "export json intercepts"
"$bin" export -m "$work/a9a.cpm" --format text > "$work/model.txt"
grep -q '^algorithm cpm' "$work/model.txt" || fail "export text"
[ "$(grep -c '^machine 1 vs -1 outer' "$work/model.txt")" -eq 2 ] || fail "export text: two sides"

# --- single-sided, hashed, float: still a working model ------------------------------------------
"$bin" train --algo cpm -d "$work/a9a.shards" -o "$work/hashed.cpm" -k 3 -c 0.01 --epochs 3 \
  --sides outer=-1 --hash-bits 8 --precision float --json > "$work/hashed.json" 2> /dev/null
grep -q '"precision": "float"' "$work/hashed.json" || fail "--precision float ignored"
"$bin" eval -m "$work/hashed.cpm" -d data/a9a.t.zst --json > "$work/hashed.eval"
acc=$(sed -n 's/.*"accuracy": \([0-9.]*\).*/\1/p' "$work/hashed.eval")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "hashed single-sided accuracy $acc"
grep -q '"assignment_entropy_minus"' "$work/hashed.eval" || fail "single side details"
grep -q '"assignment_entropy_plus"' "$work/hashed.eval" && fail "outer=-1 has no plus side"

# --- corrupt and truncated model files are refused --------------------------------------------
cp "$work/a9a.cpm" "$work/bad.cpm"
printf '\x55' | dd of="$work/bad.cpm" bs=1 seek=600 conv=notrunc 2> /dev/null
rc=0
"$bin" eval -m "$work/bad.cpm" -d data/a9a.t.zst > /dev/null 2> "$work/err.log" || rc=$?
[ "$rc" -eq 3 ] || fail "corrupt model: exit $rc"
grep -q "checksum" "$work/err.log" || fail "corrupt model: $(cat "$work/err.log")"
head -c 500 "$work/a9a.cpm" > "$work/short.cpm"
rc=0
"$bin" predict -m "$work/short.cpm" -d data/a9a.t.zst > /dev/null 2> "$work/err.log" || rc=$?
[ "$rc" -eq 3 ] || fail "truncated model: exit $rc"
grep -q "truncated" "$work/err.log" || fail "truncated model: $(cat "$work/err.log")"

# --- bad input ----------------------------------------------------------------------------------
d=(-d "$work/a9a.shards")
expect 2 "faces K" "${d[@]}" -k 0
expect 2 "iterations (T) must be at least 1" "${d[@]}" --iterations 0
expect 2 "--epochs must be a positive number of passes (got 0)" "${d[@]}" --epochs 0
expect 2 "C) must be > 0" "${d[@]}" -c 0
expect 2 "C) must be > 0" "${d[@]}" -c -1
expect 2 "must be in \[1, K\]" "${d[@]}" -k 4 --entropy 5
expect 2 "must be in \[1, K\]" "${d[@]}" --entropy 0.5
expect 2 "exclude each other" "${d[@]}" --iterations 10 --epochs 2
expect 2 "epochs gives more SGD steps than 2^64 (T = 3.2561e+24)" "${d[@]}" --epochs 1e20
expect 2 "cost-ratio" "${d[@]}" --cost-ratio 0
expect 2 "sides" "${d[@]}" --sides triple
# a9a has 124 feature slots, fewer than hashing's least (2^10): the remedy is fewer faces.
expect 7 "use at most" "${d[@]}" -k 100000000 --iterations 1
# With --scale maxabs the table of every feature id's max |x| (and the model's copy) counts in the
# memory needed, whatever --hash-bits makes of the weights: 8 bytes a feature id.
printf '+1 1:1 16777216:2\n-1 2:1\n+1 3:1\n-1 4:1\n' > "$work/wide.svm"
needed() {
  "$bin" train --algo cpm -d "$work/wide.svm" -o "$work/wide.cpm" --hash-bits 10 --iterations 10 \
    --json "$@" 2> /dev/null | jq .memory_needed_bytes
}
[ "$(( $(needed) - $(needed --scale none) ))" = $(( 8 * (16777216 + 1) )) ] \
  || fail "the max |x| table is not counted in the CPM's memory ($(needed) vs $(needed --scale none))"
zstd -dc data/a9a.zst > "$work/a9a.svm"
head -200 "$work/a9a.svm" | grep '^+1' > "$work/one_class.svm"
expect 3 "one class only" -d "$work/one_class.svm"
head -300 "$work/a9a.svm" | sed 's/^+1 /2 /' > "$work/two_classes.svm"
expect 3 "class 5 of --classes has no examples" -d "$work/two_classes.svm" --classes=-1,2,5
expect 3 "is not in --classes" -d "$work/two_classes.svm" --classes=-1
expect 2 "--classes names 2 twice" -d "$work/two_classes.svm" --classes=-1,2,2
# Into a file first: grep -q would stop reading at the match, and the rest of the help would meet
# a closed pipe (SIGPIPE, a failed pipeline).
"$bin" train --algo cpm --help > "$work/help.txt"
grep -q "Memory: K x (features + 1) weights per side" "$work/help.txt" ||
  fail "--help lacks the memory statement"

# --- one-vs-one over three classes ------------------------------------------------------------
# A 3-class set from a9a: -1 stays, +1 splits by feature 5 (age band) into 1 and 2.
awk '$1 == "+1" { $1 = ($0 ~ / 5:1/) ? 2 : 1 } { print }' "$work/a9a.svm" > "$work/three.svm"
"$bin" train --algo cpm -d "$work/three.svm" -o "$work/three.cpm" -k 3 -c 0.01 --epochs 3 \
  --classes=-1,1,2 --json > "$work/three.json" 2> /dev/null
grep -q '"machines": 3' "$work/three.json" || fail "3 classes need 3 machines"
"$bin" eval -m "$work/three.cpm" -d "$work/three.svm" --json > "$work/three.eval"
acc=$(sed -n 's/.*"accuracy": \([0-9.]*\).*/\1/p' "$work/three.eval" | head -1)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.75) }' || fail "one-vs-one accuracy $acc"
for key in pair_assignments assignment_entropy_mean_plus assignment_entropy_min_minus \
  assignment_perplexity_mean_plus; do
  grep -q "\"$key\"" "$work/three.eval" || fail "one-vs-one eval --json lacks details.$key"
done
[ "$(grep -o '"face_share_plus"' "$work/three.eval" | wc -l)" -eq 3 ] || fail "face shares of 3 pairs"
"$bin" train --algo cpm -d "$work/three.svm" -o "$work/three.t1.cpm" -k 3 -c 0.01 --epochs 3 \
  --classes=-1,1,2 --threads 1 > /dev/null 2>&1
cmp -s "$work/three.cpm" "$work/three.t1.cpm" || fail "one-vs-one depends on --threads"
# A three-way tie (each class wins one pairing: score 0.5) is broken by the row's content alone:
# not by whether its file stores values (a9a's are all 1: stored only beside a row with another
# value), nor by explicit zeros. Classes by row number: pairings that vote in circles.
awk '{ $1 = NR % 3 } { print }' "$work/a9a.svm" > "$work/circle.svm"
"$bin" train --algo cpm -d "$work/circle.svm" -o "$work/circle.cpm" -k 3 -c 0.01 --epochs 1 \
  > /dev/null 2>&1 || fail "train on three classes by row number"
"$bin" predict -m "$work/circle.cpm" -d "$work/circle.svm" -o "$work/circle.pred" 2> /dev/null
paste -d' ' "$work/circle.pred" "$work/circle.svm" | awk '$2 == 0.5 && n++ < 300' |
  cut -d' ' -f3- > "$work/ties.svm"
[ "$(wc -l < "$work/ties.svm")" -ge 20 ] || fail "only $(wc -l < "$work/ties.svm") tied rows"
{ cat "$work/ties.svm"; echo "1 1:2"; } > "$work/ties.values.svm"
sed 's/$/ 124:0/' "$work/ties.svm" > "$work/ties.zeros.svm"
"$bin" predict -m "$work/circle.cpm" -d "$work/ties.svm" > "$work/ties.pred" 2> /dev/null
"$bin" predict -m "$work/circle.cpm" -d "$work/ties.values.svm" 2> /dev/null |
  sed '$d' | cmp -s - "$work/ties.pred" ||
  fail "a tie broken otherwise beside a row with a value other than 1"
"$bin" predict -m "$work/circle.cpm" -d "$work/ties.zeros.svm" 2> /dev/null |
  cmp -s - "$work/ties.pred" || fail "a tie broken otherwise with an explicit zero in the row"
[ "$(cut -d' ' -f1 "$work/ties.pred" | sort -u | wc -l)" = 3 ] || fail "ties not spread over the classes"

echo "cpm: all checks passed"
