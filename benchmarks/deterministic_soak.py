"""Soak of the deterministic mode: one ``chaos run --deterministic`` per seed, one at a time; per
seed the verdict, ops, scheduling points, wall seconds and, per requested fault, how many of its
exact points came and took effect (a point that never came is ``missed``: the run is then
``unknown``). Prints one row per seed, the totals and the load average.

    .venv/bin/python benchmarks/deterministic_soak.py [--seeds 1-20] [--backend sqlite]
        [--workers 10] [--time-limit 2] [--nemesis kill,fsync,pause,lost-reply,power-loss]
        [--store DIR]   # keep the runs (default: a temporary directory, removed)

Exit 0 when every run is ``valid`` and no requested fault missed or failed to take effect, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def seeds_of(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def run_child(cmd: list[str]) -> tuple[int, str]:
    """One ``chaos run``: (exit code, stderr). Ctrl-C or SIGTERM (``interrupt_on_term``) here ends
    it as its own Ctrl-C does (its workers reaped), then goes on up."""
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = child.communicate()
    except BaseException:
        child.terminate()
        child.wait()
        raise
    return child.returncode, err


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def interrupt_on_term() -> None:
    signal.signal(signal.SIGTERM, _interrupt)


def one(store: Path, seed: int, args) -> dict:
    cmd = [sys.executable, "-m", "chaos.cli", "run", "--deterministic", "--backend", args.backend, "--seed", str(seed),
           "--workers", str(args.workers), "--time-limit", str(args.time_limit), "--nemesis", args.nemesis,
           "--store", str(store), "--no-report", *args.extra]
    t0 = time.monotonic()
    code, err = run_child(cmd)
    wall = time.monotonic() - t0
    found = sorted(store.glob("*/2*/results.json"))
    if not found:
        return {"seed": seed, "verdict": f"no results (exit {code}): {err.strip()[-300:]}",
                "wall": wall, "faults": {}, "missed": ["?"], "ops": 0, "points": 0}
    r = json.loads(found[-1].read_text())
    missed = [f["action"] for f in r["deterministic"]["faults"] if f.get("missed")]
    return {"seed": seed, "verdict": r["verdict"], "ops": r["stats"]["ops"], "points": r["deterministic"]["points"],
            "wall": wall, "faults": r["fault_coverage"], "missed": missed, "digest": r["history_sha256"][:12]}


def main() -> int:
    interrupt_on_term()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1-20")
    p.add_argument("--backend", default="sqlite")
    p.add_argument("--workers", type=int, default=10)
    p.add_argument("--time-limit", type=float, default=2.0)
    p.add_argument("--nemesis", default="kill,fsync,pause,lost-reply,power-loss")
    p.add_argument("--store", help="keep the runs here")
    p.add_argument("extra", nargs="*", help="more chaos run arguments (after --)")
    args = p.parse_args()
    base = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="det-soak-"))
    rows = []
    try:
        for seed in seeds_of(args.seeds):
            row = one(base / f"seed{seed}", seed, args)
            rows.append(row)
            faults = " ".join(f"{k} {v['took_effect']}/{v['fired']}" for k, v in row["faults"].items())
            print(f"seed {seed:3d}  {row['verdict']:8s} {row['ops']:6d} ops {row['points']:8d} points "
                  f"{row['wall']:6.1f} s  {faults}  missed: {','.join(row['missed']) or '-'}  "
                  f"{row.get('digest', '')}  load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        if not args.store:
            import shutil
            shutil.rmtree(base, ignore_errors=True)
    short = [r for r in rows if r["missed"] or any(v["took_effect"] < 2 for v in r["faults"].values())]
    bad = [r for r in rows if r["verdict"] != "valid"]
    print(f"{len(rows)} runs ({args.backend}, {args.workers} workers, {args.time_limit:g} s, {args.nemesis}): "
          f"{len(rows) - len(bad)} valid, {len(short)} with a fault missed or short of 2 taking effect; "
          f"{sum(r['ops'] for r in rows)} ops, {sum(r['wall'] for r in rows):.0f} s wall; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0 if not bad and not short else 1


if __name__ == "__main__":
    sys.exit(main())
