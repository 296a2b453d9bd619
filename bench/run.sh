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
               compare.csv and compare.png, with the rules of include/ratelimit/README.md
               "Which policy when" beside the table.
  compare --traffic LOG
               an access log (Common or Combined Log Format; .log, or a .tar.xz/.tar.gz/.gz holding one)
               through the five policies with the same parameters, side by side: admitted and denied per
               policy, the clients denied under each and by how much, where the policies disagree.
               Builds only bench_compare_traffic. Writes traffic.md, traffic.csv, traffic_clients.csv and
               traffic.png. The repository's log: examples/data/access-combined-2015-05.log.tar.xz
  memory       the in-memory suite (bench_memory, Google Benchmark, 5 repetitions, medians) and its
               summary; needs libbenchmark-dev (installed with --install). --memory is the same.
  full         the whole suite: bench_memory, bench_accuracy, the Redis programs (each starts its own
               redis-server), bench_concurrency, the summary and the charts (many minutes).

Flags:
  --out DIR              where results go (default: a fresh folder under the build directory,
                         e.g. build/bench-compare/results-20261204-101500)
  --update-results       also copy the results into bench/results/ (the tracked files); without it no
                         tracked file changes
  --redis HOST:PORT      compare: use this Redis server (under a key prefix of the run's own, deleted
  --redis URL            afterwards); URL: redis://[user[:password]@]host[:port][/db], rediss:// for TLS.
                         If it fails, the run ends with exit 1 after saying why. Default: a local
                         redis-server on a free port of 127.0.0.1, stopped afterwards; without one the
                         Redis columns are skipped with a one-line reason. The password is never printed,
                         but the command line (and so the URL) is visible in `ps` for the whole run: set
                         RATELIMIT_BENCH_REDIS=URL instead to keep it out.
  --no-redis             compare: skip the Redis columns
  --limit N              policy limit per period        (compare: 100, at most 10,000; --traffic: 60,
                         as examples/replay)
  --period SECONDS       window / period                (compare: 1;   --traffic: 60), 1e-9 to 1000000
  --burst N              token bucket capacity and GCRA burst (compare: the limit; --traffic: 20)
  --key FIELD            --traffic: what names a client: client (default), user_agent or path
  --top N                --traffic: how many of the most denied clients to list (10)
  --keys N               compare: keys of the many-keys cost column (1000000)
  --build DIR            build directory (compare: build/bench-compare; memory, full: build-bench)
  --jobs N               build jobs (default: nproc)
  --install              memory, full: install missing Debian packages with apt-get first
  -h, --help             this text; installs and builds nothing

Every value is checked before anything is built (exit 2); --flag=value equals --flag value; a flag the
mode would ignore is refused.
Environment: RATELIMIT_BENCH_OUT, RATELIMIT_BENCH_BUILD and RATELIMIT_BENCH_REDIS are defaults for --out,
--build and --redis;
RATELIMIT_BENCH_MEMORY=<binary> runs another build of bench_memory (memory, full).
EOF
}

die() {
  echo "bench/run.sh: $*" >&2
  exit 2
}

# A --redis target as printed: whatever a URL holds before its last @ (user and password) as ***.
redacted() {
  local t=$1
  if [[ $t == *@* && $t == *://* ]]; then
    echo "${t%%://*}://***@${t##*@}"
  elif [[ $t == *@* ]]; then
    echo "***@${t##*@}"
  else
    echo "$t"
  fi
}

# An argument as quoted in a message: a --flag=value's value, and a URL's credentials, left out.
shown_argument() {
  if [[ $1 == --*=* ]]; then echo "${1%%=*}=..."; else redacted "$1"; fi
}

# Reads the command line into the mode and flag variables; --flag=value is --flag value.
parse_arguments() {
  mode=compare
  out=${RATELIMIT_BENCH_OUT:-}
  build=${RATELIMIT_BENCH_BUILD:-}
  update=0 install=0 no_redis=0
  redis_target='' traffic='' jobs=$(nproc)
  given=' '
  compare_args=() traffic_args=()
  limit='' period='' burst='' keys='' key='' top=''
  while (($#)); do
    if [[ $1 == --*=* ]]; then
      case ${1%%=*} in
        --out | --redis | --traffic | --build | --jobs | --limit | --period | --burst | --key | --top | --keys)
          set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
        *) die "unknown argument '$(shown_argument "$1")' (bench/run.sh --help lists the modes and flags)" ;;
      esac
    fi
    case $1 in
      -h | --help) usage; exit 0 ;;
      compare | memory | full) mode=$1 ;;
      --memory) mode=memory ;;
      --update-results) update=1 ;;
      --install) install=1 given+='--install ' ;;
      --no-redis) no_redis=1 given+='--no-redis ' ;;
      --out | --redis | --traffic | --build | --jobs | --limit | --period | --burst | --key | --top | --keys)
        (($# >= 2)) || die "$1 needs a value"
        given+="$1 "
        case $1 in
          --out) out=$2 ;;
          --redis) redis_target=$2 ;;
          --traffic) traffic=$2 ;;
          --build) build=$2 ;;
          --jobs) jobs=$2 ;;
          --limit) limit=$2 ;;
          --period) period=$2 ;;
          --burst) burst=$2 ;;
          --key) key=$2 ;;
          --top) top=$2 ;;
          --keys) keys=$2 ;;
        esac
        shift ;;
      *) die "unknown argument '$(shown_argument "$1")' (bench/run.sh --help lists the modes and flags)" ;;
    esac
    shift
  done
}

