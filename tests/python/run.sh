#!/usr/bin/env bash
# The Python package's tests: pytest under Debian's interpreter (/usr/bin/python3, which sees
# Debian's numpy, scipy and scikit-learn), against the package of the build tree BUILD.
# usage: tests/python/run.sh BUILD
set -euo pipefail
build=$(cd "$1" && pwd)
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c "import pytest, numpy, scipy, sklearn" 2>/dev/null; then
  echo "skipped: needs /usr/bin/python3 with python3-pytest, -numpy, -scipy, -sklearn" >&2
  exit 77
fi
export PYTHONPATH="$build/python" POLYMARGIN_BINARY="$build/polymargin"
# A TMPDIR of its own: the tests check that nothing is left in it, which another job's temporary
# files in a shared /tmp (a second test run at the same time) would contradict.
TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/pm_python.XXXXXX")
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
"$py" -m pytest -q -p no:cacheprovider "$(dirname "$0")"
