"""The red team under the DEFAULT ``chaos run``: every planted bug of
``chaos.testing.mutants.RED_TEAM`` (one MUST of contract §3-§8 each), both
as a Python class (``--backend python --factory ...``) and as an external
CLI driven in black-box mode (``--backend external --command 'python -m
chaos.cli backend python --factory ...'``), for each seed: the verdict, the
anomaly types that named the bug's rule, and the wall time.

    .venv/bin/python benchmarks/mutant_matrix.py --seeds 1-3
        [--bugs a,b | --bugs check-then-act] [--paths python,external] [--jobs 2] [--json out.json]
        [--control [sqlite,reference,postgres]]
                      # correct backends too, on the paths each has (must stay valid;
                      # bare --control: sqlite; --control X --bugs none: only those)

The external path starts one CLI process per operation, so what a run
exercises depends on what a call costs (``benchmarks/cli_call_cost.py``). The
suite's sources are compiled to bytecode once before the first run
(``compile_sources``): where ``PYTHONDONTWRITEBYTECODE`` is set, as on the
shared machine, no process would ever write its bytecode, and every call
would compile every module it imports afresh (about a third of its CPU).

"Default" means no scenario and no flags but the backend, the seed and the
time limit: every nemesis the backend supports here, the run's own worker
count (10; for a process-per-call program ``chaos.timing`` chooses fewer
agents plus two racer pairs, since more CPU-bound processes than the cores
can run only queue behind each other), ``WORKLOAD_S`` of workload (a slow
program's default run would grow it to 140 s, past the 90-s budget: 30 s for
the Python class, which starts every episode kind in that time, 45 s for the
CLI, whose racers reached 15-23 of the then 39 kinds in 30 s on a 2-core machine
whose CPU-second is dear, and all 39 in 45 s (40 kinds since the check-then-act
races, ``chaos.testing.cta_mutants``); where the machine slows
down mid-run, the run goes on past its limit until the racers have
exercised every kind, ``chaos.runner.rotation_ns``: a slow stretch costs the
cell time, not its coverage), every client behaviour of the claims workload
on. A cell passes when the run is
``invalid``, one of the bug's ``names`` is among the anomalies, and the run
took at most ``--budget`` seconds (default 90). Exit 1 when any cell fails.
Each line also shows the 1-minute load average when the cell ended and how
many of the racers' episode kinds the run started (``kinds``): figures from
a loaded machine are load figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from chaos.commands.test_all import RunRequest, run_one, seeds_of  # noqa: E402
from chaos.errors import UsageError  # noqa: E402
from chaos.nemesis import sut_options, supported  # noqa: E402,F401
from chaos.testing.cta_mutants import CHECK_THEN_ACT  # noqa: E402
from chaos.testing.mutants import RED_TEAM  # noqa: E402
from workloads.coverage import intent_episode  # noqa: E402
from workloads.races import EPISODES  # noqa: E402

PY = sys.executable
PACKAGES = ("backends", "chaos", "checkers", "workloads")
WORKLOAD_S = {"python": 30.0, "external": 45.0}
# the correct backends a control cell runs (they must stay valid), per path:
# (``chaos run --backend``, its options); postgres is a server the suite starts
CONTROLS = {
    "sqlite": {"python": ("python", {"factory": "backends.sqlite:open_backend"}),
               "external": ("external", {"command": f"{PY} -m chaos.cli backend sqlite"})},
    "reference": {"external": ("external", {"command": f"{PY} -m chaos.cli backend reference"})},
    "postgres": {"python": ("postgres", {})},
}
FLAGS = {"factory": "--factory", "command": "--command"}


def planted(path: str, factory: str) -> tuple[str, dict]:
    """The backend and options running a planted bug's factory on ``path``."""
    if path == "python":
        return "python", {"factory": factory}
    return "external", {"command": f"{PY} -m chaos.cli backend python --factory {factory}"}


