#!/bin/sh
# Requests/s of examples/http_server with limiting on and off, in the same run, alternating:
#   bench/http_wrk.sh BUILD_DIR [memory|redis]
# Scenarios on /search: "new" every request from a new client IP (each creates its keys in six
# limiters, mostly admitted); "1000" 1,000 client IPs (keys exist; mostly 429 after warm-up); "one" a
# single client (nearly all 429 with a problem body). Prints each round and the on/off ratios.
set -eu
build=$1
mode=${2:-memory}
server=$build/examples/http_server
script=$(dirname "$0")/http_wrk.lua
redis_args=""
redis_pid=""
if [ "$mode" = redis ]; then
  rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
  redis_pid=$!
  sleep 0.5
  redis_args="--redis 127.0.0.1:$rport"
fi
run() {  # $1 = extra server flags, $2 = wrk extra args; prints requests/s
  out=$(mktemp)
  $server --port 0 --trusted-proxy 127.0.0.1 $redis_args $1 >"$out" &
  pid=$!
  sleep 0.5
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$out")
  rps=$(wrk -t1 -c16 -d6s $2 "http://127.0.0.1:$port/search?q=x" | awk '/Requests\/sec/ {print $2}')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$out"
  echo "$rps"
}
ratio() { echo "scale=3; $1 / $2" | bc; }
for round in 1 2; do
  line="$mode round $round:"
  for scenario in new 1000 one; do
    case $scenario in
      new) args="-s $script"; export CLIENTS=0 ;;
      1000) args="-s $script"; export CLIENTS=1000 ;;
      one) args="" ;;
    esac
    off=$(run --no-limits "$args"); on=$(run "" "$args")
    line="$line  $scenario: off=$off on=$on ratio=$(ratio "$on" "$off")"
  done
  echo "$line"
done
if [ -n "$redis_pid" ]; then kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; fi
