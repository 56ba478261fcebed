"""Run a ``"python"``-factory backend (a mutant, or your own) through the two
detection layers and say what each one found.

* ``conform(factory, cases=None) -> Report``: the conformance vectors,
  replayed exactly as ``chaos conform --backend sqlite`` does (a real
  ``chaos.host`` process per case, real barrier / reply loss / restart, the
  fsync EIO shim for the commit fault) but with the host serving
  ``{"backend": "python", "factory": ...}`` through
  ``chaos.conform.adapters.python.PythonSqliteAdapter`` (the adapter behind
  ``chaos conform --backend python --factory MOD:FN``, for factories built
  over the SQLite store).
* ``chaos(factory, recipe, seed, store) -> RunOutcome``: one real ``chaos
  run`` (subprocess, worker processes, real faults) through
  ``chaos.commands.test_all.run_one``; a recipe names the scenario that
  forces the situation the bug needs.
* ``detected_by(outcome)``: the checkers that said ``invalid``, and their
  anomaly types and explanations.

``RECIPES`` maps a recipe name to its ``chaos run`` flags. Which layer and
recipe catch which mutant is pinned in ``tests/test_mutants_detection.py``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from chaos.commands.test_all import RunOutcome, RunRequest, run_one
from chaos.conform.adapters.python import PythonSqliteAdapter  # noqa: F401  (re-exported: it lived here)
from chaos.conform.manifest import load_cases
from chaos.conform.runner import run_case
from chaos.conform.suite import Report

VECTORS = Path(__file__).resolve().parents[2].parent / "shared" / "vectors" / "work-claims"


def vectors_dir() -> Path:
    """``../shared/vectors/work-claims`` next to the checkout, else ``$CHAOS_VECTORS``."""
    if VECTORS.is_dir():
        return VECTORS
    return Path(os.environ.get("CHAOS_VECTORS", str(VECTORS)))


# --------------------------------------------------------------------------- conformance


def conform(factory: str, cases: list[str] | None = None, vectors: Path | None = None) -> Report:
    """Replay the vectors (all, or ``cases``) against ``factory``."""
    root = vectors or vectors_dir()
    report = Report(f"python:{factory}", str(root))
    for case in load_cases(root, cases):
        adapter = PythonSqliteAdapter(factory)
        try:
            report.results.append(run_case(case, adapter))
        finally:
            adapter.close()
    return report


def failed_cases(report: Report) -> list[str]:
    return [r.case for r in report.results if r.status == "fail"]


# --------------------------------------------------------------------------- chaos run


@dataclass(frozen=True)
class Recipe:
    """The ``chaos run`` flags that force one situation. ``scenario`` is a
    built-in scenario name, or a scenario mapping (written to the store as
    YAML, ``workloads.scenario`` format)."""

    scenario: str | dict | None
    nemesis: tuple
    workers: int = 4
    time_limit: float = 8.0
    seed: int = 1
    extra: tuple = field(default_factory=tuple)


#: A paused writer that resumes while the item is *held by someone else who has
#: not published yet*: the shipped scenario ``workloads/scenarios/stale-writer.yaml``
#: (2 items, 1.5 s lease, 0.8-1.2 s work, the writer parked 1.8-2.2 s). Only
#: then does a fence bug become a stale write (if the rival had published, the
#: revision check would refuse the stale candidate anyway).
STALE_WRITER = "stale-writer"

RECIPES: dict[str, Recipe] = {
    "stale-writer": Recipe(STALE_WRITER, ("pause",), workers=4, time_limit=10.0),
    "paused-writer": Recipe("paused-writer", ("pause",)),
    "clock-regression": Recipe("clock-regression", ("clock",)),
    "restart-aba": Recipe("restart-aba", ("restart", "kill")),
    # one worker: only a restart can drop process memory (no second process to disagree with)
    "restart-1worker": Recipe("restart-aba", ("restart",), workers=1),
    "response-loss": Recipe("response-loss", ("lost-reply",)),
    "plain": Recipe(None, ()),
    # the workload's careless-client knobs turned up: every publish is retried
    # blindly and every re-acquire under the same owner first tries its old
    # fence, so the situations exist in every run instead of by chance
    "careless-client": Recipe({"name": "careless-client",
                               "description": "every publish retried blindly; stale fences tried first",
                               "workers": 4, "time_limit": 8, "nemesis": [],
                               "claims": {"namespaces": 1, "items": 2, "blind_retry_rate": 1.0,
                                          "stale_fence_rate": 1.0}}, ()),
}


def chaos(factory: str | None, recipe: Recipe, store: str, seed: int | None = None,
          time_limit: float | None = None, name: str | None = None, report: bool = False) -> RunOutcome:
    """One real ``chaos run --timed`` of ``factory`` (``None``: the correct sqlite backend). Without
    report.html unless ``report``: a detection reads results.json, and the report's plots cost
    about 1.7 s of CPU per run (more than a whole short run on a loaded machine)."""
    # the recipes and their measured detections (docs/mutants.md) are the timed mode's; the deterministic
    # mode's own measure of the planted concurrency bugs is benchmarks/deterministic_mutants.py
    extra = list(recipe.extra) + ([] if "--deterministic" in recipe.extra else ["--timed"]) + ([] if report else ["--no-report"])
    if isinstance(recipe.scenario, dict):
        os.makedirs(store, exist_ok=True)
        path = os.path.join(store, f"scenario-{recipe.scenario['name']}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(recipe.scenario, f)
        extra += ["--scenario", path]
    elif recipe.scenario:
        extra += ["--scenario", recipe.scenario]
    req = RunRequest(backend="python" if factory else "sqlite", nemesis=list(recipe.nemesis),
                     seed=recipe.seed if seed is None else seed,
                     time_limit=recipe.time_limit if time_limit is None else time_limit,
                     workers=recipe.workers, store=store, factory=factory, extra_args=extra,
                     name=name or (factory.rpartition(":")[2] if factory else "sqlite"))
    return run_one(req)


def detected_by(outcome: RunOutcome) -> dict[str, list[dict]]:
    """checker name -> its anomalies, for every checker that said ``invalid``."""
    out = {}
    for name, r in (outcome.results.get("checkers") or {}).items():
        if isinstance(r, dict) and r.get("valid") is False:
            out[name] = list(r.get("anomalies") or [])
    return out
