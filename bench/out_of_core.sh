#!/usr/bin/env bash
# Data larger than memory: KDD-size shards (zstd and raw) read inside a memory cgroup whose limit is
# smaller than the shards, beside the same runs with the data cached, and beside `cat` of the same
# files under the same limit (what the disk gives a plain sequential reader), in one table.
# For each codec: an epoch scan (scan_bench, 2 threads) and LDM, EPOCHS epochs (train, 2 threads,
# seed 1), each REPEATS times (a row is the median); once more LDM under the limit with
# --read-ahead 0 (the I/O stage off: each block read when a decoder first touches it). Every run
# under the limit starts with the shards' pages dropped from the page cache; the models trained
# under the limit must be byte-identical to the cached run's (checked with cmp).
# Needs root (cgroup v1 or v2, whichever the machine has; scripts/memory_cgroup.bash); the cgroup is
# removed at the end, also on failure.
# Usage: bench/out_of_core.sh [BUILD_DIR]   env: ROWS (8,407,752), WORK (/tmp/polymargin-ooc),
#        LIMIT_ZSTD / LIMIT_RAW (MiB; 700 / 1024), EPOCHS (3), REPEATS (3), READ_AHEAD (MiB, the
#        default of train), KEEP=1 keeps the data
set -euo pipefail
build=${1:-build}
bin=$build/polymargin
scan=$build/bench/scan_bench
rows=${ROWS:-8407752}
work=${WORK:-/tmp/polymargin-ooc}
epochs=${EPOCHS:-3}
repeats=${REPEATS:-3}
read_ahead=()
[ -z "${READ_AHEAD:-}" ] || read_ahead=(--read-ahead "$READ_AHEAD")
source "$(dirname "$0")/../scripts/memory_cgroup.bash"
trap cgroup_close EXIT
cgroup_open "polymargin-ooc-$$" || exit 1
mkdir -p "$work"

