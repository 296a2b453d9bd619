#!/usr/bin/env python3
"""The Redis engine floors as tables (bench/redis_floors.sh runs it): reads bench_redis's Google Benchmark JSON
(repetitions of every case in random interleaved order) and, optionally, the last line of
`bench_redis_fleet --pool-sweep` (its JSON), and prints Markdown: the ratios against their goals, then per case
the medians of checks/s and of where the time goes.

    redis_floors.py FLOORS_JSON [FLEET_TXT]
"""
import json
import statistics
import sys

# (what, the limiter's case, the floor's case, goal): each ratio is the limiter's median checks/s over the
# floor's, both measured in the same run.
FLOORS = [
    ("8 threads, sync `allow`, one connection (`pool_size = 1`) / one raw hiredis client writing 8 EVALSHA, "
     "then reading 8 replies", "redis/gcra/allow_one_connection/real_time/threads:8",
     "redis_floor/evalsha_pipelined/8/real_time", 0.9),
    ("1 thread, sync `allow` / raw sync EVALSHA", "redis/gcra/allow/real_time/threads:1",
     "redis_floor/evalsha_sync/real_time", 0.95),
    ("64 `allow_async` calls in flight / a raw 64-deep pipeline", "redis/gcra/allow_async/64/manual_time",
     "redis_floor/evalsha_pipelined/64/real_time", 0.9),
]

# Not a floor: where (a)'s time goes when its 8 threads have two connections (two batches in flight).
DIAGNOSTIC = ["redis/gcra/allow_two_connections/real_time/threads:8"]

COUNTERS = ["redis_cpu_us", "client_cpu_us", "cmds_per_read", "vol_cs", "invol_cs"]


def repetitions(path):
    """name -> the list of its repetitions' rows (aggregates and failed runs left out), and the run's context."""
    with open(path) as f:
        data = json.load(f)
    runs, errors = {}, {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b.get("run_name", b["name"])
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "?")
            continue
        runs.setdefault(name, []).append(b)
    return runs, errors, data.get("context", {})


def median(rows, field):
    return statistics.median(r[field] for r in rows)


def spread(rows, field):
    values = [r[field] for r in rows]
    return f"{min(values):,.0f}-{max(values):,.0f}"


def cpu_per_check(rows):
    return median(rows, "redis_cpu_us") + median(rows, "client_cpu_us")


def verdict(ratio, goal, at_most=False):
    met = ratio <= goal if at_most else ratio >= goal
    return f"{'<=' if at_most else '>='} {goal}: {'met' if met else 'NOT met'}"


def floors_table(runs, out):
    out.append("| ratio (medians of checks/s) | limiter checks/s [min-max] | floor checks/s [min-max] | ratio | goal | "
               "CPU per check (Redis + client), floor / limiter |")
    out.append("|---|---:|---:|---:|---|---:|")
    for what, ours, floor, goal in FLOORS:
        if ours not in runs or floor not in runs:
            out.append(f"| {what} | {'missing' if ours not in runs else ''} | "
                       f"{'missing' if floor not in runs else ''} | n/a | >= {goal} | |")
            continue
        a, b = median(runs[ours], "items_per_second"), median(runs[floor], "items_per_second")
        # Where the cores are the limit (a crowded machine, or Redis's core saturated) the throughput ratio tends
        # to this one; it moves far less with other load.
        cpu = (cpu_per_check(runs[floor]) / cpu_per_check(runs[ours]))
        out.append(f"| {what} | {a:,.0f} [{spread(runs[ours], 'items_per_second')}] | "
                   f"{b:,.0f} [{spread(runs[floor], 'items_per_second')}] | **{a / b:.3f}** | "
                   f"{verdict(a / b, goal)} | {cpu:.3f} |")


