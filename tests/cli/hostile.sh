#!/usr/bin/env bash
# Hostile but realistic use of the command line (issue 22): an output that is an input, devices and
# streams as outputs, shards of another conversion, signals and kills mid-write, streams that never
# end, absurd counts and negative numbers. Every case exits with its documented code, says what to
# do, destroys nothing and leaves nothing behind, in seconds.
# Usage: tests/cli/hostile.sh BUILD/polymargin   (run from the repository root)
set -euo pipefail

bin=$(realpath "${1:?usage: $0 POLYMARGIN_BINARY}")
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_hostile.XXXXXX")
trap 'umount "$work/rofs" 2> /dev/null || true; rm -rf "$work"' EXIT
# shellcheck source=tests/cli/common.bash
source "$(dirname "$0")/common.bash"
cd "$work"
# A small binary set of our own (270 rows, 13 features), so the test needs nothing outside the repo.
"$bin" gen --like kdda --rows 270 --features 13 --nnz 8 --seed 5 -o in.svm > /dev/null
cp in.svm in.orig
"$bin" train -d in.svm -o m.model --epochs 3 > /dev/null 2>&1
cp m.model m.orig
# unchanged FILE...: each FILE still has its original bytes.
unchanged() {
  cmp -s in.svm in.orig || fail "in.svm was changed"
  cmp -s m.model m.orig || fail "m.model was changed"
}
# no_temporaries DIR: nothing named *.tmp-* is left in DIR.
no_temporaries() {
  local left
  left=$(find "$1" -maxdepth 1 \( -name '*.tmp-*' -o -name 'polymargin-*' \) | head -5)
  [ -z "$left" ] || fail "temporaries left in $1: $left"
}

# --- 1. an output that is an input is refused before any work (exit 2), whatever its spelling ----
ln -s in.svm link.svm
ln in.svm hard.svm
expect 2 "is the input" train -d in.svm -o in.svm
expect 2 "is the input" train -d in.svm -o ./link.svm
expect 2 "is the input" train -d in.svm -o hard.svm
expect 2 "is the input" predict -m m.model -d in.svm -o in.svm
expect 2 "is the input" predict -m m.model -d in.svm -o m.model
expect 2 "is the input" export -m m.model -o m.model
expect 2 "is the input" eval -m m.model -d in.svm --margins in.svm
expect 2 "is the input" eval -m m.model -d in.svm --plot m.model
expect 2 "is the input" train -d in.svm -o x.model --metrics-json in.svm
expect 2 "is the input" train -d in.svm -o x.model --validation m.model --metrics-json m.model
expect 2 "is the input" train --algo cpm -d in.svm -o in.svm
expect 2 "is the input" train --algo kldm -d in.svm -o in.svm
cp in.svm p.train.svm
expect 2 "is the input" split p.train.svm -o p
cmp -s p.train.svm in.orig || fail "split replaced its own input"
expect 2 "not a checkpoint" train -d in.svm -o x.model --checkpoint m.model
expect 2 "must be different files" train -d in.svm -o x.model --checkpoint x.model
expect 2 "must be different files" train -d in.svm -o x.model --metrics-json x.model
"$bin" convert in.svm -o d.shards > /dev/null
expect 2 "holds the input" convert d.shards/manifest.json -o d.shards
# Nothing is written inside an input directory: its files are the data.
expect 2 "lies inside the input" train -d d.shards -o d.shards/manifest.json
expect 2 "lies inside the input" train -d d.shards -o d.shards/new.model
expect 2 "lies inside the input" predict -m m.model -d d.shards -o d.shards/shard-00000.pms
expect 2 "lies inside the input" eval -m m.model -d d.shards --margins d.shards/manifest.json
"$bin" inspect d.shards --verify > /dev/null 2>&1 || fail "an output inside d.shards damaged it"
[ ! -e d.shards/new.model ] || fail "a model was written inside the input d.shards"
expect 2 "is the input" convert in.svm -o in.svm
# Refused before the search, not after it (train --tune), and --validation data that is not there
# (the model's own path, too) before the training, not once the model is written.
expect 2 "is the input" train -d in.svm -o in.svm --tune
expect 2 "is the input" train -d in.svm -o x.model --metrics-json in.svm --tune
grep -q "cross-validation" "$work/stderr" && fail "train --tune searched before refusing its output"
for algo in ldm cpm kldm; do
  expect 4 "cannot open 'x.model'" train --algo $algo -d in.svm -o x.model --validation x.model
  expect 4 "cannot open 'none.svm'" train --algo $algo -d in.svm -o x.model --validation none.svm
  [ ! -e x.model ] || fail "train --algo $algo wrote a model before refusing its --validation"
