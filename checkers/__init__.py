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


def run_checkers(history, ctx: dict | None = None, checkers: dict | None = None) -> dict:
    """Run ``checkers`` (default: ``default_checkers()``) over ``history`` (a
    ``checkers.history.History`` or the records, read once here) and merge the
    verdicts."""
    import gc

    from checkers.history import History

    collecting = gc.isenabled()
    gc.disable()  # the history is millions of long-lived objects: collections would walk them again and again
    try:
        from checkers import known

        checkers = checkers if checkers is not None else default_checkers()
        # the profile's acknowledged findings (checkers.known): shown as known, never hiding anything else
        return known.apply(compose(checkers)(History.of(history), ctx or {}), (ctx or {}).get("known_deviations"))
    finally:
        if collecting:
            gc.enable()


__all__ = ["default_checkers", "run_checkers", "compose", "check_safe", "merge_valid"]
