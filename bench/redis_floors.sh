#!/usr/bin/env bash
# The Redis engine floors in one run (bench/README.md "Redis engine floors"): builds bench_redis and
# bench_redis_fleet (Release, build/bench-floors), runs the floor cases of bench_redis in random interleaved
# repetitions against the redis-server it starts, then bench_redis_fleet --pool-sweep, and prints the ratios
# (medians, same run) against their goals and where each case's time goes. `--help` for the flags.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  cat <<'EOF'
Usage: bench/redis_floors.sh [FLAGS]

Measures, in one run on one local redis-server (each program starts its own on a free loopback port):
  a. 8 threads of sync RedisLimiter<Gcra>::allow on one connection (pool_size = 1) against one raw hiredis
     client (no threads) that writes 8 EVALSHA of the same GCRA script, then reads the 8 replies (goal >= 0.9);
  b. 1 thread of sync allow against raw sync EVALSHA (goal >= 0.95);
  c. 64 allow_async calls kept in flight against a raw 64-deep pipeline (goal >= 0.9);
  d. bench_redis_fleet --pool-sweep, 4 processes x 8 threads and 1 x 8 of sync checks: the default options
     against pool_size 1, 2, 4, 8 (goals: throughput >= 0.9 of the best, Redis CPU per check <= 1.15 times
     the lowest).
Every ratio is a ratio of medians of checks/s measured in the same run: the cases of a-c run as Google
Benchmark repetitions in random interleaved order, d's settings in rotating interleaved rounds, so other
load on a shared machine spreads over both sides. Per case it also prints where the time goes: Redis's CPU
(INFO cpu) and this process's CPU (getrusage, all threads) per check, commands per Redis read event (the
batch depth Redis saw: INFO stats total_reads_processed), context switches per check, and the most checks/s
the two CPU costs allow on this machine's cores; beside them, not a floor, a's 8 threads on two connections
(4 each: two batches in flight), and the machine's floor of a sync wait: one thread waking another through a
futex, on one CPU and across two.

Flags:
  --rounds N          repetitions of each case of a-c (9)
  --min-time S        Google Benchmark's least time per repetition, seconds (0.5)
  --fleet-rounds N    interleaved rounds of d (7); 0 leaves d out
  --fleet-seconds S   seconds per setting and round of d (1)
  --build DIR         build directory (build/bench-floors); configured Release with the benchmarks
  --no-build          use the binaries already in --build
  --jobs N            build jobs (2)
  --out DIR           where floors.json, fleet.txt and floors.md go (default: a fresh folder under --build)
  -h, --help          this text
About 3 minutes with the defaults after the build (the build: about 1 minute on an idle 2-core machine).
EOF
}

die() {
  echo "bench/redis_floors.sh: $*" >&2
  exit 2
}

rounds=9 min_time=0.5 fleet_rounds=7 fleet_seconds=1 build=$root/build/bench-floors no_build=0 jobs=2 out=''
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --no-build) no_build=1 ;;
    --rounds | --min-time | --fleet-rounds | --fleet-seconds | --build | --jobs | --out)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --rounds) rounds=$2 ;;
        --min-time) min_time=$2 ;;
        --fleet-rounds) fleet_rounds=$2 ;;
        --fleet-seconds) fleet_seconds=$2 ;;
        --build) build=$2 ;;
        --jobs) jobs=$2 ;;
        --out) out=$2 ;;
      esac
      shift ;;
    *) die "unknown argument '$1' (--help lists the flags)" ;;
  esac
  shift
done
[[ $rounds =~ ^[1-9][0-9]{0,2}$ ]] || die "--rounds: a whole number in 1..999"
[[ $fleet_rounds =~ ^[0-9]{1,3}$ ]] || die "--fleet-rounds: a whole number in 0..999"
[[ $jobs =~ ^[1-9][0-9]{0,3}$ ]] || die "--jobs: a positive number"
for v in "$min_time" "$fleet_seconds"; do
  if ! [[ $v =~ ^[0-9]*\.?[0-9]+$ ]] || ! awk -v s="$v" 'BEGIN { exit !(s > 0 && s <= 60) }'; then
    die "--min-time, --fleet-seconds: seconds in (0, 60]"
  fi
done
command -v redis-server >/dev/null || die "no redis-server on PATH (Debian: redis-server)"
command -v python3 >/dev/null || die "no python3 on PATH"