done
expect 4 "cannot open 'none.svm'" train -d in.svm -o x.model --validation none.svm --tune
mkdir empty.dir
expect 3 "not a shard directory" train -d in.svm -o x.model --validation empty.dir
# Validation data the model could not be scored on is refused before the training: no rows, or a
# label the training data lacks (every learner); stdin cannot be both.
sed 's/^-1/0/' in.svm > zero_one.svm
: > no_rows.svm
for algo in ldm cpm kldm; do
  expect 3 "validation label 0 (52 rows) is not one of the training labels -1 / 1" \
    train --algo $algo -d in.svm -o x.model --validation zero_one.svm
  expect 3 "no_rows.svm: no data rows" train --algo $algo -d in.svm -o x.model --validation no_rows.svm
  [ ! -e x.model ] || fail "train --algo $algo wrote a model before refusing its --validation"
  grep -q "^epoch\|trained" "$work/stderr" && fail "train --algo $algo trained before refusing"
done
"$bin" train -d - -o x.model --validation - < in.svm > /dev/null 2> "$work/stderr" && fail "stdin twice"
grep -q "standard input is already the training data" "$work/stderr" || fail "stdin twice: $(cat "$work/stderr")"
# Models of two index bases would read standard input twice: refused, not "no data rows".
"$bin" train --index-base 0 -d in.svm -o base0.model --epochs 1 > /dev/null 2>&1 || fail "train base 0"
"$bin" train -d in.svm -o base1.model --epochs 1 > /dev/null 2>&1 || fail "train base 1"
"$bin" eval -m base0.model -m base1.model -d - < in.svm > /dev/null 2> "$work/stderr" && fail "eval: two bases from stdin"
grep -q "standard input can be read once" "$work/stderr" || fail "eval two bases from stdin: $(cat "$work/stderr")"
rm -f base0.model base1.model
unchanged
[ ! -e x.model ] || fail "a refused train wrote x.model"

