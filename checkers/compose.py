"""Checker composition (Jepsen's ``checker/compose`` and ``check-safe``).

``compose({name: checker})`` returns one checker that runs them all and merges
their verdicts with priority invalid > unknown > valid. A checker that raises
does not take the others down: ``check_safe`` turns it into ``unknown`` with
the error text, because a crashed checker proved nothing either way.
"""

from __future__ import annotations

import time
import traceback
from typing import Callable, Mapping

Checker = Callable[[list, dict], dict]

_RANK = {True: 0, "unknown": 1, False: 2}


def merge_valid(verdicts) -> bool | str:
    """The worst verdict: ``False`` > ``"unknown"`` > ``True`` (empty -> ``True``).
    Anything that is not exactly ``True``/``False`` counts as ``"unknown"``."""
    worst: bool | str = True
    for v in verdicts:
        v = v if v is True or v is False else "unknown"
        if _RANK[v] > _RANK[worst]:
            worst = v
    return worst


def check_safe(checker: Checker, history: list, ctx: dict) -> dict:
    """Run ``checker``; if it raises, return ``{"valid": "unknown", "error": ...}``."""
    try:
        result = checker(history, ctx)
    except Exception as e:  # noqa: BLE001 - a checker crash is an unknown verdict, not a suite crash
        return {"valid": "unknown", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(),
                "anomalies": [], "stats": {}}
    if not isinstance(result, dict) or "valid" not in result:
        return {"valid": "unknown", "error": f"checker returned {type(result).__name__} without 'valid'",
                "anomalies": [], "stats": {}}
    return result


def compose(checkers: Mapping[str, Checker]) -> Checker:
    """One checker running every named checker safely; returns
    ``{"valid": merged, "checkers": {name: result}}`` (each result also gets
    ``stats.seconds`` and ``stats.cpu_seconds``)."""

    def composed(history: list, ctx: dict | None = None) -> dict:
        ctx = ctx or {}
        results: dict[str, dict] = {}
        for name, checker in checkers.items():
            t0, c0 = time.perf_counter(), time.process_time()
            r = check_safe(checker, history, ctx)
            stats = r.setdefault("stats", {})
            if isinstance(stats, dict):
                stats["seconds"] = round(time.perf_counter() - t0, 4)
                stats["cpu_seconds"] = round(time.process_time() - c0, 4)  # wall on a shared machine is others' too
            results[name] = r
        return {"valid": merge_valid(r.get("valid") for r in results.values()), "checkers": results}

    composed.names = tuple(checkers)
    return composed
