# shellcheck shell=bash disable=SC2154  # the variables are bench/run.sh's
# Sourced by bench/run.sh: the compare mode. Uses run.sh's variables (root, build, out, jobs, no_redis,
# redis_target, keys, traffic, compare_args, traffic_args, local_redis_pid) and functions (die, has,
# redacted, publish).

# Configures the small build (no tests, examples or Google Benchmark) and builds those of the targets
# named that CMake defined (bench_compare_redis needs hiredis).
build_only() {
  command -v cmake >/dev/null || die "cmake not found (apt-get install cmake g++)"
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRATELIMIT_BUILD_COMPARE=ON -DRATELIMIT_BUILD_TESTS=OFF \
    -DRATELIMIT_BUILD_EXAMPLES=OFF -DRATELIMIT_BUILD_BENCH=OFF -DRATELIMIT_INSTALL=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; die "cmake failed (log: $build/configure.log)"; }
  local defined=() t
  for t in "$@"; do
    [[ -d $build/bench/compare/CMakeFiles/$t.dir ]] && defined+=("$t")
  done
  cmake --build "$build" -j"$jobs" --target "${defined[@]}"
}

# "AMD EPYC 9B14, 2 CPUs, KVM, load average 1.2" from lscpu and /proc/loadavg (the cost columns depend
# on what else runs); the date in UTC; the commit, marked when the tree has changes.
describe_run() {
  local hypervisor
  machine=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  hypervisor=$(lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p' | head -1)
  machine="${machine:-unknown CPU}, $(nproc) CPUs${hypervisor:+, $hypervisor}"
  [[ -r /proc/loadavg ]] && machine+=", load average $(cut -d' ' -f1 /proc/loadavg) at the start"
  run_date=$(date -u '+%Y-%m-%d %H:%M UTC')
  commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ $commit != unknown && -n $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit+=" with local changes"
  fi
}

# draw SCRIPT [ARG...]: the chart, or a line saying why there is none. Paths and titles reach gnuplot as
# ARG1.. of `gnuplot -c` (no quoting inside a gnuplot command).
draw() {
  if ! command -v gnuplot >/dev/null; then
    echo "bench: no chart: gnuplot not found (apt-get install gnuplot-nox)"
    return
  fi
  local script=$1
  shift
  gnuplot -c "$root/bench/compare/$script" "$out" "$machine, $run_date, $commit" "$@" ||
    { echo "bench/run.sh: gnuplot failed on $script" >&2; exit 1; }
}

# 1234567 as 1,234,567.
thousands() { sed -E ':a; s/([0-9])([0-9]{3})($|,)/\1,\2\3/; ta' <<<"$1"; }

stop_local_redis() { [[ -z $local_redis_pid ]] || kill "$local_redis_pid" 2>/dev/null || true; }

# A loopback port nobody listens on now.
free_port() {
  if command -v python3 >/dev/null; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    return
  fi
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  return 1
}

# Starts redis-server on a free port of 127.0.0.1 (no persistence) and sets redis_target, or prints why not.
start_local_redis() {
  command -v redis-server >/dev/null || { redis_skip="redis-server not found (apt-get install redis-server, or --redis HOST:PORT)"; return 1; }
  local port
  port=$(free_port) || { redis_skip="no free loopback port"; return 1; }
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --dir "$out" --logfile "$out/redis-server.log" &
  local_redis_pid=$!
  for _ in $(seq 50); do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      redis_target="127.0.0.1:$port"
      return 0
    fi
    sleep 0.1
  done
  redis_skip="the local redis-server did not start (log: $out/redis-server.log)"
  return 1
}

# Fills $out/redis.csv from the server, or sets redis_skip to the reason there is none. A server the user
# named (--redis, RATELIMIT_BENCH_REDIS) that fails stops the run (exit 1) after saying why.
redis_columns() {
  redis_skip=''
  if ((no_redis)); then
    redis_skip="skipped (--no-redis)"
  elif [[ ! -x $build/bench/compare/bench_compare_redis ]]; then
    redis_skip="skipped: bench_compare_redis not built (hiredis not found: apt-get install libhiredis-dev)"
  elif [[ -n $redis_target ]] || start_local_redis; then
    local shown
    shown=$(redacted "$redis_target")
    if ! RATELIMIT_COMPARE_REDIS=$redis_target "$build/bench/compare/bench_compare_redis" --out "$out" \
      >"$out/redis.log" 2>&1; then
      redis_skip="skipped: the server at $shown failed: $(tail -1 "$out/redis.log")"
      if has --redis; then
        echo "bench/run.sh: --redis: the server at $shown failed: $(tail -1 "$out/redis.log")" >&2
        exit 1
      fi
    else
      redis_skip="$(cat "$out/redis.log")"
      redis_skip=${redis_skip#redis: }
    fi
  else
    redis_skip="skipped: $redis_skip"
  fi
  stop_local_redis
  local_redis_pid=''
  echo "bench: Redis: $redis_skip"
}

# The rules of thumb of include/ratelimit/README.md "Which policy when", quoted beside the table (the paragraph
# that starts "Rules of thumb").
readme_rules() {
  awk '/^Rules of thumb/ { on = 1 } on && /^$/ { exit } on { print }' "$root/include/ratelimit/README.md" \
    >"$out/rules.txt"
}

run_compare() {
  local targets=(bench_compare)
  ((no_redis)) || targets+=(bench_compare_redis)
  build_only "${targets[@]}"
  describe_run
  redis_columns
  readme_rules
  local redis_csv=()
  [[ -s $out/redis.csv ]] && redis_csv=(--redis-csv "$out/redis.csv")
  "$build/bench/compare/bench_compare" --out "$out" --machine "$machine" --date "$run_date" --commit "$commit" \
    --rules "$out/rules.txt" --redis-note "$redis_skip" "${redis_csv[@]}" "${compare_args[@]}"
  printf '\nWhich policy when (include/ratelimit/README.md):\n%s\n\n' "$(cat "$out/rules.txt")"
  draw compare.gp "${keys:-1000000}" "$(thousands "${keys:-1000000}")"
  publish compare.md compare.csv compare.png
  echo "bench: results in $out (compare.md, compare.csv, compare.png)"
}

# Sets log to the file to replay: LOG itself, or the one file a .tar.xz/.tar.gz/.gz holds, unpacked into
# $out; a broken archive stops the run (exit 2).
unpack_log() {
  case $traffic in
    *.tar.xz | *.tar.gz | *.tgz)
      mkdir -p "$out/log"
      tar -xf "$traffic" -C "$out/log" 2>/dev/null || die "--traffic: cannot unpack the archive (tar failed)"
      log=$(find "$out/log" -type f | head -1)
      [[ -n $log ]] || die "--traffic: the archive holds no file" ;;
    *.gz)
      log=$out/$(basename "${traffic%.gz}")
      zcat "$traffic" >"$log" 2>/dev/null || die "--traffic: cannot unpack the .gz file (not gzip, or corrupt)" ;;
    *) log=$traffic ;;
  esac
}

run_traffic() {
  local log
  unpack_log
  build_only bench_compare_traffic
  describe_run
  "$build/bench/compare/bench_compare_traffic" --out "$out" "${traffic_args[@]}" "$log"
  draw traffic.gp "$(($(wc -l <"$out/traffic_clients.dat") - 1))"
  publish traffic.md traffic.csv traffic_clients.csv traffic.png
  echo "bench: results in $out (traffic.md, traffic.csv, traffic_clients.csv, traffic.png)"
}
