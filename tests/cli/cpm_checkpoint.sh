#!/usr/bin/env bash
# `train --algo cpm` as a nightly job: a run stopped anywhere (first window, mid-pass, at a pass's
# end, chained stops, a real SIGTERM) and resumed writes a model byte-identical to the uninterrupted
# run's, double- and single-sided, with 1 and 2 threads, float accumulators, one-vs-one; a
# checkpoint of other data or options, a model or a linear checkpoint, a corrupt file are refused;
# the model's and the checkpoint's locks refuse a second job; --metrics-json has its keys (on
# success, on a stop, after a resume) and --validation its metrics; --warm-start is refused.
# Usage: tests/cli/cpm_checkpoint.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_cpm_checkpoint.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"

# 6000 rows in blocks of 250, windows of 2 blocks: 12 windows (batches) of 500 rows a pass.
"$bin" gen --model polytope --rows 6000 --features 500 --nnz 10 --seed 4 --block-rows 250 \
  -o "$work/d.shards" > /dev/null
"$bin" gen --model polytope --rows 6000 --features 500 --nnz 10 --seed 5 --block-rows 250 \
  -o "$work/other.shards" > /dev/null
# Three classes: every third row of a polytope set relabelled 2.
"$bin" gen --model polytope --rows 4500 --features 400 --nnz 10 --seed 6 -o "$work/mc.svm" \
  --test-rows 900 --test-output "$work/mc.t.svm" > /dev/null
awk 'NR % 3 == 0 { $1 = 2 } 1' "$work/mc.svm" > "$work/mc3.svm"
awk 'NR % 3 == 0 { $1 = 2 } 1' "$work/mc.t.svm" > "$work/mc3.t.svm"
"$bin" convert "$work/mc3.svm" --block-rows 250 -o "$work/mc.shards" > /dev/null
opts=(-k 4 --entropy 2 -c 0.1 --epochs 3 --window-blocks 2)
common=(--algo cpm -d "$work/d.shards" --seed 3 "${opts[@]}")

# stops NAME "TRAIN ARGS" STOP...: the run with TRAIN ARGS stopped after each STOP rows (one run
# each) and resumed gives the uninterrupted run's model.
stops() {
  local name=$1
  read -r -a args <<< "$2"
  shift 2
  "$bin" train "${args[@]}" -o "$work/ref.$name" > /dev/null 2>&1
  for stop in "$@"; do
    expect 6 "checkpoint written to $work/ck" train "${args[@]}" -o "$work/m" \
      --checkpoint "$work/ck" --stop-after-rows "$stop"
    [ -s "$work/ck" ] || fail "$name: no checkpoint after --stop-after-rows $stop"
    [ ! -e "$work/m" ] || fail "$name: a stopped run wrote a model"
    "$bin" train "${args[@]}" -o "$work/m" --resume "$work/ck" > /dev/null 2> "$work/resume.err" ||
      fail "$name: resume after $stop failed: $(cat "$work/resume.err")"
    grep -q "resuming from $work/ck" "$work/resume.err" || fail "$name: resume not reported"
    cmp -s "$work/ref.$name" "$work/m" || fail "$name: stopped at $stop and resumed: other model"
    rm -f "$work/m" "$work/ck"
  done
  echo "$name: stopped at $* and resumed: model identical"
}

# Checkpointing alone changes nothing, and the checkpoint goes once the model is written.
"$bin" train "${common[@]}" --threads 2 -o "$work/ref" > /dev/null 2>&1
"$bin" train "${common[@]}" --threads 2 -o "$work/ck.m" --checkpoint "$work/ck" \
  --checkpoint-every 1000 > /dev/null 2>&1
cmp -s "$work/ref" "$work/ck.m" || fail "checkpointing changed the model"
[ ! -e "$work/ck" ] || fail "checkpoint left after a completed run"
[ ! -e "$work/ck.m.lock" ] && [ ! -e "$work/ck.lock" ] || fail "lock files left"

