#!/usr/bin/env bash
# bench/convergence.sh [BINARY]: the SVM's objective and test accuracy beside LIBLINEAR's exact
# solution of the same problem (liblinear-train -s 3, Debian's liblinear-tools), and the LDM's beside
# a 200-epoch run of its own solver, on a9a, ijcnn1, w8a and the UCI sets of $DATA/uci, for C in
# 0.01 .. 100: one Markdown table (bench/convergence.py says what each column is); MAX (1000): the
# --max-epochs of the runs asked to converge (--epochs auto --no-early-stopping).
# Environment: DATA (../shared/data), SETS (names, default all), CS ("0.01 0.1 1 10 100"), LONG (50:
# the SVM's long run), REF (200: the LDM's reference), EPS (LIBLINEAR's -e, 0.001), ALGOS ("svm
# ldm"). Run from the repository root after `make build`.
set -euo pipefail
bin=$(realpath "${1:-build/polymargin}")
build=$(dirname "$bin")
command -v liblinear-train > /dev/null || { echo "bench/convergence.sh needs liblinear-tools" >&2; exit 1; }
[ -d "$build/python/polymargin" ] || { echo "bench/convergence.sh needs the Python package in $build/python" >&2; exit 1; }
export POLYMARGIN_BINARY=$bin PYTHONPATH=$build/python
exec /usr/bin/python3 "$(dirname "$0")/convergence.py"
