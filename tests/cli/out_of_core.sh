#!/usr/bin/env bash
# Data larger than memory: train inside a memory cgroup whose limit (48 MiB) is smaller than the
# shards (raw and zstd), from a cold page cache, gives the same model bytes as the run with
# everything cached, with the I/O stage on (the default --read-ahead) and off (--read-ahead 0);
# the run reports the bytes it read from disk per epoch, and its peak RSS stays within the
# documented bound (weights W and A + 256 MiB). Exit 77 (skipped) where no memory cgroup can be
# made (not root, no memory controller) or /usr/bin/time is missing.
# Usage: tests/cli/out_of_core.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
source scripts/memory_cgroup.bash
source tests/cli/common.bash
[ -x /usr/bin/time ] || { echo "skipped: /usr/bin/time is missing" >&2; exit 77; }
# A sanitizer's shadow memory and quarantine do not fit a limit of tens of MiB (the process is
# OOM-killed): the Release suite runs this test. CMake names a sanitizer build's sanitizers in
# POLYMARGIN_SANITIZE; run by hand, the binary's libraries tell (read whole: `grep -q` would end
# the pipe early and `ldd`'s SIGPIPE would fail the test under pipefail).
libs=$(ldd "$bin" 2> /dev/null || true)
if [ -n "${POLYMARGIN_SANITIZE:-}" ] || [[ $libs =~ lib(a|t)san ]]; then
  echo "skipped: a sanitizer build cannot run inside the memory limit" >&2
  exit 77
fi
cgroup_open "polymargin-test-$$" || { echo "skipped: no memory cgroup" >&2; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_out_of_core.XXXXXX")
trap 'cgroup_close; rm -rf "$work"' EXIT
limit_mib=48
cgroup_limit "$limit_mib"

features=50000
for codec in raw zstd; do
  shards=$work/$codec.shards
  rows=$([ "$codec" = raw ] && echo 300000 || echo 700000)  # 87 MB of raw blocks, 60 MB of zstd
  "$bin" gen --like kdda --rows "$rows" --features "$features" --seed 3 --codec "$codec" \
    --block-rows 1024 -o "$shards" > /dev/null
  bytes=$(cat "$shards"/*.pms | wc -c)
  [ "$bytes" -gt $((limit_mib * 1048576)) ] ||
    fail "$codec: the shards ($bytes bytes) must be larger than the limit for this test"
  train=(train --algo ldm -d "$shards" --epochs 3 --seed 1 --threads 2 --window-blocks 2)
  "$bin" "${train[@]}" -o "$work/cached.model" --json > "$work/cached.json"
  for read_ahead in 64 0; do
    drop_file_cache "$shards"/*.pms
    rc=0
    cgroup_run /usr/bin/time -f %M -o "$work/rss" "$bin" "${train[@]}" --read-ahead "$read_ahead" \
      -o "$work/limited.model" --json --metrics-json "$work/metrics.json" > "$work/limited.json" ||
      rc=$?
    [ "$rc" -eq 0 ] || fail "$codec, --read-ahead $read_ahead: exit $rc under a $limit_mib MiB limit"
    cmp "$work/cached.model" "$work/limited.model" ||
      fail "$codec, --read-ahead $read_ahead: the model under the limit differs"
    [ "$(jq '.disk_read_bytes_per_epoch | length' "$work/limited.json")" -eq 3 ] ||
      fail "$codec: disk_read_bytes_per_epoch is not one number per epoch"
    [ "$(jq '.read_wait_seconds_per_epoch | length' "$work/limited.json")" -eq 3 ] ||
      fail "$codec: read_wait_seconds_per_epoch is not one number per epoch"
    # The shards cannot stay cached under the limit: every epoch reads from disk.
    jq -e '.disk_read_bytes_per_epoch | all(. > 0)' "$work/limited.json" > /dev/null ||
      fail "$codec, --read-ahead $read_ahead: an epoch under the limit read nothing from disk"
    has_keys "$work/metrics.json" .reading disk_read_bytes disk_read_bytes_per_epoch \
      read_wait_seconds_per_epoch
    rss_kib=$(cat "$work/rss")
    bound_kib=$(((features + 2) * 16 / 1024 + 256 * 1024))
    [ "$rss_kib" -le "$bound_kib" ] ||
      fail "$codec: peak RSS $rss_kib KiB above the bound $bound_kib KiB"
  done
  # Data that fits stays cached (its pages are not dropped): no epoch reads it from disk again. The
  # count is the process's, so a few pages of something else (a library page evicted while other
  # tests run) may show: an epoch may read at most 1 % of the shards' bytes, not 0.
  jq -e --argjson most $((bytes / 100)) \
    '.disk_read_bytes_per_epoch | length == 3 and all(. <= $most)' "$work/cached.json" \
    > /dev/null || fail "$codec: a cached run read from disk: $(cat "$work/cached.json")"
done
# Weights that the cgroup cannot hold (feature ids up to 3e6: 57 MiB of W and A in 48 MiB) are
# refused before allocating (exit 7, naming the cgroup), not killed by it.
printf '1 1:1 3000000:1\n-1 2:1\n' > "$work/wide.svm"
"$bin" convert "$work/wide.svm" -o "$work/wide.shards" > /dev/null
rc=0
cgroup_run "$bin" train -d "$work/wide.shards" -o "$work/wide.model" 2> "$work/wide.err" || rc=$?
[ "$rc" -eq 7 ] && grep -q "the memory cgroup leaves only" "$work/wide.err" ||
  fail "weights beyond the cgroup: exit $rc, $(cat "$work/wide.err")"
echo "out_of_core: ok"
