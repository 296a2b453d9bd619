#!/usr/bin/env bash
# Times Go's golang.org/x/time/rate Limiter.Allow (bench/x_time_rate/rate_test.go) with Debian's Go and
# x/time packages (GOPATH mode: nothing is downloaded), for comparison with bench_memory's hot key.
# Usage: bench/x_time_rate.sh [extra go test flags, e.g. -count 5]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=install_missing.sh
source "$root/bench/install_missing.sh"
install_missing golang-go golang-golang-x-time-dev
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
cd "$root/bench/x_time_rate"
GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$cache" GOFLAGS= go test -run '^$' -bench . "$@"
