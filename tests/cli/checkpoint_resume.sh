#!/usr/bin/env bash
# `train --checkpoint / --resume` and SIGTERM: a run stopped anywhere (mid-epoch, at an epoch's end,
# during the averaging phase, by a real SIGTERM) and resumed writes a model byte-identical to the
# uninterrupted run's; a checkpoint of other data or options, a model file, a corrupt or another
# version's checkpoint are refused; two jobs never write the same model or checkpoint at once; the
# lock of a killed job does not block the next one.
# Usage: tests/cli/checkpoint_resume.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_checkpoint.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"


# 6000 rows in blocks of 250, windows of 2 blocks: 12 windows an epoch, so stops fall mid-epoch.
"$bin" gen --like kdda --rows 6000 --features 3000 --nnz 12 --seed 4 --block-rows 250 \
  -o "$work/d.shards" > /dev/null
"$bin" gen --like kdda --rows 6000 --features 3000 --nnz 12 --seed 5 --block-rows 250 \
  -o "$work/other.shards" > /dev/null
opts=(--epochs 4 --avg-start-epochs 2 --window-blocks 2 --threads 2)
common=(-d "$work/d.shards" --seed 3 "${opts[@]}")

for algo in ldm svm; do
  "$bin" train --algo $algo "${common[@]}" -o "$work/ref.$algo" 2> /dev/null > /dev/null
  # Checkpointing alone changes nothing, and the checkpoint goes once the model is written.
  "$bin" train --algo $algo "${common[@]}" -o "$work/ck.$algo" --checkpoint "$work/ck" \
    --checkpoint-every 1000 > /dev/null 2>&1
  cmp -s "$work/ref.$algo" "$work/ck.$algo" || fail "$algo: checkpointing changed the model"
  [ ! -e "$work/ck" ] || fail "$algo: checkpoint left after a completed run"

  # Stops at: the first window, mid-epoch 1, the end of epoch 1 (6000), mid-epoch 3 (averaging
  # from 12000); then chained stops on one checkpoint.
  for stop in 500 3500 6000 14000; do
    expect 6 "checkpoint written to $work/ck" train --algo $algo "${common[@]}" -o "$work/m" \
      --checkpoint "$work/ck" --stop-after-rows $stop
    [ -s "$work/ck" ] || fail "$algo: no checkpoint after --stop-after-rows $stop"
    [ ! -e "$work/m" ] || fail "$algo: a stopped run wrote a model"
    "$bin" train --algo $algo "${common[@]}" -o "$work/m" --resume "$work/ck" --json \
      > "$work/resume.json" 2> "$work/resume.err" ||
      fail "$algo: resume after $stop failed: $(cat "$work/resume.err")"
    grep -q "resuming from" "$work/resume.err" || fail "resume not reported"
    # Its speed is of the rows it learnt (24000 - stop), not of the whole run's.
    jq -e --argjson left $((24000 - stop)) \
      '(.rows_per_second * .train_seconds - $left) | fabs < 0.01 * $left' "$work/resume.json" \
      > /dev/null || fail "$algo: resumed at $stop: rows_per_second is not of the rows learnt"
    cmp -s "$work/ref.$algo" "$work/m" || fail "$algo: stopped at $stop and resumed: other model"
    rm -f "$work/m" "$work/ck"
  done

  # Resumed at an epoch's end (6000 rows: all of epoch 1) and mid-epoch (3500): no line for the
  # epoch that was done before the checkpoint, a speed of the rows learnt in the one it resumed in
  # (not of the whole epoch's in a fraction of its time), and the summary says where it resumed.
  for stop in 6000 3500; do
    expect 6 "checkpoint written" train --algo $algo "${common[@]}" -o "$work/m" \
      --checkpoint "$work/ck" --stop-after-rows $stop
    "$bin" train --algo $algo "${common[@]}" -o "$work/m" --resume "$work/ck" \
      > "$work/resume.out" 2> "$work/resume.err" ||
      fail "$algo: resume after $stop failed: $(cat "$work/resume.err")"
    if [ $stop = 6000 ]; then
      grep -q "^epoch 1/4" "$work/resume.err" &&
        fail "$algo: resumed after epoch 1, a line for epoch 1: $(cat "$work/resume.err")"
      where="resumed after epoch 1"
    else
      where="resumed in epoch 1, after its row 3500"
    fi
    # Every epoch line's speed is below 1000 M rows/s (an epoch learnt in no time was 'millions').
    awk '/^epoch [0-9]+\/4: / { split($0, f, ", "); if (f[2] + 0 > 1000) bad = 1 } END { exit bad }' \
      "$work/resume.err" || fail "$algo: resumed at $stop: an epoch's speed: $(cat "$work/resume.err")"
    grep -q "x 4 epochs ($where) in" "$work/resume.out" ||
      fail "$algo: resumed at $stop: the summary: $(cat "$work/resume.out")"
    cmp -s "$work/ref.$algo" "$work/m" || fail "$algo: resumed at $stop: other model"
    rm -f "$work/m" "$work/ck"
  done
  # A stop requested at the last epoch's end finds nothing left to stop: the model is written.
  "$bin" train --algo $algo "${common[@]}" -o "$work/m" --checkpoint "$work/ck" \
    --stop-after-rows 24000 > /dev/null 2>&1 || fail "$algo: a stop at the run's end stopped it"
  cmp -s "$work/ref.$algo" "$work/m" || fail "$algo: stop at the end: other model"
  [ ! -e "$work/ck" ] || fail "$algo: checkpoint left after a completed run"
  rm -f "$work/m"
  for stop in 2500 9000 13500 19000; do  # each run continues the last one's checkpoint
    resume=()
    [ -e "$work/ck" ] && resume=(--resume "$work/ck")
    expect 6 "checkpoint written" train --algo $algo "${common[@]}" -o "$work/m" "${resume[@]}" \
      --checkpoint "$work/ck" --checkpoint-every 1000 --stop-after-rows $stop
  done
  "$bin" train --algo $algo "${common[@]}" -o "$work/m" --resume "$work/ck" \
    --checkpoint "$work/ck" > /dev/null 2>&1
  cmp -s "$work/ref.$algo" "$work/m" || fail "$algo: four stops, four resumes: other model"
  rm -f "$work/m"
