#!/usr/bin/env bash
# Builds the libFuzzer targets (preset "fuzz": clang++-14, ASan + UBSan) and fuzzes each for
# FUZZ_SECONDS (default 8) from its committed seed corpus (fuzz/corpus/TARGET) in a scratch copy,
# after replaying every input of fuzz/regressions/TARGET (crashes found earlier, kept for good).
# Fails, printing the reproducer, on any crash, leak, sanitizer report or broken invariant.
# Exits 77 (ctest: skipped) when clang++-14 or its fuzzer runtime (libclang-rt-14-dev) is absent.
# Usage: fuzz/run.sh   (from the repository root; `make fuzz` runs it with FUZZ_SECONDS=60)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-8}
# FUZZ_RUNS=N (what ctest's fuzz_smoke sets): N inputs from seed 1 instead of a time budget, so
# that a test run is repeatable and cannot turn red by luck; `make fuzz` explores by time.
if [ -n "${FUZZ_RUNS:-}" ]; then
  budget=(-runs="$FUZZ_RUNS" -seed=1)
  what="$FUZZ_RUNS inputs from seed 1"
else
  budget=(-max_total_time="$seconds")
  what="${seconds} s"
fi
targets=(libsvm_parser block_decoder model_loader)

if ! command -v clang++-14 > /dev/null ||
  ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a > /dev/null 2>&1; then
  echo "fuzz: skipped: clang++-14 or libclang-rt-14-dev is not installed"
  exit 77
fi
cmake --preset fuzz > /dev/null
cmake --build build-fuzz -j "${FUZZ_JOBS:-2}" --target fuzz > /dev/null
scratch=$(mktemp -d "${TMPDIR:-/tmp}/pm_fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do
  bin=build-fuzz/fuzz/${t}_fuzz
  if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls -A "fuzz/regressions/$t")" ]; then
    "$bin" -runs=0 "fuzz/regressions/$t"/* > "$scratch/$t.regressions.log" 2>&1 ||
      { cat "$scratch/$t.regressions.log" >&2; echo "fuzz: $t: a regression input fails" >&2; exit 1; }
  fi
  mkdir -p "$scratch/$t.corpus" "$scratch/$t.crashes"
  if ! "$bin" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$scratch/$t.crashes/" "$scratch/$t.corpus" "fuzz/corpus/$t" \
    > "$scratch/$t.log" 2>&1; then
    tail -40 "$scratch/$t.log" >&2
    for f in "$scratch/$t.crashes"/*; do
      mkdir -p "fuzz/regressions/$t"
      cp "$f" "fuzz/regressions/$t/" && echo "fuzz: reproducer kept as fuzz/regressions/$t/$(basename "$f")" >&2
    done
    echo "fuzz: $t failed" >&2
    exit 1
  fi
  echo "fuzz: $t: $(grep -E '^#[0-9]+' "$scratch/$t.log" | tail -1 | sed 's/^#\([0-9]*\).*cov: \([0-9]*\).*/\1 runs, coverage \2/') ($what), no failure"
done
