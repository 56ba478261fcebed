"""Soak of the deterministic mode: one ``chaos run --deterministic`` per seed and backend, one at a
time; per run the verdict, per requested fault how many of its exact points came (fired), took
effect and never came (missed: the run is then ``unknown``), ops, scheduling points, wall seconds,
and why a run that is not ``valid`` is not (its notes, or its checkers' unacknowledged anomalies).
Prints one table per backend, its totals and the load average.

    .venv/bin/python benchmarks/deterministic_soak.py [--backends sqlite,gitjournal,wowbagger]
        [--seeds 1-20] [--workers 10] [--time-limit 2] [--nemesis kill,fsync,pause,lost-reply,power-loss]
        [--default-run]   # chaos run's own workers, time limit and nemesis (10, 30 s, every fault the mode has)
        [--wowbagger PATH/bin/wowbagger.js] [--store DIR]   # keep the runs (default: a temporary dir, removed)
        [-- more chaos run arguments]

``wowbagger`` is ``--backend external`` with the real program (``node PATH``) and its profile
(``profiles/wowbagger-0.1.0-alpha.7.yaml``: its documented bugs are acknowledged as in the timed
mode). Exit 0 when every run is ``valid`` and no requested fault missed or took effect fewer than
twice (every exact fault draws two points), else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from chaos.errors import sigterm_as_ctrl_c  # noqa: E402

WOWBAGGER = REPO.parent / "shared" / "sut" / "wowbagger-0.1.0-alpha.7" / "bin" / "wowbagger.js"
WOWBAGGER_PROFILE = REPO / "profiles" / "wowbagger-0.1.0-alpha.7.yaml"
#: every exact fault draws this many points per run (``chaos.deterministic.plan.fault_rules``)
POINTS_PER_FAULT = 2


def seeds_of(text: str) -> list[int]:
    """"1-20", "7" or a comma list of both ("10,11,15-20")."""
    seeds = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += range(int(lo), int(hi or lo) + 1)
    return seeds


def run_child(cmd: list[str]) -> tuple[int, str]:
    """One ``chaos run``: (exit code, stderr). Ctrl-C or SIGTERM (``exit_code``) here ends
    it as its own Ctrl-C does (its workers reaped), then goes on up."""
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = child.communicate()
    except BaseException:
        child.terminate()
        child.wait()
        raise
    return child.returncode, err


def exit_code(main) -> int:
    """``main()``'s exit code, or 130 and one line when Ctrl-C or SIGTERM (taken as Ctrl-C:
    ``chaos.errors.sigterm_as_ctrl_c``) stopped it: the run in flight was ended and reaped by
    ``run_child``, the temp dirs removed by ``main``'s own cleanup."""
    try:
        with sigterm_as_ctrl_c():
            return main()
    except KeyboardInterrupt:
        print(f"{Path(sys.argv[0]).name}: interrupted", file=sys.stderr)
        return 130


def backend_args(backend: str, wowbagger: Path) -> list[str]:
    """The ``chaos run`` arguments that select ``backend`` (``wowbagger``: the real program, black box)."""
    if backend == "wowbagger":
        return ["--backend", "external", "--command", f"node {wowbagger}", "--profile", str(WOWBAGGER_PROFILE)]
    return ["--backend", backend]


def why_not_valid(results: dict) -> str:
    """What made a run other than ``valid``: the anomalies no profile acknowledged, else its notes."""
    if results["verdict"] == "valid":
        return ""
    found = sorted({a for c in results["checkers"].values() if c.get("valid") is False
                    for a in (c.get("stats") or {}).get("anomalies_by_type", {})})
    known = {k["anomaly"] for k in results.get("known_deviations") or [] if k.get("matched")}
    unacknowledged = [a for a in found if a not in known]
    if unacknowledged:
        return "anomalies: " + ", ".join(unacknowledged)
    return "; ".join(n[:120] for n in results.get("notes") or [] if not n.startswith("racer episodes left out"))


def settings(args) -> list[str]:
    """The run's settings: none with ``--default-run`` (the run picks its own, as a user's plain run does)."""
    if args.default_run:
        return []
    return ["--workers", str(args.workers), "--time-limit", str(args.time_limit), "--nemesis", args.nemesis]