def request(backend: str, opts: dict, path: str, seed: int, store: str, name: str) -> RunRequest:
    """The default ``chaos run`` of one backend on one path."""
    nemesis = supported(backend, {**opts, "backend": backend})
    extra = [arg for key, value in opts.items() for arg in (FLAGS[key], value)]
    return RunRequest(backend=backend, nemesis=list(nemesis), seed=seed, time_limit=WORKLOAD_S[path], workers=None,
                      store=store, name=name, extra_args=extra)


def compile_sources() -> None:
    """Write the bytecode of the suite's packages (``__pycache__``, as any
    import would without ``PYTHONDONTWRITEBYTECODE``), so a per-call CLI
    process loads it instead of compiling its sources; an error is raised,
    never skipped (a tree that does not compile is a broken checkout)."""
    import compileall

    for pkg in PACKAGES:
        if not compileall.compile_dir(os.path.join(ROOT, pkg), quiet=1):
            raise SystemExit(f"mutant_matrix: {pkg} does not compile")


def named_by(results: dict, names: tuple) -> tuple[list[str], list[str]]:
    """(anomaly types naming the rule, every invalid checker)."""
    types, bad = set(), []
    for checker, r in (results.get("checkers") or {}).items():
        if isinstance(r, dict) and r.get("valid") is False:
            bad.append(checker)
            types |= {a.get("type") for a in r.get("anomalies") or [] if isinstance(a, dict)}
    return sorted(t for t in types if t in names), sorted(bad)


def episodes_reached(run_dir: str | None, kinds: set) -> int | None:
    """How many of ``kinds`` the run started: a planted bug whose episode
    never ran cannot be caught by it (the diagnosis of a ``valid`` cell)."""
    path = os.path.join(run_dir or "", "history.jsonl")
    if not os.path.isfile(path):
        return None
    seen = set()
    with open(path) as f:
        for line in f:
            op = json.loads(line)
            intent = op.get("intent") if op.get("type") == "invoke" else None
            if intent:
                seen.add(intent_episode(intent))
    return len(seen & kinds)


def cell(bug: str | None, control: str | None, path: str, seed: int, store: str, budget: float) -> dict:
    """One default run: planted ``bug`` (must be invalid by its rule within
    ``budget``) or the correct backend ``control`` (must be valid)."""
    spec = RED_TEAM[bug] if bug else None
    backend, opts = planted(path, spec.factory) if spec else CONTROLS[control][path]
    kinds = set(EPISODES)
    name = f"{bug or 'control-' + control}-{path}-{seed}"
    # a store of its own per cell, no store/latest shared between runs side by
    # side (a cell of session 13 ended in 3 s, exit 255, no run directory)
    t = time.monotonic()
    out = run_one(request(backend, opts, path, seed, os.path.join(store, name), name))
    wall = time.monotonic() - t
    r = out.results
    verdict = r.get("verdict") or f"no result (exit {out.exit_code})"
    names, bad = named_by(r, spec.names if spec else ())
    if spec is None:
        ok = verdict == "valid"
    else:
        ok = verdict == "invalid" and bool(names) and wall <= budget
    return {"bug": bug or f"control (correct {control})", "rule": spec.rule if spec else "-",
            "section": spec.section if spec else "-", "path": path, "seed": seed, "verdict": verdict,
            "named_by": names, "invalid_checkers": bad, "seconds": round(wall, 1), "ok": ok,
            "notes": (r.get("notes") or [])[:2], "run_dir": out.run_dir,
            "episodes": episodes_reached(out.run_dir, kinds),
            "kinds": len(kinds), "load": round(os.getloadavg()[0], 1),
            "timing": {k: (r.get("timing") or {}).get(k) for k in ("scale", "workers", "time_limit")}}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2; the suite's usage code is 254
        raise UsageError(f"mutant_matrix: {message}")


def parse(argv) -> argparse.Namespace:
    ap = _Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--bugs", default=None, help="comma-separated planted bugs (default: all; none: only --control; "
                                                 "check-then-act: the split-* class)")
    ap.add_argument("--paths", default="python,external")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (each starts 10 workers)")
    ap.add_argument("--budget", type=float, default=90.0, help="seconds a detection may take")
    ap.add_argument("--control", nargs="?", const="sqlite", default=None,
                    help=f"also run correct backends, which must stay valid (comma-separated, of "
                         f"{', '.join(CONTROLS)}; default sqlite), each on the paths it has")
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", action="store_true", help="keep every run directory")
    return ap.parse_args(argv)


