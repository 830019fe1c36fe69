# Helpers shared by the shell tests of tests/cli (sourced; not a test itself, hence not *.sh).
# The sourcing script sets $bin (the polymargin binary) and $work (its scratch directory) first.

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
