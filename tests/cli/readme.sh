#!/usr/bin/env bash
# The README's code blocks run as written, in order, in a scratch folder that has the repository's
# data/ and configs/ and a build/ (the binary under test), as a fresh clone has them after
# `make run`: every shell block under bash -e, every Python block under /usr/bin/python3 with the
# build's package. A block preceded by a line `<!-- not run: REASON -->` is skipped (the set-up
# commands, which this test is run by; a cluster; data outside the repository).
# usage: tests/cli/readme.sh BINARY
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
build=$(dirname "$bin")
root=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
if ! [ -x "$py" ]; then
  echo "skipped: needs /usr/bin/python3 to read the README's blocks" >&2
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/pm_readme.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/run" "$work/blocks" "$work/path"
ln -s "$root/data" "$root/configs" "$work/run/"
ln -s "$build" "$work/run/build"
ln -s "$bin" "$work/path/polymargin"  # the README's `polymargin ...` lines: the installed name

# Each fenced block to blocks/NN.sh or NN.py (a skipped one to NN.skip, its reason inside).
"$py" - "$root/README.md" "$work/blocks" <<'EOF'
import re, sys
text = open(sys.argv[1]).read().splitlines()
n, i, last = 0, 0, ""
while i < len(text):
    fence = re.match(r"^```(\w*)\s*$", text[i])
    if not fence:
        if text[i].strip():
            last = text[i].strip()
        i += 1
        continue
    body = []
    i += 1
    while not text[i].startswith("```"):
        body.append(text[i])
        i += 1
    i += 1
    n += 1
    skip = re.match(r"<!-- not run: (.+) -->", last)
    kind = "skip" if skip else ("py" if fence.group(1) == "python" else "sh")
    with open(f"{sys.argv[2]}/{n:02d}.{kind}", "w") as f:
        f.write((skip.group(1) + "\n") if skip else "\n".join(body) + "\n")
    last = ""
EOF

ran=0 ran_py=0
cd "$work/run"
export PATH="$work/path:$PATH" PYTHONPATH="$build/python" POLYMARGIN_BINARY="$bin"
for block in "$work"/blocks/*; do
  name=$(basename "$block")
  case $name in
    *.skip) echo "block ${name%.*}: not run ($(cat "$block"))"; continue ;;
    *.py)
      if ! [ -d "$build/python/polymargin" ]; then
        echo "block ${name%.*}: not run (the Python package is not built)"
        continue
      fi
      runner=("$py" "$block") ;;
    *) runner=(bash -euo pipefail "$block") ;;
  esac
  echo "block ${name%.*}:"
  sed 's/^/    /' "$block"
  if ! "${runner[@]}" > "$work/out" 2>&1; then
    tail -n 30 "$work/out" >&2
    echo "FAIL: README block ${name%.*} (above) exits non-zero" >&2
    exit 1
  fi
  ran=$((ran + 1))
  case $name in *.py) ran_py=$((ran_py + 1)) ;; esac
done
# A floor, so that a README whose blocks the reader above stops finding cannot pass: at least three
# shell blocks, and a Python block where the package is built (a sanitizer build has none).
[ $((ran - ran_py)) -ge 3 ] || { echo "FAIL: only $((ran - ran_py)) shell blocks ran" >&2; exit 1; }
if [ -d "$build/python/polymargin" ] && [ "$ran_py" -lt 1 ]; then
  echo "FAIL: the Python package is built but no Python block ran" >&2
  exit 1
fi
echo "ok: $ran README blocks ran as written"
