#!/usr/bin/env bash
# Scale-out benchmark (train --workers N, mpirun -np R): KDD-size generated data (gen --like kdda;
# a planted linear rule for LDM/SVM, a planted polytope for the CPM), every configuration of one
# learner and codec measured in the same run as its one-worker baseline. One table: wall and CPU
# seconds of the whole command, the speed-up over one worker, test accuracy and its difference, and
# the averaging: bytes all-reduced per sync, syncs, their seconds. Then the many-core prediction
# from the measured parts (learning, reading, averaging; for the CPM also mapping the weights and
# writing the model).
# Usage: bench/scale.sh [BUILD_DIR]
#   env: ROWS (default 8,407,752), WORK (scratch, default /tmp/polymargin-bench), EPOCHS (5),
#        CODECS ("raw zstd"), ALGOS ("ldm svm cpm"), WORKERS ("1 2"), RANKS ("1 2"), C (0.01),
#        CPM_ITER (CPM steps T a side, default 32 M × ROWS / 8.4 M), REPEAT (runs per cell,
#        median; 1; the cells of a learner and codec run in rounds, each once a round),
#        KEEP=1 keeps the generated shards.
set -euo pipefail
build=${1:-build}
bin=$(realpath "$build/polymargin")
rows=${ROWS:-8407752}
work=${WORK:-/tmp/polymargin-bench}
epochs=${EPOCHS:-5}
codecs=${CODECS:-raw zstd}
algos=${ALGOS:-ldm svm cpm}
workers=${WORKERS:-1 2}
ranks=${RANKS:-1 2}
c=${C:-0.01}
cpm_iter=${CPM_ITER:-$((32000000 * rows / 8407752))}
repeat=${REPEAT:-1}
cores=$(nproc)
test_rows=$((rows / 10))
mkdir -p "$work"
export OMPI_MCA_rmaps_base_oversubscribe=1
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# data MODEL CODEC: the shard directory (generated once; the test part as shards too).
data() {
  local dir=$work/scale-$1.$rows.$2.shards
  if [ ! -s "$dir/manifest.json" ]; then
    echo "generating $rows rows ($1 rule, $2 shards) ..." >&2
    "$bin" gen --like kdda --model "$1" --rows "$rows" --seed 2010 --codec "$2" -o "$dir" \
      --test-rows "$test_rows" --test-output "$work/scale-$1.$rows.test.shards" > /dev/null
  fi
  echo "$dir"
}

