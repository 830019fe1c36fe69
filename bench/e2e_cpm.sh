#!/usr/bin/env bash
# The CPM at KDD Cup 2010 size (issue 4): generated kdda-like polytope data as zstd shards, K = 10,
# T = 32 M SGD steps per side, double-sided; 2 threads against 1 thread in the same run (the
# speed-up) and single-sided outer=+1 on 1 thread (one side's cost). One table: wall seconds of the
# whole command, its CPU seconds (user + system: on a machine shared with other jobs the wall time
# says more about them than about polymargin), training seconds, steps/s per side, peak RSS, the
# memory bound the command computes (K × slots × 8 B per side + history + 256 MiB), and the
# training accuracy of the model (eval on the training shards).
# The "cpu µs/step" column is (user + system CPU seconds of the command) / (steps of all sides):
# on a loaded machine it says more than the wall time; it includes reading, page faults and saving.
# Usage: bench/e2e_cpm.sh [BUILD_DIR]   env: ROWS (default: full 8,407,752), WORK (scratch dir,
#        default /tmp/cpm-bench), T (default 32000000), K (10), C (0.01), REPEATS (1: rounds,
#        each running every row once; a row is the median of its runs), KEEP=1 keeps the
#        generated shards, SHARDS=DIR uses existing shards instead (e.g.
#        /tmp/polymargin-bench/kdda.zstd.shards; read only), BASELINE=BIN adds the double-sided
#        2-thread row of another polymargin binary (e.g. main's) in the same run, QUICK=1 runs the
#        2-thread rows only (no 1-thread speed-up rows).
set -euo pipefail
build=${1:-build}
bin=$build/polymargin
rows=${ROWS:-8407752}
work=${WORK:-/tmp/cpm-bench}
iterations=${T:-32000000}
faces=${K:-10}
c=${C:-0.01}
repeats=${REPEATS:-1}
mkdir -p "$work"
shards=${SHARDS:-$work/kdda-polytope.$rows.shards}
if [ -n "${SHARDS:-}" ]; then
  trap 'rm -f "$work"/*.cpm "$work"/*.json' EXIT
  rows=$(sed -n 's/.*"rows": \([0-9]*\).*/\1/p' "$shards/manifest.json" | head -1)
elif [ "${KEEP:-0}" != 1 ]; then
  trap 'rm -rf "$shards" "$work"/*.cpm "$work"/*.json' EXIT
fi

table=()
row() { table+=("$(printf '%-34s %8s %8s %8s %8s %11s %11s %8s %9s  %s' "$@")"); }
json_number() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

if [ ! -f "$shards/manifest.json" ]; then
  echo "generating $rows rows of kdda-like polytope data in $shards ..." >&2
  /usr/bin/time -f '%e %M' -o "$work/time.log" "$bin" gen --like kdda --model polytope --faces 5 \
    --rows "$rows" --seed 2010 -o "$shards" > /dev/null
  read -r wall rss_kb < "$work/time.log"
  row "gen → zstd shards" "$wall" "" "" "" "" "" "$((rss_kb / 1024))" "" ""
fi

# The runs: NAME THREADS SIDES [BINARY]. They are interleaved, one of each per round, REPEATS
# rounds, so that a slow spell of the (shared) machine falls on all of them alike; each row is the
# median of its runs. The speed-up is the ratio of the 1- and 2-thread medians.
configs=("double2 2 double")
[ -n "${BASELINE:-}" ] && configs+=("baseline 2 double $BASELINE")
[ "${QUICK:-0}" != 1 ] && configs+=("double1 1 double" "single1 1 outer=+1")
declare -A walls cpus trains plus minus rsses
# run_once NAME THREADS SIDES [BINARY]: one run, its figures appended to NAME's lists.
run_once() {
  local name=$1 threads=$2 sides=$3 exe=${4:-$bin}
  /usr/bin/time -f '%e %M %U %S' -o "$work/time.log" "$exe" train --algo cpm -d "$shards" \
    -o "$work/$name.cpm" -k "$faces" -c "$c" --iterations "$iterations" --sides "$sides" \
    --threads "$threads" --json > "$work/$name.json" 2> "$work/$name.err"
  read -r wall rss_kb user sys < "$work/time.log"
  walls[$name]+="$wall "
  cpus[$name]+="$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') "
  rsses[$name]+="$((rss_kb / 1024)) "
  trains[$name]+="$(json_number "$work/$name.json" train_seconds) "
  # side_details lists outer=+1 first; their steps_per_second are the 2nd/3rd occurrences.
  local sps
  sps=($(sed -n 's/.*"steps_per_second": \([0-9.e+-]*\).*/\1/p' "$work/$name.json"))
  plus[$name]+="${sps[1]:-0} "
  minus[$name]+="${sps[2]:-0} "
}
# medians NAME SIDES: sets WALL CPU TRAIN SPS_PLUS SPS_MINUS RSS NEED and US_STEP (CPU µs per
# step of all sides) from NAME's runs.
medians() {
  local name=$1 sides=$2
  WALL=$(echo ${walls[$name]} | median)
  CPU=$(echo ${cpus[$name]} | median)
  TRAIN=$(printf "%.1f" "$(echo ${trains[$name]} | median)")
  SPS_PLUS=$(echo ${plus[$name]} | median)
  SPS_MINUS=$(echo ${minus[$name]} | median)
  RSS=$(echo ${rsses[$name]} | median)
  NEED=$(($(json_number "$work/$name.json" memory_needed_bytes | cut -d. -f1) / 1048576))
  local sides_run=2
  [ "$sides" = double ] || sides_run=1
  US_STEP=$(awk -v c="$CPU" -v t="$iterations" -v n="$sides_run" 'BEGIN { printf "%.2f", c / (t * n) * 1e6 }')
}
msteps() { awk -v s="$1" 'BEGIN { printf "%.3f M", s / 1e6 }'; }

