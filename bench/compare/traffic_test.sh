#!/usr/bin/env bash
# bench_compare_traffic and bench/compare/traffic.gp on the logs that broke them (CTest bench.traffic_logs):
# a log under which nobody is denied still gets a chart; a log with no parseable line, an empty one and a
# directory are refused with one line and exit 2; a log of one line is replayed.
# Usage: traffic_test.sh path/to/bench_compare_traffic path/to/access.log
set -uo pipefail
program=$1 log=$2
gp=$(dirname "${BASH_SOURCE[0]}")/traffic.gp
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Nobody denied: the table, and a chart gnuplot draws without an error.
mkdir "$scratch/all"
"$program" --out "$scratch/all" --limit 100000 "$log" >/dev/null || fail "--limit 100000: exit $?"
if command -v gnuplot >/dev/null; then
  denied=$(($(wc -l <"$scratch/all/traffic_clients.dat") - 1))
  text=$(gnuplot -c "$gp" "$scratch/all" "a title" "$denied" 2>&1) || fail "gnuplot with nobody denied: $text"
  grep -qi 'warning\|error' <<<"$text" && fail "gnuplot with nobody denied: $text"
  [[ -s $scratch/all/traffic.png ]] || fail "no traffic.png with nobody denied"
fi

# refused REGEX FILE: exit 2 and one line matching REGEX.
refused() {
  local text rc
  text=$("$program" --out "$scratch" "$2" 2>&1 >/dev/null)
  rc=$?
  ((rc == 2)) && [[ $(wc -l <<<"$text") == 1 ]] && grep -Eq "$1" <<<"$text" ||
    fail "$2: exit $rc, expected 2 and /$1/: $text"
}
: >"$scratch/empty.log"
refused 'no line in Common or Combined Log Format' "$scratch/empty.log"
printf 'garbage\nmore garbage\n' >"$scratch/garbage.log"
refused 'no line in Common or Combined Log Format' "$scratch/garbage.log"
mkdir "$scratch/dir.log"
refused 'a directory' "$scratch/dir.log"

head -1 "$log" >"$scratch/one.log"
"$program" --out "$scratch" "$scratch/one.log" >/dev/null || fail "a log of one line: exit $?"

((failures)) && { echo "$failures case(s) failed"; exit 1; }
echo "all logs handled"
