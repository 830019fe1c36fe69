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
# C, λ1/(mC), λ2/(mC) for a9a from the small grid of docs/accuracy.md.
echo "== train --algo svm"
"$bin" train --algo svm -d "$out/a9a.shards" -o "$out/a9a.svm.model" -c 0.03 --seed 1
echo
echo "== train --algo ldm"
"$bin" train --algo ldm -d "$out/a9a.shards" -o "$out/a9a.ldm.model" -c 0.03 --lambda1-rel 1e-4 \
  --lambda2-rel 1e-2 --seed 1
echo
echo "== eval on data/a9a.t.zst"
"$bin" eval -m "$out/a9a.svm.model" -m "$out/a9a.ldm.model" -d data/a9a.t.zst \
  --margins "$out/a9a.margins.csv" --plot "$out/a9a.margins.svg"
"$bin" eval -m "$out/a9a.ldm.model" -d data/a9a.t.zst --json > "$out/a9a.ldm.metrics.json"
echo
echo "outputs: $out/a9a.shards $out/a9a.{svm,ldm}.model $out/a9a.margins.{csv,svg} $out/a9a.ldm.metrics.json"
