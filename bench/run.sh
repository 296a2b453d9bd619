#!/usr/bin/env bash
# Builds the benchmark suite (Release) and runs it: cost per check and memory per key of every policy beside
# floors measured in the same run, the accuracy comparison, the summary table and the charts.
# Output: bench/results/ (summary.md, memory.json, accuracy.csv, *.png), or $RATELIMIT_BENCH_OUT.
# `bench/run.sh --memory` runs only the in-memory suite (bench_memory) and the summary.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${RATELIMIT_BENCH_OUT:-$root/bench/results}
build=${RATELIMIT_BENCH_BUILD:-$root/build-bench}

# shellcheck source=install_missing.sh
source "$root/bench/install_missing.sh"
install_missing cmake g++ make pkg-config libbenchmark-dev libhiredis-dev redis-server redis-tools gnuplot-nox python3

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRATELIMIT_BUILD_BENCH=ON \
  -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"
mkdir -p "$out"

# Five repetitions, medians reported: the machine is shared, so floors and policies interleave in one run.
# RATELIMIT_BENCH_MEMORY=<binary> runs another build of bench_memory (e.g. one of an earlier commit) instead.
"${RATELIMIT_BENCH_MEMORY:-$build/bench/bench_memory}" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.3 --benchmark_out="$out/memory.json" \
  --benchmark_out_format=json
if [[ ${1:-} == --memory ]]; then  # only the in-memory suite and its summary
  python3 "$root/bench/summarize.py" "$out"
  exit 0
fi
"$build/bench/bench_accuracy" "$out"
# Redis: each benchmark binary starts its own redis-server on a free loopback port and stops it.
if [[ -x "$build/bench/bench_redis" ]]; then
  "$build/bench/bench_redis" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_min_time=1 --benchmark_out="$out/redis.json" --benchmark_out_format=json
  "$build/bench/bench_redis_scripts" "$out/redis_scripts.csv"
  # Concurrency limits: memory acquire+release and Redis round trips and hand-offs, one run.
  "$build/bench/bench_concurrency" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/concurrency.json" --benchmark_out_format=json
fi
python3 "$root/bench/summarize.py" "$out"
gnuplot -e "dir='$out'" "$root/bench/charts.gp"
echo "bench: results in $out (summary.md, charts *.png)"
