"""The full detection matrix: every mutant (and the correct sqlite backend as
the control row) x every layer - the conformance vectors and a short ``chaos
run`` per scenario - printed as one table measured in this run.

    .venv/bin/python benchmarks/recipe_matrix.py [--seeds 1] [--time-limit 8]
        [--mutants a,b] [--recipes stale-writer,clock-regression,...] [--json out.json]
        [--extra NAME=module:function ...]   # your own backend / mutant as an extra row

A conformance cell lists the failing vector cases; a chaos cell is the
verdict and the checkers that said invalid (``-`` = valid). ``caught`` is
yes when at least one layer flagged the mutant. About 12 s per chaos cell on
an idle 2-core machine (45 cells with the defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from chaos.testing.mutants import MUTANTS  # noqa: E402
from chaos.testing.mutants_detect import RECIPES, chaos, conform, detected_by, failed_cases  # noqa: E402

CORRECT = ("sqlite (correct)", "backends.sqlite:open_backend")
DEFAULT_RECIPES = ("stale-writer", "paused-writer", "clock-regression", "restart-1worker", "restart-aba",
                   "response-loss", "plain")
#: checkers that flag (nearly) every safety bug as a consequence; shown, but
#: the "names" column uses the invariant-specific ones
GENERIC = {"linearizable", "capability_honesty"}


def chaos_cell(outcome) -> tuple[str, list[str]]:
    found = detected_by(outcome)
    if outcome.verdict == "invalid":
        specific = [k for k in found if k not in GENERIC] or list(found)
        return "INVALID " + ",".join(specific), sorted(found)
    if outcome.verdict == "unknown" and outcome.results:
        notes = "; ".join(outcome.results.get("notes") or []) or f"exit {outcome.exit_code}"
        return f"unknown ({notes[:60]})", []
    if outcome.verdict != "valid":   # the run itself failed: say how
        last = (outcome.output.strip().splitlines() or ["no output"])[-1]
        return f"NO RESULT (exit {outcome.exit_code}: {last[:80]})", []
    return "-", []


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1", help="comma-separated seeds (default 1)")
    p.add_argument("--time-limit", type=float, default=8.0)
    p.add_argument("--mutants", default=None, help="comma-separated names (default: all + the correct control)")
    p.add_argument("--recipes", default=",".join(DEFAULT_RECIPES))
    p.add_argument("--no-conform", action="store_true")
    p.add_argument("--extra", action="append", default=[], metavar="NAME=MODULE:FUNCTION",
                   help="an extra python-factory backend row (repeatable)")
    p.add_argument("--json", default=None, help="also write every cell as JSON here")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    recipes = [r for r in args.recipes.split(",") if r]
    rows = [(n, m.factory) for n, m in MUTANTS.items()] + [CORRECT]
    if args.mutants:
        wanted = set(args.mutants.split(","))
        rows = [r for r in rows if r[0] in wanted or (r is CORRECT and "sqlite" in wanted)]
    for extra in args.extra:
        name, sep, factory = extra.partition("=")
        if not sep or ":" not in factory:
            p.error(f"--extra {extra!r}: expected NAME=module:function")
        rows.append((name, factory))
    store = tempfile.mkdtemp(prefix="chaos-mutant-matrix-")
    cells: list[dict] = []
    started = time.monotonic()
    print(f"{'backend':<32} {'layer':<18} {'seed':>4} {'seconds':>7}  result", flush=True)
    try:
        for name, factory in rows:
            if not args.no_conform:
                t = time.monotonic()
                report = conform(factory)
                failed = failed_cases(report)
                cell = {"backend": name, "layer": "conform", "seed": None, "seconds": round(time.monotonic() - t, 1),
                        "result": f"FAIL {len(failed)}/{len(report.results)}: {','.join(failed)}" if failed
                        else f"pass {report.count('pass')}/{len(report.results)}", "flagged": bool(failed)}
                cells.append(cell)
                print(f"{name:<32} {'conform':<18} {'':>4} {cell['seconds']:>7}  {cell['result']}", flush=True)
            for recipe in recipes:
                for seed in seeds:
                    t = time.monotonic()
                    o = chaos(factory, RECIPES[recipe], store, seed=seed, time_limit=args.time_limit,
                              name=f"{name.split()[0]}-{recipe}")
                    text, found = chaos_cell(o)
                    cell = {"backend": name, "layer": recipe, "seed": seed, "seconds": round(time.monotonic() - t, 1),
                            "result": text, "verdict": o.verdict, "checkers": found, "flagged": o.verdict == "invalid",
                            "run_dir": o.run_dir}
                    cells.append(cell)
                    print(f"{name:<32} {recipe:<18} {seed:>4} {cell['seconds']:>7}  {text}", flush=True)
                    if o.verdict == "invalid" and name == CORRECT[0]:
                        print(f"    FALSE ALARM? kept: {o.run_dir}", flush=True)
                    elif o.run_dir and name != CORRECT[0]:
                        shutil.rmtree(o.run_dir, ignore_errors=True)
        print("\nsummary (caught = flagged by at least one layer):")
        for name, _ in rows:
            mine = [c for c in cells if c["backend"] == name]
            layers = sorted({c["layer"] for c in mine if c["flagged"]})
            print(f"  {name:<32} caught={'yes' if layers else 'NO '}  by: {', '.join(layers) or '-'}")
        print(f"\n{len(cells)} cells in {time.monotonic() - started:.0f} s; store {store}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(cells, f, indent=1)
    finally:
        correct_dirs = [c.get("run_dir") for c in cells if c["backend"] == CORRECT[0] and c.get("flagged")]
        if not any(correct_dirs):
            shutil.rmtree(store, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
