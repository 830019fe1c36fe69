#!/usr/bin/env bash
# The bad-input battery at the command line: every case of issue 7 exits non-zero with its documented
# code and a message naming the location (file:line:column and token, or the shard file and block),
# and leaves no output file behind, not even a temporary one. The parser's and the readers' unit
# tests check each case in depth; this is the end-to-end proof through convert, train, eval.
# Usage: tests/cli/bad_input.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=${1:?usage: $0 POLYMARGIN_BINARY}
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_bad.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
in=$work/in
out=$work/out
mkdir -p "$in" "$out"

# expect (common.bash), and $out stays empty: no output file, not even a temporary one.
expect_clean() {
  expect "$@"
  [ -z "$(ls -A "$out")" ] || fail "${*:3} left files: $(ls -A "$out")"
}
# text CASE LINE2: a file whose first line is good and whose second is LINE2.
text() { printf '1 1:0.5 3:1\n%s\n-1 2:1\n' "$2" > "$in/$1.svm"; }

# --- text: each bad token is named with file:line:column ----------------------------------------
text number '-1 2:0.5x'
expect_clean 3 "number.svm:2:6" convert "$in/number.svm" -o "$out/d.shards"
text label 'abc 2:1'
expect_clean 3 "label.svm:2:1" convert "$in/label.svm" -o "$out/d.shards"
text nan '-1 2:nan'
expect_clean 3 "nan.svm:2:" convert "$in/nan.svm" -o "$out/d.shards"
text inf '-1 2:inf'
expect_clean 3 "inf.svm:2:" convert "$in/inf.svm" -o "$out/d.shards"
text labelnan 'nan 2:1'
expect_clean 3 "labelnan.svm:2:1" convert "$in/labelnan.svm" -o "$out/d.shards"
text zero '-1 0:1 2:1'
expect_clean 3 "zero.svm:2:" convert "$in/zero.svm" -o "$out/d.shards" --index-base 1
text negative '-1 -2:1'
expect_clean 3 "negative.svm:2:" convert "$in/negative.svm" -o "$out/d.shards"
text huge '-1 4294967296:1'
expect_clean 3 "huge.svm:2:" convert "$in/huge.svm" -o "$out/d.shards"
text unsorted '-1 5:1 2:1'
expect_clean 3 "unsorted.svm:2:" convert "$in/unsorted.svm" -o "$out/d.shards"
text duplicate '-1 2:1 2:1'
expect_clean 3 "duplicate.svm:2:" convert "$in/duplicate.svm" -o "$out/d.shards"
: > "$in/empty.svm"
expect_clean 3 "empty.svm" convert "$in/empty.svm" -o "$out/d.shards"
# Binary from the first byte: random bytes alone can start with an empty line (a newline first),
# and the error is then, rightly, on a later line (it failed CI once that way).
printf '\x00\x01\x02' > "$in/garbage.svm"
head -c 4096 /dev/urandom >> "$in/garbage.svm"
expect_clean 3 "garbage.svm:1:1" convert "$in/garbage.svm" -o "$out/d.shards"
# The same through train (converted on the fly) and eval: same message, no model.
expect_clean 3 "unsorted.svm:2:" train -d "$in/unsorted.svm" -o "$out/m.model"

# --- compressed input cut short -----------------------------------------------------------------
"$bin" gen --like kdda --rows 3000 --features 2000 --nnz 10 --seed 3 -o "$in/g.svm" > /dev/null
for z in gzip bzip2 zstd; do
  "$z" -c < "$in/g.svm" > "$in/g.$z"
  head -c $(($(stat -c %s "$in/g.$z") * 2 / 3)) "$in/g.$z" > "$in/cut.$z"
  expect 3 "cut.$z" convert "$in/cut.$z" -o "$out/d.shards"
  grep -qi "truncated\|unexpected end" "$work/stderr" || fail "$z: not called truncated: $(cat "$work/stderr")"
done

# --- shards: flipped byte, truncated shard, stale manifest ---------------------------------------
"$bin" convert "$in/g.svm" -o "$in/g.shards" --block-rows 500 > /dev/null
cp -r "$in/g.shards" "$in/flip.shards"
shard=$in/flip.shards/shard-00000.pms
printf '\xff' | dd of="$shard" bs=1 seek=$(($(stat -c %s "$shard") / 2)) conv=notrunc 2> /dev/null
expect_clean 3 "shard-00000.pms" train -d "$in/flip.shards" -o "$out/m.model"
grep -q "block" "$work/stderr" || fail "flipped byte: block not named: $(cat "$work/stderr")"
expect_clean 3 "shard-00000.pms" inspect "$in/flip.shards" --verify
cp -r "$in/g.shards" "$in/cut.shards"
truncate -s -100 "$in/cut.shards/shard-00000.pms"
expect_clean 3 "shard-00000.pms" train -d "$in/cut.shards" -o "$out/m.model"
cp "$in/g.svm" "$in/s.svm"
"$bin" convert "$in/s.svm" -o "$in/s.shards" > /dev/null
echo "1 7:1" >> "$in/s.svm"  # the source changed after the conversion
expect_clean 3 "re-run convert" train -d "$in/s.shards" -o "$out/m.model"

# --- model files: another version, truncated ------------------------------------------------------
"$bin" train -d "$in/g.shards" -o "$in/g.model" --epochs 2 --avg-start-epochs 1 > /dev/null 2>&1
cp "$in/g.model" "$in/v2.model"
printf '\x02' | dd of="$in/v2.model" bs=1 seek=8 conv=notrunc 2> /dev/null
expect_clean 3 "model format version 2 is not supported" eval -m "$in/v2.model" -d "$in/g.shards"
head -c 1000 "$in/g.model" > "$in/short.model"
expect_clean 3 "truncated" eval -m "$in/short.model" -d "$in/g.shards"

# --- the disk fills up (ulimit -f; SIGXFSZ ignored so that write(2) fails with EFBIG) -----------
limited() { (ulimit -f 64 && trap '' XFSZ && exec "$bin" "$@"); }
rc=0
limited convert "$in/g.svm" -o "$out/d.shards" --codec raw > /dev/null 2> "$work/stderr" || rc=$?
[ $rc -eq 4 ] || fail "convert on a full disk exited $rc: $(cat "$work/stderr")"
grep -q "cannot write" "$work/stderr" || fail "disk full: $(cat "$work/stderr")"
[ -z "$(ls -A "$out")" ] || fail "convert on a full disk left $(ls -A "$out")"
"$bin" gen --like kdda --rows 2000 --features 200000 --nnz 10 --seed 3 -o "$in/wide.shards" > /dev/null
for what in model checkpoint; do
  extra=()
  [ $what = checkpoint ] && extra=(--checkpoint "$out/c.ckpt")
  rc=0
  limited train -d "$in/wide.shards" -o "$out/m.model" --epochs 2 --avg-start-epochs 1 \
    "${extra[@]}" > /dev/null 2> "$work/stderr" || rc=$?
  [ $rc -eq 4 ] || fail "$what write on a full disk exited $rc: $(cat "$work/stderr")"
  grep -q "cannot write" "$work/stderr" || fail "disk full ($what): $(cat "$work/stderr")"
  [ -z "$(ls -A "$out")" ] || fail "$what write on a full disk left $(ls -A "$out")"
done
echo "bad_input: all checks passed"
