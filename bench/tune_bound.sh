#!/usr/bin/env bash
# bench/tune_bound.sh [BINARY]: how near bench/tune.sh's "best" any choice of a grid setting can come
# on the UCI half splits, measured beside `train --tune`, as one table.
#
# For each set and learner, SEEDS seeded half splits (default 10). On each split: `train --tune` on
# the training part, scored on the test part; then every setting that the searches of all the splits
# visited, each trained on the training part and scored on the test part. Columns, means over the
# splits, in test accuracy:
#   tune    `train --tune` (bench/tune.sh's "tune")
#   best    on each split, the best setting chosen on that split's own test part (bench/tune.sh's
#           "best", issue 20's target: tune within 0.3 points of it)
#   others  on each split, the setting with the best mean over the *other* splits' test parts: a
#           choice made on SEEDS - 1 times as many test rows of the same set as the split's own, so
#           close to the setting that is best on average (it even sees some of the split's own test
#           rows, which the other splits' test parts share). No choice made from the split's training
#           part alone is expected to do better, so best - others is the part of best's lead that no
#           selection method can close: the selection noise of the split's test part.
#   cell    the one setting with the best mean over all the splits (a single grid cell per set,
#           chosen with every test part in view)
# The last line gives the means over the rows. Environment: DATA (default ../shared/data), SEEDS
# (default "1 2 ... 10"), ALGOS ("ldm svm cpm"), SETS (UCI file names without .libsvm; default
# all), TUNE_FLAGS (more flags for the --tune runs). Run from the repository root.
set -uo pipefail
bin=${1:-build/polymargin}
data=${DATA:-../shared/data}
seeds=${SEEDS:-"1 2 3 4 5 6 7 8 9 10"}
algos=${ALGOS:-"ldm svm cpm"}
command -v jq > /dev/null || { echo "bench/tune_bound.sh needs jq" >&2; exit 1; }
[ -d "$data/uci" ] || { echo "bench/tune_bound.sh: no data in $data/uci" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# accuracy TRAIN TEST FLAGS...: the test accuracy of one training run (nan when it fails).
accuracy() {
  local train=$1 test=$2
  shift 2
  "$bin" train -d "$train" --validation "$test" -o "$work/model" --json --threads 2 "$@" \
    2> "$work/err" | jq .validation.accuracy \
    || { echo "bench/tune_bound.sh: train $* on $train failed: $(tail -2 "$work/err")" >&2; echo nan; }
}

# From lines "SEED<TAB>SETTING<TAB>ACCURACY" (every setting on every seed) and lines
# "SEED<TAB>tune<TAB>ACCURACY": "tune best others cell", each a mean over the seeds.
summarise() {
  awk -F'\t' '
    $2 == "tune" { tune[$1] = $3; next }
    { acc[$1, $2] = $3; seed[$1] = 1; setting[$2] = 1; sum[$2] += $3 }
    END {
      n = 0
      for (s in seed) n++
      for (s in seed) {
        best = -1; pick = ""; pick_mean = -1
        for (g in setting) {
          if (acc[s, g] > best) best = acc[s, g]
          other = (sum[g] - acc[s, g]) / (n - 1)
          if (other > pick_mean || (other == pick_mean && g < pick)) { pick_mean = other; pick = g }
        }
        t += tune[s]; b += best; o += acc[s, pick]
      }
      cell = -1
      for (g in setting) if (sum[g] / n > cell) cell = sum[g] / n
      printf "%.4f %.4f %.4f %.4f\n", t / n, b / n, o / n, cell
    }'
}

printf "%-30s %-4s %5s %8s %7s %7s %7s %7s %7s %7s\n" set algo seeds settings tune best others cell \
  "Δtune" "Δothers"
rows=0 dt_sum=0 do_sum=0 dc_sum=0 met=0
for f in "$data"/uci/*.libsvm; do
  name=$(basename "$f" .libsvm)
  [ -z "${SETS:-}" ] || [[ " $SETS " == *" $name "* ]] || continue
  labels=$(awk 'NF { print $1 }' "$f" | sort -u | wc -l)
  for algo in $algos; do
    if [ "$labels" -gt 2 ] && [ "$algo" != cpm ]; then  # the linear learners are binary
      continue
    fi
    : > "$work/scores"
    : > "$work/settings"
    for seed in $seeds; do
      "$bin" split "$f" --test-fraction 0.5 --seed "$seed" -o "$work/s$seed" > /dev/null 2>&1
      "$bin" train --algo "$algo" -d "$work/s$seed.train.svm" --validation "$work/s$seed.test.svm" \
        -o "$work/model" --tune --json --threads 2 ${TUNE_FLAGS:-} > "$work/tune.json" 2> "$work/err" \
        || { echo "bench/tune_bound.sh: --tune on $name seed $seed failed: $(tail -2 "$work/err")" >&2; exit 1; }
      printf '%s\ttune\t%s\n' "$seed" "$(jq .validation.accuracy "$work/tune.json")" >> "$work/scores"
      jq -r '.tune.settings[].setting | to_entries | map("--\(.key) \(.value)") | join(" ")' \
        "$work/tune.json" >> "$work/settings"
    done
    sort -u -o "$work/settings" "$work/settings"
    while read -r flags; do
      for seed in $seeds; do
        printf '%s\t%s\t%s\n' "$seed" "$flags" \
          "$(accuracy "$work/s$seed.train.svm" "$work/s$seed.test.svm" --algo "$algo" $flags)" \
          >> "$work/scores"
      done
    done < "$work/settings"
    read -r t b o c <<< "$(summarise < "$work/scores")"
    read -r dt do dc <<< "$(awk -v t="$t" -v b="$b" -v o="$o" -v c="$c" \
      'BEGIN { printf "%.2f %.2f %.2f", 100 * (t - b), 100 * (o - b), 100 * (c - b) }')"
    printf "%-30s %-4s %5s %8s %7s %7s %7s %7s %+7.2f %+7.2f\n" "$name" "$algo" "$(wc -w <<< "$seeds")" \
      "$(wc -l < "$work/settings")" "$t" "$b" "$o" "$c" "$dt" "$do"
    rows=$((rows + 1))
    awk -v x="$do" 'BEGIN { exit !(x >= -0.3) }' && met=$((met + 1))
    read -r dt_sum do_sum dc_sum <<< "$(awk -v a="$dt_sum" -v b="$do_sum" -v c="$dc_sum" -v x="$dt" \
      -v y="$do" -v z="$dc" 'BEGIN { print a + x, b + y, c + z }')"
  done
done
[ "$rows" -gt 0 ] && awk -v r="$rows" -v t="$dt_sum" -v o="$do_sum" -v c="$dc_sum" -v m="$met" 'BEGIN {
  printf "mean over the %d rows: tune %+.2f points from best, others %+.2f, cell %+.2f; others within 0.3 points of best on %d rows\n",
    r, t / r, o / r, c / r, m }'
