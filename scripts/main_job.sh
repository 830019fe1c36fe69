#!/usr/bin/env bash
# The main job on the bundled default data (a9a, zstd-compressed in data/): convert to shards,
# inspect, train linear SVM and LDM, evaluate both on the test file and draw their margin
# distributions. Everything lands in out/.
set -euo pipefail
bin=${1:-build/polymargin}
out=out
mkdir -p "$out"

echo "== convert data/a9a.zst → $out/a9a.shards"
"$bin" convert data/a9a.zst -o "$out/a9a.shards"
echo
echo "== inspect --verify"
"$bin" inspect "$out/a9a.shards" --verify
echo
for algo in svm ldm; do
  echo "== train --algo $algo"
  "$bin" train --algo "$algo" -d "$out/a9a.shards" -o "$out/a9a.$algo.model" --scale maxabs --seed 1
  echo
done
echo "== eval on data/a9a.t.zst"
"$bin" eval -m "$out/a9a.svm.model" -m "$out/a9a.ldm.model" -d data/a9a.t.zst \
  --margins "$out/a9a.margins.csv" --plot "$out/a9a.margins.svg"
"$bin" eval -m "$out/a9a.ldm.model" -d data/a9a.t.zst --json > "$out/a9a.ldm.metrics.json"
echo
echo "outputs: $out/a9a.shards $out/a9a.{svm,ldm}.model $out/a9a.margins.{csv,svg} $out/a9a.ldm.metrics.json"
