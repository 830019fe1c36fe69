#!/usr/bin/env bash
# What `cmake --install` puts in place works where it was put: installs the build tree BUILD into a
# temporary DESTDIR (prefix /usr/local), then runs the installed binary, reads the installed man
# page (man -l), completes words with the installed bash completion, builds and runs a small C++
# program against the installed CMake package (find_package(polymargin)), imports the installed
# Python package, and builds the .deb of `make package` (CPack) and lists it. Exit 77 when a tool
# it needs is missing.
# usage: tests/install/install.sh BUILD VERSION PYTHON_BUILT(ON|OFF)
set -euo pipefail
build=$(cd "$1" && pwd)
version=$2
python_built=$3
source=$(cd "$(dirname "$0")/../.." && pwd)

for tool in man cmake c++ dpkg-deb cpack; do
  command -v "$tool" >/dev/null || { echo "skipped: needs $tool" >&2; exit 77; }
done
py=/usr/bin/python3
if [ "$python_built" = ON ] && ! "$py" -c "import numpy, scipy, sklearn" 2>/dev/null; then
  echo "skipped: needs /usr/bin/python3 with python3-numpy, -scipy, -sklearn" >&2
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pm_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- Install into a DESTDIR.
root=$tmp/root
prefix=/usr/local
DESTDIR=$root cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
p=$root$prefix
for f in bin/polymargin share/man/man1/polymargin.1.gz share/bash-completion/completions/polymargin \
         include/polymargin/driver/train.h lib/cmake/polymargin/polymarginConfig.cmake; do
  [ -f "$p/$f" ] || fail "not installed: $prefix/$f"
done
# Nothing outside the prefix.
outside=$(cd "$root" && find . -type f ! -path ".$prefix/*")
[ -z "$outside" ] || fail "installed outside $prefix: $outside"

# --- The binary.
[ "$("$p/bin/polymargin" --version)" = "polymargin $version" ] ||
  fail "installed --version: '$("$p/bin/polymargin" --version)', not 'polymargin $version'"
ldd "$p/bin/polymargin" | grep -q "not found" && fail "installed binary: a library not found"

# --- The man page: formats without warnings and lists every option of every command's --help.
page=$p/share/man/man1/polymargin.1.gz
warnings=$(MANWIDTH=200 man --warnings -l "$page" 2>&1 >/dev/null)
[ -z "$warnings" ] || fail "man --warnings: $warnings"
MANWIDTH=200 man -l "$page" >"$tmp/man.txt" 2>/dev/null
grep -q "^POLYMARGIN(1)" "$tmp/man.txt" || fail "man -l: no POLYMARGIN(1) header"
bin=$p/bin/polymargin
helps=("$bin --help")
for c in $("$bin" --help | sed -n '/^commands:/,/^$/s/^  \([a-z]*\) .*/\1/p'); do
  helps+=("$bin $c --help")
done
for a in $("$bin" train --help | sed -n '/^learners/,/^(/s/^  \([a-z]*\) .*/\1/p'); do
  helps+=("$bin train --algo $a --help")
