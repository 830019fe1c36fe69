#!/usr/bin/env bash
# bench/tune_speed.sh BINARY BASE: the wall time of `train --tune` by BINARY against BASE (another
# build of polymargin, e.g. of an earlier commit: git worktree add /tmp/base REV, then cmake and
# build its target polymargin), side by side in one run, and whether both chose the same model.
#
# For each data set and learner: REPEAT (3) runs of each binary, interleaved (base, then this, ...),
# their median wall times, the ratio this / base, and "same" when the two final models are the
# same bytes (the same setting chosen and trained). Sets: SETS (default the UCI files heart_scale,
# australian, ionosphere, sonar, breast_w, pima of $DATA/uci); learners: ALGOS (default "ldm svm
# kldm"). Run from the repository root; the machine should be otherwise idle.
set -uo pipefail
bin=${1:?usage: bench/tune_speed.sh BINARY BASE}
base=${2:?usage: bench/tune_speed.sh BINARY BASE}
data=${DATA:-../shared/data}
sets=${SETS:-"heart_scale australian ionosphere sonar breast_w pima"}
algos=${ALGOS:-"ldm svm kldm"}
repeat=${REPEAT:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# seconds BINARY MODEL ALGO FILE: one --tune run's wall time (exit code checked).
seconds() {
  local start end
  start=$(date +%s.%N)
  "$1" train --algo "$3" -d "$4" -o "$2" --tune > /dev/null 2> "$work/stderr" ||
    { echo "failed: $1 train --algo $3 -d $4 --tune: $(tail -2 "$work/stderr")" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf "%-14s %-5s %9s %9s %7s %5s\n" set algo "base s" "this s" ratio model
for set in $sets; do
  file="$data/uci/$set.libsvm"
  [ -f "$file" ] || { echo "no $file" >&2; exit 1; }
  for algo in $algos; do
    : > "$work/base.t"
    : > "$work/this.t"
    for _ in $(seq "$repeat"); do
      seconds "$base" "$work/base.model" "$algo" "$file" >> "$work/base.t"
      seconds "$bin" "$work/this.model" "$algo" "$file" >> "$work/this.t"
    done
    b=$(median < "$work/base.t")
    t=$(median < "$work/this.t")
    same=$(cmp -s "$work/base.model" "$work/this.model" && echo same || echo DIFF)
    printf "%-14s %-5s %9.2f %9.2f %7.2f %5s\n" "$set" "$algo" "$b" "$t" "$(echo "$t / $b" | bc -l)" \
      "$same"
  done
done
