#!/usr/bin/env bash
# Builds and runs the whole test suite. On Debian 12 it first installs what is missing with apt-get
# (as root, or through sudo). Works from any directory; builds inside the source tree.
#
# Usage: tests/run.sh [--cxx COMPILER] [--sanitize MODE] [--build-type TYPE] [--bench] [--jobs N]
#                     [-- extra ctest arguments]
#   --cxx COMPILER      or CXX=...                  g++ (default), clang++, g++-12, clang++-14, a path
#   --sanitize MODE     or RATELIMIT_SANITIZE=...   none (default), address,undefined, or thread
#   --build-type TYPE   or RATELIMIT_BUILD_TYPE=... RelWithDebInfo (default), Release, Debug
#                                                   (a sanitizer run's RelWithDebInfo is -O0 or -O1, -g1: see below)
#   --bench             or RATELIMIT_BENCH=ON       also build the benchmarks (they are not run)
#   --jobs N            or RATELIMIT_JOBS=N         build and test jobs (default: nproc)
#   --dry-run                                       find the compiler, print what would be installed and
#                                                   built, and stop (installs and builds nothing)
# A compiler that is not installed is installed only when it is one of g++, g++-12, clang++, clang++-14
# (Debian 12 packages); any other must exist already, else the script stops with "compiler not found".
#   RATELIMIT_SOAK_SECONDS=N                        also run the Redis soak test for N seconds (default 0: not)
#   RATELIMIT_HEAVY_TESTS=ON                        also run the heavy real-server tests (label heavy; default OFF;
#                                                   sanitizer runs without them do not build their programs)
#   RATELIMIT_TRAFFIC_LOG=PATH                      access log for the replay test (default: the shipped log)
#   RATELIMIT_UNITY=OFF                             compile each source file alone (default ON: CMake unity
#                                                   builds, 8 files per compilation, about a third of the CPU
#                                                   time of a build from scratch)
#   RATELIMIT_HEADER_CHECK=ON                       also compile every public header alone (a unity build
#                                                   can hide a header that misses an include; default OFF)
# Each configuration has its own build directory, build/<compiler>-<type>[-<sanitizers>], so runs
# never mix objects. Our own targets build with warnings as errors (-DRATELIMIT_WERROR=ON).
# Sanitizer runs stop at the first error (halt_on_error, -fno-sanitize-recover=all).
# The output ends with ctest's summary; the exit status is ctest's (non-zero if any step fails).
set -euo pipefail

src_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cxx="${CXX:-g++}"
sanitize="${RATELIMIT_SANITIZE:-none}"
build_type="${RATELIMIT_BUILD_TYPE:-RelWithDebInfo}"
bench="${RATELIMIT_BENCH:-OFF}"
jobs="${RATELIMIT_JOBS:-$(nproc)}"

die() { echo "tests/run.sh: $*" >&2; exit 2; }

# shellcheck source=../cmake/find_compiler.sh
source "$src_dir/cmake/find_compiler.sh"
parse_run_flags "${BASH_SOURCE[0]}" "$@"
ctest_extra=("${extra_args[@]}")
# Sanitizer compile flags and runtime options. Flags go into CMAKE_CXX_FLAGS, so the test binary,
# GoogleTest's main and the package-test consumers are all instrumented.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$src_dir/tests/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# --- Compiler and Debian packages: install only what is missing -----------------------------------
find_compiler tests/run.sh "$cxx"
cxx_name="$(basename "$cxx")"
packages=(cmake make pkg-config g++ libgtest-dev libhiredis-dev redis-server redis-tools libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libasio-dev prometheus-cpp-dev prometheus libssl-dev openssl redis-sentinel)
[[ -n "$cxx_package" ]] && packages+=("$cxx_package")
if [[ "$sanitize" != none ]]; then
  read -r -a san_packages <<<"$(sanitizer_packages "$cxx_name")"
  packages+=("${san_packages[@]}")
fi
[[ "$bench" == ON ]] && packages+=(libbenchmark-dev)
install_missing tests/run.sh "$dry_run" "${packages[@]}"
if [[ "$dry_run" == 1 ]]; then
  echo "tests/run.sh: compiler: ${cxx_path:-$cxx (from package $cxx_package)}; build type: $build_type;" \
       "sanitize: $sanitize; bench: $bench; jobs: $jobs"
  exit 0
fi
cxx_path="$(command -v "$cxx")" || die "compiler not found: '$cxx'"
[[ "$bench" == OFF || -f "$src_dir/bench/CMakeLists.txt" ]] || die "--bench: bench/CMakeLists.txt does not exist yet"

config="${cxx_name}-${build_type}"
[[ "$sanitize" != none ]] && config+="-${sanitize//,/+}"
build_dir="$src_dir/build/$config"
mkdir -p "$build_dir"