done

# --- a checkpoint that can be read only once (a pipe) resumes too: read whole, not header first
expect 6 "checkpoint written" train "${common[@]}" -o "$work/m" --checkpoint "$work/ck" \
  --stop-after-rows 3500
"$bin" train "${common[@]}" -o "$work/m" --resume <(cat "$work/ck") > /dev/null 2> "$work/pipe.err" ||
  fail "resume from a pipe failed: $(cat "$work/pipe.err")"
cmp -s "$work/ref.ldm" "$work/m" || fail "resumed from a pipe: other model"
rm -f "$work/m" "$work/ck"

# --- refusals ---------------------------------------------------------------------------------
expect 6 "checkpoint written" train "${common[@]}" -o "$work/m" --checkpoint "$work/ck" \
  --stop-after-rows 3000
expect 2 "other options (seed 3 -> 4" train -d "$work/d.shards" --seed 4 "${opts[@]}" -o "$work/m" \
  --resume "$work/ck"
expect 2 "c 10.0 -> 1.0" train "${common[@]}" -c 1 -o "$work/m" --resume "$work/ck"
expect 3 "other training data" train -d "$work/other.shards" --seed 3 "${opts[@]}" -o "$work/m" \
  --resume "$work/ck"
expect 3 "not a training checkpoint" train "${common[@]}" -o "$work/m" --resume "$work/ref.ldm"
# The same rows in another form (a text file's, from standard input) are other blocks: said so.
"$bin" gen --like kdda --rows 3000 --features 300 --nnz 8 --seed 6 -o "$work/t.svm" > /dev/null
expect 6 "checkpoint written" train -d "$work/t.svm" --epochs 2 -o "$work/tm" \
  --checkpoint "$work/tck" --stop-after-rows 1000
rc=0
"$bin" train -d - --epochs 2 -o "$work/tm" --resume "$work/tck" < "$work/t.svm" > /dev/null \
  2> "$work/stdin.err" || rc=$?
[ "$rc" = 3 ] && grep -q "the same rows given in another form" "$work/stdin.err" ||
  fail "resume from stdin of the same text: exit $rc, $(cat "$work/stdin.err")"