# Round i starts at row i (mod the rows): each row follows each other as often, so that what one
# run leaves behind (on this VM: memory just freed is cheap to map again, fresh memory costs the
# host's faults) does not always favour the same row.
for ((i = 0; i < repeats; ++i)); do
  for ((j = 0; j < ${#configs[@]}; ++j)); do
    # shellcheck disable=SC2086
    run_once ${configs[(i + j) % ${#configs[@]}]}
  done
done

medians double2 double
wall2=$WALL train2=$TRAIN
row "double-sided, 2 threads" "$WALL" "$CPU" "$US_STEP" "$TRAIN" "$(msteps "$SPS_PLUS")" \
  "$(msteps "$SPS_MINUS")" "$RSS" "$NEED" "target ≤ 60 s"
"$bin" eval -m "$work/double2.cpm" -d "$shards" --json > "$work/eval.json"
accuracy=$(json_number "$work/eval.json" accuracy)
if [ -n "${BASELINE:-}" ]; then
  medians baseline double
  row "baseline binary, double, 2 threads" "$WALL" "$CPU" "$US_STEP" "$TRAIN" "$(msteps "$SPS_PLUS")" \
    "$(msteps "$SPS_MINUS")" "$RSS" "$NEED" "$BASELINE"
  cmp -s "$work/baseline.cpm" "$work/double2.cpm" && same_baseline=yes || same_baseline=NO
fi
if [ "${QUICK:-0}" != 1 ]; then
  medians double1 double
  row "double-sided, 1 thread" "$WALL" "$CPU" "$US_STEP" "$TRAIN" "$(msteps "$SPS_PLUS")" \
    "$(msteps "$SPS_MINUS")" "$RSS" "$NEED" "baseline of the speed-up"
  speedup=$(awk -v a="$WALL" -v b="$wall2" 'BEGIN { printf "%.2f", a / b }')
  train_speedup=$(awk -v a="$TRAIN" -v b="$train2" 'BEGIN { printf "%.2f", a / b }')
  cmp -s "$work/double1.cpm" "$work/double2.cpm" && same=yes || same=NO
  medians single1 outer=+1
  row "single-sided outer=+1, 1 thread" "$WALL" "$CPU" "$US_STEP" "$TRAIN" "$(msteps "$SPS_PLUS")" "" \
    "$RSS" "$NEED" ""
fi

echo
echo "CPM, $rows rows ($shards), K = $faces, T = $iterations steps per side, C = $c," \
  "median of $repeats run(s)"
printf '%-34s %8s %8s %8s %8s %11s %11s %8s %9s  %s\n' "run" "wall s" "cpu s" "cpu µs/st" \
  "train s" "steps/s +1" "steps/s -1" "RSS MiB" "bound MiB" "note"
for line in "${table[@]}"; do echo "$line"; done
[ -n "${BASELINE:-}" ] && echo "model files of this build and the baseline identical: $same_baseline"
if [ "${QUICK:-0}" != 1 ]; then
  echo "speed-up 2 vs 1 thread: $speedup (whole command), $train_speedup (training); target ≥ 1.8"
  # Each round's own ratios (its 1- and 2-thread runs a few minutes apart): how much they spread.
  read -r -a w1 <<< "${walls[double1]}"
  read -r -a w2 <<< "${walls[double2]}"
  read -r -a t1 <<< "${trains[double1]}"
  read -r -a t2 <<< "${trains[double2]}"
  rounds=""
  for ((i = 0; i < repeats; ++i)); do
    rounds+=$(awk -v a="${w1[i]}" -v b="${w2[i]}" -v c="${t1[i]}" -v d="${t2[i]}" \
      'BEGIN { printf " %.2f/%.2f", a / b, c / d }')
  done
  echo "speed-up by round (whole command/training):$rounds"
  echo "model files of 1 and 2 threads identical: $same"
fi
echo "training accuracy (2 threads): $accuracy"
