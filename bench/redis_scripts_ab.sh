#!/bin/sh
# A/B of the per-policy Lua scripts, server time per call: the scripts of git revision REF (assembled from
# its lua/ as cmake/RatelimitRedis.cmake does: the parts named on the main's "-- Parts" line, then the
# main) against the assembled scripts of BUILD_DIR (BUILD_DIR/generated/lua/), these also as Redis Functions
# (FCALL of BUILD_DIR/generated/lua/library.lua), beside the reference GCRA script
# (bench/reference_gcra.lua), all on one redis-server, alternating, so that every script sees the same
# machine load. Each run is redis-benchmark -c 50 -P 16 over 100,000 keys on an emptied server
# (FLUSHALL), with the client's time and with the server's (ARGV[1] = ""); the figure is the server's
# usec_per_call of EVALSHA or FCALL (INFO commandstats). Prints every run, then per script the lowest
# figure of the rounds (the least disturbed run) and its ratio to the reference with the same time source.
# With AB_INSTRUCTIONS=1 the server runs under valgrind (callgrind) and the figure is the CPU instructions
# executed inside EVALSHA (or FCALL) per call instead: slow (use ~5000 requests; keys then spread over
# 1,000), but the same on a loaded machine as on an idle one, so small differences show.
#   bench/redis_scripts_ab.sh REF BUILD_DIR [requests] [rounds]
set -eu
ref=$1
build=$2
requests=${3:-300000}
rounds=${4:-3}
instructions=${AB_INSTRUCTIONS:-0}
root=$(cd "$(dirname "$0")/.." && pwd)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
keys=100000
if [ "$instructions" = 1 ]; then
  keys=1000
  valgrind --tool=callgrind --toggle-collect=evalShaCommand --toggle-collect=fcallCommand \
    --callgrind-out-file="$dir/cg.%p" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
else
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
fi
rpid=$!
trap 'kill $rpid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.2; done
cli() { redis-cli -p "$port" "$@"; }
git -C "$root" show "$ref:lua/gcra.lua" >/dev/null  # fails early on a bad ref
assemble_old() {  # $1 = kind: REF's parts, then its main
  main=$(git -C "$root" show "$ref:lua/$1.lua")
  parts=$(printf '%s\n' "$main" | sed -n 's/^-- Parts  *//p')
  for p in $parts; do git -C "$root" show "$ref:lua/parts/$p.lua"; done
  printf '%s\n' "$main"
}
run() {  # $1 = sha or function, $2 = now ("" = server time), $3 = params; prints usec_per_call (or instructions)
  command=EVALSHA
  case $1 in ratelimit_*) command=FCALL ;; esac
  cli FLUSHALL >/dev/null
  cli CONFIG RESETSTAT >/dev/null
  [ "$instructions" = 1 ] && { callgrind_control -z "$rpid" >/dev/null 2>&1 || true; }
  redis-benchmark -p "$port" -c 50 -P 16 -r "$keys" -n "$requests" -q \
    $command "$1" 1 "{k:__rand_int__}" "$2" $3 >/dev/null 2>&1
  stats=$(cli INFO commandstats | grep "^cmdstat_$(echo $command | tr A-Z a-z):")
  failed=$(echo "$stats" | sed -n 's/.*failed_calls=\([0-9]*\).*/\1/p')
  [ "${failed:-0}" = 0 ] || echo "warning: $failed failed calls of $1" >&2
  if [ "$instructions" = 1 ]; then
    rm -f "$dir"/cg.*
    callgrind_control -d "$rpid" >/dev/null 2>&1 || true
    ir=""
    for _ in $(seq 100); do  # the dump is written asynchronously
      for f in "$dir"/cg.*; do [ -f "$f" ] && ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$f"); done
      [ -n "$ir" ] && break
      sleep 0.2
    done
    calls=$(echo "$stats" | sed -n 's/^cmdstat_[a-z]*:calls=\([0-9]*\),.*/\1/p')
    echo "$ir / $calls" | bc
  else
    echo "$stats" | sed -n 's/.*usec_per_call=\([0-9.]*\),.*/\1/p'
  fi
}
T=1700000000000000
ref_sha=$(cli SCRIPT LOAD "$(cat "$root/bench/reference_gcra.lua")")
# The reference with the library's TTL (ceil(reset_after / 1 ms) + 1 s instead of ceil(reset_after / 1 ms)):
# its keys then stay as long as the library's do, so both keep the same number of keys alive.
sed 's|math.ceil((new_tat - now) / 1000))|math.ceil((new_tat - now) / 1000) + 1000)|' \
  "$root/bench/reference_gcra.lua" >"$dir/reference_ttl.lua"
reference_ttl_sha=$(cli SCRIPT LOAD "$(cat "$dir/reference_ttl.lua")")
library=$(cli FUNCTION LOAD "$(cat "$build/generated/lua/library.lua")")
names="reference reference_ttl"
for kind in gcra token_bucket fixed_window sliding_window_counter sliding_window_log; do
  assemble_old "$kind" >"$dir/$kind.old.lua"
  eval "sha_${kind}_old=\$(cli SCRIPT LOAD \"\$(cat \"$dir/$kind.old.lua\")\")"
  eval "sha_${kind}_new=\$(cli SCRIPT LOAD \"\$(cat \"$build/generated/lua/$kind.lua\")\")"
  eval "sha_${kind}_fcall=${library}_$kind"
  names="$names $kind"
done
params_of() {
  case $1 in
    reference*) echo "10000 1000000" ;;
    gcra) echo "1 0 100 10000 1000000" ;;  # a newer gcra ignores the tolerance (ARGV[6])
    token_bucket) echo "1 0 100 10000" ;;
    *) echo "1 0 100 1000000" ;;
  esac
}
best() { [ -z "$1" ] && echo "$2" || echo "if ($2 < $1) $2 else $1" | bc; }
for r in $(seq "$rounds"); do
  for time in client server; do
    now=$T
    [ $time = server ] && now=""
    for name in $names; do
      for side in old new fcall; do
        if [ $name = reference ] || [ $name = reference_ttl ]; then
          [ $side != old ] && continue
          sha=$ref_sha
          [ $name = reference_ttl ] && sha=$reference_ttl_sha
        else
          eval "sha=\$sha_${name}_$side"
        fi
        u=$(run "$sha" "$now" "$(params_of $name)")
        echo "round $r, $time time: $name $side $u"
        key=${name}_${side}_$time
        eval "cur=\${best_$key:-}"
        eval "best_$key=\$(best \"\$cur\" \"$u\")"
      done
    done
  done
done
echo
unit="server us/call"; [ "$instructions" = 1 ] && unit="instructions/call"
echo "lowest $unit of $rounds rounds (x reference, same time source):"
for time in client server; do
  eval "refv=\$best_reference_old_$time"
  eval "reftv=\$best_reference_ttl_old_$time"
  echo "  reference GCRA ($time time): $refv; with the library's TTL: $reftv ($(echo "scale=2; $reftv / $refv" | bc)x)"
  for name in $names; do
    case $name in reference*) continue ;; esac
    eval "o=\$best_${name}_old_$time"; eval "n=\$best_${name}_new_$time"; eval "f=\$best_${name}_fcall_$time"
    echo "  $name ($time time): $ref $o ($(echo "scale=2; $o / $refv" | bc)x) -> new $n ($(echo "scale=2; $n / $refv" | bc)x)," \
      "as FCALL $f ($(echo "scale=2; $f / $refv" | bc)x)"
  done
done
