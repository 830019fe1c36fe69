#!/usr/bin/env bash
# bench/tune.sh [BINARY]: `train --tune` and the plain defaults against the best grid cell chosen
# with the test set in view (issue 20's targets), as one table.
#
# For each data set and learner (LDM, SVM, CPM): `train --tune` on the training part, scored on the
# test part; every setting the search visited, each trained on the whole training part and scored
# on the test part ("best": the best of them, chosen looking at the test set); and `train` at its
# defaults. Targets: tune within 0.3 points of best, defaults within 2 points of it.
# Sets: a9a -> a9a.t, ijcnn1 -> ijcnn1.t, w8a (seeded half split) and the 21 UCI sets of
# $DATA/uci (seeded half splits, SEEDS of them; a UCI row is the mean over its seeds).
# Environment: DATA (default ../shared/data), SEEDS ("1 2 3"), ALGOS ("ldm svm cpm"),
# SETS (names to run, default all: a9a ijcnn1 w8a and the UCI file names without .libsvm),
# EPOCHS_CPM (the CPM's --epochs; default its own). Run from the repository root.
set -uo pipefail
bin=${1:-build/polymargin}
data=${DATA:-../shared/data}
seeds=${SEEDS:-"1 2 3"}
algos=${ALGOS:-"ldm svm cpm"}
command -v jq > /dev/null || { echo "bench/tune.sh needs jq" >&2; exit 1; }
[ -d "$data" ] || { echo "bench/tune.sh: no data in $data" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

extra() {  # extra ALGO: flags every run of ALGO gets
  if [ "$1" = cpm ] && [ -n "${EPOCHS_CPM:-}" ]; then echo "--epochs $EPOCHS_CPM"; fi
}

# accuracy ALGO TRAIN TEST FLAGS...: the test accuracy of one training run.
accuracy() {
  local algo=$1 train=$2 test=$3
  shift 3
  "$bin" train --algo "$algo" -d "$train" --validation "$test" -o "$work/model" --json --threads 2 \
    $(extra "$algo") "$@" 2> "$work/err" | jq .validation.accuracy \
    || { echo "bench/tune.sh: train --algo $algo $* on $train failed: $(tail -2 "$work/err")" >&2; echo nan; }
}

# one ALGO TRAIN TEST: "tune best default seconds" for one split.
one() {
  local algo=$1 train=$2 test=$3 start tuned best=0 a flags
  start=$(date +%s.%N)
  "$bin" train --algo "$algo" -d "$train" --validation "$test" -o "$work/model" --json --tune \
    --threads 2 $(extra "$algo") > "$work/tune.json" 2> "$work/err" \
    || { echo "bench/tune.sh: --tune --algo $algo on $train failed: $(tail -2 "$work/err")" >&2; echo "nan nan nan 0"; return; }
  local seconds
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  tuned=$(jq .validation.accuracy "$work/tune.json")
  while read -r flags; do
    a=$(accuracy "$algo" "$train" "$test" $flags)
    best=$(awk -v a="$a" -v b="$best" 'BEGIN { print (a > b ? a : b) }')
  done < <(jq -r '.tune.settings[].setting | to_entries | map("--\(.key) \(.value)") | join(" ")' \
             "$work/tune.json")
  echo "$tuned $best $(accuracy "$algo" "$train" "$test") $seconds"
}

printf "%-30s %-4s %5s %7s %7s %7s %7s %7s %6s  %s\n" set algo seeds tune best default \
  "Δtune" "Δdef" "tune s" verdict
misses=0 rows=0
report() {  # report NAME ALGO "tune best default seconds" lines (one per seed)
  local name=$1 algo=$2 lines=$3 line
  line=$(echo "$lines" | awk '{ t += $1; b += $2; d += $3; s += $4; n++ }
    END { printf "%d %.4f %.4f %.4f %.1f", n, t / n, b / n, d / n, s / n }')
  read -r n t b d s <<< "$line"
  local dt dd verdict=ok
  dt=$(awk -v t="$t" -v b="$b" 'BEGIN { printf "%+.2f", 100 * (t - b) }')
  dd=$(awk -v d="$d" -v b="$b" 'BEGIN { printf "%+.2f", 100 * (d - b) }')
  awk -v x="$dt" 'BEGIN { exit !(x < -0.3) }' && verdict="tune miss"
  awk -v x="$dd" 'BEGIN { exit !(x < -2) }' && verdict="${verdict/ok/}${verdict:+ }default miss"
  verdict=${verdict# }
  [ "$verdict" = ok ] || misses=$((misses + 1))
  rows=$((rows + 1))
  printf "%-30s %-4s %5s %7s %7s %7s %7s %7s %6s  %s\n" "$name" "$algo" "$n" "$t" "$b" "$d" "$dt" \
    "$dd" "$s" "$verdict"
}

wanted() { [ -z "${SETS:-}" ] || [[ " $SETS " == *" $1 "* ]]; }

for pair in "a9a:a9a/a9a:a9a/a9a.t" "ijcnn1:ijcnn1/ijcnn1.trn.bz2:ijcnn1/ijcnn1.tst.bz2"; do
  IFS=: read -r name train test <<< "$pair"
  wanted "$name" || continue
  [ -f "$data/$train" ] || { echo "skipped $name: $data/$train not found" >&2; continue; }
  for algo in $algos; do report "$name" "$algo" "$(one "$algo" "$data/$train" "$data/$test")"; done
done

half_split() {  # half_split FILE SEED: prints "TRAIN TEST"
  "$bin" split "$1" --test-fraction 0.5 --seed "$2" -o "$work/split" > /dev/null 2>&1
  echo "$work/split.train.svm $work/split.test.svm"
}

sets=()
wanted w8a && [ -f "$data/w8a/w8a" ] && sets+=("w8a:$data/w8a/w8a:1")
for f in "$data"/uci/*.libsvm; do
  name=$(basename "$f" .libsvm)
  wanted "$name" && sets+=("$name:$f:$seeds")
done
for entry in "${sets[@]}"; do
  IFS=: read -r name file set_seeds <<< "$entry"
  labels=$(cut -d' ' -f1 "$file" | sort -u | wc -l)
  for algo in $algos; do
    if [ "$labels" -gt 2 ] && [ "$algo" != cpm ]; then  # the linear learners are binary
      printf "%-30s %-4s %5s  n/a: %d classes\n" "$name" "$algo" - "$labels"
      continue
    fi
    lines=""
    for seed in $set_seeds; do
      read -r train test <<< "$(half_split "$file" "$seed")"
      lines+="$(one "$algo" "$train" "$test")"$'\n'
    done
    report "$name" "$algo" "${lines%$'\n'}"
  done
done
echo "$rows rows, $misses with a miss (tune: within 0.3 points of best; defaults: within 2 points)"