done
[ ${#helps[@]} -gt 10 ] || fail "too few commands and learners found in --help: ${#helps[@]}"
for h in "${helps[@]}"; do
  for flag in $($h | grep -o '^  \(-. \[ \)\?--[a-z0-9-]*' | grep -o -- '--[a-z0-9-]*' | sort -u); do
    grep -q -- "^ *\(-., \)\?$flag\b" "$tmp/man.txt" || fail "man page: no $flag (of '$h')"
  done
done

# --- The bash completion: COMPREPLY for a line being typed (the last word is the cursor's).
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _polymargin
           [ ${#COMPREPLY[@]} -eq 0 ] || printf "%s\n" "${COMPREPLY[@]}"' _ "$p/share/bash-completion/completions/polymargin" "$@"
}
expect() {  # expect "WORDS..." "COMPLETIONS"; a line ending in a space completes an empty word
  local got words
  read -ra words <<<"$1"
  [[ $1 == *" " ]] && words+=("")
  got=$(complete_words "${words[@]}" | sort | tr '\n' ' ')
  [ "$got" = "${2:+$2 }" ] || fail "completion of '$1': '$got', expected '$2'"
}
expect "polymargin tr" "train"
expect "polymargin train --ep" "--epochs"
expect "polymargin train --algo cpm --fa" "--faces"
expect "polymargin train --algo k" "kldm"
expect "polymargin train --algo kldm --rbf" "--rbf-width"
expect "polymargin train --rbf" ""                       # not an option of the default ldm
expect "polymargin train --tune-f" "--tune-folds"
expect "polymargin export --format j" "json"
expect "polymargin convert --codec " "raw zstd"
expect "polymargin eval --js" "--json"
expect "polymargin train --algo cpm --precision " "auto double float"
expect "polymargin split --compress z" "zstd"
bash -c 'source "$1"; complete -p polymargin' _ "$p/share/bash-completion/completions/polymargin" |
  grep -q "_polymargin polymargin" || fail "completion: not registered for polymargin"

# --- A C++ program built against the installed CMake package: trains a model with the library
# (driver::train), reads it back (io::load_classifier) and scores a row.
mkdir -p "$tmp/consumer"
cat >"$tmp/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(polymargin 0.1 REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE polymargin::polymargin)
CMAKE
cat >"$tmp/consumer/main.cpp" <<'CPP'
#include <cstdio>
#include <fstream>

#include "driver/train.h"
#include "engine/csr.h"
#include "io/model_file.h"

using namespace polymargin;

int main(int argc, char** argv) {
  const std::string dir = argv[1];
  {  // label +1 where feature 1 outweighs feature 2
    std::ofstream data(dir + "/tiny.svm");
    for (int i = 0; i < 400; ++i) {
      const double a = (i * 37 % 100) / 100.0, b = (i * 61 % 100) / 100.0;
      if (a == b) continue;
      data << (a > b ? "+1" : "-1") << " 1:" << a << " 2:" << b << " 3:1\n";
    }
  }
  driver::TrainJob job;
  job.algo = "svm";
  job.inputs = {dir + "/tiny.svm"};
  job.output = dir + "/tiny.model";
  job.linear.c = 10;
  job.threads = 1;
  driver::Events quiet;
  nlohmann::ordered_json record;
  const driver::TrainResult result = driver::train(job, quiet, record);
  const double accuracy = result.summary["train_accuracy"];
  const auto model = io::load_classifier(job.output);
  const std::string text = model->to_text();
  std::printf("trained svm: train_accuracy %.4f; read back: %s\n", accuracy,
              text.substr(0, text.find('\n')).c_str());
  return accuracy > 0.9 ? 0 : 1;
}
CPP
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$p" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "consumer: configure"; }
cmake --build "$tmp/consumer/build" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "consumer: build"; }
grep -q "$p/lib/cmake/polymargin" "$tmp/consumer/build/CMakeCache.txt" ||
  fail "consumer: find_package(polymargin) did not take the installed package"
"$tmp/consumer/build/consumer" "$tmp/consumer" || fail "consumer: the program failed"

# --- The Python package, imported from where it was installed.
skipped=""
if [ "$python_built" = ON ]; then
  site=$(find "$p/lib" -path "*/dist-packages/polymargin/__init__.py" -o -path "*/site-packages/polymargin/__init__.py")
  [ -n "$site" ] || fail "the Python package is not installed under $prefix/lib"
  site=$(dirname "$(dirname "$site")")
  PYTHONPATH=$site POLYMARGIN_BINARY= PATH=/usr/bin:/bin "$py" - "$site" "$version" "$p/bin/polymargin" <<'PY' || fail "python: import polymargin"
import os, sys
site, version, binary = sys.argv[1:]
import numpy as np
import polymargin
assert polymargin.__file__.startswith(site), polymargin.__file__
assert polymargin.__version__ == version, polymargin.__version__
X = np.array([[1.0, 0.0], [0.9, 0.2], [0.1, 1.0], [0.0, 0.8]] * 20)
y = np.array([1, 1, -1, -1] * 20)
clf = polymargin.LinearSVMClassifier().fit(X, y)
assert (clf.predict(X) == y).mean() == 1.0
print("python:", polymargin.__file__)
PY
else
  skipped="the Python package (not built)"
fi

# --- make package: the .deb, its files and its Depends.
(cd "$tmp" && cpack -B "$tmp/package" --config "$build/CPackConfig.cmake" >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
deb=$(ls "$tmp"/package/*.deb)
dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/deb.txt"
for f in ./usr/bin/polymargin ./usr/share/man/man1/polymargin.1.gz \
         ./usr/share/bash-completion/completions/polymargin ./usr/include/polymargin/driver/train.h \
         ./usr/lib/cmake/polymargin/polymarginConfig.cmake; do
  grep -qx "$f" "$tmp/deb.txt" || fail ".deb: no $f"
done
if [ "$python_built" = ON ]; then
  grep -q "^./usr/lib/python3/dist-packages/polymargin/_core.*\.so$" "$tmp/deb.txt" ||
    fail ".deb: no Python module under /usr/lib/python3/dist-packages"
fi
depends=$(dpkg-deb -f "$deb" Depends)
for d in libtbb12 libzstd1 libboost-program-options; do
  [[ $depends == *"$d"* ]] || fail ".deb Depends lacks $d: $depends"
done
echo "installed and packaged: $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB; Depends: $depends"

if [ -n "$skipped" ]; then
  echo "skipped: $skipped" >&2
  exit 77
fi