# measure [cgroup_run] CMD...: WALL (s) and RSS (peak, MiB) of one run (inside the cgroup).
measure() {
  local inside=()
  [ "$1" != cgroup_run ] || { inside=(cgroup_run); shift; }
  "${inside[@]}" /usr/bin/time -f '%e %M' -o "$work/time.log" "$@"
  read -r WALL rss_kb < "$work/time.log"
  RSS=$((rss_kb / 1024))
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
key() { jq -r ".$2" "$1"; }

text=$work/kdda-like.$rows.svm
for codec in zstd raw; do
  [ -s "$work/kdda.$codec.shards/manifest.json" ] && continue
  if [ ! -s "$text" ]; then
    echo "generating $rows rows of KDD-like text in $work ..." >&2
    "$bin" gen --like kdda --rows "$rows" --seed 2010 -o "$text"
  fi
  "$bin" convert "$text" -o "$work/kdda.$codec.shards" --codec "$codec" > /dev/null
done
rm -f "$text"

table=()
row() { table+=("$(printf '%-6s %-24s %9s %9s %7s %9s %9s %7s %8s %8s  %s' "$@")"); }

for codec in zstd raw; do
  shards=$work/kdda.$codec.shards
  files=("$shards"/*.pms "$shards/feature_maxabs.bin")
  bytes=$(cat "${files[@]}" | wc -c)
  mb=$(calc %.0f "$bytes / 1e6")
  limit=$([ "$codec" = zstd ] && echo "${LIMIT_ZSTD:-700}" || echo "${LIMIT_RAW:-1024}")
  cgroup_limit "$limit"
  features=$(jq -r .max_index "$shards/manifest.json")
  bound=$(((features + 2) * 16 / 1048576 + 256))  # W and A (doubles) + 256 MiB
  cold() { drop_file_cache "${files[@]}"; cgroup_run "$@"; }

  # cat of the same files, under the same limit, from a cold cache: the disk's sequential rate.
  cats=()
  for _ in $(seq "$repeats"); do
    drop_file_cache "${files[@]}"
    measure cgroup_run sh -c 'cat "$@" > /dev/null' _ "${files[@]}"
    cats+=("$WALL")
  done
  cat_s=$(median "${cats[@]}")
  cat_rate=$(calc %.0f "$mb / $cat_s")
  row "$codec" "cat (${mb} MB)" "" "$cat_s" "" "$cat_rate" "" "" "$RSS" "" "limit $limit MiB"

  # Epoch scans: seconds of the scan alone (scan_bench's own timing), disk MB/s under the limit.
  scan_time() { "$@" | sed -n 's/.* in \([0-9.]*\) s.*/\1/p'; }
  warm=() limited=()
  for _ in $(seq "$repeats"); do
    cat "${files[@]}" > /dev/null  # the cold run before dropped them
    warm+=("$(scan_time "$scan" "$shards" --threads 2)")
    limited+=("$(scan_time cold "$scan" "$shards" --threads 2)")
  done
  a=$(median "${warm[@]}") b=$(median "${limited[@]}")
  rate=$(calc %.0f "$mb / $b")
  row "$codec" "epoch scan" "$a" "$b" "$(calc %.2fx "$b / $a")" "$rate" "$cat_rate" \
    "$(calc %.0f%% "100 * $rate / $cat_rate")" "" "" ""

  # LDM: an epoch = the training loop's seconds / epochs; RSS of the whole command.
  ldm=(train --algo ldm -d "$shards" --epochs "$epochs" --seed 1 --threads 2 --no-final-pass
    --json)
  warm=() limited=() waits=() disk=() rss=() cached_disk=() cached_wait=()
  for r in $(seq "$repeats"); do
    cat "${files[@]}" > /dev/null
    measure "$bin" "${ldm[@]}" "${read_ahead[@]}" -o "$work/cached.model" > "$work/cached.json"
    warm+=("$(key "$work/cached.json" train_seconds)")
    cached_disk+=("$(key "$work/cached.json" disk_read_bytes)")
    cached_wait+=("$(key "$work/cached.json" read_wait_seconds)")
    drop_file_cache "${files[@]}"
    measure cgroup_run "$bin" "${ldm[@]}" "${read_ahead[@]}" -o "$work/limited.model" \
      > "$work/limited.json"
    cmp "$work/cached.model" "$work/limited.model" ||
      { echo "FAIL: the model under the limit differs from the cached run's" >&2; exit 1; }
    limited+=("$(key "$work/limited.json" train_seconds)")
    waits+=("$(key "$work/limited.json" read_wait_seconds)")
    disk+=("$(key "$work/limited.json" disk_read_bytes)")
    rss+=("$RSS")
  done
  a=$(calc %.2f "$(median "${warm[@]}") / $epochs") b=$(calc %.2f "$(median "${limited[@]}") / $epochs")
  disk_mb=$(calc %.0f "$(median "${disk[@]}") / $epochs / 1e6")
  row "$codec" "LDM epoch ($epochs epochs)" "$a" "$b" "$(calc %.2fx "$b / $a")" \
    "$(calc %.0f "$mb / $b")" "$cat_rate" "$(calc %.0f%% "100 * $mb / $b / $cat_rate")" \
    "$(median "${rss[@]}")" "$bound" \
    "wait $(calc %.2f "$(median "${waits[@]}") / $epochs") s, $disk_mb MB from disk an epoch (cached: $(calc %.2f "$(median "${cached_wait[@]}") / $epochs") s, $(calc %.0f "$(median "${cached_disk[@]}") / $epochs / 1e6") MB); same model"

  drop_file_cache "${files[@]}"
  measure cgroup_run "$bin" "${ldm[@]}" --read-ahead 0 -o "$work/limited.model" \
    > "$work/limited.json"
  cmp "$work/cached.model" "$work/limited.model" ||
    { echo "FAIL: the model with --read-ahead 0 differs from the cached run's" >&2; exit 1; }
  b=$(calc %.2f "$(key "$work/limited.json" train_seconds) / $epochs")
  disk_mb=$(calc %.0f "$(key "$work/limited.json" disk_read_bytes) / $epochs / 1e6")
  row "$codec" "  same, --read-ahead 0" "$a" "$b" "$(calc %.2fx "$b / $a")" \
    "$(calc %.0f "$mb / $b")" "$cat_rate" "$(calc %.0f%% "100 * $mb / $b / $cat_rate")" \
    "$RSS" "$bound" \
    "wait $(calc %.2f "$(key "$work/limited.json" read_wait_seconds) / $epochs") s, $disk_mb MB from disk an epoch; one run"
done

printf '\n%-6s %-24s %9s %9s %7s %9s %9s %7s %8s %8s  %s\n' codec "what ($rows rows)" "cached s" \
  "limit s" ratio "MB/s" "cat MB/s" "of cat" "RSS MiB" "bound" note
printf '%s\n' "${table[@]}"
echo "targets: under the limit an epoch within 1.3x of the cached epoch, or >= 70% of cat's MB/s;"
echo "         peak RSS within the bound (weights W and A + 256 MiB); the same model bytes"
[ -n "${KEEP:-}" ] || rm -rf "$work"
