#!/usr/bin/env bash
# End-to-end benchmark on generated KDD Cup 2010-size data (gen --like kdda), one table, every
# baseline measured in the same run:
#   floor: `cat FILE > /dev/null` of the text;  convert text → zstd / raw shards;  one epoch scan of
#   each (decode to batches, no learning);  5 epochs of SVM and LDM from zstd shards;  LIBLINEAR
#   (liblinear-train -s 3 -B 1) on the same text when installed; LDM with --pairing permuted (the
#   previous default) and LDM trained straight from the text, for the speed-up ratios.
# Usage: bench/e2e_kdd.sh [BUILD_DIR]   env: ROWS (default: full 8,407,752), WORK (scratch dir),
#        C (default 0.01, used by polymargin and LIBLINEAR alike; both with a bias feature of 1),
#        KEEP=1 keeps the generated data, SKIP_LIBLINEAR=1.
set -euo pipefail
build=${1:-build}
bin=$build/polymargin
scan=$build/bench/scan_bench
rows=${ROWS:-8407752}
work=${WORK:-/tmp/polymargin-bench}
mkdir -p "$work"
text=$work/kdda-like.$rows.svm
test_text=$work/kdda-like.$rows.test.svm
test_rows=$((rows / 10))
c=${C:-0.01}

table=()
row() { table+=("$(printf '%-34s %10s %10s %16s  %s' "$@")"); }
# Runs a command under GNU time; sets WALL (s) and RSS (MiB).
measure() {
  local log=$work/time.log
  /usr/bin/time -f '%e %M' -o "$log" "$@"
  read -r WALL rss_kb < "$log"
  RSS=$((rss_kb / 1024))
}
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.3g", (s > 0 ? n / s : 0) }'; }

if [ ! -s "$text" ]; then
  echo "generating $rows rows of KDD-like text in $work ..." >&2
  measure "$bin" gen --like kdda --rows "$rows" --seed 2010 -o "$text" \
    --test-rows "$test_rows" --test-output "$test_text"
  row "gen (text + test split)" "$WALL" "$RSS" "$(rate "$rows" "$WALL") rows/s" ""
fi
bytes=$(stat -c %s "$text")
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }')

cat "$text" > /dev/null  # warm the page cache so every reader starts equal
measure sh -c "cat '$text' > /dev/null"
row "floor: cat text > /dev/null" "$WALL" "$RSS" "$(rate "$mb" "$WALL") MB/s" "page cache"

for codec in zstd raw; do
  rm -rf "$work/kdda.$codec.shards"
  measure "$bin" convert "$text" -o "$work/kdda.$codec.shards" --codec "$codec"
  size=$(du -sb "$work/kdda.$codec.shards" | cut -f1)
  pct=$(awk -v a="$size" -v b="$bytes" 'BEGIN { printf "%.1f%%", 100 * a / b }')
  target=""; [ "$codec" = zstd ] && target="target ≤ 20 s, ≤ 256 MiB, ≤ 35% size"
  row "convert → $codec shards ($pct)" "$WALL" "$RSS" "$(rate "$mb" "$WALL") MB/s" "$target"
done
for codec in zstd raw; do
  measure "$scan" "$work/kdda.$codec.shards" --threads 2
  target="target ≤ $([ "$codec" = zstd ] && echo 2 || echo 1) s, ≤ 256 MiB"
  row "epoch scan $codec (2 threads)" "$WALL" "$RSS" "$(rate "$rows" "$WALL") rows/s" "$target"
done

for algo in svm ldm; do
  model=$work/kdda.$algo.model
  measure "$bin" train --algo "$algo" -d "$work/kdda.zstd.shards" -o "$model" --epochs 5 \
    -c "$c" --bias 1 --threads 2 --json > "$work/train.$algo.json"
  target=$([ "$algo" = ldm ] && echo "target ≤ 45 s" || echo "target ≤ 35 s")
  row "train $algo, 5 epochs (zstd shards)" "$WALL" "$RSS" "$(rate $((rows * 5)) "$WALL") rows/s" "$target"
  acc=$("$bin" eval -m "$model" -d "$test_text" --json | sed -n 's/.*"accuracy": \([0-9.]*\).*/\1/p')
  key() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" "$work/train.$algo.json" | head -1; }
  two() { awk -v x="$1" 'BEGIN { printf "%.2f", x }'; }
  learn=$(key learn_seconds)
  row "  $algo: 5 epochs (reader included)" "$(two "$(key train_seconds)")" "" "" \
    "final exact pass $(two "$(key eval_seconds)") s"
  row "  $algo: learning alone" "$(two "$learn")" "" "$(rate $((rows * 5)) "$learn") rows/s" \
    "reader wait $(two "$(key read_wait_seconds)") s; test accuracy $(awk -v x="$acc" 'BEGIN { printf "%.4f", x }')"
done

ldm_shards_wall=$WALL  # the loop's last measure: train ldm from zstd shards

# LDM with LDM-ref's pairing (j from an independent permutation): the default's baseline.
measure "$bin" train --algo ldm -d "$work/kdda.zstd.shards" -o "$work/kdda.ldm-permuted.model" \
  --epochs 5 -c "$c" --bias 1 --threads 2 --pairing permuted --json > "$work/train.permuted.json"
row "train ldm --pairing permuted" "$WALL" "$RSS" "$(rate $((rows * 5)) "$WALL") rows/s" \
  "learning alone $(sed -n 's/.*"learn_seconds": \([0-9.]*\).*/\1/p' "$work/train.permuted.json" |
    awk '{ printf "%.2f", $1 }') s"

# End to end from the text, as LIBLINEAR runs: convert on the fly, then train.
measure "$bin" train --algo ldm -d "$text" -o "$work/kdda.ldm-text.model" --epochs 5 -c "$c" \
  --bias 1 --threads 2
ldm_text_wall=$WALL
row "train ldm from text (convert incl.)" "$WALL" "$RSS" "$(rate $((rows * 5)) "$WALL") rows/s" ""

if [ -z "${SKIP_LIBLINEAR:-}" ] && command -v liblinear-train >/dev/null; then
  measure liblinear-train -q -s 3 -B 1 -c "$c" "$text" "$work/kdda.liblinear.model"
  row "LIBLINEAR -s 3 -B 1 (same text)" "$WALL" "$RSS" "$(rate "$rows" "$WALL") rows/s" "baseline"
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", a / b }'; }
  row "  LDM speed-up over LIBLINEAR" "" "" "" \
    "from shards $(ratio "$WALL" "$ldm_shards_wall"), from text $(ratio "$WALL" "$ldm_text_wall")"
  acc=$(liblinear-predict "$test_text" "$work/kdda.liblinear.model" "$work/liblinear.out" |
    sed -n 's/Accuracy = \([0-9.]*\)%.*/\1/p')
  row "  LIBLINEAR" "" "" "" "test accuracy $(awk -v a="$acc" 'BEGIN { printf "%.4f", a / 100 }')"
fi

printf '\n%-34s %10s %10s %16s  %s\n' "step ($rows rows, $mb MB text)" "wall s" "RSS MiB" "throughput" "note"
printf '%s\n' "${table[@]}"
[ -n "${KEEP:-}" ] || rm -rf "$work"
