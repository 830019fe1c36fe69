#!/usr/bin/env bash
# An empty value is what a script's unset variable passes (`--tune-budget "$BUDGET"`); Boost took it
# as a value, so that `--tune-budget ''` ran the whole search unbounded and `--checkpoint ''` kept
# no checkpoint (issue 46). Every option that takes a value refuses it (exit 2, the option named):
# each option that the --help of each command and learner lists with a value, on the command line
# (`--name ''`; `--name=` as Boost refuses it), in a --config file (`name =`, with its line), and under train --tune,
# whose own parse reads the options before the learner's; an empty positional argument too.
# Usage: tests/cli/empty_values.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=$(realpath "${1:?usage: $0 POLYMARGIN_BINARY}")
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_empty.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
cd "$work"
"$bin" gen --like kdda --rows 300 --features 13 --nnz 8 --seed 5 -o in.svm > /dev/null
"$bin" train -d in.svm -o m.model --epochs 2 > /dev/null 2>&1

# value_options COMMAND...: the long names of the options that `polymargin COMMAND... --help` lists
# with a value (Boost writes `--name arg`, or `-n [ --name ] arg`).
value_options() {
  "$bin" "$@" --help | sed -nE 's/^  (-[A-Za-z0-9] \[ )?--([a-z0-9-]+)( \])? arg.*/\2/p'
}

# The tuning's own options: the value given empty no longer means "no bound".
for name in tune-budget tune-rows tune-folds tune-repeats; do
  expect 2 "train: --$name needs a value, not an empty one" \
    train -d in.svm -o x.model --tune "--$name" ''
  expect 2 "train: --$name needs a value, not an empty one" \
    train -d in.svm -o x.model --tune "--$name="
done
[ ! -e x.model ] || fail "a run given an empty --tune-budget wrote a model"

checked=0
for command in convert inspect split gen predict eval export experiment "train --algo ldm" \
  "train --algo svm" "train --algo cpm" "train --algo kldm" "train --algo tldm" "train --algo cmm"; do
  read -ra words <<< "$command"
  options=$(value_options "${words[@]}")
  [ "$(wc -w <<< "$options")" -ge 2 ] || fail "$command --help lists no options with a value"
  for name in $options; do
    expect 2 "--$name needs a value, not an empty one" "${words[@]}" "--$name" ''
    # Boost refuses `--name=` itself ("the argument for option '--name' should follow
    # immediately after the equal sign").
    expect 2 "'--$name'" "${words[@]}" "--$name="
    # Under --tune the search's own parse reads every option first.
    if [ "${words[0]}" = train ] && [ "${words[2]}" != cmm ]; then
      expect 2 "--$name needs a value, not an empty one" "${words[@]}" --tune "--$name" ''
    fi
    checked=$((checked + 1))
  done
done
[ "$checked" -ge 100 ] || fail "only $checked options checked: did the --help format change?"
echo "empty values: $checked options refused"

# In a --config file: the key's own line is named. A switch's empty value stays Boost's "on".
printf 'epochs = 2\ncheckpoint =\n' > empty.conf
expect 2 "train: --checkpoint needs a value, not an empty one in empty.conf:2: give one" \
  train -d in.svm -o x.model --config empty.conf
expect 2 "train: --checkpoint needs a value, not an empty one in empty.conf:2: give one" \
  train -d in.svm -o x.model --config empty.conf --tune
printf 'tune-budget =\n' > budget.conf
expect 2 "train: --tune-budget needs a value, not an empty one in budget.conf:1" \
  train -d in.svm -o x.model --config budget.conf --tune
printf 'codec =   # none given\n' > codec.conf
expect 2 "convert: --codec needs a value, not an empty one in codec.conf:1" \
  convert in.svm -o x.shards --config codec.conf
printf 'json =\n' > switch.conf
"$bin" convert in.svm -o s.shards --config switch.conf > s.json 2> /dev/null ||
  fail "convert with 'json =' in its --config file failed"
jq -e .rows s.json > /dev/null || fail "'json =' in a --config file did not print JSON: $(cat s.json)"

# An empty positional argument (a file name expected).
expect 2 "train: an empty argument where a file name is expected" train '' -o x.model
expect 2 "train: an empty argument where a file name is expected" train --tune '' -o x.model
expect 2 "convert: an empty argument where a file name is expected" convert in.svm '' -o x.shards
expect 2 "inspect: an empty argument where a file name is expected" inspect ''
expect 2 "experiment: an empty argument where a file name is expected" experiment '' -o x.dir
expect 2 "--data needs a value, not an empty one" predict -m m.model -d in.svm '' -o x.txt
[ ! -e x.model ] && [ ! -e x.shards ] && [ ! -e x.dir ] && [ ! -e x.txt ] ||
  fail "a command given an empty value wrote its output"
echo "empty values: all checks passed"
