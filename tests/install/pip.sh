#!/usr/bin/env bash
# `pip install .` (pyproject.toml, setup.py) works offline with Debian's setuptools and wheel: into a
# temporary virtual environment of /usr/bin/python3 (--system-site-packages, for Debian's numpy,
# scipy and scikit-learn), with --no-build-isolation and --no-index, building the module in the
# configured tree BUILD (POLYMARGIN_BUILD_DIR); then imports and fits with the installed package
# there. Exit 77 when a tool it needs is missing.
# usage: tests/install/pip.sh BUILD VERSION
set -euo pipefail
build=$(cd "$1" && pwd)
version=$2
source=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
if ! "$py" -c "import venv, ensurepip, setuptools, wheel, numpy, scipy, sklearn" 2>/dev/null ||
   ! "$py" -m pip --version >/dev/null 2>&1; then
  echo "skipped: needs /usr/bin/python3 with python3-venv, -pip, -setuptools, -wheel, -numpy, -scipy, -sklearn" >&2
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pm_pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$py" -m venv --system-site-packages "$tmp/env"
(cd "$source" && POLYMARGIN_BUILD_DIR=$build PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
   "$tmp/env/bin/pip" install --no-build-isolation --no-index . >"$tmp/pip.log" 2>&1) ||
  { cat "$tmp/pip.log"; fail "pip install ."; }
cd "$tmp"  # not the source tree, whose python/ is no package but build/python might be
PYTHONPATH= POLYMARGIN_BINARY= "$tmp/env/bin/python" - "$tmp/env" "$version" <<'PY' || fail "import from the virtual environment"
import sys
env, version = sys.argv[1:]
import numpy as np
import polymargin
assert polymargin.__file__.startswith(env), polymargin.__file__
assert polymargin.__version__ == version, polymargin.__version__
X = np.array([[1.0, 0.0], [0.9, 0.2], [0.1, 1.0], [0.0, 0.8]] * 20)
y = np.array([1, 1, -1, -1] * 20)
assert (polymargin.LDMClassifier().fit(X, y).predict(X) == y).all()
print("pip:", polymargin.__file__)
PY
shown=$("$tmp/env/bin/pip" show polymargin)
grep -qx "Version: $version" <<<"$shown" || fail "pip show: not version $version: $shown"
