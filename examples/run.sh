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
dry_run=0
run_args=()

die() { echo "examples/run.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --cxx) cxx="${2:?--cxx needs a compiler}"; shift 2 ;;
    --sanitize) sanitize="${2:?--sanitize needs a mode}"; shift 2 ;;
    --build-type) build_type="${2:?--build-type needs a type}"; shift 2 ;;
    --bench) bench=ON; shift ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --) shift; run_args=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$bench" in ON|on|1|true|yes) bench=ON ;; *) bench=OFF ;; esac
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive number, got '$jobs'"
san_flags=""
case "$sanitize" in
  ""|none) sanitize=none ;;
  thread) san_flags="-fsanitize=thread -g" ;;
  *)
    IFS=',' read -r -a parts <<<"$sanitize"
    for p in "${parts[@]}"; do
      case "$p" in address|undefined|leak) ;; *) die "unknown sanitizer '$p' in '$sanitize'" ;; esac
    done
    san_flags="-fsanitize=$sanitize -fno-sanitize-recover=all -fno-omit-frame-pointer -g" ;;
esac

# shellcheck source=../cmake/find_compiler.sh
source "$src_dir/cmake/find_compiler.sh"
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
