#!/bin/sh
# The real run of adaptive limits (include/ratelimit/concurrency/README.md "Adaptive limits in the limiter"):
# examples/http_server's /backend, a simulated backend of capacity C (10 ms per request up to C at once, more slow
# every one down in proportion), behind an adaptive in-flight limit and behind static ones, loaded by wrk.
#   bench/adaptive_wrk.sh [BUILD_DIR] [LIMIT...]      e.g. bench/adaptive_wrk.sh build/g aimd 8 32
# Builds http_server, measures the unloaded p99 (one connection, static limit C) and sets the SLO to twice it,
# then per limit (default: aimd gradient vegas C 4C) starts the server on a free loopback port, warms up, runs
# wrk with CONNECTIONS (default 8C) connections, and prints wrk's request rate and the server's numbers of the
# answers served (200): per second, within the SLO per second (goodput), p50 and p99 (measured in the server from
# the rate-limit check to the backend's answer; a worker thread per connection, so nothing waits before it).
set -eu
build=${1:-build/g}
[ $# -gt 0 ] && shift
capacity=${CAPACITY:-8}
connections=${CONNECTIONS:-$((8 * capacity))}
seconds=${SECONDS_PER_RUN:-15}
warmup=${WARMUP:-15}
limits=${*:-aimd gradient vegas $capacity $((4 * capacity))}
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)" >&2; exit 77; }
cmake --build "$build" -j2 --target http_server >/dev/null
server=$build/examples/http_server
out=$(mktemp)
pid=""
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; fi; }
trap 'stop; rm -f "$out" "$out.wrk"' EXIT INT TERM

start() {  # $1 = --backend-limit value
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$server" --host 127.0.0.1 --port "$port" --backend-capacity "$capacity" --backend-ms 10 --backend-limit "$1" \
    --threads $((connections + 16)) >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "http_server did not start:" >&2; cat "$out" >&2; exit 1
}
stats() { curl -sf "http://127.0.0.1:$port/__backend/stats?slo_us=${1:-0}"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
metric() { curl -sf "http://127.0.0.1:$port/metrics" | awk -v m="$1{limiter=\"backend\"}" '$1 == m {print $2}'; }

# Unloaded: one connection, the static limit C.
start "$capacity"
wrk -t1 -c1 -d3s "http://127.0.0.1:$port/backend" >/dev/null
unloaded_p99=$(stats | field p99_ms)
stop
slo_us=$(python3 -c "print(int(2 * 1000 * $unloaded_p99))")
echo "capacity $capacity x 10 ms, $connections connections, ${seconds}s per run after ${warmup}s warm-up;" \
  "unloaded p99 ${unloaded_p99} ms, SLO $((slo_us / 1000)).$((slo_us % 1000 / 100)) ms"
printf '%-10s %10s %10s %12s %9s %9s %12s\n' limit "wrk req/s" "200/s" "goodput/s" "p50 ms" "p99 ms" "final limit"
for limit in $limits; do
  start "$limit"
  wrk -t2 -c"$connections" -d"${warmup}s" "http://127.0.0.1:$port/backend" >/dev/null
  curl -sf -d "" "http://127.0.0.1:$port/__backend/reset" >/dev/null
  wrk -t2 -c"$connections" -d"${seconds}s" "http://127.0.0.1:$port/backend" >"$out.wrk"
  rps=$(awk '/Requests\/sec/ {print $2}' "$out.wrk")
  errors=$(awk '/Socket errors/ {sub(/.*Socket errors: /, ""); print}' "$out.wrk")
  s=$(stats "$slo_us")
  served=$(echo "$s" | field served)
  within=$(echo "$s" | field within_slo)
  printf '%-10s %10s %10s %12s %9s %9s %12s\n' "$limit" "$rps" "$((served / seconds))" "$((within / seconds))" \
    "$(echo "$s" | field p50_ms)" "$(echo "$s" | field p99_ms)" "$(metric ratelimit_concurrency_limit)"
  [ -z "$errors" ] || echo "  wrk socket errors: $errors"
  stop
done