# run LOG CMD...: the command under GNU time; sets WALL and CPU (user + sys) seconds.
run() {
  local log=$1
  shift
  /usr/bin/time -f '%e %U %S' -o "$work/time.log" "$@" > "$log" 2> "$log.err" ||
    { cat "$log.err" >&2; exit 1; }
  read -r WALL user sys < "$work/time.log"
  CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
key() { jq -r "$1" "$2"; }
fmt() { awk -v x="$1" -v f="$2" 'BEGIN { printf f, x }'; }

table=()
line() { table+=("$(printf '%-6s %-5s %-20s %8s %8s %8s %9s %8s %9s %6s %8s' "$@")"); }
line codec algo configuration "wall s" "CPU s" speed-up accuracy "Δ acc" "sync MB" syncs "sync s"

declare -A parts    # the measured parts of one worker, for the prediction
declare -A wall_of  # ALGO.CODEC.N.R: the median wall time of that configuration
for algo in $algos; do
  model=linear
  [ "$algo" = cpm ] && model=polytope
  options=(--algo "$algo" -c "$c" --epochs "$epochs" --bias 1)
  [ "$algo" = cpm ] && options=(--algo cpm --iterations "$cpm_iter")
  parallel=no
  case "$("$bin" train --algo "$algo" --help 2>&1)" in *--workers*) parallel=yes ;; esac
  for codec in $codecs; do
    shards=$(data "$model" "$codec")
    test=$work/scale-$model.$rows.test.shards
    # The configurations of this learner and codec, run in rounds (every configuration once a
    # round, REPEAT rounds), so that a slow spell of a shared machine falls on all of them alike.
    configs=()
    for r in $ranks; do
      for n in $workers; do
        if [ $((n * r)) -gt 1 ] && [ "$parallel" = no ]; then
          continue  # a learner without data parallelism: its baseline alone
        fi
        configs+=("$n.$r")
      done
    done
    declare -A walls=() cpus=()
    for _ in $(seq "$repeat"); do
      for config in "${configs[@]}"; do
        IFS=. read -r n r <<< "$config"
        replicas=()
        [ "$n" -gt 1 ] && replicas=(--workers "$n")
        launch=("$bin")
        threads=$cores
        if [ "$r" -gt 1 ]; then
          launch=(mpirun -np "$r" --bind-to none "$bin")
          threads=$((cores / r > 0 ? cores / r : 1))
        fi
        run "$work/scale.$config.json" "${launch[@]}" train "${options[@]}" -d "$shards" \
          -o "$work/scale.$config.model" "${replicas[@]}" --threads "$threads" --json
        walls[$config]+=" $WALL"
        cpus[$config]+=" $CPU"
      done
    done
    base_wall="" base_acc=""
    for config in "${configs[@]}"; do
      IFS=. read -r n r <<< "$config"
      threads=$cores
      [ "$r" -gt 1 ] && threads=$((cores / r > 0 ? cores / r : 1))
      json=$work/scale.$config.json
      wall=$(echo "${walls[$config]}" | median)
      cpu=$(echo "${cpus[$config]}" | median)
      wall_of[$algo.$codec.$n.$r]=$wall
      acc=$("$bin" eval -m "$work/scale.$config.model" -d "$test" --json 2> /dev/null | jq -r .accuracy)
      if [ -z "$base_wall" ]; then
        base_wall=$wall base_acc=$acc
        parts[$algo.$codec.learn]=$(key '.learn_seconds // .train_seconds' "$json")
        parts[$algo.$codec.train]=$(key '.train_seconds' "$json")
        parts[$algo.$codec.cpu]=$cpu
        parts[$algo.$codec.wall]=$wall
        if [ "$algo" = cpm ]; then  # CPU-s of both sides' steps; mapping the weights; the write
          parts[$algo.$codec.steps]=$(key '[.side_details[].learn_seconds] | add' "$json")
          parts[$algo.$codec.allocate]=$(key '.allocate_seconds' "$json")
          parts[$algo.$codec.save]=$(key '.save_seconds' "$json")
          parts[$algo.$codec.threads]=$threads
        fi
      fi
      sync_mb=$(awk -v b="$(key '.sync_bytes // 0' "$json")" 'BEGIN { printf "%.1f", b / 1e6 }')
      syncs=$(key '.syncs // 0' "$json")
      sync_s=$(key '.sync_seconds // 0' "$json")
      if [ "$syncs" != 0 ] && [ -z "${parts[$algo.$codec.sync]:-}" ]; then
        parts[$algo.$codec.sync]=$(awk -v s="$sync_s" -v k="$syncs" -v n=$((n * r)) \
          'BEGIN { print s / k / (2 * n + 1) }')  # seconds per replica-array pass
        parts[$algo.$codec.syncs]=$(awk -v k="$syncs" -v e="$epochs" 'BEGIN { print k / e }')
      fi
      line "$codec" "$algo" "N=$n R=$r (threads $threads)" "$(fmt "$wall" '%.2f')" "$cpu" \
        "$(awk -v b="$base_wall" -v w="$wall" 'BEGIN { printf "%.2fx", b / w }')" \
        "$(fmt "$acc" '%.4f')" "$(awk -v a="$acc" -v b="$base_acc" 'BEGIN { printf "%+.4f", a - b }')" \
        "$sync_mb" "$syncs" "$(fmt "$sync_s" '%.2f')"
    done
    rm -f "$work"/scale.*.model "$work"/scale.*.model.lock "$work"/scale.*.json "$work"/scale.*.json.err
  done
done

echo
echo "scale-out, $rows rows, $epochs epochs (CPM: T = $cpm_iter a side), $cores cores, medians of $repeat"
printf '%s\n' "${table[@]}"
# The issue's target for ranks: R ranks of one worker within 10 % of one process of R workers.
for key in "${!wall_of[@]}"; do
  IFS=. read -r algo codec n r <<< "$key"
  [ "$n" = 1 ] && [ "$r" -gt 1 ] && [ -n "${wall_of[$algo.$codec.$r.1]:-}" ] || continue
  awk -v a="$algo" -v c="$codec" -v r="$r" -v m="${wall_of[$key]}" -v w="${wall_of[$algo.$codec.$r.1]}" \
    'BEGIN { printf "%s %s: mpirun -np %d takes %.2fx the wall time of --workers %d (target: at most 1.10x)\n", c, a, r, m / w, r }'
done

