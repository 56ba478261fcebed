"""Pure functions ``history -> verdict`` (docs/architecture.md, "Checker results").

Public facade:

* ``default_checkers(include_linearizable=True) -> {name: check}``: the
  invariants of ``checkers.invariants`` plus ``"linearizable"`` when
  ``checkers.linearizable.check`` is available.
* ``run_checkers(history, ctx, checkers=None) -> {"valid", "checkers"}``.
* ``compose``, ``check_safe``, ``merge_valid`` (from ``checkers.compose``).
"""

from __future__ import annotations

from checkers.compose import check_safe, compose, merge_valid


def default_checkers(include_linearizable: bool = True) -> dict:
    """The standard checker map, in report order."""
    from checkers.invariants import INVARIANTS

    out = dict(INVARIANTS)
    if include_linearizable:
        try:
            from checkers import linearizable
        except ImportError:
            linearizable = None
        check = getattr(linearizable, "check", None)
        if callable(check):
            out = {"linearizable": check, **out}
    return out


#: run in the forked second process when ``jobs > 1`` (about half the checking time)
SECOND_PROCESS = ("linearizable", "epochs", "floors")


def run_checkers(history, ctx: dict | None = None, checkers: dict | None = None, jobs: int = 1) -> dict:
    """Run ``checkers`` (default: ``default_checkers()``) over ``history`` (a
    ``checkers.history.History`` or the records, read once here) and merge the
    verdicts.

    ``jobs=2`` forks once after the history is read: the child runs the
    checkers named in ``SECOND_PROCESS`` on the same (copy-on-write) history
    and sends back their results; the parent runs the rest. A child that dies
    leaves its checkers ``unknown`` with the reason. Only for single-threaded
    callers (``chaos check``): forking a threaded process is not safe.
    """
    import gc

    from checkers.history import History

    collecting = gc.isenabled()
    gc.disable()  # the history is millions of long-lived objects: collections would walk them again and again
    try:
        from checkers import known

        # the profile's acknowledged findings (checkers.known): shown as known, never hiding anything else
        return known.apply(_run(History.of(history), ctx, checkers, jobs), (ctx or {}).get("known_deviations"))
    finally:
        if collecting:
            gc.enable()


def _run(h, ctx: dict | None, checkers: dict | None, jobs: int) -> dict:
    checkers = checkers if checkers is not None else default_checkers()
    ctx = ctx or {}
    second = {n: c for n, c in checkers.items() if n in SECOND_PROCESS} if jobs > 1 else {}
    if not second or len(second) == len(checkers):
        return compose(checkers)(h, ctx)
    first = {n: c for n, c in checkers.items() if n not in second}
    from checkers.compose import forked

    import resource

    here = compose(first)
    results = forked(compose(second), h, ctx, here)
    merged = {n: results[n] for n in checkers}
    usage = dict(getattr(here, "usage", {}), forked=list(second),
                 parent_max_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return {"valid": merge_valid(r.get("valid") for r in merged.values()), "checkers": merged, "processes": usage}


__all__ = ["default_checkers", "run_checkers", "compose", "check_safe", "merge_valid"]
