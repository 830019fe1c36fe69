#!/usr/bin/env bash
# train as an MPI job (Open MPI's mpirun; ldm and cpm): 2 and 3 ranks, each reading its part of
# every window, give the same model bytes run after run, within 0.003 of one learner's accuracy on
# a9a (mean of 3 seeds); rank 0 alone writes; a rank that fails (bad data, SIGKILL) ends the job
# within 30 s with a non-zero exit and a message naming it; a stopped job resumes byte for byte;
# `train --tune` shares its cells out between the ranks and makes the one-process search.
# Skipped (77) where mpirun is absent or the binary was built without MPI.
# Usage: tests/cli/mpi.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=$(realpath "${1:?usage: $0 POLYMARGIN_BINARY}")
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
cd "$work"

command -v mpirun > /dev/null || { echo "mpirun not found: skipped"; exit 77; }
mpi_test_env
mpi() { mpirun -np "$1" "$bin" "${@:2}"; }

"$bin" convert "$root/data/a9a.zst" -o a9a.shards > /dev/null 2>&1
"$bin" convert "$root/data/a9a.t.zst" -o a9a.t.shards > /dev/null 2>&1
if ! mpi 1 train -d a9a.shards -o probe.bin --epochs 1 --avg-start-epochs 0 > /dev/null 2> probe.err; then
  grep -q "this build has no MPI" probe.err && { echo "built without MPI: skipped"; exit 77; }
  fail "mpirun -np 1 train: $(cat probe.err)"
fi
accuracy() { "$bin" eval -m "$1" -d a9a.t.shards --json 2> /dev/null | jq -r '.accuracy'; }

# --- 1. one rank is the plain learner; 2 and 3 ranks are deterministic, rank 0 alone speaks -----------
"$bin" train -d a9a.shards -o plain.bin > /dev/null 2>&1
mpi 1 train -d a9a.shards -o one.bin > /dev/null 2>&1
cmp -s plain.bin one.bin || fail "mpirun -np 1: not the plain learner's model"
for r in 2 3; do
  mpi $r train -d a9a.shards -o a.bin --window-blocks 2 --metrics-json a.json > a.out 2> a.err ||
    fail "-np $r: $(cat a.err)"
  mpi $r train -d a9a.shards -o b.bin --window-blocks 2 > /dev/null 2>&1
  cmp -s a.bin b.bin || fail "-np $r: two runs gave different models"
  [ "$(grep -c '^model written to' a.out)" = 1 ] || fail "-np $r: not one summary: $(cat a.out)"
  [ "$(grep -c '^epoch 5/5' a.err)" = 1 ] || fail "-np $r: not one progress log: $(cat a.err)"
  jq -e ".data_parallel.ranks == $r and .data_parallel.syncs > 0 and .status == \"ok\"" a.json \
    > /dev/null || fail "-np $r: metrics: $(cat a.json)"
  # The exact pass is rank 0's over every training row, not over its part of each window.
  [ "$(jq .train.accuracy a.json)" = "$("$bin" eval -m a.bin -d a9a.shards --json | jq .accuracy)" ] \
    || fail "-np $r: training accuracy $(jq .train.accuracy a.json) is not eval's on the training rows"
  # Ranks and workers together.
  mpi $r train -d a9a.shards -o w.bin --window-blocks 2 --workers 2 --json > w.json 2> w.err ||
    fail "-np $r --workers 2: $(cat w.err)"
  jq -e ".ranks == $r and .workers == 2" w.json > /dev/null || fail "-np $r --workers 2: $(cat w.json)"
done

