"""How fast ``chaos explore`` searches: schedules (PCT seeds) and crash points explored per wall
minute, on this machine now, with the load average beside them (the controlled processes of one
run share one core by construction; runs are sequential here).

    .venv/bin/python benchmarks/explore_rate.py [--backend sqlite] [--factory MOD:FN] [--seeds 4]
        [--depth 3] [--max-points 2] [--kinds acquire,publish]

Schedules: ``--seeds`` seeds at ``--depth`` of the default exploration config (3 workers, 1
namespace x 2 items, 2 virtual s, kill). Crash points: one recording run, then ``--max-points``
kills per kind of ``--kinds``. Each figure counts its runs over the wall time of all of them
(recording and calibration runs included).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from chaos.explore import crashpoints
    from chaos.explore.seeds import DEFAULT_CONFIG, explore_one, tally

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="sqlite")
    p.add_argument("--factory", default=None)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--max-points", type=int, default=2)
    p.add_argument("--kinds", default="acquire,publish")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="explore-rate-", dir="/tmp") as store:
        config = dict(DEFAULT_CONFIG, backend=args.backend, factory=args.factory, store=store, name="b")
        t0 = time.monotonic()
        results = [explore_one(dict(config, seed=s, depth=args.depth, points=None)) for s in range(1, args.seeds + 1)]
        seeds_wall = time.monotonic() - t0
        t0 = time.monotonic()
        crash = crashpoints.explore(config, 1, args.max_points, tuple(args.kinds.split(",")), log=lambda _: None)
        crash_wall = time.monotonic() - t0
    points = sum(len(r["runs"]) for r in crash["rows"])
    verdicts = tally(results)[args.depth]["verdicts"]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; backend {args.backend}"
          f"{' ' + args.factory if args.factory else ''}")
    print(f"schedules:    {len(results)} in {seeds_wall:.1f} s = {60 * len(results) / seeds_wall:.1f} per minute "
          f"(depth {args.depth}; {verdicts})")
    print(f"crash points: {points} in {crash_wall:.1f} s = {60 * points / crash_wall:.1f} per minute "
          f"(+1 recording run; kinds {args.kinds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
