#!/usr/bin/env bash
# The example's /metrics for Prometheus, after a burst of 429s on /export (5 per minute):
#   prometheus_scrape.sh check  HTTP_SERVER   `promtool check metrics` on the page (fast)
#   prometheus_scrape.sh scrape HTTP_SERVER   a real Prometheus server on loopback scrapes it: up == 1 and
#                                             the denial counter is queryable (bounded: 90 s; heavy test)
# Exit 77 (CTest: skipped) when promtool or prometheus is missing; CI installs both (package prometheus).
set -euo pipefail
mode=$1
server_bin=$2
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# GET host:port path with bash's /dev/tcp: prints the body (with its final newline, which $(...) drops).
http_get() {
  local port=$1 path=$2
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3
  local response
  response=$(cat <&3)
  exec 3>&-
  printf '%s\n' "${response#*$'\r\n\r\n'}"
}
http_status() {
  local port=$1 path=$2
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3
  local line
  read -r line <&3
  exec 3>&-
  echo "$line" | cut -d' ' -f2
}

command -v promtool >/dev/null || { echo "promtool not found (apt-get install prometheus)"; exit 77; }
"$server_bin" --port 0 --host 127.0.0.1 --manual-clock >"$tmp/server.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$tmp/server.out" && break; sleep 0.05; done
port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/server.out")
[[ -n "$port" ]] || { echo "server did not start"; cat "$tmp/server.out"; exit 1; }

denied=0
for _ in $(seq 8); do [[ "$(http_status "$port" /export)" == 429 ]] && denied=$((denied + 1)); done
[[ $denied == 3 ]] || { echo "expected 3 denials of /export, got $denied"; exit 1; }
http_get "$port" /metrics >"$tmp/metrics.txt"
grep -q 'ratelimit_decisions_total{layer="export",outcome="denied"} 3' "$tmp/metrics.txt" ||
  { echo "no denial counter in /metrics:"; cat "$tmp/metrics.txt"; exit 1; }
promtool check metrics <"$tmp/metrics.txt"
echo "promtool check metrics: ok"
[[ "$mode" == check ]] && exit 0

command -v prometheus >/dev/null || { echo "prometheus not found (apt-get install prometheus)"; exit 77; }
prom_port=""
for _ in $(seq 50); do
  candidate=$((20000 + RANDOM % 40000))
  if ! (exec 4<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then prom_port=$candidate; break; fi
done
[[ -n "$prom_port" ]] || { echo "no free port"; exit 1; }
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: http_server
    static_configs:
      - targets: ["127.0.0.1:$port"]
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$prom_port" >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
query() { http_get "$prom_port" "/api/v1/query?query=$1"; }
deadline=$((SECONDS + 90))
up_ok=0 denied_ok=0
while ((SECONDS < deadline)); do
  if (exec 4<>"/dev/tcp/127.0.0.1/$prom_port") 2>/dev/null; then
    up=$(query 'up%7Bjob%3D%22http_server%22%7D' || true)
    [[ "$up" == *'"value":['*',"1"]'* ]] && up_ok=1
    d=$(query 'ratelimit_decisions_total%7Blayer%3D%22export%22%2Coutcome%3D%22denied%22%7D' || true)
    [[ "$d" == *',"3"]'* ]] && denied_ok=1
    ((up_ok && denied_ok)) && break
  fi
  sleep 1
done
((up_ok)) || { echo "Prometheus never saw up == 1"; tail -20 "$tmp/prometheus.log"; exit 1; }
((denied_ok)) || { echo "Prometheus query did not return the denial counter (3): $d"; exit 1; }
echo "prometheus: up == 1, ratelimit_decisions_total{layer=\"export\",outcome=\"denied\"} == 3"