# --- 2. accuracy: mean of 3 seeds within 0.003 of one learner ----------------------------------------
# close R ARGS...: `train ARGS` on R ranks within 0.003 of one process (mean test accuracy, 3 seeds).
close() {
  local r=$1 one=0 many=0 seed
  shift
  for seed in 1 2 3; do
    "$bin" train -d a9a.shards -o s1.bin --seed $seed "$@" > /dev/null 2>&1
    mpi "$r" train -d a9a.shards -o sr.bin --seed $seed "$@" > /dev/null 2>&1
    one=$(awk -v s="$one" -v a="$(accuracy s1.bin)" 'BEGIN { print s + a }')
    many=$(awk -v s="$many" -v a="$(accuracy sr.bin)" 'BEGIN { print s + a }')
  done
  echo "a9a ${*:-ldm}: one process $(awk -v s="$one" 'BEGIN { print s / 3 }'), $r ranks $(awk -v s="$many" 'BEGIN { print s / 3 }')"
  awk -v a="$many" -v b="$one" 'BEGIN { exit !((a - b) / 3 < 0.003 && (b - a) / 3 < 0.003) }' ||
    fail "-np $r $*: accuracy $many / 3 against $one / 3"
}
for r in 2 3; do close $r; done

# --- 3. a stopped job resumes byte for byte; rank 0 wrote the checkpoint -----------------------------
mpi 2 train -d a9a.shards -o whole.bin --window-blocks 1 --epochs 3 > /dev/null 2>&1
rc=0
mpi 2 train -d a9a.shards -o part.bin --window-blocks 1 --epochs 3 --checkpoint ck.bin \
  --stop-after-rows 40000 > /dev/null 2> stop.err || rc=$?
[ "$rc" = 6 ] || fail "--stop-after-rows under mpirun exited $rc: $(cat stop.err)"
[ -f ck.bin ] && [ ! -e part.bin ] || fail "no checkpoint, or a model, after the stop"
mpi 2 train -d a9a.shards -o part.bin --window-blocks 1 --epochs 3 --checkpoint ck.bin \
  --resume ck.bin > /dev/null 2> resume.err || fail "resume under mpirun: $(cat resume.err)"
cmp -s whole.bin part.bin || fail "-np 2: the resumed model differs from the whole run's"

# --- 4. the CPM: one rank is the trainer; 2 and 3 ranks deterministic, as accurate, resumable ------
"$bin" train --algo cpm -d a9a.shards -o plain.bin > /dev/null 2>&1
mpi 1 train --algo cpm -d a9a.shards -o one.bin > /dev/null 2>&1
cmp -s plain.bin one.bin || fail "cpm, mpirun -np 1: not the plain trainer's model"
for r in 2 3; do
  mpi $r train --algo cpm -d a9a.shards -o a.bin --window-blocks 2 --metrics-json a.json \
    > a.out 2> a.err || fail "cpm -np $r: $(cat a.err)"
  mpi $r train --algo cpm -d a9a.shards -o b.bin --window-blocks 2 > /dev/null 2>&1
  cmp -s a.bin b.bin || fail "cpm -np $r: two runs gave different models"
  [ "$(grep -c '^model written to' a.out)" = 1 ] || fail "cpm -np $r: not one summary: $(cat a.out)"
  jq -e ".data_parallel.ranks == $r and .data_parallel.syncs > 0 and .status == \"ok\"" a.json \
    > /dev/null || fail "cpm -np $r: metrics: $(cat a.json)"
  mpi $r train --algo cpm -d a9a.shards -o w.bin --window-blocks 2 --workers 2 --json > w.json \
    2> w.err || fail "cpm -np $r --workers 2: $(cat w.err)"
  jq -e ".ranks == $r and .workers == 2" w.json > /dev/null || fail "cpm -np $r --workers 2: $(cat w.json)"
  # T = epochs x rows in as many passes, though the ranks' parts of the windows differ.
  jq -e ".passes * .rows == .iterations" w.json > /dev/null ||
    fail "cpm -np $r --workers 2: not one pass an epoch: $(jq -c '[.passes, .rows, .iterations]' w.json)"
  close $r --algo cpm
done
# In T's pass, with fewer steps left than ranks, a rank whose replica has none in an interval is
# not done with the run while the others make theirs: every rank ends at the same average (one
# that took itself for done left the others waiting in the next sum for ever).
{ zstd -dc "$root/data/a9a.zst" 2> /dev/null || true; } | head -690 > small.svm  # zstd: SIGPIPE
"$bin" convert small.svm -o small.shards --block-rows 100 > /dev/null 2>&1
timeout 120 mpirun -np 3 "$bin" train --algo cpm -d small.shards -o small.bin --window-blocks 1 \
  --sync-rows 100 --iterations 1000 --threads 1 --json > small.json 2> small.err ||
  fail "cpm -np 3, a few steps left at the end: exit $? (124: it hung): $(tail -3 small.err)"
