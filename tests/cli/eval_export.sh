#!/usr/bin/env bash
# End-to-end: train on the bundled a9a, then predict / eval / export, their outputs and their errors.
# $1 = the polymargin binary; run from the repository root.
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_exit() {  # expect_exit CODE PATTERN -- command...
  local code=$1 pattern=$2; shift 3
  "$@" > "$tmp/out" 2> "$tmp/err"; local got=$?
  [ "$got" -eq "$code" ] || { cat "$tmp/err" >&2; fail "'$*' exited $got, expected $code"; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "'$*' did not say '$pattern'"; }
}

"$bin" convert data/a9a.zst -o "$tmp/a9a.shards" > /dev/null || fail "convert"
# a9a hyper-parameters from the small grid of docs/accuracy.md (tests/cli/train_test.cpp).
"$bin" train --algo ldm -d "$tmp/a9a.shards" -o "$tmp/ldm.model" -c 0.03 --lambda1-rel 1e-4 \
  --lambda2-rel 1e-2 --seed 3 > /dev/null \
  || fail "train ldm"
"$bin" train --algo svm -d "$tmp/a9a.shards" -o "$tmp/svm.model" -c 0.03 --seed 3 > /dev/null \
  || fail "train svm"

# eval --json: documented snake_case keys, accuracy in the expected range.
"$bin" eval -m "$tmp/ldm.model" -d data/a9a.t.zst --json > "$tmp/eval.json" || fail "eval --json"
for key in rows accuracy error_rate auc margin_mean margin_variance confusion true_positives; do
  grep -q "\"$key\"" "$tmp/eval.json" || fail "eval --json lacks $key"
done
grep -q '"rows": 16281' "$tmp/eval.json" || fail "eval saw the wrong number of rows"
acc=$(sed -n 's/.*"accuracy": \([0-9.]*\).*/\1/p' "$tmp/eval.json")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "LDM accuracy on a9a.t is $acc < 0.85"

# Two models side by side with the margin distribution as CSV and SVG.
"$bin" eval -m "$tmp/svm.model" -m "$tmp/ldm.model" -d data/a9a.t.zst \
  --margins "$tmp/m.csv" --plot "$tmp/m.svg" > "$tmp/table" || fail "eval two models"
[ "$(grep -c 'accuracy' "$tmp/table")" -eq 2 ] || fail "eval table should list two models"
[ "$(wc -l < "$tmp/m.csv")" -eq 202 ] || fail "margins csv should have a header and 201 rows"
head -1 "$tmp/m.csv" | grep '^margin,svm:.*,ldm:' > /dev/null || fail "margins csv header"
[ "$(grep -c '<polyline' "$tmp/m.svg")" -eq 2 ] || fail "plot should draw two curves"
tail -1 "$tmp/m.svg" | grep '</svg>' > /dev/null || fail "plot is not a complete SVG"

# predict: one line per row, in file order, labels from the model's label map; agrees with eval.
"$bin" predict -m "$tmp/ldm.model" -d data/a9a.t.zst -o "$tmp/scores" 2> /dev/null || fail "predict"
[ "$(wc -l < "$tmp/scores")" -eq 16281 ] || fail "predict row count"
correct=$(paste -d' ' <(zstd -dc data/a9a.t.zst | cut -d' ' -f1) "$tmp/scores" |
  awk '{ if (($1 > 0) == ($2 > 0)) c++ } END { print c }')
awk -v c="$correct" -v a="$acc" 'BEGIN { exit !(c / 16281 - a < 1e-9 && a - c / 16281 < 1e-9) }' \
  || fail "predict labels disagree with eval accuracy ($correct correct vs $acc)"
# The same data as text and as shards score identically.
"$bin" predict -m "$tmp/ldm.model" -d "$tmp/a9a.shards" > "$tmp/scores.train.shards" 2> /dev/null
"$bin" predict -m "$tmp/ldm.model" -d data/a9a.zst > "$tmp/scores.train.text" 2> /dev/null
cmp -s "$tmp/scores.train.shards" "$tmp/scores.train.text" || fail "text and shard scores differ"

