#!/usr/bin/env bash
# bench/tune.sh [BINARY]: `train --tune` and the plain defaults against the best grid cell chosen
# with the test set in view (issue 20's targets), as one table.
#
# For each data set and learner (LDM, SVM, CPM): `train --tune` on the training part, scored on the
# test part; every setting the search visited, each trained on the whole training part and scored
# on the test part ("best": the best of them, chosen looking at the test set); and `train` at its
# defaults. Targets: tune within 0.3 points of best, defaults within 2 points of it. The "noise"
# column says how much of best's lead is selection noise (noise() below).
# Sets: a9a -> a9a.t, ijcnn1 -> ijcnn1.t, w8a (seeded half split) and the 21 UCI sets of
# $DATA/uci (seeded half splits, SEEDS of them; a UCI row is the mean over its seeds).
# Environment: DATA (default ../shared/data), SEEDS ("1 2 3"), ALGOS ("ldm svm cpm"),
# SETS (names to run, default all: a9a ijcnn1 w8a and the UCI file names without .libsvm),
# EPOCHS_CPM (the CPM's --epochs; default its own), TUNE_FLAGS (more flags for the --tune runs, e.g.
# "--tune-repeats 1"), TUNE_BASE (flags of a second --tune run on every split, e.g. "--tune-repeats
# 1": its accuracy is printed beside tune's as "base", and "best" is over the settings either run
# visited). Run from the repository root.
# KDD size (the issue's second target) when KDD_ROWS is set (e.g. 2000000): `gen --like kdda
# --model polytope --seed 2010`, KDD_ROWS training rows and KDD_ROWS/5 test rows as shards (kept in
# KDD_DIR when it is set, and reused). For ldm and svm: "best" is the best of C in {0.01, 0.1, 1} at
# the defaults, "default" the defaults, "tune s" the median of REPEAT (3) runs of --tune, and the
# verdict gives it over the median of as many plain trains of the chosen setting (target: at most
# 3x, and tune at least as accurate as best). BASE=BINARY adds the same rows for another binary (a
# baseline measured in the same run, its runs interleaved with these). SETS=kdd runs only this.
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

# half_accuracy FILE: the accuracy on FILE of the model the last accuracy() call trained.
half_accuracy() { "$bin" eval -m "$work/model" -d "$1" --json 2> /dev/null | jq .accuracy || echo nan; }

# noise: from lines "accuracy-on-A accuracy-on-B" (one per setting, in one order), how much the
# setting that is best on one half of the test part loses on the other half against that half's
# own best (the mean of both directions; ties go to the first setting). "best" is chosen the same
# way, on the whole test part: this is how much of its lead over any choice made without the test
# rows is selection noise (on half as many rows).
noise() {
  awk '{ a[NR] = $1; b[NR] = $2 }
    END { ia = ib = 1
          for (i = 1; i <= NR; i++) { if (a[i] > a[ia]) ia = i; if (b[i] > b[ib]) ib = i }
          printf "%.6f", ((b[ib] - b[ia]) + (a[ia] - a[ib])) / 2 }'
}

# shellcheck source=bench/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"  # median, wanted, half_split_sets

# timed BINARY JSON ARGS...: a train whose --json goes to JSON; prints its wall seconds.
timed() {
  local binary=$1 out=$2 start
  shift 2
  start=$(date +%s.%N)
  "$binary" train "$@" --threads 2 --json > "$out" 2> "$work/err" \
    || { echo "bench/tune.sh: $binary train $* failed: $(tail -2 "$work/err")" >&2; echo nan; return; }
  echo "$(date +%s.%N) - $start" | bc
}

# one ALGO TRAIN TEST: "tune best default seconds [base]" for one split.
one() {
  local algo=$1 train=$2 test=$3 best=0 a flags seconds base=""
  local tune=(--algo "$algo" -d "$train" --validation "$test" -o "$work/model" --tune $(extra "$algo"))
  seconds=$(timed "$bin" "$work/tune.json" "${tune[@]}" ${TUNE_FLAGS:-})
  [ "$seconds" = nan ] && { echo "nan nan nan 0"; return; }
  local runs=("$work/tune.json")
  if [ -n "${TUNE_BASE:-}" ]; then
    [ "$(timed "$bin" "$work/base.json" "${tune[@]}" $TUNE_BASE)" = nan ] && { echo "nan nan nan 0"; return; }
    base=$(jq .validation.accuracy "$work/base.json")
    runs+=("$work/base.json")
  fi
  # Each setting is also scored on the two halves of the test part (A, B), for the noise column.
  "$bin" split "$test" --test-fraction 0.5 --seed 1 -o "$work/half" > /dev/null 2>&1
  local halves=""
  while read -r flags; do
    a=$(accuracy "$algo" "$train" "$test" $flags)
    best=$(awk -v a="$a" -v b="$best" 'BEGIN { print (a > b ? a : b) }')
    halves+="$(half_accuracy "$work/half.train.svm") $(half_accuracy "$work/half.test.svm")"$'\n'
  done < <(jq -r '.tune.settings[].setting | to_entries | map("--\(.key) \(.value)") | join(" ")' \
             "${runs[@]}" | sort -u)
  echo "$(jq .validation.accuracy "$work/tune.json") $best $(accuracy "$algo" "$train" "$test") $seconds" \
    "$(echo -n "$halves" | noise) $base"
}