has() { [[ $given == *" $1 "* ]]; }

# Refuses a flag the mode would ignore.
refuse_ignored_flags() {
  local f
  if [[ $mode != compare ]]; then
    for f in --traffic --redis --no-redis --limit --period --burst --keys --key --top; do
      has "$f" && die "$f belongs to the compare mode, not $mode"
    done
  elif has --install; then
    die "--install belongs to the memory and full modes"
  elif [[ -n $traffic ]]; then
    for f in --keys --redis --no-redis; do has "$f" && die "$f has no effect with --traffic"; done
  else
    for f in --key --top; do has "$f" && die "$f needs --traffic"; done
    has --redis && ((no_redis)) && die "--redis and --no-redis contradict each other"
  fi
  return 0
}

# check_whole FLAG VALUE MIN MAX: VALUE a whole number in [MIN, MAX].
check_whole() {
  [[ $2 =~ ^[0-9]{1,12}$ ]] && (( 10#$2 >= $3 && 10#$2 <= $4 )) ||
    die "$1: must be a whole number in [$3, $4]"
}

# check_period SECONDS LIMIT: what the compare programs take: 1 ns to 1,000,000 s (longer overflows the
# traces' nanoseconds), and at least LIMIT ns (one request per ns at most).
check_period() {
  [[ $1 =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] &&
    awk -v s="$1" 'BEGIN { exit !(s * 1e9 >= 0.5 && s <= 1e6) }' ||
    die "--period: must be a number of seconds in [1e-9, 1000000]"
  awk -v s="$1" -v l="$2" 'BEGIN { exit !(s * 1e9 + 0.5 >= l) }' ||
    die "--period: must hold --limit nanoseconds at least (one request per ns at most)"
}

# HOST:PORT or redis[s]://[user[:password]@]host[:port][/db] (scheme in any case), as bench/compare/
# endpoint.hpp reads it. The messages never quote the value: it may hold a password.
check_redis() {
  local t=$1 rest host port='' url=0 credentials
  if [[ $t == *://* ]]; then
    local scheme=${t%%://*}
    [[ ${scheme,,} == redis || ${scheme,,} == rediss ]] || die "--redis: a URL must start with redis:// or rediss://"
    url=1 rest=${t#*://}
    if [[ $rest == *@* ]]; then
      credentials=${rest%@*} rest=${rest##*@}
      credentials=${credentials//%[0-9a-fA-F][0-9a-fA-F]/}
      [[ $credentials != *%* ]] || die "--redis: broken %-escape in the user or password"
    fi
    if [[ $rest == */* ]]; then
      local db=${rest#*/}
      rest=${rest%%/*}
      [[ -z $db ]] || { [[ $db =~ ^[0-9]{1,7}$ ]] && ((10#$db <= 1000000)); } ||
        die "--redis: the database must be a number in 0..1000000"
    fi
  else
    [[ $t != *@* && $t != */* ]] || die "--redis: HOST:PORT holds '@' or '/' (a URL starts with redis://)"
    rest=$t
  fi
  if [[ $rest == \[* ]]; then
    [[ $rest == *\]* ]] || die "--redis: unclosed [ in the host"
    host=${rest%%\]*} host=${host#\[} rest=${rest#*\]}
    if [[ -n $rest ]]; then
      [[ $rest == :* ]] || die "--redis: expected :PORT after ]"
      port=${rest#:}
    fi
    [[ -n $port ]] || ((url)) || die "--redis: HOST:PORT needs a port"
  elif [[ $rest == *:* ]]; then
    host=${rest%:*} port=${rest##*:}
  else
    ((url)) || die "--redis: HOST:PORT needs a port"
    host=$rest
  fi
  [[ -n $host ]] || die "--redis: no host"
  if [[ -n $port ]] || ! ((url)); then
    [[ $port =~ ^[0-9]{1,5}$ ]] && ((10#$port >= 1 && 10#$port <= 65535)) ||
      die "--redis: the port must be a number in 1..65535"
  fi
}

# Checks every value now (under a second, nothing built) and hands them to the programs.
check_values() {
  [[ $jobs =~ ^[1-9][0-9]{0,3}$ ]] || die "--jobs: a positive number"
  local max_limit=10000 # the accuracy traces grow with the limit: 10,000 runs in seconds
  [[ -n $traffic ]] && max_limit=1000000000
  [[ -z $limit ]] || check_whole --limit "$limit" 1 "$max_limit"
  [[ -z $burst ]] || check_whole --burst "$burst" 1 "$max_limit"
  local default_limit=100
  [[ -n $traffic ]] && default_limit=60
  [[ -z $period ]] || check_period "$period" "${limit:-$default_limit}"
  [[ -z $keys ]] || check_whole --keys "$keys" 0 100000000
  [[ -z $top ]] || check_whole --top "$top" 1 1000
  [[ -z $key || $key =~ ^(client|user_agent|path)$ ]] || die "--key: must be client, user_agent or path"
  [[ -z $redis_target ]] || check_redis "$redis_target"
  local f
  for f in limit period burst; do
    [[ -z ${!f} ]] || compare_args+=("--$f" "${!f}") traffic_args+=("--$f" "${!f}")
  done
  [[ -z $keys ]] || compare_args+=(--keys "$keys")
  [[ -z $key ]] || traffic_args+=(--key "$key")
  [[ -z $top ]] || traffic_args+=(--top "$top")
  return 0
}

# The log --traffic names: a readable file (or a .tar.xz/.tar.gz/.gz holding one, unpacked later).
check_traffic() {
  [[ -z $traffic ]] && return 0
  [[ ! -d $traffic ]] || die "--traffic: a directory, not an access log"
  [[ -f $traffic && -r $traffic ]] || die "--traffic: cannot read the file"
}

# Results: a fresh folder under the build directory unless --out names one; a folder this run made is
# removed again if the run fails before writing a result.
fresh_out() {
  if [[ -z $out ]]; then
    mkdir -p "$build" 2>/dev/null || die "--build: cannot create the directory '$build'"
    out=$(mktemp -d "$build/results-$(date +%Y%m%d-%H%M%S)-XXXX")
    made_out=$out
  elif [[ ! -e $out ]]; then
    mkdir -p "$out" 2>/dev/null || die "--out: cannot create the directory '$out'"
    made_out=$out
  fi
  [[ -d $out && -w $out ]] || die "--out: '$out' is not a writable directory"
  out=$(cd "$out" && pwd)
  [[ -z $made_out ]] || made_out=$out
}

made_out=''
local_redis_pid=''
# At exit: the local redis-server stopped; after a failure, the folder this run made removed unless it
# holds a result.
cleanup() {
  local rc=$?
  [[ -z $local_redis_pid ]] || kill "$local_redis_pid" 2>/dev/null || true
  if ((rc != 0)) && [[ -n $made_out && -d $made_out ]] && ! compgen -G "$made_out/*.md" >/dev/null; then
    rm -rf "$made_out"
  fi
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

# memory and full: the Google Benchmark suite, built whole (Release).
run_suite() {
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
    return
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
  gnuplot -c "$root/bench/charts.gp" "$out"
  (cd "$out" && publish ./*.json ./*.csv ./*.dat ./*.md ./*.png)
  echo "bench: results in $out (summary.md, charts *.png)"
}

main() {
  parse_arguments "$@"
  refuse_ignored_flags
  check_values
  check_traffic
  # The URL from the environment keeps its password out of `ps` (the command line is visible there).
  if [[ $mode == compare && -z $traffic && -z $redis_target && $no_redis == 0 && -n ${RATELIMIT_BENCH_REDIS:-} ]]; then
    redis_target=$RATELIMIT_BENCH_REDIS
    check_redis "$redis_target"
    given+='--redis '
  fi
  trap cleanup EXIT
  if [[ $mode != compare ]]; then
    run_suite
    return
  fi
  build=${build:-$root/build/bench-compare}
  fresh_out
  if [[ -n $traffic ]]; then
    run_traffic
  else
    run_compare
  fi
}

# shellcheck source=bench/compare/run_compare.sh
source "$root/bench/compare/run_compare.sh"
# Sourced (by the argument test), it defines the functions only.
[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
