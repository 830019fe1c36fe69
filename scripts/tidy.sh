#!/usr/bin/env bash
# clang-tidy (Debian's clang-tidy-14, checks in .clang-tidy) on the C++ files changed since BASE, or
# on every source file with ALL=1. docs/testing.md ("Static checks") says what and why.
#
#   scripts/tidy.sh                 files changed since BASE (commits, staged, unstaged, untracked)
#   ALL=1 scripts/tidy.sh           every .cpp of engine/ io/ driver/ cli/ tests/
#   scripts/tidy.sh FILE...         those files
#
# BASE: the merge base with the branch's upstream where there is one, else HEAD~1 (the last commit
# and everything not yet committed). A changed header brings in the .cpp files that include it.
# In the changed-files mode only the changed files' findings are shown (findings in an unchanged
# header that a changed .cpp includes are not); with ALL=1, those of every project header.
# Exit status: 0 no findings, 1 findings (each printed once, then a count per check; a compile
# error counts as a finding), 2 clang-tidy missing or failing without saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

tidy=${CLANG_TIDY:-clang-tidy-14}
tree=${TIDY_BUILD:-build-tidy}
jobs=${JOBS:-$(nproc)}
dirs=(engine io driver cli tests)
command -v "$tidy" >/dev/null || { echo "tidy: $tidy not found (make setup installs clang-tidy-14)" >&2; exit 2; }

# A Release tree of its own for compile_commands.json (configure only: clang-tidy needs no built
# file), configured every time so that a new source file is in it (well under a second).
cmake -S . -B "$tree" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DPOLYMARGIN_BENCH=OFF >/dev/null

header_filter=
if [ $# -gt 0 ]; then
  files=("$@")
elif [ "${ALL:-0}" = 1 ]; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- "${dirs[@]}" |
                        grep '\.cpp$' | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
else
  if [ -z "${BASE:-}" ]; then
    BASE=$(git merge-base HEAD '@{upstream}' 2>/dev/null || git rev-parse HEAD~1)
  fi
  mapfile -t changed < <({ git diff --name-only --diff-filter=d "$BASE" -- "${dirs[@]}"
                            git ls-files --others --exclude-standard -- "${dirs[@]}"; } |
                          grep -E '\.(cpp|h)$' | sort -u)
  files=()
  headers=()
  for f in "${changed[@]}"; do
    [ -f "$f" ] || continue
    case $f in
      *.cpp) files+=("$f") ;;
      *.h)
        headers+=("$f")
        # By the header's name: tests include their helpers by relative paths (../io/x.h).
        name=$(basename "$f" | sed 's/\./\\./g')
        mapfile -t -O "${#files[@]}" files < <(grep -rlE --include='*.cpp' "#include \"([^\"]*/)?$name\"" "${dirs[@]}" || true)
        ;;
    esac
  done
  [ ${#files[@]} -gt 0 ] && mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
  # Findings in the changed headers only; a .cpp file's own findings are always shown.
  regex='^$'
  if [ ${#headers[@]} -gt 0 ]; then
    # tests/driver/../io/x.h is tests/io/x.h.
    regex="^$root/($(printf '%s\n' "${headers[@]}" |
                     sed 's/\./\\./g; s#^tests/#tests/([^/]+/\\.\\./)?#' | paste -sd '|'))\$"
  fi
  header_filter=$regex
  echo "tidy: ${#files[@]} files changed since $(git rev-parse --short "$BASE")" >&2
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "tidy: no C++ files to check" >&2
  exit 0
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export tidy tree out header_filter
# One clang-tidy per file, JOBS at a time; each file's report in its own file, so that they do not
# interleave.
printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$jobs" bash -c '
    f=$1
    log="$out/$(printf %s "$f" | tr / _).log"
    "$tidy" -p "$tree" --quiet ${header_filter:+"--header-filter=$header_filter"} "$f" \
      >"$log" 2>"$log.err" || echo "$f" >>"$out/failed"
  ' _ || true

# Each finding once (a header's finding comes from every file that includes it), with its notes;
# paths relative to the repository, tests/driver/../io/x.h as tests/io/x.h.
cat "$out"/*.log | awk -v root="$root/" '
  /^\// { while (match($0, /\/[^\/.][^\/]*\/\.\.\//)) $0 = substr($0, 1, RSTART) substr($0, RSTART + RLENGTH)
          if (index($0, root) == 1) $0 = substr($0, length(root) + 1) }
  /^([^ ].*:[0-9]+:[0-9]+: )?(warning|error):/ { show = !seen[$0]++ }
  show
' >"$out/report"
cat "$out/report"
pattern='^([^ ].*:[0-9]+:[0-9]+: )?(warning|error):'
findings=$(grep -cE "$pattern" "$out/report" || true)
if [ "$findings" -gt 0 ]; then
  echo "tidy: $findings findings in ${#files[@]} files:" >&2
  grep -E "$pattern" "$out/report" |
    sed -E 's/.*\[([a-z0-9.,-]+)\]$/\1/' | sort | uniq -c | sort -rn >&2
fi
# clang-tidy failed on a file and said nothing of why: a crash or a missing compile command.
silent=0
if [ -s "$out/failed" ]; then
  while read -r f; do
    log="$out/$(printf %s "$f" | tr / _).log"
    if ! grep -qE ': error:' "$log"; then
      echo "tidy: clang-tidy failed on $f:" >&2
      cat "$log.err" >&2
      silent=1
    fi
  done <"$out/failed"
fi
[ "$silent" -eq 0 ] || exit 2
[ "$findings" -eq 0 ] || exit 1
echo "tidy: ${#files[@]} files, no findings" >&2
