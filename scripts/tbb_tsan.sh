#!/usr/bin/env bash
# Builds oneTBB's libtbb.so.12 with ThreadSanitizer, from the Debian source of the installed version,
# into DIR (default build-tsan/tbb), for `make test-tsan` to run the tests against (LD_LIBRARY_PATH).
# Why: Debian's libtbb is not instrumented, so TSan cannot see the hand-off of a task (or of a
# pipeline token) from the thread that spawned it to the worker that runs it: it reports every such
# hand-off as a race, in oneTBB's headers and in our task bodies alike, and no suppression of oneTBB's
# frames can tell those from a real race. The instrumented library has the same version and soname,
# so the tests need no rebuild. Needs the network once (apt-get source, through a private source
# list: the system's apt configuration is not touched); does nothing when DIR already holds it.
# Usage: scripts/tbb_tsan.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(realpath -m "${1:-build-tsan/tbb}")
[ -e "$dir/libtbb.so.12" ] && exit 0
version=$(dpkg-query -W -f='${Version}' libtbb12)
work="$dir.work"
rm -rf "$work"
mkdir -p "$work/lists/partial" "$dir"
for suite in bookworm bookworm-updates; do
  echo "deb-src http://deb.debian.org/debian $suite main"
done > "$work/sources.list"
echo "deb-src http://deb.debian.org/debian-security bookworm-security main" >> "$work/sources.list"
apt_private=(-q -o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o Dir::State::Lists="$work/lists")
echo "tbb_tsan: fetching the source of onetbb $version" >&2
apt-get "${apt_private[@]}" update > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
(cd "$work" && apt-get "${apt_private[@]}" source --download-only "onetbb=$version") \
  >> "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
mkdir -p "$work/src"
tar xf "$work"/onetbb_*.orig.tar.* -C "$work/src" --strip-components=1
echo "tbb_tsan: building libtbb with -fsanitize=thread" >&2
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DTBB_SANITIZE=thread -DTBB_TEST=OFF \
  -DTBB_EXAMPLES=OFF -DTBBMALLOC_BUILD=OFF -DTBB_STRICT=OFF > "$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" -j "${JOBS:-2}" --target tbb > "$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; exit 1; }
cp -P "$work"/build/*/libtbb.so* "$dir/"
rm -rf "$work"
echo "tbb_tsan: $dir/libtbb.so.12" >&2