def one(store: Path, seed: int, backend: str, args) -> dict:
    cmd = [sys.executable, "-m", "chaos.cli", "run", "--deterministic", *backend_args(backend, args.wowbagger),
           "--seed", str(seed), *settings(args), "--store", str(store), "--no-report", *args.extra]
    t0 = time.monotonic()
    code, err = run_child(cmd)
    wall = time.monotonic() - t0
    found = sorted(store.glob("*/2*/results.json"))
    if not found:
        store.mkdir(parents=True, exist_ok=True)
        (store / "chaos-run.stderr").write_text(err)   # the whole traceback, beside the run's kept trace
        why = f"no results (exit {code}, stderr in {store}/chaos-run.stderr): {err.strip()[-300:]}"
        return {"seed": seed, "verdict": "error", "why": why,
                "wall": wall, "faults": {}, "missed": ["?"], "ops": 0, "points": 0}
    r = json.loads(found[-1].read_text())
    missed = [f["action"] for f in r["deterministic"]["faults"] if f.get("missed")]
    return {"seed": seed, "verdict": r["verdict"], "ops": r["stats"]["ops"], "points": r["deterministic"]["points"],
            "wall": wall, "faults": r["fault_coverage"], "missed": missed, "digest": r["history_sha256"][:12],
            "why": why_not_valid(r), "run_dir": str(found[-1].parent)}


def row_text(row: dict) -> str:
    faults = " ".join(f"{k} {v['fired']}/{v['took_effect']}" for k, v in row["faults"].items())
    return (f"{row['seed']:4d}  {row['verdict']:8s} {faults:22s} {','.join(row['missed']) or '-':10s} "
            f"{row['ops']:5d} {row['points']:8d} {row['wall']:7.1f}  {os.getloadavg()[0]:5.1f}  {row['why']}")


def soak(backend: str, base: Path, args) -> list[dict]:
    settings_text = ("the default run (chaos run's own workers, time limit and nemesis)" if args.default_run
                     else f"{args.workers} workers, {args.time_limit:g} s, nemesis {args.nemesis}")
    print(f"== {backend}: {settings_text}", flush=True)
    print(f"{'seed':>4s}  {'verdict':8s} {'faults fired/took effect':22s} {'missed':10s} {'ops':>5s} "
          f"{'points':>8s} {'wall s':>7s}  {'load':>5s}  why not valid", flush=True)
    rows = []
    for seed in seeds_of(args.seeds):
        row = one(base / backend / f"seed{seed}", seed, backend, args)
        rows.append(row)
        print(row_text(row), flush=True)
    return rows


def short_of_faults(row: dict) -> bool:
    return bool(row["missed"]) or any(v["took_effect"] < POINTS_PER_FAULT for v in row["faults"].values())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1-20")
    p.add_argument("--backends", "--backend", default="sqlite",
                   help="comma-separated: sqlite, gitjournal, wowbagger, or any --backend chaos run takes")
    p.add_argument("--workers", type=int, default=10)
    p.add_argument("--time-limit", type=float, default=2.0)
    p.add_argument("--nemesis", default="kill,fsync,pause,lost-reply,power-loss")
    p.add_argument("--default-run", action="store_true",
                   help="pass no --workers, --time-limit or --nemesis: each run is chaos run's default")
    p.add_argument("--wowbagger", type=Path, default=WOWBAGGER, help="the program's bin/wowbagger.js")
    p.add_argument("--store", help="keep the runs here")
    p.add_argument("extra", nargs="*", help="more chaos run arguments (after --)")
    args = p.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    if "wowbagger" in backends and not args.wowbagger.exists():
        print(f"deterministic_soak: {args.wowbagger}: no such file (--wowbagger)", file=sys.stderr)
        return 254
    base = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="det-soak-"))
    failed = False
    try:
        for backend in backends:
            rows = soak(backend, base, args)
            short = [r for r in rows if short_of_faults(r)]
            bad = [r for r in rows if r["verdict"] != "valid"]
            failed = failed or bool(short or bad)
            verdicts = {v: sum(1 for r in rows if r["verdict"] == v) for v in dict.fromkeys(r["verdict"] for r in rows)}
            print(f"{backend}: {len(rows)} runs: " + ", ".join(f"{n} {v}" for v, n in verdicts.items())
                  + f"; {len(short)} with a fault missed or short of {POINTS_PER_FAULT} taking effect; "
                  f"{sum(r['ops'] for r in rows)} ops, {sum(r['wall'] for r in rows):.0f} s wall; "
                  f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    finally:
        if not args.store:
            shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(exit_code(main))