# -o -: standard output, not a file named '-'.
data_dir=$PWD/data
(cd "$tmp" && "$bin" predict -m "$tmp/ldm.model" -d "$data_dir/a9a.t.zst" -o - 2> /dev/null | head -3 > "$tmp/dash.out")
[ "$(wc -l < "$tmp/dash.out")" = 3 ] && [ ! -e "$tmp/-" ] || fail "predict -o - did not write to stdout"

# export: text and JSON.
"$bin" export -m "$tmp/ldm.model" --format json -o "$tmp/model.json" || fail "export json"
grep -q '"algorithm": "ldm"' "$tmp/model.json" || fail "export json algorithm"
"$bin" export -m "$tmp/ldm.model" --format text | grep '^algorithm ldm' > /dev/null || fail "export text"
# A normalised model's JSON holds what its scores need: w·(s∘x)/‖s∘x‖ + bias, recomputed from the
# export alone on held-out rows, equals predict's scores.
zstd -dc data/a9a.t.zst | head -200 > "$tmp/few.svm"
"$bin" train -d data/a9a.zst -o "$tmp/l2.model" --normalize l2 --epochs 1 2> /dev/null \
  || fail "train --normalize l2"
"$bin" export -m "$tmp/l2.model" --format json -o "$tmp/l2.json" || fail "export json (l2)"
"$bin" predict -m "$tmp/l2.model" -d "$tmp/few.svm" 2> /dev/null | cut -d' ' -f2 > "$tmp/l2.scores"
jq -r '(.weights | to_entries[] | "w \(.key) \(.value)"), (.scale | to_entries[] | "s \(.key) \(.value)"),
       "b \(.bias_value * .bias_weight)"' "$tmp/l2.json" > "$tmp/l2.table"
awk 'NR == FNR { if ($1 == "w") w[$2] = $3; else if ($1 == "s") s[$2] = $3; else b = $2; next }
     { n = 0; d = 0
       for (i = 2; i <= NF; i++) { split($i, kv, ":"); x = kv[2] * s[kv[1]]; n += x * x; d += w[kv[1]] * x }
       print (n > 0 ? d / sqrt(n) : 0) + b }' "$tmp/l2.table" "$tmp/few.svm" > "$tmp/l2.recomputed"
paste "$tmp/l2.scores" "$tmp/l2.recomputed" | awk '{ e = $1 - $2; if (e < 0) e = -e; if (e > 1e-4 * (1 + ($1 < 0 ? -$1 : $1))) bad++ }
  END { exit !(NR == 200 && bad == 0) }' || fail "the l2 model's JSON export does not give predict's scores"

# Errors: each a clear message, the documented exit code, and no output file left behind.
printf 'not a model' > "$tmp/bogus.model"
expect_exit 3 "$tmp/bogus.model" -- "$bin" eval -m "$tmp/bogus.model" -d data/a9a.t.zst
head -c 100 "$tmp/ldm.model" > "$tmp/truncated.model"
expect_exit 3 "truncated.model" -- "$bin" predict -m "$tmp/truncated.model" -d data/a9a.t.zst -o "$tmp/p"
[ ! -e "$tmp/p" ] || fail "predict left an output behind after an error"
expect_exit 4 "missing.model" -- "$bin" eval -m "$tmp/missing.model" -d data/a9a.t.zst
expect_exit 2 "format" -- "$bin" export -m "$tmp/ldm.model" --format yaml
printf '2 1:1\n1 3:1\n' > "$tmp/multi.svm"
expect_exit 3 "not one of the model's labels" -- "$bin" eval -m "$tmp/ldm.model" -d "$tmp/multi.svm"
printf -- '-1 0:1 3:1\n' > "$tmp/zero.svm"
expect_exit 3 "zero.svm:1" -- "$bin" eval -m "$tmp/ldm.model" -d "$tmp/zero.svm"
# Features beyond the model are ignored and reported.
printf -- '-1 3:1 500:1\n+1 5:1\n' > "$tmp/wide.svm"
"$bin" eval -m "$tmp/ldm.model" -d "$tmp/wide.svm" --json > "$tmp/wide.json" || fail "eval wide"
grep -q '"ignored_nonzeros": 1' "$tmp/wide.json" || fail "ignored features not counted"
# So is id 0 of shards converted 0-based, scored by a 1-based model (as text it is refused above).
"$bin" convert "$tmp/zero.svm" -o "$tmp/zero.shards" --index-base 0 > /dev/null 2>&1 ||
  fail "convert --index-base 0"