if [ -n "${TUNE_BASE:-}" ]; then
  echo "base: --tune $TUNE_BASE; tune: --tune ${TUNE_FLAGS:-}"
  printf "%-30s %-4s %5s %7s %7s %7s %7s %7s %7s %7s %6s %6s  %s\n" set algo seeds tune base best default \
    "Δtune" "Δbase" "Δdef" "tune s" noise verdict
else
  printf "%-30s %-4s %5s %7s %7s %7s %7s %7s %6s %6s  %s\n" set algo seeds tune best default \
    "Δtune" "Δdef" "tune s" noise verdict
fi
misses=0 rows=0 tune_misses=0 base_misses=0 base_sum=0 tune_sum=0 noise_sum=0 dt_sum=0 noise_rows=0
report() {  # report NAME ALGO "tune best default seconds noise [base]" lines (one per seed)
  local name=$1 algo=$2 lines=$3 line
  line=$(echo "$lines" | awk '{ t += $1; b += $2; d += $3; s += $4; z += $5; x += $6; n++ }
    END { printf "%d %.4f %.4f %.4f %.1f %.2f %.4f", n, t / n, b / n, d / n, s / n, 100 * z / n, x / n }')
  read -r n t b d s z x <<< "$line"
  noise_sum=$(awk -v a="$noise_sum" -v z="$z" 'BEGIN { print a + z }')
  dt_sum=$(awk -v a="$dt_sum" -v t="$t" -v b="$b" 'BEGIN { print a + 100 * (t - b) }')
  local dt dd dx verdict=ok
  dt=$(awk -v t="$t" -v b="$b" 'BEGIN { printf "%+.2f", 100 * (t - b) }')
  dd=$(awk -v d="$d" -v b="$b" 'BEGIN { printf "%+.2f", 100 * (d - b) }')
  dx=$(awk -v x="$x" -v b="$b" 'BEGIN { printf "%+.2f", 100 * (x - b) }')
  awk -v x="$dt" 'BEGIN { exit !(x < -0.3) }' && verdict="tune miss"
  awk -v x="$dd" 'BEGIN { exit !(x < -2) }' && verdict="${verdict/ok/}${verdict:+ }default miss"
  verdict=${verdict# }
  [ "$verdict" = ok ] || misses=$((misses + 1))
  [ "$verdict" = "${verdict/tune miss/}" ] || tune_misses=$((tune_misses + 1))
  rows=$((rows + 1))
  noise_rows=$((noise_rows + 1))
  if [ -n "${TUNE_BASE:-}" ]; then
    awk -v x="$dx" 'BEGIN { exit !(x < -0.3) }' && base_misses=$((base_misses + 1))
    base_sum=$(awk -v a="$base_sum" -v x="$dx" 'BEGIN { print a + x }')
    tune_sum=$(awk -v a="$tune_sum" -v x="$dt" 'BEGIN { print a + x }')
    printf "%-30s %-4s %5s %7s %7s %7s %7s %7s %7s %7s %6s %6s  %s\n" "$name" "$algo" "$n" "$t" "$x" \
      "$b" "$d" "$dt" "$dx" "$dd" "$s" "$z" "$verdict"
  else
    printf "%-30s %-4s %5s %7s %7s %7s %7s %7s %6s %6s  %s\n" "$name" "$algo" "$n" "$t" "$b" "$d" \
      "$dt" "$dd" "$s" "$z" "$verdict"
  fi
}


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

mapfile -t sets < <(half_split_sets "$data" "$seeds")
for entry in "${sets[@]}"; do
  IFS=: read -r name file set_seeds <<< "$entry"
  labels=$(awk 'NF { print $1 }' "$file" | sort -u | wc -l)  # blank lines (w8a ends in one) are no class
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
# --- KDD size ---
if [ -n "${KDD_ROWS:-}" ] && { [ -z "${SETS:-}" ] || wanted kdd; }; then
  kdir=${KDD_DIR:-$work}
  ktrain=$kdir/kdda-like-$KDD_ROWS.train.shards ktest=$kdir/kdda-like-$KDD_ROWS.test.shards
  [ -d "$ktrain" ] && [ -d "$ktest" ] || "$bin" gen --like kdda --model polytope --seed 2010 \
    --rows "$KDD_ROWS" --test-rows $((KDD_ROWS / 5)) -o "$ktrain" --test-output "$ktest" > /dev/null 2>&1 \
    || { echo "bench/tune.sh: gen failed" >&2; exit 1; }
  binaries=("$bin")
  [ -n "${BASE:-}" ] && binaries+=("$BASE")
  for algo in ldm svm; do
    best=0
    for c in 0.01 0.1 1; do
      timed "$bin" "$work/c.json" --algo $algo -d "$ktrain" --validation "$ktest" -o "$work/m" -c $c > /dev/null
      best=$(awk -v a="$(jq .validation.accuracy "$work/c.json")" -v b="$best" 'BEGIN { print (a > b ? a : b) }')
    done
    timed "$bin" "$work/d.json" --algo $algo -d "$ktrain" --validation "$ktest" -o "$work/m" > /dev/null
    default=$(jq .validation.accuracy "$work/d.json")
    declare -A tune_s=() plain_s=() tuned=() chosen=()
    for r in $(seq "${REPEAT:-3}"); do
      for i in "${!binaries[@]}"; do
        tune_s[$i]+="$(timed "${binaries[$i]}" "$work/t$i.json" --algo $algo -d "$ktrain" \
          --validation "$ktest" -o "$work/m" --tune) "
        tuned[$i]=$(jq .validation.accuracy "$work/t$i.json")
        chosen[$i]=$(jq -r '(.tune.chosen | to_entries | map("--\(.key) \(.value)"))
          + (if .tune.eta0 then ["--eta0 \(.tune.eta0)"] else [] end) | join(" ")' "$work/t$i.json")
        plain_s[$i]+="$(timed "$bin" "$work/p.json" --algo $algo -d "$ktrain" -o "$work/m" \
          ${chosen[$i]}) "
      done
    done
    for i in "${!binaries[@]}"; do
      t=$(echo "${tune_s[$i]}" | median)
      p=$(echo "${plain_s[$i]}" | median)
      name="kdda-like $((KDD_ROWS / 1000))k"
      [ "$i" -gt 0 ] && name="$name (BASE)"
      dt=$(awk -v t="${tuned[$i]}" -v b="$best" 'BEGIN { printf "%+.2f", 100 * (t - b) }')
      dd=$(awk -v d="$default" -v b="$best" 'BEGIN { printf "%+.2f", 100 * (d - b) }')
      ratio=$(awk -v t="$t" -v p="$p" 'BEGIN { printf "%.1f", t / p }')
      verdict=ok
      awk -v x="$dt" 'BEGIN { exit !(x < 0) }' && verdict="tune miss"
      awk -v x="$ratio" 'BEGIN { exit !(x > 3) }' && verdict="${verdict/ok/}${verdict:+ }cost miss"
      verdict=${verdict# }
      [ "$verdict" = ok ] || misses=$((misses + 1))
      rows=$((rows + 1))
      printf "%-30s %-4s %5s %7.4f %7.4f %7.4f %7s %7s %6.1f %6s  %s (%.1f s = %s× a plain train of %s)\n" \
        "$name" $algo - "${tuned[$i]}" "$best" "$default" "$dt" "$dd" "$t" - "$verdict" "$p" "$ratio" \
        "${chosen[$i]}"
    done
    unset tune_s plain_s tuned chosen
  done
fi
[ -n "${TUNE_BASE:-}" ] && awk -v r="$rows" -v t="$tune_misses" -v b="$base_misses" -v ts="$tune_sum" \
  -v bs="$base_sum" 'BEGIN { printf "tune more than 0.3 points below best on %d rows (mean Δ %+.2f), base on %d (mean Δ %+.2f)\n", t, ts / r, b, bs / r }'
[ "$noise_rows" -gt 0 ] && awk -v r="$noise_rows" -v z="$noise_sum" -v t="$dt_sum" 'BEGIN {
  printf "mean over the %d rows above: Δtune %+.2f points, noise %.2f points\n", r, t / r, z / r }'
echo "$rows rows, $misses with a miss (tune: within 0.3 points of best; defaults: within 2 points;" \
  "KDD size: tune at least best, in at most 3x a plain train of its choice)"
