#!/usr/bin/env bash
# Compile cost of the library's headers: user CPU seconds (and peak compiler memory) of one translation unit
# compiled with `CXX -std=c++20 -O2 -c`, the least of several runs, against a baseline unit of standard
# headers. See --help.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  cat <<'EOF'
usage: bench/compile_cost.sh [--compiler CXX] [--runs N] [--flags "FLAGS"] [--only LIST] [--build DIR]

Compiles each unit below with `CXX -std=c++20 -O2 -c FLAGS -I include` (no output kept) N times (default 3)
and prints the least user CPU seconds, the peak compiler memory (MB) of that run, and the ratio to unit a:

  a  baseline: #include <string> <vector> <unordered_map> <mutex> <chrono>
  b  #include <ratelimit/ratelimit.hpp> alone
  c  b plus one MemoryLimiter<Gcra> constructed and allow() called
  d  #include <ratelimit/redis.hpp> alone
  e  one redis::RedisLimiter<Gcra> constructed and allow() called
  f  c with -DRATELIMIT_SEPARATE_COMPILATION: the limiter compiled in another unit (<ratelimit/src.hpp>)
  g  e with -DRATELIMIT_SEPARATE_COMPILATION: the limiter and the engine compiled in another unit
     (<ratelimit/redis/src.hpp>)

  --compiler CXX   the compiler (default: $CXX, else g++)
  --runs N         runs per unit, 1..20 (default 3)
  --flags "FLAGS"  extra flags for every unit, e.g. "-DRATELIMIT_TLS=1"
  --only LIST      units to run, e.g. "abc" (default abcdefg; a always runs: it is the ratio's base)
  --build DIR      where the Redis units find the Lua header CMake generates (DIR/generated/include);
                   configured there (nothing built) when missing; default build/compile-cost

Units d, e and g also get `-DRATELIMIT_TLS=1`, as users of the CMake target ratelimit::redis with TLS do (add
-DRATELIMIT_TLS=0 to --flags for the plain variant).

Memory comes from /usr/bin/time (Debian package `time`); without it, time comes from bash's `time` keyword
and the memory column reads n/a. User CPU time (not wall time) is what a loaded machine disturbs least.
Units d, e and g need hiredis's and OpenSSL's headers (libhiredis-dev, libssl-dev).
EOF
}

cxx=${CXX:-g++}
runs=3
flags=""
only=abcdefg
build=$root/build/compile-cost
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --compiler) cxx=${2:?--compiler needs a value}; shift 2 ;;
    --runs) runs=${2:?--runs needs a value}; shift 2 ;;
    --flags) flags=${2?--flags needs a value}; shift 2 ;;
    --only) only=${2:?--only needs a value}; shift 2 ;;
    --build) build=${2:?--build needs a value}; shift 2 ;;
    *) echo "compile_cost.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ ]] && ((runs >= 1 && runs <= 20)) || { echo "compile_cost.sh: --runs: 1..20, got '$runs'" >&2; exit 2; }
[[ $only =~ ^[abcdefg]+$ ]] || { echo "compile_cost.sh: --only: letters of abcdefg, got '$only'" >&2; exit 2; }
command -v "$cxx" >/dev/null || { echo "compile_cost.sh: compiler '$cxx' not found" >&2; exit 2; }