"$bin" eval -m "$tmp/ldm.model" -d "$tmp/zero.shards" --json > "$tmp/zero.json" || fail "eval zero"
grep -q '"ignored_nonzeros": 1' "$tmp/zero.json" || fail "id 0 of a 1-based model not counted"
# A config file gives the same model as the same options on the command line.
"$bin" train --config configs/a9a-ldm.conf -o "$tmp/cfg.model" --seed 3 > /dev/null 2>&1 || fail "train --config"
"$bin" train --algo ldm -d data/a9a.zst -o "$tmp/flags.model" -c 10 --epochs 5 --scale maxabs --seed 3 \
  > /dev/null 2>&1 || fail "train with flags"
"$bin" export -m "$tmp/cfg.model" --format text | grep -v '^config' > "$tmp/cfg.txt"
"$bin" export -m "$tmp/flags.model" --format text | grep -v '^config' > "$tmp/flags.txt"
cmp -s "$tmp/cfg.txt" "$tmp/flags.txt" || fail "config file and flags trained different models"
# A key of several values is given once a line: two data files, two models to compare.
zstd -dc data/a9a.t.zst > "$tmp/a9a.t.svm"
head -3000 "$tmp/a9a.t.svm" > "$tmp/part1.svm"
sed -n 3001,6000p "$tmp/a9a.t.svm" > "$tmp/part2.svm"
printf 'data = %s\ndata = %s\noutput = %s\nseed = 5\n' "$tmp/part1.svm" "$tmp/part2.svm" \
  "$tmp/two.model" > "$tmp/two.conf"
"$bin" train --config "$tmp/two.conf" > /dev/null 2>&1 || fail "train --config with two data lines"
"$bin" train -d "$tmp/part1.svm" "$tmp/part2.svm" -o "$tmp/two.flags.model" --seed 5 \
  > /dev/null 2>&1 || fail "train on two files"
cmp -s "$tmp/two.model" "$tmp/two.flags.model" || fail "two data lines trained another model"
printf 'model = %s\nmodel = %s\ndata = %s\n' "$tmp/two.model" "$tmp/ldm.model" \
  "$tmp/part2.svm" > "$tmp/models.conf"
"$bin" eval --config "$tmp/models.conf" --json > "$tmp/models.json" || fail "eval --config, two models"
[ "$(grep -c '"accuracy"' "$tmp/models.json")" = 2 ] || fail "eval --config compared $(cat "$tmp/models.json")"
# File names in a config file are relative to its folder, whatever the working folder: the
# shipped configs/a9a-ldm.conf from another folder, and a config beside its data and outputs.
(cd "$tmp" && "$bin" train --config "$OLDPWD/configs/a9a-ldm.conf" -o away.model --seed 3 \
  > /dev/null 2>&1) || fail "train --config configs/a9a-ldm.conf from another folder"
"$bin" export -m "$tmp/away.model" --format text | grep -v '^config' | cmp -s - "$tmp/cfg.txt" ||
  fail "the config read from another folder trained another model"
mkdir "$tmp/job"
cp "$tmp/part1.svm" "$tmp/job/"
printf 'data = part1.svm
output = out/m.model
metrics-json = out/m.json
seed = 5
' \
  > "$tmp/job/job.conf"
mkdir "$tmp/job/out"
"$bin" train --config "$tmp/job/job.conf" > /dev/null 2>&1 || fail "train --config with names beside it"
[ -s "$tmp/job/out/m.model" ] && [ -s "$tmp/job/out/m.json" ] ||
  fail "a config's output names were not taken from its folder"
