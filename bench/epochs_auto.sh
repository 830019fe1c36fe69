#!/usr/bin/env bash
# bench/epochs_auto.sh [BINARY]: `--epochs auto` against fixed epochs (issue 45, item 2), one table.
#
# For each set and learner (ldm, svm at their defaults): the test accuracy and the wall time of
# `train --epochs auto` (one column group per --n-iter-no-change value of PATIENCE), and of
# `--epochs N` for N in FIXED; "best" is the best fixed count's accuracy (chosen looking at the
# test set). "retrain" is the other way to finish an auto run: the model trained on all rows for
# the best epoch's count (`--epochs BEST`), its time the auto run's plus its own. "dflt" is train
# without --epochs (5 epochs, or the step floor's on a small set), the default auto would replace,
# "ep" its epochs. Targets: auto
# within 0.2 points of best on every set, and at most 2x the wall time of 5 epochs.
# Sets: a9a -> a9a.t, ijcnn1 -> ijcnn1.t, w8a (seeded half split), and the binary UCI sets of
# $DATA/uci (seeded half splits, SEEDS of them; a UCI row is the mean over its seeds, its times
# the sums). Times are medians of REPEAT (3) runs, the runs of one set interleaved. Data are
# converted to shards first (not timed).
# Environment: DATA (../shared/data), SEEDS ("1 2 3"), ALGOS ("ldm svm"), PATIENCE ("3"), FIXED
# ("2 5 10 20"), REPEAT (3), SETS (names to run; default all), FLAGS (more flags for every run).
# Run from the repository root.
set -uo pipefail
bin=${1:-build/polymargin}
data=${DATA:-../shared/data}
seeds=${SEEDS:-"1 2 3"}
algos=${ALGOS:-"ldm svm"}
patience=${PATIENCE:-3}
fixed=${FIXED:-"2 5 10 20"}
repeat=${REPEAT:-3}
command -v jq > /dev/null || { echo "bench/epochs_auto.sh needs jq" >&2; exit 1; }
[ -d "$data" ] || { echo "bench/epochs_auto.sh: no data in $data" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=bench/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"  # median, wanted, half_split_sets

# run NAME ALGO TRAIN TEST FLAGS...: trains, appends "accuracy seconds" to $work/NAME.runs and
# leaves the --json in $work/NAME.json.
run() {
  local name=$1 algo=$2 train=$3 test=$4 start end
  shift 4
  start=$(date +%s.%N)
  "$bin" train --algo "$algo" -d "$train" -o "$work/model" --threads 2 --json ${FLAGS:-} "$@" \
    > "$work/$name.json" 2> "$work/err" ||
    { echo "bench/epochs_auto.sh: train $* on $train failed: $(tail -2 "$work/err")" >&2; return 1; }
  end=$(date +%s.%N)
  echo "$("$bin" eval -m "$work/model" -d "$test" --json 2> /dev/null | jq .accuracy) $(echo "$end - $start" | bc)" \
    >> "$work/$name.runs"
}

# one ALGO TRAIN TEST: for one split, "acc seconds" per configuration, one line each, in the
# order: auto per patience, retrain per patience, then fixed; with epochs_run best_epoch per auto.
one() {
  local algo=$1 train=$2 test=$3 p n r
  rm -f "$work"/*.runs
  for r in $(seq "$repeat"); do
    for p in $patience; do run "auto$p" "$algo" "$train" "$test" --epochs auto --n-iter-no-change "$p" || return 1; done
    for n in $fixed; do run "fixed$n" "$algo" "$train" "$test" --epochs "$n" || return 1; done
    run default "$algo" "$train" "$test" || return 1
  done
  for p in $patience; do
    local best
    best=$(jq .epochs_auto.best_epoch "$work/auto$p.json")
    for r in $(seq "$repeat"); do run "retrain$p" "$algo" "$train" "$test" --epochs "$best" || return 1; done
    echo "auto$p $(head -1 "$work/auto$p.runs" | cut -d' ' -f1) $(cut -d' ' -f2 "$work/auto$p.runs" | median)" \
      "$(jq -r '.epochs_auto | "\(.epochs_run) \(.best_epoch)"' "$work/auto$p.json")"
    # retrain: its own time plus the auto run's
    echo "retrain$p $(head -1 "$work/retrain$p.runs" | cut -d' ' -f1)" \
      "$(paste -d' ' <(cut -d' ' -f2 "$work/retrain$p.runs") <(cut -d' ' -f2 "$work/auto$p.runs") |
         awk '{ print $1 + $2 }' | median) 0 0"
  done
  for n in $fixed; do
    echo "fixed$n $(head -1 "$work/fixed$n.runs" | cut -d' ' -f1) $(cut -d' ' -f2 "$work/fixed$n.runs" | median) $n $n"
  done
  echo "default $(head -1 "$work/default.runs" | cut -d' ' -f1) $(cut -d' ' -f2 "$work/default.runs" | median)" \
    "$(jq .epochs "$work/default.json") 0"
}

# Header: per patience p, auto's accuracy, its gap to best, epochs run/best, and time ratio to 5
# epochs; retrain's accuracy and gap; then the fixed counts' accuracies and best.
header="$(printf "%-24s %-4s %3s" set algo n)"
for p in $patience; do header+="$(printf " %8s %7s %6s %6s %7s %7s %6s" "auto$p" "Δ" "ep" "×t5" "retr$p" "Δ" "×t5")"; done
for n in $fixed; do header+="$(printf " %7s" "e$n")"; done
header+="$(printf " %7s %7s %7s %6s %7s  %s" best dflt "Δdflt" "ep" "t5 s" verdict)"
echo "$header"

declare -A sum_gap=() sum_ratio=() worst_gap=() worst_ratio=() misses=()
rows=0
report() {  # report NAME ALGO LINES (one() output of each split, concatenated)
  local name=$1 algo=$2 lines=$3 n best t5 line p
  n=$(echo "$lines" | grep -c "^fixed$(echo "$fixed" | cut -d' ' -f1) ")
  mean() { echo "$lines" | awk -v k="$1" -v f="$2" '$1 == k { s += $f; c++ } END { printf "%.4f", s / c }'; }
  total() { echo "$lines" | awk -v k="$1" -v f="$2" '$1 == k { s += $f } END { printf "%.3f", s }'; }
  best=0
  for e in $fixed; do best=$(awk -v a="$(mean "fixed$e" 2)" -v b="$best" 'BEGIN { print (a > b ? a : b) }'); done
  t5=$(total fixed5 3)
  line="$(printf "%-24s %-4s %3s" "$name" "$algo" "$n")"
  local verdict=ok
  for p in $patience; do
    local a r ta tr ep bp
    a=$(mean "auto$p" 2); r=$(mean "retrain$p" 2); ta=$(total "auto$p" 3); tr=$(total "retrain$p" 3)
    ep=$(mean "auto$p" 4); bp=$(mean "auto$p" 5)
    local gap rgap ratio rratio
    gap=$(awk -v a="$a" -v b="$best" 'BEGIN { printf "%+.2f", 100 * (a - b) }')
    rgap=$(awk -v a="$r" -v b="$best" 'BEGIN { printf "%+.2f", 100 * (a - b) }')
    ratio=$(awk -v a="$ta" -v b="$t5" 'BEGIN { printf "%.2f", a / b }')
    rratio=$(awk -v a="$tr" -v b="$t5" 'BEGIN { printf "%.2f", a / b }')
    line+="$(printf " %8s %7s %6s %6s %7s %7s %6s" "$a" "$gap" "$(printf "%.1f/%.1f" "$ep" "$bp")" "$ratio" "$r" "$rgap" "$rratio")"
    sum_gap[$p]=$(awk -v s="${sum_gap[$p]:-0}" -v g="$gap" 'BEGIN { print s + g }')
    sum_ratio[$p]=$(awk -v s="${sum_ratio[$p]:-0}" -v g="$ratio" 'BEGIN { print s + g }')
    worst_gap[$p]=$(awk -v s="${worst_gap[$p]:-0}" -v g="$gap" 'BEGIN { print (g < s ? g : s) }')
    worst_ratio[$p]=$(awk -v s="${worst_ratio[$p]:-0}" -v g="$ratio" 'BEGIN { print (g > s ? g : s) }')
    awk -v g="$gap" -v t="$ratio" 'BEGIN { exit !(g < -0.2 || t > 2) }' &&
      { misses[$p]=$(( ${misses[$p]:-0} + 1 )); verdict="miss(p=$p)"; }
  done
  for e in $fixed; do line+="$(printf " %7s" "$(mean "fixed$e" 2)")"; done
  local d
  d=$(mean default 2)
  line+="$(printf " %7s %7s %7s %6s %7s  %s" "$best" "$d" "$(awk -v a="$d" -v b="$best" 'BEGIN { printf "%+.2f", 100 * (a - b) }')" \
    "$(mean default 4 | cut -d. -f1)" "$t5" "$verdict")"
  dflt_sum=$(awk -v s="${dflt_sum:-0}" -v a="$d" -v b="$best" 'BEGIN { print s + 100 * (a - b) }')
  echo "$line"
  rows=$((rows + 1))
}


shards() {  # shards TEXT DIR: converted once
  [ -d "$2" ] || "$bin" convert "$1" -o "$2" > /dev/null 2>&1
}

for pair in "a9a:a9a/a9a:a9a/a9a.t" "ijcnn1:ijcnn1/ijcnn1.trn.bz2:ijcnn1/ijcnn1.tst.bz2"; do
  IFS=: read -r name train test <<< "$pair"
  wanted "$name" || continue
  [ -f "$data/$train" ] || { echo "skipped $name: $data/$train not found" >&2; continue; }
  shards "$data/$train" "$work/$name.train.shards"
  shards "$data/$test" "$work/$name.test.shards"
  for algo in $algos; do
    report "$name" "$algo" "$(one "$algo" "$work/$name.train.shards" "$work/$name.test.shards")"
  done
done

mapfile -t sets < <(half_split_sets "$data" "$seeds")
for entry in "${sets[@]}"; do
  IFS=: read -r name file set_seeds <<< "$entry"
  labels=$(awk 'NF { print $1 }' "$file" | sort -u | wc -l)
  [ "$labels" -gt 2 ] && { printf "%-24s n/a: %d classes (ldm, svm are binary)\n" "$name" "$labels"; continue; }
  for algo in $algos; do
    lines=""
    for seed in $set_seeds; do
      "$bin" split "$file" --test-fraction 0.5 --seed "$seed" -o "$work/split" > /dev/null 2>&1
      rm -rf "$work/split.train.shards" "$work/split.test.shards"
      shards "$work/split.train.svm" "$work/split.train.shards"
      shards "$work/split.test.svm" "$work/split.test.shards"
      lines+="$(one "$algo" "$work/split.train.shards" "$work/split.test.shards")"$'\n'
    done
    report "$name" "$algo" "${lines%$'\n'}"
  done
done

echo "default (no --epochs: 5, or the step floor's): mean gap to best $(awk -v s="${dflt_sum:-0}" -v n="$rows" 'BEGIN { printf "%+.3f", s / n }') points"
for p in $patience; do
  echo "--n-iter-no-change $p: $rows rows, ${misses[$p]:-0} misses; mean gap to best $(awk -v s="${sum_gap[$p]}" -v n="$rows" 'BEGIN { printf "%+.3f", s / n }') points (worst ${worst_gap[$p]}), mean time ×$(awk -v s="${sum_ratio[$p]}" -v n="$rows" 'BEGIN { printf "%.2f", s / n }') of 5 epochs (worst ×${worst_ratio[$p]})"
done
