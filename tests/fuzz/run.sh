#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang++ (-fsanitize=fuzzer,address,undefined) and runs
# each one for a bounded time from its committed seed corpus, as CTest tests (so the output ends with
# ctest's summary, like tests/run.sh). Installs clang, its runtimes and hiredis with apt-get if missing.
#
# Usage: tests/fuzz/run.sh [--seconds N] [--jobs N]
#   --seconds N   or RATELIMIT_FUZZ_SECONDS=N   how long each target fuzzes (default 60)
#   --jobs N      or RATELIMIT_JOBS=N           build and test jobs (default: nproc)
# Build directory: build/fuzz. A crash leaves its input (crash-*) in build/fuzz/tests/fuzz/; reproduce
# with build/fuzz/tests/fuzz/<target> <input>.
set -euo pipefail

src_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${RATELIMIT_FUZZ_SECONDS:-60}"
jobs="${RATELIMIT_JOBS:-$(nproc)}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "tests/fuzz/run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "tests/fuzz/run.sh: --seconds must be a positive number" >&2; exit 2; }

if command -v dpkg >/dev/null && command -v apt-get >/dev/null; then
  missing=()
  for p in cmake make pkg-config clang libclang-rt-dev llvm libhiredis-dev; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    sudo=()
    [[ $EUID -ne 0 ]] && sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

build_dir="$src_dir/build/fuzz"
echo "== tests/fuzz/run.sh: $(clang++ --version | head -1) | ${seconds} s per target | build/fuzz"
cmake -S "$src_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$(command -v clang++)" \
  -DRATELIMIT_WERROR=ON -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_BUILD_EXAMPLES=OFF -DRATELIMIT_INSTALL=OFF \
  -DRATELIMIT_BUILD_FUZZ=ON -DRATELIMIT_FUZZ_SECONDS="$seconds"
cmake --build "$build_dir" -j "$jobs"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Crash inputs land in the working directory of each test: the build tree.
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "$jobs" -L fuzz