# ... and a checkpoint where a model is expected.
for cmd in eval predict; do
  expect 3 "is a training checkpoint, not a model" $cmd -m "$work/ck" -d "$work/d.shards"
done
expect 3 "is a training checkpoint, not a model" export -m "$work/ck"
cp "$work/ck" "$work/bad.ck"
printf '\x55' | dd of="$work/bad.ck" bs=1 seek=5000 conv=notrunc 2> /dev/null
expect 3 "checksum mismatch" train "${common[@]}" -o "$work/m" --resume "$work/bad.ck"
# A byte of the header's kind damaged: still the checksum, not "a file of kind 'checkpoinX'" (the
# header is believed only after the checksum).
cp "$work/ck" "$work/bad.ck"
at=$(grep -abo '"kind":"checkpoint"' "$work/bad.ck" | head -1 | cut -d: -f1)
printf 'X' | dd of="$work/bad.ck" bs=1 seek=$((at + 17)) conv=notrunc 2> /dev/null
expect 3 "checksum mismatch" train "${common[@]}" -o "$work/m" --resume "$work/bad.ck"
expect 4 "cannot open the checkpoint $work/missing.ck (--resume): no such file" train "${common[@]}" -o "$work/m" \
  --resume "$work/missing.ck"
expect 2 "needs --checkpoint" train "${common[@]}" -o "$work/m" --checkpoint-every 10
expect 2 "--checkpoint-every must be" train "${common[@]}" -o "$work/m" --checkpoint "$work/c2" \
  --checkpoint-every 10x
expect 2 "must be different files" train "${common[@]}" -o "$work/m" --checkpoint "$work/m"
# A checkpoint is replaced and removed: a FIFO (or a device) is refused, and left as it was.
mkfifo "$work/ck.fifo"
expect 2 "is not a regular file" train "${common[@]}" -o "$work/m" --checkpoint "$work/ck.fifo"
[ -p "$work/ck.fifo" ] || fail "the FIFO given as --checkpoint is gone"
[ ! -e "$work/m" ] || fail "a refused run wrote a model"
"$bin" train "${common[@]}" -o "$work/m" --resume "$work/ck" > /dev/null 2>&1
cmp -s "$work/ref.ldm" "$work/m" || fail "the refusals spoilt the checkpoint"
rm -f "$work/m" "$work/ck"

# --- a real SIGTERM: finish the batch, checkpoint, exit 6; without --checkpoint: 143 ----------
"$bin" gen --like kdda --rows 60000 --features 20000 --nnz 20 --seed 6 --block-rows 500 \
  -o "$work/big.shards" > /dev/null
big=(-d "$work/big.shards" --seed 2 --epochs 30 --avg-start-epochs 10 --window-blocks 2 --threads 2)
# Runs of a few seconds (30 epochs of this set take well under one), for the signals and locks
# below to meet a job still learning.
hold=(-d "$work/big.shards" --seed 2 --epochs 200 --avg-start-epochs 10 --window-blocks 2 --threads 2)
"$bin" train "${hold[@]}" -o "$work/hold.ref" > /dev/null 2>&1
"$bin" train "${hold[@]}" -o "$work/big.m" --checkpoint "$work/big.ck" --checkpoint-every 20000 \
  > /dev/null 2> "$work/term.err" &
pid=$!
for _ in $(seq 200); do [ -e "$work/big.ck" ] && break; sleep 0.05; done
[ -e "$work/big.ck" ] || fail "no periodic checkpoint appeared"
kill -TERM $pid
rc=0
wait $pid || rc=$?
[ $rc -eq 6 ] || fail "SIGTERM: exit $rc, expected 6: $(cat "$work/term.err")"
grep -q "interrupted by SIGTERM: checkpoint written to $work/big.ck" "$work/term.err" ||
  fail "SIGTERM message: $(cat "$work/term.err")"
[ ! -e "$work/big.m" ] || fail "SIGTERM: a model was written"
"$bin" train "${hold[@]}" -o "$work/big.m" --resume "$work/big.ck" > /dev/null 2>&1
cmp -s "$work/hold.ref" "$work/big.m" || fail "SIGTERM and resume: other model"

