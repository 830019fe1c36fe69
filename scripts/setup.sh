#!/usr/bin/env bash
# Installs the Debian packages polymargin needs, only those missing; silent when all are present.
set -euo pipefail
packages=(
  build-essential cmake pkg-config
  libboost-program-options-dev
  libtbb-dev libzstd-dev zstd libxxhash-dev libfast-float-dev nlohmann-json3-dev libeigen3-dev
  zlib1g-dev libbz2-dev bzip2 gzip
  libgtest-dev libbenchmark-dev
  liblinear-tools time jq
  libopenmpi-dev openmpi-bin
  python3-dev pybind11-dev python3-numpy python3-scipy python3-sklearn python3-pytest
  python3-setuptools python3-wheel python3-venv python3-pip man-db groff-base dpkg-dev
  clang-14 libclang-rt-14-dev clang-tidy-14
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