"$bin" eval -m "$tmp/job/out/m.model" -d "$tmp/job/part1.svm" > /dev/null 2>&1 ||
  fail "the model of a config with relative names"
printf 'model = out/m.model
data = part1.svm
' > "$tmp/job/eval.conf"
"$bin" eval --config "$tmp/job/eval.conf" --json | grep -q '"accuracy"' ||
  fail "eval --config with names beside it"
# Standard output that cannot take the output (a full disk under `> file`): exit 4, said.
if [ -w /dev/full ]; then
  for cmd in "predict -m $tmp/ldm.model -d data/a9a.t.zst" "eval -m $tmp/ldm.model -d data/a9a.t.zst --json" \
    "export -m $tmp/ldm.model --format json" "--help" "--version" "train --help"; do
    rc=0
    # shellcheck disable=SC2086
    "$bin" $cmd > /dev/full 2> "$tmp/full.err" || rc=$?
    [ "$rc" = 4 ] && grep -q "cannot write standard output" "$tmp/full.err" ||
      fail "$cmd > /dev/full: exit $rc, $(cat "$tmp/full.err")"
  done
  # The summary lost: the metrics file says so, not "ok".
  rc=0
  "$bin" train -d data/a9a.t.zst -o "$tmp/full.model" --epochs 1 --json --metrics-json "$tmp/full.json" \
    > /dev/full 2> "$tmp/full.err" || rc=$?
  [ "$rc" = 4 ] || fail "train --json > /dev/full: exit $rc"
  grep -q '"status": "error"' "$tmp/full.json" && grep -q '"exit_code": 4' "$tmp/full.json" ||
    fail "train --json > /dev/full recorded: $(cat "$tmp/full.json")"
fi
# predict streams: its peak memory does not grow with the rows (it held ~45 bytes a row), to a file
# or to standard output; eval of a binary model holds 9 bytes a row (it held 33).
if [ -x /usr/bin/time ]; then
  for rows in 100000 900000; do
    "$bin" gen --rows $rows --features 50 --nnz 5 --seed 4 -o "$tmp/g$rows.shards" > /dev/null 2>&1 ||
      fail "gen $rows"
    /usr/bin/time -f %M -o "$tmp/rss.file.$rows" "$bin" predict -m "$tmp/ldm.model" \
      -d "$tmp/g$rows.shards" -o "$tmp/p$rows" 2> /dev/null || fail "predict $rows rows"
    /usr/bin/time -f %M -o "$tmp/rss.stdout.$rows" "$bin" predict -m "$tmp/ldm.model" \
      -d "$tmp/g$rows.shards" 2> /dev/null | cmp -s - "$tmp/p$rows" || fail "predict to stdout"
    /usr/bin/time -f %M -o "$tmp/rss.eval.$rows" "$bin" eval -m "$tmp/ldm.model" \
      -d "$tmp/g$rows.shards" > /dev/null 2>&1 || fail "eval $rows rows"
  done
  [ "$(wc -l < "$tmp/p900000")" = 900000 ] || fail "predict wrote $(wc -l < "$tmp/p900000") lines"
fi
# (Under a sanitizer the peak holds its shadow memory and its quarantine of freed blocks.)
if [ -x /usr/bin/time ] && [ -z "${POLYMARGIN_SANITIZE:-}" ]; then
  for to in file stdout; do
    grown=$(($(tail -1 "$tmp/rss.$to.900000") - $(tail -1 "$tmp/rss.$to.100000")))
    [ "$grown" -lt 10000 ] || fail "predict to $to: 800,000 more rows took $grown KiB more"
  done
  grown=$(($(tail -1 "$tmp/rss.eval.900000") - $(tail -1 "$tmp/rss.eval.100000")))
  [ "$grown" -lt 16000 ] || fail "eval: 800,000 more rows took $grown KiB more (9 bytes a row: 7,000)"