if ((!no_build)); then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRATELIMIT_BUILD_BENCH=ON -DRATELIMIT_BUILD_TESTS=OFF \
    -DRATELIMIT_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$build" -j"$jobs" --target bench_redis bench_redis_fleet >/dev/null
fi
for b in bench_redis bench_redis_fleet; do
  [[ -x $build/bench/$b ]] || die "$build/bench/$b missing (build it, or drop --no-build)"
done
if [[ -z $out ]]; then
  out=$(mktemp -d "$build/floors-$(date -u +%Y%m%d-%H%M%S)-XXXX")
else
  mkdir -p "$out" || die "--out: cannot create '$out'"
fi

# A crowded machine moves the ratios: the 8 threads of a get a larger share of busy cores than the one raw
# client, and every sync wait includes the scheduler's.
load_note() {
  awk -v n="$(nproc)" -v start="$1" -v end="$2" 'BEGIN { if (end > n || start > n) printf "\n**Load average above the %d CPUs (%s at the start, %s when a-c ended; the fleet of d loads the cores itself): other work shared the cores, so these ratios are not the floors: 8 threads get a larger share of crowded cores than one raw client, and each sync wait includes the scheduler'"'"'s. Compare runs at a load below the CPU count.**\n", n, start, end }'
}

# The share of the last minute in which some task waited for a CPU (Linux PSI), when the kernel reports it.
pressure() {
  [[ -r /proc/pressure/cpu ]] || return 0
  sed -n 's/^some .*avg60=\([0-9.]*\).*/; CPU pressure (some task waiting for a core) over the last minute: \1 %/p' \
    /proc/pressure/cpu
}

header() {
  local commit
  commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')
  git -C "$root" diff --quiet HEAD -- include bench 2>/dev/null || commit+=" (with uncommitted changes)"
  echo "Redis engine floors: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit"
  echo "Machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs" \
    "($(lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p' | head -1 | sed 's/./under &/')); $(redis-server --version | cut -d' ' -f1-3)"
  echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)$(pressure)"
  echo "Command: bench/redis_floors.sh --rounds $rounds --min-time $min_time --fleet-rounds $fleet_rounds" \
    "--fleet-seconds $fleet_seconds"
}

load_start=$(cut -d' ' -f1 /proc/loadavg)
header | tee "$out/floors.md"
echo "a-c: $rounds interleaved repetitions per case ..." >&2
"$build/bench/bench_redis" \
  --benchmark_filter='^(redis_floor/evalsha_sync|redis_floor/evalsha_pipelined/(8|64)/|redis/gcra/allow/real_time/threads:1$|redis/gcra/allow_(one|two)_connections?/|redis/gcra/allow_async/64/|floor/thread_handoff/)' \
  --benchmark_repetitions="$rounds" --benchmark_enable_random_interleaving=true --benchmark_min_time="$min_time" \
  --benchmark_min_warmup_time=0.2 \
  --benchmark_out="$out/floors.json" --benchmark_out_format=json >"$out/floors.txt" 2>&1 ||
  { tail -5 "$out/floors.txt" >&2; die "bench_redis failed (its output: $out/floors.txt)"; }
load_after_ac=$(cut -d' ' -f1 /proc/loadavg)
fleet=()
if ((fleet_rounds > 0)); then
  echo "d: bench_redis_fleet --pool-sweep, $fleet_rounds rounds ..." >&2
  "$build/bench/bench_redis_fleet" --pool-sweep --rounds "$fleet_rounds" --seconds "$fleet_seconds" \
    --shapes 4x8,1x8 >"$out/fleet.txt" 2>&1 ||
    { tail -5 "$out/fleet.txt" >&2; die "bench_redis_fleet failed (its output: $out/fleet.txt)"; }
  fleet=("$out/fleet.txt")
fi
{
  echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)$(pressure)"
  echo
  python3 "$root/bench/redis_floors.py" "$out/floors.json" "${fleet[@]}"
  load_note "$load_start" "$load_after_ac"
} | tee -a "$out/floors.md"
if ((fleet_rounds > 0)); then
  echo
  echo "bench_redis_fleet --pool-sweep, every setting:"
  grep -v '^round \|^{\|^ratelimit: ' "$out/fleet.txt"
fi
echo
echo "Results: $out (floors.md, floors.json: Google Benchmark; floors.txt: its console${fleet:+; fleet.txt})"
