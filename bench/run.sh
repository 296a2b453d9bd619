#!/usr/bin/env bash
# The benchmark suite's one entry point: compares the five policies (the default), or runs the in-memory
# suite or all of it. `bench/run.sh --help` lists every mode and flag; bench/README.md says what each
# program measures. Tracked files (bench/results/) change only with --update-results.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  cat <<'EOF'
Usage: bench/run.sh [MODE] [FLAGS]

Modes:
  compare      (default) the five policies side by side on the same workload: cost per check (hot key,
               1,000,000 keys, 2 threads), bytes per key, Redis CPU and round trips per check, and accuracy
               (boundary burst, a steady client at the limit, the wait after a burst, fairness among 100
               clients, Retry-After against the exact wait). Builds only bench_compare (and
               bench_compare_redis for the Redis columns) in build/bench-compare. Writes compare.md,
               compare.csv and compare.png, with README's "which policy when" rules beside the table.
  compare --traffic LOG
               an access log (Common or Combined Log Format; .log, or a .tar.xz/.tar.gz/.gz holding one)
               through the five policies with the same parameters, side by side: admitted and denied per
               policy, the clients denied under each and by how much, where the policies disagree.
               Builds only bench_compare_traffic. Writes traffic.md, traffic.csv, traffic_clients.csv and
               traffic.png. The repository's log: examples/data/access-combined-2015-05.log.tar.xz
  memory       the in-memory suite (bench_memory, Google Benchmark, 5 repetitions, medians) and its
               summary; needs libbenchmark-dev (installed with --install). Same as the old --memory.
  full         the whole suite: bench_memory, bench_accuracy, the Redis programs (each starts its own
               redis-server), bench_concurrency, the summary and the charts (many minutes).

Flags:
  --out DIR              where results go (default: a fresh folder under the build directory,
                         e.g. build/bench-compare/results-20261204-101500)
  --update-results       also copy the results into bench/results/ (the tracked files); without it no
                         tracked file changes
  --redis HOST:PORT      compare: use this Redis server (under a key prefix of the run's own, deleted
  --redis URL            afterwards); URL: redis://[user[:password]@]host[:port][/db], rediss:// for TLS.
                         Default: a local redis-server on a free port of 127.0.0.1, stopped afterwards;
                         without one the Redis columns are skipped with a one-line reason. The password
                         is never printed. (memory/full: their Redis programs start their own server.)
  --no-redis             compare: skip the Redis columns
  --limit N              policy limit per period        (compare: 100; --traffic: 60, as examples/replay)
  --period SECONDS       window / period                (compare: 1;   --traffic: 60)
  --burst N              token bucket capacity and GCRA burst (compare: the limit; --traffic: 20)
  --key FIELD            --traffic: what names a client: client (default), user_agent or path
  --top N                --traffic: how many of the most denied clients to list (10)
  --keys N               compare: keys of the many-keys cost column (1000000)
  --build DIR            build directory (compare: build/bench-compare; memory, full: build-bench)
  --jobs N               build jobs (default: nproc)
  --install              memory, full: install missing Debian packages with apt-get first
  -h, --help             this text; installs and builds nothing

Environment: RATELIMIT_BENCH_OUT and RATELIMIT_BENCH_BUILD are defaults for --out and --build;
RATELIMIT_BENCH_MEMORY=<binary> runs another build of bench_memory (memory, full).
EOF
}

die() {
  echo "bench/run.sh: $*" >&2
  exit 2
}

# The URL with its password replaced, for messages.
redacted() { sed -E 's#^(rediss?://[^:@/]*):[^@]*@#\1:***@#' <<<"$1"; }

mode=compare
out=${RATELIMIT_BENCH_OUT:-}
build=${RATELIMIT_BENCH_BUILD:-}
update=0 install=0 no_redis=0
redis_target='' traffic='' jobs=$(nproc)
compare_args=()
traffic_args=()
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    compare | memory | full) mode=$1 ;;
    --memory) mode=memory ;;
    --update-results) update=1 ;;
    --install) install=1 ;;
    --no-redis) no_redis=1 ;;
    --out | --redis | --traffic | --build | --jobs | --limit | --period | --burst | --key | --top | --keys)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --out) out=$2 ;;
        --redis) redis_target=$2 ;;
        --traffic) traffic=$2 ;;
        --build) build=$2 ;;
        --jobs) jobs=$2 ;;
        --limit | --period | --burst) compare_args+=("$1" "$2") traffic_args+=("$1" "$2") ;;
        --key | --top) traffic_args+=("$1" "$2") ;;
        --keys) compare_args+=("$1" "$2") ;;
      esac
      shift ;;
    *) die "unknown argument '$(redacted "$1")' (bench/run.sh --help lists the modes and flags)" ;;
  esac
  shift
done
[[ -z $traffic || $mode == compare ]] || die "--traffic belongs to the compare mode"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs: a positive number, got '$jobs'"

# Results: a fresh folder under the build directory unless --out names one.
fresh_out() {
  if [[ -z $out ]]; then
    mkdir -p "$build"
    out=$(mktemp -d "$build/results-$(date +%Y%m%d-%H%M%S)-XXXX")
  fi
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
}

# Copies the named files of $out into bench/results/ (--update-results only).
publish() {
  ((update)) || return 0
  local f
  for f in "$@"; do
    [[ -e $out/$f ]] && cp "$out/$f" "$root/bench/results/$f"
  done
  echo "bench: copied into bench/results/: $*"
}

# shellcheck source=bench/compare/run_compare.sh
source "$root/bench/compare/run_compare.sh"

if [[ $mode == compare ]]; then
  build=${build:-$root/build/bench-compare}
  fresh_out
  if [[ -n $traffic ]]; then
    run_traffic
  else
    run_compare
  fi
  exit 0
fi

# memory and full: the Google Benchmark suite, built whole (Release).
build=${build:-$root/build-bench}
if ((install)); then
  # shellcheck source=bench/install_missing.sh
  source "$root/bench/install_missing.sh"
  install_missing cmake g++ make pkg-config libbenchmark-dev libhiredis-dev redis-server redis-tools gnuplot-nox python3
fi
fresh_out
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRATELIMIT_BUILD_BENCH=ON \
  -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_BUILD_EXAMPLES=OFF >/dev/null
if [[ $mode == memory ]]; then
  cmake --build "$build" -j"$jobs" --target bench_memory
else
  cmake --build "$build" -j"$jobs"
fi

# Five repetitions, medians reported: the machine is shared, so floors and policies interleave in one run.
"${RATELIMIT_BENCH_MEMORY:-$build/bench/bench_memory}" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.3 --benchmark_out="$out/memory.json" \
  --benchmark_out_format=json
if [[ $mode == memory ]]; then
  python3 "$root/bench/summarize.py" "$out"
  publish memory.json summary.md
  echo "bench: results in $out"
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
(cd "$out" && publish ./*.json ./*.csv ./*.dat ./*.md ./*.png)
echo "bench: results in $out (summary.md, charts *.png)"
