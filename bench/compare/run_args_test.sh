#!/usr/bin/env bash
# bench/run.sh's argument checks (CTest bench.run_args): every bad argument is refused in under a second
# with exit 2 and one "bench/run.sh: ..." line naming the flag, before anything is built; no password of a
# --redis URL appears in any output. The build directory is one mkdir cannot create, so a run that got as
# far as building fails differently. Usage: run_args_test.sh [path/to/bench/run.sh]
set -uo pipefail
run=${1:-$(dirname "${BASH_SOURCE[0]}")/../run.sh}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export RATELIMIT_BENCH_BUILD=/proc/no-such-dir/build
unset RATELIMIT_BENCH_OUT RATELIMIT_BENCH_REDIS
failures=0

# refused REGEX ARGS...: exit 2, the message matches REGEX, no "TopSecret", under a second.
refused() {
  local want=$1 rc start elapsed text
  shift
  start=$(date +%s%N)
  text=$(timeout 10 "$run" "$@" 2>&1 </dev/null)
  rc=$?
  elapsed=$((($(date +%s%N) - start) / 1000000))
  if ((rc != 2)) || ! grep -Eq -- "^bench/run.sh: .*$want" <<<"$text" || grep -q TopSecret <<<"$text" ||
    ((elapsed > 1000)); then
    echo "FAIL: run.sh $* -> exit $rc in $elapsed ms, expected exit 2 with /$want/ and no password:"
    sed 's/^/    /' <<<"$text"
    failures=$((failures + 1))
  fi
}

# Passwords: a URL of another scheme, an upper-case scheme, a password holding @, --flag=value.
refused 'redis:// or rediss://' --redis 'http://u:TopSecret@host:1'
refused 'redis:// or rediss://' --redis 'bogus-redis://u:TopSecret@host:1'
refused '--limit' --redis 'REDIS://u:TopSecret@127.0.0.1:1' --limit 0
refused 'port' --redis 'redis://benchu:Wr0ng@TopSecret@127.0.0.1:99999'
refused "HOST:PORT" --redis 'u:TopSecret@127.0.0.1:1'
refused '--limit' --redis=redis://u:TopSecret@h:1 --limit 0
refused 'unknown argument' --bogus=redis://u:TopSecret@h:1
refused 'unknown argument' 'redis://u:TopSecret@h:1'
# Malformed values, before any build.
refused '--limit' --limit 0
refused '--limit' --limit 1000001
refused '--limit' --limit abc
refused '--period' --period 0
refused '--period' --period 1e7
refused '--period' --period abc
refused '--period' --period 1e-9
refused '--burst' --burst 0
refused '--keys' --keys -1
refused '--top' --traffic /etc/hostname --top 0
refused '--key' --traffic /etc/hostname --key host
refused '--redis' --redis localhost
refused '--redis' --redis 'redis://host:99999'
refused '--redis' --redis 'redis://'
refused '--redis' --redis 'redis://[::1'
refused '--redis' --redis 'redis://h:1/x'
refused '--redis' --redis 'redis://u:%zz@h:1'
refused '--jobs' --jobs 0
# Flags that would be ignored.
refused '--top' --top 5
refused '--key' --key path
refused '--keys' --traffic /etc/hostname --keys 5
refused '--redis' --traffic /etc/hostname --redis h:1
refused '--no-redis' --traffic /etc/hostname --no-redis
refused '--no-redis' --redis h:1 --no-redis
refused '--redis' memory --redis h:1
refused '--traffic' full --traffic /etc/hostname
# Logs and output folders that cannot work.
refused '--traffic' --traffic "$scratch"
refused '--traffic' --traffic "$scratch/missing.log"
printf 'not gzip' >"$scratch/bad.gz"
refused '--traffic' --out "$scratch/o1" --traffic "$scratch/bad.gz"
mkdir "$scratch/empty" && tar -cJf "$scratch/empty.tar.xz" -C "$scratch/empty" .
refused '--traffic' --out "$scratch/o2" --traffic "$scratch/empty.tar.xz"
refused '--out' --out /etc/passwd
refused '--out' --out /etc/passwd/sub

# The URL from the environment is checked as --redis is.
RATELIMIT_BENCH_REDIS='http://u:TopSecret@h:1' refused 'redis:// or rediss://'

# What is printed of a target: nothing before a URL's last @.
# shellcheck source=bench/run.sh
source "$run"
for target in 'redis://benchu:Wr0ng@TopSecret@127.0.0.1:1' 'REDIS://u:TopSecret@h:1/2' 'u:TopSecret@h:1'; do
  [[ $(redacted "$target") != *TopSecret* && $(redacted "$target") == *'***@'* ]] ||
    { echo "FAIL: redacted '$target' = '$(redacted "$target")'"; failures=$((failures + 1)); }
done
[[ $(shown_argument '--redis=redis://u:TopSecret@h:1') == '--redis=...' ]] ||
  { echo "FAIL: shown_argument kept a --flag=value's value"; failures=$((failures + 1)); }

if [[ -e /proc/no-such-dir ]] || ((failures)); then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all refused"
