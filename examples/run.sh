#!/usr/bin/env bash
# Builds and runs the quick-start example (examples/quickstart.cpp). On Debian 12 it first installs
# what is missing (cmake, make, the compiler) with apt-get, as root or through sudo.
#
# Usage: examples/run.sh          CXX=clang++ examples/run.sh to build with clang
# Builds in build/examples-<compiler>/ inside the source tree; works from any directory.
set -euo pipefail

src_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cxx="${CXX:-g++}"
cxx_name="$(basename "$cxx")"

die() { echo "examples/run.sh: $*" >&2; exit 2; }

packages=(cmake make g++)
case "$cxx_name" in
  g++-[0-9]*) packages+=("$cxx_name") ;;
  clang++|clang++-[0-9]*) packages+=("clang${cxx_name#clang++}") ;;
esac

if command -v dpkg >/dev/null && command -v apt-get >/dev/null; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    sudo=()
    if [[ $EUID -ne 0 ]]; then
      command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
      sudo=(sudo)
    fi
    echo "examples/run.sh: installing ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

cxx_path="$(command -v "$cxx")" || die "compiler '$cxx' not found"
build_dir="$src_dir/build/examples-$cxx_name"
cmake -S "$src_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx_path" \
  -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_BUILD_EXAMPLES=ON -DRATELIMIT_INSTALL=OFF
cmake --build "$build_dir" --target quickstart -j "$(nproc)"
echo
"$build_dir/examples/quickstart"
