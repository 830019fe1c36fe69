#!/usr/bin/env bash
# train --feature-order (ldm, svm): weights laid out most frequent first give the model that the
# ids as given give, byte for byte, and the same objective and training accuracy: from raw and zstd
# shards, with --workers 2, other scalings, a warm start, a checkpoint resumed, and MPI ranks where
# mpirun is present; the default is the ids as given; a checkpoint resumes only in its own order;
# a bad value is a usage error.
# Usage: tests/cli/feature_order.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=$(realpath "${1:?usage: $0 POLYMARGIN_BINARY}")
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_feature_order.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
cd "$work"

# 20,000 rows over 200,000 scattered feature ids, in 79 blocks of 256 rows (few enough for the count
# to read every block; tests/io/feature_order_test.cpp checks a sample).
for codec in raw zstd; do
  "$bin" gen --like kdda --rows 20000 --features 200000 --block-rows 256 --seed 4 --codec $codec \
    -o $codec.shards > /dev/null
done

# same ARGS...: trains with --feature-order given and frequency; the models must be the same bytes,
# the summaries the same objective and training accuracy, and say which order they used.
same() {
  "$bin" train "$@" -o given.bin --feature-order given --json > given.json 2> given.err ||
    fail "train $* --feature-order given: $(cat given.err)"
  "$bin" train "$@" -o freq.bin --feature-order frequency --json > freq.json 2> freq.err ||
    fail "train $* --feature-order frequency: $(cat freq.err)"
  cmp -s given.bin freq.bin || fail "train $*: the frequency order changed the model"
  [ "$(jq -r '.feature_order' given.json)" = given ] && [ "$(jq -r '.feature_order' freq.json)" = frequency ] ||
    fail "train $*: feature_order $(jq -r '.feature_order' given.json) / $(jq -r '.feature_order' freq.json)"
  for key in objective train_accuracy margin_mean; do
    [ "$(jq -r ".$key" given.json)" = "$(jq -r ".$key" freq.json)" ] ||
      fail "train $*: $key $(jq -r ".$key" given.json) against $(jq -r ".$key" freq.json)"
  done
  grep -q "most frequent first" freq.err || fail "train $*: the order is not announced: $(cat freq.err)"
}

# --- 1. the same model, whatever the codec, learner, scaling and workers --------------------------
for codec in raw zstd; do
  for algo in ldm svm; do
    same --algo $algo -d $codec.shards --epochs 3
  done
done
same -d raw.shards --epochs 2 --scale none -c 0.1
same -d zstd.shards --epochs 2 --normalize l2 --bias 0
same -d raw.shards --epochs 3 --workers 2 --window-blocks 2
same -d raw.shards --epochs 3 --workers 3 --threads 2 --pairing permuted

# --- 2. a warm start: the old weights are placed where the new order puts them -------------------
"$bin" train -d zstd.shards --epochs 2 -o old.bin --feature-order given > /dev/null 2>&1
same -d raw.shards --epochs 2 --warm-start old.bin

# --- 3. a checkpoint holds the weights in its run's order: it resumes there, and only there -------
"$bin" train -d raw.shards -o whole.bin --epochs 3 --feature-order given > /dev/null 2>&1
rc=0
"$bin" train -d raw.shards -o part.bin --epochs 3 --feature-order frequency --checkpoint ck.bin \
  --stop-after-rows 30000 > /dev/null 2> stop.err || rc=$?
[ "$rc" = 6 ] && [ -s ck.bin ] || fail "--stop-after-rows exited $rc: $(cat stop.err)"
expect 2 "feature_order" train -d raw.shards -o part.bin --epochs 3 --feature-order given \
  --resume ck.bin
"$bin" train -d raw.shards -o part.bin --epochs 3 --feature-order frequency --resume ck.bin \
  > /dev/null 2> resume.err || fail "resume: $(cat resume.err)"
cmp -s whole.bin part.bin || fail "the resumed frequency-order run differs from the whole run"

# --- 4. the default is the ids as given ----------------------------------------------------------
"$bin" train -d raw.shards -o default.bin --epochs 1 --json > default.json 2> /dev/null
[ "$(jq -r '.feature_order' default.json)" = given ] || fail "default: $(jq -r '.feature_order' default.json)"

# --- 5. refusals ----------------------------------------------------------------------------------
expect 2 "--feature-order must be given or frequency" train -d raw.shards -o x.bin \
  --feature-order hot
[ ! -e x.bin ] || fail "a refused train wrote x.bin"

# --- 6. MPI ranks, where mpirun is here and the build has MPI --------------------------------------
if command -v mpirun > /dev/null; then
  mpi_test_env
  if mpirun -np 2 "$bin" train -d raw.shards -o r_given.bin --epochs 2 --feature-order given \
    > /dev/null 2> mpi.err; then
    mpirun -np 2 "$bin" train -d raw.shards -o r_freq.bin --epochs 2 --feature-order frequency \
      > /dev/null 2> mpi.err || fail "mpirun -np 2 --feature-order frequency: $(cat mpi.err)"
    cmp -s r_given.bin r_freq.bin || fail "mpirun -np 2: the frequency order changed the model"
  else
    grep -q "this build has no MPI" mpi.err || fail "mpirun -np 2 train: $(cat mpi.err)"
  fi
fi
echo "feature order: ok"