if [[ $only == *[deg]* && ! -f $build/generated/include/ratelimit/redis/detail/lua_scripts.hpp ]]; then
  cmake -S "$root" -B "$build" -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_BUILD_EXAMPLES=OFF >/dev/null ||
    { echo "compile_cost.sh: configuring $build failed" >&2; exit 1; }
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/a.cpp" <<'EOF'
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
EOF
echo '#include <ratelimit/ratelimit.hpp>' >"$work/b.cpp"
cat >"$work/c.cpp" <<'EOF'
#include <chrono>
#include <ratelimit/ratelimit.hpp>
bool check() {
  static ratelimit::MemoryLimiter<ratelimit::Gcra> limiter(
      ratelimit::Gcra{.limit = 5, .period = std::chrono::seconds(1), .burst = 5});
  return limiter.allow("client-42").allowed;
}
EOF
cp "$work/c.cpp" "$work/f.cpp"
echo '#include <ratelimit/redis.hpp>' >"$work/d.cpp"
cat >"$work/e.cpp" <<'EOF'
#include <chrono>
#include <ratelimit/redis.hpp>
bool check() {
  static ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
      ratelimit::Gcra{.limit = 5, .period = std::chrono::seconds(1), .burst = 5}, ratelimit::redis::RedisOptions{});
  return limiter.allow("client-42").allowed;
}
EOF
cp "$work/e.cpp" "$work/g.cpp"
declare -A what=([a]="baseline: <string> <vector> <unordered_map> <mutex> <chrono>"
  [b]="<ratelimit/ratelimit.hpp> alone" [c]="+ MemoryLimiter<Gcra> constructed, allow called"
  [d]="<ratelimit/redis.hpp> alone" [e]="RedisLimiter<Gcra> constructed, allow called"
  [f]="c, RATELIMIT_SEPARATE_COMPILATION (limiter in src.hpp's unit)"
  [g]="e, RATELIMIT_SEPARATE_COMPILATION (redis/src.hpp's unit)")

# One compile; prints "USER_SECONDS PEAK_KB" (PEAK_KB is "-" without /usr/bin/time).
compile_once() {
  local unit=$1 extra=()
  [[ $unit == [deg] ]] && extra=(-DRATELIMIT_TLS=1 -I "$build/generated/include")
  [[ $unit == [fg] ]] && extra+=(-DRATELIMIT_SEPARATE_COMPILATION)
  # shellcheck disable=SC2086  # FLAGS is a list of flags
  local cmd=("$cxx" -std=c++20 -O2 -c "${extra[@]}" $flags -I "$root/include" "$work/$unit.cpp" -o "$work/$unit.o")
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -f '%U %M' -o "$work/time" "${cmd[@]}" || { echo "compile_cost.sh: unit $unit failed to compile" >&2; exit 1; }
    cat "$work/time"
  else
    # bash's own `time` keyword: user seconds only (TIMEFORMAT), the compiler's messages kept apart.
    local TIMEFORMAT=%U
    { time "${cmd[@]}" 2>"$work/err"; } 2>"$work/time" || { cat "$work/err" >&2; echo "compile_cost.sh: unit $unit failed to compile" >&2; exit 1; }
    echo "$(cat "$work/time") -"
  fi
}

# The least user time of RUNS compiles, with that run's memory.
measure() {
  local unit=$1 best="" line
  for ((i = 0; i < runs; i++)); do
    line=$(compile_once "$unit")
    if [[ -z $best ]] || awk -v n="${line% *}" -v o="${best% *}" 'BEGIN { exit !(n < o) }'; then best=$line; fi
  done
  echo "$best"
}

echo "compiler: $("$cxx" --version | head -1); flags: -std=c++20 -O2 -c $flags; least of $runs runs"
printf '%-4s %-62s %8s %8s %7s\n' unit what "user s" "peak MB" "x (a)"
base=""
for unit in a b c d e f g; do
  [[ $unit == a || $only == *$unit* ]] || continue
  read -r secs kb < <(measure "$unit")
  [[ -n $base ]] || base=$secs
  mb=$([[ $kb == - ]] && echo n/a || awk -v k="$kb" 'BEGIN { printf "%.0f", k / 1024 }')
  ratio=$(awk -v s="$secs" -v b="$base" 'BEGIN { printf "%.2f", (b > 0 ? s / b : 0) }')
  printf '%-4s %-62s %8.2f %8s %7s\n' "$unit" "${what[$unit]}" "$secs" "$mb" "$ratio"
done