# The first window, mid-pass 2, the end of pass 1 (6000), late in the last pass.
stops double-2threads "${common[*]} --threads 2" 500 7000 6000 17500
stops outer+1-1thread "${common[*]} --sides outer=+1 --threads 1" 3000 12500
stops outer-1-2threads "${common[*]} --sides outer=-1 --threads 2" 9500
stops float "${common[*]} --precision float --threads 2" 4000 15000
stops multiclass "--algo cpm -d $work/mc.shards --seed 2 ${opts[*]} --threads 2" 1500 6000 10000
# Without an entropy floor each side's ASSIGN history is an empty array of the checkpoint, placed
# where the next machine's weights begin.
stops multiclass-no-entropy "--algo cpm -d $work/mc.shards --seed 2 -k 4 -c 0.1 --epochs 3 --window-blocks 2" 1500
# A checkpoint that can be read only once (a pipe) resumes too: read whole, not header first.
expect 6 "checkpoint written" train "${common[@]}" --threads 2 -o "$work/m" \
  --checkpoint "$work/ck" --stop-after-rows 7000
"$bin" train "${common[@]}" --threads 2 -o "$work/m" --resume <(cat "$work/ck") > /dev/null \
  2> "$work/pipe.err" || fail "resume from a pipe failed: $(cat "$work/pipe.err")"
cmp -s "$work/ref" "$work/m" || fail "resumed from a pipe: other model"
rm -f "$work/m" "$work/ck"
# The model does not depend on the thread count (so a resume may use another one).
"$bin" train "${common[@]}" --threads 1 -o "$work/m1" > /dev/null 2>&1
cmp -s "$work/ref" "$work/m1" || fail "1 and 2 threads: other models"
cmp -s "$work/ref" "$work/ref.double-2threads" || fail "the reference runs differ"

# Chained: each run continues the last one's checkpoint, with periodic checkpoints on the way.
for stop in 2500 8000 12000 16500; do
  resume=()
  [ -e "$work/ck" ] && resume=(--resume "$work/ck")
  expect 6 "checkpoint written" train "${common[@]}" -o "$work/m" "${resume[@]}" \
    --checkpoint "$work/ck" --checkpoint-every 1500 --stop-after-rows $stop
done
"$bin" train "${common[@]}" -o "$work/m" --resume "$work/ck" --checkpoint "$work/ck" \
  > /dev/null 2>&1
cmp -s "$work/ref" "$work/m" || fail "four stops, four resumes: other model"
[ ! -e "$work/ck" ] || fail "checkpoint left after the resumed run completed"
rm -f "$work/m"
echo "chained stops: model identical"

# --- refusals ---------------------------------------------------------------------------------
expect 6 "checkpoint written" train "${common[@]}" -o "$work/m" --checkpoint "$work/ck" \
  --stop-after-rows 3000
expect 2 "other options (seed 3 -> 4" train --algo cpm -d "$work/d.shards" --seed 4 "${opts[@]}" \
  -o "$work/m" --resume "$work/ck"
expect 2 "faces 4 -> 5" train --algo cpm -d "$work/d.shards" --seed 3 -k 5 --entropy 2 -c 0.1 \
  --epochs 3 --window-blocks 2 -o "$work/m" --resume "$work/ck"
expect 2 "precision \"double\" -> \"float\"" train "${common[@]}" --precision float -o "$work/m" \
  --resume "$work/ck"
expect 3 "other training data" train --algo cpm -d "$work/other.shards" --seed 3 "${opts[@]}" \
  -o "$work/m" --resume "$work/ck"
expect 3 "not a CPM training checkpoint (a file of kind 'cpm')" train "${common[@]}" -o "$work/m" \
  --resume "$work/ref"
"$bin" train -d "$work/d.shards" -o "$work/ldm.m" --checkpoint "$work/ldm.ck" --stop-after-rows 1000 \
  > /dev/null 2>&1 || true
expect 3 "a file of kind 'checkpoint'" train "${common[@]}" -o "$work/m" --resume "$work/ldm.ck"
expect 3 "not a training checkpoint" train -d "$work/d.shards" -o "$work/m" --resume "$work/ck"
cp "$work/ck" "$work/bad.ck"
printf '\x55' | dd of="$work/bad.ck" bs=1 seek=3000 conv=notrunc 2> /dev/null
expect 3 "checksum mismatch" train "${common[@]}" -o "$work/m" --resume "$work/bad.ck"
expect 4 "cannot open" train "${common[@]}" -o "$work/m" --resume "$work/missing.ck"
expect 2 "needs --checkpoint" train "${common[@]}" -o "$work/m" --stop-after-rows 10
expect 2 "needs --checkpoint" train "${common[@]}" -o "$work/m" --checkpoint-every 10
expect 2 "must be different files" train "${common[@]}" -o "$work/m" --checkpoint "$work/m"
expect 2 "--warm-start is not supported for --algo cpm" train "${common[@]}" -o "$work/m" \
  --warm-start "$work/ref"