jq -e '[.side_details[].steps] == [1000, 1000]' small.json > /dev/null ||
  fail "cpm -np 3, a few steps left at the end: steps $(jq -c '[.side_details[].steps]' small.json)"
mpi 2 train --algo cpm -d a9a.shards -o whole.bin --window-blocks 1 --epochs 3 > /dev/null 2>&1
rc=0
mpi 2 train --algo cpm -d a9a.shards -o cpart.bin --window-blocks 1 --epochs 3 --checkpoint cck.bin \
  --stop-after-rows 40000 > /dev/null 2> stop.err || rc=$?
[ "$rc" = 6 ] && [ -f cck.bin ] && [ ! -e cpart.bin ] || fail "cpm stop under mpirun: exit $rc: $(cat stop.err)"
mpi 2 train --algo cpm -d a9a.shards -o cpart.bin --window-blocks 1 --epochs 3 --checkpoint cck.bin \
  --resume cck.bin > /dev/null 2> resume.err || fail "cpm resume under mpirun: $(cat resume.err)"
cmp -s whole.bin cpart.bin || fail "cpm -np 2: the resumed model differs from the whole run's"

# The data of an MPI job come from files every rank reads, not from standard input.
rc=0
zstd -dc "$root/data/a9a.zst" | mpi 2 train -d - -o stdin.bin > /dev/null 2> stdin.err || rc=$?
[ "$rc" = 2 ] && grep -q "not from standard input" stdin.err || fail "stdin under mpirun: exit $rc: $(cat stdin.err)"
# An error that every rank meets is said once, by rank 0: the other ranks wait a second for rank
# 0's abort to end them before they speak, which ThreadSanitizer's slowness can outlast (there,
# rank 0 must still say it).
rc=0
mpi 3 train -d no-such.shards -o none.bin > /dev/null 2> none.err || rc=$?
said=$(grep -c "error:" none.err || true)
[[ ${POLYMARGIN_SANITIZE:-} == *thread* ]] && said=1
[ "$rc" = 4 ] && [ "$said" = 1 ] && grep -q "^rank 0 of 3: error: .*no-such.shards" none.err \
  || fail "an error of every rank: exit $rc, said other than once by rank 0: $(cat none.err)"
rc=0
mpi 3 train -d a9a.shards -o none.bin --bogus --metrics-json none.json > /dev/null 2>&1 || rc=$?
error='.error'
[[ ${POLYMARGIN_SANITIZE:-} == *thread* ]] && error='.error | sub("^rank [12] of 3: "; "")'  # as above
jq -e ".exit_code == 2 and ($error | startswith(\"train: unrecognised option\"))" none.json \
  > /dev/null || fail "an error of every rank: recorded other than by rank 0: $(cat none.json)"
# --stop-after-rows counts the rows of every rank, whatever their shares (3 ranks of 4-block
# windows: 2, 1 and 1 blocks), and the stop reports the job's rows.
rc=0
mpi 3 train --algo cpm -d a9a.shards -o st.bin --epochs 8 --window-blocks 4 --checkpoint st.ckpt \
  --stop-after-rows 70000 --metrics-json st.json > /dev/null 2> st.err || rc=$?
[ "$rc" = 6 ] && jq -e '.interrupted.rows >= 70000 and .interrupted.rows < 70000 + 32561' st.json > /dev/null \
  || fail "cpm -np 3 --stop-after-rows 70000: exit $rc: $(jq -c .interrupted st.json 2> /dev/null) $(cat st.err)"

