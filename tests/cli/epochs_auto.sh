#!/usr/bin/env bash
# --epochs auto (issue 45, item 2) for ldm and svm: whole blocks held out, the run stops once the
# held-out loss has not improved by more than --tol for --n-iter-no-change epochs (before
# --max-epochs) and keeps the best epoch's model; a run that keeps improving goes to --max-epochs;
# data of too few blocks are re-blocked in memory; epochs are judged from the step floor's; a set
# whose floor reaches --max-epochs holds nothing out; the model does not depend on the threads, and two
# runs with 2 workers agree; --no-early-stopping stops on the training objective; a number of
# epochs is trained as before, whatever the auto options say; bad values and --checkpoint are
# refused (exit 2). Usage: tests/cli/epochs_auto.sh BUILD/polymargin (from the repository root)
set -euo pipefail

bin=$(realpath "${1:?usage: $0 POLYMARGIN_BINARY}")
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_epochs_auto.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
data=$(realpath data/a9a.zst)
cd "$work"
"$bin" convert "$data" -o a9a.shards --block-rows 1024 > /dev/null  # 32 blocks

# Stops on the held-out rows, before --max-epochs, and keeps the best epoch.
"$bin" train --algo svm -d a9a.shards -o auto.model --epochs auto --json --metrics-json auto.metrics \
  > auto.json 2> auto.err
jq -e '.epochs_auto | .early_stopping and .stopped and .epochs_run < .max_epochs
       and .held_out_blocks == 3 and .blocks == 32 and (.reblocked | not)
       and (.scores | length) == .epochs_run and (.accuracies | length) == .epochs_run
       and .scores[.best_epoch - 1] == (.scores | min)
       and .epochs_run - .best_epoch >= 0 and .max_epochs == 50 and .n_iter_no_change == 3' \
  auto.json > /dev/null || fail "auto did not stop on the held-out rows: $(jq -c .epochs_auto auto.json)"
jq -e '.epochs == .epochs_auto.epochs_run' auto.json > /dev/null || fail "summary epochs"
jq -e '.epochs_auto.held_out_rows > 2000 and .epochs_auto.held_out_rows < 4500' auto.json \
  > /dev/null || fail "held-out rows: $(jq -c .epochs_auto auto.json)"
jq -e '.epochs_auto.best_epoch' auto.metrics > /dev/null || fail "--metrics-json lacks epochs_auto"
grep -qE "^epoch 1/50: .*, held-out loss [0-9.e+-]+, accuracy 0\.[0-9]+" auto.err ||
  fail "the epoch line lacks the held-out score: $(cat auto.err)"
grep -q "^epochs auto: 3[0-9][0-9][0-9] rows held out (3 of 32 blocks" auto.err ||
  fail "no note of the rows held out: $(cat auto.err)"
"$bin" export -m auto.model --format json -o auto.model.json
jq -e '.. | objects | select(has("epochs_auto")) | .epochs_auto.best_epoch' auto.model.json \
  > /dev/null || fail "the model does not record epochs_auto"
"$bin" train --algo svm -d a9a.shards -o auto.model --epochs auto > auto.out 2> /dev/null
grep -qE "^epochs auto: stopped after epoch [0-9]+; kept epoch [0-9]+: held-out loss" auto.out ||
  fail "the summary lacks where auto stopped: $(cat auto.out)"

# Threads do not change the model.
"$bin" train --algo svm -d a9a.shards -o auto1.model --epochs auto --threads 1 2> /dev/null > /dev/null
cmp -s auto.model auto1.model || fail "--epochs auto: 1 and 2 threads give different models"

# Runs to --max-epochs while it improves by more than --tol (here: any improvement counts, and
# it takes 4 epochs without one to stop).
"$bin" train -d a9a.shards -o max.model --epochs auto --max-epochs 3 --n-iter-no-change 4 --tol 0 \
  --json > max.json 2> /dev/null
jq -e '.epochs_auto | (.stopped | not) and .epochs_run == 3 and .max_epochs == 3' max.json \
  > /dev/null || fail "--max-epochs 3: $(jq -c .epochs_auto max.json)"

# Two workers: the same model twice.
"$bin" train -d a9a.shards -o w2a.model --epochs auto --workers 2 --json > w2.json 2> /dev/null
"$bin" train -d a9a.shards -o w2b.model --epochs auto --workers 2 2> /dev/null > /dev/null
cmp -s w2a.model w2b.model || fail "--workers 2: two runs differ"
jq -e '.epochs_auto.stopped' w2.json > /dev/null || fail "--workers 2 did not stop"

