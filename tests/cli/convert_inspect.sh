#!/usr/bin/env bash
# convert and inspect end to end on the bundled a9a (32,561 rows, 123 features, 451,592 non-zeros,
# labels -1: 24,720 and +1: 7,841): the numbers, --verify, and the refusals with their exit codes
# (a flipped byte → 3 naming the block, truncation → 3, stale source → 3, usage → 2, I/O → 4).
# Usage: tests/cli/convert_inspect.sh POLYMARGIN   (run from the repository root)
set -euo pipefail
bin=${1:?usage: $0 POLYMARGIN}
data=data/a9a.zst
work=$(mktemp -d "${TMPDIR:-/tmp}/pm-convert-inspect.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# expect_json FILE KEY VALUE: the pretty-printed JSON has the line "KEY": VALUE (no jq needed).
expect_json() {
  grep -Eq "^ *\"$2\": $3,?\$" "$1" || fail "$1: expected \"$2\": $3, got: $(grep -E "^ *\"$2\":" "$1" || echo nothing)"
}
# expect_exit CODE PATTERN CMD...: CMD exits with CODE and its stderr matches PATTERN.
expect_exit() {
  local code=$1 pattern=$2
  shift 2
  local rc=0
  "$@" > "$work/out" 2> "$work/err" || rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code; stderr: $(cat "$work/err")"
  grep -Eq -- "$pattern" "$work/err" || fail "$*: stderr does not match '$pattern': $(cat "$work/err")"
}
# flip_byte FILE OFFSET: inverts one byte in place.
flip_byte() {
  local old
  old=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((255 - old)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

for codec in zstd raw; do
  out=$work/a9a.$codec.shards
  "$bin" convert "$data" -o "$out" --codec "$codec" --block-rows 1000 --shards 3 --json \
    > "$work/convert.json" || fail "convert --codec $codec"
  "$bin" inspect "$out" --json --verify > "$work/inspect.json" || fail "inspect --verify ($codec)"
  for f in "$work/convert.json" "$work/inspect.json"; do
    expect_json "$f" rows 32561
    expect_json "$f" features 123
    expect_json "$f" nnz 451592
    expect_json "$f" max_index 123
    expect_json "$f" index_base 1
    expect_json "$f" '-1' 24720
    expect_json "$f" 1 7841
    expect_json "$f" codec "\"$codec\""
    expect_json "$f" blocks 33
    expect_json "$f" shards 3
    expect_json "$f" format_version 3
  done
  cp "$work/convert.json" "$work/convert.$codec.json"
  expect_json "$work/inspect.json" verified true
  expect_json "$work/inspect.json" blocks_checked 33
  # Every shard file is there, and nothing temporary is left next to the output.
  [ "$(ls "$out" | wc -l)" -eq 5 ] || fail "$out holds: $(ls "$out")"
  [ "$(ls "$work" | grep -c 'shards$')" -eq "$([ "$codec" = zstd ] && echo 1 || echo 2)" ] ||
    fail "leftovers in $work: $(ls "$work")"
done

# Size: zstd shards hold a9a in at most 35% of the text (the issue's target for KDD-size data).
ratio=$(sed -n 's/.*"compression_ratio": \([0-9.e-]*\).*/\1/p' "$work/convert.zstd.json")
awk -v r="$ratio" 'BEGIN { exit !(r > 0 && r <= 0.35) }' || fail "zstd compression ratio $ratio > 0.35"

# The human-readable report names the numbers too.
"$bin" inspect "$work/a9a.zstd.shards" --verify > "$work/inspect.txt"
grep -q '^rows *32561$' "$work/inspect.txt" || fail "inspect text: $(cat "$work/inspect.txt")"
grep -q -- '-1: 24720, 1: 7841' "$work/inspect.txt" || fail "inspect labels: $(cat "$work/inspect.txt")"
grep -q '^verified *33 blocks' "$work/inspect.txt" || fail "inspect verified: $(cat "$work/inspect.txt")"

# A flipped byte inside block 0 of shard 1 (blocks start after the 64-byte file header): the
# directory still opens, but --verify exits 3 naming the shard file and the block.
corrupt=$work/corrupt.shards
cp -r "$work/a9a.zstd.shards" "$corrupt"
flip_byte "$corrupt/shard-00001.pms" 200
"$bin" inspect "$corrupt" > /dev/null || fail "inspect without --verify should not read blocks"
expect_exit 3 'shard-00001\.pms: block 0 \(global block 1\): checksum mismatch' \
  "$bin" inspect "$corrupt" --verify

# The manifest's values are under its own checksum: a changed label (one bit: "1" -> "0"), index
# base or max_index is refused by every command that opens the directory, before any work.
for edit in 's/"1": 7841/"0": 7841/' 's/"index_base": 1/"index_base": 0/' \
  's/"max_index": 123/"max_index": 4294967295/'; do
  edited=$work/edited.shards
  rm -rf "$edited" && cp -r "$work/a9a.zstd.shards" "$edited"
  sed -i "$edit" "$edited/manifest.json"
  ! cmp -s "$edited/manifest.json" "$work/a9a.zstd.shards/manifest.json" || fail "no edit: $edit"
  expect_exit 3 'manifest.json: manifest checksum mismatch' "$bin" inspect "$edited"
  expect_exit 3 'manifest checksum mismatch' "$bin" train -d "$edited" -o "$work/edited.model"
  [ ! -e "$work/edited.model" ] || fail "a model from an edited manifest"
done
# A damaged field name is refused as unknown (the checksum's own name included).
rm -rf "$edited" && cp -r "$work/a9a.zstd.shards" "$edited"
sed -i 's/"manifest_checksum"/"manifest_checksun"/' "$edited/manifest.json"
expect_exit 3 "unknown field 'manifest_checksun'" "$bin" inspect "$edited"
# A manifest without the checksum (written before it existed): --verify still checks the label
# counts against the rows.
rm -rf "$edited" && cp -r "$work/a9a.zstd.shards" "$edited"
sed -i -e '/"manifest_checksum"/d' -e 's/"block_index_checksum": \("[0-9a-f]*"\),/"block_index_checksum": \1/' \
  -e 's/"1": 7841/"7": 7841/' "$edited/manifest.json"
grep -q '"7": 7841' "$edited/manifest.json" || fail "the label count to edit is not in the manifest"
expect_exit 3 'manifest.json: its label counts do not match the blocks' "$bin" inspect "$edited" --verify

# Truncation is refused at open.
truncated=$work/truncated.shards
cp -r "$work/a9a.raw.shards" "$truncated"
truncate -s -8 "$truncated/shard-00002.pms"
expect_exit 3 'truncated' "$bin" inspect "$truncated"

# A source that changed since conversion makes the shards stale; a missing one is fine.
cp "$data" "$work/copy.zst"
"$bin" convert "$work/copy.zst" -o "$work/stale.shards" > /dev/null
"$bin" inspect "$work/stale.shards" > /dev/null || fail "fresh shards refused"
touch -d '2001-01-01' "$work/copy.zst"
expect_exit 3 'stale shards: .*copy\.zst changed since conversion \(re-run convert\)' \
  "$bin" inspect "$work/stale.shards"
rm "$work/copy.zst"
"$bin" inspect "$work/stale.shards" | grep 'missing now' > /dev/null || fail "missing source not noted"

# Standard input converts too, recorded as "-".
zstd -dc "$data" | "$bin" convert - -o "$work/stdin.shards" --codec raw --json > "$work/stdin.json"
expect_json "$work/stdin.json" rows 32561
"$bin" inspect "$work/stdin.shards" | grep '^source *- (stdin)$' > /dev/null || fail "stdin source"

# Converting again replaces a shard directory; a directory of something else is never replaced.
"$bin" convert "$data" -o "$work/a9a.zstd.shards" --block-rows 5000 --json > "$work/again.json"
expect_json "$work/again.json" blocks 7
mkdir "$work/precious" && echo keep > "$work/precious/notes.txt"
expect_exit 2 'refusing to replace .*precious' "$bin" convert "$data" -o "$work/precious"
[ -f "$work/precious/notes.txt" ] || fail "a non-shard directory was replaced"
# A file named manifest.json does not make a directory a shard directory: what else is in it, and
# the manifest itself, must be a shard directory's.
echo x > "$work/precious/manifest.json"
expect_exit 2 'holds notes.txt, which is not part of a shard directory' "$bin" convert "$data" -o "$work/precious"
[ -f "$work/precious/notes.txt" ] || fail "a directory with a manifest.json and notes.txt was replaced"
mkdir "$work/fake" && echo x > "$work/fake/manifest.json"
expect_exit 2 'not a readable shard directory' "$bin" convert "$data" -o "$work/fake"
[ "$(cat "$work/fake/manifest.json")" = x ] || fail "a directory with an unreadable manifest was replaced"
rm "$work/precious/manifest.json"

# --max-bad-lines N: up to N malformed lines skipped, counted, and the first ten named (file:line:
# column) by convert and kept in the manifest for inspect; one more is an error naming it.
printf '1 1:1 2:2\n-1 2:1 1:3\n1 3:nan\n-1 1:1\n+1 2:x\n' > "$work/bad.svm"
"$bin" convert "$work/bad.svm" -o "$work/bad.shards" --max-bad-lines 3 > "$work/bad.out" \
  || fail "convert --max-bad-lines 3"
grep -q '^skipped 3 malformed lines:$' "$work/bad.out" || fail "skipped count: $(cat "$work/bad.out")"
for at in 'bad.svm:2:8: unsorted feature index' 'bad.svm:3:5: feature value .nan. is not finite' \
          "bad.svm:5:6: bad feature value 'x'"; do
  grep -q "$at" "$work/bad.out" || fail "convert does not name '$at': $(cat "$work/bad.out")"
done
[ "$("$bin" inspect "$work/bad.shards" --json | jq '.bad_lines | length')" = 3 ] \
  || fail "inspect --json has not the 3 bad lines"
seq 1 12 | sed 's/.*/1 1:x/' > "$work/bad12.svm"
echo '1 1:1' >> "$work/bad12.svm"
"$bin" convert "$work/bad12.svm" -o "$work/bad12.shards" --max-bad-lines 12 > "$work/bad.out"
grep -q '^skipped 12 malformed lines, the first:$' "$work/bad.out" || fail "12 bad lines: $(cat "$work/bad.out")"
[ "$(grep -c '^  .*bad12.svm:[0-9]*:5: bad feature value' "$work/bad.out")" = 10 ] || fail "not ten named: $(cat "$work/bad.out")"
expect_exit 3 'bad.svm:5:6: .*more bad lines than --max-bad-lines 2 allows' \
  "$bin" convert "$work/bad.svm" -o "$work/bad2.shards" --max-bad-lines 2
# Every line skipped: the error says so, and why the first was.
head -n 12 "$work/bad12.svm" > "$work/allbad.svm"
expect_exit 3 'no data rows: all 12 data lines were skipped as bad \(--max-bad-lines\), the first: .*allbad.svm:1:5: bad feature value' \
  "$bin" convert "$work/allbad.svm" -o "$work/allbad.shards" --max-bad-lines 20

# Usage and I/O errors.
expect_exit 2 'codec' "$bin" convert "$data" -o "$work/x.shards" --codec lz4
expect_exit 2 'unrecognised|unknown' "$bin" convert "$data" -o "$work/x.shards" --bogus
# A prefix of an option's name is not that option: `--alg cpm` once trained an LDM recorded as cpm.
expect_exit 2 "unrecognised option '--alg'" "$bin" train --alg cpm -d "$data" -o "$work/alg.model"
expect_exit 2 "unrecognised option '--metrics-j'" "$bin" train -d "$data" -o "$work/alg.model" --metrics-j "$work/m.json"
[ ! -e "$work/alg.model" ] || fail "a refused option left a model"
expect_exit 2 'index base' "$bin" convert "$data" -o "$work/x.shards" --index-base 2
expect_exit 4 'no such file|cannot open' "$bin" convert "$work/absent.svm" -o "$work/x.shards"
expect_exit 3 'manifest missing' "$bin" inspect "$work/precious"
expect_exit 4 'cannot open .*absent.shards: no such file' "$bin" inspect "$work/absent.shards"
echo "1 1:1" > "$work/plain.svm"
expect_exit 3 'not a shard directory but a file' "$bin" inspect "$work/plain.svm"
[ ! -e "$work/x.shards" ] || fail "a failed convert left $work/x.shards"
ls "$work" | grep -q 'tmp-' && fail "temporary directories left: $(ls "$work")"

# A shard directory missing its scaling table is incomplete data (3), not an I/O error.
"$bin" convert "$data" -o "$work/nomax.shards" > /dev/null
rm "$work/nomax.shards/feature_maxabs.bin"
expect_exit 3 'feature_maxabs.bin: missing: the shard directory is incomplete' \
  "$bin" inspect "$work/nomax.shards" --verify
expect_exit 3 'feature_maxabs.bin: missing' "$bin" train -d "$work/nomax.shards" -o "$work/nomax.model"

# An output that is a symbolic link to a shard directory: the directory it points to is replaced,
# the link kept (as for a file).
printf '1 1:1\n-1 2:1\n' > "$work/two.svm"
"$bin" convert "$work/two.svm" -o "$work/real.shards" > /dev/null
ln -s real.shards "$work/link.shards"
"$bin" convert "$data" -o "$work/link.shards" > /dev/null || fail "convert through a link"
[ -L "$work/link.shards" ] || fail "the link was replaced by a directory"
"$bin" inspect "$work/real.shards" > "$work/real.txt"
grep -q 'rows *32561' "$work/real.txt" || fail "the link's target was not replaced"

echo "convert_inspect: all checks passed"
