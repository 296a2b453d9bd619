#!/usr/bin/env bash
# Instructions and data-cache misses per check of MemoryLimiter::allow under callgrind: a measure that a
# shared, loaded machine does not disturb (timings there are noise). Needs valgrind.
# Usage: bench/instructions.sh [bench_instructions binary]   (default: the one bench/run.sh builds)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-${RATELIMIT_BENCH_BUILD:-$root/build-bench}/bench/bench_instructions}
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# One run: prints "Ir D1-misses LL-misses" per check.
measure() {
  local checks=$3
  # Fixed cache geometry (32 KiB 8-way first level, 32 MiB 16-way last level), the same on every host:
  # callgrind otherwise copies the host's, which on a large server holds all 1,000,000 keys.
  valgrind --tool=callgrind --instr-atstart=no --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 \
    --LL=33554432,16,64 --callgrind-out-file="$out/cg" \
    "$bin" "$1" "$2" "$checks" >/dev/null 2>&1
  python3 - "$out/cg" "$checks" <<'PY'
import sys
events = totals = None
for line in open(sys.argv[1]):
    if line.startswith("events:"):
        events = line.split()[1:]
    elif line.startswith(("summary:", "totals:")):
        totals = [int(x) for x in line.split()[1:]]
d = dict(zip(events, totals))
n = int(sys.argv[2])
print(f"{d['Ir'] / n:.0f} {(d['D1mr'] + d['D1mw']) / n:.2f} {(d['DLmr'] + d['DLmw']) / n:.2f}")
PY
}
echo "| case | Ir per check | D1 misses | LL misses |"
echo "|---|---:|---:|---:|"
for c in floor_hot floor_map; do
  read -r ir d1 ll < <(measure "$c" - 200000)
  echo "| $c | $ir | $d1 | $ll |"
done
for p in gcra token_bucket fixed_window sliding_window_counter sliding_window_log; do
  for c in hot hot_caller_time keys_1m; do
    read -r ir d1 ll < <(measure "$c" "$p" 200000)
    echo "| $p/$c | $ir | $d1 | $ll |"
  done
done
