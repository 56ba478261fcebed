"""Deterministic mode beside the timed mode: the same ``chaos run`` (backend, seed, workers,
time limit, nemeses) once each way per seed, in this one benchmark run on this machine; prints ops
per wall second of each run, of each mode over all seeds, their ratio, and the load average (the
controlled processes of the deterministic mode run one at a time, but for a Node program's start, which
flies beside them: docs/deterministic.md, "Flights").

    .venv/bin/python benchmarks/deterministic_vs_timed.py [--backend sqlite|gitjournal|wowbagger|...]
        [--workers 4] [--time-limit 5] [--seeds 1] [--nemesis kill,fsync] [--wowbagger PATH]

The two modes of a seed run one after the other, the order alternating from seed to seed (timed
first for the first seed, deterministic first for the next, ...), so a load that rises or falls
during the benchmark weighs on both alike. Ops are client completions (``results.json``
stats.ops); wall time is the whole ``chaos run`` process (setup, the timed mode's calibration,
workload, final phase, checkers), measured here. ``wowbagger``: the real program through
``--backend external`` with its profile (``benchmarks/deterministic_soak.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.deterministic_soak import (WOWBAGGER, backend_args, exit_code,  # noqa: E402
                                           run_child, seeds_of, why_not_valid)

MODES = ("timed", "deterministic")


def one(store: str, deterministic: bool, seed: int, args) -> dict:
    cmd = [sys.executable, "-m", "chaos.cli", "run", *backend_args(args.backend, args.wowbagger), "--seed", str(seed),
           "--workers", str(args.workers), "--time-limit", str(args.time_limit), "--nemesis", args.nemesis,
           "--store", store, "--no-report", "--deterministic" if deterministic else "--timed"]
    t0 = time.monotonic()
    code, err = run_child(cmd)
    wall = time.monotonic() - t0
    found = sorted(Path(store).glob("*/2*/results.json"))
    if not found:
        raise SystemExit(f"no results ({MODES[deterministic]}, seed {seed}, exit {code}): {err[-1500:]}")
    results = json.loads(found[-1].read_text())
    return {"seed": seed, "mode": MODES[deterministic], "ops": results["stats"]["ops"], "wall": wall,
            "verdict": results["verdict"], "why": why_not_valid(results), "load": os.getloadavg()[0]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="sqlite")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument("--seeds", "--seed", default="1", help="a seed or a range, 1-3")
    p.add_argument("--nemesis", default="kill,fsync")
    p.add_argument("--wowbagger", type=Path, default=WOWBAGGER, help="the program's bin/wowbagger.js")
    args = p.parse_args()
    print(f"backend {args.backend}, {args.workers} workers, time limit {args.time_limit:g} s, seeds {args.seeds}, "
          f"nemesis {args.nemesis}; load average at start {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="det-bench-") as d:
        for n, seed in enumerate(seeds_of(args.seeds)):
            order = (False, True) if n % 2 == 0 else (True, False)
            for deterministic in order:
                row = one(os.path.join(d, f"{MODES[deterministic]}-{seed}"), deterministic, seed, args)
                rows.append(row)
                print(f"  seed {seed:3d} {row['mode']:14s} {row['ops']:6d} ops  {row['wall']:7.1f} s wall  "
                      f"{row['ops'] / row['wall']:8.2f} ops/s  ({row['verdict']}, load {row['load']:.1f})  {row['why']}", flush=True)
    rate = {}
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        ops, wall = sum(r["ops"] for r in mine), sum(r["wall"] for r in mine)
        rate[mode] = ops / wall if wall else float("nan")
        print(f"  {mode:14s} all seeds: {ops:6d} ops in {wall:7.1f} s wall = {rate[mode]:8.2f} ops/s")
    ratio = rate["deterministic"] / rate["timed"] if rate["timed"] else float("nan")
    print(f"  deterministic / timed ops/s: {ratio:.2f}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(exit_code(main))
