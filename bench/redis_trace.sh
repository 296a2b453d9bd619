#!/usr/bin/env bash
# Where one bench_redis case's time goes, in system calls and scheduler events per check (bench/README.md
# "Redis engine floors"): runs the case alone for a long timed run and, over a window inside it, counts with
# `perf stat` (kernel tracepoints: root, or kernel.perf_event_paranoid <= -1) the futex, send/recv and
# poll calls and the context switches and wake-ups of the benchmark process (all its threads) and of its
# redis-server apart, divided by the script calls Redis ran in the window (INFO commandstats, read inside it).
#   bench/redis_trace.sh [--build DIR] [--seconds S] CASE...
# CASE: a bench_redis case name (regex), e.g. allow_one_connection 'evalsha_pipelined/8/'.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build/bench-floors seconds=2

die() {
  echo "bench/redis_trace.sh: $*" >&2
  exit 2
}

cases=()
while (($#)); do
  case $1 in
    -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --build) (($# >= 2)) || die "--build needs a value"; build=$2; shift ;;
    --seconds) (($# >= 2)) || die "--seconds needs a value"; seconds=$2; shift ;;
    *) cases+=("$1") ;;
  esac
  shift
done
((${#cases[@]})) || die "name a case (--help)"
[[ $seconds =~ ^[1-9]$ ]] || die "--seconds: 1 to 9"
bin=$build/bench/bench_redis
[[ -x $bin ]] || die "$bin missing: build it first (bench/redis_floors.sh builds it)"
command -v perf >/dev/null || die "no perf on PATH (Debian: linux-perf)"
command -v redis-cli >/dev/null || die "no redis-cli on PATH (Debian: redis-tools)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

events=syscalls:sys_enter_futex,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read
events+=,syscalls:sys_enter_write,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll,syscalls:sys_enter_epoll_wait
events+=,sched:sched_switch,sched:sched_wakeup,task-clock

# trace CASE: one window in the case's timed run (the window starts 2 s after the program). One perf stat
# counts both processes per thread; the script calls are read at the window's edges, inside it.
trace() {
  "$bin" --benchmark_filter="$1" --benchmark_min_time=$((seconds + 4)) >"$tmp/out" 2>&1 &
  local bench=$! redis port n
  sleep 2
  redis=$(pgrep -P "$bench" redis-server) || die "case '$1': no redis-server (did the case start?)"
  # redis-server names itself "redis-server 127.0.0.1:PORT".
  port=$(tr '\0' ' ' <"/proc/$redis/cmdline" | grep -o ':[0-9]*' | head -1 | tr -d :)
  local calls="redis-cli -p $port INFO commandstats | sed -n 's/^cmdstat_evalsha:calls=\\([0-9]*\\),.*/\\1/p'"
  perf stat -x, --per-thread -e "$events" -p "$bench,$redis" -o "$tmp/perf" -- \
    sh -c "$calls >$tmp/calls0; sleep $seconds; $calls >$tmp/calls1"
  wait "$bench" || die "case '$1' failed: $(tail -1 "$tmp/out")"
  n=$(($(cat "$tmp/calls1") - $(cat "$tmp/calls0")))
  ((n > 0)) || die "case '$1': no script calls in the window"
  echo "### $1: $n checks in the ${seconds} s window ($((n / seconds)) checks/s), load average $(cut -d' ' -f1 /proc/loadavg)"
  echo
  echo "| per check | benchmark process | redis-server |"
  echo "|---|---:|---:|"
  # --per-thread lines: comm-tid,value,unit,event,...; redis-server's threads are itself and its bio_* and
  # jemalloc threads.
  grep -v '^#' "$tmp/perf" | grep . | awk -F, -v n="$n" '
    { server = $1 ~ /^(redis-server|bio_|jemalloc)/; name = $4; sub(/^(syscalls:sys_enter_|sched:)/, "", name)
      if (!(name in seen)) { seen[name] = 1; order[++k] = name }
      sum[name, server] += $2 }
    END { for (i = 1; i <= k; ++i) { e = order[i]; scale = e == "task-clock" ? 1000 : 1
            printf "| %s | %.3f | %.3f |\n", e == "task-clock" ? "CPU us" : e, sum[e, 0] * scale / n, sum[e, 1] * scale / n } }'
  echo
  grep '^redis' "$tmp/out" | sed 's/^/Google Benchmark, whole run: /' | tr -s ' '
  echo
}

for c in "${cases[@]}"; do trace "$c"; done