grep -qF -- "--resume" "$work/stderr" || fail "the --warm-start refusal does not point to --resume"
[ ! -e "$work/m" ] || fail "a refused run wrote a model"
"$bin" train "${common[@]}" -o "$work/m" --resume "$work/ck" > /dev/null 2>&1
cmp -s "$work/ref" "$work/m" || fail "the refusals spoilt the checkpoint"
rm -f "$work/m" "$work/ck"

# --- locks: another process holding MODEL.lock or CHECKPOINT.lock (flock(1) on fd 9, then that
# process becomes `sleep`) refuses the job before any work --------------------------------------
for held in m ck; do
  hold_lock "$work/$held.lock"
  what=$([ $held = m ] && echo "model $work/m" || echo "checkpoint $work/ck")
  expect 4 "$what is being written by another job" train "${common[@]}" -o "$work/m" \
    --checkpoint "$work/ck"
  [ ! -e "$work/m" ] && [ ! -e "$work/ck" ] || fail "a job refused by a lock wrote files"
  kill -KILL $holder
  { wait $holder; } 2> /dev/null || true
done
"$bin" train "${common[@]}" -o "$work/m" --checkpoint "$work/ck" > /dev/null 2>&1 ||
  fail "a stale lock file blocked"
rm -f "$work/m"
echo "refusals and locks: ok"

# --- --metrics-json and --validation ------------------------------------------------------------
"$bin" gen --model polytope --rows 6000 --features 500 --nnz 10 --seed 4 --test-rows 1500 \
  -o "$work/d.svm" --test-output "$work/t.svm" > /dev/null
"$bin" train --algo cpm -d "$work/d.svm" --seed 3 "${opts[@]}" -o "$work/v.m" \
  --validation "$work/t.svm" --metrics-json "$work/v.json" --checkpoint "$work/v.ck" \
  > "$work/v.out" 2> /dev/null
m="$work/v.json"
has_keys "$m" . status exit_code command algorithm data data_checksum rows features nnz config \
  model_path model_checksum validation_data validation_data_checksum seconds checkpoints_written \
  passes validation
has_keys "$m" .seconds open train learn read_wait save validation total
[ "$(jq -r .status "$m")" = ok ] && [ "$(jq .exit_code "$m")" = 0 ] || fail "status: $(cat "$m")"
[ "$(jq .rows "$m")" = 6000 ] && [ "$(jq .validation.rows "$m")" = 1500 ] || fail "rows"
[ "$(jq .checkpoints_written "$m")" = 2 ] || fail "a checkpoint after passes 1 and 2 expected"
jq -e '.validation.accuracy > 0.7 and .validation.auc > 0.6 and .validation.auc <= 1' "$m" \
  > /dev/null || fail "validation metrics: $(jq -c .validation "$m")"
jq -e '.config.faces == 4 and .config.seed == 3 and .config.algorithm == "cpm"' "$m" > /dev/null ||
  fail "config: $(jq -c .config "$m")"
sum=$(tail -c 8 "$work/v.m" | od -An -tx8 | tr -d ' \n')
[ "$(jq -r .model_checksum "$m")" = "xxh64:$sum" ] || fail "model_checksum is not the file's"
grep -q "validation: 1500 rows, accuracy .*, AUC" "$work/v.out" || fail "no validation line"
# Interrupted, then resumed: status, the stop, and where the resumed run began.
rm -f "$work/v.m"
expect 6 "checkpoint written" train --algo cpm -d "$work/d.svm" --seed 3 "${opts[@]}" \
  -o "$work/v.m" --checkpoint "$work/v.ck" --stop-after-rows 8000 --metrics-json "$m"
jq -e '.status == "interrupted" and .exit_code == 6 and .interrupted.signal == "--stop-after-rows"
  and .interrupted.pass == 1 and .interrupted.rows >= 8000' "$m" > /dev/null ||
  fail "interrupted metrics: $(cat "$m")"
