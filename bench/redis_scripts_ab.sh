#!/bin/sh
# A/B of the per-policy Lua scripts: the scripts of git revision REF (as its lua/ holds them) against
# the assembled scripts of BUILD_DIR (BUILD_DIR/generated/lua/), on one redis-server, alternating runs
# of redis-benchmark (-c 50 -P 16, server time, keys spread over 100,000) so that both see the same
# machine load. Prints requests/s and the server's usec_per_call of each run, and the new/old ratios of
# the summed throughput and of the lowest usec_per_call (the least disturbed run of each).
#   bench/redis_scripts_ab.sh REF BUILD_DIR [requests] [rounds]
set -eu
ref=$1
build=$2
requests=${3:-300000}
rounds=${4:-3}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null || true' EXIT
sleep 0.5
cli() { redis-cli -p "$port" "$@"; }
old_dir=$(mktemp -d)
git show "$ref:lua/gcra.lua" >/dev/null  # fails early on a bad ref
run() {  # $1 = sha, $2 = params, $3 = a key prefix of its own (fresh keys); prints "rps usec_per_call"
  cli CONFIG RESETSTAT >/dev/null
  rps=$(redis-benchmark -p "$port" -c 50 -P 16 -r 100000 -n "$requests" --csv \
          EVALSHA "$1" 1 "$3:{k:__rand_int__}:state" "" 1 0 $2 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"')
  usec=$(cli INFO commandstats | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\),.*/\1/p')
  echo "${rps:-0} ${usec:-0}"
}
for kind in gcra token_bucket fixed_window sliding_window_counter sliding_window_log; do
  case $kind in
    gcra) params="100 10000 1000000" ;;
    token_bucket) params="100 10000" ;;
    *) params="100 1000000" ;;
  esac
  git show "$ref:lua/$kind.lua" >"$old_dir/$kind.lua"
  old_sha=$(cli SCRIPT LOAD "$(cat "$old_dir/$kind.lua")")
  new_sha=$(cli SCRIPT LOAD "$(cat "$build/generated/lua/$kind.lua")")
  old_sum=0; new_sum=0; old_us=999999; new_us=999999
  for r in $(seq "$rounds"); do
    set -- $(run "$old_sha" "$params" "old:$kind:$r"); o=$1; ou=$2
    set -- $(run "$new_sha" "$params" "new:$kind:$r"); w=$1; wu=$2
    echo "$kind round $r: old $o req/s ($ou us/call)  new $w req/s ($wu us/call)"
    old_sum=$(echo "$old_sum + $o" | bc); new_sum=$(echo "$new_sum + $w" | bc)
    old_us=$(echo "if ($ou < $old_us) $ou else $old_us" | bc); new_us=$(echo "if ($wu < $new_us) $wu else $new_us" | bc)
  done
  echo "$kind: new/old throughput $(echo "scale=3; $new_sum / $old_sum" | bc), lowest server us/call new/old $(echo "scale=3; $new_us / $old_us" | bc)"
done
rm -rf "$old_dir"
