"""Our checker vs Porcupine (Go) on Porcupine's anchor histories, side by side.

Per file: the median of 3 timed checks (wall and CPU, single process; a trial
repeats the check until >= 20 ms have passed, as the Go figures were taken
with repeats), next to the Go figures of shared/anchors/porcupine/timings.tsv.
The partitioned kv rows are also compared with the README's single-core
(GOMAXPROCS=1) CPU figures, the fair comparison for a one-thread checker.
Parsing is not timed (as in Go). ``--no-symmetry`` runs Porcupine's plain
search order (no twin reduction) for an algorithm-for-algorithm comparison.

    .venv/bin/python benchmarks/porcupine_anchor.py [--no-symmetry] [--quiet]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time

from checkers.linearizable import check_operations
from checkers.linearizable.anchors import etcd_model, kv_model, kv_no_partition_model, parse_etcd_log, parse_kv_log

ANCHORS = os.environ.get("PORCUPINE_ANCHORS", "/work/shared/anchors/porcupine")
HEAVY = ["002", "007", "099", "057", "075"]
#: README Table 2: partitioned kv on one core (GOMAXPROCS=1), CPU ms median of 5
GO_ONE_CORE_CPU_MS = {"kv/c01-ok.txt": 0.207, "kv/c01-bad.txt": 0.110, "kv/c10-ok.txt": 1.37,
                      "kv/c10-bad.txt": 1.12, "kv/c50-ok.txt": 451.0, "kv/c50-bad.txt": 52.6}


def _time(fn) -> tuple[float, float, str]:
    """(wall ms, CPU ms, verdict): median of 3 trials, each repeated to >= 20 ms."""
    walls, cpus = [], []
    verdict = fn()  # warm-up, as the Go runs had
    for _ in range(3):
        reps, w0, c0 = 0, time.perf_counter(), time.process_time()
        while True:
            verdict = fn()
            reps += 1
            if time.perf_counter() - w0 >= 0.02:
                break
        walls.append((time.perf_counter() - w0) * 1e3 / reps)
        cpus.append((time.process_time() - c0) * 1e3 / reps)
    return statistics.median(walls), statistics.median(cpus), verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-symmetry", action="store_true", help="plain Porcupine search order")
    ap.add_argument("--quiet", action="store_true", help="only the family totals")
    args = ap.parse_args()
    with open(os.path.join(ANCHORS, "timings.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    sym = not args.no_symmetry
    fam: dict[str, list[float]] = {}
    mismatches = 0
    print(f"{'file':<22}{'model':<22}{'py wall':>10}{'py cpu':>10}{'go wall':>10}{'go cpu':>10}{'ratio':>8}  ok?")
    for r in rows:
        path = os.path.join(ANCHORS, "test_data", r["file"])
        if r["model"] == "etcd register":
            ops = parse_etcd_log(path)
            model = etcd_model
        else:
            ops = parse_kv_log(path)
            model = kv_model if r["model"] == "kv by key" else kv_no_partition_model(ops)
        wall, cpu, verdict = _time(lambda: check_operations(model, ops, symmetry=sym).result)
        good = (verdict == "ok") == (r["expected"] == "yes")
        mismatches += not good
        go_wall, go_cpu = float(r["wall_ms_median"]), float(r["cpu_ms_median"])
        keys = []
        if r["model"] == "etcd register":
            keys.append("etcd all 102")
            if any(r["file"].endswith(f"_{h}.log") for h in HEAVY):
                keys.append("etcd heavy 002/007/099/057/075")
        elif r["model"] == "kv by key":
            keys.append("kv partitioned (all 6)")
            if "c50" in r["file"]:
                keys.append("kv c50 partitioned")
        else:
            keys.append("kv no partition (c01,c10)")
        one_core = GO_ONE_CORE_CPU_MS.get(r["file"]) if r["model"] == "kv by key" else None
        for k in keys:
            acc = fam.setdefault(k, [0.0, 0.0, 0.0, 0.0, 0.0])
            acc[0] += wall; acc[1] += cpu; acc[2] += go_wall; acc[3] += go_cpu; acc[4] += one_core or go_cpu
        if not args.quiet:
            print(f"{r['file']:<22}{r['model'][:21]:<22}{wall:>10.3f}{cpu:>10.3f}{go_wall:>10.3f}{go_cpu:>10.3f}"
                  f"{cpu / go_cpu:>8.2f}  {'yes' if good else 'NO'}")
    print(f"\nsymmetry reduction: {'on' if sym else 'off (plain Porcupine order)'}; verdict mismatches: {mismatches}")
    print(f"{'family':<34}{'py wall ms':>11}{'py cpu ms':>11}{'go wall ms':>11}{'go cpu ms':>11}"
          f"{'cpu ratio':>10}{'vs go 1-core':>13}")
    for k, (w, c, gw, gc, g1) in fam.items():
        print(f"{k:<34}{w:>11.1f}{c:>11.1f}{gw:>11.1f}{gc:>11.1f}{c / gc:>10.2f}{c / g1:>13.2f}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