# --- 2. devices and streams are written in place, never replaced ------------------------------------
"$bin" export -m m.model -o /dev/null
"$bin" export -m m.model -o /dev/stdout > exported.txt
"$bin" export -m m.model > expected.txt
cmp -s exported.txt expected.txt || fail "export -o /dev/stdout did not reach the redirection"
"$bin" predict -m m.model -d in.svm -o /dev/fd/1 > scores.txt
[ "$(wc -l < scores.txt)" -eq 270 ] || fail "predict -o /dev/fd/1 wrote $(wc -l < scores.txt) lines"
mkfifo pipe
cat pipe > from_pipe.txt &
reader=$!
"$bin" export -m m.model -o pipe
wait $reader
cmp -s from_pipe.txt expected.txt || fail "export into a FIFO lost its text"
[ -p pipe ] || fail "the FIFO was replaced"
# A train whose -o is a FIFO nobody reads waits in open() once its epochs are done: one SIGTERM
# ends it there (nothing polls the stop request the first signal is otherwise taken as).
# The background job $1 (described as $2), once a thread of it waits in open() for a FIFO's other
# end, must end on one SIGTERM with exit 143.
ends_on_one_sigterm() {
  local job=$1 status=0
  for _ in $(seq 600); do
    grep -qs wait_for_partner /proc/"$job"/task/*/wchan && break
    sleep 0.1
  done
  kill -TERM "$job"
  for _ in $(seq 100); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2> /dev/null; then
    kill -KILL "$job"
    fail "$2 did not end on one SIGTERM"
  fi
  wait "$job" || status=$?
  [ "$status" -eq 143 ] || fail "$2, SIGTERM: exit $status, not 143"
}
"$bin" train -d in.svm -o pipe --epochs 2 > /dev/null 2> err.txt &
ends_on_one_sigterm $! "train -o FIFO without a reader"
[ -p pipe ] || fail "the FIFO was replaced"
"$bin" train -d in.svm -o /dev/null --epochs 3 > /dev/null 2>&1 || fail "train -o /dev/null failed"
if [ "$(id -u)" -eq 0 ]; then
  mknod full c 1 7  # a /dev/full of our own: a regression must not replace the machine's
  expect 4 "No space left" export -m m.model -o full
  expect 4 "No space left" train -d in.svm -o full --epochs 3
  expect 4 "No space left" predict -m m.model -d in.svm -o full
  [ -c full ] || fail "the device node was replaced by a file"
  # /dev/stdout itself, inside a private /dev (a regression then replaces nothing of the machine).
  if unshare -m true 2> /dev/null; then
    unshare -m bash -c 'mount -t tmpfs none /dev && ln -s /proc/self/fd/1 /dev/stdout &&
      "$1" export -m m.model -o /dev/stdout > in_ns.txt && [ -L /dev/stdout ]' _ "$bin" ||
      fail "export -o /dev/stdout in a private /dev"
    cmp -s in_ns.txt expected.txt || fail "export -o /dev/stdout (private /dev) lost its text"
  fi
fi
# Through a symbolic link the file it points to is replaced; the link stays.
ln -s real.model link.model
"$bin" train -d in.svm -o link.model --epochs 3 > /dev/null 2>&1
[ -L link.model ] && [ -f real.model ] || fail "-o LINK: the link was not kept"
# A replaced file keeps its permission bits (a private model stays private, a read-only one stays
# read-only) and, as root, its owner and group; a new file gets the umask's.
cp m.model own.model
chmod 600 own.model
"$bin" train -d in.svm -o own.model --epochs 2 > /dev/null 2>&1 || fail "train over a 0600 model"
[ "$(stat -c %a own.model)" = 600 ] || fail "a 0600 model was replaced as $(stat -c %a own.model)"
chmod 444 own.model
"$bin" export -m m.model -o own.model > /dev/null 2>&1 || fail "export over a 0444 file"
[ "$(stat -c %a own.model)" = 444 ] || fail "a 0444 file was replaced as $(stat -c %a own.model)"
if [ "$(id -u)" = 0 ]; then
  chown 65534:65534 own.model
  "$bin" export -m m.model -o own.model > /dev/null 2>&1 || fail "export over another's file"
  [ "$(stat -c %u:%g own.model)" = 65534:65534 ] ||
    fail "a file of 65534:65534 was replaced as $(stat -c %u:%g own.model)"
fi
(umask 077 && "$bin" export -m m.model -o new.model > /dev/null 2>&1) || fail "export to a new file"
[ "$(stat -c %a new.model)" = 600 ] || fail "a new file under umask 077 is $(stat -c %a new.model)"
# So does a replaced shard directory (its owner and group too, as root).
"$bin" convert in.svm -o own.shards > /dev/null 2>&1 || fail "convert"
chmod 700 own.shards
[ "$(id -u)" != 0 ] || chown 65534:65534 own.shards
"$bin" convert in.svm -o own.shards > /dev/null 2>&1 || fail "convert over a 0700 directory"
[ "$(stat -c %a own.shards)" = 700 ] || fail "a 0700 shard directory came back $(stat -c %a own.shards)"
[ "$(id -u)" != 0 ] || [ "$(stat -c %u:%g own.shards)" = 65534:65534 ] ||
  fail "a shard directory of 65534:65534 came back $(stat -c %u:%g own.shards)"
unchanged

# --- 3. a shard of another conversion is refused, whatever the codec ---------------------------------
# Same rows, the labels flipped: every block has the size and the index of the original's.
sed -e 's/^1 /+X /' -e 's/^-1 /1 /' -e 's/^+X /-1 /' in.svm > flipped.svm
for codec in raw zstd; do
  "$bin" convert in.svm -o a.$codec.shards --codec $codec --block-rows 64 > /dev/null
  "$bin" convert flipped.svm -o b.$codec.shards --codec $codec --block-rows 64 > /dev/null
  cp b.$codec.shards/shard-00000.pms a.$codec.shards/shard-00000.pms
  # Raw blocks have the same sizes, so only the content checksum tells; zstd sizes differ too.
  fragment="another conversion"
  [ $codec = zstd ] && fragment="re-run convert"
  expect 3 "$fragment" eval -m m.model -d a.$codec.shards
  expect 3 "$fragment" inspect a.$codec.shards --verify
done

# experiment -o DIR: never a directory holding its config or data (it writes its report there),
# an empty value is a usage error naming its line, DIR under a file is an I/O error.
mkdir exp && cp in.svm exp/results.json
printf 'repeats = 1\nfolds = 2\n[dataset d]\ndata = exp/results.json\n[method svm]\nalgo = svm\n' > exp/accuracy.md
cp exp/results.json exp.data.orig && cp exp/accuracy.md exp.conf.orig
expect 2 "holds the input" experiment exp/accuracy.md -o exp
cmp -s exp/results.json exp.data.orig && cmp -s exp/accuracy.md exp.conf.orig || fail "experiment overwrote its inputs"
printf 'repeats = 1\nfolds = 2\n[dataset d]\ndata = in.svm\n[method svm]\nalgo = svm\ncost =\n' > empty.conf
expect 2 "empty.conf:7: cost: no value" experiment empty.conf -o e
printf 'repeats = 1\nfolds = 2\n[dataset d]\ndata = in.svm\n[method svm]\nalgo = svm\n' > fine.conf
expect 4 "in.svm is not a directory" experiment fine.conf -o in.svm/x
# Rows without features train (the bias alone) for the linear learners and the CPM.
printf '1\n-1\n1\n-1\n' > nofeat.svm
for algo in ldm svm cpm; do
  "$bin" train --algo $algo -d nofeat.svm -o nofeat.model --epochs 2 > /dev/null 2> "$work/stderr" \
    || fail "train --algo $algo on rows without features: $(cat "$work/stderr")"
done

# --- 4. absurd thread counts are usage errors ---------------------------------------------------------
expect 2 "--threads must be between 0" train -d in.svm -o x.model --threads 70000
expect 2 "--threads must be between 0" train --algo kldm -d in.svm -o x.model --threads 65536
expect 2 "--threads must be between 0" convert in.svm -o t.shards --threads -3
expect 2 "--jobs must be between 0" experiment configs/none.conf -o e --jobs 5000

# --- 5. one feature id near 2^32 in a tiny file: no 16 GiB written, every learner refuses up front --
# (4294967294: the largest, 4294967295, is refused by the linear learners before memory is counted:
# tests/cli/train.sh.)
printf '1 4294967294:1\n-1 1:1\n1 3:1\n-1 2:1\n' > wide.svm
timeout 60 "$bin" convert wide.svm -o wide.shards > /dev/null || fail "convert of a wide id failed"
[ "$(du -sk wide.shards | cut -f1)" -lt 65536 ] || fail "wide.shards takes $(du -sh wide.shards)"
for algo in ldm svm kldm tldm cmm; do
  expect 7 "renumber the features densely" train --algo $algo -d wide.shards -o x.model
done
expect 7 "or less, or fewer faces" train --algo cpm -d wide.shards -o x.model
expect 7 "use --hash-bits" train --algo cpm -d wide.shards -o x.model --scale none
# Hashed, the weights fit; the max |x| table of 2^32 ids (32 GiB) does not, where memory is smaller.
if [ "$(awk '/MemAvailable/ { print $2 }' /proc/meminfo)" -lt $((32 * 1024 * 1024)) ]; then
  expect 7 "use --scale none" train --algo cpm -d wide.shards -o x.model --hash-bits 10
fi
[ ! -e x.model ] || fail "a refused learner wrote x.model"

# --- 6. binary data and lines without end are refused at once, memory bounded ------------------------
rc=0
timeout 60 "$bin" convert /dev/zero -o z.shards > /dev/null 2> err.txt || rc=$?
[ $rc -eq 3 ] && grep -q "/dev/zero:1:1: binary data" err.txt || fail "convert /dev/zero: $rc $(cat err.txt)"
printf '1 1:1 2:1 3:1\n-1 2:1\n' > short.svm
expect 3 "short.svm:1:12: line longer than 11 bytes" convert short.svm -o z.shards --max-line-bytes 11
head -c 3000000 /dev/zero | tr '\0' '1' | "$bin" convert - -o z.shards --max-line-bytes 1000000 \
  > /dev/null 2> err.txt && fail "an endless line was converted"
grep -q "longer than 1000000 bytes" err.txt || fail "endless line: $(cat err.txt)"
[ ! -e z.shards ] || fail "a refused convert wrote z.shards"
# The largest limit (2^64 - 1, "none") keeps every line of a mapped file over several 4 MiB chunks:
# the limit + 1 bytes searched for a chunk's last line end must not wrap to 0.
awk 'BEGIN { for (i = 0; i < 400000; i++) printf "%d 1:%d 2:0.5 7:%d\n", i % 2 ? 1 : -1, i % 9, i }' \
  > long.svm
"$bin" convert long.svm -o z.shards --max-line-bytes 18446744073709551615 > /dev/null 2> err.txt ||
  fail "--max-line-bytes 2^64 - 1: $(cat err.txt)"
[ "$(jq -r .rows z.shards/manifest.json)" = 400000 ] || fail "--max-line-bytes 2^64 - 1 lost rows"
rm -rf z.shards long.svm

# --- 7. a model read from a stream that is not a model stops at its first bytes -------------------
for stream in /dev/urandom /dev/zero; do
  rc=0
  timeout 60 "$bin" export -m $stream > /dev/null 2> err.txt || rc=$?
  [ $rc -eq 3 ] && grep -q "bad magic" err.txt || fail "export -m $stream: exit $rc, $(cat err.txt)"
  rc=0
  timeout 60 "$bin" predict -m $stream -d in.svm > /dev/null 2> err.txt || rc=$?
  [ $rc -eq 3 ] && grep -q "bad magic" err.txt || fail "predict -m $stream: exit $rc, $(cat err.txt)"
done

# --- 8. --points is bounded -----------------------------------------------------------------------
expect 2 "--points must be in [2, 100000]" eval -m m.model -d in.svm --points 1000000000 --margins x.csv
[ ! -e x.csv ] || fail "eval --points wrote x.csv"

# --- 9, 10. a signal mid-write removes the unfinished output; a kill leaves it to the next run -------
mkdir tmp
# wait_for GLOB: until something matches (at most 60 s: a loaded 2-core machine can take 10).
wait_for() {
  for _ in $(seq 1200); do compgen -G "$1" > /dev/null && return 0; sleep 0.05; done
  fail "nothing like $1 appeared"
}
# The command reads the data from the FIFO `feed`, which this script holds open on fd 3 after
# writing the data: the command has its first rows and waits for more until fd 3 is closed.
mkfifo feed
# stalled COMMAND ARGS...: starts polymargin with standard input from `feed` (stderr in err.txt),
# feeds it the data and leaves it waiting; its pid in $job.
stalled() {
  "$bin" "$@" < feed > /dev/null 2> err.txt &
  job=$!
  exec 3> feed
  cat in.svm >&3
}
# (SIGINT is not tried: a script's background jobs ignore it, as they should.)
for sig in TERM HUP; do
  stalled convert - -o s.shards
  wait_for 's.shards.tmp-*'
  kill -$sig $job
  rc=0
  wait $job || rc=$?
  exec 3>&-
  [ $rc -ne 0 ] || fail "convert went on after SIG$sig"
  grep -q "stopped by SIG$sig" err.txt || fail "SIG$sig: no message: $(cat err.txt)"
  no_temporaries .
  [ ! -e s.shards ] || fail "SIG$sig left s.shards"
  TMPDIR=$work/tmp stalled predict -m m.model -d -
  wait_for 'tmp/polymargin-*'
  kill -$sig $job
  wait $job || true
  exec 3>&-
  [ -z "$(ls -A tmp)" ] || fail "predict stopped by SIG$sig left $(ls -A tmp)"
done
# SIGKILL cannot be handled: the next run beside the leftovers sweeps them (their pid is gone).
stalled convert - -o k.shards
wait_for 'k.shards.tmp-*'
kill -KILL $job
wait $job || true
exec 3>&-
compgen -G 'k.shards.tmp-*' > /dev/null || fail "SIGKILL: expected a leftover to sweep"
"$bin" convert in.svm -o k.shards > /dev/null
no_temporaries .
TMPDIR=$work/tmp stalled predict -m m.model -d -
wait_for 'tmp/polymargin-*'
kill -KILL $job
wait $job || true
exec 3>&-
TMPDIR=$work/tmp "$bin" predict -m m.model -d in.svm > /dev/null
[ -z "$(ls -A tmp)" ] || fail "a later predict did not sweep $(ls -A tmp)"

# --- 11. a named pipe as training data ----------------------------------------------------------
mkfifo data.fifo
cat in.svm > data.fifo &
"$bin" train -d data.fifo -o fifo.model --epochs 3 > /dev/null 2> err.txt ||
  fail "train -d FIFO: $(cat err.txt)"
# ... and as validation data, which is read at the end: checking it up front must not take its
# first bytes (a pipe from <(...), a FIFO written late) nor wait for its writer.
margin() { jq -r '.validation.margin_mean' "$1"; }
"$bin" train -d in.svm -o v.model --epochs 3 --validation in.svm --json > v_file.json
"$bin" train -d in.svm -o v.model --epochs 3 --validation <(cat in.svm) --json > v_pipe.json
[ "$(margin v_pipe.json)" = "$(margin v_file.json)" ] ||
  fail "--validation from a pipe: margin mean $(margin v_pipe.json), from the file $(margin v_file.json)"
mkfifo valid.fifo
(sleep 1; cat in.svm > valid.fifo) &
"$bin" train -d in.svm -o v.model --epochs 3 --validation valid.fifo --json > v_fifo.json
[ "$(margin v_fifo.json)" = "$(margin v_file.json)" ] ||
  fail "--validation FIFO: margin mean $(margin v_fifo.json), from the file $(margin v_file.json)"
# A validation FIFO nobody writes holds the run in open() after its epochs: one SIGTERM ends it.
"$bin" train -d in.svm -o v2.model --epochs 2 --validation valid.fifo > /dev/null 2> err.txt &
ends_on_one_sigterm $! "train --validation FIFO without a writer"
[ ! -e v2.model ] || fail "train --validation FIFO, SIGTERM: a model was written"

# --- 12. a metrics file that cannot be written is refused before the run ---------------------------
expect 4 "does not exist" train -d in.svm -o x.model --metrics-json nodir/r.json
[ ! -e x.model ] || fail "train ran although --metrics-json could not be written"
grep -q "tmp-" "$work/stderr" && fail "the refusal named a temporary: $(cat "$work/stderr")"
# A metrics directory that cannot be written (a read-only file system, where mounting one is
# allowed): refused before the run, exit 4.
mkdir rofs
if mount -t tmpfs -o size=1m tmpfs rofs 2> /dev/null; then
  "$bin" train -d in.svm -o ro.model --metrics-json rofs/run.json --epochs 1 > /dev/null 2>&1 ||
    fail "train with metrics on the tmpfs"
  mount -o remount,ro rofs
  expect 4 "cannot write rofs/run.json (--metrics-json): Read-only file system" \
    train -d in.svm -o ro2.model --metrics-json rofs/run.json --epochs 1
  [ ! -e ro2.model ] || fail "train ran although --metrics-json could not be written"
  umount rofs
fi
# eval's two outputs: a disk that fills on the second leaves the old pair, not a new CSV beside the
# old plot (the CSV of 20,000 points, ~460 KB, fits; the plot, ~315 KB, does not).
mkdir evfs
if mount -t tmpfs -o size=2m tmpfs evfs 2> /dev/null; then
  "$bin" eval -m m.model -d in.svm --margins evfs/m.csv --plot evfs/m.svg > /dev/null 2>&1 ||
    fail "eval --margins --plot on the tmpfs"
  cp evfs/m.csv old.csv
  cp evfs/m.svg old.svg
  free=$(df --output=avail -B1 evfs | tail -1)
  head -c $((free - 600 * 1024)) /dev/zero > evfs/filler
  expect 4 "No space left on device" \
    eval -m m.model -d in.svm --margins evfs/m.csv --plot evfs/m.svg --points 20000
  cmp -s evfs/m.csv old.csv && cmp -s evfs/m.svg old.svg || fail "eval replaced one of its pair"
  no_temporaries evfs
  umount evfs
fi
# An output under a file: said as such, not as a missing directory.
expect 4 "in.svm is not a directory" predict -m m.model -d in.svm -o in.svm/p

# --- 13. --config: a directory, a typo, a section -----------------------------------------------------
mkdir confdir
expect 2 "is a directory" train -d in.svm -o x.model --config confdir
printf 'epochs = 3\nlamda1 = 3\n' > typo.conf
expect 2 "typo.conf:2: unknown key 'lamda1'" train -d in.svm -o x.model --config typo.conf
printf 'epochs = 3\ncost = abc\n' > value.conf
expect 2 "value.conf:2: the argument ('abc') for option 'cost' is invalid" train -d in.svm -o x.model --config value.conf
printf 'epochs = 3\nseed = 2\nepochs = 4\n' > twice.conf
expect 2 "twice.conf:3: 'epochs' is given twice (also on line 1)" train -d in.svm -o x.model --config twice.conf
printf 'epochs = 3\nwindow-blocks = -1\n' > negative.conf
expect 2 "--window-blocks must not be negative" train -d in.svm -o x.model --config negative.conf
# A [section] line: these files have none (Boost would read the keys after it as `train.epochs`,
# and it was skipped, its keys taken as the file's own). Refused naming the file and line, by every
# command, and by train --tune before its search.
printf 'seed = 2\n[train]\nepochs = 3\n' > section.conf
for command in "train -d in.svm -o x.model" "train -d in.svm -o x.model --tune --tune-budget 2" \
  "train --algo cpm -d in.svm -o x.model" "train --algo kldm -d in.svm -o x.model" \
  "convert in.svm -o s.shards" "predict -m m.model -d in.svm" "experiment none.conf -o x.dir"; do
  # shellcheck disable=SC2086 # the command's words
  expect 2 "section.conf:2: '[train]': a --config file has no sections" $command --config section.conf
done
[ ! -e x.model ] && [ ! -e s.shards ] && [ ! -e x.dir ] || fail "a refused --config wrote an output"

# --- 14. negative numbers for counts are usage errors, not wrapped; nor are numbers too large ---------
expect 2 "--window-blocks must not be negative" train -d in.svm -o x.model --window-blocks -1
expect 2 "--max-bad-lines must not be negative" convert in.svm -o t.shards --max-bad-lines -1
expect 2 "--block-rows must not be negative" convert in.svm -o t.shards --block-rows=-5
expect 2 "--faces '4294967295' is beyond the largest value the option holds (2147483647)" \
  train --algo cpm -d in.svm -o x.model -k 4294967295
expect 2 "--faces '-99999999999' is beyond the smallest value the option holds (-2147483648)" \
  train --algo cpm -d in.svm -o x.model -k -99999999999
expect 2 "--stop-after-rows '18446744073709551616' is beyond the largest value the option holds" \
  train -d in.svm -o x.model --stop-after-rows 18446744073709551616
printf 'block-rows = 99999999999\n' > large.conf
expect 2 "--block-rows '99999999999' in large.conf is beyond the largest value the option holds" \
  convert in.svm -o t.shards --config large.conf

# --- 15. two shard directories; an output that is a directory ----------------------------------------
cp -r d.shards e.shards
expect 2 "give one shard directory alone" train -d d.shards -d e.shards -o x.model
mkdir outdir
expect 2 "is a directory" train -d in.svm -o outdir
expect 2 "is a directory" predict -m m.model -d in.svm -o outdir
[ -z "$(ls -A outdir)" ] || fail "a refused train wrote into outdir"

# --- 16. messages that say what to do ------------------------------------------------------------------
for c in 1e308 1e-320; do
  expect 2 "in [1e-30, 1e30]" train -d in.svm -o x.model -c $c
  expect 2 "in [1e-30, 1e30]" train --algo cpm -d in.svm -o x.model -c $c
done
expect 7 "faces (-k)" train --algo cpm -d in.svm -o x.model -k 1000000000 --iterations 1
expect 2 "overflows" train -d in.svm -o x.model --lambda1-rel 1e308 -c 1e30
expect 2 "--lambda2-rel 1e+308 × m × C overflows" train --algo kldm -d in.svm -o x.model \
  --lambda2-rel 1e308 -c 1e30
# Values that would change nothing are refused or named in a warning, never taken in silence.
expect 2 "--stop-after-rows must be at least 1 (got 0)" train -d in.svm -o x.model \
  --checkpoint x.ck --stop-after-rows 0
expect 2 "--signal-features must be at least 1 (got 0)" gen --like kdda --rows 10 --features 50 \
  --nnz 5 --signal-features 0 -o x.svm
"$bin" train -d in.svm -o sync.model --epochs 1 --sync-rows 5 > /dev/null 2> err.txt ||
  fail "train --sync-rows with one worker"
grep -q -- "--sync-rows has no effect with one worker and one rank" err.txt || fail "no --sync-rows warning"
"$bin" convert in.svm -o level.shards --codec raw --zstd-level 22 > /dev/null 2> err.txt ||
  fail "convert --codec raw --zstd-level 22"
grep -q -- "--zstd-level has no effect with --codec raw" err.txt || fail "no --zstd-level warning"
[ ! -e x.model ] && [ ! -e x.svm ] || fail "a refused command wrote its output"
# Memory an address-space limit (ulimit -v) does not leave is refused up front, with the amount
# (not under a sanitizer, whose shadow memory needs terabytes of address space).
if [ -z "${POLYMARGIN_SANITIZE:-}" ]; then
  printf '1 200000000:1\n-1 1:1\n' > wide.svm
  (ulimit -v 2000000 && "$bin" train -d wide.svm -o x.model > /dev/null 2> err.txt) && status=0 ||
    status=$?
  [ "$status" -eq 7 ] && grep -q "the address-space limit (ulimit -v) leaves only" err.txt ||
    fail "train under ulimit -v: exit $status: $(cat err.txt)"
  # A small run under a limit that leaves it room trains (the 256 MiB margin kept against other
  # users of the machine is not asked of the address space).
  (ulimit -v 400000 && "$bin" train -d in.svm -o limited.model --epochs 2 > /dev/null 2> err.txt) ||
    fail "a small train under ulimit -v 400000: $(cat err.txt)"
fi
# A λ so large that the margins overflow: no model of no use, exit 5 (it was written, exit 0).
expect 5 "the trained model's objective is" train -d in.svm -o x.model --lambda2 1e300
expect 5 "the trained model's objective is" train --algo kldm -d in.svm -o x.model --lambda2 1e300
[ ! -e x.model ] || fail "a model whose objective is not finite was written"

# --- 17. files beside an output that are not ours: a lock file's name, a --tune cell cache --------
# MODEL.lock is taken, truncated and removed: never when it is not a lock file of ours (an input of
# the command, a link to the user's file, a FIFO): exit 2, the file as it was.
cp in.svm l.model.lock
expect 2 "l.model.lock holds other data, not the lock file of the model l.model" \
  train -d l.model.lock -o l.model
cmp -s l.model.lock in.svm || fail "an input named MODEL.lock was changed"
cp in.svm precious.svm
ln -s precious.svm l2.model.lock
expect 2 "l2.model.lock is a symbolic link" train -d in.svm -o l2.model
cmp -s precious.svm in.svm && [ -L l2.model.lock ] || fail "a link named MODEL.lock or its file changed"
mkfifo l3.model.lock
expect 2 "l3.model.lock is not a regular file" train -d in.svm -o l3.model
[ -p l3.model.lock ] || fail "a FIFO named MODEL.lock was removed"
[ ! -e l.model ] && [ ! -e l2.model ] && [ ! -e l3.model ] || fail "a model was written beside them"
echo 4242 > l4.model.lock  # a dead holder's
"$bin" train -d in.svm -o l4.model > /dev/null 2>&1 || fail "a dead holder's lock file refused"
[ ! -e l4.model.lock ] || fail "the lock file was not removed"
# CHECKPOINT.tune, the search's cells, is removed at the end: never the input, nor a directory
# that is not a cell cache.
cp -r d.shards ck.tune
expect 2 "--checkpoint's cell cache ck.tune is the input --data ck.tune" \
  train -d ck.tune -o t.model --checkpoint ck --tune --tune-budget 2
mkdir notes.tune
echo mine > notes.tune/notes.txt
expect 2 "notes.tune exists and is not the cell cache of a --tune run" \
  train -d d.shards -o t.model --checkpoint notes --tune --tune-budget 2
[ -f notes.tune/notes.txt ] && [ -f ck.tune/manifest.json ] && [ ! -e t.model ] ||
  fail "a directory named CHECKPOINT.tune was changed, or a model written"
# Standard output that is an input (appended to, or opened read-write) is refused before any work.
rc=0
"$bin" predict -m m.model -d in.svm >> in.svm 2> so.err || rc=$?
[ "$rc" = 2 ] && grep -q "standard output is the input --data in.svm" so.err ||
  fail "predict >> its input: exit $rc, $(cat so.err)"
rc=0
"$bin" predict -m m.model -d in.svm -o /dev/stdout 1<> in.svm 2> so.err || rc=$?
[ "$rc" = 2 ] || fail "predict -o /dev/stdout 1<> its input: exit $rc, $(cat so.err)"
rc=0
"$bin" predict -m m.model -d - < in.svm >> in.svm 2> so.err || rc=$?
[ "$rc" = 2 ] && grep -q "the input --data - (standard input)" so.err ||
  fail "predict -d - < in.svm >> in.svm: exit $rc, $(cat so.err)"
rc=0
"$bin" export -m m.model >> m.model 2> so.err || rc=$?
[ "$rc" = 2 ] || fail "export >> its model: exit $rc, $(cat so.err)"

unchanged
no_temporaries .
echo "hostile: all checks passed"
