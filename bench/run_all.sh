#!/usr/bin/env bash
# Every micro-benchmark (Google Benchmark, medians of repetitions) and then the end-to-end table.
# Usage: bench/run_all.sh [BUILD_DIR]   (E2E_ROWS=N runs the end-to-end part on fewer rows)
set -euo pipefail
build=${1:-build}
for b in "$build"/bench/*_bench; do
  [ "$(basename "$b")" = scan_bench ] && continue
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
done
ROWS=${E2E_ROWS:-8407752} "$(dirname "$0")/e2e_kdd.sh" "$build"
