#!/usr/bin/env bash
# Whether the epochs converged (issue 45, item 1): the summary of an ldm, svm or cpm run says whether the
# last epoch still lowered the running estimate of the training objective by more than --tol of
# the best of the epochs before (a run stopped while learning: "not converged", with what to do),
# and --json and --metrics-json carry `convergence`. --tol only reports: the model is the same for
# any --tol. One epoch is not judged; a negative --tol is refused.
# Usage: tests/cli/convergence.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=$(realpath "${1:?usage: $0 POLYMARGIN_BINARY}")
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_convergence.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
data=$(realpath data/a9a.zst)
cd "$work"
"$bin" convert "$data" -o a9a.shards > /dev/null

# Two epochs of a9a: the second still lowers the objective by more than 0.1 %.
"$bin" train -d a9a.shards -o short.model --epochs 2 --metrics-json short.json > short.out 2> short.err
grep -q "^not converged: the last epoch still lowered the objective by .* (--tol 0.1 %)" short.out ||
  fail "2 epochs: no 'not converged' line: $(cat short.out)"
grep -qE "^epoch 2/2: .*objective ≈ [0-9.e+-]+ \(-[0-9.]+ %\)" short.err ||
  fail "the epoch line lacks the objective's change: $(cat short.err)"
[ "$(jq -r .convergence.converged short.json)" = false ] || fail "metrics: converged is not false"
[ "$(jq -r .convergence.converged_since_pass short.json)" = null ] || fail "metrics: converged since"
jq -e '.convergence.objective_gain > 0.001 and .convergence.objective_change < 0' short.json \
  > /dev/null || fail "metrics: gain or change: $(jq -c .convergence short.json)"

# The same run judged by a looser --tol converged, with the same model.
"$bin" train -d a9a.shards -o loose.model --epochs 2 --tol 0.5 --json > loose.json 2> /dev/null
[ "$(jq -r .convergence.converged loose.json)" = true ] || fail "--tol 0.5: not converged"
[ "$(jq -r .convergence.converged_since_pass loose.json)" = 2 ] || fail "--tol 0.5: since"
cmp -s short.model loose.model || fail "--tol changed the model"

# Enough epochs: no epoch after some point gains 0.1 %.
"$bin" train --algo svm -d a9a.shards -o long.model --epochs 20 --json > long.json 2> /dev/null
[ "$(jq -r .convergence.converged long.json)" = true ] ||
  fail "20 epochs: not converged: $(jq -c .convergence long.json)"
jq -e '.convergence.converged_since_pass >= 2 and .convergence.converged_since_pass <= 20' \
  long.json > /dev/null || fail "20 epochs: since: $(jq -c .convergence long.json)"
"$bin" train --algo svm -d a9a.shards -o long.model --epochs 20 > long.out 2> /dev/null
grep -q "^converged: no epoch since epoch [0-9]* lowered the objective by more than --tol 0.1 % of its best" \
  long.out || fail "20 epochs: no 'converged' line: $(cat long.out)"

# One epoch has nothing to compare with.
"$bin" train -d a9a.shards -o one.model --epochs 1 > one.out 2> /dev/null
grep -q "^convergence not judged: one epoch made" one.out || fail "1 epoch: $(cat one.out)"

# The CPM judges its passes the same way, on its progressive objective (each side's mean loss over
# its steps in the pass plus its regulariser): a short run has not converged, a long one has, and
# --tol changes no byte of the model. Its workers (replicas averaged each pass) report it too.
"$bin" train --algo cpm -d a9a.shards -o cpm.short --iterations 40000 --json > cpm.short.json \
  2> cpm.short.err || fail "cpm 40000 steps"
jq -e '.convergence.converged == false and .progressive_objective > 0 and
  .convergence.objective_change < 0' cpm.short.json > /dev/null \
  || fail "cpm 40000 steps: $(jq -c '[.convergence, .progressive_objective]' cpm.short.json)"
grep -qE "^pass 2: .*objective ≈ [0-9.e+-]+ \(-[0-9.]+ %\), progressive accuracy" cpm.short.err \
  || fail "the cpm's pass line lacks the objective: $(cat cpm.short.err)"
# (Its λ = 1/(C·T) is small at the default C: passes keep lowering the loss by a few tenths of a
# percent; at C = 0.001 20 passes settle.)
"$bin" train --algo cpm -d a9a.shards -o cpm.long --epochs 20 -c 0.001 > cpm.long.out 2> /dev/null \
  || fail "cpm 20 epochs"
grep -q "^converged: no pass since pass [0-9]* lowered the objective by more than --tol 0.1 % of its best" \
  cpm.long.out || fail "cpm 20 epochs at C 0.001: no 'converged' line: $(cat cpm.long.out)"
"$bin" train --algo cpm -d a9a.shards -o cpm.loose --iterations 40000 --tol 0.5 --json \
  > cpm.loose.json 2> /dev/null || fail "cpm --tol 0.5"
[ "$(jq -r .convergence.converged cpm.loose.json)" = true ] || fail "cpm --tol 0.5: not converged"
cmp -s cpm.short cpm.loose || fail "--tol changed the cpm's model"
"$bin" train --algo cpm -d a9a.shards -o cpm.w2 --iterations 40000 --workers 2 --json \
  > cpm.w2.json 2> /dev/null || fail "cpm --workers 2"
jq -e '.convergence.converged == false and .progressive_objective > 0' cpm.w2.json > /dev/null \
  || fail "cpm --workers 2: $(jq -c '[.convergence, .progressive_objective]' cpm.w2.json)"

# A model no better on its training rows than the majority class is said: a step far too small
# (--eta0 1e-7) leaves a9a's at its majority's share, 24720 of 32561 rows; a plain run is not.
"$bin" train --algo svm -d a9a.shards -o tiny.model --eta0 1e-7 --json > tiny.json 2> tiny.err
jq -e '.majority_share == 24720 / 32561 and .train_accuracy <= .majority_share' tiny.json \
  > /dev/null || fail "--eta0 1e-7: $(jq -c '[.train_accuracy, .majority_share]' tiny.json)"
grep -q "^warning: the model is no better on its training rows than predicting the majority class" \
  tiny.err || fail "--eta0 1e-7: no warning: $(cat tiny.err)"
if grep -q "majority class" short.err; then fail "a plain run warned: $(cat short.err)"; fi

expect 2 "train: --tol must be a number ≥ 0 (got -1)" train -d a9a.shards -o x.model --tol -1
[ ! -e x.model ] || fail "a refused --tol wrote a model"
echo "convergence: ok"
