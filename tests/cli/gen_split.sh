#!/usr/bin/env bash
# End to end: `polymargin gen` (text, zstd, gzip, stdout, shards) → `polymargin split`
# (train/test, folds) → counts; reproducibility by seed; bad options exit 2 with a message naming
# the problem and leave no file behind.
# Usage: tests/cli/gen_split.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_gen_split.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
lines() { wc -l < "$1" | tr -d ' '; }
json_value() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }

small=(--like kdda --rows 3000 --features 50000)

# --- gen: text, compressed test split, thread-count invariance ------------------------------------
"$bin" gen "${small[@]}" --seed 5 -o "$work/a.svm" \
  --test-rows 5000 --test-output "$work/a.test.svm.zst" > "$work/gen.out"
[ "$(lines "$work/a.svm")" -eq 3000 ] || fail "gen wrote $(lines "$work/a.svm") rows, not 3000"
[ "$(zstd -dc "$work/a.test.svm.zst" | wc -l)" -eq 5000 ] ||
  fail "test split is not 5000 rows (two zstd frames)"
grep -q "3000 rows" "$work/gen.out" || fail "gen summary lacks the rows: $(cat "$work/gen.out")"
awk '{ for (i = 2; i <= NF; ++i) { split($i, kv, ":"); if (kv[1] < 1 || kv[1] > 50000) exit 1 } }' \
  "$work/a.svm" || fail "an index is outside [1, 50000]"
ls "$work" | grep -q tmp && fail "temporary files left behind"

"$bin" gen "${small[@]}" --seed 5 --threads 1 -o "$work/b.svm" > /dev/null
cmp -s "$work/a.svm" "$work/b.svm" || fail "same seed, other thread count: different bytes"
"$bin" gen "${small[@]}" --seed 6 -o "$work/c.svm" > /dev/null
cmp -s "$work/a.svm" "$work/c.svm" && fail "different seeds gave identical data"

"$bin" gen "${small[@]}" --seed 5 -o "$work/a.svm.gz" --json > "$work/gen.json"
[ "$(json_value "$work/gen.json" rows)" = 3000 ] || fail "gen --json rows: $(cat "$work/gen.json")"
gzip -dc "$work/a.svm.gz" | cmp -s - "$work/a.svm" || fail ".gz output differs from plain text"

"$bin" gen --rows 100 --features 1000 --model polytope --faces 3 -o - 2> "$work/stdout.err" \
  > "$work/stdout.svm"
[ "$(lines "$work/stdout.svm")" -eq 100 ] || fail "gen -o - wrote $(lines "$work/stdout.svm") rows"
grep -q "100 rows" "$work/stdout.err" || fail "with -o -, the summary belongs on stderr"

# --feature-order frequency: the same rows relabelled (the labels and row lengths agree), the low
# ids the frequent ones; a name gen does not know is refused.
"$bin" gen "${small[@]}" --seed 5 --feature-order frequency -o "$work/f.svm" --json > "$work/f.json"
grep -q '"feature_order": "frequency"' "$work/f.json" || fail "gen --json lacks the feature order"
cmp -s <(awk '{ print $1, NF }' "$work/a.svm") <(awk '{ print $1, NF }' "$work/f.svm") ||
  fail "--feature-order frequency changed the labels or the row lengths"
low() { awk '{ for (i = 2; i <= NF; ++i) { n++; if ($i + 0 <= 500) l++ } } END { print int(100 * l / n) }' "$1"; }
[ "$(low "$work/f.svm")" -ge 30 ] && [ "$(low "$work/a.svm")" -le 5 ] ||
  fail "ids <= 500 hold $(low "$work/f.svm") % (frequency) and $(low "$work/a.svm") % (scattered)"
"$bin" gen "${small[@]}" --feature-order hashed -o "$work/h.svm" 2> "$work/h.err" && fail "--feature-order hashed accepted"
grep -q "unknown feature order 'hashed'" "$work/h.err" || fail "bad --feature-order: $(cat "$work/h.err")"
[ -e "$work/h.svm" ] && fail "a refused gen left its output"
"$bin" gen "${small[@]}" --faces 7 -o "$work/h.svm" 2> "$work/h.err" && fail "--faces with a linear model accepted"
grep -q -- "--faces is for --model polytope" "$work/h.err" || fail "--faces, linear: $(cat "$work/h.err")"

# --- split: train/test ----------------------------------------------------------------------------
"$bin" split "$work/a.svm" --test-fraction 0.2 --seed 3 -o "$work/s" --json > "$work/split.json"
train=$(lines "$work/s.train.svm")
test=$(lines "$work/s.test.svm")
[ $((train + test)) -eq 3000 ] || fail "train $train + test $test != 3000"
[ "$(json_value "$work/split.json" train_rows)" = "$train" ] || fail "split --json train_rows"
[ "$(json_value "$work/split.json" test_rows)" = "$test" ] || fail "split --json test_rows"
[ "$test" -ge 450 ] && [ "$test" -le 750 ] || fail "test part has $test of 3000 rows at 0.2"
cmp -s <(sort "$work/a.svm") <(sort "$work/s.train.svm" "$work/s.test.svm") ||
  fail "train ∪ test is not the input"
