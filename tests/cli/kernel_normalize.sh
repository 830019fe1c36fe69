#!/usr/bin/env bash
# --normalize l2 for the regular-scale learners (kldm, tldm, cmm) on generated data whose class is
# the direction of a row and whose length is noise (1 to 1000): trained, recorded in the model, and
# applied by the model when it scores (eval's accuracy on the training rows equals train's own).
# $1 = the polymargin binary.
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Points at angle a in (0, pi), length 1..1000: +1 inside the cone pi/3 < a < 2pi/3, -1 outside
# (0.05 rad kept clear of each edge). Raw, the cone is not linearly separable; on the unit circle
# (after the max-abs scaling, a linear map that keeps it a cone) it is an arc cut off by a line.
awk 'BEGIN { srand(5); n = 0; pi = 3.14159265
  while (n < 300) { a = rand() * pi
    if ((a > pi/3 - 0.05 && a < pi/3 + 0.05) || (a > 2*pi/3 - 0.05 && a < 2*pi/3 + 0.05)) continue
    r = 1 + 999 * rand()
    printf "%d 1:%.6f 2:%.6f\n", (a > pi/3 && a < 2*pi/3 ? 1 : -1), r * cos(a), r * sin(a); n++ } }' \
  > "$tmp/dir.svm"
for algo in kldm tldm cmm; do
  for n in none l2; do
    bias=(); [ "$algo" = kldm ] && bias=(--bias 1)
    "$bin" train --algo "$algo" --kernel linear "${bias[@]}" -d "$tmp/dir.svm" -o "$tmp/$algo.$n" \
      --normalize "$n" --json > "$tmp/$algo.$n.json" 2> "$tmp/err" \
      || fail "train $algo --normalize $n: $(cat "$tmp/err")"
    "$bin" eval -m "$tmp/$algo.$n" -d "$tmp/dir.svm" --json > "$tmp/$algo.$n.eval" \
      || fail "eval $algo $n"
  done
  train=$(jq .train_accuracy "$tmp/$algo.l2.json")
  eval=$(jq .accuracy "$tmp/$algo.l2.eval")
  awk -v a="$train" -v b="$eval" 'BEGIN { d = a - b; exit !(d < 1e-12 && -d < 1e-12) }' \
    || fail "$algo: eval scores otherwise than training ($eval vs train $train): normalisation not applied"
  [ "$(jq -r .normalize "$tmp/$algo.l2.json")" = l2 ] || fail "$algo --json lacks normalize l2"
  "$bin" export -m "$tmp/$algo.l2" --format json -o "$tmp/$algo.export" || fail "export $algo"
  [ "$(jq -r .config.normalize "$tmp/$algo.export")" = l2 ] || fail "$algo model lacks normalize"
  "$bin" export -m "$tmp/$algo.none" --format json -o "$tmp/$algo.export.none" || fail "export"
  [ "$(jq -r '.config.normalize // "absent"' "$tmp/$algo.export.none")" = absent ] \
    || fail "$algo: a model without --normalize records it (its bytes would change)"
  echo "$algo: accuracy none $(jq .accuracy "$tmp/$algo.none.eval"), l2 $eval"
done
# On this data the direction is the class: normalised rows separate it (kldm, linear kernel, bias).
awk -v a="$(jq .accuracy "$tmp/kldm.l2.eval")" 'BEGIN { exit !(a >= 0.97) }' \
  || fail "kldm --normalize l2 accuracy below 0.97 on direction-only data"
# The export holds what scoring needs: the divisors (each feature's training max |x|) and the
# normalisation.
awk '{ for (i = 2; i <= NF; i++) { split($i, kv, ":"); v = kv[2] < 0 ? -kv[2] : kv[2]
       if (v > m[kv[1]]) m[kv[1]] = v } } END { printf "%.4f %.4f\n", m[1], m[2] }' "$tmp/dir.svm" > "$tmp/maxabs"
[ "$(jq -r '"\(.normalize) \(.maxabs["1"] * 1e4 | round / 1e4) \(.maxabs["2"] * 1e4 | round / 1e4)"' \
      "$tmp/kldm.export")" = "l2 $(cat "$tmp/maxabs")" ] \
  || fail "kldm export: normalize and divisors $(jq -c '[.normalize, .maxabs]' "$tmp/kldm.export"), data's $(cat "$tmp/maxabs")"
# A feature inside the model's range that the training rows never had counts for nothing (as in
# the linear models): feature 2 is absent from the training rows, a test row's 2:500 changes nothing.
sed 's/ 2:/ 3:/' "$tmp/dir.svm" > "$tmp/gap.svm"
head -3 "$tmp/gap.svm" > "$tmp/gap.test.svm"
awk '{ print $1, $2, "2:500", $3 }' "$tmp/gap.test.svm" > "$tmp/gap.extra.svm"
for algo in kldm tldm cmm; do
  "$bin" train --algo "$algo" -d "$tmp/gap.svm" -o "$tmp/gap.$algo" 2> /dev/null || fail "train $algo gap"
  cmp -s <("$bin" predict -m "$tmp/gap.$algo" -d "$tmp/gap.test.svm" 2> /dev/null) \
         <("$bin" predict -m "$tmp/gap.$algo" -d "$tmp/gap.extra.svm" 2> /dev/null) \
    || fail "$algo: a feature the training rows never had changed the scores"
done
expect_refusal() {
  "$bin" train --algo kldm -d "$tmp/dir.svm" -o "$tmp/x" --normalize l1 2> "$tmp/err"
  [ $? -eq 2 ] && grep -q -- "--normalize must be l2 or none" "$tmp/err" \
    || fail "--normalize l1 not refused: $(cat "$tmp/err")"
}
expect_refusal
echo "kernel_normalize: ok"
