"""Run a ``"python"``-factory backend (a mutant, or your own) through the two
detection layers and say what each one found.

* ``conform(factory, cases=None) -> Report``: the conformance vectors,
  replayed exactly as ``chaos conform --backend sqlite`` does (a real
  ``chaos.host`` process per case, real barrier / reply loss / restart, the
  fsync EIO shim for the commit fault) but with the host serving
  ``{"backend": "python", "factory": ...}``. (``chaos conform`` has no adapter
  for python-factory backends; ``PythonSqliteAdapter`` is that adapter for
  factories built over the SQLite store.)
* ``chaos(factory, recipe, seed, store) -> RunOutcome``: one real ``chaos
  run`` (subprocess, worker processes, real faults) through
  ``chaos.commands.test_all.run_one``; a recipe names the scenario that
  forces the situation the bug needs.
* ``detected_by(outcome)``: the checkers that said ``invalid``, and their
  anomaly types and explanations.

``RECIPES`` maps a recipe name to its ``chaos run`` flags; ``CHEAPEST``
maps each mutant to the cheapest reliable layer (what the test suite runs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from chaos.commands.test_all import RunOutcome, RunRequest, run_one
from chaos.conform.adapters.sqlite import SqliteAdapter
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


class PythonSqliteAdapter(SqliteAdapter):
    """The SQLite conformance adapter (provisioning, seeding, bypass, floor
    trigger, fsync shim, export) with the host serving a python factory."""

    def __init__(self, factory: str, options: dict | None = None):
        super().__init__(options)
        self.factory = factory
        self.backend = f"python:{factory}"

    def spec(self) -> dict:
        return {**super().spec(), "backend": "python", "factory": self.factory}


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
    """The ``chaos run`` flags that force one situation."""

    scenario: str | None
    nemesis: tuple
    workers: int = 4
    time_limit: float = 8.0
    seed: int = 1
    extra: tuple = field(default_factory=tuple)


RECIPES: dict[str, Recipe] = {
    "paused-writer": Recipe("paused-writer", ("pause",)),
    "clock-regression": Recipe("clock-regression", ("clock",)),
    "restart-aba": Recipe("restart-aba", ("restart", "kill")),
    "response-loss": Recipe("response-loss", ("lost-reply",)),
    "plain": Recipe(None, ()),
}

#: mutant -> (layer, conformance cases or chaos recipe): the cheapest reliable detection
CHEAPEST: dict[str, tuple[str, object]] = {
    "no-fence-epoch": ("chaos", "paused-writer"),
    "expiry-by-worker-clock": ("chaos", "clock-regression"),
    "floor-not-persisted-on-reject": ("conform", ["backward-clock-rejection-restart"]),
    "epoch-reuse-after-restart": ("chaos", "restart-aba"),
    "non-idempotent-publish": ("conform", ["publication-response-loss"]),
    "lying-unchanged": ("chaos", "plain"),
    "read-persists-floor": ("conform", None),
    "advisory-claims-fenced": ("chaos", "paused-writer"),
}


def chaos(factory: str | None, recipe: Recipe, store: str, seed: int | None = None,
          time_limit: float | None = None, name: str | None = None) -> RunOutcome:
    """One real ``chaos run`` of ``factory`` (``None``: the correct sqlite backend)."""
    extra = list(recipe.extra)
    if recipe.scenario:
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
