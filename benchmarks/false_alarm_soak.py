"""Never cry wolf: ``chaos run`` against the CORRECT sqlite backend, every
nemesis, many seeds; every verdict must be ``valid`` (or ``unknown`` with a
stated reason, counted separately). Any ``invalid`` is a false alarm or a
real backend bug: its run directory is kept and every anomaly is printed
(checker, type, history indices, explanation) for triage; ``unknown`` run
directories are kept too.

    .venv/bin/python benchmarks/false_alarm_soak.py [--seeds 1-20] [--time-limit 15]
        [--sets all,scenarios] [--workers 4] [--store DIR]

Fault sets: ``all`` = every nemesis the backend supports here at once;
``single`` = each nemesis alone; ``scenarios`` = the built-in scenarios
(paused-writer, clock-regression, restart-aba, response-loss), one per seed
in rotation. Exit 1 when any run was invalid or crashed.
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

from chaos.nemesis import supported  # noqa: E402
from chaos.commands.test_all import seeds_of  # noqa: E402
from chaos.testing.mutants_detect import RECIPES, Recipe, chaos, detected_by  # noqa: E402

SCENARIOS = ("paused-writer", "clock-regression", "restart-aba", "response-loss")


def plan(sets: list[str], seeds: list[int], workers: int) -> list[tuple[str, Recipe, int]]:
    every = tuple(supported("sqlite"))
    runs = []
    for i, seed in enumerate(seeds):
        if "all" in sets:
            runs.append(("all:" + "+".join(every), Recipe(None, every, workers=workers), seed))
        if "single" in sets:
            runs += [(n, Recipe(None, (n,), workers=workers), seed) for n in every]
        if "scenarios" in sets:
            name = SCENARIOS[i % len(SCENARIOS)]
            runs.append((name, RECIPES[name], seed))
    return runs


def classify(outcome) -> str:
    if outcome.verdict in ("valid", "invalid"):
        return outcome.verdict
    if outcome.verdict == "unknown":
        return "unknown"
    return "crashed"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1-20")
    p.add_argument("--time-limit", type=float, default=15.0)
    p.add_argument("--sets", default="all,scenarios", help="comma-separated: all, single, scenarios")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--store", default=None, help="keep run dirs here (default: a temp dir, invalid runs kept)")
    args = p.parse_args()
    runs = plan(args.sets.split(","), seeds_of(args.seeds), args.workers)
    store = args.store or tempfile.mkdtemp(prefix="chaos-soak-")
    counts: collections.Counter = collections.Counter()
    reasons: collections.Counter = collections.Counter()
    kept = []
    started = time.monotonic()
    print(f"{len(runs)} runs against the correct sqlite backend, {args.time_limit:g} s each; store {store}", flush=True)
    print(f"{'faults':<48} {'seed':>4} {'verdict':<8} {'ops':>5} {'s':>5}  note", flush=True)
    for label, recipe, seed in runs:
        t = time.monotonic()
        o = chaos(None, recipe, store, seed=seed, time_limit=args.time_limit, name=f"soak-{label.split(':')[0]}")
        verdict = classify(o)
        counts[verdict] += 1
        ops = (o.results.get("stats") or {}).get("ops", "-")
        note = ""
        if verdict == "unknown":
            why = list(o.results.get("notes") or [])
            for name, r in (o.results.get("checkers") or {}).items():
                if isinstance(r, dict) and r.get("valid") == "unknown":
                    why.append(f"checker {name}: {r.get('error') or '; '.join(map(str, r.get('unknown_reasons') or [])) or 'no reason'}")
            note = "; ".join(why) or "NO REASON STATED"
            reasons[why[0][:100] if why else "NO REASON STATED"] += 1
        elif verdict == "crashed":
            note = (o.output.strip().splitlines() or ["(no output)"])[-1]
        print(f"{label[:48]:<48} {seed:>4} {verdict:<8} {ops:>5} {time.monotonic() - t:>5.1f}  {note[:90]}", flush=True)
        if verdict == "unknown" and o.run_dir:
            kept.append(o.run_dir)   # kept: why did a fault not take effect?
        if verdict in ("invalid", "crashed"):
            kept.append(o.run_dir)
            for name, anomalies in detected_by(o).items():
                for a in anomalies[:3]:
                    print(f"    [{name}] {a.get('type')} ops={a.get('ops')}: {a.get('explanation')}", flush=True)
        elif o.run_dir and not args.store:
            shutil.rmtree(o.run_dir, ignore_errors=True)
    print(f"\n{sum(counts.values())} runs in {time.monotonic() - started:.0f} s: "
          + ", ".join(f"{counts[v]} {v}" for v in ("valid", "unknown", "invalid", "crashed")))
    for why, n in reasons.most_common():
        print(f"  unknown x{n}: {why}")
    if kept:
        print("kept for triage: " + " ".join(d or "(no run dir)" for d in kept))
    if not kept and not args.store:
        shutil.rmtree(store, ignore_errors=True)
    return 1 if counts["invalid"] or counts["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