"$bin" train --algo cpm -d "$work/d.svm" --seed 3 "${opts[@]}" -o "$work/v.m" \
  --resume "$work/v.ck" --metrics-json "$m" > /dev/null 2>&1
jq -e '.status == "ok" and .resumed_from.pass == 1 and .resumed_from.rows == .interrupted.rows?
  // true' "$m" > /dev/null || fail "resumed metrics: $(cat "$m")"
jq -e '.resumed_from.rows >= 8000 and .resumed_from.checkpoint != null' "$m" > /dev/null ||
  fail "resumed_from: $(jq -c .resumed_from "$m")"
# One-vs-one: validation accuracy (no AUC for three classes).
"$bin" train --algo cpm -d "$work/mc.shards" --seed 2 "${opts[@]}" -o "$work/mc.m" \
  --validation "$work/mc3.t.svm" --metrics-json "$m" > /dev/null 2>&1
jq -e '.validation.rows == 900 and .validation.accuracy > 0.4 and (.validation | has("auc") | not)' \
  "$m" > /dev/null || fail "one-vs-one validation: $(jq -c .validation "$m")"
# A failure is recorded too.
expect 3 "not a CPM training checkpoint" train "${common[@]}" -o "$work/f.m" \
  --resume "$work/ldm.ck" --metrics-json "$m"
jq -e '.status == "error" and .exit_code == 3 and (.error | length > 0)' "$m" > /dev/null ||
  fail "error metrics: $(cat "$m")"
echo "metrics: ok"

# --- a real SIGTERM: the batch finished, the checkpoint written, exit 6; without --checkpoint: 143
long=(--algo cpm -d "$work/d.shards" --seed 3 -k 4 --entropy 2 -c 0.1 --iterations 400000000
  --window-blocks 2 --threads 2)
"$bin" train "${long[@]}" -o "$work/l.m" --checkpoint "$work/l.ck" > /dev/null 2> "$work/term.err" &
term_when_logged $! "$work/term.err" "^pass 1:"
[ $rc -eq 6 ] || fail "SIGTERM: exit $rc, expected 6: $(cat "$work/term.err")"
grep -q "interrupted by SIGTERM: checkpoint written to $work/l.ck" "$work/term.err" ||
  fail "SIGTERM message: $(cat "$work/term.err")"
[ -s "$work/l.ck" ] && [ ! -e "$work/l.m" ] || fail "SIGTERM: checkpoint missing or model written"
# The checkpoint resumes (and stops again a few windows later).
expect 6 "resuming from $work/l.ck" train "${long[@]}" -o "$work/l.m" --resume "$work/l.ck" \
  --checkpoint "$work/l.ck" --stop-after-rows 1 --metrics-json "$work/l.json"
jq -e '.resumed_from.rows > 0 and .interrupted.rows == .resumed_from.rows' "$work/l.json" \
  > /dev/null || fail "the SIGTERM checkpoint's resume: $(cat "$work/l.json")"
"$bin" train "${long[@]}" -o "$work/n.m" > /dev/null 2> "$work/term2.err" &
term_when_logged $! "$work/term2.err" "^pass 1:"
[ $rc -eq 143 ] || fail "SIGTERM without --checkpoint: exit $rc, expected 143"
grep -q "no checkpoint written" "$work/term2.err" || fail "message: $(cat "$work/term2.err")"
[ ! -e "$work/n.m" ] && [ ! -e "$work/n.m.lock" ] || fail "files left: $(ls "$work")"
# --- a resumed run holds U once, as the uninterrupted run does: the checkpoint's U is read
# straight into the trainer (it held both, 1.9x the peak, before). U here: 2 sides x 2^20 slots x
# K = 10 doubles = 160 MiB; the rest of the run is a few MiB. Slack: half of U.
"$bin" gen --model polytope --rows 3000 --features 1048575 --nnz 10 --seed 7 \
  -o "$work/wide.shards" > /dev/null
resume_peak_within $((80 * 1024)) 3000 --algo cpm -d "$work/wide.shards" -k 10 --epochs 2 \
  --threads 1 --precision double
echo "cpm_checkpoint: all checks passed"
