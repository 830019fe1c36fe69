# Helpers shared by the shell tests of tests/cli (sourced; not a test itself, hence not *.sh).
# The sourcing script sets $bin (the polymargin binary) and $work (its scratch directory) first.

cli_tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # this folder, wherever the test runs

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect CODE FRAGMENT COMMAND ARGS...: `polymargin COMMAND ARGS` exits with CODE and says FRAGMENT
# (a fixed string) on stderr, which stays in $work/stderr.
expect() {
  local code=$1 fragment=$2
  shift 2
  local rc=0
  "$bin" "$@" > "$work/stdout" 2> "$work/stderr" || rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code: $(cat "$work/stderr")"
  grep -qF -- "$fragment" "$work/stderr" || fail "$*: stderr lacks '$fragment': $(cat "$work/stderr")"
}

# has_keys FILE FILTER KEY...: the object that the jq FILTER picks in the JSON FILE has every KEY.
has_keys() {
  local file=$1 filter=$2 key
  shift 2
  for key in "$@"; do
    jq -e "$filter | has(\"$key\")" "$file" > /dev/null || fail "$file: $filter lacks $key"
  done
}

# hold_lock FILE: another process holds FILE's flock as train takes it (flock(1) on fd 9, then that
# process becomes `sleep 5`); its pid is left in $holder, for the caller to kill.
hold_lock() {
  bash -c 'exec 9> "$1"; flock -n 9; exec sleep 5' _ "$1" &
  holder=$!
  for _ in $(seq 50); do [ -e "$1" ] && break; sleep 0.02; done
  sleep 0.1
}

# term_when_logged PID LOG PATTERN: once LOG has a line matching PATTERN (at most 20 s), SIGTERM
# the job PID and wait for it; its exit status is left in $rc.
term_when_logged() {
  for _ in $(seq 400); do grep -qs "$3" "$2" && break; sleep 0.05; done
  kill -TERM "$1"
  rc=0
  wait "$1" || rc=$?
}

# mpi_test_env: what the MPI tests need of their environment, set here only, never in the user's.
# The harness runs as root in CI, which Open MPI refuses unless told; --oversubscribe: more ranks
# than this machine's cores. Under AddressSanitizer, Open MPI's libraries and plugins keep
# allocations to the end by design and their frames (no frame pointers, plugins unloaded at exit)
# cannot be named in a suppression: leak checking stays on in every other test of the same code.
# Under ThreadSanitizer, openmpi.tsan.supp names what Open MPI's own threads report.
mpi_test_env() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS }suppressions=$cli_tests/openmpi.tsan.supp"
}

# resume_peak_within KIB ROWS ARGS...: `train ARGS` stopped after ROWS rows with a checkpoint and
# resumed peaks (maximum resident set, /usr/bin/time) less than KIB KiB above the uninterrupted
# run, and writes its model. Not checked (said on stdout) without /usr/bin/time or in a sanitizer
# build, whose shadow memory is no run's.
resume_peak_within() {
  local slack=$1 rows=$2 plain resumed
  shift 2
  if [ ! -x /usr/bin/time ] || [ -n "${POLYMARGIN_SANITIZE:-}" ]; then
    echo "resume memory: not checked here (no /usr/bin/time, or a sanitizer build)"
    return
  fi
  /usr/bin/time -f %M -o "$work/rss.plain" "$bin" train "$@" -o "$work/peak.ref" > /dev/null 2>&1 ||
    fail "train $* failed"
  expect 6 "checkpoint written" train "$@" -o "$work/peak.m" --checkpoint "$work/peak.ck" \
    --stop-after-rows "$rows"
  /usr/bin/time -f %M -o "$work/rss.resumed" "$bin" train "$@" -o "$work/peak.m" \
    --resume "$work/peak.ck" > /dev/null 2>&1 || fail "the resume of train $* failed"
  cmp -s "$work/peak.ref" "$work/peak.m" || fail "the resume of train $*: its model differs"
  plain=$(tail -1 "$work/rss.plain") resumed=$(tail -1 "$work/rss.resumed")
  [ "$resumed" -lt $((plain + slack)) ] ||
    fail "a resumed run peaked at $resumed KiB against $plain KiB uninterrupted (weights held twice?)"
  echo "resume memory: ok ($resumed KiB resumed, $plain KiB uninterrupted)"
}
