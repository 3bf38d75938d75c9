"""Needle's workloads W1-W3 (docs/design.md, "Workloads shared by bench/
and simulate/") on Dask distributed, for bench/compare/run.sh.

run.sh starts the scheduler and three workers (2 threads each, no nanny,
named w0 w1 w2) as separate processes; this client connects to the
scheduler, runs W1-W3 --reps times, checks every result and prints one JSON
object with the medians (same keys as asynqbench's).

  python3 daskbench.py --scheduler tcp://127.0.0.1:PORT --durations FILE
"""

import argparse
import json
import math
import statistics
import sys
import time

from distributed import Client, get_worker, wait


def echo(p):
    return p


def sleep_task(p):
    time.sleep(p["ms"] / 1000)
    return p, get_worker().name


def percentile(v, p):
    """Nearest rank, as needle's bench.Percentile."""
    s = sorted(v)
    return s[max(math.ceil(p / 100 * len(s)), 1) - 1]


def read_durations(path):
    with open(path) as f:
        return [int(l) for l in (x.strip() for x in f) if l and not l.startswith("#")]


def w1(client, rep, n, problems):
    ps = [{"w": "w1", "rep": rep, "i": i} for i in range(n)]
    start = time.perf_counter()
    futs = client.map(echo, ps, pure=False)
    res = client.gather(futs)
    elapsed = time.perf_counter() - start
    bad = sum(1 for a, b in zip(res, ps) if a != b)
    if bad or len(res) != n:
        problems.append(f"w1 rep {rep}: {bad} wrong results, {len(res)} of {n}")
    del futs
    return n / elapsed


def w2(client, rep, n, problems):
    lat = []
    for i in range(n):
        p = {"w": "w2", "rep": rep, "i": i}
        start = time.perf_counter()
        r = client.submit(echo, p, pure=False).result()
        lat.append((time.perf_counter() - start) * 1000)
        if r != p:
            problems.append(f"w2 rep {rep} task {i}: result {r!r}, want {p!r}")
    return percentile(lat, 50), percentile(lat, 99)


def w3(client, rep, durations, worker0, problems):
    ps = [{"ms": d, "i": i, "rep": rep} for i, d in enumerate(durations)]
    start = time.perf_counter()
    # Every task restricted to worker 0, but allowed elsewhere: the loose
    # restriction Dask's work stealing may override.
    futs = client.map(sleep_task, ps, pure=False, workers=[worker0], allow_other_workers=True)
    wait(futs)
    makespan = time.perf_counter() - start
    res = client.gather(futs)
    by_worker = {}
    for (r, name), p in zip(res, ps):
        by_worker[str(name)] = by_worker.get(str(name), 0) + 1
        if r != p:
            problems.append(f"w3 rep {rep}: result {r!r}, want {p!r}")
    del futs
    return makespan, by_worker


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scheduler", required=True)
    ap.add_argument("--durations", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--w1-tasks", type=int, default=20000)
    ap.add_argument("--w2-tasks", type=int, default=500)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--slots", type=int, default=6)
    ap.add_argument("--json", default="")
    ap.add_argument("--setup", default="")
    a = ap.parse_args()

    durations = read_durations(a.durations)
    lb = max(sum(durations) / a.slots, max(durations)) / 1000
    client = Client(a.scheduler, timeout=30)
    client.wait_for_workers(a.workers, timeout=60)
    workers = client.scheduler_info()["workers"]
    worker0 = next(addr for addr, w in workers.items() if str(w.get("name")) == "w0")
    # The W3 durations are unknown to Dask before a task runs; it learns
    # them as tasks of the same prefix finish, as it would in real use.

    problems = []
    per = {k: [] for k in ("w1_tasks_per_s", "w2_p50_ms", "w2_p99_ms", "w3_makespan_s", "w3_makespan_over_lb")}
    by_worker = {}
    for rep in range(1, a.reps + 1):
        tps = w1(client, rep, a.w1_tasks, problems)
        p50, p99 = w2(client, rep, a.w2_tasks, problems)
        ms, by_worker = w3(client, rep, durations, worker0, problems)
        per["w1_tasks_per_s"].append(tps)
        per["w2_p50_ms"].append(p50)
        per["w2_p99_ms"].append(p99)
        per["w3_makespan_s"].append(ms)
        per["w3_makespan_over_lb"].append(ms / lb)
        print(f"daskbench: rep {rep}: w1 {tps:.0f} tasks/s, w2 p50 {p50:.2f} ms p99 {p99:.2f} ms, "
              f"w3 {ms:.2f} s = {ms / lb:.2f} x LB, w3 tasks by worker {by_worker}", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in per.items()}
    out = {
        "system": "dask",
        "w1_tasks_per_s": med["w1_tasks_per_s"],
        "w2_p50_ms": med["w2_p50_ms"],
        "w2_p99_ms": med["w2_p99_ms"],
        "w3_makespan_over_lb": med["w3_makespan_over_lb"],
        "w3_makespan_s": med["w3_makespan_s"],
        "w3_lb_s": lb,
        "w3_tasks_by_worker": by_worker,
        "reps": a.reps,
        "per_rep": per,
        "setup": a.setup,
        "versions": {"distributed": __import__("distributed").__version__, "python": sys.version.split()[0]},
    }
    if problems:
        out["problems"] = problems[:20]
    text = json.dumps(out, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    client.close()
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