# The many-core prediction of LDM/SVM from the one-worker run's parts: learning L (seconds of the
# loop inside the learner), the rest of the command's CPU R = CPU − L (reading, decoding, the final
# pass), and one pass of the averaging over a replica's array s (from the first replicated run).
# With P cores and P workers: wall ≈ L/P + R/P + syncs·s·(2P + 1), the averaging reading P replicas
# and writing P + 1 arrays at the bandwidth measured here (pessimistic where memory bandwidth grows
# with the cores).
echo
echo "prediction for P workers on P cores (from the parts measured above)"
printf '%-6s %-5s %8s %8s %10s' codec algo "L s" "R cpu s" "sync s/arr"
for p in 4 8 16; do printf ' %9s' "P=$p"; done
echo
for algo in $algos; do
  [ "$algo" = cpm ] && continue
  for codec in $codecs; do
    learn=${parts[$algo.$codec.learn]:-}
    [ -n "$learn" ] || continue
    rest=$(awk -v c="${parts[$algo.$codec.cpu]}" -v l="$learn" 'BEGIN { r = c - l; print (r > 0 ? r : 0) }')
    s=${parts[$algo.$codec.sync]:-0}
    k=$(awk -v k="${parts[$algo.$codec.syncs]:-4}" -v e="$epochs" 'BEGIN { print k * e }')
    printf '%-6s %-5s %8.2f %8.2f %10.3f' "$codec" "$algo" "$learn" "$rest" "$s"
    for p in 4 8 16; do
      awk -v l="$learn" -v r="$rest" -v s="$s" -v k="$k" -v p="$p" -v w="${parts[$algo.$codec.wall]}" \
        'BEGIN { t = l / p + r / p + k * s * (2 * p + 1); printf " %5.1fs %.1fx", t, w / t }'
    done
    echo
  done
done

# The CPM on P cores: P/2 replicas (R × N), each with its two sides on two threads, against the
# one-replica run measured above (today's two sides). From that run: S, the CPU-seconds of both
# sides' steps; A, the wall of mapping one replica's weights with T threads (A·T CPU-s a replica,
# every replica's pages mapped by all P threads); W, writing the model (one thread, once); the
# rest of its CPU, R = CPU − S − A·T − W (reading, decoding), on all cores. The averaging as for
# the linear learners (s a replica-array pass, k averagings, from the first replicated run; 0
# without one). wall ≈ S/P + R/P + A·T·(P/2)/P + k·s·(P + 1) + W. Steps are taken to scale with
# the cores: on a machine whose memory saturates first (docs/performance.md#16-cores) they do not.
if [[ " $algos " = *" cpm "* ]]; then
  echo
  echo "CPM: P/2 replicas of two sides each on P cores, against one replica (its two sides)"
  printf '%-6s %8s %8s %8s %8s %10s' codec "S s" "R cpu s" "A·T s" "W s" "sync s/arr"
  for p in 4 8 16; do printf ' %9s' "P=$p"; done
  echo
  for codec in $codecs; do
    steps=${parts[cpm.$codec.steps]:-}
    [ -n "$steps" ] || continue
    at=$(awk -v a="${parts[cpm.$codec.allocate]}" -v t="${parts[cpm.$codec.threads]}" \
      'BEGIN { print a * t }')
    save=${parts[cpm.$codec.save]}
    rest=$(awk -v c="${parts[cpm.$codec.cpu]}" -v s="$steps" -v a="$at" -v w="$save" \
      'BEGIN { r = c - s - a - w; print (r > 0 ? r : 0) }')
    s=${parts[cpm.$codec.sync]:-0}
    k=$(awk -v k="${parts[cpm.$codec.syncs]:-0}" -v e="$epochs" 'BEGIN { print k * e }')
    printf '%-6s %8.2f %8.2f %8.2f %8.2f %10.3f' "$codec" "$steps" "$rest" "$at" "$save" "$s"
    for p in 4 8 16; do
      awk -v st="$steps" -v r="$rest" -v a="$at" -v w="$save" -v s="$s" -v k="$k" -v p="$p" \
        -v base="${parts[cpm.$codec.wall]}" \
        'BEGIN { n = p / 2; t = st / p + r / p + a * n / p + k * s * (2 * n + 1) + w
                 printf " %5.1fs %.1fx", t, base / t }'
    done
    echo
  done
fi
[ "${KEEP:-0}" = 1 ] || rm -rf "$work"/scale-*.shards