# --- Sanitizer runtime check ----------------------------------------------------------------------
# ThreadSanitizer (and on some kernels the other sanitizers) cannot map its shadow memory when the
# kernel randomises mmap with more bits than the runtime expects (vm.mmap_rnd_bits > 28 on newer
# kernels: "FATAL: ThreadSanitizer: unexpected memory mapping"). Probe with a tiny program; if it
# fails, run everything under `setarch -R` (no address randomisation for our processes only), and as
# a last resort, in CI only, lower vm.mmap_rnd_bits to 28 machine-wide.
# RATELIMIT_SETARCH=1 forces the setarch wrapper.
wrap=()
probe_ok() { "${wrap[@]}" "$build_dir/sanitizer_probe" >"$build_dir/sanitizer_probe.log" 2>&1; }
if [[ "$sanitize" != none ]]; then
  cat >"$build_dir/sanitizer_probe.cpp" <<'EOF'
#include <atomic>
#include <thread>
#include <vector>
int main() {
  std::atomic<int> n{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&n] { n.fetch_add(1); });
  for (auto& t : threads) t.join();
  return n.load() == 4 ? 0 : 1;
}
EOF
  # shellcheck disable=SC2086  # san_flags is a list of flags
  "$cxx_path" -std=c++20 $san_flags -pthread "$build_dir/sanitizer_probe.cpp" -o "$build_dir/sanitizer_probe" \
    || die "$cxx cannot build with $san_flags (sanitizer runtime missing?)"
  if [[ "${RATELIMIT_SETARCH:-0}" == 1 ]]; then
    wrap=(setarch "$(uname -m)" -R)
    probe_ok || die "sanitizer probe fails even under setarch -R: $(cat "$build_dir/sanitizer_probe.log")"
  elif ! probe_ok; then
    echo "tests/run.sh: the $sanitize runtime fails on this kernel ($(head -c 300 "$build_dir/sanitizer_probe.log"));" \
         "vm.mmap_rnd_bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo '?'); retrying under setarch -R" >&2
    wrap=(setarch "$(uname -m)" -R)
    if ! probe_ok; then
      wrap=()
      if [[ -n "${CI:-}" && $EUID -eq 0 ]] && sysctl -w vm.mmap_rnd_bits=28 >/dev/null 2>&1 && probe_ok; then
        echo "tests/run.sh: CI: lowered vm.mmap_rnd_bits to 28 for the sanitizer runtime" >&2
      else
        die "the $sanitize runtime cannot start here; try: sudo sysctl vm.mmap_rnd_bits=28 ($(cat "$build_dir/sanitizer_probe.log"))"
      fi
    fi
  fi
fi

# --- Configure, build, test -----------------------------------------------------------------------
# A sanitizer run without the heavy tests skips the programs only they run: built, they would never run.
heavy_programs=ON
[[ "$sanitize" != none && "${RATELIMIT_HEAVY_TESTS:-OFF}" != ON ]] && heavy_programs=OFF
# A sanitizer run's RelWithDebInfo keeps line tables only (-g1, both compilers): the reports still name every
# frame's file and line. ASan+UBSan compiles at -O0: their checks are inserted whatever the optimisation, and
# a Redis test unity source compiles in 15 s instead of 44 s at -O1 (clang++ 14; the whole run from scratch
# took 10 min instead of 19 on 2 cores). TSan stays at -O1, where its run-time cost is lower. A later -g1
# overrides the -g of san_flags.
build_type_flags=()
if [[ "$sanitize" != none && "$build_type" == RelWithDebInfo ]]; then
  san_opt=-O1
  [[ "$sanitize" == thread ]] || san_opt=-O0
  build_type_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$san_opt -g1 -DNDEBUG")
fi
echo "== tests/run.sh: $("$cxx_path" --version | head -1) | $build_type | sanitize=$sanitize | ${wrap[*]:-no wrapper} | build/$config"
cmake -S "$src_dir" -B "$build_dir" \
  -DCMAKE_BUILD_TYPE="$build_type" \
  -DCMAKE_CXX_COMPILER="$cxx_path" \
  -DCMAKE_CXX_FLAGS="$san_flags" \
  "${build_type_flags[@]}" \
  -DRATELIMIT_WERROR=ON \
  -DRATELIMIT_BUILD_TESTS=ON \
  -DRATELIMIT_BUILD_EXAMPLES=ON \
  -DRATELIMIT_BUILD_BENCH="$bench" \
  -DRATELIMIT_SOAK_SECONDS="${RATELIMIT_SOAK_SECONDS:-0}" \
  -DRATELIMIT_HEAVY_TESTS="${RATELIMIT_HEAVY_TESTS:-OFF}" \
  -DRATELIMIT_BUILD_HEAVY_PROGRAMS="$heavy_programs" \
  -DCMAKE_UNITY_BUILD="${RATELIMIT_UNITY:-ON}" -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
  -DRATELIMIT_HEADER_CHECK="${RATELIMIT_HEADER_CHECK:-OFF}" \
  ${RATELIMIT_TRAFFIC_LOG:+-DRATELIMIT_TRAFFIC_LOG="$RATELIMIT_TRAFFIC_LOG"}
# The build runs the test binary to list its tests (gtest_discover_tests), so it needs the wrapper too.
"${wrap[@]}" cmake --build "$build_dir" -j "$jobs"
"${wrap[@]}" ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "$jobs" --timeout 900 \
  "${ctest_extra[@]}"
