#!/usr/bin/env bash
# Builds and runs the quick-start example (examples/quickstart.cpp). On Debian 12 it first installs
# what is missing (cmake, make, the compiler) with apt-get, as root or through sudo.
#
# Usage: examples/run.sh [--cxx COMPILER] [--sanitize MODE] [--build-type TYPE] [--bench] [--jobs N]
#                        [--dry-run] [-- arguments for quickstart]
#   The same flags (and environment variables) as tests/run.sh:
#   --cxx COMPILER      or CXX=...                  g++ (default), clang++, g++-12, clang++-14, a path
#   --sanitize MODE     or RATELIMIT_SANITIZE=...   none (default), address,undefined, or thread
#   --build-type TYPE   or RATELIMIT_BUILD_TYPE=... Release (default), RelWithDebInfo, Debug
#   --bench             or RATELIMIT_BENCH=ON       also build the benchmarks (they are not run)
#   --jobs N            or RATELIMIT_JOBS=N         build jobs (default: nproc)
#   --dry-run                                       find the compiler, print what would be installed and
#                                                   built, and stop (installs and builds nothing)
# A compiler that is not installed is installed only when it is one of g++, g++-12, clang++, clang++-14
# (Debian 12 packages); any other must exist already, else the script stops with "compiler not found".
# Builds in build/examples-<compiler>-<type>[-<sanitizers>]/ inside the source tree; works from any directory.
set -euo pipefail

src_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cxx="${CXX:-g++}"
sanitize="${RATELIMIT_SANITIZE:-none}"
build_type="${RATELIMIT_BUILD_TYPE:-Release}"
bench="${RATELIMIT_BENCH:-OFF}"
jobs="${RATELIMIT_JOBS:-$(nproc)}"

die() { echo "examples/run.sh: $*" >&2; exit 2; }

# shellcheck source=../cmake/find_compiler.sh
source "$src_dir/cmake/find_compiler.sh"
parse_run_flags "${BASH_SOURCE[0]}" "$@"
run_args=("${extra_args[@]}")

find_compiler examples/run.sh "$cxx"
cxx_name="$(basename "$cxx")"
packages=(cmake make g++)
[[ -n "$cxx_package" ]] && packages+=("$cxx_package")
if [[ "$sanitize" != none ]]; then
  read -r -a san_packages <<<"$(sanitizer_packages "$cxx_name")"
  packages+=("${san_packages[@]}")
fi
[[ "$bench" == ON ]] && packages+=(libbenchmark-dev)
install_missing examples/run.sh "$dry_run" "${packages[@]}"
if [[ "$dry_run" == 1 ]]; then
  echo "examples/run.sh: compiler: ${cxx_path:-$cxx (from package $cxx_package)}; build type: $build_type;" \
       "sanitize: $sanitize; bench: $bench; jobs: $jobs"
  exit 0
fi
cxx_path="$(command -v "$cxx")" || die "compiler not found: '$cxx'"

config="${cxx_name}-${build_type}"
[[ "$sanitize" != none ]] && config+="-${sanitize//,/+}"
build_dir="$src_dir/build/examples-$config"
cmake -S "$src_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" -DCMAKE_CXX_COMPILER="$cxx_path" \
  -DCMAKE_CXX_FLAGS="$san_flags" -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_BUILD_EXAMPLES=ON \
  -DRATELIMIT_BUILD_BENCH="$bench" -DRATELIMIT_INSTALL=OFF
cmake --build "$build_dir" --target quickstart -j "$jobs"
echo
"$build_dir/examples/quickstart" "${run_args[@]}"