"$bin" split "$work/a.svm" --test-fraction 0.2 --seed 3 -o "$work/t" > "$work/split.out"
cmp -s "$work/s.test.svm" "$work/t.test.svm" || fail "split is not deterministic by seed"
grep -q "$work/t.test.svm: $test rows" "$work/split.out" ||
  fail "split summary: $(cat "$work/split.out")"

# --- split: compressed input and output, folds ----------------------------------------------------
"$bin" split "$work/a.test.svm.zst" --compress zstd --seed 1 -o "$work/z" > /dev/null
[ "$(zstd -dc "$work/z.train.svm.zst" "$work/z.test.svm.zst" | wc -l)" -eq 5000 ] ||
  fail "zstd split lost rows"
"$bin" gen --rows 5000 --features 50000 -o "$work/m.svm.gz" > /dev/null  # two gzip members
"$bin" split "$work/m.svm.gz" --seed 1 -o "$work/m" > /dev/null
[ "$(cat "$work/m.train.svm" "$work/m.test.svm" | wc -l)" -eq 5000 ] ||
  fail "split of a two-member .gz lost rows"
"$bin" split "$work/a.svm" --folds 4 --seed 9 -o "$work/f" --json > "$work/folds.json"
total=0
for i in 0 1 2 3; do
  n=$(lines "$work/f.fold$i.svm")
  [ "$n" -ge 600 ] && [ "$n" -le 900 ] || fail "fold $i has $n of 3000 rows"
  total=$((total + n))
done
[ "$total" -eq 3000 ] || fail "folds hold $total rows, not 3000"
grep -q '"fold_rows"' "$work/folds.json" || fail "split --folds --json lacks fold_rows"
cmp -s <(sort "$work/a.svm") <(sort "$work"/f.fold?.svm) || fail "the folds are not the input"

# --- gen straight into shards ---------------------------------------------------------------------
"$bin" gen --rows 2000 --features 10000 --block-rows 256 -o "$work/d.shards" > /dev/null
[ -f "$work/d.shards/manifest.json" ] || fail "gen -o DIR.shards wrote no manifest"

# --- bad options: exit 2, a message, no output ----------------------------------------------------
expect_usage() {
  local pattern=$1
  shift
  local rc=0
  "$bin" "$@" > "$work/bad.out" 2> "$work/bad.err" || rc=$?
  [ "$rc" -eq 2 ] || fail "'$*' exited $rc, expected 2"
  grep -qi -- "$pattern" "$work/bad.err" ||
    fail "'$*' message lacks '$pattern': $(cat "$work/bad.err")"
}
expect_usage "rows" gen --rows 0 -o "$work/bad.svm"
expect_usage "rows" gen --rows -3 -o "$work/bad.svm"
expect_usage "model" gen --rows 10 --model cubic -o "$work/bad.svm"
expect_usage "noise" gen --rows 10 --noise 0.7 -o "$work/bad.svm"
expect_usage "test-output" gen --rows 10 --test-rows 5 -o "$work/bad.svm"
expect_usage "like" gen --like rcv1 -o "$work/bad.svm"
expect_usage "--test-fraction must be between 0 and 1" split "$work/a.svm" --test-fraction 1.5 -o "$work/bad"
expect_usage "--nnz must be between 1 and the feature count 10 (got 36)" gen --like kdda --rows 10 \
  --features 10 -o "$work/bad.svm"
expect_usage "folds" split "$work/a.svm" --folds 1 -o "$work/bad"
expect_usage "exclude" split "$work/a.svm" --folds 3 --test-fraction 0.1 -o "$work/bad"
ls "$work" | grep -q '^bad\.\(svm\|train\|fold\)' && fail "a refused command left an output file"

# A 0-based source: its parts keep the ids, and split says how to keep the base (and records it).
{ echo "1 0:1 3:1"; for i in $(seq 1 200); do echo "$((i % 2 * 2 - 1)) 2:1 3:$i"; done; } > "$work/zb.svm"
"$bin" split "$work/zb.svm" -o "$work/zb" --seed 2 --json > "$work/zb.json" 2> "$work/zb.err" ||
  fail "split of a 0-based file"
grep -q '"index_base": 0' "$work/zb.json" || fail "split --json lacks index_base 0: $(cat "$work/zb.json")"
grep -q 'train on them with --index-base 0' "$work/zb.err" || fail "no note on the 0-based source"
"$bin" split "$work/a.svm" -o "$work/ob" --json > "$work/ob.json" 2> "$work/ob.err" || fail "split"
grep -q '"index_base": 1' "$work/ob.json" && [ ! -s "$work/ob.err" ] || fail "a 1-based source: $(cat "$work/ob.err")"

echo "gen_split: ok"
