#!/bin/sh
# Requests/s of examples/http_server in Redis mode against memory mode, alternating in one run:
#   bench/http_wrk_modes.sh BUILD_DIR [rounds = 3] [seconds = 6]
# wrk -t1 -c16 on /search from 1,000 client IPs (bench/http_wrk.lua); one local redis-server of its own.
# Prints each round and the median of the per-round ratios redis / memory.
set -eu
build=$1
rounds=${2:-3}
seconds=${3:-6}
server=$build/examples/http_server
script=$(dirname "$0")/http_wrk.lua
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
redis_pid=$!
trap 'kill "$redis_pid" 2>/dev/null || true' EXIT
sleep 0.5
run() {  # $1 = extra server flags; prints requests/s
  out=$(mktemp)
  # shellcheck disable=SC2086
  $server --port 0 --trusted-proxy 127.0.0.1 $1 >"$out" &
  pid=$!
  sleep 0.5
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$out")
  rps=$(CLIENTS=1000 wrk -t1 -c16 -d"${seconds}s" -s "$script" "http://127.0.0.1:$port/search?q=x" |
        awk '/Requests\/sec/ {print $2}')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$out"
  echo "$rps"
}
ratios=""
for round in $(seq "$rounds"); do
  memory=$(run "")
  redis=$(run "--redis 127.0.0.1:$rport")
  ratio=$(echo "scale=3; $redis / $memory" | bc)
  ratios="$ratios $ratio"
  echo "round $round: memory=$memory redis=$redis ratio=$ratio"
done
echo "median ratio: $(echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