fi
# A model is held once while it loads, plus the array in hand (the whole file was read, then each
# array copied out of it, then converted: twice the model): a CPM of two 40 MB sides loads within
# 1.6 times its bytes above one of a few kilobytes.
if [ -x /usr/bin/time ] && [ -z "${POLYMARGIN_SANITIZE:-}" ]; then
  "$bin" gen --model polytope --rows 400 --features 100 --nnz 5 --seed 8 -o "$tmp/narrow.svm" \
    > /dev/null 2>&1 || fail "gen narrow"
  { cat "$tmp/narrow.svm"; echo "1 2000000:1"; } > "$tmp/wide.svm"
  for set in narrow wide; do
    "$bin" train --algo cpm -k 5 -d "$tmp/$set.svm" -o "$tmp/$set.cpm" > /dev/null 2>&1 ||
      fail "train cpm on $set"
    /usr/bin/time -f %M -o "$tmp/load.rss.$set" "$bin" predict -m "$tmp/$set.cpm" \
      -d "$tmp/narrow.svm" -o "$tmp/$set.pred" 2> /dev/null || fail "predict with the $set cpm"
  done
  model=$(stat -c %s "$tmp/wide.cpm")
  held=$((($(tail -1 "$tmp/load.rss.wide") - $(tail -1 "$tmp/load.rss.narrow")) * 1024))
  [ $((10 * held)) -le $((16 * model)) ] || fail "loading a $model-byte CPM held $held bytes"
  # A linear model's weights and scale are read straight into the model's vectors: 1.25 times its
  # bytes (they were read into buffers of their own, then copied: twice the model).
  { cat "$tmp/narrow.svm"; echo "1 6000000:1"; } > "$tmp/wide6.svm"
  for set in narrow wide6; do
    "$bin" train --scale maxabs -d "$tmp/$set.svm" -o "$tmp/$set.ldm" > /dev/null 2>&1 ||
      fail "train ldm on $set"
    /usr/bin/time -f %M -o "$tmp/load.rss.$set.ldm" "$bin" predict -m "$tmp/$set.ldm" \
      -d "$tmp/narrow.svm" -o "$tmp/$set.ldm.pred" 2> /dev/null || fail "predict with the $set ldm"
  done
  [ "$(wc -l < "$tmp/wide6.ldm.pred")" = 400 ] || fail "predict with the wide ldm"
  cat "$tmp/wide6.ldm" | "$bin" predict -m /dev/stdin -d "$tmp/narrow.svm" 2> /dev/null |
    cmp -s - "$tmp/wide6.ldm.pred" || fail "the wide ldm read from a pipe predicts otherwise"
  model=$(stat -c %s "$tmp/wide6.ldm")
  held=$((($(tail -1 "$tmp/load.rss.wide6.ldm") - $(tail -1 "$tmp/load.rss.narrow.ldm")) * 1024))
  [ $((100 * held)) -le $((125 * model)) ] || fail "loading a $model-byte linear model held $held bytes"
  # Text is converted before the model is loaded (its index base read from its header), so the
  # conversion's table of 4 bytes a feature id (up to id 6,000,000) and the model are not held at
  # once: predicting from the text peaks near predicting from its shards (0.3 MB above; 12 MB
  # before).
  "$bin" convert "$tmp/wide6.svm" -o "$tmp/wide6.shards" > /dev/null 2>&1 || fail "convert wide6"
  for from in wide6.svm wide6.shards; do
    /usr/bin/time -f %M -o "$tmp/text.rss.$from" "$bin" predict -m "$tmp/wide6.ldm" \
      -d "$tmp/$from" -o "$tmp/$from.pred" 2> /dev/null || fail "predict from $from"
  done
  cmp -s "$tmp/wide6.svm.pred" "$tmp/wide6.shards.pred" || fail "text and shards predict otherwise"
  above=$(($(tail -1 "$tmp/text.rss.wide6.svm") - $(tail -1 "$tmp/text.rss.wide6.shards")))
  [ "$above" -lt 6000 ] || fail "predicting from text peaked $above KiB above its shards"
  echo "predict from text: $above KiB above its shards"
fi
echo "eval/predict/export: all checks passed"
