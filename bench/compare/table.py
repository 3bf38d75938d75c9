"""Prints the comparison table of bench/compare/run.sh.

  python3 table.py needle.json asynq.json dask.json

needle.json is `needle bench --json` (bench/report.go: workloads[].summary[]
with the median over the repetitions); the others are what asynqbench and
daskbench.py print. A missing or unreadable file shows as "-".
"""

import json
import math
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return None


def needle_metrics(rep):
    """Maps needle's report to the flat keys of the peers' JSON."""
    if rep is None:
        return {}
    want = {
        ("w1", "throughput"): "w1_tasks_per_s",
        ("w2", "p50"): "w2_p50_ms",
        ("w2", "p99"): "w2_p99_ms",
        ("w3", "makespan/LB"): "w3_makespan_over_lb",
        ("w3", "makespan"): "w3_makespan_s",
    }
    out = {}
    for w in rep.get("workloads", []):
        for s in w.get("summary", []):
            k = want.get((w["name"], s["name"]))
            if k and s.get("median") is not None:
                out[k] = s["median"]
    return out


def num(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


# (key, label, higher_is_better)
ROWS = [
    ("w1_tasks_per_s", "W1 throughput (tasks/s)", True),
    ("w2_p50_ms", "W2 latency p50 (ms)", False),
    ("w2_p99_ms", "W2 latency p99 (ms)", False),
    ("w3_makespan_over_lb", "W3 makespan / LB (x)", False),
]


def ratio(needle, peer, higher_better):
    """> 1 means needle is better."""
    if needle is None or peer is None or needle == 0 or peer == 0:
        return None
    return needle / peer if higher_better else peer / needle


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    nraw, a, d = (load(p) for p in argv[1:])
    n = needle_metrics(nraw)
    a = a or {}
    d = d or {}
    reps = (nraw or {}).get("reps", "?")
    print(f"needle vs Asynq vs Dask distributed: 3 workers x 2 slots each, median of {reps} reps")
    print("ratio columns: > 1 means needle is better (throughput: needle/peer; "
          "latency and makespan/LB: peer/needle)")
    head = ["workload", "needle", "asynq", "dask", "needle/asynq", "needle/dask"]
    rows = [head]
    for key, label, hb in ROWS:
        nv, av, dv = n.get(key), a.get(key), d.get(key)
        rows.append([label, num(nv), num(av), num(dv),
                     num(ratio(nv, av, hb)), num(ratio(nv, dv, hb))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i])
                        for i, c in enumerate(r)))
    print()
    for name, rep in (("asynq", a), ("dask", d)):
        if rep.get("w3_tasks_by_worker"):
            by = ", ".join(f"{k}={v}" for k, v in sorted(rep["w3_tasks_by_worker"].items()))
            print(f"{name} W3 tasks by worker (last rep): {by}")
    for name, rep in (("asynq", a), ("dask", d)):
        if rep.get("setup"):
            print(f"{name} setup: {rep['setup']}")
    for w in (nraw or {}).get("workloads", []):
        for field in ("skipped", "error"):
            if w.get(field):
                print(f"needle {w['name']} {field}: {w[field]}")
        for r in w.get("reps", []):
            if r.get("problem_count"):
                print(f"needle {w['name']} rep {r['rep']}: {r['problem_count']} failed checks")
    for name, rep in (("asynq", a), ("dask", d)):
        for p in rep.get("problems", []):
            print(f"{name} problem: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