# A run long enough to be signalled while it learns, however fast the machine: wait for its first
# epoch line, then stop it.
long=(-d "$work/big.shards" --seed 2 --epochs 2000 --window-blocks 2 --threads 2)
"$bin" train "${long[@]}" -o "$work/big.n" > /dev/null 2> "$work/term2.err" &
term_when_logged $! "$work/term2.err" "^epoch 1/"
[ $rc -eq 143 ] || fail "SIGTERM without --checkpoint: exit $rc, expected 143"
grep -q "no checkpoint written" "$work/term2.err" || fail "message: $(cat "$work/term2.err")"
[ ! -e "$work/big.n" ] && [ ! -e "$work/big.n.lock" ] || fail "files left: $(ls "$work")"

# --- locks: the second writer of a model or checkpoint is refused ------------------------------
# The first job runs a few seconds (hold), so that the second attempts certainly meet it.
"$bin" train "${hold[@]}" -o "$work/big.m2" --checkpoint "$work/big.ck2" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do [ -e "$work/big.m2.lock" ] && break; sleep 0.05; done
expect 4 "being written by another job" train "${big[@]}" -o "$work/big.m2"
expect 4 "checkpoint $work/big.ck2 is being written by another job" train "${big[@]}" \
  -o "$work/other.m" --checkpoint "$work/big.ck2"
wait $pid || fail "the first job failed"
cmp -s "$work/hold.ref" "$work/big.m2" || fail "the first job's model was disturbed"
[ ! -e "$work/big.m2.lock" ] || fail "lock file left after the job"
# Another process holding the lock the same way (flock(1) on fd 9, then that process becomes
# `sleep`); once it is killed, the lock file it leaves behind blocks nothing.
hold_lock "$work/m.lock"
expect 4 "being written by another job" train "${common[@]}" -o "$work/m"
kill -KILL $holder
{ wait $holder; } 2> /dev/null || true
[ -e "$work/m.lock" ] || fail "the killed holder's lock file is gone (the test proves nothing)"
"$bin" train "${common[@]}" -o "$work/m" > /dev/null 2>&1 || fail "a stale lock file blocked"
# --- durability: after a model or checkpoint is renamed into place, its directory is synced -------
# (strace -y names the descriptor fsync was given); skipped where strace cannot trace.
if strace -f -o /dev/null true 2> /dev/null; then
  sync_dir=$(realpath "$work")/sync
  mkdir "$sync_dir"
  # (LeakSanitizer cannot run under ptrace: an ASan build checks leaks in every other test.)
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -y -e trace=fsync,rename,renameat,renameat2 -o "$sync_dir/trace" "$bin" train \
    "${common[@]}" -o "$sync_dir/m" --checkpoint "$sync_dir/ck" --checkpoint-every 1000 \
    > /dev/null 2>&1 || fail "train under strace failed"
  for name in m ck; do
    # Every rename to the name is followed by an fsync of the directory before any other rename.
    awk -v target="\"$sync_dir/$name\"" -v dir="<$sync_dir>" '
      index($0, "rename") { if (pending) bad = 1; pending = index($0, target) > 0; next }
      pending && index($0, "fsync(") && index($0, dir) { pending = 0; synced++ }
      END { exit !(synced > 0 && !bad && !pending) }' "$sync_dir/trace" ||
      fail "$name was renamed into place without an fsync of $sync_dir: $(grep -e rename -e "<$sync_dir>" "$sync_dir/trace")"
  done
else
  echo "checkpoint_resume: strace cannot trace here; the directory sync is not checked"
fi
# --- a resumed run holds W and A once, as the uninterrupted run does: the checkpoint's are read
# straight into the trainer (it held both for a while, 1.5x the peak, before). W and A here: 2 x
# 2^22 slots of doubles = 64 MiB; the rest of the run is a few MiB. Slack: a quarter of them.
"$bin" gen --rows 3000 --features 4194303 --nnz 10 --seed 7 -o "$work/wide.shards" > /dev/null
resume_peak_within $((16 * 1024)) 3000 -d "$work/wide.shards" --epochs 2 --threads 1
echo "checkpoint_resume: all checks passed"
