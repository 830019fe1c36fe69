#!/usr/bin/env bash
# What scattered feature ids cost the learner. KDD-size generated data twice: with gen's default
# ids, unrelated to frequency (as hashed or arbitrarily numbered features), and the same rows
# relabelled with the most frequent features first (gen --feature-order frequency). Both train the
# same model up to the order of the sums, so the difference is where the weights of a row's
# features lie in memory: scattered over the whole weight array, or mostly in its first cache lines.
# A third run (ldm, svm) trains on the scattered ids with --feature-order frequency: the weights
# laid out most frequent first while learning, the ids of the data and the model unchanged (the
# other two runs use --feature-order given).
# One table: medians of the whole command, of the learning and of the time the learner waited for
# rows, the test accuracy, and how much faster the other runs were than the scattered ids.
# Usage: bench/feature_order.sh [BUILD_DIR]
#   env: ROWS (default 8,407,752), WORK (scratch, default /tmp/polymargin-bench), CODEC (raw),
#        ALGOS ("ldm"; svm, cpm too), WORKERS ("1 2"), EPOCHS (5), C (0.01), CPM_ITER (the CPM's
#        steps T a side, default 32 M × ROWS / 8.4 M), REPEAT (3: rounds, every cell once a
#        round, so that a slow spell of a shared machine falls on all of them), KEEP=1 keeps the
#        generated shards.
set -euo pipefail
build=${1:-build}
bin=$(realpath "$build/polymargin")
rows=${ROWS:-8407752}
work=${WORK:-/tmp/polymargin-bench}
codec=${CODEC:-raw}
algos=${ALGOS:-ldm}
workers=${WORKERS:-1 2}
epochs=${EPOCHS:-5}
c=${C:-0.01}
cpm_iter=${CPM_ITER:-$((32000000 * rows / 8407752))}
repeat=${REPEAT:-3}
command -v jq > /dev/null || { echo "bench/feature_order.sh needs jq" >&2; exit 1; }
mkdir -p "$work"
made=()
cleanup() {
  rm -f "$work"/order.*.json "$work"/order.model "$work"/order.err
  [ "${KEEP:-0}" = 1 ] || rm -rf "${made[@]}"
}
trap cleanup EXIT

# data BASE RULE ORDER: BASE.shards and BASE.test.shards (generated once).
data() {
  made+=("$1.shards" "$1.test.shards")
  [ -s "$1.shards/manifest.json" ] && [ -s "$1.test.shards/manifest.json" ] && return
  echo "generating $rows rows ($2 rule, $3 ids, $codec shards) ..." >&2
  "$bin" gen --like kdda --model "$2" --feature-order "$3" --rows "$rows" --seed 2010 \
    --codec "$codec" -o "$1.shards" --test-rows $((rows / 10)) --test-output "$1.test.shards" \
    > /dev/null
}

# shellcheck source=bench/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"  # median

echo "feature ids: scattered (gen's default) vs frequency (gen --feature-order frequency), and"
echo "relaid (scattered ids, train --feature-order frequency), $rows rows,"
echo "$codec shards, $(nproc) cores, medians of $repeat rounds"
printf "%-4s %7s %-9s %8s %8s %8s %9s %9s %9s\n" algo workers ids "wall s" "learn s" "wait s" \
  accuracy "learn ×" "wall ×"
for algo in $algos; do
  rule=linear flags=(--algo "$algo" -c "$c" --epochs "$epochs")
  if [ "$algo" = cpm ]; then rule=polytope flags=(--algo cpm --iterations "$cpm_iter"); fi
  declare -A base=()
  for order in scattered frequency; do
    base[$order]=$work/order-$rule-$order.$rows.$codec
    data "${base[$order]}" "$rule" "$order"
  done
  declare -A wall=() learn=() wait=() acc=()
  # Runs: the data's ids, and (ldm, svm) the scattered ids laid out by frequency while learning.
  runs="scattered frequency"
  [ "$algo" = cpm ] || runs="scattered relaid frequency"
  for round in $(seq "$repeat"); do
    for w in $workers; do
      for order in $runs; do
        key=$w.$order
        data=${base[${order/relaid/scattered}]}
        layout=()
        [ "$algo" = cpm ] || layout=(--feature-order "$([ "$order" = relaid ] && echo frequency || echo given)")
        start=$(date +%s.%N)
        "$bin" train "${flags[@]}" "${layout[@]}" -d "$data.shards" \
          --validation "$data.test.shards" --workers "$w" -o "$work/order.model" \
          --json > "$work/order.$key.json" 2> "$work/order.err" ||
          { echo "train $algo --workers $w ($order) failed: $(tail -2 "$work/order.err")" >&2; exit 1; }
        wall[$key]+="$(echo "$(date +%s.%N) - $start" | bc) "
        learn[$key]+="$(jq '.learn_seconds // .train_seconds' "$work/order.$key.json") "
        wait[$key]+="$(jq '.read_wait_seconds // 0' "$work/order.$key.json") "
        acc[$key]=$(jq .validation.accuracy "$work/order.$key.json")
      done
    done
  done
  for w in $workers; do
    for order in $runs; do
      key=$w.$order
      mw=$(echo "${wall[$key]}" | median)
      ml=$(echo "${learn[$key]}" | median)
      mt=$(echo "${wait[$key]}" | median)
      if [ "$order" = scattered ]; then sw=$mw sl=$ml; lx="" wx=""; else
        lx=$(awk -v a="$sl" -v b="$ml" 'BEGIN { printf "%.2f×", a / b }')
        wx=$(awk -v a="$sw" -v b="$mw" 'BEGIN { printf "%.2f×", a / b }')
      fi
      printf "%-4s %7s %-9s %8.2f %8.2f %8.2f %9.4f %9s %9s\n" "$algo" "$w" "$order" "$mw" "$ml" \
        "$mt" "${acc[$key]}" "$lx" "$wx"
    done
  done
done
