#!/usr/bin/env bash
# The ranks of an MPI job given different commands (mpirun's `-np 1 A : -np 1 B`) are refused at
# their start, on every rank, within seconds, naming what differs, and write no model: other options
# exit 2 (--epochs, -c, --algo, the CPM's -k, a --tune search's options), other data exit 3. Ranks
# given the same command that way train as `-np 2` does, to the byte. (A job whose ranks differed
# hung for ever, or mixed their settings into a model with exit 0, or ended with MPI_ERR_TRUNCATE.)
# Skipped (77) where mpirun is absent or the binary was built without MPI.
# Usage: tests/cli/mpi_agree.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=$(realpath "${1:?usage: $0 POLYMARGIN_BINARY}")
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_mpi_agree.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
cd "$work"

command -v mpirun > /dev/null || { echo "mpirun not found: skipped"; exit 77; }
mpi_test_env

"$bin" gen --rows 3000 --features 40 --nnz 8 --seed 1 -o a.shards > /dev/null 2>&1
"$bin" gen --rows 2000 --features 40 --nnz 8 --seed 2 -o b.shards > /dev/null 2>&1
if ! mpirun -np 1 "$bin" train -d a.shards -o probe.bin --epochs 1 > /dev/null 2> probe.err; then
  grep -q "this build has no MPI" probe.err && { echo "built without MPI: skipped"; exit 77; }
  fail "mpirun -np 1 train: $(cat probe.err)"
fi

# refused CODE FRAGMENT 'RANK 0 ARGS' 'RANK 1 ARGS': `train` on two ranks, each given its own
# arguments (rank 0 started through ${launch[@]} when set, rank 1 through ${launch1[@]}), ends
# within 20 s (a hung job is killed at 60) with exit CODE, a message with the fixed string FRAGMENT
# on stderr, and no model.
launch=() launch1=()
refused() {
  local code=$1 fragment=$2 rc=0 start
  rm -f m.bin
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout 60 mpirun --oversubscribe -np 1 "${launch[@]}" "$bin" train -o m.bin $3 \
    : -np 1 "${launch1[@]}" "$bin" train -o m.bin $4 > out 2> err || rc=$?
  local took=$(($(date +%s) - start))
  [ "$rc" = "$code" ] || fail "'$3' : '$4': exit $rc (124: it hung), expected $code: $(tail -5 err)"
  [ "$took" -le 20 ] || fail "'$3' : '$4': refused after $took s"
  grep -qF -- "$fragment" err || fail "'$3' : '$4': stderr lacks '$fragment': $(cat err)"
  [ ! -e m.bin ] || fail "'$3' : '$4': a model was written"
}

refused 2 'rank 1 of 2 was given other options than rank 0 (rank 0 -> rank 1: avg_start_epochs 1 -> 2, epochs 2 -> 3' \
  '-d a.shards --epochs 2' '-d a.shards --epochs 3'
grep -q '^rank 0 of 2: error: train: ' err || fail "--epochs: not said by rank 0: $(cat err)"
refused 2 'c 10.0 -> 0.01' '-d a.shards -c 10' '-d a.shards -c 0.01'
refused 2 'algorithm "ldm" -> "svm"' '-d a.shards --algo ldm' '-d a.shards --algo svm'
refused 3 'a.shards: rank 1 of 2 was given other data than rank 0 (rank 0 -> rank 1: ' \
  '-d a.shards' '-d b.shards'
grep -qF 'rows 3000 -> 2000' err || fail "other data: the rows not named: $(cat err)"
refused 2 'faces 5 -> 6' '--algo cpm -d a.shards -k 5' '--algo cpm -d a.shards -k 6'
# Where the ranks write is theirs to agree on too; the record says why the job was refused.
refused 2 'metrics "a.json" -> "b.json"' '-d a.shards --metrics-json a.json' \
  '-d a.shards --metrics-json b.json'
jq -e '.status == "error" and .exit_code == 2 and (.error | contains("other options"))' a.json \
  > /dev/null || fail "the refused job's metrics: $(cat a.json)"
# A --tune search's ranks share its cells out: refused before the first cell. (Open MPI's mpirun
# reads a `--tune FILE` of its own wherever it stands and takes the next word, here the `:`: each
# rank's --tune is added by a shell, where mpirun does not see it.)
launch=(bash -c 'exec "$@" --tune' _) launch1=("${launch[@]}")
refused 2 '--tune-budget ["1"] -> ["2"]' '-d a.shards --tune-folds 2 --tune-budget 1' \
  '-d a.shards --tune-folds 2 --tune-budget 2'
launch1=()  # a search on rank 0, a run on rank 1
refused 2 'rank 1 of 2 was given other options than rank 0' '-d a.shards' '-d a.shards'
launch=()

# Ranks given the same command one by one are a job like `-np 2`'s: the same model bytes.
mpirun -np 2 "$bin" train -d a.shards -o two.bin --epochs 2 > /dev/null 2>&1 || fail "-np 2"
mpirun --oversubscribe -np 1 "$bin" train -d a.shards -o same.bin --epochs 2 \
  : -np 1 "$bin" train -d a.shards -o same.bin --epochs 2 > /dev/null 2> same.err ||
  fail "the same command on each rank: $(cat same.err)"
cmp -s two.bin same.bin || fail "the same command on each rank: not the model of -np 2"
echo "mpi_agree: all passed"