def plan_of(args: argparse.Namespace) -> list[tuple]:
    """The cells (bug, control, path, seed) to run: controls first, seed by
    seed (a matrix cut short has as many seeds of each); a name the matrix
    does not know is a usage error, before any run starts."""
    bugs = [] if args.bugs == "none" else [b for b in (args.bugs.split(",") if args.bugs else RED_TEAM) if b]
    bugs = [n for b in bugs for n in ([row[0] for row in CHECK_THEN_ACT] if b == "check-then-act" else [b])]
    unknown = [b for b in bugs if b not in RED_TEAM]
    if unknown:
        raise UsageError(f"mutant_matrix: unknown planted bugs: {', '.join(unknown)} "
                         f"(known: {', '.join(RED_TEAM)}, check-then-act, none)")
    controls = [c for c in (args.control or "").split(",") if c]
    if any(c not in CONTROLS for c in controls):
        raise UsageError(f"mutant_matrix: unknown control backends: {args.control} (known: {', '.join(CONTROLS)})")
    paths = [p for p in args.paths.split(",") if p]
    if not paths or any(p not in WORKLOAD_S for p in paths):
        raise UsageError(f"mutant_matrix: unknown paths: {args.paths} (known: {', '.join(WORKLOAD_S)})")
    try:
        seeds = seeds_of(args.seeds)
    except ValueError:
        raise UsageError(f"mutant_matrix: --seeds {args.seeds}: not seeds like 1-3,7") from None
    return ([(None, c, p, s) for s in seeds for c in controls for p in paths if p in CONTROLS[c]]
            + [(b, None, p, s) for b in bugs for p in paths for s in seeds])


def main(argv=None) -> int:
    try:
        args = parse(argv)
        plan = plan_of(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 254
    compile_sources()
    store = tempfile.mkdtemp(prefix="chaos-red-team-")
    started = time.monotonic()
    print(f"{'planted bug':<30} {'rule (section)':<44} {'path':<9} {'seed':>4} {'s':>5} {'load':>5} "
          f"{'kinds':>5}  verdict  named by", flush=True)
    cells = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(cell, b, c, p, s, store, args.budget) for b, c, p, s in plan]
        for f in futures:
            c = f.result()
            cells.append(c)
            rule = f"{c['rule']} ({c['section']})"
            mark = "" if c["ok"] else "   <- FAILS" + (f": {'; '.join(c['notes'])[:120]}" if c["notes"] else "")
            kinds = "-" if c["episodes"] is None else f"{c['episodes']}/{c['kinds']}"
            print(f"{c['bug']:<30} {rule:<44} {c['path']:<9} {c['seed']:>4} {c['seconds']:>5.0f} {c['load']:>5.1f} "
                  f"{kinds:>5}  "
                  f"{c['verdict']:<8} {','.join(c['named_by']) or '-'}{mark}", flush=True)
            if c["ok"] and not args.keep and c["run_dir"]:
                shutil.rmtree(c["run_dir"], ignore_errors=True)
    failed = [c for c in cells if not c["ok"]]
    caught = {c["bug"] for c in cells if c["ok"]}
    print(f"\n{len(cells) - len(failed)} of {len(cells)} cells pass; {len(failed)} fail "
          f"({time.monotonic() - started:.0f} s in all; slowest cell {max(c['seconds'] for c in cells):.0f} s); "
          f"run dirs of failing cells kept under {store}")
    for c in failed:
        print(f"  FAIL {c['bug']} {c['path']} seed {c['seed']}: {c['verdict']} "
              f"invalid={','.join(c['invalid_checkers']) or '-'} {c['seconds']} s {c['run_dir']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(cells, f, indent=1)
    if not failed and not args.keep:
        shutil.rmtree(store, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
