"""Checker composition (Jepsen's ``checker/compose`` and ``check-safe``).

``compose({name: checker})`` returns one checker that runs them all and merges
their verdicts with priority invalid > unknown > valid. A checker that raises
does not take the others down: ``check_safe`` turns it into ``unknown`` with
the error text, because a crashed checker proved nothing either way.
"""

from __future__ import annotations

import gc
import os
import pickle
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


def forked(child: Checker, history, ctx: dict, parent: Checker) -> dict:
    """``child(history, ctx)`` in a forked process while ``parent(history, ctx)``
    runs here; both composed checkers' ``checkers`` maps, merged. The history
    is shared copy-on-write (``gc.freeze`` first, so the child's collector
    does not touch every page); the child's results come back pickled, its
    resource use in ``parent.usage``."""
    gc.freeze()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: check, send, and leave without running anything of the parent's
        os.close(r)
        try:
            data = pickle.dumps(child(history, ctx)["checkers"], protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as e:  # noqa: BLE001 - reported to the parent as the reason
            data = pickle.dumps(e.__class__.__name__ + ": " + str(e))
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    gc.unfreeze()
    mine = parent(history, ctx)["checkers"]
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status, usage = os.wait4(pid, 0)
    parent.usage = {"child_pid": pid, "child_max_rss_kb": usage.ru_maxrss,
                    "child_cpu_s": round(usage.ru_utime + usage.ru_stime, 3)}
    try:
        theirs = pickle.loads(data) if data else f"the checker process exited with status {status}"
    except Exception as e:  # noqa: BLE001 - a torn result is the child's failure, reported
        theirs = f"unreadable result from the checker process: {e}"
    if isinstance(theirs, str):
        names = getattr(child, "names", ())
        theirs = {n: {"valid": "unknown", "error": theirs, "anomalies": [], "stats": {}} for n in names}
    return {**mine, **theirs}
