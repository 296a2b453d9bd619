#!/usr/bin/env python3
"""Turns one run of the suite into bench/results/summary.md and the data files for the charts.

Every speed figure is given beside the floor measured in the same run (this machine is shared and noisy),
as a ratio. Inputs: memory.json (Google Benchmark), accuracy.csv (bench_accuracy), optional redis.json.
"""
import csv
import json
import os
import platform
import sys

POLICIES = ["gcra", "token_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log"]


def load_benchmarks(path, errors):
    """The rows of one Google Benchmark JSON file (medians), and its context; records runs that stopped with
    an error in `errors` (name -> message) instead."""
    if not os.path.exists(path):
        return {}, {}
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        # A run that stopped with an error (e.g. keys evicted) reports CPU time 0 and no counters: no figure.
        if b.get("error_occurred"):
            errors.setdefault(name, b.get("error_message", "?"))
            continue
        rows[name] = b
    return rows, data.get("context", {})


def ns(row):
    """CPU nanoseconds per check (time unit normalised): a shared machine disturbs CPU time far less than
    wall time (a descheduled thread's wait is not counted)."""
    if row is None:
        return float("nan")
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[row["time_unit"]]
    return row["cpu_time"] * scale


def find(rows, name=None, exact=None):
    """The row named `name`, or `name` plus Google Benchmark's suffixes: an argument ("/1000000") and, for a
    benchmark timed in wall time, "/real_time" (the Redis cases are; a table that asked without it dropped them)."""
    name = name or exact
    for candidate in (name, name + "/real_time"):
        if candidate in rows:
            return rows[candidate]
    for key, row in rows.items():
        rest = key[len(name):] if key.startswith(name + "/") else None
        if rest is not None and rest.removesuffix("/real_time")[1:].isdigit():
            return row
    return None


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else "."
    errors = {}
    mem, context = load_benchmarks(os.path.join(results, "memory.json"), errors)
    redis, _ = load_benchmarks(os.path.join(results, "redis.json"), errors)
    out = []
    if errors:
        out.append("**Runs that stopped with an error (their figures are missing below):**\n")
        out.extend(f"- `{name}`: {message}" for name, message in sorted(errors.items()))
        out.append("")
    cpu = context.get("num_cpus", "?")
    mhz = context.get("mhz_per_cpu", "?")
    out.append(f"Machine: {platform.system()} {platform.machine()}, {cpu} CPUs at {mhz} MHz, "
               f"{context.get('date', '')}; ratelimit and the benchmarks built Release (bench/run.sh); Google "
               f"Benchmark's own library reports build type {context.get('library_build_type', '?')} (the "
               f"distribution's package; it times the loop, not the code measured).\n")

    floor_atomic = ns(find(mem, "floor/atomic_gcra+clock"))
    floor_map_1m = ns(find(mem, "floor/map_gcra+clock/keys:1000000"))
    out.append("### Floors (same run)\n")
    out.append("| floor | ns per check |")
    out.append("|---|---:|")
    for name in ["floor/clock", "floor/atomic_gcra", "floor/atomic_gcra+clock", "floor/map_gcra+clock/keys:1",
                 "floor/map_gcra+clock/keys:1000000", "floor/dependent_load/64MiB"]:
        row = find(mem, exact=name)
        if row:
            out.append(f"| `{name}` | {ns(row):.1f} |")

    out.append("\n### MemoryLimiter::allow, per policy\n")
    out.append("Ratios: hot key against `atomic_gcra+clock`; 1,000,000 keys against `map_gcra+clock/keys:1000000` "
               "and against `dependent_load/64MiB` (one memory access). "
               "`rolling`: 1,000,000 present keys whose state is full again 10 ms after a check, long before the "
               "stream comes back (windows roll over). Threads: checks per second of 2 threads against 1 on the same benchmark, from CPU time per "
               "check (`2 * cpu_1 / cpu_2`: what 2 free cores would do; contention and bouncing lines show as CPU "
               "time) and, in brackets, from wall time (disturbed by whatever else runs on the machine). "
               "`distinct keys`: each thread on 16 keys in shards of its own; `any shard`: 64 keys each, "
               "wherever they hash (shards shared).\n")
    # One dependent memory access (a run without it, e.g. of an older binary, shows "-").
    access = find(mem, exact="floor/dependent_load/64MiB")
    out.append("| policy | hot key ns | x floor | caller time ns | deny ns | 1M keys ns | x map floor | x one access "
               "| rolling ns | x map floor | bytes/key (16-byte keys) | 2 threads, distinct keys | any shard | one key |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cost_rows = []

    def scaling(one, two, one_wall=True):
        if not one or not two:
            return "-"
        cpu = 2 * one["cpu_time"] / two["cpu_time"]
        if not one_wall:
            return f"{cpu:.2f}x"
        wall = two["items_per_second"] / one["items_per_second"]
        return f"{cpu:.2f}x ({wall:.2f}x)"

    for p in POLICIES:
        hot = find(mem, f"{p}/hot_key")
        caller = find(mem, f"{p}/hot_key_caller_time")
        deny = find(mem, f"{p}/deny")
        many = find(mem, f"{p}/keys:1000000")
        rolling = find(mem, f"{p}/keys:1000000/rolling")
        if not hot:
            continue
        distinct = scaling(find(mem, f"{p}/distinct_keys/real_time/threads:1"),
                           find(mem, f"{p}/distinct_keys/real_time/threads:2"))
        any_shard = scaling(find(mem, f"{p}/distinct_keys_any_shard/real_time/threads:1"),
                            find(mem, f"{p}/distinct_keys_any_shard/real_time/threads:2"))
        one_key = scaling(hot, find(mem, f"{p}/hot_key/real_time/threads:2"), one_wall=False)
        out.append(f"| {p} | {ns(hot):.1f} | {ns(hot) / floor_atomic:.2f} | {ns(caller):.1f} | {ns(deny):.1f} "
                   f"| {ns(many):.0f} | {ns(many) / floor_map_1m:.2f} "
                   f"| {f'{ns(many) / ns(access):.2f}' if access else '-'} | {ns(rolling):.0f} "
                   f"| {ns(rolling) / floor_map_1m:.2f} | {many['bytes_per_key'] if many else float('nan'):.1f} "
                   f"| {distinct} | {any_shard} | {one_key} |")
        cost_rows.append((p, ns(hot), ns(many)))

    batch_rows = [(p, find(mem, f"{p}/keys:1000000/allow_many:64"), find(mem, f"{p}/keys:1000000"))
                  for p in POLICIES]
    if any(batch for _, batch, _ in batch_rows):
        out.append("\n### MemoryLimiter::allow_many, 1,000,000 keys in batches of 64\n")
        out.append("The same keys and stream as `1M keys` above, 64 requests per call (one clock read per batch; the "
                   "slots of the next 8 requests load while one is checked). Time per request.\n")
        out.append("| policy | ns per request | x map floor | x one access | x `allow` (1M keys) |")
        out.append("|---|---:|---:|---:|---:|")
        for p, batch, many in batch_rows:
            if not batch:
                continue
            out.append(f"| {p} | {ns(batch):.1f} | {ns(batch) / floor_map_1m:.2f} "
                       f"| {f'{ns(batch) / ns(access):.2f}' if access else '-'} | {ns(batch) / ns(many):.2f} |")

    busy = find(mem, "sliding_window_log/keys:1000000/entries:6")
    busy_batch = find(mem, "sliding_window_log/keys:1000000/entries:6/allow_many:64")
    if busy:
        out.append("\n### The sliding window log's busy keys: 1,000,000 keys of 6 entries each (its heap ring)\n")
        out.append("The cases above hold one or two entries per key, inline in the slot; here every key's entries "
                   "live in a heap ring, a second line to load.\n")
        out.append("| call | ns per request | x map floor | x one access | bytes/key |")
        out.append("|---|---:|---:|---:|---:|")
        for call, row in [("`allow`", busy), ("`allow_many` of 64", busy_batch)]:
            if row:
                out.append(f"| {call} | {ns(row):.1f} | {ns(row) / floor_map_1m:.2f} "
                           f"| {f'{ns(row) / ns(access):.2f}' if access else '-'} | {row['bytes_per_key']:.1f} |")

    if redis:
        out.append("\n### Redis, client side (same run, one local redis-server)\n")
        out.append("| benchmark | checks/s | floor (same run) | x floor |")
        out.append("|---|---:|---|---:|")
        pairs = [
            ("redis/gcra/allow/real_time/threads:1", "redis_floor/evalsha_sync"),
            ("redis/gcra/allow/real_time/threads:2", "redis/gcra/allow/real_time/threads:1"),
            ("redis/gcra/allow_many/16", "redis_floor/evalsha_pipelined/16"),
            ("redis/gcra/allow_many/64", "redis_floor/evalsha_pipelined/64"),
            ("redis_floor/evalsha_sync", "redis_floor/incr"),
        ]
        for name, floor_name in pairs:
            row, floor = find(redis, name), find(redis, floor_name)
            if not row or not floor:
                continue
            ips, fips = row.get("items_per_second", 0), floor.get("items_per_second", 0)
            out.append(f"| `{name}` | {ips:,.0f} | `{floor_name}` {fips:,.0f} | {ips / fips:.2f} |")

    scripts_path = os.path.join(results, "redis_scripts.csv")
    if os.path.exists(scripts_path):
        out.append("\n### Redis, server side: each script at saturation (redis-benchmark -c 50 -P 16, 100,000 keys)\n")
        out.append("| script | requests/s | x INCR | server us per call |")
        out.append("|---|---:|---:|---:|")
        with open(scripts_path) as f:
            for r in csv.DictReader(f):
                out.append(f"| {r['name']} | {float(r['requests_per_second']):,.0f} | "
                           f"{float(r['ratio_to_incr']):.2f} | {float(r['server_usec_per_call']):.2f} |")

    acc_path = os.path.join(results, "accuracy.csv")
    if os.path.exists(acc_path):
        out.append("\n### Accuracy (limit 100 per 1 s; GCRA and token bucket with burst 100; ManualClock)\n")
        out.append("`admitted` against the exact sliding log (`error`), and the most admitted for one key in any "
                   "window of 1 s.\n")
        out.append("| pattern | policy | requests | admitted | exact | error | max in any 1 s |")
        out.append("|---|---|---:|---:|---:|---:|---:|")
        with open(acc_path) as f:
            for r in csv.DictReader(f):
                out.append(f"| {r['pattern']} | {r['policy']} | {r['requests']} | {r['admitted']} "
                           f"| {r['reference_admitted']} | {float(r['error_percent']):+.2f}% | {r['max_in_window']} |")

    with open(os.path.join(results, "cost.dat"), "w") as f:
        f.write("# name hot_key_ns keys_1m_ns\n")
        f.write(f'"floor: clock+atomic GCRA" {floor_atomic:.2f} NaN\n')
        f.write(f'"floor: unordered_map+clock" NaN {floor_map_1m:.2f}\n')
        for p, hot, many in cost_rows:
            f.write(f'"{p}" {hot:.2f} {many:.2f}\n')

    text = "\n".join(out) + "\n"
    with open(os.path.join(results, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