# --- 5. a rank that fails ends the job ---------------------------------------------------------------
# Bad data that one rank alone reads: a byte of the last block's payload flipped (the shard file's
# header, index and size stay valid, so the job starts).
cp -r a9a.shards bad.shards
shard=$(ls bad.shards/*.pms | head -1)
size=$(stat -c %s "$shard")
printf '\xff' | dd of="$shard" bs=1 seek=$((size / 2)) conv=notrunc status=none
rc=0
start=$(date +%s)
timeout 60 mpirun -np 3 "$bin" train -d bad.shards -o bad.bin --metrics-json bad.json > /dev/null \
  2> bad.err || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "bad data on one rank: exit $rc: $(cat bad.err)"
[ $(($(date +%s) - start)) -le 30 ] || fail "bad data on one rank: the job took over 30 s"
grep -Eq "^rank [0-2] of 3: error: .*bad.shards" bad.err || fail "no message naming the rank: $(cat bad.err)"
[ ! -e bad.bin ] || fail "a failed job wrote a model"
# The metrics file records the failure, whichever rank it was (one other than 0 writes it then).
failed=$(grep -Eo "^rank [0-2] of 3" bad.err | head -1)
jq -e --arg r "$failed" '.status == "error" and .exit_code == 3 and (.error | test("bad.shards"))
  and ($r == "rank 0 of 3" or (.error | startswith($r)))' bad.json > /dev/null \
  || fail "the failed job's metrics ($failed): $(cat bad.json 2> /dev/null || echo none)"

# SIGKILL of rank 1 while the job trains.
mpirun -np 2 "$bin" train -d a9a.shards -o kill.bin --epochs 100000 --window-blocks 1 \
  > /dev/null 2> kill.err &
job=$!
victim=
for _ in $(seq 200); do
  for p in $(pgrep -f "train -d a9a.shards -o kill.bin" || true); do
    tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -x OMPI_COMM_WORLD_RANK=1 > /dev/null && victim=$p
  done
  [ -n "$victim" ] && grep -qs "eta0" kill.err && break
  sleep 0.05
done
[ -n "$victim" ] || fail "rank 1 never started: $(cat kill.err)"
sleep 0.5
start=$(date +%s)
kill -KILL "$victim"
rc=0
timeout 60 tail --pid=$job -f /dev/null || true
wait $job || rc=$?
[ "$rc" != 0 ] || fail "a killed rank: the job exited 0"
[ $(($(date +%s) - start)) -le 30 ] || fail "a killed rank: the job took over 30 s to end"
grep -q "rank 1" kill.err || fail "a killed rank: no message naming it: $(cat kill.err)"
[ -z "$(pgrep -f "train -d a9a.shards -o kill.bin" || true)" ] || fail "ranks left running"

# --- 6. only train runs under mpirun -----------------------------------------------------------------
rc=0
mpirun -np 1 "$bin" convert "$root/data/a9a.zst" -o x.shards > /dev/null 2> conv.err || rc=$?
[ "$rc" != 0 ] && grep -q "only \`polymargin train\` runs as an MPI job" conv.err ||
  fail "convert under mpirun: exit $rc: $(cat conv.err)"
rc=0
mpirun -np 2 "$bin" train --algo kldm -d a9a.shards -o k.bin > /dev/null 2> kernel.err || rc=$?
[ "$rc" = 2 ] && grep -q "only ldm, svm and cpm run as an MPI job" kernel.err ||
  fail "kldm under mpirun: exit $rc: $(cat kernel.err)"
[ ! -e k.bin ] || fail "kldm under mpirun wrote a model"

# --- 7. --tune: the ranks share the cells out; the search is one process's, the final run the job's --
# (--tune comes last: Open MPI's mpirun reads a `--tune FILE` of its own and takes the next word.)
tune=(-d a9a.shards --tune-folds 3 --tune-budget 4 --epochs 2 --json)
"$bin" train "${tune[@]}" -o t1.bin --tune > t1.json 2> /dev/null || fail "--tune in one process"
for r in 2 3; do
  mpi $r train "${tune[@]}" -o t$r.bin --tune > t$r.json 2> t$r.err || fail "-np $r --tune: $(cat t$r.err)"
  [ "$(jq -c .tune.settings t1.json)" = "$(jq -c .tune.settings t$r.json)" ] ||
    fail "-np $r --tune: another search than one process's: $(jq -c .tune.settings t$r.json)"
  [ "$(grep -c -- '<- chosen' t$r.err)" = 1 ] || fail "-np $r --tune: not one table: $(cat t$r.err)"
  jq -e ".ranks == $r" t$r.json > /dev/null || fail "-np $r --tune: the final run: $(cat t$r.json)"
done
# The final run is the job's data-parallel run of the chosen setting, at the step its cells took.
chosen="$(jq -r '.tune.chosen | to_entries | map("--\(.key) \(.value)") | join(" ")' t2.json) --eta0 $(jq .tune.eta0 t2.json)"
# shellcheck disable=SC2086
mpi 2 train -d a9a.shards --epochs 2 $chosen -o p2.bin > /dev/null 2>&1 || fail "-np 2 $chosen"
"$bin" predict -m t2.bin -d a9a.t.shards -o t2.pred > /dev/null 2>&1
"$bin" predict -m p2.bin -d a9a.t.shards -o p2.pred > /dev/null 2>&1
cmp -s t2.pred p2.pred || fail "-np 2 --tune: not the model of a 2-rank run of its choice ($chosen)"
# A kernel learner's search is shared out the same way, and rank 0 alone trains its final model:
# the very model of one process's --tune.
"$bin" gen --rows 400 --features 30 --nnz 8 --seed 3 -o small.svm > /dev/null 2>&1
"$bin" train --algo kldm -d small.svm -o k1.bin --tune-budget 3 --tune > /dev/null 2>&1 ||
  fail "kldm --tune in one process"
mpi 2 train --algo kldm -d small.svm -o k2.bin --tune-budget 3 --tune > /dev/null 2> k2.err ||
  fail "-np 2 kldm --tune: $(cat k2.err)"
cmp -s k1.bin k2.bin || fail "-np 2 kldm --tune: not one process's model"
# A cell that fails on another rank than 0: its error, and exit code, are the job's. With seed 1
# the second row, whose feature id the linear learners cannot keep beside a bias, lands in the
# first fold, so the cell trained on it (the second cell, rank 1's) fails.
{
  echo "+1 1:0.1 3:1"
  echo "-1 1:1 4294967295:0.5"
  for i in $(seq 2 40); do
    echo "+1 1:0.$i 3:1"
    [ $((i % 5)) != 0 ] || echo "-1 2:1 3:0.$i"
  done
} > bad_id.svm
rc=0
timeout 60 mpirun -np 2 "$bin" train -d bad_id.svm -o never.bin --tune-folds 2 --tune-budget 1 \
  --tune-repeats 1 --tune > /dev/null 2> cell.err || rc=$?
[ "$rc" = 3 ] && grep -q "fold 2 failed (exit 3): error: .*feature id 4294967295" cell.err ||
  fail "a failed cell on rank 1: exit $rc: $(cat cell.err)"
[ ! -e never.bin ] || fail "a failed search wrote a model"
# SIGTERM to the ranks in the search (as a scheduler sends it; mpirun itself turns one into a kill
# of the job): every rank stops at the same point, exit 6, the cells kept; --resume then makes the
# search and model of an uninterrupted job.
mpirun -np 2 "$bin" train -d a9a.shards -o stopped.bin --checkpoint sck.bin --threads 1 --tune \
  > /dev/null 2> sig.err &
pid=$!
for _ in $(seq 1500); do [ -n "$(ls sck.bin.tune 2> /dev/null)" ] && break; sleep 0.02; done
pkill -TERM -f "^$bin train -d a9a.shards -o stopped.bin"
rc=0
wait $pid || rc=$?
[ "$rc" = 6 ] && grep -q "interrupted by SIGTERM in the --tune search" sig.err &&
  [ -n "$(ls sck.bin.tune)" ] && [ ! -e stopped.bin ] || fail "SIGTERM in an MPI search: exit $rc: $(cat sig.err)"
mpi 2 train -d a9a.shards -o stopped.bin --checkpoint sck.bin --resume sck.bin --threads 1 --tune \
  > /dev/null 2> sig.err || fail "resume an MPI search: $(cat sig.err)"
mpi 2 train -d a9a.shards -o whole.bin --threads 1 --tune > /dev/null 2>&1 || fail "-np 2 --tune"
cmp -s stopped.bin whole.bin || fail "an MPI search stopped and resumed chose otherwise"
echo "mpi: all passed"
