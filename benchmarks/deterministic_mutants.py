"""The planted concurrency bugs in the deterministic mode: per mutant (a Python class of
``chaos.testing.mutants``), seeds 1, 2, ... of one short ``chaos run --deterministic`` until one is
``invalid`` (at most ``--seeds``), then that seed again ``--reruns`` times: it must be ``invalid``
with the same history digest every time. Prints one row per mutant (the first finding seed, whether
an anomaly the bug's own rule names was among the findings, the re-runs' digests) and the load
average, then the same rows as a markdown table.

    .venv/bin/python benchmarks/deterministic_mutants.py [--seeds 20] [--reruns 2] [--workers 4]
        [--time-limit 2] [--nemesis none] [--mutants split-acquire,early-takeover,...] [--correct]

``--correct``: instead, the correct SQLite class the mutants derive from (``backends.sqlite``), same
workload, seeds 1 to ``--seeds``: every run must end ``valid`` (no false alarm).

Default mutants: ``CONCURRENCY`` (the check-then-act class of ``chaos.testing.cta_mutants`` and
the bugs that need two owners or a rival between a check and its commit). Exit 0 when each was
found and every re-run reproduced it.
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

from benchmarks.deterministic_soak import exit_code, run_child  # noqa: E402
from chaos.testing.cta_mutants import CHECK_THEN_ACT  # noqa: E402

#: the planted bugs that need concurrency (a rival between a check and its write, or two owners)
CONCURRENCY = ("early-takeover", "fence-outside-commit", *(row[0] for row in CHECK_THEN_ACT))
#: the correct class the check-then-act mutants derive from
CORRECT = "backends.sqlite:open_backend"


def run_once(store: Path, mutant: str, seed: int, args) -> dict:
    from chaos.testing.mutants import RED_TEAM

    factory = CORRECT if mutant == "correct" else RED_TEAM[mutant].factory
    cmd = [sys.executable, "-m", "chaos.cli", "run", "--deterministic", "--backend", "python", "--factory",
           factory, "--seed", str(seed), "--workers", str(args.workers), "--time-limit",
           str(args.time_limit), "--nemesis", args.nemesis, "--store", str(store), "--no-report", *args.extra]
    code, err = run_child(cmd)
    found = sorted(store.glob("*/2*/results.json"))
    if not found:
        return {"verdict": f"no results (exit {code}): {err.strip()[-200:]}", "digest": None, "names": []}
    r = json.loads(found[-1].read_text())
    names = sorted({a.get("type") for c in r["checkers"].values() if isinstance(c, dict) and c.get("valid") is False
                    for a in c.get("anomalies", []) if a.get("type")})
    return {"verdict": r["verdict"], "digest": r["history_sha256"], "names": names}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--reruns", type=int, default=2)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--time-limit", type=float, default=2.0)
    p.add_argument("--nemesis", default="none")
    p.add_argument("--mutants", default=",".join(CONCURRENCY))
    p.add_argument("--correct", action="store_true", help=f"run {CORRECT} instead: every seed must be valid")
    p.add_argument("extra", nargs="*", help="more chaos run arguments (after --), e.g. -- --pct-depth 20")
    args = p.parse_args()
    from chaos.testing.mutants import RED_TEAM

    if args.correct:
        return correct(args)
    ok, table = True, []
    print(f"{args.workers} workers, time limit {args.time_limit:g} s, nemesis {args.nemesis}, seeds 1-{args.seeds}, "
          f"{args.reruns} re-run(s) of the finding seed {' '.join(args.extra)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="det-mutants-") as d:
        for mutant in args.mutants.split(","):
            t0 = time.monotonic()
            first, seed = None, 0
            for seed in range(1, args.seeds + 1):
                first = run_once(Path(d) / f"{mutant}-{seed}", mutant, seed, args)
                if first["verdict"] == "invalid":
                    break
            if first is None or first["verdict"] != "invalid":
                ok = False
                print(f"  {mutant:32s} NOT found in seeds 1-{args.seeds}  ({time.monotonic() - t0:.0f} s, last: "
                      f"{first and first['verdict']})", flush=True)
                table.append(f"| `{mutant}` | none in 1-{args.seeds} | - | - |")
                continue
            again = [run_once(Path(d) / f"{mutant}-{seed}-again{i}", mutant, seed, args) for i in range(args.reruns)]
            same = all(a["verdict"] == "invalid" and a["digest"] == first["digest"] for a in again)
            ok &= same
            own = sorted(set(first["names"]) & set(RED_TEAM[mutant].names))
            print(f"  {mutant:32s} found by seed {seed:2d}; re-run{'s' if args.reruns != 1 else ''} "
                  f"{'same history' if same else 'DIFFERENT'} ({first['digest'][:12]}); own rule "
                  f"{'named' if own else 'NOT named'}: {', '.join(first['names'][:5])}  "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
            table.append(f"| `{mutant}` | {seed} | {', '.join(own) or 'not its own: ' + ', '.join(first['names'][:3])}"
                         f" | {'same' if same else 'DIFFERENT'} ({args.reruns} re-runs) |")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("\n| mutant | first finding seed | its rule named | re-run history |\n|---|---|---|---|")
    print("\n".join(table))
    return 0 if ok else 1


def correct(args) -> int:
    """The correct class under every seed: a verdict other than ``valid`` is printed with its notes."""
    print(f"{CORRECT}: {args.workers} workers, time limit {args.time_limit:g} s, nemesis {args.nemesis}, "
          f"seeds 1-{args.seeds} {' '.join(args.extra)}", flush=True)
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="det-correct-") as d:
        for seed in range(1, args.seeds + 1):
            res = run_once(Path(d) / f"correct-{seed}", "correct", seed, args)
            verdicts.append(res["verdict"])
            if res["verdict"] != "valid":
                print(f"  seed {seed:2d}: {res['verdict']} {', '.join(res['names'])}", flush=True)
    print(f"  {verdicts.count('valid')} of {len(verdicts)} valid; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0 if verdicts.count("valid") == len(verdicts) else 1


if __name__ == "__main__":
    sys.exit(exit_code(main))
