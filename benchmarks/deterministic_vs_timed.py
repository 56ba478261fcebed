"""Deterministic mode beside the timed mode: the same ``chaos run`` (backend, seed, workers,
time limit, nemeses) once each way per seed, in this one benchmark run on this machine; prints ops
per wall second of each run, of each mode over all seeds, their ratio, and the load average (the
controlled processes of the deterministic mode run one at a time, but for a Node program's start, which
flies beside them: docs/deterministic.md, "Flights").

    .venv/bin/python benchmarks/deterministic_vs_timed.py [--backend sqlite|gitjournal|wowbagger|...]
        [--workload claims|issue-lock] [--workers 4] [--time-limit 5] [--seeds 1] [--nemesis kill,fsync]
        [--wowbagger PATH] [--command CMD --profile PROFILE]

``--workers 2,4,10``: each worker count in turn, its seeds as above, then one line per count (the ratio
by worker count, in the same benchmark run: where the timed mode is bound by its waits, and where by the
machine's cores; docs/deterministic-speed.md, "By worker count").

The two modes of a seed run one after the other, the order alternating from seed to seed (timed
first for the first seed, deterministic first for the next, ...), so a load that rises or falls
during the benchmark weighs on both alike. Ops are client completions (``results.json``
stats.ops); wall time is the whole ``chaos run`` process (setup, the timed mode's calibration,
workload, final phase, checkers), measured here. CPU is that process's and every process it started
and reaped (user + system), per op and as cores used (CPU s / wall s): where both modes use about
the same CPU per op, the machine's cores, not the timed mode's waits, bound them both.
``wowbagger``: the real program through ``--backend external`` with its profile
(``benchmarks/deterministic_soak.py``); ``--command`` and ``--profile``: any other black-box program, as
``chaos run --backend external`` takes it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.deterministic_soak import (WOWBAGGER, backend_args, exit_code,  # noqa: E402
                                           run_child, seeds_of, why_not_valid)

MODES = ("timed", "deterministic")


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children and theirs: a ``chaos run``
    and every process it started and reaped (its workers, a black box's per-call programs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def one(store: str, deterministic: bool, seed: int, workers: int, args) -> dict:
    target = (["--backend", "external", "--command", args.command, "--profile", str(args.profile)] if args.command
              else backend_args(args.backend, args.wowbagger))
    cmd = [sys.executable, "-m", "chaos.cli", "run", *target, "--seed", str(seed),
           "--workload", args.workload, "--workers", str(workers), "--time-limit", str(args.time_limit),
           "--nemesis", args.nemesis, "--store", store, "--no-report", "--deterministic" if deterministic else "--timed"]
    t0, cpu0 = time.monotonic(), _children_cpu()
    code, err = run_child(cmd)
    wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
    found = sorted(Path(store).glob("*/2*/results.json"))
    if not found:
        raise SystemExit(f"no results ({MODES[deterministic]}, seed {seed}, exit {code}): {err[-1500:]}")
    results = json.loads(found[-1].read_text())
    return {"seed": seed, "mode": MODES[deterministic], "ops": results["stats"]["ops"], "wall": wall, "cpu": cpu,
            "verdict": results["verdict"], "why": why_not_valid(results), "load": os.getloadavg()[0]}


def _shape(d: str, workers: int, args) -> tuple[float, dict]:
    """Every seed of one worker count, both modes, printed; (deterministic / timed ops/s, cores per mode)."""
    rows = []
    for n, seed in enumerate(seeds_of(args.seeds)):
        order = (False, True) if n % 2 == 0 else (True, False)
        for deterministic in order:
            row = one(os.path.join(d, f"{MODES[deterministic]}-{workers}-{seed}"), deterministic, seed, workers, args)
            rows.append(row)
            print(f"  seed {seed:3d} {row['mode']:14s} {row['ops']:6d} ops  {row['wall']:7.1f} s wall  "
                  f"{row['ops'] / row['wall']:8.2f} ops/s  {1000 * row['cpu'] / max(row['ops'], 1):6.0f} CPU ms/op  "
                  f"({row['verdict']}, load {row['load']:.1f})  {row['why']}", flush=True)
    rate, cores = {}, {}
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        ops, wall, cpu = (sum(r[k] for r in mine) for k in ("ops", "wall", "cpu"))
        rate[mode] = ops / wall if wall else float("nan")
        cores[mode] = cpu / wall if wall else 0.0
        print(f"  {mode:14s} all seeds: {ops:6d} ops in {wall:7.1f} s wall = {rate[mode]:8.2f} ops/s; "
              f"{cpu:7.1f} CPU s = {1000 * cpu / max(ops, 1):5.0f} ms/op, {cores[mode]:4.2f} cores")
    ratio = rate["deterministic"] / rate["timed"] if rate["timed"] else float("nan")
    print(f"  deterministic / timed ops/s: {ratio:.2f}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
          flush=True)
    return ratio, cores


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="sqlite")
    p.add_argument("--workload", default="claims", help="claims or issue-lock")
    p.add_argument("--workers", default="4", help="a worker count, or several: 2,4,10")
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument("--seeds", "--seed", default="1", help="a seed or a range, 1-3")
    p.add_argument("--nemesis", default="kill,fsync")
    p.add_argument("--wowbagger", type=Path, default=WOWBAGGER, help="the program's bin/wowbagger.js")
    p.add_argument("--command", help="a black-box program (with --profile), instead of --backend")
    p.add_argument("--profile", type=Path, help="the --command program's profile")
    args = p.parse_args()
    if bool(args.command) != bool(args.profile):
        p.error("--command and --profile go together")
    try:
        counts = [int(w) for w in args.workers.split(",")]
    except ValueError:
        p.error(f"--workers {args.workers}: a count or a comma list of counts")
    if not counts or min(counts) < 1:
        p.error(f"--workers {args.workers}: counts of at least 1")
    print(f"{args.workload} on {args.command or args.backend}, {args.workers} workers, time limit {args.time_limit:g} s, "
          f"seeds {args.seeds}, nemesis {args.nemesis}; load average at start {os.getloadavg()[0]:.2f}", flush=True)
    shapes = []
    with tempfile.TemporaryDirectory(prefix="det-bench-") as d:
        for workers in counts:
            if len(counts) > 1:
                print(f"{workers} workers", flush=True)
            shapes.append((workers, _shape(d, workers, args)))
    if len(counts) > 1:
        print("by worker count: deterministic / timed ops/s (cores used, deterministic against timed)")
        for workers, (ratio, cores) in shapes:
            print(f"  {workers:3d} workers  {ratio:5.2f}  ({cores['deterministic']:.2f} against {cores['timed']:.2f} cores)")
        print(f"  load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(exit_code(main))
