"""Deterministic mode beside the timed mode: the same ``chaos run`` (backend, seed, workers,
time limit, nemeses) once each way, in this one benchmark run on this machine; prints ops per wall
second of each and their ratio, and the load average (the controlled processes of the
deterministic mode share one core by construction: one runs at a time).

    .venv/bin/python benchmarks/deterministic_vs_timed.py [--backend sqlite] [--workers 4]
        [--time-limit 5] [--seed 1] [--nemesis kill,fsync]

Ops are client completions (``results.json`` stats.ops); wall time is the whole ``chaos run``
process (setup, workload, final phase, checkers), measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one(store: str, deterministic: bool, args) -> tuple[int, float, str]:
    cmd = [sys.executable, "-m", "chaos.cli", "run", "--backend", args.backend, "--seed", str(args.seed),
           "--workers", str(args.workers), "--time-limit", str(args.time_limit), "--nemesis", args.nemesis,
           "--store", store, "--no-report"] + (["--deterministic"] if deterministic else [])
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    found = sorted(Path(store).glob("*/2*/results.json"))
    if not found:
        raise SystemExit(f"no results ({'deterministic' if deterministic else 'timed'}): {res.stderr[-1500:]}")
    results = json.loads(found[-1].read_text())
    return results["stats"]["ops"], wall, results["verdict"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="sqlite")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nemesis", default="kill,fsync")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="det-bench-") as d:
        rows = []
        for deterministic in (False, True):
            ops, wall, verdict = one(os.path.join(d, "det" if deterministic else "timed"), deterministic, args)
            rows.append((("deterministic" if deterministic else "timed"), ops, wall, verdict))
    print(f"backend {args.backend}, {args.workers} workers, time limit {args.time_limit:g} s, seed {args.seed}, "
          f"nemesis {args.nemesis}; load average {os.getloadavg()[0]:.2f}")
    for mode, ops, wall, verdict in rows:
        print(f"  {mode:14s} {ops:6d} ops  {wall:7.1f} s wall  {ops / wall:8.1f} ops/s  ({verdict})")
    ratio = (rows[1][1] / rows[1][2]) / (rows[0][1] / rows[0][2]) if rows[0][1] else float("nan")
    print(f"  deterministic / timed ops/s: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