# Data of two blocks: re-blocked in memory, about 10 % of the rows held out; judged from the step
# floor's 10th epoch (50,000 steps of 5000 rows).
zstd -dcq "$data" > a9a.svm
head -5000 a9a.svm > small.svm
"$bin" train -d small.svm -o small.model --epochs auto --json > small.json 2> small.err
jq -e '.epochs_auto | .reblocked and .held_out_rows >= 400 and .held_out_rows <= 600
       and .judged_from_epoch == 10 and .best_epoch >= 10 and .epochs_run >= 12' small.json \
  > /dev/null || fail "two blocks: $(jq -c .epochs_auto small.json)"
grep -q "the data re-blocked in memory" small.err || fail "no note of the re-blocking"
# A set whose step floor reaches --max-epochs holds nothing out: it makes --max-epochs.
head -700 a9a.svm > tiny.svm
"$bin" train -d tiny.svm -o tiny.model --epochs auto --json > tiny.json 2> tiny.err
jq -e '.epochs_auto | (.early_stopping | not) and .epochs_run == 50 and (.stopped | not)' \
  tiny.json > /dev/null || fail "700 rows: $(jq -c .epochs_auto tiny.json)"
grep -q "the step floor's 72 epochs reach --max-epochs: 50 epochs on all rows" tiny.err ||
  fail "no note of the step floor: $(cat tiny.err)"

# --no-early-stopping: nothing held out, stops when the training objective converges.
"$bin" train -d a9a.shards -o noes.model --epochs auto --no-early-stopping --json > noes.json \
  2> /dev/null
jq -e '.epochs_auto | (.early_stopping | not) and (has("held_out_rows") | not)
       and (.objectives | length) == .epochs_run and .best_epoch == .epochs_run' noes.json \
  > /dev/null || fail "--no-early-stopping: $(jq -c .epochs_auto noes.json)"

# A number of epochs: the auto options change nothing (and are said to do nothing).
"$bin" train -d a9a.shards -o five.model --epochs 5 2> /dev/null > /dev/null
"$bin" train -d a9a.shards -o five2.model --epochs 5 --validation-fraction 0.3 --max-epochs 2 \
  --n-iter-no-change 1 --no-early-stopping > /dev/null 2> five2.err
cmp -s five.model five2.model || fail "the auto options changed a run of --epochs 5"
grep -q "warning: --validation-fraction has no effect without --epochs auto" five2.err ||
  fail "no warning for --validation-fraction: $(cat five2.err)"
"$bin" train -d a9a.shards -o five3.model --epochs 5 --json > five.json 2> /dev/null
jq -e 'has("epochs_auto") | not' five.json > /dev/null || fail "--epochs 5 reports epochs_auto"

expect 2 "--validation-fraction must lie between 0 and 1" train -d a9a.shards -o x.model \
  --epochs auto --validation-fraction 1
expect 2 "--validation-fraction must lie between 0 and 1" train -d a9a.shards -o x.model \
  --epochs auto --validation-fraction 0
expect 2 "--epochs must be a whole number or auto (got 'often')" train -d a9a.shards -o x.model \
  --epochs often
expect 2 "--n-iter-no-change must be at least 1" train -d a9a.shards -o x.model --epochs auto \
  --n-iter-no-change 0
expect 2 "--epochs auto takes no --checkpoint or --resume" train -d a9a.shards -o x.model \
  --epochs auto --checkpoint x.ckpt
sed -n 7,10p small.svm > four.svm  # 4 rows, both labels
expect 2 "holds out no row" train -d four.svm -o x.model --epochs auto --max-epochs 20000
[ ! -e x.model ] || fail "a refused run wrote a model"

# Two MPI ranks (each scores its part of the held-out blocks; the sums decide): they stop
# together, and two runs give the same model. Not checked where mpirun or MPI is absent.
if command -v mpirun > /dev/null && mpi_test_env &&
   mpirun -np 1 "$bin" train -d a9a.shards -o probe.model --epochs 1 > /dev/null 2>&1; then
  for run in a b; do
    timeout 300 mpirun -np 2 "$bin" train -d a9a.shards -o mpi$run.model --epochs auto --json \
      > mpi$run.json 2> mpi$run.err || fail "mpirun -np 2 --epochs auto: $(cat mpi$run.err)"
  done
  cmp -s mpia.model mpib.model || fail "mpirun -np 2 --epochs auto: two runs differ"
  jq -e '.epochs_auto.stopped and .ranks == 2' mpia.json > /dev/null ||
    fail "mpirun -np 2: $(jq -c .epochs_auto mpia.json)"
else
  echo "epochs_auto: MPI not checked here (no mpirun, or a build without MPI)"
fi
echo "epochs_auto: ok"
