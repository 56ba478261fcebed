"""The correct backends under the DEFAULT ``chaos run`` (no scenario, every
nemesis the backend supports here, 10 workers, every client behaviour of the
claims workload on), many seeds: every verdict must be ``valid``. Prints one
line per run (verdict, ops, acknowledged publications, requested workload
paths that never completed, checkers that were not valid) and a summary.

    .venv/bin/python benchmarks/default_soak.py --backend sqlite --seeds 1-20
        [--time-limit 30] [--store DIR] [--keep]

Exit 1 when any run was not valid (a false alarm, or a run that proved
nothing); its run directory is kept and printed.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from chaos.commands.test_all import RunRequest, run_one, seeds_of  # noqa: E402
from chaos.nemesis import supported  # noqa: E402


def acknowledged_publications(results: dict) -> int:
    return int(((results.get("workload_coverage") or {}).get("publish ok") or {}).get("completed", 0))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres", "gitjournal"))
    ap.add_argument("--seeds", default="1-20")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--store", default=None)
    ap.add_argument("--keep", action="store_true", help="keep every run directory, not only the bad ones")
    args = ap.parse_args(argv)
    store = args.store or tempfile.mkdtemp(prefix="chaos-default-soak-")
    nemesis = supported(args.backend)
    tally: collections.Counter = collections.Counter()
    pubs, walls = [], []
    started = time.monotonic()
    print(f"default chaos run, backend {args.backend}, nemesis {','.join(nemesis)}, {args.workers} workers, "
          f"{args.time_limit:g} s, seeds {args.seeds}", flush=True)
    for seed in seeds_of(args.seeds):
        req = RunRequest(backend=args.backend, nemesis=list(nemesis), seed=seed, time_limit=args.time_limit,
                         workers=args.workers, store=store, name=f"{args.backend}-{seed}")
        out = run_one(req)
        r = out.results
        verdict = r.get("verdict", f"crash (exit {out.exit_code})")
        tally[verdict] += 1
        pubs.append(acknowledged_publications(r))
        walls.append(out.wall_s)
        bad = {k: v.get("valid") for k, v in (r.get("checkers") or {}).items() if v.get("valid") is not True}
        notes = "; ".join(r.get("notes") or [])
        print(f"seed {seed:3d}  {verdict:8s} ops {r.get('stats', {}).get('ops', 0):5d}  publications {pubs[-1]:4d}  "
              f"wall {out.wall_s:5.1f}s  {bad or ''} {notes[:300]}", flush=True)
        if verdict == "valid" and not args.keep and out.run_dir:
            shutil.rmtree(out.run_dir, ignore_errors=True)
        elif out.run_dir:
            print(f"          kept {out.run_dir}", flush=True)
    n = sum(tally.values())
    print(f"summary: {dict(tally)} of {n} runs; acknowledged publications per run min {min(pubs)} "
          f"median {sorted(pubs)[len(pubs) // 2]} max {max(pubs)}; {time.monotonic() - started:.0f} s in all")
    return 0 if tally.get("valid", 0) == n else 1


if __name__ == "__main__":
    raise SystemExit(main())
