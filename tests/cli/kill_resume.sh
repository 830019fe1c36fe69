#!/usr/bin/env bash
# Kill test: SIGKILL `train --checkpoint` at random moments (no chance to clean up: a checkpoint may
# be half-written under its temporary name, the lock file stays), resume each time from whatever
# checkpoint is there, and check that the model finally written is byte-identical to the
# uninterrupted run's, for the linear learners (ldm, svm) and the CPM. A kill waits for the first
# checkpoint, so every learner resumes at least once. KILLS (default 4) kills per learner; SEED
# picks the moments (default: random, printed so that a failure can be replayed).
# Usage: tests/cli/kill_resume.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
kills=${KILLS:-4}
seed=${SEED:-$RANDOM}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_kill.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
RANDOM=$seed
echo "kill_resume: $kills kills per learner, SEED=$seed"

fail() {
  echo "FAIL (SEED=$seed): $*" >&2
  exit 1
}

"$bin" gen --like kdda --rows 40000 --features 20000 --nnz 20 --seed 8 --block-rows 500 \
  -o "$work/d.shards" > /dev/null
linear=(-d "$work/d.shards" --seed 5 --epochs 12 --avg-start-epochs 5 --window-blocks 2 --threads 2)
cpm=(-d "$work/d.shards" --seed 5 -k 5 --entropy 2 --epochs 40 --window-blocks 2 --threads 2)

for algo in ldm svm cpm; do
  if [ $algo = cpm ]; then
    args=("${cpm[@]}")
    every=20000
  else
    args=("${linear[@]}")
    every=3000
  fi
  start=$(date +%s%N)
  "$bin" train --algo $algo "${args[@]}" -o "$work/ref.$algo" > /dev/null 2>&1
  ms=$((($(date +%s%N) - start) / 1000000))
  resumed=0
  for k in $(seq "$kills"); do
    resume=()
    if [ -e "$work/ck" ]; then
      resume=(--resume "$work/ck")
      resumed=$((resumed + 1))
    fi
    "$bin" train --algo $algo "${args[@]}" -o "$work/m.$algo" "${resume[@]}" \
      --checkpoint "$work/ck" --checkpoint-every $every > /dev/null 2> "$work/err" &
    pid=$!
    started=$(date +%s%N)
    # A moment within the first 90 % of an uninterrupted run, but not before a checkpoint exists.
    moment=$(awk -v r=$RANDOM -v ms="$ms" 'BEGIN { printf "%d", r / 32768 * ms * 0.9 }')
    while kill -0 $pid 2> /dev/null; do
      if [ $((($(date +%s%N) - started) / 1000000)) -ge "$moment" ] && [ -e "$work/ck" ]; then
        kill -KILL $pid 2> /dev/null || true
        break
      fi
      sleep 0.01
    done
    { wait $pid; } 2> /dev/null || true
    [ ! -e "$work/m.$algo" ] || break  # it finished before the kill: nothing left to resume
  done
  resume=()
  if [ -e "$work/ck" ]; then
    resume=(--resume "$work/ck")
    resumed=$((resumed + 1))
  fi
  [ -e "$work/m.$algo" ] || "$bin" train --algo $algo "${args[@]}" -o "$work/m.$algo" \
    "${resume[@]}" --checkpoint "$work/ck" > /dev/null 2> "$work/err" ||
    fail "$algo: the last resume failed: $(cat "$work/err")"
  [ "$resumed" -ge 1 ] || fail "$algo: no run resumed a checkpoint (the run took $ms ms)"
  cmp -s "$work/ref.$algo" "$work/m.$algo" ||
    fail "$algo: killed $kills times and resumed: the model differs from the uninterrupted run's"
  echo "$algo: $kills kills ($resumed runs resumed a checkpoint): model identical (run: $ms ms)"
  rm -f "$work/ck" "$work/m.$algo"
done
echo "kill_resume: all checks passed"
