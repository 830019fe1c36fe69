#!/usr/bin/env bash
# Sample nightly retraining job: convert the day's data, warm-start from the served model (ldm, svm),
# evaluate candidate and served model on a fixed holdout, and replace the served model only if the
# holdout metric did not drop. Restartable: a run killed or stopped (exit 6) is continued by running the same
# command again (the conversion is kept, training resumes from its checkpoint). A run given other
# data than the stopped one (another night's files, or the same files changed) starts afresh on them.
#
# Usage: configs/nightly.sh [-b POLYMARGIN] [-w WORKDIR] [-m auc|accuracy] [-a ALGO] \
#          SERVED_MODEL HOLDOUT NEW_DATA... [-- TRAIN_OPTION...]
#   -m            the metric compared (default: auc, or accuracy for a model of several classes,
#                 which has no AUC)
#   SERVED_MODEL  the model in service (created on the first night)
#   HOLDOUT       fixed evaluation data (text or shards), never trained on
#   NEW_DATA      today's LIBSVM text (any compression)
# Writes WORKDIR/decision.json: {"decision": "replaced"|"kept"|"first model", "metric", "candidate",
# "served", "candidate_model", "served_model", "train_metrics"}; the served model's predecessor is
# kept as SERVED_MODEL.previous. Exit code: 0 whatever the decision; 2 when eval gives no value of
# the metric asked for; 75 (EX_TEMPFAIL) when another run holds WORKDIR (WORKDIR/nightly.lock:
# nothing was done, run it again later); train's or eval's code otherwise (6: stopped with a
# checkpoint, run again to continue). Give each served model one WORKDIR: runs of one WORKDIR
# never overlap.
set -euo pipefail

bin=build/polymargin
work=nightly.work
metric=
algo=ldm
while getopts "b:w:m:a:" opt; do
  case $opt in
    b) bin=$OPTARG ;;
    w) work=$OPTARG ;;
    m) metric=$OPTARG ;;
    a) algo=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 3 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
[ -z "$metric" ] || [ "$metric" = auc ] || [ "$metric" = accuracy ] || { echo "nightly: -m auc|accuracy" >&2; exit 2; }
served=$1
holdout=$2
shift 2
new_data=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  new_data+=("$1")
  shift
done
[ $# -gt 0 ] && shift  # the train options follow "--"
train_options=("$@")
mkdir -p "$work"
log() { echo "nightly: $*" >&2; }
# One run at a time in WORKDIR: an overlapping one (a slow night, cron started again) would replace
# the candidate between its evaluation and its installation, and remove the other's shards. The
# lock goes with the process (flock on a descriptor kept open to the end; train and eval inherit
# it, so a train left running after this script is killed still holds WORKDIR, which it writes).
exec 9>> "$work/nightly.lock"
status=0
flock -n -E 75 9 || status=$?
[ "$status" = 0 ] || { [ "$status" = 75 ] && log "another run is using $work ($work/nightly.lock is locked): nothing done"; exit "$status"; }

# 1. Today's data into shards, once (convert writes atomically). A rerun reuses them and resumes
#    only when it is given the same files, unchanged (path, size, modification time).
inputs=$(for f in "${new_data[@]}"; do
  printf '%s %s\n' "$(realpath -- "$f")" "$(stat -L -c '%s %.9Y' -- "$f")"
done)
if [ -e "$work/today.shards/manifest.json" ] && [ "$(cat "$work/today.inputs" 2> /dev/null)" != "$inputs" ]; then
  log "the stopped run in $work had other data: starting afresh on ${new_data[*]}"
  rm -rf "$work/today.shards" "$work/train.checkpoint"
fi
if [ ! -e "$work/today.shards/manifest.json" ]; then
  rm -f "$work/train.checkpoint"  # of other data
  "$bin" convert "${new_data[@]}" -o "$work/today.shards" > /dev/null
  printf '%s\n' "$inputs" > "$work/today.inputs"
fi
# 2. The candidate: warm-started from the served model (ldm, svm; the CPM trains afresh: its ASSIGN
#    history and step schedule belong to one run), checkpointed, resumed after a stop.
warm=()
[ -e "$served" ] && [ "$algo" != cpm ] && warm=(--warm-start "$served")
resume=()
[ -e "$work/train.checkpoint" ] && resume=(--resume "$work/train.checkpoint")
"$bin" train --algo "$algo" -d "$work/today.shards" -o "$work/candidate.model" "${warm[@]}" \
  --checkpoint "$work/train.checkpoint" "${resume[@]}" --metrics-json "$work/train.json" \
  "${train_options[@]}" > /dev/null
# 3. Both models on the holdout. A model of several classes has no AUC: accuracy, unless -m asked
#    for the AUC, which is then an error (nothing is replaced without a comparison).
"$bin" eval -m "$work/candidate.model" -d "$holdout" --json > "$work/candidate.eval.json"
if [ -z "$metric" ]; then
  metric=auc
  [ "$(jq .auc "$work/candidate.eval.json")" != null ] || metric=accuracy
fi
candidate=$(jq ".$metric" "$work/candidate.eval.json")
[ "$candidate" != null ] || { log "eval of $work/candidate.model gives no $metric (a model of several classes has accuracy only)"; exit 2; }
served_value=null
if [ -e "$served" ]; then
  "$bin" eval -m "$served" -d "$holdout" --json > "$work/served.eval.json"
  served_value=$(jq ".$metric" "$work/served.eval.json")
  [ "$served_value" != null ] || { log "eval of $served gives no $metric"; exit 2; }
fi
# 4. Replace only if the metric did not drop (same directory: mv is an atomic rename).
if [ "$served_value" = null ]; then
  decision="first model"
elif awk -v c="$candidate" -v s="$served_value" 'BEGIN { exit !(c >= s) }'; then
  decision=replaced
else
  decision=kept
fi
if [ "$decision" != kept ]; then
  cp "$work/candidate.model" "$served.incoming"
  [ -e "$served" ] && cp -p "$served" "$served.previous"
  mv -f "$served.incoming" "$served"
fi
jq -n --arg decision "$decision" --arg metric "$metric" --argjson candidate "$candidate" \
  --argjson served "$served_value" --arg candidate_model "$work/candidate.model" \
  --arg served_model "$served" --slurpfile train "$work/train.json" \
  '{decision: $decision, metric: $metric, candidate: $candidate, served: $served,
    candidate_model: $candidate_model, served_model: $served_model, train_metrics: $train[0]}' \
  > "$work/decision.json.tmp"
mv -f "$work/decision.json.tmp" "$work/decision.json"
rm -rf "$work/today.shards" "$work/today.inputs"  # consumed: tomorrow brings new data
log "$metric on the holdout: candidate $candidate, served $served_value: $decision"