def costs_table(runs, cores, out):
    out.append("| case | reps | checks/s | Redis CPU us/check | client CPU us/check | commands per Redis read | "
               "voluntary / involuntary context switches per check | CPU bound on "
               f"{cores} cores, checks/s |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    names = [n for _, ours, floor, _ in FLOORS for n in (ours, floor)] + DIAGNOSTIC
    for name in names:
        rows = runs.get(name)
        if not rows:
            continue
        m = {c: median(rows, c) for c in COUNTERS}
        # Every check costs the server's CPU and this process's: with both on the same cores, at most this many
        # checks/s fit (and at most 1e6 / redis_cpu_us on Redis's one thread).
        bound = min(cores * 1e6 / (m["redis_cpu_us"] + m["client_cpu_us"]), 1e6 / m["redis_cpu_us"])
        out.append(f"| `{name}` | {len(rows)} | {median(rows, 'items_per_second'):,.0f} | {m['redis_cpu_us']:.2f} | "
                   f"{m['client_cpu_us']:.2f} | {m['cmds_per_read']:.2f} | {m['vol_cs']:.3f} / {m['invol_cs']:.3f} | "
                   f"{bound:,.0f} |")


def noise(shape):
    """With one connection per process in every setting the settings run the same code, so their spread is the
    machine's noise: a default ratio inside it says nothing either way."""
    same = ""
    if shape.get("same_config_throughput_ratio"):
        same = (f"; default / `pool_size = {shape['default_pool_size']}` (the same configuration): "
                f"{shape['same_config_throughput_ratio']:.3f}, {shape['same_config_cpu_ratio']:.3f}")
    if shape.get("most_connections", 2) > 1:
        return "(settings differ)" + same
    return f"{shape['same_code_throughput_spread']:.3f}, {shape['same_code_cpu_spread']:.3f} (the same code)" + same


def handoff_table(runs, out):
    """The machine's floor of a sync wait: what one futex hand-off between two threads costs, on one CPU and on two."""
    rows = [(where, runs.get(f"floor/thread_handoff/other_cpu:{arg}/real_time")) for where, arg in
            (("both threads on one CPU", 0), ("on two CPUs", 1))]
    if not any(r for _, r in rows):
        return
    out.append("| a thread woken through a futex (machine floor) | wall us per hand-off | CPU us per hand-off | "
               "context switches per hand-off |")
    out.append("|---|---:|---:|---:|")
    for where, r in rows:
        if r:
            out.append(f"| {where} | {1e6 / median(r, 'items_per_second'):.2f} | {median(r, 'client_cpu_us'):.2f} | "
                       f"{median(r, 'vol_cs'):.2f} |")


def fleet_table(path, out):
    with open(path) as f:
        lines = [line for line in f if line.startswith('{"pool_sweep"')]
    if not lines:
        out.append(f"(no `--pool-sweep` result in {path})")
        return
    out.append("| fleet shape (sync checks of one key) | default checks/s | default Redis CPU us/check | "
               "default / best `pool_size` throughput | default CPU / lowest | connections per process (most) | "
               "noise: `pool_size` 1-8 lowest / highest checks/s, highest / lowest CPU |")
    out.append("|---|---:|---:|---:|---:|---:|---|")
    failed = []
    for s in json.loads(lines[-1])["pool_sweep"]:
        if s.get("failed_checks"):
            failed.append(f"{s['shape']}: {s['failed_checks']:,}")
        p, t = s["shape"].split("x")
        out.append(f"| {p} process{'es' if p != '1' else ''} x {t} threads | {s['default_checks_per_s']:,.0f} | "
                   f"{s['default_cpu_us_per_check']:.2f} | **{s['throughput_ratio']:.3f}** "
                   f"({verdict(s['throughput_ratio'], 0.9)}) | **{s['cpu_ratio']:.3f}** "
                   f"({verdict(s['cpu_ratio'], 1.15, at_most=True)}) | {s.get('most_connections', 0):.0f} | "
                   f"{noise(s)} |")
    if failed:
        out.append(f"\n**Checks the failure policy answered (no reply by the 100 ms deadline: the machine stalled), "
                   f"left out of the figures: {', '.join(failed)}.**")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    runs, errors, context = repetitions(sys.argv[1])
    cores = context.get("num_cpus", 1)
    out = []
    for name, message in sorted(errors.items()):
        out.append(f"**`{name}` stopped with an error: {message}** (its figures are missing)\n")
    floors_table(runs, out)
    out.append("")
    costs_table(runs, cores, out)
    out.append("")
    handoff_table(runs, out)
    if len(sys.argv) == 3:
        out.append("")
        fleet_table(sys.argv[2], out)
    print("\n".join(out))


if __name__ == "__main__":
    main()
